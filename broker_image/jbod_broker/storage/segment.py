"""One segment: a ``.log`` file of record batches plus its ``.index`` and ``.timeindex``.

Not thread-safe: the owning :class:`~jbod_broker.storage.log.Log` holds its lock around every
mutation. Reads use ``pread``, so they never move a file position another caller relies on. All
``OSError``s propagate: the log runs segment calls inside the directory's failure guard.

The ``.log`` descriptor is not the segment's own (issue 14): it comes from the broker's bounded
:class:`~.handles.FileHandles`, pinned for each call and released after it, so an idle segment
may have it closed and gets it back (by its current path) on its next use. The indexes open
their files only when they read or write them.

Appends, the hot path, take the handle on a lease instead (given ``lock``, the owning log's):
the first append leases it and the next ones write through it with no pin or LRU touch. The
lease ends when the segment is rolled (:meth:`LogSegment.end_lease`), closed or deleted, or when
the budget needs the room and the log's lock is free (:meth:`LogSegment._give_back_lease`), so
an idle replica still holds no descriptor for long.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from .diskio import pwrite_all
from .errors import CorruptRecordError
from .handles import FileHandles
from .index import CorruptIndexError, OffsetIndex, TimeIndex
from .names import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from .records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    first_corrupt_position,
    iter_batches,
    parse_header,
)

_SCAN_CHUNK = 64 * 1024

BatchMeta = tuple[int, int, int]
"""(last offset, size in bytes, max timestamp) of one batch: what indexing needs, cheaply."""
_RECOVERY_CHUNK = 8 * 1024 * 1024


class LogSegment:
    def __init__(
        self,
        dir_path: str,
        base_offset: int,
        handles: FileHandles,
        *,
        create: bool = False,
        index_interval_bytes: int = 4096,
        created_ms: int | None = None,
        lock: threading.RLock | None = None,
    ) -> None:
        """Open segment ``base_offset`` of ``dir_path``; ``create`` makes its ``.log`` if it
        is missing (a new segment), otherwise a missing one is an error. ``lock``: the owning
        log's, held around every append; with it appends lease the handle (see the module's
        doc), without it they pin it per call."""
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self._handles = handles
        self._lock = lock
        self._leased_fd = -1
        """The leased ``.log`` descriptor, -1 without a lease; read only under ``lock``."""
        self._log_path = self._path(LOG_SUFFIX)
        fd = handles.acquire(self, self._log_path, create=create)
        try:
            self.size = os.fstat(fd).st_size
        finally:
            handles.release(self)
        try:
            self.index = OffsetIndex(self._path(INDEX_SUFFIX), base_offset)
            self.time_index = TimeIndex(self._path(TIME_INDEX_SUFFIX), base_offset)
        except BaseException:
            # A folder removed after a failed load must give its space back, which an open
            # descriptor would keep.
            handles.close(self)
            raise
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self._bytes_since_index = 0

    def _path(self, suffix: str) -> str:
        return os.path.join(self.dir_path, segment_file_name(self.base_offset, suffix))

    @property
    def log_path(self) -> str:
        return self._log_path

    def file_paths(self) -> list[str]:
        return [self._log_path, self._path(INDEX_SUFFIX), self._path(TIME_INDEX_SUFFIX)]

    @staticmethod
    def delete_files(dir_path: str, base_offset: int) -> None:
        """Remove a segment's three files without opening it (a torn log's later segments)."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(dir_path, segment_file_name(base_offset, suffix)))

    @contextlib.contextmanager
    def _file(self) -> Iterator[int]:
        """The ``.log`` descriptor, pinned for the block (see the module's doc)."""
        fd = self._handles.acquire(self, self._log_path)
        try:
            yield fd
        finally:
            self._handles.release(self)

    # -- loading --------------------------------------------------------------------------

    def load(self) -> None:
        """Open an existing segment after a clean shutdown: trust it, but check the indexes."""
        try:
            self.index.load()
            self.index.check_against(self.size)
            self.time_index.load()
        except CorruptIndexError:
            self.rebuild_indexes()
            return
        last = None
        for _pos, hdr in self.scan(self.index.last_position):
            last = hdr
        if last is not None:
            self.next_offset = last.next_offset
        try:
            self.time_index.check_against(self.next_offset)
        except CorruptIndexError:
            self.rebuild_indexes()
            return
        self.max_timestamp = self.time_index.last_timestamp
        self._init_created_ms()

    def _init_created_ms(self) -> None:
        first = next(self.scan(0), None)
        if first is not None and first[1].max_timestamp >= 0:
            self.created_ms = first[1].max_timestamp
        else:
            self.created_ms = self.last_modified_ms

    def rebuild_indexes(self) -> None:
        self.recover(max_batch_bytes=None)

    def recover(
        self, max_batch_bytes: int | None, before_cut: Callable[[], None] | None = None
    ) -> int:
        """Re-read every batch, check its CRC, rebuild both indexes, cut a torn or corrupt tail.

        Returns the number of bytes cut. Batches must also have increasing offsets: a batch
        that goes backwards is treated as corruption, like a bad CRC. Writes no new bytes: it
        only shortens files (the log's tail, the old indexes), so it works on a full disk.
        """
        with self._file() as fd:
            return self._recover(fd, max_batch_bytes, before_cut)

    def _recover(
        self, fd: int, max_batch_bytes: int | None, before_cut: Callable[[], None] | None
    ) -> int:
        self.index.reset()
        self.time_index.reset()
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        file_size = os.fstat(fd).st_size
        limit = max_batch_bytes if max_batch_bytes is not None else 2**31 - 1
        pos = 0
        stop = False
        while pos < file_size and not stop:
            buf = os.pread(fd, min(_RECOVERY_CHUNK, file_size - pos), pos)
            valid_end, headers = first_corrupt_position(buf, max_batch_bytes=limit)
            if valid_end < len(buf):
                # Either the chunk cut a batch in two, or the data is bad from here on.
                ok = False
                big = self._read_whole_batch(fd, pos + valid_end, file_size)
                if big is not None:
                    v2, h2 = first_corrupt_position(big, max_batch_bytes=limit)
                    if v2 == len(big) and h2:
                        headers = [*headers, *h2]
                        valid_end += len(big)
                        ok = True
                stop = not ok
            good = self._accept_recovered(headers, pos)
            if good < len(headers):
                valid_end = sum(h.size_in_bytes for h in headers[:good])
                stop = True
            pos += valid_end
        cut = file_size - pos
        if cut:
            if before_cut is not None:
                before_cut()  # e.g. drop later segments first, so a crash here can redo this
            os.ftruncate(fd, pos)
        self.size = pos
        # The rebuilt indexes stay in memory until the next flush (even if the recovery point
        # has passed this segment by then) or close: recovery must need no new space, or a
        # full disk could never be loaded (KAFKA-13773). The files were cut to nothing above;
        # a start that finds one still empty rebuilds it again (OffsetIndex.check_against).
        self._init_created_ms()
        return cut

    @staticmethod
    def _read_whole_batch(fd: int, pos: int, file_size: int) -> bytes | None:
        head = os.pread(fd, BATCH_HEADER_SIZE, pos)
        if len(head) < BATCH_HEADER_SIZE:
            return None
        try:
            hdr = parse_header(head)
        except CorruptRecordError:
            return None
        if hdr.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            return None
        if pos + hdr.size_in_bytes > file_size:
            return None
        return os.pread(fd, hdr.size_in_bytes, pos)

    def _accept_recovered(self, headers: Sequence[BatchHeader], chunk_pos: int) -> int:
        position = chunk_pos
        for i, hdr in enumerate(headers):
            if hdr.base_offset < self.next_offset or hdr.last_offset < hdr.base_offset:
                return i
            self._index_batch(hdr.last_offset, hdr.size_in_bytes, hdr.max_timestamp, position)
            position += hdr.size_in_bytes
        return len(headers)

    # -- writing --------------------------------------------------------------------------

    def _index_batch(self, last_offset: int, size: int, max_ts: int, position: int) -> None:
        if self._bytes_since_index >= self.index_interval_bytes or position == 0:
            self.index.append(last_offset, position)
            if max_ts > self.max_timestamp:
                self.time_index.maybe_append(max_ts, last_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += size
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
        self.next_offset = last_offset + 1

    def append(self, data: bytes | bytearray | memoryview, metas: Sequence[BatchMeta]) -> None:
        """Append validated batches; ``metas`` describe ``data`` batch by batch, in order."""
        position = self.size
        # The hot path: the leased descriptor, taken by the first append (module doc).
        fd = self._leased_fd
        if fd >= 0:
            pwrite_all(fd, data, position)
        else:
            self._write_unleased(data, position)
        # _index_batch, inlined with locals: this loop runs once per appended batch.
        interval = self.index_interval_bytes
        since = self._bytes_since_index
        max_seen = self.max_timestamp
        last_offset = self.next_offset - 1
        for last_offset, size, max_ts in metas:
            if since >= interval or position == 0:
                self.index.append(last_offset, position)
                if max_ts > max_seen:
                    self.time_index.maybe_append(max_ts, last_offset)
                since = 0
            since += size
            if max_ts > max_seen:
                max_seen = max_ts
            position += size
        self._bytes_since_index = since
        self.max_timestamp = max_seen
        self.next_offset = last_offset + 1
        self.size = position

    def _write_unleased(self, data: bytes | bytearray | memoryview, position: int) -> None:
        if self._lock is not None:
            fd = self._handles.lease(self, self._log_path, self._give_back_lease)
            self._leased_fd = fd
            pwrite_all(fd, data, position)
            return
        with self._file() as fd:
            pwrite_all(fd, data, position)

    def _give_back_lease(self) -> bool:
        """The budget wants the leased handle back (it holds the handles' lock): let go if the
        log is not in the middle of an operation. Its lock is taken without waiting, so this
        never waits for a log that itself waits for the handles."""
        lock = self._lock
        if lock is None or not lock.acquire(blocking=False):
            return False
        self._leased_fd = -1
        lock.release()
        return True

    def end_lease(self) -> None:
        """The segment is no longer the active one (a roll): its handle becomes idle, so the
        budget may close it while the segment is not read."""
        if self._leased_fd >= 0:
            self._leased_fd = -1
            self._handles.end_lease(self)

    @property
    def leased(self) -> bool:
        """Whether appends hold the handle on a lease (tests, metrics)."""
        return self._leased_fd >= 0

    # -- reading --------------------------------------------------------------------------

    def scan(self, start_pos: int, end_pos: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the whole batches between two positions, without reading the records."""
        end = self.size if end_pos is None else end_pos
        pos = start_pos
        while pos + LOG_OVERHEAD <= end:
            buf = self._pread(min(_SCAN_CHUNK, end - pos), pos)
            consumed = 0
            for p, hdr in iter_batches(buf):
                yield pos + p, hdr
                consumed = p + hdr.size_in_bytes
            if consumed == 0:
                head = self._pread(BATCH_HEADER_SIZE, pos)
                if len(head) < BATCH_HEADER_SIZE:
                    return
                hdr = parse_header(head)
                if hdr.batch_length <= 0 or pos + hdr.size_in_bytes > end:
                    return
                yield pos, hdr
                consumed = hdr.size_in_bytes
            pos += consumed

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        for pos, hdr in self.scan(self.index.lookup(offset)):
            if hdr.last_offset >= offset:
                return pos, hdr
        return None

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True
    ) -> bytes | None:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them.

        ``max_offset`` (exclusive) hides batches at or past the high watermark. With
        ``min_one`` the first batch is returned whole even when larger than ``max_bytes``,
        so a consumer can always make progress (KIP-74). ``None``: nothing at ``offset`` here.
        """
        start = self.index.lookup(offset)
        if max_bytes > 0 and start < self.size:
            # One read from the index entry: usually it names the very batch, and a cold read
            # then costs one I/O of max_bytes instead of a header scan and a second read.
            buf = self._pread(min(max_bytes, self.size - start), start)
            first_pos = -1
            end = 0
            for p, hdr in iter_batches(buf):
                if first_pos < 0:
                    if hdr.last_offset < offset:
                        continue
                    if max_offset is not None and hdr.last_offset >= max_offset:
                        return b""
                    first_pos = p
                elif max_offset is not None and hdr.last_offset >= max_offset:
                    break
                end = p + hdr.size_in_bytes
            if first_pos >= 0:
                return buf if first_pos == 0 and end == len(buf) else buf[first_pos:end]
        # The batch holding ``offset`` does not fit in ``max_bytes`` from the index entry.
        found = self.find_batch(offset)
        if found is None:
            return None
        pos, first = found
        if max_offset is not None and first.last_offset >= max_offset:
            return b""
        want = min(max(max_bytes, first.size_in_bytes if min_one else 0), self.size - pos)
        buf = self._pread(want, pos)
        end = 0
        for p, hdr in iter_batches(buf):
            if max_offset is not None and hdr.last_offset >= max_offset:
                break
            end = p + hdr.size_in_bytes
        return buf if end == len(buf) else buf[:end]

    def locate(self, offset: int, max_bytes: int) -> tuple[int, int] | None:
        """``(position, size)`` of whole batches from the one holding ``offset``, up to
        ``max_bytes`` of them (the first batch whole, KIP-74), to the segment's end at most:
        what :meth:`read` would return for a follower, found from batch headers and the offset
        index without reading a record, so the range can go from the file to a socket
        (zero-copy). The range ends at an indexed batch start, so it may hold up to
        ``log.index.interval.bytes`` less than ``max_bytes`` allows. ``None``: nothing at
        ``offset`` here."""
        pos = self.index.lookup(offset)
        while True:
            if pos + BATCH_HEADER_SIZE > self.size:
                return None
            hdr = parse_header(self._pread(BATCH_HEADER_SIZE, pos))
            if hdr.batch_length <= 0 or pos + hdr.size_in_bytes > self.size:
                raise CorruptRecordError(
                    f"{self._log_path}: no whole batch at position {pos} (length "
                    f"{hdr.batch_length})"
                )
            if hdr.last_offset >= offset:
                break
            pos += hdr.size_in_bytes
        limit = pos + max(max_bytes, hdr.size_in_bytes)
        end = self.size if limit >= self.size else self.index.position_floor(limit)
        return pos, max(end, pos + hdr.size_in_bytes) - pos

    def dup_log_fd(self) -> int:
        """A duplicate of the ``.log`` file's descriptor, the caller's to close: a send from
        the file outlives the handle's pin, and the budget may close the handle meanwhile
        (``handles``); the duplicate also keeps a file a swap renames or retention deletes
        readable until it is closed."""
        fd = self._handles.acquire(self, self._log_path)
        try:
            return os.dup(fd)
        finally:
            self._handles.release(self)

    def read_bytes(self, position: int, length: int) -> bytes:
        return self._pread(length, position)

    def _pread(self, length: int, position: int) -> bytes:
        # Pinned for one read at a time: a scan's caller may stop between its reads (a
        # generator left unfinished) and must not keep the handle from being closed.
        fd = self._handles.acquire(self, self._log_path)
        try:
            return os.pread(fd, length, position)
        finally:
            self._handles.release(self)

    def file_size(self) -> int:
        """The ``.log`` file's size on disk (``size`` is what the segment holds)."""
        with self._file() as fd:
            return os.fstat(fd).st_size

    def cut_file(self, length: int) -> None:
        """Cut the ``.log`` file to ``length`` bytes (callers set ``size`` and the indexes)."""
        with self._file() as fd:
            os.ftruncate(fd, length)

    def open_for_sync(self) -> list[int]:
        """Descriptors of the three files, index entries written first, to fsync outside the
        log's lock (so appends go on meanwhile); the caller closes them. Duplicates and fresh
        opens: closing a handle meanwhile (retention, a move, the budget) cannot break them."""
        fds: list[int] = []
        try:
            with self._file() as fd:
                fds.append(os.dup(fd))
            fds.append(self.index.open_for_sync())
            fds.append(self.time_index.open_for_sync())
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    # -- truncation, lifecycle ------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding ``offset`` or later; returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        pos, hdr = found
        removed = self.size - pos
        self.cut_file(pos)
        self.size = pos
        self.index.truncate_to_position(pos)
        self.time_index.truncate_to_offset(hdr.base_offset)
        self.next_offset = min(offset, hdr.base_offset) if pos > 0 else self.base_offset
        self.max_timestamp = self.time_index.last_timestamp
        self._bytes_since_index = self.index_interval_bytes
        if pos > 0:
            # Recompute the true tail after the cut (batches may have gaps after compaction).
            last = None
            for _p, h in self.scan(self.index.last_position):
                last = h
            if last is not None:
                self.next_offset = last.next_offset
                self.max_timestamp = max(self.max_timestamp, last.max_timestamp)
        return removed

    def set_dir(self, dir_path: str) -> None:
        """The replica folder was renamed; an open descriptor stays valid, a closed one is
        reopened by the new path."""
        self.dir_path = dir_path
        self._log_path = self._path(LOG_SUFFIX)
        self.index.path = self._path(INDEX_SUFFIX)
        self.time_index.path = self._path(TIME_INDEX_SUFFIX)

    @property
    def index_pending(self) -> bool:
        """Whether index entries wait in memory (appended, or rebuilt by recovery)."""
        return self.index.pending or self.time_index.pending

    def flush(self) -> None:
        with self._file() as fd:
            os.fsync(fd)
        self.index.flush()
        self.time_index.flush()

    def close(self, *, write: bool = True) -> None:
        """Write what the indexes hold in memory and release the descriptor; ``write=False``
        drops unwritten index entries (a failed disk must not be written to, and an index is
        rebuilt by recovery anyway)."""
        try:
            self.index.close(write=write)
            self.time_index.close(write=write)
        finally:
            self._leased_fd = -1
            self._handles.close(self)  # ends the lease too

    def delete(self) -> None:
        self.close(write=False)
        for path in self.file_paths():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)
