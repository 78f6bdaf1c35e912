"""Kafka RecordBatch v2 (magic 2): building, checking and decoding batches.

Partitions are stored as the exact bytes Kafka itself would write, so a fetch can serve stored bytes
unchanged and Kafka's ``DumpLogSegments`` can read our segments. That rules out any private framing:
this module is the only place that knows the layout, and everything else deals in whole batches.

The append path only ever needs :func:`validate_batches` (header checks, one CRC-32C per batch
and, on a leader, a walk over every record that builds no objects) and the two in-place setters
for the fields the CRC does not cover, which is how Kafka lets a leader assign offsets and epochs
without re-encoding. Decoding individual records (:func:`decode_batch`) is for tests, tools and
diagnostics; both go through one record reader, :func:`record_reader.walk_records`, so what the
broker accepts and what a consumer can decode cannot drift apart.

Layout (big-endian), offsets from the start of a batch::

    0  baseOffset int64          27 baseTimestamp int64
    8  batchLength int32         35 maxTimestamp int64
    12 partitionLeaderEpoch i32  43 producerId int64
    16 magic int8                51 producerEpoch int16
    17 crc uint32                53 baseSequence int32
    21 attributes int16          57 recordsCount int32
    23 lastOffsetDelta int32     61 records...

The CRC covers attributes..end, so ``baseOffset``, ``batchLength``, ``partitionLeaderEpoch`` and the
magic byte are outside it.
"""

from __future__ import annotations

import functools
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeAlias

import crc32c

from jbod_broker.storage.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    codec_name,
    compress,
    decompress,
)
from jbod_broker.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    StorageError,
    TransactionalRecordsError,
)
from jbod_broker.storage.record_reader import RawRecord, decode_unsigned, walk_records

__all__ = [
    "BATCH_HEADER_SIZE",
    "CREATE_TIME",
    "DEFAULT_MAX_BATCH_BYTES",
    "GZIP",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "LZ4",
    "MAGIC_V2",
    "NONE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "SNAPPY",
    "ZSTD",
    "BatchHeader",
    "Buffer",
    "Header",
    "Record",
    "RecordInput",
    "build_batch",
    "compute_crc",
    "decode_batch",
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "first_corrupt_position",
    "iter_batches",
    "parse_header",
    "set_base_offset",
    "set_partition_leader_epoch",
    "validate_batches",
]

MAGIC_V2: Final = 2
# baseOffset + batchLength: the part of a batch that batchLength does not count.
LOG_OVERHEAD: Final = 12
BATCH_HEADER_SIZE: Final = 61

CREATE_TIME: Final = 0
LOG_APPEND_TIME: Final = 1

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1
NO_TIMESTAMP: Final = -1

# Kafka's default max.message.bytes (1 MiB + LOG_OVERHEAD), compared with a batch's full size.
DEFAULT_MAX_BATCH_BYTES: Final = 1048588

Buffer: TypeAlias = bytes | bytearray | memoryview

_COMPRESSION_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20

_MIN_BATCH_LENGTH: Final = BATCH_HEADER_SIZE - LOG_OVERHEAD
_MAGIC_OFFSET: Final = 16
_ATTRIBUTES_OFFSET: Final = 21
_PARTITION_LEADER_EPOCH_OFFSET: Final = 12
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_BATCH_LENGTH: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_CRC_COVERED_HEADER: Final = struct.Struct(">hiqqqhii")
_CRC_FREE_HEADER: Final = struct.Struct(">qiibI")

# crc32c ships no type information; pin down the one function we use.
_crc32c: Final[Callable[[Buffer], int]] = crc32c.crc32c

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


# --------------------------------------------------------------------------------------------
# Varints
# --------------------------------------------------------------------------------------------

# Every record writes several small varints (lengths of 1 KiB values, offset deltas, zero
# timestamp deltas); a table turns the common ones into one tuple lookup instead of a loop.
_SMALL_LIMIT: Final = 1 << 14


def _encode_unsigned_slow(z: int) -> bytes:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL: Final[tuple[bytes, ...]] = tuple(_encode_unsigned_slow(z) for z in range(_SMALL_LIMIT))


def _encode_unsigned(z: int) -> bytes:
    if z < _SMALL_LIMIT:
        return _SMALL[z]
    return _encode_unsigned_slow(z)


def encode_varint(n: int) -> bytes:
    """Zigzag varint of a 32-bit value, as Kafka's ``ByteUtils.writeVarint``.

    Zigzag keeps -1 (Kafka's "null" length) to a single byte. A value outside int32 is a
    programming error rather than bad data, hence ``ValueError``.
    """
    if not _INT32_MIN <= n <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {n}")
    return _encode_unsigned((n << 1) ^ (n >> 31))


def encode_varlong(n: int) -> bytes:
    """Zigzag varint of a 64-bit value, as Kafka's ``ByteUtils.writeVarlong``."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {n}")
    return _encode_unsigned((n << 1) ^ (n >> 63))


def _decode_unsigned(buf: Buffer, pos: int, max_bytes: int, bits: int) -> tuple[int, int]:
    """The record reader's varint rule (:func:`record_reader.decode_unsigned`) on any buffer.

    The reader takes ``bytes`` (what it indexes fastest); from a view or a bytearray only the
    varint's own bytes are copied, so positions in an error then count from the varint.
    """
    if type(buf) is bytes:
        return decode_unsigned(buf, pos, len(buf), max_bytes, bits)
    window = bytes(buf[pos : pos + max_bytes]) if pos >= 0 else b""
    value, used = decode_unsigned(window, 0, len(window), max_bytes, bits)
    return value, pos + used


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint (int32) at ``pos``; returns ``(value, position after it)``."""
    z, pos = _decode_unsigned(buf, pos, 5, 32)
    return (z >> 1) ^ -(z & 1), pos


def decode_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varlong (int64) at ``pos``; returns ``(value, position after it)``."""
    z, pos = _decode_unsigned(buf, pos, 10, 64)
    return (z >> 1) ^ -(z & 1), pos


# --------------------------------------------------------------------------------------------
# Data classes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    """A record header; Kafka allows a null value but never a null key."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp.

    Absolute values (rather than the stored deltas) are what every consumer of a decoded record
    wants; the deltas only exist to keep the encoding small.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


class BatchHeader(NamedTuple):
    """The fixed 61-byte prefix of a batch: all the log needs to index, cut and serve it.

    A NamedTuple, not a frozen dataclass: one is built per batch on every append, read and
    recovery scan, and a frozen dataclass takes five times as long to build.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """``CREATE_TIME`` or ``LOG_APPEND_TIME``."""
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)


_make_header: Final[Callable[[Iterable[int]], BatchHeader]] = functools.partial(
    tuple.__new__, BatchHeader
)
"""A header from the 13 fields ``_HEADER`` unpacks (its only input, so always 13): what
``BatchHeader._make`` does less its length check, without a Python frame (once per batch on
every append, read and scan)."""


RecordInput: TypeAlias = (
    tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, Sequence[Header]]
)


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


def _encode_records(
    records: Sequence[RecordInput], deltas: Sequence[int] | None
) -> list[bytes | bytearray]:
    """Encode records (without the batch header) as a list of pieces ready to be joined.

    The pieces are joined once by the caller so a 16 KiB batch costs one copy of each value.
    """
    parts: list[bytes | bytearray] = []
    append = parts.append
    enc = _encode_unsigned
    null = _SMALL[1]  # zigzag(-1)
    zero_ts = _SMALL[0]
    for index, rec in enumerate(records):
        key = rec[0]
        value = rec[1]
        headers: Sequence[Header] = rec[2] if len(rec) == 3 else ()
        if deltas is None:
            ts_bytes = zero_ts
        else:
            delta = deltas[index]
            ts_bytes = enc((delta << 1) ^ (delta >> 63))
        prefix = bytearray(b"\x00")
        prefix += ts_bytes
        prefix += enc(index << 1)
        if key is None:
            prefix += null
            key_len = 0
        else:
            key_len = len(key)
            prefix += enc(key_len << 1)
        if value is None:
            mid = null
            value_len = 0
        else:
            value_len = len(value)
            mid = enc(value_len << 1)
        if headers:
            tail = bytearray(enc(len(headers) << 1))
            for header in headers:
                hkey = header.key.encode("utf-8")
                tail += enc(len(hkey) << 1)
                tail += hkey
                hvalue = header.value
                if hvalue is None:
                    tail += null
                else:
                    tail += enc(len(hvalue) << 1)
                    tail += hvalue
            tail_bytes: bytes | bytearray = tail
        else:
            tail_bytes = zero_ts  # a zero header count
        body_len = len(prefix) + key_len + len(mid) + value_len + len(tail_bytes)
        append(enc(body_len << 1))
        append(prefix)
        if key:
            append(key)
        append(mid)
        if value:
            append(value)
        append(tail_bytes)
    return parts


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise InvalidRecordError(f"{name} {value} is outside [{low}, {high}]")


def build_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    timestamps: Sequence[int] | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: int = NONE,
    is_transactional: bool = False,
) -> bytes:
    """Encode one v2 batch with CreateTime timestamps, the way Kafka's Java producer does.

    ``records`` holds ``(key, value)`` or ``(key, value, headers)`` tuples. Without
    ``timestamps`` every record gets ``base_timestamp`` (default: now); with them,
    ``base_timestamp`` defaults to the first record's timestamp, as in Kafka's
    ``MemoryRecordsBuilder``, and ``maxTimestamp`` is their maximum.
    """
    count = len(records)
    if count == 0:
        raise InvalidRecordError("a batch needs at least one record")
    if count > _INT32_MAX:
        raise InvalidRecordError(f"too many records for one batch: {count}")
    if compression not in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        raise InvalidRecordError(f"unknown compression codec {compression}")

    deltas: list[int] | None
    if timestamps is None:
        if base_timestamp is None:
            base_timestamp = time.time_ns() // 1_000_000
        max_timestamp = base_timestamp
        deltas = None
    else:
        if len(timestamps) != count:
            raise InvalidRecordError(f"{len(timestamps)} timestamps given for {count} records")
        if base_timestamp is None:
            base_timestamp = timestamps[0]
        max_timestamp = max(timestamps)
        if max_timestamp < base_timestamp:
            # validate_batches would refuse it: maxTimestamp must not precede baseTimestamp.
            raise InvalidRecordError(
                f"base_timestamp {base_timestamp} is after every record timestamp"
            )
        deltas = [t - base_timestamp for t in timestamps]
        for delta in deltas:
            _check_int("timestamp delta", delta, _INT64_MIN, _INT64_MAX)

    _check_int("base_offset", base_offset, _INT64_MIN, _INT64_MAX)
    _check_int("base_timestamp", base_timestamp, _INT64_MIN, _INT64_MAX)
    _check_int("partition_leader_epoch", partition_leader_epoch, _INT32_MIN, _INT32_MAX)
    _check_int("producer_id", producer_id, _INT64_MIN, _INT64_MAX)
    _check_int("producer_epoch", producer_epoch, -(1 << 15), (1 << 15) - 1)
    _check_int("base_sequence", base_sequence, _INT32_MIN, _INT32_MAX)

    try:
        parts = _encode_records(records, deltas)
    except (TypeError, AttributeError, UnicodeEncodeError) as exc:
        raise InvalidRecordError(f"cannot encode record: {exc}") from exc

    attributes = compression
    if is_transactional:
        attributes |= _TRANSACTIONAL_BIT

    # Reserve the CRC-free prefix, then fill it once the CRC of the rest is known: one buffer,
    # no second copy of the payload.
    batch = bytearray(_ATTRIBUTES_OFFSET)
    batch += _CRC_COVERED_HEADER.pack(
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    if compression != NONE:
        batch += compress(compression, b"".join(parts))
    else:
        batch += b"".join(parts)
    with memoryview(batch) as view:
        crc = _crc32c(view[_ATTRIBUTES_OFFSET:])
    _CRC_FREE_HEADER.pack_into(
        batch, 0, base_offset, len(batch) - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, crc
    )
    return bytes(batch)


# --------------------------------------------------------------------------------------------
# Headers and in-place updates
# --------------------------------------------------------------------------------------------


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Read the 61-byte header at ``pos`` without checking it (see :func:`validate_batches`)."""
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"truncated batch header at position {pos}: "
            f"{max(0, len(buf) - pos)} of {BATCH_HEADER_SIZE} bytes"
        )
    return _make_header(_HEADER.unpack_from(buf, pos))


def _batch_end(buf: Buffer, pos: int) -> int:
    """End of the batch at ``pos``, checking its declared length against the buffer."""
    if pos < 0 or len(buf) - pos < LOG_OVERHEAD:
        raise CorruptRecordError(f"truncated batch at position {pos}")
    batch_length: int = _BATCH_LENGTH.unpack_from(buf, pos + 8)[0]
    if batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} has length {batch_length} < {_MIN_BATCH_LENGTH}"
        )
    end = pos + LOG_OVERHEAD + batch_length
    if end > len(buf):
        raise CorruptRecordError(
            f"truncated batch at position {pos}: needs {end - pos} bytes, "
            f"{len(buf) - pos} available"
        )
    return end


def compute_crc(buf: Buffer, pos: int = 0) -> int:
    """CRC-32C of the batch at ``pos`` from its attributes to its end (what the crc field holds)."""
    end = _batch_end(buf, pos)
    with memoryview(buf) as view:
        return _crc32c(view[pos + _ATTRIBUTES_OFFSET : end])


def _check_writable_header(buf: bytearray | memoryview, pos: int) -> None:
    if pos < 0 or len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"no batch header at position {pos} (buffer of {len(buf)} bytes)")


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign the batch's base offset in place; the CRC stays valid because it does not cover it.

    This is how a leader stamps offsets on a producer's batch without re-encoding it.
    """
    _check_writable_header(buf, pos)
    _check_int("base_offset", base_offset, _INT64_MIN, _INT64_MAX)
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place; like the base offset it is outside the CRC."""
    _check_writable_header(buf, pos)
    _check_int("partition_leader_epoch", epoch, _INT32_MIN, _INT32_MAX)
    _INT32.pack_into(buf, pos + _PARTITION_LEADER_EPOCH_OFFSET, epoch)


# --------------------------------------------------------------------------------------------
# Scanning and validation
# --------------------------------------------------------------------------------------------


def iter_batches(buf: Buffer, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each complete batch from ``pos``, without checking CRCs.

    An incomplete batch at the end is not an error: a read cut at an arbitrary byte count, or a
    log being appended to, legitimately ends mid-batch, and the caller only wants whole batches.
    A declared length below the header size is an error, since no amount of extra data fixes it.
    """
    end = len(buf)
    unpack_length = _BATCH_LENGTH.unpack_from
    while end - pos >= BATCH_HEADER_SIZE:
        (batch_length,) = unpack_length(buf, pos + 8)
        if batch_length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch at position {pos} has length {batch_length} < {_MIN_BATCH_LENGTH}"
            )
        batch_end = pos + LOG_OVERHEAD + batch_length
        if batch_end > end:
            return
        yield pos, _make_header(_HEADER.unpack_from(buf, pos))
        pos = batch_end


def _plausible(f: tuple[int, ...], size: int, available: int, max_batch_bytes: int) -> bool:
    """Every header check of :func:`_scan`'s slow path, on the unpacked fields, in one go."""
    return (
        f[3] == MAGIC_V2
        and f[1] >= _MIN_BATCH_LENGTH
        and size <= available
        and size <= max_batch_bytes
        and f[12] >= 1
        and f[6] == f[12] - 1
        and f[5] & _COMPRESSION_MASK <= ZSTD
        and (f[8] >= f[7] or f[7] == NO_TIMESTAMP or f[8] == NO_TIMESTAMP)
    )


def _scan(
    buf: Buffer, pos: int, max_batch_bytes: int, check_records: bool = False
) -> tuple[int, list[BatchHeader], StorageError | None]:
    """Check consecutive batches from ``pos``; stop at the first bad one.

    Returns the end of the valid prefix, the headers of the valid batches and the error that
    stopped the scan (``None`` if the whole buffer was valid). One loop serves both the strict
    append check and crash recovery so the two can never disagree about what is valid. With
    ``check_records`` every record of every batch is walked too (:func:`_walk_batch`).
    """
    headers: list[BatchHeader] = []
    end = len(buf)
    unpack = _HEADER.unpack_from
    # The record reader takes bytes. A bytes buffer is walked where it lies; any other (a
    # produce body is a bytearray, stamped in place later) is copied one batch at a time,
    # never whole: a body of many batches would otherwise be held twice, outside the
    # request-memory pool that bounds it.
    whole = _whole_bytes(buf)
    with memoryview(buf) as view:
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        while pos < end:
            remaining = end - pos
            if remaining >= BATCH_HEADER_SIZE:
                # Fast path, every check of the slow path below in one expression (this runs
                # once per appended batch); any failure falls through to the slow path, which
                # finds and names the problem.
                f = unpack(view, pos)
                size = f[1] + LOG_OVERHEAD
                if (
                    _plausible(f, size, remaining, max_batch_bytes)
                    and _crc32c(view[pos + _ATTRIBUTES_OFFSET : pos + size]) == f[4]
                ):
                    header = _make_header(f)
                    if check_records:
                        try:
                            _walk_in(view, whole, pos, pos + size, header, None)
                        except StorageError as e:
                            return pos, headers, e
                    headers.append(header)
                    pos += size
                    continue
            if remaining > _MAGIC_OFFSET and view[pos + _MAGIC_OFFSET] != MAGIC_V2:
                # Checked first so that a legacy (v0/v1) message set, whose header is shorter,
                # is reported as what it is rather than as a truncated v2 batch.
                return (
                    pos,
                    headers,
                    InvalidRecordError(
                        f"unsupported magic {view[pos + _MAGIC_OFFSET]} in batch at position "
                        f"{pos} (only {MAGIC_V2} is supported)"
                    ),
                )
            if remaining < BATCH_HEADER_SIZE:
                return (
                    pos,
                    headers,
                    CorruptRecordError(
                        f"truncated batch header at position {pos}: "
                        f"{remaining} of {BATCH_HEADER_SIZE} bytes"
                    ),
                )
            fields = unpack(view, pos)
            header = _make_header(fields)
            batch_length = header.batch_length
            if batch_length < _MIN_BATCH_LENGTH:
                return (
                    pos,
                    headers,
                    CorruptRecordError(
                        f"batch at position {pos} has length {batch_length} < {_MIN_BATCH_LENGTH}"
                    ),
                )
            size = batch_length + LOG_OVERHEAD
            if size > remaining:
                return (
                    pos,
                    headers,
                    CorruptRecordError(
                        f"truncated batch at position {pos}: needs {size} bytes, "
                        f"{remaining} available"
                    ),
                )
            if size > max_batch_bytes:
                return (
                    pos,
                    headers,
                    RecordTooLargeError(
                        f"batch at position {pos} is {size} bytes, larger than the maximum "
                        f"{max_batch_bytes}"
                    ),
                )
            error = _check_header_fields(header, pos)
            if error is not None:
                return pos, headers, error
            actual = _crc32c(view[pos + _ATTRIBUTES_OFFSET : pos + size])
            if actual != header.crc:
                return (
                    pos,
                    headers,
                    CorruptRecordError(
                        f"CRC mismatch in batch at position {pos}: expected 0x{header.crc:08x}, "
                        f"computed 0x{actual:08x}"
                    ),
                )
            if check_records:
                try:
                    _walk_in(view, whole, pos, pos + size, header, None)
                except StorageError as e:
                    return pos, headers, e
            headers.append(header)
            pos += size
    return pos, headers, None


def _check_header_fields(header: BatchHeader, pos: int) -> StorageError | None:
    count = header.records_count
    if count < 1:
        return CorruptRecordError(f"batch at position {pos} has records count {count}")
    if header.last_offset_delta != count - 1:
        return CorruptRecordError(
            f"batch at position {pos} has last offset delta {header.last_offset_delta} "
            f"but {count} records"
        )
    if header.compression > ZSTD:
        return InvalidRecordError(
            f"batch at position {pos} has unknown compression codec {header.compression}"
        )
    base_ts = header.base_timestamp
    max_ts = header.max_timestamp
    if base_ts != NO_TIMESTAMP and max_ts != NO_TIMESTAMP and max_ts < base_ts:
        return CorruptRecordError(
            f"batch at position {pos} has max timestamp {max_ts} < base timestamp {base_ts}"
        )
    return None


def validate_batches(
    buf: Buffer, *, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES, check_records: bool = True
) -> list[BatchHeader]:
    """Check data from outside (producers, followers) before it enters a log.

    The buffer must be exactly a sequence of complete, CRC-valid v2 batches; anything else is
    refused whole, so a log never holds a partial append. With ``check_records`` (the default,
    and what a leader runs on a producer's data, as Kafka's ``LogValidator``) every record is
    walked as :func:`decode_batch` would decode it: the declared count matches the records
    present, every length and varint is sound, offset deltas run 0, 1, 2..., and a compressed
    batch (gzip, snappy, lz4, zstd) decompresses in Kafka's framing, within
    :data:`compression.MAX_DECOMPRESSED_BYTES`, to records that pass the same walk; it is
    stored as the producer compressed it, never re-encoded. Nothing a consumer cannot decode
    gets past it. Without it (followers, whose bytes a leader
    already checked this way, as Kafka's ``appendAsFollower``), framing, header fields and the
    CRC are checked, which is enough to know the bytes are what the leader wrote.
    """
    n = len(buf)
    if n == 0:
        raise InvalidRecordError("empty record set")
    if n >= BATCH_HEADER_SIZE and type(buf) is not memoryview:
        # A produce request is one batch: check it without the scan loop's set-up.
        f = _HEADER.unpack_from(buf, 0)
        # The views die with the expression (reference counting): no ``with`` needed to
        # leave a bytearray body unexported, and none paid for on every produce.
        if (
            f[1] + LOG_OVERHEAD == n
            and _plausible(f, n, n, max_batch_bytes)
            and _crc32c(memoryview(buf)[_ATTRIBUTES_OFFSET:]) == f[4]
        ):
            header = _make_header(f)
            if check_records:
                # One batch of at most max_batch_bytes: a bytearray body is copied once.
                data = buf if type(buf) is bytes else bytes(buf)
                if f[5] & _COMPRESSION_MASK == NONE:
                    # _walk_batch written out for the common case: this runs on every
                    # produce, and its two helper frames cost 1.4k of the 6.8k instructions
                    # the walk adds to a 16 x 1 KiB batch (cachegrind, compiled reader).
                    try:
                        walk_records(data, BATCH_HEADER_SIZE, n, f[12], None)
                    except (CorruptRecordError, IndexError) as exc:
                        raise _walk_error(exc, 0) from None
                else:
                    _walk_batch(data, 0, n, header, None)
            return [header]
    _, headers, error = _scan(buf, 0, max_batch_bytes, check_records)
    if error is not None:
        raise error
    return headers


_CLIENT_REFUSED_BITS: Final = _CONTROL_BIT | _TRANSACTIONAL_BIT


def check_client_batches(headers: Sequence[BatchHeader]) -> None:
    """Refuse what a client may not write, though it is well formed: Kafka's ``LogValidator``
    rules for the client origin, which a follower's or a move's bytes do not go through (a
    leader wrote those).

    - A control batch (commit and abort markers) is written by the transaction coordinator
      only: INVALID_RECORD, as Kafka's "Clients are not allowed to write control records".
    - A transactional batch: :class:`TransactionalRecordsError` (no transactions here; what
      Kafka answers a produce of transactional records without a transactional id).

    A batch with a producer id and no sequence is the producer state's to refuse
    (``producer_state.check_group``), where the idempotent producer's other rules live.

    One flag test per batch in the common case: this runs on every produce.
    """
    for h in headers:
        if h.attributes & _CLIENT_REFUSED_BITS:
            if h.attributes & _CONTROL_BIT:
                raise InvalidRecordError(
                    "a control batch: clients are not allowed to write control records"
                )
            raise TransactionalRecordsError(
                "transactional records are refused: this broker does not support transactions "
                "(a producer needs a transactional id, which no coordinator here can grant)"
            )


def any_transactional(buf: Buffer) -> bool:
    """Whether any whole batch in ``buf`` has the transactional flag, without validating it:
    Kafka refuses a produce request whole when any of its partitions carries one
    (``RequestUtils.hasTransactionalRecords``), before any partition is appended. Framing
    that does not parse ends the walk; the partition's own validation refuses it. A walk over
    the lengths and one attributes byte per batch, with no header built: it runs on every
    produce request of the Kafka port."""
    pos, end = 0, len(buf)
    unpack_length = _BATCH_LENGTH.unpack_from
    while end - pos >= BATCH_HEADER_SIZE:
        (batch_length,) = unpack_length(buf, pos + 8)
        batch_end = pos + LOG_OVERHEAD + batch_length
        if batch_length < _MIN_BATCH_LENGTH or batch_end > end:
            return False
        # attributes is a big-endian int16: its flags are in the second byte.
        if buf[pos + _ATTRIBUTES_OFFSET + 1] & _TRANSACTIONAL_BIT:
            return True
        pos = batch_end
    return False


def first_corrupt_position(
    buf: Buffer, pos: int = 0, *, max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
) -> tuple[int, list[BatchHeader]]:
    """Return where the valid prefix from ``pos`` ends and the headers of the batches in it.

    Crash recovery truncates a segment to its valid prefix rather than refusing it: a torn write
    at the tail is expected after a crash, and everything before it is still good.
    """
    end_of_valid, headers, _ = _scan(buf, pos, max_batch_bytes)
    return end_of_valid, headers


# --------------------------------------------------------------------------------------------
# Decoding records
# --------------------------------------------------------------------------------------------


def _whole_bytes(buf: Buffer) -> bytes | None:
    """``buf`` as the ``bytes`` the record reader takes without a copy (itself, or the bytes a
    whole view shows), or None: the caller then copies one batch, never all of ``buf`` (a
    produce body is a bytearray, and a body of many batches must not be held twice)."""
    if type(buf) is bytes:
        return buf
    if type(buf) is memoryview and type(buf.obj) is bytes and buf.nbytes == len(buf.obj):
        return buf.obj
    return None


def _walk_in(
    view: memoryview,
    whole: bytes | None,
    pos: int,
    end: int,
    header: BatchHeader,
    out: list[RawRecord] | None,
) -> None:
    """Walk the batch at ``pos`` of a buffer seen as ``view``: in ``whole`` (the buffer's own
    bytes, see :func:`_whole_bytes`) where it lies, else in a copy of this batch alone."""
    if whole is not None:
        _walk_batch(whole, pos, end, header, out)
    else:
        _walk_batch(bytes(view[pos:end]), 0, end - pos, header, out, at=pos)


def _walk_batch(
    buf: bytes,
    pos: int,
    end: int,
    header: BatchHeader,
    out: list[RawRecord] | None,
    *,
    at: int | None = None,
) -> None:
    """Check (and with ``out``, decode) every record of the batch at ``pos`` (ending at ``end``).

    Uncompressed records are walked where they lie, compressed ones once decompressed
    (:func:`compression.decompress`, bounded, in Kafka's framings). The batch itself is never
    re-encoded: what is stored is the producer's bytes. ``at`` is the batch's position in the
    caller's buffer when ``buf`` is a copy of the batch alone (errors name where the caller's
    data is bad).
    """
    where = pos if at is None else at
    codec = header.attributes & _COMPRESSION_MASK
    if codec == NONE:
        data = buf
        start = pos + BATCH_HEADER_SIZE
    elif codec <= ZSTD:
        try:
            with memoryview(buf) as view:
                data = decompress(codec, view[pos + BATCH_HEADER_SIZE : end])
        except (CorruptRecordError, RecordTooLargeError) as exc:
            raise type(exc)(f"batch at position {where}: {exc}") from None
        start = 0
        end = len(data)
    else:
        raise InvalidRecordError(
            f"batch at position {where} uses compression codec {codec} ({codec_name(codec)}), "
            "which Kafka does not define"
        )
    try:
        walk_records(data, start, end, header.records_count, out)
    except (CorruptRecordError, IndexError) as exc:
        raise _walk_error(exc, where) from None


def _walk_error(exc: CorruptRecordError | IndexError, where: int) -> CorruptRecordError:
    """The reader's complaint about the batch at ``where``; an ``IndexError`` is a record
    that ran past the data (see :func:`walk_records`)."""
    if isinstance(exc, IndexError):
        return CorruptRecordError(f"batch at position {where}: truncated record")
    return CorruptRecordError(f"batch at position {where}: {exc}")


def decode_batch(
    buf: Buffer, pos: int = 0, *, verify_crc: bool = True
) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos`` into its header and records.

    For ``LOG_APPEND_TIME`` batches every record's timestamp is the batch's max timestamp, as in
    Kafka, because the broker overwrote only that field when it stamped the append time.
    """
    header = parse_header(buf, pos)
    if header.magic != MAGIC_V2:
        raise InvalidRecordError(
            f"unsupported magic {header.magic} in batch at position {pos} "
            f"(only {MAGIC_V2} is supported)"
        )
    end = _batch_end(buf, pos)
    if verify_crc:
        with memoryview(buf) as view:
            actual = _crc32c(view[pos + _ATTRIBUTES_OFFSET : end])
        if actual != header.crc:
            raise CorruptRecordError(
                f"CRC mismatch in batch at position {pos}: expected 0x{header.crc:08x}, "
                f"computed 0x{actual:08x}"
            )
    raw: list[RawRecord] = []
    with memoryview(buf) as view:
        _walk_in(view, _whole_bytes(buf), pos, end, header, raw)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    return header, [
        Record(
            base_offset + index,
            base_timestamp + ts_delta if append_time is None else append_time,
            key,
            value,
            tuple(Header(k, v) for k, v in headers),
        )
        for index, (ts_delta, key, value, headers) in enumerate(raw)
    ]
