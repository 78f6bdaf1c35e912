"""Batches whose framing and CRC are right but whose records nobody can decode (issue 14, item 3).

Each one starts from a batch ``build_batch`` makes, changes something the CRC covers and then
recomputes the CRC, so only a check of the records themselves can tell it apart from a good one.
Shared by the storage-level test (tests/unit/test_record_validation.py) and the broker-process one
(tests/integration/test_broker_bad_input.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from jbod_broker.storage.records import (
    BATCH_HEADER_SIZE,
    GZIP,
    LOG_OVERHEAD,
    LZ4,
    SNAPPY,
    ZSTD,
    Header,
    build_batch,
    compute_crc,
)

BASE_TS = 1_700_000_000_000


@dataclass(frozen=True)
class BadBatch:
    data: bytes
    error: str
    """Kafka error name: CORRUPT_MESSAGE or INVALID_RECORD."""
    words: tuple[str, ...]
    """What the message must mention (case-insensitive)."""


def with_crc(batch: bytes | bytearray) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">I", buf, 17, compute_crc(buf))
    return bytes(buf)


def _good(n: int = 3, value: bytes = b"value") -> bytes:
    return build_batch([(b"k%d" % i, value) for i in range(n)], base_timestamp=BASE_TS)


def _with_count(batch: bytes, count: int) -> bytes:
    """recordsCount and lastOffsetDelta set together, so the header stays self-consistent."""
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 23, count - 1)
    struct.pack_into(">i", buf, 57, count)
    return with_crc(buf)


def _with_body(batch: bytes, body: bytes, *, attributes: int | None = None) -> bytes:
    """The batch's header over another records section (length fixed up)."""
    buf = bytearray(batch[:BATCH_HEADER_SIZE]) + body
    struct.pack_into(">i", buf, 8, len(buf) - LOG_OVERHEAD)
    if attributes is not None:
        struct.pack_into(">h", buf, 21, attributes)
    return with_crc(buf)


def _with_record_byte(batch: bytes, index: int, value: int) -> bytes:
    buf = bytearray(batch)
    buf[BATCH_HEADER_SIZE + index] = value
    return with_crc(buf)


def bad_batches() -> dict[str, BadBatch]:
    one = build_batch([(None, b"v" * 40)], base_timestamp=BASE_TS)
    # A record with no key, a 3-byte value, no header: length, attributes, timestampDelta,
    # offsetDelta, key length, value length, value, header count.
    plain = build_batch([(None, b"abc"), (None, b"def")], base_timestamp=BASE_TS)
    assert plain[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 6] == bytes([2 * 9, 0, 0, 0, 1, 2 * 3])
    header_key = build_batch([(None, b"abc", [Header("kk", b"v")])], base_timestamp=BASE_TS)
    hk = header_key.index(b"kk")
    return {
        "count-larger-than-records": BadBatch(
            _with_count(_good(3), 5), "CORRUPT_MESSAGE", ("truncated record",)
        ),
        "count-int32-max": BadBatch(
            _with_count(one, 2**31 - 1), "CORRUPT_MESSAGE", ("claims 2147483647 records",)
        ),
        "count-smaller-than-records": BadBatch(
            _with_count(_good(3), 2), "CORRUPT_MESSAGE", ("left after",)
        ),
        "header-only": BadBatch(
            _with_body(one, b""), "CORRUPT_MESSAGE", ("claims 1 records in 0 bytes",)
        ),
        "endless-length-varint": BadBatch(
            _with_body(one, b"\xff" * 40), "CORRUPT_MESSAGE", ("varint too long",)
        ),
        "length-varint-past-the-end": BadBatch(
            _with_body(one, b"\x80" * 8), "CORRUPT_MESSAGE", ("varint",)
        ),
        "record-length-too-long": BadBatch(
            _with_record_byte(plain, 0, 2 * 60), "CORRUPT_MESSAGE", ("record 0", "length")
        ),
        "record-length-too-short": BadBatch(
            _with_record_byte(plain, 0, 2 * 7), "CORRUPT_MESSAGE", ("record 0",)
        ),
        "offset-delta": BadBatch(
            _with_record_byte(plain, 3, 2 * 5), "CORRUPT_MESSAGE", ("offset delta 5",)
        ),
        "key-length-overruns": BadBatch(
            _with_record_byte(plain, 4, 2 * 30), "CORRUPT_MESSAGE", ("key of 30 bytes",)
        ),
        "value-length-negative": BadBatch(
            _with_record_byte(plain, 5, 2 * 3 - 1), "CORRUPT_MESSAGE", ("value length -3",)
        ),
        "header-count-negative": BadBatch(
            _with_record_byte(plain, 9, 2 * 2 - 1), "CORRUPT_MESSAGE", ("header count -2",)
        ),
        "header-key-not-utf8": BadBatch(
            _with_record_byte(header_key, hk - BATCH_HEADER_SIZE, 0xFF),
            "CORRUPT_MESSAGE",
            ("utf-8",),
        ),
        "gzip-flag-on-plain-payload": BadBatch(
            _with_body(plain, plain[BATCH_HEADER_SIZE:], attributes=GZIP),
            "CORRUPT_MESSAGE",
            ("gzip",),
        ),
        **{
            f"{name}-flag-on-plain-payload": BadBatch(
                _with_body(plain, plain[BATCH_HEADER_SIZE:], attributes=codec),
                "INVALID_RECORD",
                (f"codec {codec} ({name})",),
            )
            for codec, name in ((SNAPPY, "snappy"), (LZ4, "lz4"), (ZSTD, "zstd"))
        },
        "gzip-payload-with-a-bad-record": BadBatch(
            _gzip_with_offset_delta(), "CORRUPT_MESSAGE", ("offset delta 7",)
        ),
    }


def _gzip_with_offset_delta() -> bytes:
    import gzip

    plain = build_batch([(None, b"abc"), (None, b"def")], base_timestamp=BASE_TS)
    records = bytearray(plain[BATCH_HEADER_SIZE:])
    records[3] = 2 * 7
    return _with_body(plain, gzip.compress(bytes(records)), attributes=GZIP)
