"""A small Kafka protocol client: what a follower needs to replicate from its leader (issue 18).

One connection to one broker's Kafka listener, one request in flight at a time (a follower's
fetcher sends OffsetForLeaderEpoch, then Fetch, then the next Fetch, each after the last
answer). Every request and response is kio's entity of its API and version, framed as
:mod:`.protocol` reads them on the listener: a size, the request header the body's definition
names (v1, or v2 for flexible versions), the body; the response header (v0, or v1) carries the
correlation id, which must be the request's. Nothing here spells a field.

Responses are received by :class:`ResponseFrames`, an ``asyncio.BufferedProtocol``: a frame
larger than its small-frame buffer is received straight into a buffer of the frame's size, kept
for the next one. asyncio's StreamReader, which this replaced, grows its buffer by copies as
the bytes arrive and copies the frame out again; a leader's 1 MiB answer cost the follower
about seven times as much CPU that way (bench/frame_read.py).

The connection opens on the first request and closes on any error (a refused connection, a
timeout, a frame that does not decode, a correlation id that is not ours, a frame nobody asked
for): the caller sees :class:`LeaderConnectionError`, backs off, and the next request opens a
new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kio.serial import entity_reader

from ..errors import KafkaError
from .protocol import SIZE, encode_request, response_schema

SMALL_FRAME_BYTES = 256 * 1024
"""The buffer that takes each frame's size and a frame up to this long whole (one receive for a
small answer: the size and the frame together, then one copy out); a longer frame gets a buffer
of its own size. bench/frame_read.py, the client's CPU per frame with this at 16, 64 and
256 KiB: 256 KiB was the cheapest or within noise of it at every frame size from 16 KiB to
4 MiB, and cheaper than asyncio's StreamReader at every one."""

KEPT_BUFFER_MAX_BYTES = 16 * 1024 * 1024
"""A large frame's buffer is kept for the next large frame up to this size; a larger one is
dropped once its frame is read (a follower's answers are ``replica.fetch.response.max.bytes``,
10 MiB by default, at most)."""


class LeaderConnectionError(KafkaError):
    """The leader's Kafka listener could not be reached or answered nonsense: reconnect."""

    kafka_error = "BROKER_NOT_AVAILABLE"


class ResponseFrames(asyncio.BufferedProtocol):
    """Receives size-prefixed frames for one request at a time.

    :meth:`expect` arms a future before the request is written; the frame that follows
    completes it with ``(buffer, size)``: the frame is ``buffer[:size]``. A large frame's
    buffer is lent, not given: after reading the frame the caller hands it back with
    :meth:`give_back`, and it receives the next large frame (no allocation and no page faults
    per frame). A frame larger than ``max_frame`` (checked from its size, before any of it is
    received), a frame while no request waits, or the connection closing fails the waiting
    future, and every later one.
    """

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.transport: asyncio.Transport | None = None
        self._small = bytearray(SMALL_FRAME_BYTES)
        self._filled = 0
        """Bytes received into ``_small`` and not yet taken as a frame."""
        self._large: bytearray | None = None
        """The buffer of the large frame being received, ``_large_size`` bytes long of which
        ``_large_pos`` have arrived."""
        self._large_size = 0
        self._large_pos = 0
        self._kept: bytearray | None = None
        self._waiter: asyncio.Future[tuple[bytearray | bytes, int]] | None = None
        self._error: BaseException | None = None
        self._writable: asyncio.Future[None] | None = None
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # -- the caller's side --------------------------------------------------------------------

    def expect(self) -> asyncio.Future[tuple[bytearray | bytes, int]]:
        """The future of the next frame; arm it before writing the request it answers."""
        fut: asyncio.Future[tuple[bytearray | bytes, int]] = (
            asyncio.get_running_loop().create_future()
        )
        if self._error is not None:
            fut.set_exception(self._error)
        else:
            self._waiter = fut
        return fut

    def give_back(self, buffer: bytearray | bytes) -> None:
        """A large frame's buffer, read and no longer referred to (kio's readers return copies),
        for the next large frame."""
        if (
            isinstance(buffer, bytearray)
            and len(buffer) <= KEPT_BUFFER_MAX_BYTES
            and (self._kept is None or len(buffer) > len(self._kept))
        ):
            self._kept = buffer

    async def writable(self) -> None:
        """Wait while the transport's write buffer is over its high-water mark."""
        if self._writable is not None:
            await asyncio.shield(self._writable)
        if self._error is not None:
            raise self._error

    async def closed(self) -> None:
        await self._closed

    # -- asyncio's side -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._large is not None:
            return memoryview(self._large)[self._large_pos : self._large_size]
        return memoryview(self._small)[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._large is not None:
            self._large_pos += nbytes
            if self._large_pos == self._large_size:
                frame, self._large = self._large, None
                self._deliver(frame, self._large_size)
            return
        self._filled += nbytes
        self._take_frames()

    def _take_frames(self) -> None:
        small, pos = self._small, 0
        while self._error is None and self._filled - pos >= SIZE.size:
            (size,) = SIZE.unpack_from(small, pos)
            if not 0 <= size <= self.max_frame:
                self._fail(
                    ValueError(f"a response frame of {size} bytes (at most {self.max_frame})")
                )
                return
            start = pos + SIZE.size
            have = self._filled - start
            if have >= size:
                pos = start + size
                with memoryview(small) as view:
                    frame = bytes(view[start:pos])  # one copy: the small buffer takes the next
                self._deliver(frame, size)
            elif SIZE.size + size <= len(small):
                break  # the rest of a small frame is still to come
            else:
                large = self._kept if self._kept is not None and len(self._kept) >= size else None
                self._kept = None if large is not None else self._kept
                large = large if large is not None else bytearray(size)
                with memoryview(small) as view:
                    large[:have] = view[start : self._filled]
                self._large, self._large_size, self._large_pos = large, size, have
                pos = self._filled
                break
        if pos:
            rest = self._filled - pos
            small[:rest] = small[pos : self._filled]
            self._filled = rest

    def _deliver(self, frame: bytearray | bytes, size: int) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None or waiter.done():
            self._fail(ValueError("a response frame while no request was waiting"))
            return
        waiter.set_result((frame, size))

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(self._error)
        self._wake_writers()
        if self.transport is not None:
            self.transport.close()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake_writers()

    def _wake_writers(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def eof_received(self) -> bool | None:
        self._fail(EOFError("the leader closed the connection"))
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else EOFError("the connection closed"))
        self._large = None
        if not self._closed.done():
            self._closed.set_result(None)


def _decode(entity_type: type[Any], raw: memoryview, offset: int) -> tuple[Any, int]:
    """kio's reader of ``entity_type`` at ``offset``; ValueError naming what was wrong."""
    try:
        return entity_reader(entity_type)(raw, offset)
    except Exception as e:  # kio's DecodeErrors and ValueErrors, BufferUnderflow when cut short
        raise ValueError(f"malformed response: {type(e).__name__}: {e}") from e


class KafkaConnection:
    """One connection to ``host:port``, opened on demand, requests answered one at a time."""

    def __init__(self, host: str, port: int, *, client_id: str, max_response_bytes: int) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        """A response frame larger than this closes the connection before it is read."""
        self._frames: ResponseFrames | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._frames is not None

    async def request(self, body: Any, timeout_s: float) -> Any:
        """Send ``body`` (a kio request entity) and return the response entity of the same API
        and version; :class:`LeaderConnectionError` (the connection closed) on any failure."""
        async with self._lock:
            try:
                async with asyncio.timeout(timeout_s):
                    return await self._exchange(body)
            except (OSError, EOFError, TimeoutError, ValueError) as e:
                await self.close()
                raise LeaderConnectionError(
                    f"Kafka listener {self.host}:{self.port}: {type(e).__name__}: {e}"
                ) from e
            except BaseException:
                await self.close()  # cancelled mid-request: the stream is out of step
                raise

    async def _exchange(self, body: Any) -> Any:
        frames = self._frames
        if frames is None:
            max_frame = self.max_response_bytes
            _, frames = await asyncio.get_running_loop().create_connection(
                lambda: ResponseFrames(max_frame), self.host, self.port
            )
            self._frames = frames
        assert frames.transport is not None
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        answer = frames.expect()
        frames.transport.write(self._frame(body, cid))
        await frames.writable()
        buffer, size = await answer
        try:
            return self._parse(body, cid, buffer, size)
        finally:
            frames.give_back(buffer)

    @staticmethod
    def _parse(body: Any, cid: int, buffer: bytearray | bytes, size: int) -> Any:
        response_type = response_schema(body.__api_key__, body.__version__)
        with memoryview(buffer) as whole, whole[:size] as frame, frame.toreadonly() as raw:
            header, used = _decode(response_type.__header_schema__, raw, 0)
            if header.correlation_id != cid:
                raise ValueError(f"correlation id {header.correlation_id}, expected {cid}")
            response, _ = _decode(response_type, raw, used)
        return response

    def _frame(self, body: Any, correlation_id: int) -> bytes:
        return encode_request(correlation_id, self.client_id, body)

    async def close(self) -> None:
        frames, self._frames = self._frames, None
        if frames is not None and frames.transport is not None:
            frames.transport.close()
            with contextlib.suppress(Exception):
                await frames.closed()
