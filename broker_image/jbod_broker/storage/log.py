"""The log of one replica in one directory: Kafka's ``UnifiedLog``.

What a log means over its segments (:class:`~jbod_broker.storage.local_log.LocalLog`, the
files, reads and flushes): appending with offsets and leader epochs, the producers' state,
the high watermark and log start offset, truncation and retention, and taking over a move
source's state at the swap. Loading from disk is
:class:`~jbod_broker.storage.log_loader.LogLoader`'s, as in Kafka.

Thread-safe: this class is the lock boundary. Every mutation (append, roll, truncation,
retention, the move engine's swap) and every read holds ``lock``; segments below assume a
single caller. Reads hold the lock too, so a segment can never be closed under a reader; a read
is at most one ``pread`` of ``max_bytes`` per segment, so the lock is held briefly.

Every disk call runs inside the directory's failure guard: an ``OSError`` takes the whole
directory offline (KIP-112) and this log with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import weakref
from collections.abc import Callable, Sequence

from .checkpoints import format_epochs, format_partition_metadata
from .clock import wall_ms
from .diskio import LogDirFailureChannel, write_atomically
from .errors import (
    InconsistentTopicIdError,
    InvalidRecordError,
    InvalidRequestError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    ResourceShortageError,
    StorageError,
)
from .handles import FileHandles
from .leader_epoch import LeaderEpochCache
from .local_log import LocalLog, _follows_successor, _Retired
from .log_loader import LogLoader, rebuild_producer_state
from .log_types import (
    EMPTY_SLICE,
    AppendInfo,
    FileSlice,
    LogConfig,
    LogSnapshot,
    ReadResult,
    SliceResult,
)
from .names import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, TopicPartition
from .producer_state import (
    ProducerEntry,
    ProducerStateManager,
    check_group,
    delete_snapshot_file,
    list_snapshots,
)
from .records import LOG_OVERHEAD, BatchHeader, check_client_batches, validate_batches
from .segment import BatchMeta, LogSegment

__all__ = [
    "EMPTY_SLICE",
    "AppendInfo",
    "FileSlice",
    "Log",
    "LogConfig",
    "LogSnapshot",
    "ReadResult",
    "SliceResult",
]

_log = logging.getLogger(__name__)


_MAX_RELATIVE_OFFSET = 2**31 - 1
_OFFSET_EPOCH = struct.Struct(">qii")


def _persist_nothing(_data: bytes) -> None:
    """A leader-epoch cache's writer while its entries are only being computed."""


def _epoch_writer(log: Log) -> Callable[[bytes], None]:
    """The writer of ``log``'s leader-epoch cache, holding the log weakly.

    The log's bound method would make a cycle (log -> cache -> method -> log), the only one a
    log has: a cycle is freed only by the collector, and the broker puts its logs out of the
    collector's sight (``gc.freeze``: at start-up, and for the logs LeaderAndIsr creates,
    issue 36), so every deleted replica's log would stay in memory for good. Without it, a
    log is freed by reference counting once its replica is gone."""
    ref = weakref.ref(log)

    def write(data: bytes) -> None:
        lg = ref()
        if lg is not None:
            lg._persist_epochs(data)

    return write


class Log(LocalLog):
    """A replica's log (Kafka's ``UnifiedLog``) over its segments (:class:`LocalLog`)."""

    successor: Log | None

    def __init__(
        self,
        dir_path: str,
        tp: TopicPartition,
        config: LogConfig,
        channel: LogDirFailureChannel,
        *,
        log_dir: str,
        is_future: bool = False,
        handles: FileHandles | None = None,
    ) -> None:
        super().__init__(
            dir_path, tp, config, channel, log_dir=log_dir, is_future=is_future, handles=handles
        )
        self.epochs = LeaderEpochCache([], _epoch_writer(self))
        # Idempotent producers (issue 18): their epochs and last batches, with the
        # ``<offset>.snapshot`` files beside the segments (see producer_state).
        self.producers = ProducerStateManager(dir_path)
        self.topic_id: str | None = None
        """KIP-516: the topic id in ``partition.metadata``; ``None`` until one arrives."""

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        dir_path: str,
        tp: TopicPartition,
        config: LogConfig,
        channel: LogDirFailureChannel,
        *,
        log_dir: str,
        is_future: bool = False,
        start_offset: int = 0,
        handles: FileHandles | None = None,
        topic_id: str | None = None,
    ) -> Log:
        """Make the replica folder, its first segment and, given a topic id, its
        ``partition.metadata``. Refused for the process's shortage
        (:class:`ResourceShortageError`: open files, memory), it leaves nothing behind: a
        half-made folder would be loaded as a replica at the next start (issue 14)."""
        log = cls(
            dir_path, tp, config, channel, log_dir=log_dir, is_future=is_future, handles=handles
        )
        try:
            with log._guard("create log"):
                os.makedirs(dir_path, exist_ok=False)
                log._add_segment(start_offset)
                log.log_start_offset = log.recovery_point = log.high_watermark = start_offset
                if topic_id is not None:
                    log._write_topic_id(topic_id)
        except ResourceShortageError:
            log._undo_create(start_offset)
            raise
        return log

    def _undo_create(self, start_offset: int) -> None:
        """Remove what a refused :meth:`create` made. Unlinks and a rmdir need no descriptor,
        so this works in the very shortage that refused it; if it fails anyway the error is
        the directory's (its guard judges)."""
        self.close_quietly()
        try:
            with self.channel.guard(self.log_dir, f"remove refused log {self.tp}"):
                LogSegment.delete_files(self.dir_path, start_offset)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.dir_path, PARTITION_METADATA))
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(self.dir_path)
        except ResourceShortageError:
            _log.warning(
                "could not remove the folder of a refused log",
                extra={"event": "log_create_undo_failed", "path": self.dir_path},
            )

    @classmethod
    def load(
        cls,
        dir_path: str,
        tp: TopicPartition,
        config: LogConfig,
        channel: LogDirFailureChannel,
        *,
        log_dir: str,
        is_future: bool = False,
        handles: FileHandles | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        no_space_ok: bool = False,
    ) -> Log:
        """Open a log from disk (:class:`LogLoader`); without a clean shutdown, re-check what
        the flush didn't cover.

        Needs no new space for what the folder holds (KAFKA-13773): recovery only shortens
        files and rebuilds indexes in memory, and the leader-epoch file is rewritten only if
        there is room. With ``no_space_ok`` a full disk that stops it anyway raises
        :class:`InsufficientSpaceError` and leaves the directory online (start-up then drops a
        ``-future`` copy). A failed load closes every descriptor it opened.
        """
        log = cls(
            dir_path, tp, config, channel, log_dir=log_dir, is_future=is_future, handles=handles
        )
        try:
            with log._guard("load log", no_space_ok=no_space_ok):
                loader = LogLoader(
                    log,
                    log.producers,
                    install_epochs=log.install_epochs,
                    clean_shutdown=clean_shutdown,
                )
                log.topic_id = loader.load(
                    recovery_point=recovery_point,
                    log_start_offset=log_start_offset,
                    high_watermark=high_watermark,
                )
        except BaseException:
            log.close_quietly()
            raise
        return log

    def install_epochs(self, entries: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Make ``entries`` the leader-epoch cache, less those past the log's end (a cut tail)
        or before its start, without writing them (the caller decides); returns what was
        kept. At load and at a move's swap."""
        cache = LeaderEpochCache(list(entries), _persist_nothing)
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        self.epochs = LeaderEpochCache(cache.entries(), _epoch_writer(self))
        return self.epochs.entries()

    def _write_topic_id(self, topic_id: str) -> None:
        write_atomically(
            os.path.join(self.dir_path, PARTITION_METADATA), format_partition_metadata(topic_id)
        )
        self.topic_id = topic_id

    def assign_topic_id(self, topic_id: str) -> None:
        """KIP-516: check the request's topic id against the replica's, or record it the
        first time one arrives (Kafka's ``assignTopicId``). Another id than the one the
        replica has raises :class:`InconsistentTopicIdError` and changes nothing."""
        with self.lock:
            if self.topic_id == topic_id:
                return
            if self.topic_id is not None:
                raise InconsistentTopicIdError(
                    f"replica {self.tp} in {self.log_dir} has topic id {self.topic_id}, "
                    f"the request names {topic_id}: refused, nothing changed"
                )
            with self._guard("write partition.metadata"):
                self._write_topic_id(topic_id)

    # -- producer state (issue 18) -----------------------------------------------------------

    def _truncate_producers(self) -> None:
        """After a truncation: drop snapshots past the new end and rebuild the map as at start.
        With no producer known before, truncation cannot add one: only the files are cut
        (Kafka's shortcut, which spares followers a scan at every leader change)."""
        if not self.producers.producers:
            for off in list_snapshots(self.dir_path):
                if off > self.log_end_offset:
                    delete_snapshot_file(self.dir_path, off)
            self.producers.last_snapshot_offset = min(
                self.producers.last_snapshot_offset, self.log_end_offset
            )
            return
        rebuild_producer_state(self, self.producers)

    def _persist_epochs(self, data: bytes) -> None:
        with self._guard("write leader-epoch checkpoint"):
            write_atomically(os.path.join(self.dir_path, LEADER_EPOCH_CHECKPOINT), data)

    # -- appending ------------------------------------------------------------------------

    def _maybe_roll(self, incoming: int, last_offset: int, now: int) -> None:
        seg = self.segments[-1]  # the active segment, without the property's call (per append)
        if seg.size == 0:
            return
        if (
            seg.size + incoming > self.config.segment_bytes
            or now - seg.created_ms >= self.config.segment_ms
            or last_offset - seg.base_offset > _MAX_RELATIVE_OFFSET
        ):
            self._roll_locked(now)

    def _roll_locked(self, now: int) -> LogSegment:
        leo = self.log_end_offset
        old = self.active
        if old.size == 0:
            return old
        new = self._add_segment(leo)
        new.created_ms = now
        old.end_lease()  # sealed: read now and then, its handle may go when idle
        # Kafka's snapshot at the new segment's base: a start replays at most this segment.
        if not self.is_future:
            self.producers.remove_expired(now)
            self.producers.take_snapshot(leo, sync=False)
        return new

    @_follows_successor
    def roll(self) -> None:
        with self.lock, self._guard("roll"):
            self._roll_locked(wall_ms())

    def append_as_leader(
        self, data: bytes | bytearray | memoryview, leader_epoch: int
    ) -> AppendInfo:
        """Validate batches from a producer, give them offsets and our epoch, append them."""
        result = self.append_as_leader_group((data,), leader_epoch)[0]
        if isinstance(result, StorageError):
            raise result
        return result

    @_follows_successor
    def append_as_leader_group(
        self,
        requests: Sequence[bytes | bytearray | memoryview],
        leader_epoch: int,
        *,
        in_place: bool = False,
    ) -> list[AppendInfo | StorageError]:
        """Append the batches of several produce requests with one write (group commit).

        A write call costs about as much as copying 16 KiB into the page cache, so produce
        requests that queue for a partition share one. Each request is validated on its own:
        a bad one gets its error in its slot and changes nothing, the others are appended, in
        order, at consecutive offsets. Nothing is buffered: when this returns, every appended
        byte has been handed to the OS, exactly as with one write per request. A failed write
        fails the whole group (the directory goes offline).

        ``in_place``: the caller gives its bytearrays up, and a lone request's batches get their
        offsets and epoch in its own buffer instead of a copy (a 99 MiB body would otherwise be
        held twice, beyond what the request-memory pool reserved for it).
        """
        results: list[AppendInfo | StorageError | None] = []
        valid: list[tuple[int, list[BatchHeader]]] = []
        max_bytes = self.config.max_message_bytes
        idempotent = False
        for i, data in enumerate(requests):
            try:
                headers = validate_batches(data, max_batch_bytes=max_bytes)
                check_client_batches(headers)
            except StorageError as e:
                results.append(e)
                continue
            valid.append((i, headers))
            if not idempotent:
                # A loop, not any() over a generator: producer id -1 (what a non-idempotent
                # producer sends) then costs no generator per append.
                for h in headers:
                    if h.producer_id >= 0:
                        idempotent = True
                        break
            results.append(None)  # filled in under the lock
        if not valid:
            return [r for r in results if r is not None]
        if len(valid) == 1:
            lone = requests[valid[0][0]]
            buf = lone if in_place and isinstance(lone, bytearray) else bytearray(lone)
        elif len(valid) == len(requests):
            buf = bytearray().join(requests)
        else:
            buf = bytearray().join([requests[i] for i, _ in valid])
        metas: list[BatchMeta] = []
        total_records = 0
        # The hot path: the guard is written out inline (a context manager per append costs
        # as much as the CRC check).
        with self.lock:
            self._check_usable()
            try:
                offset = self.log_end_offset
                producers: dict[int, ProducerEntry] = {}
                if idempotent:
                    kept, producers, refused = check_group(
                        self.producers.entry,
                        valid,
                        offset,
                        where=str(self.tp),
                        log_start_offset=self.log_start_offset,
                    )
                    for i, err in refused.items():
                        results[i] = err
                    if not kept:
                        return [r for r in results if r is not None]
                    if len(kept) != len(valid):
                        # Rare (a retry or a refusal): write the others' untouched bytes.
                        valid = kept
                        buf = bytearray().join([requests[i] for i, _ in valid])
                if leader_epoch > self.epochs.latest_epoch:
                    self.epochs.assign(leader_epoch, offset)
                pos = 0
                log_start = self.log_start_offset
                pack_into = _OFFSET_EPOCH.pack_into
                add_meta = metas.append
                for i, headers in valid:
                    first = offset
                    start = pos
                    records = 0
                    for h in headers:
                        # baseOffset, batchLength (unchanged) and partitionLeaderEpoch in one
                        # call; none of them is covered by the CRC.
                        length = h.batch_length
                        pack_into(buf, pos, offset, length, leader_epoch)
                        offset += h.last_offset_delta + 1
                        add_meta((offset - 1, length + LOG_OVERHEAD, h.max_timestamp))
                        pos += length + LOG_OVERHEAD
                        records += h.records_count
                    total_records += records
                    results[i] = AppendInfo(
                        first, offset - 1, records, len(headers), pos - start, log_start
                    )
                self._append_locked(buf, metas, total_records)
                if producers:
                    self.producers.update(producers)
            except OSError as e:
                raise self._io_failed(e, "append") from e
        # Every slot is filled now (an error, or the append's info): the list is returned as
        # it is, without a copy that drops the Nones there are none of.
        assert None not in results and len(results) == len(requests)
        return results  # type: ignore[return-value]  # (typing.cast is a call, per append)

    @_follows_successor
    def append_as_follower(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches that already carry their offsets (replication, moves).

        The records are not walked: a leader checked them when it appended them (Kafka's
        follower path is the same); framing, header fields and CRCs are.
        """
        headers = validate_batches(
            data, max_batch_bytes=self.config.max_message_bytes, check_records=False
        )
        metas: list[BatchMeta] = []
        records = 0
        with self.lock, self._guard("append"):
            expect = self.log_end_offset
            if headers[0].base_offset < expect:
                raise InvalidRecordError(
                    f"{self.tp}: batch at offset {headers[0].base_offset} is below the log end "
                    f"offset {expect}; truncate first"
                )
            for h in headers:
                if h.base_offset < expect:
                    raise InvalidRecordError(
                        f"{self.tp}: offsets go backwards at {h.base_offset} (expected >= {expect})"
                    )
                expect = h.base_offset + h.last_offset_delta + 1
                metas.append((expect - 1, h.batch_length + LOG_OVERHEAD, h.max_timestamp))
                records += h.records_count
                if h.partition_leader_epoch >= 0:
                    self.epochs.assign(h.partition_leader_epoch, h.base_offset)
            self._append_locked(data, metas, records)
            for h in headers:
                # The leader's producer state, rebuilt here, so that a failover de-duplicates.
                if h.producer_id >= 0 and not h.is_control:
                    self.producers.apply_batch(
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.last_offset,
                        h.last_offset_delta,
                        h.max_timestamp,
                    )
            return AppendInfo(
                headers[0].base_offset,
                expect - 1,
                records,
                len(headers),
                len(data),
                self.log_start_offset,
            )

    def _append_locked(
        self, data: bytes | bytearray | memoryview, metas: list[BatchMeta], records: int
    ) -> None:
        now = wall_ms()
        self._maybe_roll(len(data), metas[-1][0], now)
        self.segments[-1].append(data, metas)  # the active segment (may be new after the roll)
        if self.config.flush_messages is not None:
            self._unflushed_records += records
            if self._unflushed_records >= self.config.flush_messages:
                self._flush_locked()

    # -- truncation, retention ------------------------------------------------------------

    @_follows_successor
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at ``offset`` and after; a follower does this on a new leader."""
        if offset < 0:
            raise InvalidRequestError(f"cannot truncate {self.tp} to negative offset {offset}")
        with self.lock, self._guard("truncate"):
            if offset >= self.log_end_offset:
                return False
            if offset < self.log_start_offset:
                self._truncate_fully_locked(offset)
                return True
            self._truncations += 1
            while len(self.segments) > 1 and self.active.base_offset >= offset:
                self._remove_segment(self.active)
            self.active.truncate_to(offset)
            leo = self.log_end_offset
            self.epochs.truncate_from_end(leo)
            self._truncate_producers()
            self.recovery_point = min(self.recovery_point, leo)
            self.high_watermark = min(self.high_watermark, leo)
            return True

    @_follows_successor
    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self.lock, self._guard("truncate"):
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        self._truncations += 1
        for seg in list(self.segments):
            self._remove_segment(seg)
        self._add_segment(offset)
        self.log_start_offset = self.recovery_point = self.high_watermark = offset
        self.epochs.clear()
        for off in list_snapshots(self.dir_path):
            delete_snapshot_file(self.dir_path, off)
        self.producers.clear()

    @_follows_successor
    def update_high_watermark(self, hw: int) -> int:
        with self.lock:
            if self.successor is not None:
                raise _Retired  # moved: the new log must get it (KAFKA-9263)
            self.high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)
            return self.high_watermark

    @_follows_successor
    def advance_high_watermark(self, replicas_end: int | None = None) -> bool:
        """A leader's high watermark rule: raise it to this log's end, or to ``replicas_end``
        (the smallest log end of the other ISR members) if that is lower; never lower it.
        Returns whether it moved.

        The log end is read here, under the lock of the log that holds the data, and not by
        the caller: a caller's log object may have been retired by a move's swap (KIP-113)
        while its append waited for the lock the swap held, the append then going on into the
        successor. Read from the retired log, the end lies below the records just appended,
        and a high watermark computed from it leaves them uncommitted until the next append:
        an acks=all producer waited for its whole timeout and got REQUEST_TIMED_OUT for
        records that were in the log, and a client that retried wrote them twice (issue 14
        item 2).
        """
        with self.lock:
            if self.successor is not None:
                raise _Retired
            end = self.log_end_offset
            new_hw = end if replicas_end is None else min(end, replicas_end)
            if new_hw <= self.high_watermark:
                return False
            self.high_watermark = new_hw
            return True

    @_follows_successor
    def advance_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: records below ``offset`` become invisible and deletable."""
        with self.lock, self._guard("delete records"):
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"{self.tp}: cannot delete records up to {offset}, above the high watermark "
                    f"{self.high_watermark}"
                )
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                self.epochs.truncate_from_start(offset)
            return self.log_start_offset

    @_follows_successor
    def delete_old_segments(self, now: int | None = None) -> int:
        """Apply retention by time and by size; returns the bytes deleted.

        Never deletes data above the high watermark, so retention cannot remove records a
        follower still has to fetch. An expired active segment is rolled first, as Kafka does.
        """
        t = wall_ms() if now is None else now
        cfg = self.config
        deleted = 0
        with self.lock, self._guard("retention"):
            active = self.active
            if (
                cfg.retention_ms >= 0
                and active.size
                and self.high_watermark >= self.log_end_offset
                and self._segment_time(active) < t - cfg.retention_ms
            ):
                self._roll_locked(t)
            excess = self.size - cfg.retention_bytes if cfg.retention_bytes >= 0 else 0
            while len(self.segments) > 1:
                seg, nxt = self.segments[0], self.segments[1]
                if nxt.base_offset > self.high_watermark:
                    break
                below_start = nxt.base_offset <= self.log_start_offset
                by_time = cfg.retention_ms >= 0 and self._segment_time(seg) < t - cfg.retention_ms
                by_size = cfg.retention_bytes >= 0 and excess >= seg.size
                if not (below_start or by_time or by_size):
                    break
                excess -= seg.size
                deleted += seg.size
                self._remove_segment(seg)
                self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
            if deleted:
                self.epochs.truncate_from_start(self.log_start_offset)
        return deleted

    @staticmethod
    def _segment_time(seg: LogSegment) -> int:
        return seg.max_timestamp if seg.max_timestamp >= 0 else seg.last_modified_ms

    # -- durability, lifecycle ------------------------------------------------------------

    def rename_dir(self, new_path: str) -> None:
        """Rename the replica folder (move swap, deletion); callers hold ``lock``.

        Allowed on a closed log (quarantine, retirement): a rename needs no descriptor.
        """
        with self._guard("rename", closed_ok=True):
            os.rename(self.dir_path, new_path)
            self.dir_path = new_path
            self.producers.dir_path = new_path
            for seg in self.segments:
                seg.set_dir(new_path)

    def close(self) -> None:
        """Flush and close; on a failed (or failing) directory, just release the descriptors."""
        with self.lock:
            if self.closed:
                return
            if not self.offline and self.successor is None:
                try:
                    with self._guard("close"):
                        self._flush_locked()
                        # Kafka's snapshot at a clean shutdown: the next start replays nothing.
                        # Not for a move's future copy: its map is not its own until the swap
                        # (which brings the source's), and a snapshot of its empty map would
                        # later hide the source's older ones.
                        if not self.is_future:
                            self.producers.take_snapshot(self.log_end_offset, sync=True)
                        for seg in self.segments:
                            seg.close()
                    self.closed = True
                    return
                except (KafkaStorageError, ResourceShortageError):
                    pass
            self.close_quietly()

    # -- replica moves (KIP-113): the swap, driven by jbod_broker.move --------------------

    def adopt_replica_state(
        self,
        *,
        log_start_offset: int,
        high_watermark: int,
        epochs: list[tuple[int, int]],
        config: LogConfig,
        producers: ProducerStateManager | None = None,
        topic_id: str | None = None,
    ) -> None:
        """Take over a move source's per-replica state at the swap (KAFKA-9263, KAFKA-15608).

        Segments wholly below the log start offset (deleted by retention on the source while
        the copy ran) are dropped; the leader-epoch cache is replaced and written out.
        """
        with self.lock, self._guard("carry over replica state"):
            self.config = config
            while len(self.segments) > 1 and self.segments[1].base_offset <= log_start_offset:
                self._remove_segment(self.segments[0])
            leo = self.log_end_offset
            self.log_start_offset = min(max(log_start_offset, self.segments[0].base_offset), leo)
            self.high_watermark = min(max(high_watermark, self.log_start_offset), leo)
            self.recovery_point = min(self.recovery_point, leo)
            self._persist_epochs(format_epochs(self.install_epochs(epochs)))  # written once
            if producers is not None:
                # The source's map as it is under the swap's locks, so a batch retried right
                # after the swap is still recognised; its snapshot files come with the other
                # replica files (LogManager._carry_replica_files).
                self.producers.copy_from(producers)
            if topic_id is not None:
                # The source's id, also when it arrived after this copy was made (the file
                # itself is carried with the replica's other files).
                self._write_topic_id(topic_id)
