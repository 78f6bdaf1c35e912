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
thread-safe: the owning :class:`Log` serialises writers. Both share
:class:`AbstractIndex`, as in Kafka.

No descriptor is kept (issue 14): the file is opened for the moment it is read (at load),
written (a flush, a roll, a close) or cut, so an idle replica holds none, as Kafka opens its
indexes lazily. The file itself is made when the index is (an empty one), as before.
"""

from __future__ import annotations

import bisect
import os
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

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


class AbstractIndex(ABC):
    """What both indexes share (Kafka's ``AbstractIndex``): a file of fixed-size entries,
    each two int columns, a key that only grows and its value, kept as two parallel lists; the
    file holds a prefix of them (``_written``), the rest waits in memory until a flush, a roll
    or a close writes it in one call. A subclass names its format (:attr:`entry`, the columns'
    order in the file, relative offsets) and what "increasing" means for it."""

    entry: ClassVar[struct.Struct]

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._keys: list[int] = []
        self._values: list[int] = []
        self._written = 0  # entries already in the file; the rest wait in memory
        _touch(path)

    @property
    def entry_size(self) -> int:
        return self.entry.size

    @abstractmethod
    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        """One file entry as (key, value), absolute offsets."""

    @abstractmethod
    def _encode(self, key: int, value: int) -> bytes:
        """One entry in the file's bytes."""

    @abstractmethod
    def _follows(self, keys: list[int], values: list[int], key: int, value: int) -> bool:
        """Whether (key, value) may follow the entries read so far (the file's order)."""

    def load(self) -> None:
        """Read the file; raise CorruptIndexError if it cannot be an index of this segment."""
        data = _read_all(self.path)
        size = len(data)
        if size % self.entry_size:
            raise CorruptIndexError(
                f"{self.path}: size {size} is not a multiple of {self.entry_size}"
            )
        keys: list[int] = []
        values: list[int] = []
        for raw in self.entry.iter_unpack(data):
            key, value = self._decode(raw)
            if not self._follows(keys, values, key, value):
                raise CorruptIndexError(f"{self.path}: entries are not increasing")
            keys.append(key)
            values.append(value)
        self._keys, self._values = keys, values
        self._written = len(keys)

    @property
    def entries(self) -> int:
        return len(self._keys)

    @property
    def pending(self) -> bool:
        """Whether some entries are only in memory (see :meth:`write_pending`)."""
        return self._written < len(self._keys)

    def write_pending(self) -> None:
        """Entries are kept in memory and written in bulk: one syscall per flush, not per batch.

        Safe because the file only ever holds a prefix of the entries (see the module's doc):
        a start that finds it short, or empty, still finds every batch.
        """
        n = len(self._keys)
        if self._written < n:
            data = b"".join(
                self._encode(k, v)
                for k, v in zip(
                    self._keys[self._written :], self._values[self._written :], strict=True
                )
            )
            with _opened(self.path) as fd:
                pwrite_all(fd, data, self._written * self.entry_size)
            self._written = n

    def open_for_sync(self) -> int:
        """Write what waits, then a descriptor to fsync the file with (the caller closes it)."""
        self.write_pending()
        return _open_for_sync(self.path)

    def _truncate_entries(self, i: int) -> None:
        """Keep the first ``i`` entries, in memory and in the file."""
        del self._keys[i:]
        del self._values[i:]
        if i < self._written:
            self._written = i
            os.truncate(self.path, i * self.entry_size)

    def reset(self) -> None:
        """Forget every entry and empty the file (which may hold anything: it is rebuilt)."""
        self._keys.clear()
        self._values.clear()
        self._written = 0
        os.truncate(self.path, 0)

    def flush(self) -> None:
        self.write_pending()
        with _opened(self.path) as fd:
            os.fsync(fd)

    def close(self, *, write: bool = True) -> None:
        if write:
            self.write_pending()


class OffsetIndex(AbstractIndex):
    """``.index``: key the last offset of a batch, value its byte position; in the file
    (offset - base) int32 then position int32. Both columns strictly increase."""

    entry = _OFF

    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        rel, pos = raw
        return (self.base_offset + rel if rel >= 0 else -1), pos

    def _encode(self, key: int, value: int) -> bytes:
        return _OFF.pack(key - self.base_offset, value)

    def _follows(self, keys: list[int], values: list[int], key: int, value: int) -> bool:
        return key >= 0 and (not keys or (key > keys[-1] and value > values[-1]))

    @property
    def last_position(self) -> int:
        return self._values[-1] if self._values else 0

    def append(self, offset: int, position: int) -> None:
        if self._keys and (offset <= self._keys[-1] or position <= self._values[-1]):
            return
        self._keys.append(offset)
        self._values.append(position)

    def lookup(self, target: int) -> int:
        """Byte position from which a forward scan finds ``target`` (0 if before any entry)."""
        i = bisect.bisect_right(self._keys, target) - 1
        return self._values[i] if i >= 0 else 0

    def position_floor(self, position: int) -> int:
        """The largest indexed batch start at most ``position`` (0 if before any entry): where
        a range of whole batches ending near ``position`` can end, found without reading."""
        i = bisect.bisect_right(self._values, position) - 1
        return self._values[i] if i >= 0 else 0

    def check_against(self, log_size: int) -> None:
        """Raise CorruptIndexError if this cannot be the whole index of a log of ``log_size``.

        Our segments always index their first batch, so an empty index of a non-empty log was
        never written out (recovery rebuilt it in memory and the process died before a flush):
        it is rebuilt again rather than trusted, which would leave every lookup scanning from
        the segment's start for good.
        """
        if log_size > 0 and not self._values:
            raise CorruptIndexError(f"{self.path}: no entry for a log of {log_size} bytes")
        if self._values and self._values[-1] >= log_size:
            raise CorruptIndexError(
                f"{self.path}: last entry points at {self._values[-1]}, log has {log_size} bytes"
            )

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after ``position`` (the log is cut there)."""
        self._truncate_entries(bisect.bisect_left(self._values, position))


class TimeIndex(AbstractIndex):
    """``.timeindex``: key the largest timestamp so far, value the offset of the batch that
    carried it; in the file timestamp int64 then (offset - base) int32. Neither column
    decreases in the file; an append needs a larger timestamp."""

    entry = _TIME

    def _decode(self, raw: tuple[int, int]) -> tuple[int, int]:
        ts, rel = raw
        return ts, (self.base_offset + rel if rel >= 0 else -1)

    def _encode(self, key: int, value: int) -> bytes:
        return _TIME.pack(key, value - self.base_offset)

    def _follows(self, keys: list[int], values: list[int], key: int, value: int) -> bool:
        return value >= 0 and (not keys or (key >= keys[-1] and value >= values[-1]))

    @property
    def last_timestamp(self) -> int:
        return self._keys[-1] if self._keys else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if self._keys and timestamp <= self._keys[-1]:
            return
        self._keys.append(timestamp)
        self._values.append(offset)

    def lookup(self, timestamp: int) -> int:
        """Offset from which a scan finds the first batch with a timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self._keys, timestamp) - 1
        return self._values[i] if i >= 0 else self.base_offset

    def check_against(self, next_offset: int) -> None:
        if self._values and self._values[-1] >= next_offset:
            raise CorruptIndexError(
                f"{self.path}: last entry names offset {self._values[-1]}, "
                f"log ends at {next_offset}"
            )

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries naming ``offset`` or later."""
        self._truncate_entries(bisect.bisect_left(self._values, offset))
