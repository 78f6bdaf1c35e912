"""A small Kafka protocol client: what a follower needs to replicate from its leader (issue 18).

One connection to one broker's Kafka listener, one request in flight at a time (a follower's
fetcher sends OffsetForLeaderEpoch, then Fetch, then the next Fetch, each after the last
answer). Every request and response is kio's entity of its API and version, framed as
:mod:`.protocol` reads them on the listener: a size, the request header the body's definition
names (v1, or v2 for flexible versions), the body; the response header (v0, or v1) carries the
correlation id, which must be the request's. Nothing here spells a field.

The connection opens on the first request and closes on any error (a refused connection, a
timeout, a frame that does not decode, a correlation id that is not ours): the caller sees
:class:`LeaderConnectionError`, backs off, and the next request opens a new connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kio.serial import entity_reader

from ..errors import KafkaError
from .protocol import SIZE, encode_request, response_schema


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
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def request(self, body: Any, timeout_s: float) -> Any:
        """Send ``body`` (a kio request entity) and return the response entity of the same API
        and version; :class:`LeaderConnectionError` (the connection closed) on any failure."""
        async with self._lock:
            try:
                async with asyncio.timeout(timeout_s):
                    return await self._exchange(body)
            except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError, ValueError) as e:
                await self.close()
                raise LeaderConnectionError(
                    f"Kafka listener {self.host}:{self.port}: {type(e).__name__}: {e}"
                ) from e
            except BaseException:
                await self.close()  # cancelled mid-request: the stream is out of step
                raise

    async def _exchange(self, body: Any) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        self._writer.write(self._frame(body, cid))
        await self._writer.drain()
        (size,) = SIZE.unpack(await self._reader.readexactly(SIZE.size))
        if not 0 <= size <= self.max_response_bytes:
            raise ValueError(
                f"a response frame of {size} bytes (at most {self.max_response_bytes})"
            )
        raw = await self._reader.readexactly(size)
        response_type = response_schema(body.__api_key__, body.__version__)
        try:
            header, used = entity_reader(response_type.__header_schema__)(raw, 0)
            if header.correlation_id != cid:
                raise ValueError(f"correlation id {header.correlation_id}, expected {cid}")
            response, _ = entity_reader(response_type)(raw, used)
        except ValueError:
            raise
        except Exception as e:  # kio's DecodeErrors, IndexError on a frame cut short
            raise ValueError(f"malformed response: {type(e).__name__}: {e}") from e
        return response

    def _frame(self, body: Any, correlation_id: int) -> bytes:
        return encode_request(correlation_id, self.client_id, body)

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
