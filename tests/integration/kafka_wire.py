"""A bare Kafka protocol client for tests that send what real clients never would (issue 18).

Requests and responses are kio's entities, as in the broker: the bytes on the wire are what
Kafka's message definitions say, and a test can cut, lie about or corrupt them at will.
"""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32


def encode_request(body: Any, correlation_id: int = 1, *, version: int | None = None) -> bytes:
    """Size, header and body of ``body`` (a kio request entity); ``version`` overrides the
    header's version (to ask for one the broker does not speak)."""
    header_type: type[Any] = HeaderV2 if body.__flexible__ else HeaderV1
    buf = io.BytesIO()
    entity_writer(header_type)(
        buf,
        header_type(
            request_api_key=i16(body.__api_key__),
            request_api_version=i16(body.__version__ if version is None else version),
            correlation_id=i32(correlation_id),
            client_id="kafka-wire-test",
        ),
    )
    entity_writer(type(body))(buf, body)
    raw = buf.getvalue()
    return struct.pack(">i", len(raw)) + raw


async def read_response(
    reader: asyncio.StreamReader, api_key: int, version: int
) -> tuple[int, Any]:
    """``(correlation_id, response entity)`` of the next frame."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    raw = await reader.readexactly(size)
    response_type: type[Any] = load_response_schema(api_key, version)
    header, used = entity_reader(response_type.__header_schema__)(raw, 0)
    body, _ = entity_reader(response_type)(raw, used)
    return header.correlation_id, body


async def call(endpoint: str, body: Any, timeout_s: float = 10) -> Any:
    """One request on a new connection, its response."""
    host, port = endpoint.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(encode_request(body))
        await writer.drain()
        async with asyncio.timeout(timeout_s):
            _, resp = await read_response(reader, body.__api_key__, body.__version__)
        return resp
    finally:
        writer.close()


async def closed_by_peer(reader: asyncio.StreamReader, timeout_s: float = 10) -> bool:
    """Whether the broker closes the connection (EOF or a reset) without answering."""
    try:
        async with asyncio.timeout(timeout_s):
            return await reader.read(1) == b""
    except ConnectionResetError:
        return True
