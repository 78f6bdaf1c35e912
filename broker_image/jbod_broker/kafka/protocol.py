"""Kafka's framing, request headers and the API versions this broker speaks; pure (no I/O).

A request is a 4-byte big-endian size and that many bytes: a request header (v1, or v2 with
tagged fields for a flexible version), then the body. Which header a request carries depends
on its API key and version, read from the first four bytes. A response is a size, a response
header (v0, or v1 for flexible versions; ApiVersions always v0, KIP-511) and the body. Every
header and body is one of kio's entities, generated from Kafka's JSON message definitions,
decoded by kio's readers and encoded by writers compiled from the same definitions
(:mod:`.writer`, byte for byte kio's): nothing here spells a field.

What cannot be answered closes the connection, as Kafka's SocketServer does: an unknown API
key, a version outside the advertised range (except ApiVersions, which is answered with v0 and
UNSUPPORTED_VERSION so that a client can retry with one the broker knows), and a request that
does not decode (cut short, or a length running past its end).

Thread-safety: constant tables and pure functions.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import struct
import sys
import typing
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader
from kio.static.primitive import i32

from .writer import join_pieces, writer_for

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23

SUPPORTED: dict[int, tuple[int, int]] = {
    # Kafka 4.x's minimums (KIP-896 removed the older ones). Produce v13 and Fetch v13 name
    # topics by topic ID (KIP-516), which this broker does not have yet: their highest
    # versions that name topics are advertised instead.
    PRODUCE: (3, 12),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 10),
    METADATA: (0, 12),
    API_VERSIONS: (0, 4),
    INIT_PRODUCER_ID: (0, 5),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
}
"""API key -> (min, max) version: what ApiVersions advertises and the only requests served."""

SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
HEADER_MIN_BYTES = 8
"""API key, version and correlation ID: the least a request must carry to be answered."""


class ProtocolError(Exception):
    """A request that cannot be answered, or a response that does not decode as the request's
    answer: the connection closes (the message says why)."""


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    body: Any
    """The kio request entity of ``(api_key, version)``; ``None`` for an ApiVersions request
    of a version this broker does not know (answered with v0 and UNSUPPORTED_VERSION)."""

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"api key {api_key}")


def parse_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode one request (the bytes after its size); :class:`ProtocolError` if it cannot be
    answered."""
    if len(frame) < HEADER_MIN_BYTES:
        raise ProtocolError(f"a request of {len(frame)} bytes has no complete header")
    api_key, version = _KEY_VERSION.unpack_from(frame, 0)
    supported = SUPPORTED.get(api_key)
    if supported is None:
        raise ProtocolError(f"{api_name(api_key)} (key {api_key}) is not served by this broker")
    lo, hi = supported
    if not lo <= version <= hi:
        if api_key != API_VERSIONS:
            raise ProtocolError(
                f"{api_name(api_key)} v{version} is not supported (versions {lo}-{hi})"
            )
        # A newer client's ApiVersions: its header is flexible from v3 on (as Kafka reads it);
        # the body is not read, and the answer says which versions to retry with.
        header_type: type[Any] = RequestHeaderV2 if version >= 3 else RequestHeaderV1
        header, _ = _read(header_type, frame, 0, "ApiVersions request header")
        return Request(api_key, version, header.correlation_id, header.client_id, None)
    try:
        request_type = request_schema(api_key, version)
    except KioIndexError as e:  # pragma: no cover - SUPPORTED names kio's versions only
        raise ProtocolError(str(e)) from e
    header, used = _read(request_type.__header_schema__, frame, 0, "request header")
    # Bytes after the body are ignored, as Kafka's generated parsers ignore them: librdkafka
    # 2.x sends three after a Metadata v12 body (an extra empty tagged-field section).
    body, _ = _read(request_type, frame, used, f"{api_name(api_key)} v{version} body")
    _refuse_nulls(body, request_type, f"{api_name(api_key)} v{version}")
    return Request(api_key, version, header.correlation_id, header.client_id, body)


COLLECTOR_PAUSED_MIN_BYTES = 64 * 1024
"""Frames this big or bigger are decoded with the cyclic collector paused
(:func:`parse_large_request`). kio's native readers build one object per entry while holding
the GIL (a thread would not let the loop run: measured, a 100,000-topic Metadata decoded in a
thread held the loop as long as on it), and every 700 of them the collector walks the young
objects again, all alive and none in a cycle: that was 60-85 % of the decode (Metadata naming
100,000 topics, 800 KB: 59-117 ms, 10-11 ms paused; a Fetch of 25,000 partitions 5-48 ms,
3.4 ms paused; a broker's frozen heap makes the collections cheaper but not free). Below,
a frame holds too few entries for a collection to matter, and produce requests (16 KiB-1 MiB)
decode to a few objects whatever their size: the pause costs them two calls."""


def parse_large_request(frame: bytes | bytearray | memoryview) -> Request:
    """:func:`parse_request` with the cyclic collector paused (if it runs) while kio builds
    the request (:data:`COLLECTOR_PAUSED_MIN_BYTES`): nothing the decode makes can be a
    cycle, so there is nothing for the collector to find, and it runs once after instead of
    hundreds of times during. The collector is process-wide: another thread allocating
    meanwhile is only collected later."""
    if not gc.isenabled():
        return parse_request(frame)
    gc.disable()
    try:
        return parse_request(frame)
    finally:
        gc.enable()


def _refuse_nulls(entity: Any, entity_type: type[Any], where: str) -> None:
    """ProtocolError for an array the message definition does not let be null, read as null:
    kio's readers give ``None`` for a null array whatever its definition says (a null string
    where none may be is already their error), and Kafka's generated readers refuse it ("non-
    nullable field ... was serialized as null") so the request never reaches a handler. Only
    the fields that can hold such an array are visited (:func:`_null_checks`): a follower's
    Fetch of many partitions checks its topics, not every partition."""
    for name, nested, nullable in _null_checks(entity_type):  # type: ignore[arg-type]  # hashable
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                raise ProtocolError(f"malformed {where} body: the array {name} is null")
        elif nested is not None:
            for item in value:
                _refuse_nulls(item, nested, where)


@functools.cache
def _null_checks(entity_type: type[Any]) -> tuple[tuple[str, type[Any] | None, bool], ...]:
    """``(field, element entity to visit, nullable)`` for each array field of an entity type
    that is not nullable itself or holds entities with such fields, once per type."""
    hints = typing.get_type_hints(entity_type)
    out: list[tuple[str, type[Any] | None, bool]] = []
    for f in dataclasses.fields(entity_type):
        hint = hints[f.name]
        args = typing.get_args(hint)
        nullable = type(None) in args
        array = next((a for a in (hint, *args) if typing.get_origin(a) is tuple), None)
        if array is None:
            continue
        element: type[Any] = typing.get_args(array)[0]
        nested = element if dataclasses.is_dataclass(element) and _null_checks(element) else None
        if not nullable or nested is not None:
            out.append((f.name, nested, nullable))
    return tuple(out)


def parse_response(
    api_key: int, version: int, correlation_id: int, frame: bytes | memoryview
) -> Any:
    """Decode the response to the request ``(api_key, version)`` sent with ``correlation_id``
    (the bytes after its size; kio's readers take read-only buffers and return copies, so
    nothing decoded refers to ``frame``); :class:`ProtocolError` if it is not that answer."""
    response_type = response_schema(api_key, version)
    header, used = _read(response_type.__header_schema__, frame, 0, "response header")
    if header.correlation_id != correlation_id:
        raise ProtocolError(f"correlation id {header.correlation_id}, expected {correlation_id}")
    response, _ = _read(response_type, frame, used, "response")
    return response


def _read(
    entity_type: type[Any], frame: bytes | bytearray | memoryview, offset: int, what: str
) -> tuple[Any, int]:
    try:
        value, used = entity_reader(entity_type)(frame, offset)
    except Exception as e:  # kio raises its DecodeErrors, and ValueError/IndexError on junk
        raise ProtocolError(f"malformed {what}: {type(e).__name__}: {e}") from e
    return value, used


@functools.cache
def request_schema(api_key: int, version: int) -> type[Any]:
    """kio's request entity of ``(api_key, version)``, looked up once: kio's index resolves
    the module path by name on every call, about as costly as decoding a small request, and
    every request and every follower round asks for it."""
    schema: type[Any] = load_request_schema(api_key, version)
    return schema


@functools.cache
def response_schema(api_key: int, version: int) -> type[Any]:
    """kio's response entity of ``(api_key, version)``, looked up once (as
    :func:`request_schema`)."""
    schema: type[Any] = load_response_schema(api_key, version)
    return schema


def request_module(api_key: int, version: int) -> ModuleType:
    """kio's module of the request entities (the request and its nested types)."""
    return sys.modules[request_schema(api_key, version).__module__]


def response_module(api_key: int, version: int) -> ModuleType:
    """kio's module of the response entities (the response and its nested types)."""
    return sys.modules[response_schema(api_key, version).__module__]


T = TypeVar("T")


def make(entity_type: type[T], **fields: Any) -> T:
    """An entity of one version from the fields it has: a handler names every field any
    version it serves may need, and each version takes those its definition holds."""
    names = _field_names(entity_type)  # type: ignore[arg-type]  # a class is hashable
    if names.issuperset(fields):  # the version has every field named: nothing to filter
        return entity_type(**fields)
    return entity_type(**{k: v for k, v in fields.items() if k in names})


@functools.cache
def _field_names(entity_type: type[Any]) -> frozenset[str]:
    """Once per entity type: a follower builds a Fetch on every round."""
    return frozenset(f.name for f in dataclasses.fields(entity_type))


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body encoded ahead of the frame, by :func:`encode_body`: a handler whose
    response is too large to encode in one turn of the event loop encodes it in a thread
    (issue 36: 100,000 topics of a Metadata answer took 0.7 s to encode), and the listener
    frames it as it frames an entity."""

    header_schema: type[Any]
    pieces: list[Any]


def encode_body(response: Any) -> EncodedBody:
    """``response``'s body as pieces (:func:`encode_response_pieces`), without its frame;
    pure, so it may run in a thread while the loop serves others."""
    out: list[Any] = []
    writer_for(type(response))(out, response)
    return EncodedBody(response.__header_schema__, join_pieces(out))


def encode_response_pieces(correlation_id: int, response: Any) -> list[Any]:
    """The whole frame (size, the response header its definition names, the body) as pieces:
    bytes, and every records field that holds a file range instead of bytes left as that
    range, between the bytes around it: the listener sends the bytes and has the kernel send
    the ranges from their files. The length prefix of each range is written from its
    ``len()``, as for bytes (:mod:`.writer`, kio's encoding). ``response`` is an entity, or
    an :class:`EncodedBody` encoded ahead."""
    encoded = isinstance(response, EncodedBody)
    header_type: type[Any] = response.header_schema if encoded else response.__header_schema__
    out: list[Any] = [b""]  # the frame's size, once the rest is known
    writer_for(header_type)(out, header_type(correlation_id=i32(correlation_id)))
    if encoded:
        out.extend(response.pieces)
    else:
        writer_for(type(response))(out, response)
    out[0] = SIZE.pack(sum(len(p) for p in out))
    return join_pieces(out)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The whole frame in one ``bytes`` (a response whose fields all hold bytes)."""
    return b"".join(encode_response_pieces(correlation_id, response))


def encode_request(correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """A request's whole frame: size, the request header its definition names, the body."""
    header_type: type[Any] = body.__header_schema__
    out: list[Any] = [b""]
    writer_for(header_type)(
        out,
        header_type(
            request_api_key=body.__api_key__,
            request_api_version=body.__version__,
            correlation_id=i32(correlation_id),
            client_id=client_id,
        ),
    )
    writer_for(type(body))(out, body)
    out[0] = SIZE.pack(sum(len(p) for p in out))
    return b"".join(out)
