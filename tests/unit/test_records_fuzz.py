"""Fuzz of the batch validator (issue 14, item 3): mutations of valid batches, CRC recomputed.

Every mutant is either refused by :func:`validate_batches` with a :class:`StorageError` (nothing
else may escape) or accepted, and then :func:`decode_batch` decodes it into exactly the number of
records its header declares, at consecutive offsets. Deterministic (``derandomize``), so a
failure reproduces.
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jbod_broker.storage.errors import StorageError
from jbod_broker.storage.records import (
    BATCH_HEADER_SIZE,
    GZIP,
    LOG_OVERHEAD,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    Header,
    build_batch,
    compute_crc,
    decode_batch,
    validate_batches,
)

BASE_TS = 1_700_000_000_000

_bytes_or_none = st.none() | st.binary(max_size=40)
_record = st.tuples(
    _bytes_or_none,
    _bytes_or_none,
    st.lists(st.builds(Header, st.text(max_size=6), _bytes_or_none), max_size=2),
)
batches = st.builds(
    lambda records, codec: build_batch(records, base_timestamp=BASE_TS, compression=codec),
    st.lists(_record, min_size=1, max_size=5),
    st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]),
)


@st.composite
def mutants(draw: st.DrawFn) -> bytes:
    buf = bytearray(draw(batches))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "count", "codec"]))
        body = len(buf) - BATCH_HEADER_SIZE
        if kind == "flip" and body > 0:
            i = BATCH_HEADER_SIZE + draw(st.integers(0, body - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and body > 0:
            i = BATCH_HEADER_SIZE + draw(st.integers(0, body - 1))
            buf[i] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]))
        elif kind == "insert":
            i = BATCH_HEADER_SIZE + draw(st.integers(0, body))
            buf[i:i] = draw(st.binary(min_size=1, max_size=6))
        elif kind == "delete" and body > 0:
            i = BATCH_HEADER_SIZE + draw(st.integers(0, body - 1))
            del buf[i : i + draw(st.integers(1, 6))]
        elif kind == "count":
            # recordsCount and lastOffsetDelta together, so the header stays self-consistent.
            count = draw(st.sampled_from([1, 2, 3, 4, 5, 6, 100, 2**31 - 1]))
            struct.pack_into(">i", buf, 23, count - 1)
            struct.pack_into(">i", buf, 57, count)
        elif kind == "codec":
            struct.pack_into(">h", buf, 21, draw(st.integers(0, 4)))
    struct.pack_into(">i", buf, 8, len(buf) - LOG_OVERHEAD)
    struct.pack_into(">I", buf, 17, compute_crc(buf))
    return bytes(buf)


@settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutants())
def test_every_mutant_is_refused_or_decodable(data: bytes) -> None:
    try:
        headers = validate_batches(data)
    except StorageError:
        return
    assert len(headers) == 1
    header, records = decode_batch(data)
    assert header == headers[0]
    assert len(records) == header.records_count
    assert [r.offset for r in records] == list(
        range(header.base_offset, header.base_offset + header.records_count)
    )


@settings(derandomize=True, max_examples=100, deadline=None)
@given(batches)
def test_unmutated_batches_are_accepted(data: bytes) -> None:
    assert validate_batches(data)
    assert decode_batch(data)[1]
