"""Kafka framing, request headers, versions and dispatch (issue 18): pure functions, kio's
codecs on both sides (the tests encode requests the way a client does, with kio's writers)."""

from __future__ import annotations

import datetime
import io
import struct
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta

from jbod_broker.kafka import apis, protocol
from jbod_broker.kafka.protocol import ProtocolError, encode_response, parse_request
from tests.kafka_entities import fetch_partition_data


def frame(api_key: int, version: int, body: Any, *, header: type[Any] | None = None) -> bytes:
    """A request's bytes after its size, as a client writes them."""
    header_type = header or (HeaderV2 if type(body).__flexible__ else HeaderV1)
    buf = io.BytesIO()
    entity_writer(header_type)(
        buf,
        header_type(
            request_api_key=i16(api_key),
            request_api_version=i16(version),
            correlation_id=i32(42),
            client_id="test",
        ),
    )
    if body is not None:
        entity_writer(type(body))(buf, body)
    return buf.getvalue()


def metadata_request(*topics: str) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def test_a_flexible_request_decodes_with_its_header_v2() -> None:
    req = parse_request(frame(protocol.METADATA, 12, metadata_request("a", "b")))
    assert (req.api_key, req.version, req.correlation_id, req.client_id) == (3, 12, 42, "test")
    assert [t.name for t in req.body.topics] == ["a", "b"]


def test_every_advertised_version_has_kio_entities_and_a_handler() -> None:
    assert set(apis.HANDLERS) == set(protocol.SUPPORTED)
    for key, (lo, hi) in protocol.SUPPORTED.items():
        for v in range(lo, hi + 1):
            assert load_request_schema(key, v).__version__ == v
            assert load_response_schema(key, v).__version__ == v


def test_api_versions_lists_what_is_served() -> None:
    resp = apis.api_versions_response(3)
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == protocol.SUPPORTED
    assert got[22] == (0, 5)  # InitProducerId: idempotent producers get their ids here
    # Kafka 4.x's minimums (KIP-896): nothing older is advertised.
    assert got[protocol.PRODUCE][0] == 3 and got[protocol.FETCH][0] == 4


def test_an_unknown_api_versions_version_is_answered_with_v0_and_unsupported_version() -> None:
    raw = frame(protocol.API_VERSIONS, 9, None, header=HeaderV2) + b"\x05future"
    req = parse_request(raw)
    assert req.body is None and req.correlation_id == 42
    resp = apis.api_versions_response(0, ErrorCode.unsupported_version)
    out = encode_response(req.correlation_id, resp)
    size, (hdr, used) = struct.unpack_from(">i", out)[0], entity_reader(ResponseHeaderV0)(out, 4)
    assert size == len(out) - 4 and hdr.correlation_id == 42
    body, _ = entity_reader(ApiVersionsResponseV0)(out, 4 + used)
    assert body.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]


def test_api_versions_responses_carry_header_v0_even_when_flexible() -> None:
    out = encode_response(7, apis.api_versions_response(3))
    hdr, used = entity_reader(ResponseHeaderV0)(out, 4)
    assert hdr.correlation_id == 7 and used == 4  # no tagged-field byte (KIP-511)


def test_flexible_responses_carry_header_v1() -> None:
    resp = MetadataResponse(
        throttle_time=i32Timedelta.parse(apis.NO_THROTTLE), brokers=(), topics=()
    )
    out = encode_response(9, resp)
    hdr, used = entity_reader(ResponseHeaderV1)(out, 4)
    assert hdr.correlation_id == 9 and used == 5
    body, n = entity_reader(MetadataResponse)(out, 4 + used)
    assert body == resp and 4 + used + n == len(out)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "no complete header"),
        (b"\x00\x03\x00\x0c\x00", "no complete header"),
        (struct.pack(">hhi", 99, 0, 1) + b"\x00\x00", "key 99"),
        (struct.pack(">hhi", 10, 0, 1) + b"\x00\x00", "find_coordinator"),
        (struct.pack(">hhi", 24, 0, 1) + b"\x00\x00", "add_partitions_to_txn"),
        (struct.pack(">hhi", 0, 2, 1) + b"\x00\x00", "produce v2 is not supported"),
        (struct.pack(">hhi", 1, 13, 1) + b"\x00\x00", "fetch v13 is not supported"),
        (struct.pack(">hhi", 3, 12, 1), "malformed request header"),
    ],
)
def test_requests_that_cannot_be_answered_close_the_connection(raw: bytes, reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        parse_request(raw)


def test_a_body_cut_short_is_refused_and_bytes_after_it_are_ignored_as_kafka_does() -> None:
    whole = frame(protocol.METADATA, 12, metadata_request("abc"))
    with pytest.raises(ProtocolError, match="malformed metadata v12 body"):
        parse_request(whole[:-3])
    # librdkafka 2.x's Metadata v12 carries three bytes after the body; Kafka reads on.
    assert [t.name for t in parse_request(whole + b"\x01\x00\x00").body.topics] == ["abc"]


def test_a_lying_array_length_is_refused_not_allocated() -> None:
    raw = frame(protocol.METADATA, 12, metadata_request())
    header_len = len(frame(protocol.METADATA, 12, None, header=HeaderV2))
    # A compact array claiming 2**28 entries, with nothing behind it.
    lying = raw[:header_len] + bytes([0x81, 0x80, 0x80, 0x80, 0x01])
    with pytest.raises(ProtocolError, match="malformed"):
        parse_request(lying)


def _null_array_at_the_end(api_key: int, version: int, body: Any) -> bytes:
    """``body`` (whose last field is an empty array) with that array's length made null."""
    raw = frame(api_key, version, body)
    if type(body).__flexible__:  # compact array: length + 1 as a varint, 0 for null
        assert raw.endswith(b"\x01\x00")  # the empty array, then no tagged fields
        return raw[:-2] + b"\x00\x00"
    assert raw.endswith(struct.pack(">i", 0))
    return raw[:-4] + struct.pack(">i", -1)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(protocol.LIST_OFFSETS, 7), (protocol.LIST_OFFSETS, 1), (protocol.METADATA, 0)],
)
def test_a_null_array_that_may_not_be_null_is_refused_as_kafka_refuses_it(
    api_key: int, version: int
) -> None:
    """kio reads it as None; Kafka's readers refuse it, and so does the decoder here, before
    a handler iterates over it (issue 36's fuzz found ListOffsets closing with a TypeError)."""
    m: Any = protocol.request_module(api_key, version)
    if api_key == protocol.LIST_OFFSETS:
        body = protocol.make(m.ListOffsetsRequest, replica_id=-1, isolation_level=0, topics=())
    else:
        body = m.MetadataRequest(topics=())
    with pytest.raises(ProtocolError, match="the array topics is null"):
        parse_request(_null_array_at_the_end(api_key, version, body))


def test_a_null_array_inside_an_entry_is_refused_and_a_nullable_one_is_kept() -> None:
    m: Any = protocol.request_module(protocol.PRODUCE, 3)
    body = m.ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=1)),
        topic_data=(m.TopicProduceData(name=TopicName("t"), partition_data=()),),
    )
    with pytest.raises(ProtocolError, match="the array partition_data is null"):
        parse_request(_null_array_at_the_end(protocol.PRODUCE, 3, body))
    # Metadata's topics is nullable from v1 on: null asks for every topic.
    nullable = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert parse_request(frame(protocol.METADATA, 12, nullable)).body.topics is None


def test_make_keeps_the_fields_a_version_has() -> None:
    m = protocol.response_module(protocol.PRODUCE, 3)
    p = protocol.make(
        m.PartitionProduceResponse,
        index=1,
        error_code=ErrorCode.none,
        base_offset=5,
        log_append_time=None,
        log_start_offset=0,  # v5+
        record_errors=(),  # v8+
    )
    assert p.base_offset == 5 and not hasattr(p, "log_start_offset")


def test_kios_index_is_consulted_once_per_api_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """kio's index resolves a module by name on every lookup; the listener and a follower's
    every round ask for the same few entities, so each is looked up once."""
    calls: list[tuple[int, int]] = []

    def counting(api_key: int, version: int) -> Any:
        calls.append((api_key, version))
        return load_request_schema(api_key, version)

    monkeypatch.setattr(protocol, "load_request_schema", counting)
    protocol.request_schema.cache_clear()
    try:
        for _ in range(3):
            parse_request(frame(protocol.METADATA, 12, metadata_request("a")))
            protocol.request_module(protocol.METADATA, 12)
        assert calls == [(protocol.METADATA, 12)]
    finally:
        protocol.request_schema.cache_clear()


def _fetch_response_frame(correlation_id: int, records: bytes) -> bytes:
    """A Fetch v12 answer's bytes after the size prefix."""
    m = protocol.response_module(protocol.FETCH, 12)
    response = protocol.make(
        m.FetchResponse,
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(
            protocol.make(
                m.FetchableTopicResponse,
                topic=TopicName("t"),
                partitions=(fetch_partition_data(records),),
            ),
        ),
    )
    return encode_response(correlation_id, response)[4:]


def test_a_response_is_decoded_as_the_answer_to_its_request() -> None:
    frame = _fetch_response_frame(7, b"records")
    got = protocol.parse_response(protocol.FETCH, 12, 7, memoryview(frame))
    assert got.responses[0].partitions[0].records == b"records"


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        (_fetch_response_frame(8, b"x"), "correlation id 8, expected 7"),
        (_fetch_response_frame(7, b"records")[:-12], "malformed response"),
        (b"\x00\x00\x00\x07\xff\xff\xff\xff\xff\xff", "malformed response header"),
    ],
    ids=["another-request-s", "cut-short", "garbage-header"],
)
def test_a_response_that_is_not_the_answer_is_a_protocol_error(frame: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        protocol.parse_response(protocol.FETCH, 12, 7, frame)
