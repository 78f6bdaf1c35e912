"""Opening a replica's log from disk: Kafka's ``LogLoader``.

At start-up (and when a move's future copy is reopened) a log's segments are read back from
its folder, the ones a crash may have torn are recovered, and the per-replica state is rebuilt
from what the disk holds: the leader-epoch cache (its checkpoint, or the batches' own epochs),
the producers' map (the newest snapshot and the batches after it) and the topic id. Kept apart
from :class:`~jbod_broker.storage.log.Log`, which serves a loaded log, as Kafka keeps
``LogLoader`` apart from ``UnifiedLog``: loading runs once, before anything else can reach the
log, and needs no new space (KAFKA-13773): it only reads, shortens files and unlinks.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable

from .checkpoints import CheckpointError, format_epochs, parse_epochs, parse_partition_metadata
from .clock import wall_ms
from .diskio import write_or_remove
from .local_log import LocalLog
from .names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    parse_segment_file,
)
from .producer_state import (
    CorruptSnapshotError,
    ProducerStateManager,
    delete_snapshot_file,
    list_snapshots,
    read_snapshot_file,
)
from .segment import LogSegment

_log = logging.getLogger(__name__)


Epochs = list[tuple[int, int]]


class LogLoader:
    """Loads one log's segments and state: called by ``Log.load`` inside the directory's
    failure guard, on a log that holds nothing yet (its segments, ``log``, its producers'
    map, and ``install_epochs``, which makes entries its epoch cache and returns those kept);
    a failure leaves the closing to the caller. Knows the log below it only (``LocalLog``),
    as Kafka's ``LogLoader`` is handed the segments and the producer state."""

    def __init__(
        self,
        log: LocalLog,
        producers: ProducerStateManager,
        *,
        install_epochs: Callable[[Epochs], Epochs],
        clean_shutdown: bool,
    ) -> None:
        self.log = log
        self.producers = producers
        self.install_epochs = install_epochs
        self.clean_shutdown = clean_shutdown

    def load(
        self, *, recovery_point: int, log_start_offset: int, high_watermark: int
    ) -> str | None:
        """Segments, then the offsets the checkpoints gave clamped to what the segments hold,
        then the epochs, the producers and the topic id (each needs the offsets); returns
        the topic id (``partition.metadata``), ``None`` without one."""
        log = self.log
        self._load_segments(recovery_point)
        leo = log.log_end_offset
        log.log_start_offset = min(max(log_start_offset, log.segments[0].base_offset), leo)
        log.recovery_point = min(max(recovery_point, log.log_start_offset), leo)
        log.high_watermark = min(max(high_watermark, log.log_start_offset), leo)
        self._load_epochs()
        self._load_producer_state()
        return self._load_topic_id()

    def _load_segments(self, recovery_point: int) -> None:
        """The segments from the folder's files: leftovers of interrupted writes removed,
        segments past the recovery point (all, after an unclean shutdown) recovered, the
        first torn one ending the log (Kafka's ``recoverLog``)."""
        log, clean_shutdown = self.log, self.clean_shutdown
        names = sorted(os.listdir(log.dir_path))
        bases: list[int] = []
        for name in names:
            path = os.path.join(log.dir_path, name)
            if name.endswith((".tmp", CLEANED_SUFFIX, SWAP_SUFFIX, ".deleted")):
                os.unlink(path)  # leftovers of an interrupted write: never trusted
                continue
            parsed = parse_segment_file(name)
            if parsed and parsed[1] == LOG_SUFFIX:
                bases.append(parsed[0])
        for name in names:
            parsed = parse_segment_file(name)
            if parsed and parsed[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX) and parsed[0] not in bases:
                os.unlink(os.path.join(log.dir_path, name))  # index without its log
        bases.sort()
        recovering = False
        for i, base in enumerate(bases):
            seg = LogSegment(
                log.dir_path,
                base,
                log.handles,
                index_interval_bytes=log.config.index_interval_bytes,
                lock=log.lock,
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
                        LogSegment.delete_files(log.dir_path, base)

                log._append_segment(seg)  # first, so a failed load closes it too
                cut = seg.recover(log.config.max_message_bytes, drop_later)
                if cut and nxt is not None:
                    break
            else:
                log._append_segment(seg)
                seg.load()
        if not log.segments:
            log._add_segment(max(recovery_point, 0))
        # Drop empty segments in the middle (a crash right after a roll leaves one).
        for seg in log.segments[:-1]:
            if seg.size == 0:
                log._remove_segment(seg)

    def _load_epochs(self) -> None:
        """The leader-epoch cache: from its checkpoint, or else from the batches' own epochs.

        Entries past the log's end (a cut tail) or before its start are dropped in memory. The
        file is rewritten only if that changed it, and only if there is room: on a full disk
        the stale file is removed instead, so loading needs no new space and no stale entry
        survives to a later start (which rebuilds the cache from the batches).
        """
        log = self.log
        path = os.path.join(log.dir_path, LEADER_EPOCH_CHECKPOINT)
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
        kept = self.install_epochs(entries)
        if from_file and kept != entries:
            write_or_remove(path, format_epochs(kept))

    def _scan_epochs(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for seg in self.log.segments:
            for _pos, hdr in seg.scan(0):
                epoch = hdr.partition_leader_epoch
                if epoch >= 0 and (not out or epoch > out[-1][0]):
                    out.append((epoch, hdr.base_offset))
        return out

    def _load_topic_id(self) -> str | None:
        """The topic id from ``partition.metadata``, if the replica has one. A file Kafka's
        reader would refuse is set aside as unknown (logged) rather than take the directory
        offline as Kafka would: the next LeaderAndIsr carrying the id writes it again, and a
        wrong id can only come from a request, where it is checked."""
        path = os.path.join(self.log.dir_path, PARTITION_METADATA)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        try:
            return parse_partition_metadata(data, path)
        except CheckpointError as e:
            _log.warning(
                "unreadable partition.metadata: topic id unknown until the controller sends it",
                extra={"event": "partition_metadata_unreadable", "path": path, "error": str(e)},
            )
            return None

    def _load_producer_state(self) -> None:
        """Kafka's rebuild at start: the newest readable snapshot at or below the log end, then
        the batches after it. Snapshots past the end (a cut tail) are deleted; a corrupt one is
        deleted and the next older tried. After a clean shutdown with no snapshot at all (a log
        written before producer state was kept) nothing is replayed, as in Kafka's upgrade
        path. Needs no new space (KAFKA-13773): only reads and unlinks.
        """
        rebuild_producer_state(self.log, self.producers, replay=not self.clean_shutdown)
        self.producers.remove_expired(wall_ms())


def rebuild_producer_state(
    log: LocalLog, producers: ProducerStateManager, *, replay: bool = True
) -> None:
    """The producers' map from the newest readable snapshot at or below the log end and the
    batches after it (Kafka's ``UnifiedLog.rebuildProducerState``): at load and after a
    truncation. Snapshots past the end are deleted, a corrupt one too (the next older is
    tried); with no snapshot and not ``replay``, the map stays empty."""
    leo = log.log_end_offset
    offsets = list_snapshots(log.dir_path)
    for off in offsets:
        if off > leo:
            delete_snapshot_file(log.dir_path, off)
    producers.clear()
    start: int | None = None
    for off in reversed([o for o in offsets if o <= leo]):
        try:
            producers.load(read_snapshot_file(log.dir_path, off), off)
        except CorruptSnapshotError as e:
            _log.warning(
                "deleting a corrupt producer snapshot",
                extra={
                    "event": "producer_snapshot_corrupt",
                    "partition": str(log.tp),
                    "error": str(e),
                },
            )
            delete_snapshot_file(log.dir_path, off)
            continue
        start = off
        break
    if start is None:
        if not replay:
            return
        start = log.log_start_offset
    _replay_producers(log, producers, max(start, log.log_start_offset), leo)


def _replay_producers(log: LocalLog, producers: ProducerStateManager, start: int, end: int) -> None:
    """Apply the producer batches in ``[start, end)`` (headers only; no record is read)."""
    if start >= end:
        return
    i = max(bisect.bisect_right(log._bases, start) - 1, 0)
    for seg in log.segments[i:]:
        if seg.base_offset >= end:
            break
        pos = seg.index.lookup(start) if start > seg.base_offset else 0
        for _pos, h in seg.scan(pos):
            if h.base_offset >= end:
                break
            if h.last_offset < start or h.producer_id < 0 or h.is_control:
                continue
            producers.apply_batch(
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.last_offset,
                h.last_offset_delta,
                h.max_timestamp,
            )
