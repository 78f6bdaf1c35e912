"""Copy byte ranges between files with the kernel's zero-copy paths.

``os.copy_file_range`` first (the data never enters user space; within one filesystem it may
even share extents), then ``os.sendfile`` (Linux refuses ``copy_file_range`` across most
filesystem pairs with ``EXDEV``; ``sendfile`` splices page-cache pages instead), then a
buffered ``pread``/``pwrite`` loop with a buffer of at least 1 MiB. A method the kernel refuses
for a pair of files (``EXDEV``, ``EINVAL``, ``ENOSYS``, ``EOPNOTSUPP``) is dropped for the rest
of the copier's life, so each move settles on the best method after one try.

A real I/O error has to take the right log directory offline (KIP-112), but a zero-copy call
cannot say which side failed. The copier re-tries a small piece of the range with a plain read
and a plain write to find out, and raises :class:`CopyIOError` naming the side.

Not thread-safe: one copier per move.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

MIN_BUFFER = 1024 * 1024
_PROBE = 64 * 1024
_UNSUPPORTED = frozenset({errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP})
_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

Side = Literal["source", "destination"]


class CopyMethod(StrEnum):
    COPY_FILE_RANGE = "copy_file_range"
    SENDFILE = "sendfile"
    BUFFERED = "buffered"


ALL_METHODS: tuple[CopyMethod, ...] = (
    CopyMethod.COPY_FILE_RANGE,
    CopyMethod.SENDFILE,
    CopyMethod.BUFFERED,
)


class CopyIOError(Exception):
    """An I/O error while copying, attributed to the file (and so the directory) that failed."""

    def __init__(self, side: Side, error: OSError) -> None:
        super().__init__(f"{side}: {error}")
        self.side: Side = side
        self.error = error


class FileCopier:
    def __init__(
        self, methods: Sequence[CopyMethod] = ALL_METHODS, *, buffer_size: int = MIN_BUFFER
    ) -> None:
        if not methods:
            raise ValueError("at least one copy method is needed")
        self._methods = [m for m in ALL_METHODS if m in methods]
        if CopyMethod.BUFFERED not in self._methods:
            self._methods.append(CopyMethod.BUFFERED)  # the fallback that always works
        self._buffer_size = max(buffer_size, MIN_BUFFER)
        self.bytes_by_method: dict[CopyMethod, int] = dict.fromkeys(ALL_METHODS, 0)

    @property
    def method(self) -> CopyMethod:
        """The method the next copy will try first."""
        return self._methods[0]

    def copy(self, src_fd: int, dst_fd: int, src_off: int, dst_off: int, length: int) -> int:
        """Copy ``length`` bytes; returns the bytes copied, fewer only at the source's end."""
        done = 0
        while done < length:
            method = self._methods[0]
            try:
                n = self._once(
                    method, src_fd, dst_fd, src_off + done, dst_off + done, length - done
                )
            except OSError as e:
                if method is not CopyMethod.BUFFERED and e.errno in _UNSUPPORTED:
                    self._methods.pop(0)
                    continue
                side = self._attribute(e, src_fd, dst_fd, src_off + done, dst_off + done)
                if side is None:
                    # Neither side fails a plain read and write: give up on this method.
                    self._methods.pop(0)
                    continue
                raise CopyIOError(side, e) from e
            if n == 0:
                break  # end of the source file (it was truncated under us)
            self.bytes_by_method[method] += n
            done += n
        return done

    def _once(
        self, method: CopyMethod, src_fd: int, dst_fd: int, src_off: int, dst_off: int, n: int
    ) -> int:
        if method is CopyMethod.COPY_FILE_RANGE:
            return os.copy_file_range(src_fd, dst_fd, n, src_off, dst_off)
        if method is CopyMethod.SENDFILE:
            os.lseek(dst_fd, dst_off, os.SEEK_SET)
            return os.sendfile(dst_fd, src_fd, src_off, n)
        try:
            data = os.pread(src_fd, min(n, self._buffer_size), src_off)
        except OSError as e:
            raise CopyIOError("source", e) from e
        view = memoryview(data)
        pos = dst_off
        try:
            while view:
                w = os.pwrite(dst_fd, view, pos)
                view = view[w:]
                pos += w
        except OSError as e:
            raise CopyIOError("destination", e) from e
        return len(data)

    @staticmethod
    def _attribute(e: OSError, src_fd: int, dst_fd: int, src_off: int, dst_off: int) -> Side | None:
        """Which side made a zero-copy call fail: try a plain read, then a plain write."""
        if e.errno in _SPACE:
            return "destination"
        try:
            data = os.pread(src_fd, _PROBE, src_off)
        except OSError:
            return "source"
        try:
            if data:
                os.pwrite(dst_fd, data, dst_off)  # the right bytes at the right place
            os.fstat(dst_fd)
        except OSError:
            return "destination"
        return None
