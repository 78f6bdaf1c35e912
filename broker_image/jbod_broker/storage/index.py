"""Sparse offset and time indexes of one segment, in Kafka's file formats.

``.index``: 8-byte entries, (last offset of a batch minus segment base offset) as int32 and the
batch's byte position as int32. ``.timeindex``: 12-byte entries, the largest timestamp seen so
far as int64 and the relative offset of the batch that carried it as int32. Entries are added
every ``index.interval.bytes`` of log. The files are append-only (Kafka preallocates and trims;
an exact-length file is what its tools expect after a clean close anyway).

Indexes are derived data: a file that fails its sanity check is rebuilt from the log by the
segment, never trusted. New entries wait in memory and are written at a flush or a close, so
the file always holds a prefix of the entries; a prefix is a correct, sparser index (a lookup
scans forward from an earlier position), and an empty one of a non-empty log is rebuilt. That
is what lets recovery rebuild an index without writing (a full disk must still load). Not
thread-safe: the owning :class:`Log` serialises writers.

No descriptor is kept (issue 14): the file is opened for the moment it is read (at load),
written (a flush, a roll, a close) or cut, so an idle replica holds none, as Kafka opens its
indexes lazily. The file itself is made when the index is (an empty one), as before.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

from .diskio import pwrite_all

_OFF = struct.Struct(">ii")
_TIME = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """The index file does not match what the log says; rebuild it."""


def _touch(path: str) -> None:
    """Make the (empty) index file if it is missing: a segment always has both."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))


@contextmanager
def _opened(path: str) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR)
    try:
        yield fd
    finally:
        os.close(fd)


def _read_all(path: str) -> bytes:
    with _opened(path) as fd:
        size = os.fstat(fd).st_size
        return os.pread(fd, size, 0)


def _open_for_sync(path: str) -> int:
    """A descriptor to fsync ``path`` with, outside the log's lock (the caller closes it)."""
    return os.open(path, os.O_RDONLY)


class OffsetIndex:
    entry_size = _OFF.size

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._offsets: list[int] = []
        self._positions: list[int] = []
        self._written = 0  # entries already in the file; the rest wait in memory
        _touch(path)

    def load(self) -> None:
        """Read the file; raise CorruptIndexError if it cannot be an index of this segment."""
        data = _read_all(self.path)
        size = len(data)
        if size % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of 8")
        offsets: list[int] = []
        positions: list[int] = []
        for rel, pos in _OFF.iter_unpack(data):
            off = self.base_offset + rel
            if rel < 0 or (offsets and (off <= offsets[-1] or pos <= positions[-1])):
                raise CorruptIndexError(f"{self.path}: entries are not increasing")
            offsets.append(off)
            positions.append(pos)
        self._offsets, self._positions = offsets, positions
        self._written = len(offsets)

    @property
    def entries(self) -> int:
        return len(self._offsets)

    def write_pending(self) -> None:
        """Entries are kept in memory and written in bulk: one syscall per flush, not per batch.

        Safe because the file only ever holds a prefix of the entries (see the module's doc):
        a start that finds it short, or empty, still finds every batch.
        """
        n = len(self._offsets)
        if self._written < n:
            data = b"".join(
                _OFF.pack(o - self.base_offset, p)
                for o, p in zip(
                    self._offsets[self._written :], self._positions[self._written :], strict=True
                )
            )
            with _opened(self.path) as fd:
                pwrite_all(fd, data, self._written * self.entry_size)
            self._written = n

    def open_for_sync(self) -> int:
        """Write what waits, then a descriptor to fsync the file with (the caller closes it)."""
        self.write_pending()
        return _open_for_sync(self.path)

    @property
    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    def append(self, offset: int, position: int) -> None:
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            return
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, target: int) -> int:
        """Byte position from which a forward scan finds ``target`` (0 if before any entry)."""
        i = bisect.bisect_right(self._offsets, target) - 1
        return self._positions[i] if i >= 0 else 0

    def position_floor(self, position: int) -> int:
        """The largest indexed batch start at most ``position`` (0 if before any entry): where
        a range of whole batches ending near ``position`` can end, found without reading."""
        i = bisect.bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    @property
    def pending(self) -> bool:
        """Whether some entries are only in memory (see :meth:`write_pending`)."""
        return self._written < len(self._offsets)

    def check_against(self, log_size: int) -> None:
        """Raise CorruptIndexError if this cannot be the whole index of a log of ``log_size``.

        Our segments always index their first batch, so an empty index of a non-empty log was
        never written out (recovery rebuilt it in memory and the process died before a flush):
        it is rebuilt again rather than trusted, which would leave every lookup scanning from
        the segment's start for good.
        """
        if log_size > 0 and not self._positions:
            raise CorruptIndexError(f"{self.path}: no entry for a log of {log_size} bytes")
        if self._positions and self._positions[-1] >= log_size:
            raise CorruptIndexError(
                f"{self.path}: last entry points at {self._positions[-1]}, log has {log_size} bytes"
            )

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after ``position`` (the log is cut there)."""
        i = bisect.bisect_left(self._positions, position)
        del self._offsets[i:]
        del self._positions[i:]
        if i < self._written:
            self._written = i
            os.truncate(self.path, i * self.entry_size)

    def reset(self) -> None:
        """Forget every entry and empty the file (which may hold anything: it is rebuilt)."""
        self._offsets.clear()
        self._positions.clear()
        self._written = 0
        os.truncate(self.path, 0)

    def flush(self) -> None:
        self.write_pending()
        with _opened(self.path) as fd:
            os.fsync(fd)

    def close(self, *, write: bool = True) -> None:
        if write:
            self.write_pending()


class TimeIndex:
    entry_size = _TIME.size

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._timestamps: list[int] = []
        self._offsets: list[int] = []
        self._written = 0
        _touch(path)

    def load(self) -> None:
        data = _read_all(self.path)
        size = len(data)
        if size % self.entry_size:
            raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of 12")
        ts_list: list[int] = []
        offs: list[int] = []
        for ts, rel in _TIME.iter_unpack(data):
            off = self.base_offset + rel
            if rel < 0 or (offs and (ts < ts_list[-1] or off < offs[-1])):
                raise CorruptIndexError(f"{self.path}: entries are not increasing")
            ts_list.append(ts)
            offs.append(off)
        self._timestamps, self._offsets = ts_list, offs
        self._written = len(offs)

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def pending(self) -> bool:
        return self._written < len(self._offsets)

    def write_pending(self) -> None:
        n = len(self._offsets)
        if self._written < n:
            data = b"".join(
                _TIME.pack(t, o - self.base_offset)
                for t, o in zip(
                    self._timestamps[self._written :], self._offsets[self._written :], strict=True
                )
            )
            with _opened(self.path) as fd:
                pwrite_all(fd, data, self._written * self.entry_size)
            self._written = n

    def open_for_sync(self) -> int:
        """Write what waits, then a descriptor to fsync the file with (the caller closes it)."""
        self.write_pending()
        return _open_for_sync(self.path)

    @property
    def last_timestamp(self) -> int:
        return self._timestamps[-1] if self._timestamps else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._timestamps and timestamp <= self._timestamps[-1]:
            return
        self._timestamps.append(timestamp)
        self._offsets.append(offset)

    def lookup(self, timestamp: int) -> int:
        """Offset from which a scan finds the first batch with a timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self._timestamps, timestamp) - 1
        return self._offsets[i] if i >= 0 else self.base_offset

    def check_against(self, next_offset: int) -> None:
        if self._offsets and self._offsets[-1] >= next_offset:
            raise CorruptIndexError(
                f"{self.path}: last entry names offset {self._offsets[-1]}, "
                f"log ends at {next_offset}"
            )

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries naming ``offset`` or later."""
        i = bisect.bisect_left(self._offsets, offset)
        del self._offsets[i:]
        del self._timestamps[i:]
        if i < self._written:
            self._written = i
            os.truncate(self.path, i * self.entry_size)

    def reset(self) -> None:
        """Forget every entry and empty the file (which may hold anything: it is rebuilt)."""
        self._timestamps.clear()
        self._offsets.clear()
        self._written = 0
        os.truncate(self.path, 0)

    def flush(self) -> None:
        self.write_pending()
        with _opened(self.path) as fd:
            os.fsync(fd)

    def close(self, *, write: bool = True) -> None:
        if write:
            self.write_pending()
