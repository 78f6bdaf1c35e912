"""One Kafka protocol connection's bytes: size-prefixed frames in, bytes out (issue 18).

:class:`FrameConnection` is an ``asyncio.BufferedProtocol`` that one task drives, a frame at a
time: :meth:`~FrameConnection.read_size`, then :meth:`~FrameConnection.read_body`. A
follower's fetcher reads its leader's answers through one (``kafka.client``). Why not
asyncio's StreamReader: it appends what arrives to a buffer that grows by copies and copies a
frame out of it again, so a 1 MiB frame cost its reader 2-3 times the CPU and a 4 MiB one 6-7
times (bench/frame_read.py). Here a body up to half the small buffer is read in it and copied
out once; a larger one still arriving is received straight into a buffer of its own size,
taking what the kernel holds already at once (``readv``) rather than a receive per round of
the event loop.

Reading is driven by the task: once the small buffer is full and nobody reads, reading
pauses, so a connection never holds more than the small buffer and the one body being read. A
body's buffer is lent: :meth:`~FrameConnection.give_back` returns it for the next large body
when the owner allows keeping one (``keep_max_bytes``).

Not the listener's yet. Built on it with a 64 KiB small buffer (what a server can hold for each
of a thousand connections), the listener cut bench/kafka_protocol.py's RF 1 produce CPU per MB
by about a quarter (1 MiB requests; session 39, docs/benchmarks.md), but a request just past
the small buffer (64-128 KiB: a few of a default producer's 16 KiB batches) cost more to read
than StreamReader's did (bench/frame_read.py runs: 58-88 against 42-58 µs at 64 KiB), the
reader pausing and resuming and the bytes copied to the body's buffer, a receive later.
"""

from __future__ import annotations

import asyncio
import os

from .protocol import SIZE


class FrameCutShort(EOFError):
    """The peer closed inside a frame: ``got`` of the ``wanted`` bytes of its size prefix (4)
    or of its body had arrived."""

    def __init__(self, what: str, got: int, wanted: int) -> None:
        super().__init__(f"the connection closed {what} ({got} of {wanted} bytes)")
        self.got = got
        self.wanted = wanted


class FrameConnection(asyncio.BufferedProtocol):
    """A connection's frames for one reading task, and its writes.

    ``small_bytes``: the buffer every read goes into unless a large body is being received.
    ``keep_max_bytes``: a large body's buffer up to this size is kept for the next (0: none).
    Every error (the peer closing, the connection lost) is raised by the read or drain that
    meets it; a timeout is the caller's (``asyncio.timeout`` around a read), after which the
    connection must be closed: a read cut off in the middle leaves the stream out of step.
    """

    def __init__(self, small_bytes: int, keep_max_bytes: int = 0) -> None:
        self.transport: asyncio.Transport | None = None
        self._fd = -1
        """The socket's descriptor, for :meth:`_receive_now`."""
        self._small = bytearray(small_bytes)
        self._start = 0
        self._end = 0
        """The unread bytes: ``_small[_start:_end]``."""
        self._large: bytearray | None = None
        """A large body's buffer while it is received: ``_large_pos`` of ``_large_size``."""
        self._large_size = 0
        self._large_pos = 0
        self._keep_max = keep_max_bytes
        self._kept: bytearray | None = None
        self._paused = False
        self._eof = False
        self._lost: BaseException | None = None
        self._arrived: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- reading (the one task's side) --------------------------------------------------------

    async def read_size(self) -> int | None:
        """The next frame's size (as sent: it may be negative); None when the peer closed
        cleanly between frames, :class:`FrameCutShort` when it closed inside a size prefix."""
        while self._end - self._start < SIZE.size:
            if self._eof:
                if self._end > self._start:
                    raise FrameCutShort("inside a frame size", self._end - self._start, SIZE.size)
                return None
            await self._more()
        (size,) = SIZE.unpack_from(self._small, self._start)
        self._consumed(SIZE.size)
        # Paused, not compacted, when full: the body usually follows at once, and a large one
        # takes the unread bytes from where they are.
        self._make_room(compact=False)
        return int(size)

    async def read_body(self, size: int) -> tuple[bytearray | bytes, int]:
        """The ``size`` bytes after a size prefix: ``(buffer, size)``, the body being
        ``buffer[:size]`` (a lent buffer may be longer). :class:`FrameCutShort`, naming how
        much arrived, when the peer closes first."""
        if self._end - self._start >= size or size <= len(self._small) // 2:
            # Here already, or small: read from the small buffer and copied out. (A body
            # still arriving that would fill most of the buffer would pause and resume reading
            # and move bytes down for every frame: it gets a buffer of its own, as a large one.)
            if self._start + size > len(self._small):
                self._compact()
            while self._end - self._start < size:
                if self._eof:
                    raise FrameCutShort("inside a frame", self._end - self._start, size)
                await self._more()
            with memoryview(self._small) as view:
                body = bytes(view[self._start : self._start + size])
            self._consumed(size)
            self._make_room()
            return body, size
        kept = self._kept
        large = kept if kept is not None and len(kept) >= size else bytearray(size)
        if large is kept:
            self._kept = None
        have = self._end - self._start  # less than size: all of it is this body's
        with memoryview(self._small) as view:
            large[:have] = view[self._start : self._end]
        self._start = self._end = 0
        self._large, self._large_size, self._large_pos = large, size, have
        self._resume()
        try:
            self._receive_now()
            while self._large_pos < size:
                if self._eof:
                    raise FrameCutShort("inside a frame", self._large_pos, size)
                await self._more()
                self._receive_now()
        finally:
            self._large = None
            self._make_room()
        return large, size

    def _receive_now(self) -> None:
        """What of the large body being received is in the kernel already, received now by
        ``readv`` on the socket: the peer usually sent the whole frame, and each receive the
        transport makes costs a round of the event loop (a poll, a callback, the reader's
        wake-up). What is not there yet is left to the transport."""
        large = self._large
        if large is None or self._fd < 0:
            return
        with memoryview(large) as view:
            while self._large_pos < self._large_size:
                try:
                    n = os.readv(self._fd, [view[self._large_pos : self._large_size]])
                except OSError:
                    return  # nothing yet (EAGAIN), or an error the transport meets and reports
                if n == 0:
                    return  # the peer closed: the transport's next receive sees it too
                self._large_pos += n
        self._large = None  # whole: the next receive is the next frame's, into the small buffer

    def give_back(self, buffer: bytearray | bytes) -> None:
        """A large body's buffer, read and no longer referred to, for the next large body."""
        if (
            isinstance(buffer, bytearray)
            and len(buffer) <= self._keep_max
            and (self._kept is None or len(buffer) > len(self._kept))
        ):
            self._kept = buffer

    def _consumed(self, n: int) -> None:
        self._start += n
        if self._start == self._end:
            self._start = self._end = 0
        self._resume()

    def _compact(self) -> None:
        rest = self._end - self._start
        self._small[:rest] = self._small[self._start : self._end]
        self._start, self._end = 0, rest

    def _resume(self) -> None:
        if self._paused and self._end < len(self._small) and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    async def _more(self) -> None:
        self._make_room()
        self._resume()
        self._arrived = asyncio.get_running_loop().create_future()
        try:
            await self._arrived
        except BaseException:
            self._make_room()  # cancelled (a timeout): the reader stops here
            raise
        finally:
            self._arrived = None

    def _wake_reader(self) -> None:
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    # -- writing ------------------------------------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark;
        ConnectionResetError once the connection is lost (as a StreamWriter's drain)."""
        if self._lost is not None or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("Connection lost")
        if self._writable is not None:
            await asyncio.shield(self._writable)

    async def closed(self) -> None:
        await self._closed

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- asyncio's side -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        self._fd = sock.fileno() if sock is not None else -1

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_pos : self._large_size]
        return memoryview(self._small)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._large is not None:
            self._large_pos += nbytes
            if self._large_pos == self._large_size:
                # Whole: what arrives next is the next frame's, into the small buffer (a
                # get_buffer past the body's end would be empty, which asyncio refuses).
                self._large = None
                self._wake_reader()
            return
        self._end += nbytes
        if self._arrived is not None and not self._arrived.done():
            # The reader runs before this connection's next receive (asyncio queues a woken
            # task ahead of the next poll's callbacks), and makes room or pauses as it stops.
            self._arrived.set_result(None)
        else:
            self._make_room()

    def _make_room(self, compact: bool = True) -> None:
        """Where the reader stops reading (and as bytes arrive while it does not read): room
        at the small buffer's end for the next receive, by moving the unread bytes down, or
        reading paused when they fill it. (asyncio refuses an empty buffer to receive into.)"""
        if self._large is not None or self._end < len(self._small):
            return
        if self._start > 0 and compact:
            self._compact()
            self._resume()
        elif not self._paused and self.transport is not None:
            self._paused = True  # full: nothing more until the reader takes some
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        return True  # the write side stays open: a request already read is still answered

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc if exc is not None else ConnectionResetError("Connection lost")
        self._eof = True
        self._wake_reader()
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_exception(ConnectionResetError("Connection lost"))
            writable.exception()  # retrieved: a writer that never waited is not an error
        if not self._closed.done():
            self._closed.set_result(None)
