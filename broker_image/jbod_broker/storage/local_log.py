"""A replica's segments in its folder: Kafka's ``LocalLog``.

The part of a log that knows files: the list of segments and their base offsets, the
directory's failure guard every disk call runs in, reading batches (as bytes or as a file
range), flushing to the recovery point, and installing what a move copied in. What a log
*means* (appending with offsets and epochs, producers, the high watermark's rules, truncation,
retention) is :class:`~jbod_broker.storage.log.Log`'s, which builds on this one; loading from
disk is :mod:`~jbod_broker.storage.log_loader`'s.

Thread-safety is the log's: every method that touches the segments is called holding
``lock`` (the public ones take it), and segments below assume a single caller.
"""

from __future__ import annotations

import bisect
import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from .diskio import (
    OUT_OF_SPACE,
    LogDirFailureChannel,
    is_resource_error,
    resource_shortage,
    shortage,
)
from .errors import (
    InvalidRequestError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    StorageError,
)
from .handles import MIN_LOG_HANDLES, FileHandles
from .log_types import EMPTY_SLICE, FileSlice, LogConfig, LogSnapshot, ReadResult, SliceResult
from .names import TopicPartition, segment_file_name
from .producer_state import delete_snapshot_file
from .records import BatchHeader, decode_batch
from .segment import BatchMeta, LogSegment

P = ParamSpec("P")
R = TypeVar("R")


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
                assert isinstance(target, LocalLog) and target.successor is not None
                target = target.successor
                args = (target, *args[1:])  # type: ignore[assignment]

    return wrapper


class LocalLog:
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
        # The offsets bounding reads and flushes; the rules that move the log start and the
        # high watermark are Log's.
        self.log_start_offset = 0
        self.recovery_point = 0
        self.high_watermark = 0
        self.offline = False
        self.successor: LocalLog | None = None
        """The log holding the data once a move swapped this one out (``Log`` narrows it)."""
        # Closed by shutdown or removal: later calls fail without touching the disk, so a task
        # that reaches the log late (retention, a fetch) cannot take its directory offline or
        # change files after the clean-shutdown marker (KAFKA-13315).
        self.closed = False
        self._unflushed_records = 0
        self._truncations = 0

    # -- guards, segments ------------------------------------------------------------------------

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

    # -- durability -----------------------------------------------------------------------

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
