"""The log of one replica in one directory (Kafka's ``UnifiedLog`` and ``LocalLog`` together).

Thread-safe: this class is the lock boundary. Every mutation (append, roll, truncation,
retention, the move engine's swap) and every read holds ``lock``; segments below assume a
single caller. Reads hold the lock too, so a segment can never be closed under a reader; a read
is at most one ``pread`` of ``max_bytes`` per segment, so the lock is held briefly.

Every disk call runs inside the directory's failure guard: an ``OSError`` takes the whole
directory offline (KIP-112) and this log with it.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import os
import struct
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple, ParamSpec, TypeAlias, TypeVar

from .checkpoints import (
    CheckpointError,
    format_epochs,
    format_partition_metadata,
    parse_epochs,
    parse_partition_metadata,
)
from .clock import wall_ms
from .diskio import (
    OUT_OF_SPACE,
    LogDirFailureChannel,
    is_resource_error,
    resource_shortage,
    shortage,
    write_atomically,
    write_or_remove,
)
from .errors import (
    DuplicateSequenceError,
    InconsistentTopicIdError,
    InvalidRecordError,
    InvalidRequestError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    ResourceShortageError,
    StorageError,
)
from .handles import MIN_LOG_HANDLES, FileHandles
from .leader_epoch import LeaderEpochCache
from .names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TopicPartition,
    parse_segment_file,
    segment_file_name,
)
from .producer_state import (
    CorruptSnapshotError,
    ProducerEntry,
    ProducerStateManager,
    check_append,
    delete_snapshot_file,
    increment_sequence,
    list_snapshots,
    read_snapshot_file,
    with_batch,
)
from .records import (
    DEFAULT_MAX_BATCH_BYTES,
    LOG_OVERHEAD,
    BatchHeader,
    check_client_batches,
    decode_batch,
    validate_batches,
)
from .segment import BatchMeta, LogSegment
from .topic_configs import MIN_MAX_MESSAGE_BYTES, MIN_SEGMENT_BYTES

_log = logging.getLogger(__name__)

_MAX_RELATIVE_OFFSET = 2**31 - 1
_OFFSET_EPOCH = struct.Struct(">qii")


_Request: TypeAlias = tuple[int, list[BatchHeader]]
"""A request's index in its group and its batch headers."""

P = ParamSpec("P")
R = TypeVar("R")


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


class _Retired(Exception):
    """Raised inside a log whose data now lives in its successor (a finished move)."""


def _follows_successor(fn: Callable[P, R]) -> Callable[P, R]:
    """Run the method on the log that currently holds the data.

    A caller may hold a reference to a log that the move engine swaps out (KIP-113 step 8).
    The swap sets ``successor`` under the log's lock; a method that then takes the lock sees
    it in ``_guard`` and is re-run on the successor, so no append lands in a retired log.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        target = args[0]
        while True:
            try:
                return fn(*args, **kwargs)
            except _Retired:
                assert isinstance(target, Log) and target.successor is not None
                target = target.successor
                args = (target, *args[1:])  # type: ignore[assignment]

    return wrapper


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-topic settings, named after Kafka's topic configs."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    max_message_bytes: int = DEFAULT_MAX_BATCH_BYTES
    flush_messages: int | None = None
    """fsync after this many records; ``None`` leaves flushing to the periodic flusher and the
    OS, as Kafka does by default (replication, not fsync, is what makes a write durable)."""

    def __post_init__(self) -> None:
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(
                f"segment.bytes must be at least {MIN_SEGMENT_BYTES}, got {self.segment_bytes}"
            )
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be positive, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must not be negative")
        if self.max_message_bytes < MIN_MAX_MESSAGE_BYTES:
            raise ValueError(f"max.message.bytes must be at least {MIN_MAX_MESSAGE_BYTES}")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError(f"flush.messages must be at least 1, got {self.flush_messages}")


class AppendInfo(NamedTuple):
    """What an append did (a NamedTuple: one is built per produce request)."""

    first_offset: int
    last_offset: int
    record_count: int
    batch_count: int
    size_in_bytes: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    data: bytes
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


class FileSlice:
    """``size`` bytes at ``position`` of a segment file, to be sent without being read (a
    follower's fetch, issue 18): ``fd`` is a duplicate descriptor its holder must
    :meth:`close` once the bytes are sent or dropped. ``len()`` is the size, so a codec writes
    the length prefix of a records field holding one as for bytes."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def close(self) -> None:
        """Idempotent: the descriptor is closed once (a closed number may be reused)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


EMPTY_SLICE = FileSlice(-1, 0, 0)
"""Nothing to send (no descriptor held)."""


@dataclass(frozen=True, slots=True)
class SliceResult:
    """A follower's read as a file range (:meth:`Log.read_slice`)."""

    records: FileSlice
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """What describe-log-dirs and the move engine need, read under one lock hold."""

    size: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    recovery_point: int
    segments: int


class Log:
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
        """``handles``: the broker's open segment files (issue 14); a log made alone (tools,
        tests) gets a small set of its own."""
        self.dir_path = dir_path
        self.handles = handles if handles is not None else FileHandles(MIN_LOG_HANDLES)
        self.tp = tp
        self.config = config
        self.channel = channel
        self.log_dir = log_dir
        self.is_future = is_future
        self.lock = threading.RLock()
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.recovery_point = 0
        self.high_watermark = 0
        self.offline = False
        self.successor: Log | None = None
        # Closed by shutdown or removal: later calls fail without touching the disk, so a task
        # that reaches the log late (retention, a fetch) cannot take its directory offline or
        # change files after the clean-shutdown marker (KAFKA-13315).
        self.closed = False
        self._unflushed_records = 0
        self._truncations = 0
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
        """Open a log from disk; without a clean shutdown, re-check what the flush didn't cover.

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
                log._load_segments(recovery_point, clean_shutdown)
                leo = log.log_end_offset
                log.log_start_offset = min(max(log_start_offset, log.segments[0].base_offset), leo)
                log.recovery_point = min(max(recovery_point, log.log_start_offset), leo)
                log.high_watermark = min(max(high_watermark, log.log_start_offset), leo)
                log._load_epochs()
                log._load_producer_state(clean_shutdown)
                log._load_topic_id()
        except BaseException:
            log.close_quietly()
            raise
        return log

    def _load_segments(self, recovery_point: int, clean_shutdown: bool) -> None:
        names = sorted(os.listdir(self.dir_path))
        bases: list[int] = []
        for name in names:
            path = os.path.join(self.dir_path, name)
            if name.endswith((".tmp", CLEANED_SUFFIX, SWAP_SUFFIX, ".deleted")):
                os.unlink(path)  # leftovers of an interrupted write: never trusted
                continue
            parsed = parse_segment_file(name)
            if parsed and parsed[1] == LOG_SUFFIX:
                bases.append(parsed[0])
        for name in names:
            parsed = parse_segment_file(name)
            if parsed and parsed[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and parsed[0] not in bases:
                os.unlink(os.path.join(self.dir_path, name))  # index without its log
        bases.sort()
        recovering = False
        for i, base in enumerate(bases):
            seg = LogSegment(
                self.dir_path,
                base,
                self.handles,
                index_interval_bytes=self.config.index_interval_bytes,
                lock=self.lock,
            )
            nxt = bases[i + 1] if i + 1 < len(bases) else None
            if not recovering and not clean_shutdown and (nxt is None or nxt > recovery_point):
                recovering = True
            if recovering:
                later = bases[i + 1 :]

                def drop_later(later: list[int] = later) -> None:
                    # A torn segment cannot be followed by later ones. Delete them newest first
                    # and before cutting this one, so a crash in between redoes the same work.
                    for base in reversed(later):
                        LogSegment.delete_files(self.dir_path, base)

                self._append_segment(seg)  # first, so a failed load closes it too
                cut = seg.recover(self.config.max_message_bytes, drop_later)
                if cut and nxt is not None:
                    break
            else:
                self._append_segment(seg)
                seg.load()
        if not self.segments:
            self._add_segment(max(recovery_point, 0))
        # Drop empty segments in the middle (a crash right after a roll leaves one).
        for seg in self.segments[:-1]:
            if seg.size == 0:
                self._remove_segment(seg)

    def _load_epochs(self) -> None:
        """The leader-epoch cache: from its checkpoint, or else from the batches' own epochs.

        Entries past the log's end (a cut tail) or before its start are dropped in memory. The
        file is rewritten only if that changed it, and only if there is room: on a full disk
        the stale file is removed instead, so loading needs no new space and no stale entry
        survives to a later start (which rebuilds the cache from the batches).
        """
        path = os.path.join(self.dir_path, LEADER_EPOCH_CHECKPOINT)
        entries: list[tuple[int, int]] = []
        if os.path.exists(path):
            with open(path, "rb") as f:
                try:
                    entries = parse_epochs(f.read(), path)
                except CheckpointError:
                    entries = []  # rebuilt below from the batches' own epochs
        from_file = bool(entries)
        if not entries:
            entries = self._scan_epochs()
        cache = LeaderEpochCache(entries, _persist_nothing)
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self.log_start_offset)
        self.epochs = LeaderEpochCache(cache.entries(), _epoch_writer(self))
        if from_file and cache.entries() != entries:
            write_or_remove(path, format_epochs(cache.entries()))

    def _load_topic_id(self) -> None:
        """The topic id from ``partition.metadata``, if the replica has one. A file Kafka's
        reader would refuse is set aside as unknown (logged) rather than take the directory
        offline as Kafka would: the next LeaderAndIsr carrying the id writes it again, and a
        wrong id can only come from a request, where it is checked."""
        path = os.path.join(self.dir_path, PARTITION_METADATA)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        try:
            self.topic_id = parse_partition_metadata(data, path)
        except CheckpointError as e:
            _log.warning(
                "unreadable partition.metadata: topic id unknown until the controller sends it",
                extra={"event": "partition_metadata_unreadable", "path": path, "error": str(e)},
            )

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

    def _scan_epochs(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for seg in self.segments:
            for _pos, hdr in seg.scan(0):
                epoch = hdr.partition_leader_epoch
                if epoch >= 0 and (not out or epoch > out[-1][0]):
                    out.append((epoch, hdr.base_offset))
        return out

    # -- producer state (issue 18) -----------------------------------------------------------

    def _load_producer_state(self, clean_shutdown: bool) -> None:
        """Kafka's rebuild at start: the newest readable snapshot at or below the log end, then
        the batches after it. Snapshots past the end (a cut tail) are deleted; a corrupt one is
        deleted and the next older tried. After a clean shutdown with no snapshot at all (a log
        written before producer state was kept) nothing is replayed, as in Kafka's upgrade
        path. Needs no new space (KAFKA-13773): only reads and unlinks.
        """
        self._reload_producers(replay=not clean_shutdown)
        self.producers.remove_expired(wall_ms())

    def _reload_producers(self, *, replay: bool = True) -> None:
        leo = self.log_end_offset
        offsets = list_snapshots(self.dir_path)
        for off in offsets:
            if off > leo:
                delete_snapshot_file(self.dir_path, off)
        self.producers.clear()
        start: int | None = None
        for off in reversed([o for o in offsets if o <= leo]):
            try:
                self.producers.load(read_snapshot_file(self.dir_path, off), off)
            except CorruptSnapshotError as e:
                _log.warning(
                    "deleting a corrupt producer snapshot",
                    extra={
                        "event": "producer_snapshot_corrupt",
                        "partition": str(self.tp),
                        "error": str(e),
                    },
                )
                delete_snapshot_file(self.dir_path, off)
                continue
            start = off
            break
        if start is None:
            if not replay:
                return
            start = self.log_start_offset
        self._replay_producers(max(start, self.log_start_offset), leo)

    def _replay_producers(self, start: int, end: int) -> None:
        """Apply the producer batches in ``[start, end)`` (headers only; no record is read)."""
        if start >= end:
            return
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        for seg in self.segments[i:]:
            if seg.base_offset >= end:
                break
            pos = seg.index.lookup(start) if start > seg.base_offset else 0
            for _pos, h in seg.scan(pos):
                if h.base_offset >= end:
                    break
                if h.last_offset < start or h.producer_id < 0 or h.is_control:
                    continue
                self.producers.apply_batch(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    h.last_offset,
                    h.last_offset_delta,
                    h.max_timestamp,
                )

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
        self._reload_producers()

    def _check_producers(
        self, valid: list[tuple[int, list[BatchHeader]]], offset: int
    ) -> tuple[
        list[tuple[int, list[BatchHeader]]], dict[int, ProducerEntry], dict[int, StorageError]
    ]:
        """A leader's producer checks for a group, in order, against the state as it will be
        after the requests before (two in-flight requests of one producer can share a group).

        Returns the requests to write, the producers' new entries once they are written, and
        the refused ones' errors: a request holding a duplicate batch gets a
        :class:`DuplicateSequenceError` carrying that batch's original offsets (Kafka answers
        the whole request with them), a gap or a fenced epoch its error. Called under the lock.
        """
        kept: list[_Request] = []
        pending: dict[int, ProducerEntry] = {}
        refused: dict[int, StorageError] = {}
        for i, headers in valid:
            updates: dict[int, ProducerEntry] = {}
            running = offset
            try:
                for h in headers:
                    first = running
                    running += h.last_offset_delta + 1
                    pid = h.producer_id
                    if pid < 0 or h.is_control:
                        continue
                    if h.base_sequence < 0:
                        raise InvalidRecordError(
                            f"{self.tp}: batch of producer {pid} has no sequence number"
                        )
                    cur = updates.get(pid) or pending.get(pid) or self.producers.entry(pid)
                    last_seq = increment_sequence(h.base_sequence, h.last_offset_delta)
                    dup = check_append(
                        cur, h.producer_epoch, h.base_sequence, last_seq, f"{self.tp} at {first}"
                    )
                    if dup is not None:
                        raise DuplicateSequenceError(
                            f"{self.tp}: producer {pid} epoch {h.producer_epoch} sequences "
                            f"{h.base_sequence}-{last_seq} are already at offsets "
                            f"{dup.first_offset}-{dup.last_offset}",
                            first_offset=dup.first_offset,
                            last_offset=dup.last_offset,
                            log_start_offset=self.log_start_offset,
                        )
                    updates[pid] = with_batch(
                        cur or ProducerEntry(pid),
                        h.producer_epoch,
                        last_seq,
                        running - 1,
                        h.last_offset_delta,
                        h.max_timestamp,
                    )
            except StorageError as e:
                refused[i] = e
                continue
            pending.update(updates)
            kept.append((i, headers))
            offset = running
        return kept, pending, refused

    def _persist_epochs(self, data: bytes) -> None:
        with self._guard("write leader-epoch checkpoint"):
            write_atomically(os.path.join(self.dir_path, LEADER_EPOCH_CHECKPOINT), data)

    # -- helpers --------------------------------------------------------------------------

    def _refuse_if_unusable(self, *, closed_ok: bool = False) -> None:
        """The checks every guarded operation makes before it touches the disk."""
        if self.successor is not None:
            raise _Retired
        if self.offline:
            raise KafkaStorageError(
                f"replica {self.tp} is offline: log directory {self.log_dir} failed"
            )
        if self.closed and not closed_ok:
            raise KafkaStorageError(
                f"replica {self.tp}: its log is closed (the broker is shutting down or the "
                "replica was removed)"
            )

    def _check_usable(self) -> None:
        # The append's guard: the usual case (nothing to refuse) costs no call.
        if self.successor is not None or self.offline or self.closed:
            self._refuse_if_unusable()
        self.channel.check(self.log_dir)

    def _io_failed(self, e: OSError, what: str) -> StorageError:
        """What the failure guard does, for the hot paths that inline it."""
        if is_resource_error(e):
            return resource_shortage(f"{what} {self.tp}", e)
        if self.is_future and e.errno in OUT_OF_SPACE:
            return shortage(self.log_dir, f"{what} {self.tp}", e)
        reason = f"{what} {self.tp}: {os.strerror(e.errno) if e.errno else e}"
        if e.filename:
            reason += f" ({e.filename})"
        self.channel.mark_offline(self.log_dir, reason, wait=False)
        return KafkaStorageError(f"log directory {self.log_dir} is offline: {reason}")

    @contextmanager
    def _guard(
        self, what: str, *, closed_ok: bool = False, no_space_ok: bool = False
    ) -> Iterator[None]:
        self._refuse_if_unusable(closed_ok=closed_ok)
        # A future copy that runs out of space fails its move (or, at start-up, is dropped),
        # not its directory (issue 13); so does a caller that frees the space itself.
        with self.channel.guard(
            self.log_dir,
            f"{what} {self.tp}",
            shortage_fails_dir=not (self.is_future or no_space_ok),
        ):
            yield

    def _append_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)
        self._bases.append(seg.base_offset)

    def _add_segment(self, base_offset: int) -> LogSegment:
        seg = LogSegment(
            self.dir_path,
            base_offset,
            self.handles,
            create=True,
            index_interval_bytes=self.config.index_interval_bytes,
            lock=self.lock,
        )
        if seg.size:
            # A leftover file at this base offset (a crash mid-roll): start it afresh.
            seg.cut_file(0)
            seg.size = 0
        seg.next_offset = base_offset
        self._append_segment(seg)
        return seg

    def _remove_segment(self, seg: LogSegment) -> None:
        """Delete a segment's files, and the producer snapshot of the same base offset with
        them (Kafka deletes a segment's snapshot with it)."""
        i = self.segments.index(seg)
        del self.segments[i]
        del self._bases[i]
        seg.delete()
        delete_snapshot_file(self.dir_path, seg.base_offset)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def mark_offline(self) -> None:
        """Called by the log manager when the directory fails; no more disk calls."""
        self.offline = True

    def snapshot(self) -> LogSnapshot:
        with self.lock:
            return LogSnapshot(
                size=self.size,
                log_start_offset=self.log_start_offset,
                log_end_offset=self.log_end_offset,
                high_watermark=self.high_watermark,
                recovery_point=self.recovery_point,
                segments=len(self.segments),
            )

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
                    kept, producers, refused = self._check_producers(valid, offset)
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

    # -- reading --------------------------------------------------------------------------

    @_follows_successor
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one: bool = True,
    ) -> ReadResult:
        """Whole batches from ``offset``; ``max_offset`` (exclusive) is the visible end. With
        ``max_bytes`` 0 and not ``min_one`` nothing can be returned: the offset is checked and
        no segment touched (a Fetch whose response budget is spent, issue 36)."""
        if max_bytes < 0:
            raise InvalidRequestError(f"max_bytes must not be negative, got {max_bytes}")
        with self.lock, self._guard("read"):
            lso, leo = self.log_start_offset, self.log_end_offset
            if offset < lso or offset > leo:
                raise OffsetOutOfRangeError(f"{self.tp}: offset {offset} is outside [{lso}, {leo}]")
            data = b""
            if max_bytes == 0 and not min_one:
                return ReadResult(data, lso, leo, self.high_watermark)
            i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            while offset < leo and i < len(self.segments):
                got = self.segments[i].read(
                    offset, max_bytes, max_offset=max_offset, min_one=min_one
                )
                if got:
                    data = got
                    break
                if got is not None:
                    break  # hidden by max_offset
                i += 1
            return ReadResult(data, lso, leo, self.high_watermark)

    @_follows_successor
    def read_slice(self, offset: int, max_bytes: int) -> SliceResult:
        """What :meth:`read` returns to a follower (whole batches from ``offset`` up to the log
        end, at most ``max_bytes``, the first whole), as a range of one segment file with its
        own descriptor, found under the log's lock without reading the records: the leader's
        Fetch handler sends it from the file to the follower's socket (zero-copy). Appends
        after the lock is released only add past the range; a move's swap renames the file
        and retention unlinks it, and the duplicate descriptor still reads the same bytes. A
        truncation before the send (this broker became a follower meanwhile) cuts the range
        short: the sender closes the connection then, as Kafka's ``FileRecords.writeTo``
        refuses a file truncated under it."""
        if max_bytes < 0:
            raise InvalidRequestError(f"max_bytes must not be negative, got {max_bytes}")
        with self.lock, self._guard("read"):
            lso, leo = self.log_start_offset, self.log_end_offset
            if offset < lso or offset > leo:
                raise OffsetOutOfRangeError(f"{self.tp}: offset {offset} is outside [{lso}, {leo}]")
            records = EMPTY_SLICE
            i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            while offset < leo and i < len(self.segments):
                seg = self.segments[i]
                found = seg.locate(offset, max_bytes)
                if found is not None:
                    records = FileSlice(seg.dup_log_fd(), *found)
                    break
                i += 1
            return SliceResult(records, lso, leo, self.high_watermark)

    @_follows_successor
    def offset_for_timestamp(self, target: int, max_offset: int) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record stamped ``target`` or later below
        ``max_offset`` (exclusive; the high watermark for a consumer): Kafka's ListOffsets by
        timestamp. The time index names where to start in the first segment that reaches
        ``target``; the one batch whose max timestamp does is decoded to find the record.
        ``None``: no such record."""
        with self.lock, self._guard("read"):
            for seg in self.segments:
                if seg.max_timestamp < target:
                    continue
                start = max(seg.time_index.lookup(target), self.log_start_offset)
                found = seg.find_batch(start)
                if found is None:
                    continue
                for pos, hdr in seg.scan(found[0]):
                    if hdr.base_offset >= max_offset:
                        return None
                    if hdr.max_timestamp < target:
                        continue
                    hit = self._record_at(seg, pos, hdr, max_offset, target)
                    if hit is not None:
                        return hit
            return None

    @_follows_successor
    def max_timestamp_offset(self, max_offset: int) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record with the largest timestamp below
        ``max_offset``: ListOffsets' MAX_TIMESTAMP (KIP-734). Segments are searched from the
        one with the largest max timestamp down, and the search stops once no segment left
        can beat what was found, so usually one segment's batch headers are read."""
        with self.lock, self._guard("read"):
            best: tuple[int, int] | None = None

            def beats(ts: int, offset: int) -> bool:
                return best is None or ts > best[0] or (ts == best[0] and offset < best[1])

            for seg in sorted(self.segments, key=lambda s: (-s.max_timestamp, s.base_offset)):
                if seg.base_offset >= max_offset or (best and seg.max_timestamp < best[0]):
                    continue
                # Headers alone pick the batch; only it (and a batch straddling the log start,
                # whose max may be invisible) is decoded.
                top: tuple[int, BatchHeader] | None = None
                for pos, hdr in seg.scan(0):
                    if hdr.base_offset >= max_offset:
                        break
                    if hdr.last_offset < self.log_start_offset:
                        continue
                    if hdr.base_offset < self.log_start_offset:
                        hit = self._visible_max(seg, pos, hdr, max_offset)
                        if hit is not None and beats(*hit):
                            best = hit
                    elif beats(hdr.max_timestamp, hdr.base_offset) and (
                        top is None or hdr.max_timestamp > top[1].max_timestamp
                    ):
                        top = (pos, hdr)
                if top is not None:
                    hit = self._record_at(seg, top[0], top[1], max_offset, top[1].max_timestamp)
                    if hit is not None and beats(*hit):
                        best = hit
            return best

    def _visible_max(
        self, seg: LogSegment, pos: int, hdr: BatchHeader, max_offset: int
    ) -> tuple[int, int] | None:
        """The first record with the largest timestamp among the batch's records inside the
        visible range (a batch may straddle the log start offset)."""
        _, records = decode_batch(seg.read_bytes(pos, hdr.size_in_bytes))
        best: tuple[int, int] | None = None
        for r in records:
            if self.log_start_offset <= r.offset < max_offset and (
                best is None or r.timestamp > best[0]
            ):
                best = (r.timestamp, r.offset)
        return best

    def _record_at(
        self,
        seg: LogSegment,
        pos: int,
        hdr: BatchHeader,
        max_offset: int,
        target: int,
    ) -> tuple[int, int] | None:
        """The first record of the batch at ``pos`` inside the log's visible range stamped
        ``target`` or later, as ``(timestamp, offset)``."""
        _, records = decode_batch(seg.read_bytes(pos, hdr.size_in_bytes))
        for r in records:
            if self.log_start_offset <= r.offset < max_offset and r.timestamp >= target:
                return r.timestamp, r.offset
        return None

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

    @_follows_successor
    def flush(self) -> int:
        """fsync what is not yet durable and advance the recovery point; returns it.

        The fsyncs run outside the log's lock (on duplicated descriptors, so retention or a
        move closing a segment meanwhile cannot break them): appends go on while the disk
        writes back, as in Kafka. The recovery point advances to what was captured under the
        lock, unless a truncation happened in between (then the next flush covers it).
        """
        with self.lock, self._guard("flush"):
            if self.recovery_point >= self.log_end_offset:
                return self.recovery_point
            leo = self.log_end_offset
            epoch = self._truncations
            fds: list[int] = []
            try:
                for seg in self._segments_to_flush():
                    fds += seg.open_for_sync()
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
            self._unflushed_records = 0
        try:
            with self._guard("flush"):
                for fd in fds:
                    os.fsync(fd)
        finally:
            for fd in fds:
                os.close(fd)
        with self.lock:
            if self._truncations == epoch and leo > self.recovery_point:
                self.recovery_point = min(leo, self.log_end_offset)
            return self.recovery_point

    def _flush_locked(self) -> None:
        leo = self.log_end_offset
        for seg in self._segments_to_flush():
            seg.flush()
        self.recovery_point = leo
        self._unflushed_records = 0

    def _segments_to_flush(self) -> list[LogSegment]:
        """The segments from the one holding the recovery point on, and any earlier one whose
        index entries are still in memory: recovery rebuilds indexes without writing them (a
        full disk must load), and once a flush moves the recovery point past a segment, the
        next start trusts its index files as they are."""
        i = max(bisect.bisect_right(self._bases, self.recovery_point) - 1, 0)
        return [s for s in self.segments[:i] if s.index_pending] + self.segments[i:]

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

    def close_quietly(self) -> None:
        """Close descriptors without writing anything (offline directory, retired log)."""
        with self.lock:
            self.closed = True
            for seg in self.segments:
                seg.close(write=False)

    # -- replica moves (KIP-113): the destination side, driven by jbod_broker.move ------------
    #
    # The move engine copies bytes into a future log's files with the kernel's zero-copy path,
    # so they bypass append(); these methods make the log adopt what was copied. Callers hold
    # no other log's lock except during the swap (manager lock, source lock, then this one).

    def attach_copied_segment(self, base_offset: int, staged: dict[str, str]) -> int:
        """Install a whole sealed segment copied from a move's source; returns its next offset.

        ``staged`` maps suffixes (``.log``, ``.index``, ``.timeindex``) to copies in this
        folder under temporary names. The log must end with an empty active segment that the
        copy replaces: at ``base_offset``, or anywhere inside the copy if it is the only one
        (a log start offset inside the source's first segment). The indexes are checked as at
        a clean load and rebuilt if wrong; a new empty active segment follows the copy.
        """
        with self.lock, self._guard("attach copied segment"):
            active = self.active
            only = len(self.segments) == 1
            if active.size != 0 or (
                base_offset != active.base_offset
                and not (only and base_offset < active.base_offset)
            ):
                raise InvalidRequestError(
                    f"{self.tp}: cannot attach a copied segment at {base_offset}: the log ends "
                    f"at {self.log_end_offset} in a segment of {active.size} bytes"
                )
            self._remove_segment(active)
            for suffix, tmp in staged.items():
                os.replace(tmp, os.path.join(self.dir_path, segment_file_name(base_offset, suffix)))
            seg = LogSegment(
                self.dir_path,
                base_offset,
                self.handles,
                index_interval_bytes=self.config.index_interval_bytes,
                lock=self.lock,
            )
            seg.load()
            self._append_segment(seg)
            self._add_segment(seg.next_offset)
            return seg.next_offset

    def adopt_copied_batches(self, base_offset: int, position: int, metas: list[BatchMeta]) -> int:
        """Index whole batches a move wrote after the active segment's end; returns their bytes.

        ``metas`` describe the batches from ``position`` on, in order (the engine read their
        headers back). Anything in the file after them (a copy cut short by a truncation of
        the source) is cut off, so the file never holds bytes the log does not know about.
        """
        with self.lock, self._guard("adopt copied batches"):
            seg = self.active
            if seg.base_offset != base_offset or seg.size != position:
                raise InvalidRequestError(
                    f"{self.tp}: the future log changed during the copy (active segment "
                    f"{seg.base_offset} of {seg.size} bytes, expected {base_offset}/{position})"
                )
            pos = position
            for last_offset, size, max_ts in metas:
                if last_offset < seg.next_offset:
                    break
                seg._index_batch(last_offset, size, max_ts, pos)
                pos += size
            seg.size = pos
            if seg.file_size() > pos:
                seg.cut_file(pos)
            return pos - position

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
            cache = LeaderEpochCache(list(epochs), _persist_nothing)
            cache.truncate_from_end(leo)
            cache.truncate_from_start(self.log_start_offset)
            self.epochs = LeaderEpochCache(cache.entries(), _epoch_writer(self))
            self._persist_epochs(format_epochs(self.epochs.entries()))  # written once
            if producers is not None:
                # The source's map as it is under the swap's locks, so a batch retried right
                # after the swap is still recognised; its snapshot files come with the other
                # replica files (LogManager._carry_replica_files).
                self.producers.copy_from(producers)
            if topic_id is not None:
                # The source's id, also when it arrived after this copy was made (the file
                # itself is carried with the replica's other files).
                self._write_topic_id(topic_id)
