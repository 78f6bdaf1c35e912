"""Tests for the RecordBatch v2 codec.

The reference batch below is assembled by hand from Kafka's published format (struct.pack and
varints written out as literal bytes) so that the codec is checked against the format itself,
not against its own encoder.
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_broker.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
)
from jbod_broker.storage.records import (
    BATCH_HEADER_SIZE,
    CREATE_TIME,
    DEFAULT_MAX_BATCH_BYTES,
    GZIP,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    LZ4,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NONE,
    SNAPPY,
    ZSTD,
    BatchHeader,
    Header,
    Record,
    build_batch,
    compute_crc,
    decode_batch,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    first_corrupt_position,
    iter_batches,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batches,
)

BASE_TS = 1_700_000_000_000


def _batch(n: int = 3, base_offset: int = 0, value_size: int = 10) -> bytes:
    return build_batch(
        [(b"key-%d" % i, bytes([i % 256]) * value_size) for i in range(n)],
        base_offset=base_offset,
        base_timestamp=BASE_TS,
    )


def _recrc(buf: bytearray, pos: int = 0) -> None:
    """Rewrite the CRC after a deliberate change to a covered field."""
    struct.pack_into(">I", buf, pos + 17, compute_crc(buf, pos))


# --------------------------------------------------------------------------------------------
# Constants and CRC
# --------------------------------------------------------------------------------------------


def test_constants() -> None:
    assert MAGIC_V2 == 2
    assert LOG_OVERHEAD == 12
    assert BATCH_HEADER_SIZE == 61
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (0, 1, 2, 3, 4)
    assert NO_PRODUCER_ID == -1
    assert NO_PARTITION_LEADER_EPOCH == -1
    assert DEFAULT_MAX_BATCH_BYTES == 1048588


def test_crc32c_known_vector() -> None:
    # The standard CRC-32C (Castagnoli) check value; CRC-32 (zlib) would give 0xCBF43926.
    assert crc32c.crc32c(b"123456789") == 0xE3069283


# --------------------------------------------------------------------------------------------
# Varints
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded, 0) == (value, len(encoded))
    # The 64-bit encoding of a value in int32 range is the same bytes.
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (2**31, b"\x80\x80\x80\x80\x10"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_varlong_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**40])
def test_varint_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varint(value)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_varlong_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varlong(value)


def test_varint_round_trip_many() -> None:
    values = [0, 1, -1, 127, 128, -128, 8191, 8192, -8193, 2**20, -(2**28), 2**31 - 1, -(2**31)]
    buf = b"".join(encode_varint(v) for v in values)
    pos = 0
    for v in values:
        got, pos = decode_varint(buf, pos)
        assert got == v
    assert pos == len(buf)

    longs = [*values, 2**31, -(2**31) - 1, 2**62, 2**63 - 1, -(2**63)]
    buf = b"".join(encode_varlong(v) for v in longs)
    pos = 0
    for v in longs:
        got, pos = decode_varlong(buf, pos)
        assert got == v
    assert pos == len(buf)


def test_varint_decode_at_offset_and_from_views() -> None:
    buf = bytearray(b"junk" + encode_varint(-300) + b"tail")
    assert decode_varint(buf, 4) == (-300, 6)
    assert decode_varint(memoryview(buf), 4) == (-300, 6)


@pytest.mark.parametrize(
    "data",
    [
        b"",  # nothing at all
        b"\x80",  # continuation with no next byte
        b"\xff\xff\xff\xff",  # four continuation bytes then end
    ],
)
def test_varint_truncated(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(data, 0)
    with pytest.raises(CorruptRecordError):
        decode_varlong(data, 0)


def test_varint_over_long() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80\x80\x80\x80\x00", 0)  # six bytes
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\x1f", 0)  # 33 bits
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\x80" * 10 + b"\x00", 0)  # eleven bytes
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 9 + b"\x03", 0)  # 65 bits


# --------------------------------------------------------------------------------------------
# Reference batch built by hand
# --------------------------------------------------------------------------------------------


def _reference_batch() -> bytes:
    """Three records, hand-encoded:

    0: key b"k", value b"v1", timestamp BASE_TS, no headers
    1: key null, value b"", timestamp BASE_TS + 5, headers h=b"x", n=null
    2: key null, value b"z" * 200, timestamp BASE_TS - 1, no headers
    """
    rec0 = (
        b"\x00"  # attributes
        b"\x00"  # timestampDelta 0
        b"\x00"  # offsetDelta 0
        b"\x02k"  # keyLength 1, key
        b"\x04v1"  # valueLength 2, value
        b"\x00"  # headers count 0
    )
    assert len(rec0) == 9
    rec0 = b"\x12" + rec0  # length 9 -> zigzag 18

    rec1 = (
        b"\x00"  # attributes
        b"\x0a"  # timestampDelta 5
        b"\x02"  # offsetDelta 1
        b"\x01"  # keyLength -1 (null)
        b"\x00"  # valueLength 0 (empty, not null)
        b"\x04"  # headers count 2
        b"\x02h\x02x"  # "h" = b"x"
        b"\x02n\x01"  # "n" = null
    )
    assert len(rec1) == 13
    rec1 = b"\x1a" + rec1  # length 13 -> zigzag 26

    rec2 = (
        b"\x00"  # attributes
        b"\x01"  # timestampDelta -1
        b"\x04"  # offsetDelta 2
        b"\x01"  # keyLength -1
        b"\x90\x03"  # valueLength 200 -> zigzag 400 = 0x190 -> 0x90 0x03
        + b"z" * 200
        + b"\x00"  # headers count 0
    )
    assert len(rec2) == 207
    rec2 = b"\x9e\x03" + rec2  # length 207 -> zigzag 414 = 0x19e -> 0x9e 0x03

    records = rec0 + rec1 + rec2
    covered = (
        struct.pack(">h", 0)  # attributes: no compression, CreateTime
        + struct.pack(">i", 2)  # lastOffsetDelta
        + struct.pack(">q", BASE_TS)  # baseTimestamp
        + struct.pack(">q", BASE_TS + 5)  # maxTimestamp
        + struct.pack(">q", 42)  # producerId
        + struct.pack(">h", 3)  # producerEpoch
        + struct.pack(">i", 10)  # baseSequence
        + struct.pack(">i", 3)  # recordsCount
        + records
    )
    crc = crc32c.crc32c(covered)
    batch_length = 4 + 1 + 4 + len(covered)  # leader epoch, magic, crc, rest
    return (
        struct.pack(">q", 100)  # baseOffset
        + struct.pack(">i", batch_length)
        + struct.pack(">i", 7)  # partitionLeaderEpoch
        + struct.pack(">b", 2)  # magic
        + struct.pack(">I", crc)
        + covered
    )


REFERENCE_RECORDS: list[tuple[bytes | None, bytes | None, list[Header]]] = [
    (b"k", b"v1", []),
    (None, b"", [Header("h", b"x"), Header("n", None)]),
    (None, b"z" * 200, []),
]
REFERENCE_TIMESTAMPS = [BASE_TS, BASE_TS + 5, BASE_TS - 1]


def test_reference_batch_decodes() -> None:
    ref = _reference_batch()
    header, records = decode_batch(ref)
    assert header == BatchHeader(
        base_offset=100,
        batch_length=len(ref) - LOG_OVERHEAD,
        partition_leader_epoch=7,
        magic=2,
        crc=struct.unpack_from(">I", ref, 17)[0],
        attributes=0,
        last_offset_delta=2,
        base_timestamp=BASE_TS,
        max_timestamp=BASE_TS + 5,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        records_count=3,
    )
    assert header.last_offset == 102
    assert header.next_offset == 103
    assert header.size_in_bytes == len(ref)
    assert records == [
        Record(100, BASE_TS, b"k", b"v1"),
        Record(101, BASE_TS + 5, None, b"", (Header("h", b"x"), Header("n", None))),
        Record(102, BASE_TS - 1, None, b"z" * 200),
    ]
    assert validate_batches(ref) == [header]
    assert compute_crc(ref) == header.crc


def test_build_batch_reproduces_reference_exactly() -> None:
    built = build_batch(
        REFERENCE_RECORDS,
        base_offset=100,
        timestamps=REFERENCE_TIMESTAMPS,
        partition_leader_epoch=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
    )
    assert built == _reference_batch()


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_round_trip_variety(compression: int) -> None:
    inputs: list[tuple[bytes | None, bytes | None, list[Header]]] = [
        (None, None, []),
        (b"", b"", []),
        (b"\x00\xff\x80binary", bytes(range(256)), []),
        (b"k", None, [Header("", b""), Header("ключ", None), Header("h", b"\x00" * 300)]),
        (None, b"v" * 5000, []),
    ]
    batch = build_batch(inputs, base_offset=7, base_timestamp=BASE_TS, compression=compression)
    header, records = decode_batch(batch)
    assert header.compression == compression
    assert header.records_count == len(inputs)
    assert [(r.key, r.value, list(r.headers)) for r in records] == inputs
    assert [r.offset for r in records] == list(range(7, 7 + len(inputs)))
    assert all(r.timestamp == BASE_TS for r in records)
    assert validate_batches(batch) == [header]


def test_round_trip_many_records() -> None:
    n = 2000
    batch = build_batch(
        [(str(i).encode(), b"x" * (i % 50)) for i in range(n)],
        base_offset=1_000_000,
        timestamps=[BASE_TS + i for i in range(n)],
    )
    header, records = decode_batch(batch)
    assert header.records_count == n
    assert header.last_offset == 1_000_000 + n - 1
    assert header.max_timestamp == BASE_TS + n - 1
    assert records[-1] == Record(1_000_000 + n - 1, BASE_TS + n - 1, b"1999", b"x" * (1999 % 50))


def test_gzip_compresses_and_round_trips() -> None:
    records = [(None, b"a" * 1024) for _ in range(16)]
    plain = build_batch(records, base_timestamp=BASE_TS)
    packed = build_batch(records, base_timestamp=BASE_TS, compression=GZIP)
    assert len(packed) < len(plain) // 10
    assert decode_batch(packed)[1] == decode_batch(plain)[1]
    # The records section is a standard gzip stream, which is what Kafka's reader expects.
    assert packed[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 2] == b"\x1f\x8b"


def test_two_element_tuples_and_defaults() -> None:
    batch = build_batch([(b"k", b"v")])
    header, records = decode_batch(batch)
    assert header.base_offset == 0
    assert header.partition_leader_epoch == NO_PARTITION_LEADER_EPOCH
    assert header.producer_id == NO_PRODUCER_ID
    assert header.producer_epoch == -1
    assert header.base_sequence == -1
    assert header.timestamp_type == CREATE_TIME
    assert not header.is_transactional
    assert not header.is_control
    assert header.base_timestamp > 1_600_000_000_000  # "now", in milliseconds
    assert records == [Record(0, header.base_timestamp, b"k", b"v")]


def test_transactional_flag_and_producer_fields() -> None:
    batch = build_batch(
        [(b"k", b"v")],
        producer_id=9,
        producer_epoch=2,
        base_sequence=5,
        is_transactional=True,
        base_timestamp=BASE_TS,
    )
    header = parse_header(batch)
    assert header.is_transactional
    assert header.attributes == 0x10
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, 5)


def test_decode_batch_at_position_in_bytearray_and_memoryview() -> None:
    first = _batch(2, base_offset=0)
    second = _batch(3, base_offset=2)
    buf = bytearray(first + second)
    for view in (buf, memoryview(buf), bytes(buf)):
        header, records = decode_batch(view, len(first))
        assert header.base_offset == 2
        assert [r.offset for r in records] == [2, 3, 4]
    buf.extend(b"x")  # no view into the buffer may be left behind


def test_log_append_time_uses_max_timestamp() -> None:
    buf = bytearray(build_batch([(None, b"a"), (None, b"b")], timestamps=[BASE_TS, BASE_TS + 1]))
    struct.pack_into(">h", buf, 21, 0x08)  # timestampType = LogAppendTime
    struct.pack_into(">q", buf, 35, BASE_TS + 99)  # the broker's append time
    _recrc(buf)
    header, records = decode_batch(buf)
    assert header.timestamp_type == LOG_APPEND_TIME
    assert [r.timestamp for r in records] == [BASE_TS + 99, BASE_TS + 99]


# --------------------------------------------------------------------------------------------
# Build errors
# --------------------------------------------------------------------------------------------


def test_build_rejects_bad_input() -> None:
    with pytest.raises(InvalidRecordError):
        build_batch([])
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k", b"v")], compression=5)
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k", b"v")], timestamps=[1, 2])
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k", b"v")], base_timestamp=10, timestamps=[5])
    with pytest.raises(InvalidRecordError):
        build_batch([(b"k", b"v")], producer_epoch=2**15)


# --------------------------------------------------------------------------------------------
# Corruption
# --------------------------------------------------------------------------------------------


def test_flipped_record_byte_is_detected() -> None:
    buf = bytearray(_batch())
    buf[BATCH_HEADER_SIZE + 5] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(buf)
    with pytest.raises(CorruptRecordError, match=r"expected 0x[0-9a-f]{8}, computed 0x"):
        validate_batches(buf)
    assert first_corrupt_position(buf) == (0, [])


def test_flipped_covered_header_byte_is_detected() -> None:
    buf = bytearray(_batch())
    buf[45] ^= 0x40  # inside producerId
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(buf)


def test_truncated_buffer() -> None:
    batch = _batch()
    for cut in (1, 11, 20, BATCH_HEADER_SIZE - 1, BATCH_HEADER_SIZE, len(batch) - 1):
        with pytest.raises(CorruptRecordError, match="position 0"):
            validate_batches(batch[:cut])
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut])


def test_truncated_second_batch_names_its_position() -> None:
    first = _batch()
    with pytest.raises(CorruptRecordError, match=f"position {len(first)}"):
        validate_batches(first + _batch()[:-3])


def test_wrong_magic() -> None:
    buf = bytearray(_batch())
    buf[16] = 1
    with pytest.raises(InvalidRecordError, match="unsupported magic"):
        validate_batches(buf)
    with pytest.raises(InvalidRecordError, match="unsupported magic"):
        decode_batch(buf)
    # A short legacy message is still reported as a magic problem, not as truncation.
    with pytest.raises(InvalidRecordError, match="unsupported magic"):
        validate_batches(bytes(buf[:30]))


def test_batch_length_too_small() -> None:
    buf = bytearray(_batch())
    struct.pack_into(">i", buf, 8, BATCH_HEADER_SIZE - LOG_OVERHEAD - 1)
    with pytest.raises(CorruptRecordError, match="length"):
        validate_batches(buf)
    with pytest.raises(CorruptRecordError):
        decode_batch(buf)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf))
    struct.pack_into(">i", buf, 8, -5)
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)


def test_records_count_mismatch() -> None:
    buf = bytearray(_batch(3))
    struct.pack_into(">i", buf, 57, 4)  # recordsCount no longer matches lastOffsetDelta
    _recrc(buf)
    with pytest.raises(CorruptRecordError, match="last offset delta"):
        validate_batches(buf)
    # Decoding finds the fourth record missing.
    with pytest.raises(CorruptRecordError):
        decode_batch(buf)

    buf = bytearray(_batch(3))
    struct.pack_into(">i", buf, 57, 2)
    struct.pack_into(">i", buf, 23, 1)
    _recrc(buf)
    # The header is self-consistent (a follower's check passes)...
    validate_batches(buf, check_records=False)
    # ...but a record is left over: the leader's check refuses what the decoder refuses.
    with pytest.raises(CorruptRecordError, match="left after"):
        validate_batches(buf)
    with pytest.raises(CorruptRecordError, match="left after"):
        decode_batch(buf)

    buf = bytearray(_batch(1))
    struct.pack_into(">i", buf, 57, 0)
    struct.pack_into(">i", buf, 23, -1)
    _recrc(buf)
    with pytest.raises(CorruptRecordError, match="records count"):
        validate_batches(buf)


def test_max_timestamp_before_base_timestamp() -> None:
    buf = bytearray(_batch())
    struct.pack_into(">q", buf, 35, BASE_TS - 1)
    _recrc(buf)
    with pytest.raises(CorruptRecordError, match="timestamp"):
        validate_batches(buf)
    # -1 means "no timestamp" and is not compared.
    struct.pack_into(">q", buf, 35, -1)
    _recrc(buf)
    validate_batches(buf)


def test_bad_record_length_inside_valid_crc() -> None:
    buf = bytearray(_batch(2))
    buf[BATCH_HEADER_SIZE] = 0x7E  # first record claims 63 bytes; it has fewer
    _recrc(buf)
    with pytest.raises(CorruptRecordError):
        decode_batch(buf)


def test_oversized_batch() -> None:
    batch = _batch(4, value_size=1000)
    with pytest.raises(RecordTooLargeError, match=f"{len(batch)} bytes.*1000"):
        validate_batches(batch, max_batch_bytes=1000)
    assert validate_batches(batch, max_batch_bytes=len(batch))


def test_empty_buffer() -> None:
    with pytest.raises(InvalidRecordError):
        validate_batches(b"")
    assert first_corrupt_position(b"") == (0, [])


def test_a_codec_kafka_does_not_define_decodes_header_only() -> None:
    for codec in (5, 6, 7):
        buf = bytearray(_batch())
        struct.pack_into(">h", buf, 21, codec)
        _recrc(buf)
        with pytest.raises(InvalidRecordError, match=f"compression codec {codec}"):
            validate_batches(buf)
        with pytest.raises(InvalidRecordError, match=f"codec {codec} \\(unknown\\)"):
            decode_batch(buf)


def test_bad_gzip_payload() -> None:
    buf = bytearray(build_batch([(None, b"a" * 100)], base_timestamp=BASE_TS, compression=GZIP))
    buf[BATCH_HEADER_SIZE + 12] ^= 0xFF
    _recrc(buf)
    with pytest.raises(CorruptRecordError):
        decode_batch(buf)


def test_decode_without_crc_check() -> None:
    buf = bytearray(_batch())
    struct.pack_into(">I", buf, 17, 0)
    with pytest.raises(CorruptRecordError):
        decode_batch(buf)
    assert len(decode_batch(buf, verify_crc=False)[1]) == 3


# --------------------------------------------------------------------------------------------
# In-place updates
# --------------------------------------------------------------------------------------------


def test_set_base_offset_and_epoch_keep_crc_valid() -> None:
    first = _batch(3)
    second = _batch(2)
    buf = bytearray(first + second)
    set_base_offset(buf, 0, 500)
    set_base_offset(buf, len(first), 503)
    set_partition_leader_epoch(buf, 0, 9)
    set_partition_leader_epoch(buf, len(first), 9)
    headers = validate_batches(buf)
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(500, 9), (503, 9)]
    assert [r.offset for r in decode_batch(buf, len(first))[1]] == [503, 504]
    with pytest.raises(CorruptRecordError):
        set_base_offset(buf, len(buf) - 10, 1)


# --------------------------------------------------------------------------------------------
# Scanning
# --------------------------------------------------------------------------------------------


def test_parse_header_too_short() -> None:
    with pytest.raises(CorruptRecordError):
        parse_header(_batch()[:60])
    assert parse_header(b"xx" + _batch(), 2).records_count == 3


def test_iter_batches_stops_at_incomplete_tail() -> None:
    batches = [_batch(2, base_offset=0), _batch(3, base_offset=2), _batch(1, base_offset=5)]
    whole = b"".join(batches)
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    got = list(iter_batches(whole))
    assert [p for p, _ in got] == positions
    assert [h.base_offset for _, h in got] == [0, 2, 5]
    for cut in (len(whole) - 1, positions[2] + 30, positions[2] + 5):
        assert [p for p, _ in iter_batches(whole[:cut])] == positions[:2]
    assert [p for p, _ in iter_batches(whole, positions[1])] == positions[1:]
    assert list(iter_batches(b"")) == []


def test_first_corrupt_position_valid_prefix_plus_garbage() -> None:
    good = _batch(2, base_offset=0) + _batch(3, base_offset=2)
    assert first_corrupt_position(good) == (len(good), validate_batches(good))
    end, headers = first_corrupt_position(good + b"\x00" * 100)
    assert end == len(good)
    assert [h.base_offset for h in headers] == [0, 2]
    end, headers = first_corrupt_position(good + b"\xde\xad\xbe\xef" * 40)
    assert end == len(good)


def test_first_corrupt_position_torn_tail() -> None:
    good = _batch(2, base_offset=0)
    torn = _batch(3, base_offset=2)
    for cut in (1, 15, BATCH_HEADER_SIZE, len(torn) - 1):
        end, headers = first_corrupt_position(good + torn[:cut])
        assert end == len(good)
        assert len(headers) == 1
    # Starting past the first batch.
    buf = good + torn + good[:20]
    assert first_corrupt_position(buf, len(good))[0] == len(good) + len(torn)
    # A corrupt batch in the middle ends the valid prefix there.
    bad = bytearray(torn)
    bad[-1] ^= 1
    assert first_corrupt_position(good + bytes(bad) + good)[0] == len(good)
    # Oversized batches are not part of the valid prefix either.
    assert first_corrupt_position(good, max_batch_bytes=len(good) - 1) == (0, [])


# --------------------------------------------------------------------------------------------
# Property
# --------------------------------------------------------------------------------------------

_maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(
    st.builds(Header, st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.tuples(_maybe_bytes, _maybe_bytes, _headers), min_size=1, max_size=20),
    base_offset=st.integers(min_value=0, max_value=2**62),
    base_timestamp=st.integers(min_value=0, max_value=2**45),
    ts_offsets=st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=20),
    compression=st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]),
)
def test_property_round_trip(
    records: list[tuple[bytes | None, bytes | None, list[Header]]],
    base_offset: int,
    base_timestamp: int,
    ts_offsets: list[int],
    compression: int,
) -> None:
    timestamps = [base_timestamp] + [base_timestamp + d for d in ts_offsets[: len(records) - 1]]
    batch = build_batch(
        records, base_offset=base_offset, timestamps=timestamps, compression=compression
    )
    headers = validate_batches(batch)
    header, decoded = decode_batch(batch)
    assert headers == [header]
    assert header.records_count == len(records)
    assert header.max_timestamp == max(timestamps)
    assert decoded == [
        Record(base_offset + i, ts, key, value, tuple(hs))
        for i, ((key, value, hs), ts) in enumerate(zip(records, timestamps, strict=True))
    ]
