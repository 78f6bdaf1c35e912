"""The one reader of Kafka's record format: the records inside a RecordBatch v2.

:func:`jbod_broker.storage.records.validate_batches` (a leader, on every produced batch, as
Kafka's ``LogValidator``) and :func:`jbod_broker.storage.records.decode_batch` (tests, tools)
both read records through :func:`walk_records`, so what the broker stores and what a consumer
can decode cannot drift apart. The batch header, CRCs and codecs stay in ``records``; this module
knows only the records' own layout (all varints zigzag, lengths of -1 meaning null)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint |
    headerCount x (keyLength varint | key (UTF-8, never null) | valueLength varint | value)

Why a module of its own: it runs once per produced record, so it is the broker's hottest loop,
and it is written so that it costs little whether interpreted or compiled. Checking builds no
object per record; the one- and two-byte varints that real records use (every length under
8 KiB, offset deltas under 8192) are read inline, longer ones by :func:`decode_unsigned`; and it
takes ``bytes`` with explicit bounds, not a memoryview, because indexing ``bytes`` is what
both CPython and mypyc make cheapest. The module imports nothing but the errors, so mypyc can
compile it on its own (``setup.py``; measured in docs/benchmarks.md): with the compiled module
present Python imports it instead of this file, without it this same source runs, and
tests/unit/test_record_reader.py holds both to the same verdicts (``make setup`` rebuilds it when
this file changes). Compiled, the annotations are enforced: ``data`` must be ``bytes``, not a
bytearray or a view (``records`` hands it bytes, copying one batch at most).

Thread-safety: pure functions over immutable ``bytes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from jbod_broker.storage.errors import CorruptRecordError

if TYPE_CHECKING:
    # mypyc's native 64-bit int: no boxing, no overflow checks in the walk's arithmetic (half
    # its instructions). Only ever an annotation (never evaluated at run time, compiled or
    # not), so the broker needs no mypy_extensions installed.
    from mypy_extensions import i64

__all__ = ["MIN_RECORD_SIZE", "RawHeader", "RawRecord", "decode_unsigned", "walk_records"]

# A record needs at least: length, attributes, timestampDelta, offsetDelta, key and value
# lengths and a header count, one byte each. Bounds a count before any record is read.
MIN_RECORD_SIZE: Final = 7

RawHeader = tuple[str, bytes | None]
# timestampDelta, key, value, headers: what a decoded record holds before the batch header's
# base offset and timestamp make it absolute (records.decode_batch does that).
RawRecord = tuple[int, bytes | None, bytes | None, tuple[RawHeader, ...]]


def decode_unsigned(buf: bytes, pos: int, end: int, max_bytes: int, bits: int) -> tuple[int, int]:
    """Read an unsigned LEB128 value of at most ``max_bytes`` bytes, all before ``end``.

    Returns ``(value, position after it)``. Kafka silently drops the excess bits of a fifth
    (tenth) byte; we treat them as corruption because no correct writer produces them and
    accepting them would make two byte strings decode to the same value.
    """
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end or pos < 0:
            raise CorruptRecordError(f"truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >> bits:
                raise CorruptRecordError(f"varint too long at byte {pos - 1}: exceeds {bits} bits")
            return result, pos
        shift += 7
    raise CorruptRecordError(f"varint too long at byte {pos - 1}: more than {max_bytes} bytes")


def _zigzag(z: int) -> int:
    return (z >> 1) ^ -(z & 1)


def walk_records(data: bytes, pos: i64, end: i64, count: i64, out: list[RawRecord] | None) -> None:
    """Walk ``count`` records filling ``data[pos:end]`` exactly; with ``out``, decode them into it.

    Checks, as Kafka's ``DefaultRecord.readFrom`` plus ``LogValidator``: each record's length
    covers exactly its fields, every varint ends within 5 (10) bytes and fits 32 (64) bits, key,
    value and header lengths are -1 or fit in the record, header keys are non-null UTF-8, the
    offset delta of record ``i`` is ``i``, and the records end exactly at ``end``. Positions in
    messages count from the start of ``data``. An ``IndexError`` means a field ran past the end
    of ``data``; the caller reports it as a truncated record (within ``data``, bytes past
    ``end`` may be read, but a record that reads any of them cannot end at its declared length,
    which is checked first, so it is refused all the same).

    The varints are unrolled by hand: a helper call per field would cost more than the rest of
    the loop together when interpreted.
    """
    if count < 0 or count > (end - pos) // MIN_RECORD_SIZE:
        raise CorruptRecordError(f"claims {count} records in {end - pos} bytes")
    # Every value here fits 64 bits (32-bit varints, positions) except the timestamp delta, a
    # 64-bit varlong whose zigzag form may not: it stays an ``int`` (``ts``).
    z: i64
    b: i64
    record_end: i64
    offset2: i64 = 0  # the zigzag form of the offset delta record ``index`` must have
    for index in range(count):
        if pos >= end:
            raise IndexError
        # Record length: non-negative, and the record lies within the data.
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            b = data[pos + 1]
            if b < 0x80:
                z = (z & 0x7F) | (b << 7)
                pos += 2
            else:
                z, pos = decode_unsigned(data, pos, end, 5, 32)
        length = z >> 1
        record_end = pos + length
        if z & 1 or record_end > end:
            raise CorruptRecordError(f"record {index} has invalid length {_zigzag(z)}")
        # Attributes (unused in v2), then the timestamp delta.
        ts = data[pos + 1]
        if ts < 0x80:
            pos += 2
        else:
            ts, pos = decode_unsigned(data, pos + 1, end, 10, 64)
        # Offset delta: ``index``.
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            b = data[pos + 1]
            if b < 0x80:
                z = (z & 0x7F) | (b << 7)
                pos += 2
            else:
                z, pos = decode_unsigned(data, pos, end, 5, 32)
        if z != offset2:
            raise CorruptRecordError(f"record {index} has offset delta {_zigzag(z)}")
        offset2 += 2
        # Key, then value: -1 is null, anything else must fit in the record.
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            b = data[pos + 1]
            if b < 0x80:
                z = (z & 0x7F) | (b << 7)
                pos += 2
            else:
                z, pos = decode_unsigned(data, pos, end, 5, 32)
        key_start = pos
        if z & 1:
            if z != 1:
                raise CorruptRecordError(f"record {index}: invalid key length {_zigzag(z)}")
            key_len = -1
        else:
            key_len = z >> 1
            pos += key_len
            if pos > record_end:
                raise CorruptRecordError(f"record {index}: key of {key_len} bytes overruns it")
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            b = data[pos + 1]
            if b < 0x80:
                z = (z & 0x7F) | (b << 7)
                pos += 2
            else:
                z, pos = decode_unsigned(data, pos, end, 5, 32)
        value_start = pos
        if z & 1:
            if z != 1:
                raise CorruptRecordError(f"record {index}: invalid value length {_zigzag(z)}")
            value_len = -1
        else:
            value_len = z >> 1
            pos += value_len
            if pos > record_end:
                raise CorruptRecordError(f"record {index}: value of {value_len} bytes overruns it")
        # Headers: none in most records.
        headers: tuple[RawHeader, ...] = ()
        if data[pos] == 0:
            pos += 1
        else:
            pos, headers = _walk_headers(data, pos, end, record_end, index, out is not None)
        if pos != record_end:
            raise CorruptRecordError(
                f"record {index} declares {length} bytes but its fields end at a different place"
            )
        if out is not None:
            out.append(
                (
                    _zigzag(ts),
                    None if key_len < 0 else data[key_start : key_start + key_len],
                    None if value_len < 0 else data[value_start : value_start + value_len],
                    headers,
                )
            )
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes left after the last of {count} records")


def _walk_headers(
    data: bytes, pos: int, end: int, record_end: int, index: int, decode: bool
) -> tuple[int, tuple[RawHeader, ...]]:
    """Read the header count at ``pos`` and the headers after it (see :func:`walk_records`)."""
    z, pos = decode_unsigned(data, pos, end, 5, 32)
    count = _zigzag(z)
    # Each header takes at least two bytes, which bounds a corrupt count.
    if count < 0 or count * 2 > record_end - pos:
        raise CorruptRecordError(f"record {index} has invalid header count {count}")
    decoded: list[RawHeader] = []
    for _ in range(count):
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            z, pos = decode_unsigned(data, pos, end, 5, 32)
        length = _zigzag(z)
        if length < 0:
            if length != -1:
                raise CorruptRecordError(f"record {index}: invalid header key length {length}")
            raise CorruptRecordError(f"record {index} has a null header key")
        start = pos
        pos += length
        if pos > record_end:
            raise CorruptRecordError(
                f"record {index}: header key of {length} bytes overruns its record"
            )
        try:
            key = data[start:pos].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record {index} has a non-UTF-8 header key") from exc
        z = data[pos]
        if z < 0x80:
            pos += 1
        else:
            z, pos = decode_unsigned(data, pos, end, 5, 32)
        length = _zigzag(z)
        if length < 0:
            if length != -1:
                raise CorruptRecordError(f"record {index}: invalid header value length {length}")
            if decode:
                decoded.append((key, None))
        else:
            start = pos
            pos += length
            if pos > record_end:
                raise CorruptRecordError(
                    f"record {index}: header value of {length} bytes overruns its record"
                )
            if decode:
                decoded.append((key, data[start:pos]))
    return pos, tuple(decoded)
