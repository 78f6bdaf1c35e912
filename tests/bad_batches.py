"""Batches whose framing and CRC are right but whose records nobody can decode (issue 14, item 3).

Each one starts from a batch ``build_batch`` makes, changes something the CRC covers and then
recomputes the CRC, so only a check of the records themselves can tell it apart from a good one.
Shared by the storage-level test (tests/unit/test_record_validation.py) and the broker-process one
(tests/integration/test_broker_bad_input.py).
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import cramjam

from jbod_broker.storage.compression import MAX_DECOMPRESSED_BYTES, compress
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
    """Kafka error name: CORRUPT_MESSAGE, INVALID_RECORD or (a decompression bomb)
    RECORD_LIST_TOO_LARGE."""
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


@functools.cache
def bad_batches() -> dict[str, BadBatch]:
    """Built once per process: the zstd bomb takes a moment to make."""
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
                "CORRUPT_MESSAGE",
                (f"bad {name} data",),
            )
            for codec, name in ((SNAPPY, "snappy"), (LZ4, "lz4"), (ZSTD, "zstd"))
        },
        "gzip-payload-with-a-bad-record": BadBatch(
            _gzip_with_offset_delta(), "CORRUPT_MESSAGE", ("offset delta 7",)
        ),
        **{
            f"{name}-payload-with-a-bad-record": BadBatch(
                _compressed_with_offset_delta(codec), "CORRUPT_MESSAGE", ("offset delta 7",)
            )
            for codec, name in ((SNAPPY, "snappy"), (LZ4, "lz4"), (ZSTD, "zstd"))
        },
        **_bad_payloads(plain),
    }


def _bad_payloads(plain: bytes) -> dict[str, BadBatch]:
    """Compressed payloads that Kafka's readers refuse, each in a batch of ``plain``'s header."""
    records = plain[BATCH_HEADER_SIZE:]
    xerial = compress(SNAPPY, records)
    lz4 = compress(LZ4, records)
    zstd = compress(ZSTD, records)
    # A raw snappy block starts with its decompressed size: one that claims more than the
    # limit is refused before anything is allocated.
    claim = MAX_DECOMPRESSED_BYTES + 1
    claims_too_much = bytes(cramjam.snappy.compress_raw(b"x" * 64))
    claims_too_much = _unsigned_varint(claim) + claims_too_much[1:]
    too_large = ("more than", str(MAX_DECOMPRESSED_BYTES))

    def batch(codec: int, payload: bytes) -> bytes:
        return _with_body(plain, payload, attributes=codec)

    return {
        "snappy-stream-block-past-the-end": BadBatch(
            batch(SNAPPY, xerial[:16] + struct.pack(">i", 1000) + xerial[20:]),
            "CORRUPT_MESSAGE",
            ("snappy", "block of 1000 bytes"),
        ),
        "snappy-stream-version-0": BadBatch(
            batch(SNAPPY, xerial[:8] + struct.pack(">i", 0) + xerial[12:]),
            "CORRUPT_MESSAGE",
            ("snappy", "version 0"),
        ),
        "snappy-stream-truncated": BadBatch(
            batch(SNAPPY, xerial[:-3]), "CORRUPT_MESSAGE", ("bad snappy data",)
        ),
        "snappy-claims-more-than-the-limit": BadBatch(
            batch(SNAPPY, claims_too_much), "RECORD_LIST_TOO_LARGE", ("snappy", *too_large)
        ),
        "lz4-dependent-blocks": BadBatch(
            batch(LZ4, lz4[:4] + bytes([lz4[4] & ~0x20]) + lz4[5:]),
            "CORRUPT_MESSAGE",
            ("lz4", "dependent blocks"),
        ),
        "lz4-dictionary-id": BadBatch(
            batch(LZ4, lz4[:4] + bytes([lz4[4] | 0x01]) + lz4[5:]),
            "CORRUPT_MESSAGE",
            ("lz4", "reserved bits"),
        ),
        "lz4-bad-header-checksum": BadBatch(
            batch(LZ4, lz4[:6] + bytes([lz4[6] ^ 0xFF]) + lz4[7:]),
            "CORRUPT_MESSAGE",
            ("lz4", "headerchecksum"),
        ),
        "lz4-bytes-after-the-frame": BadBatch(
            batch(LZ4, lz4 + lz4), "CORRUPT_MESSAGE", ("lz4", "after the frame")
        ),
        "lz4-truncated": BadBatch(batch(LZ4, lz4[:-6]), "CORRUPT_MESSAGE", ("bad lz4 data",)),
        "zstd-truncated": BadBatch(batch(ZSTD, zstd[:-3]), "CORRUPT_MESSAGE", ("bad zstd data",)),
        "zstd-garbage-after-the-frame": BadBatch(
            batch(ZSTD, zstd + b"garbage"), "CORRUPT_MESSAGE", ("bad zstd data",)
        ),
        "zstd-bomb": BadBatch(
            batch(ZSTD, zstd_bomb()), "RECORD_LIST_TOO_LARGE", ("zstd", *too_large)
        ),
    }


def zstd_bomb(size: int = MAX_DECOMPRESSED_BYTES + (1 << 20)) -> bytes:
    """A few KiB of zstd that expand to ``size`` zero bytes, made without holding them."""
    compressor = cramjam.zstd.Compressor()
    chunk = bytes(1 << 20)
    for _ in range(size // len(chunk)):
        compressor.compress(chunk)
    return bytes(compressor.finish())


def _unsigned_varint(n: int) -> bytes:
    """Snappy's length preamble: unsigned LEB128 (no zigzag, unlike a record's varints)."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compressed_with_offset_delta(codec: int) -> bytes:
    plain = build_batch([(None, b"abc"), (None, b"def")], base_timestamp=BASE_TS)
    records = bytearray(plain[BATCH_HEADER_SIZE:])
    records[3] = 2 * 7
    return _with_body(plain, compress(codec, bytes(records)), attributes=codec)


def _gzip_with_offset_delta() -> bytes:
    import gzip

    plain = build_batch([(None, b"abc"), (None, b"def")], base_timestamp=BASE_TS)
    records = bytearray(plain[BATCH_HEADER_SIZE:])
    records[3] = 2 * 7
    return _with_body(plain, gzip.compress(bytes(records)), attributes=GZIP)


CONTROL = 0x20
TRANSACTIONAL = 0x10


@functools.cache
def client_refused_batches() -> dict[str, BadBatch]:
    """Well-formed batches a client may not write (issue 36, item 4: Kafka's LogValidator and
    KafkaApis rules for the client origin). A follower or a move may carry such batches (a
    leader wrote them), so only a producer's data is refused; the error name is the broker's
    (the Kafka port answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_RECORD)."""
    plain = _good(2)
    records = plain[BATCH_HEADER_SIZE:]
    idempotent = build_batch(
        [(None, b"v")], base_timestamp=BASE_TS, producer_id=7, producer_epoch=0, base_sequence=0
    )
    txn = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    return {
        "control-flag": BadBatch(
            _with_body(plain, records, attributes=CONTROL), "INVALID_RECORD", ("control",)
        ),
        "control-and-transactional-flags": BadBatch(
            _with_body(plain, records, attributes=CONTROL | TRANSACTIONAL),
            "INVALID_RECORD",
            ("control",),
        ),
        "transactional-flag-without-producer-id": BadBatch(
            _with_body(plain, records, attributes=TRANSACTIONAL), txn, ("transactions",)
        ),
        "transactional-flag-of-an-idempotent-producer": BadBatch(
            _with_body(idempotent, idempotent[BATCH_HEADER_SIZE:], attributes=TRANSACTIONAL),
            txn,
            ("transactions",),
        ),
    }
