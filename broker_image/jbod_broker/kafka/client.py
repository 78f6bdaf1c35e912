"""A small Kafka protocol client: what a follower needs to replicate from its leader (issue 18).

One connection to one broker's Kafka listener, one request in flight at a time (a follower's
fetcher sends OffsetForLeaderEpoch, then Fetch, then the next Fetch, each after the last
answer). Every request and response is kio's entity of its API and version, framed as
:mod:`.protocol` reads them on the listener: a size, the request header the body's definition
names (v1, or v2 for flexible versions), the body; the response header (v0, or v1) carries the
correlation id, which must be the request's. Nothing here spells a field.

Answers are read through :class:`.connection.FrameConnection`: an answer up to
:data:`SMALL_FRAME_BYTES` arrives with its size in one receive, a larger one straight into a
buffer of its size that is kept for the next (a follower's answers are large while it catches
up, 1 MiB per partition).

The connection opens on the first request and closes on any error (a refused connection, a
timeout, a frame that does not decode, a correlation id that is not ours): the caller sees
:class:`LeaderConnectionError`, backs off, and the next request opens a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..errors import KafkaError
from .connection import FrameConnection
from .protocol import ProtocolError, encode_request, parse_response

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


class KafkaConnection:
    """One connection to ``host:port``, opened on demand, requests answered one at a time."""

    def __init__(self, host: str, port: int, *, client_id: str, max_response_bytes: int) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        """A response frame larger than this closes the connection before it is read."""
        self._conn: FrameConnection | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._conn is not None

    async def request(self, body: Any, timeout_s: float) -> Any:
        """Send ``body`` (a kio request entity) and return the response entity of the same API
        and version; :class:`LeaderConnectionError` (the connection closed) on any failure."""
        async with self._lock:
            try:
                async with asyncio.timeout(timeout_s):
                    return await self._exchange(body)
            except (OSError, EOFError, TimeoutError, ValueError, ProtocolError) as e:
                await self.close()
                raise LeaderConnectionError(
                    f"Kafka listener {self.host}:{self.port}: {type(e).__name__}: {e}"
                ) from e
            except BaseException:
                await self.close()  # cancelled mid-request: the stream is out of step
                raise

    async def _exchange(self, body: Any) -> Any:
        conn = self._conn
        if conn is None:
            _, conn = await asyncio.get_running_loop().create_connection(
                lambda: FrameConnection(SMALL_FRAME_BYTES, KEPT_BUFFER_MAX_BYTES),
                self.host,
                self.port,
            )
            self._conn = conn
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        conn.write(self._frame(body, cid))
        await conn.drain()
        size = await conn.read_size()
        if size is None:
            raise EOFError("the leader closed the connection")
        if not 0 <= size <= self.max_response_bytes:
            raise ValueError(
                f"a response frame of {size} bytes (at most {self.max_response_bytes})"
            )
        buffer, size = await conn.read_body(size)
        try:
            with memoryview(buffer) as whole, whole[:size] as frame, frame.toreadonly() as raw:
                return parse_response(body.__api_key__, body.__version__, cid, raw)
        finally:
            conn.give_back(buffer)

    def _frame(self, body: Any, correlation_id: int) -> bytes:
        return encode_request(correlation_id, self.client_id, body)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await conn.closed()
