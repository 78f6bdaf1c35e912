"""Kafka's record-batch codecs: the one place that knows how each one frames its bytes.

A v2 batch's attributes name a codec (the low three bits) and everything after its 61-byte
header is then one compressed stream of the records. Kafka's Java clients define the framing of
each, and a broker that stores a batch a Java consumer cannot read has lost data, so the
readers here follow Kafka's readers, not the codecs' own conventions:

* gzip (1): RFC 1952 members (``java.util.zip.GZIPInputStream``).
* snappy (2): snappy-java's ``SnappyOutputStream`` stream: a 16-byte header (``\\x82SNAPPY\\0``,
  version, compatible version, both big-endian int32), then blocks, each a big-endian int32
  length and one raw snappy block. Kafka's reader (``SnappyInputStream``) takes a payload that
  does not start with that header as one raw snappy block, and so do we (older clients,
  librdkafka's default, write it that way).
* lz4 (3): one LZ4 frame as ``Lz4BlockOutputStream`` writes it (KIP-57). Kafka's reader refuses
  a frame with dependent blocks, reserved bits set (a dictionary id included), a version other
  than 1 or a block size code outside 4..7, and checks the header checksum for magic 2 (the
  broken checksum of Kafka 0.8-0.9 applied to magic 0 only, which this broker never accepts).
* zstd (4): standard zstd frames (``ZstdInputStream``).

The codecs themselves are cramjam's (Rust bindings of the reference libraries). Decompression
is bounded: a few KiB of zstd can expand to gigabytes, so output goes into a buffer of at most
``limit + 1`` bytes and a batch that fills it is refused, without the expanded size ever being
allocated (:data:`MAX_DECOMPRESSED_BYTES` says why the default is what it is).

Errors: data that does not decode is :class:`CorruptRecordError` (Kafka's CORRUPT_MESSAGE);
data that decodes to more than the limit is :class:`RecordTooLargeError`.

Thread-safety: pure functions; cramjam's calls keep no state between calls.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable
from typing import Final, TypeAlias

import cramjam

from jbod_broker.storage.errors import CorruptRecordError, RecordTooLargeError

__all__ = [
    "CODEC_NAMES",
    "GZIP",
    "LZ4",
    "MAX_DECOMPRESSED_BYTES",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "codec_name",
    "compress",
    "decompress",
]

Buffer: TypeAlias = bytes | bytearray | memoryview

# The codec ids of a batch's attributes (Kafka's CompressionType).
NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4
CODEC_NAMES: Final = ("none", "gzip", "snappy", "lz4", "zstd")

MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024
"""The most one batch's records may take once decompressed.

Kafka has no such limit (its readers stream a record at a time); this broker's record walk
needs the records in one buffer, so it needs one. ``max.message.bytes`` bounds the compressed
size only, and a Java producer fills a batch until its *estimated compressed* size reaches
``batch.size``, so very compressible data (zstd on repetitive JSON, 20:1 and more) legitimately
decompresses to many times ``max.message.bytes``; 64 times its default (1 MiB) leaves room for
that and still refuses a bomb long before it costs the process real memory."""

# Kafka's default gzip level (Deflater.DEFAULT_COMPRESSION); 9 costs a lot for little gain.
_GZIP_LEVEL: Final = 6
_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS
# Kafka's default zstd level (KIP-390).
_ZSTD_LEVEL: Final = 3

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE: Final = 16
# snappy-java's default block size: how much uncompressed data each block holds.
_XERIAL_BLOCK: Final = 32 * 1024
_INT32_BE: Final = struct.Struct(">i")
_UINT32_LE: Final = struct.Struct("<I")

_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"  # 0x184D2204, little-endian
_LZ4_UNCOMPRESSED_BIT: Final = 0x80000000
_LZ4_FLG_VERSION_1: Final = 0x40
_LZ4_FLG_INDEPENDENT: Final = 0x20
_LZ4_FLG_BLOCK_CHECKSUM: Final = 0x10
_LZ4_FLG_CONTENT_SIZE: Final = 0x08
_LZ4_FLG_CONTENT_CHECKSUM: Final = 0x04

_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
# A first guess at how far a zstd or gzip payload without a size of its own expands: a wrong
# guess only costs a second pass (see _bounded).
_GUESS_RATIO: Final = 4
_MIN_GUESS: Final = 64 * 1024

# cramjam's message when an output buffer is full (Rust's io::ErrorKind::WriteZero). Telling
# "too big" from "corrupt" rests on it; tests/unit/test_compression.py's bombs would catch a
# cramjam that words it differently (they would come back as corrupt).
_FULL: Final = "failed to write whole buffer"

_Into: TypeAlias = Callable[[Buffer, bytearray | mmap.mmap], int]


def codec_name(codec: int) -> str:
    """The codec's name as Kafka's ``compression.type`` spells it ("unknown" past zstd)."""
    return CODEC_NAMES[codec] if 0 <= codec < len(CODEC_NAMES) else "unknown"


# --------------------------------------------------------------------------------------------
# Compression (tests, benchmarks, our own client)
# --------------------------------------------------------------------------------------------


def compress(codec: int, data: Buffer) -> bytes:
    """The records section of a batch compressed with ``codec`` in Kafka's framing.

    Written as Kafka's Java producer writes it, so what we build is what brokers and consumers
    everywhere read: snappy in snappy-java's stream of 32 KiB blocks, lz4 as one frame of
    independent 64 KiB blocks, zstd and gzip at Kafka's default levels.
    """
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return zlib.compress(data, _GZIP_LEVEL, _GZIP_WBITS)
    if codec == SNAPPY:
        parts = [_XERIAL_HEADER]
        with memoryview(data) as view:
            for start in range(0, len(view), _XERIAL_BLOCK):
                block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
                parts.append(_INT32_BE.pack(len(block)))
                parts.append(block)
        return b"".join(parts)
    if codec == LZ4:
        # Independent blocks (Kafka refuses linked ones), no content checksum, 64 KiB blocks.
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))
    raise ValueError(f"unknown compression codec {codec}")


# --------------------------------------------------------------------------------------------
# Decompression (validation and every reader)
# --------------------------------------------------------------------------------------------


def decompress(codec: int, payload: Buffer, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """The records a batch's compressed ``payload`` holds, at most ``limit`` bytes of them.

    Raises :class:`CorruptRecordError` when the payload is not what Kafka's reader for
    ``codec`` accepts, :class:`RecordTooLargeError` when it decodes to more than ``limit``
    bytes (found without holding more than ``limit + 1`` bytes of output).
    """
    if codec == GZIP:
        return _bounded("gzip", cramjam.gzip.decompress_into, payload, _gzip_guess(payload), limit)
    if codec == SNAPPY:
        return _snappy(payload, limit)
    if codec == LZ4:
        return _bounded("lz4", cramjam.lz4.decompress_into, payload, _lz4_bound(payload), limit)
    if codec == ZSTD:
        return _bounded("zstd", cramjam.zstd.decompress_into, payload, _zstd_guess(payload), limit)
    raise ValueError(f"not a compression codec: {codec}")


def _too_large(name: str, limit: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"{name} records decompress to more than {limit} bytes (the most one batch may hold)"
    )


def _bounded(name: str, into: _Into, payload: Buffer, guess: int, limit: int) -> bytes:
    """Decompress with ``into`` (a cramjam ``decompress_into``), never past ``limit + 1`` bytes.

    A first pass goes into a buffer of ``guess`` bytes (the payload's own size where it
    states one), which is almost always enough; a payload that overflows it gets a second
    pass into ``limit + 1`` bytes of anonymous memory, of which only what is written is ever
    backed, and filling that proves it too large. An ``mmap`` for every batch would cost four
    times the decompression of a 16 KiB one, hence the first pass.
    """
    if guess <= limit:
        first = bytearray(guess)
        try:
            n = into(payload, first)
        except cramjam.DecompressionError as exc:
            if _FULL not in str(exc):
                raise CorruptRecordError(f"bad {name} data: {exc}") from None
        else:
            return bytes(first) if n == guess else bytes(memoryview(first)[:n])
    with mmap.mmap(-1, limit + 1) as out:
        try:
            n = into(payload, out)
        except cramjam.DecompressionError as exc:
            if _FULL in str(exc):
                raise _too_large(name, limit) from None
            raise CorruptRecordError(f"bad {name} data: {exc}") from None
        if n > limit:
            raise _too_large(name, limit)
        return out[:n]


def _gzip_guess(payload: Buffer) -> int:
    """A single member's size from its trailer (ISIZE, the size modulo 2**32): exact for what
    every producer writes, and a lying one only costs a second pass."""
    if len(payload) >= 18:
        return int(_UINT32_LE.unpack_from(payload, len(payload) - 4)[0])
    return _MIN_GUESS


def _zstd_guess(payload: Buffer) -> int:
    """The first frame's content size when its header gives one (RFC 8878, 3.1.1.1)."""
    n = len(payload)
    if n >= 6 and payload[:4] == _ZSTD_MAGIC:
        descriptor = payload[4]
        size_code = descriptor >> 6
        single_segment = descriptor & 0x20
        pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
        width = (1 if single_segment else 0, 2, 4, 8)[size_code]
        if width and pos + width <= n:
            size = int.from_bytes(payload[pos : pos + width], "little")
            return size + 256 if width == 2 else size
    return max(_MIN_GUESS, _GUESS_RATIO * n)


def _snappy(payload: Buffer, limit: int) -> bytes:
    """snappy-java's stream, or one raw block when the payload does not start with its header.

    Every raw block states its decompressed size up front, so the whole output is sized (and
    a bomb refused) before anything is decompressed.
    """
    n = len(payload)
    with memoryview(payload) as view:
        if n < _XERIAL_HEADER_SIZE or bytes(view[:8]) != _XERIAL_MAGIC:
            blocks = [view]
        else:
            (version,) = _INT32_BE.unpack_from(view, 8)
            if version < 1:
                raise CorruptRecordError(f"bad snappy data: stream version {version} (at least 1)")
            blocks = []
            pos = _XERIAL_HEADER_SIZE
            while pos < n:
                if n - pos < 4:
                    raise CorruptRecordError(f"bad snappy data: truncated block length at {pos}")
                (length,) = _INT32_BE.unpack_from(view, pos)
                pos += 4
                if length <= 0 or length > n - pos:
                    raise CorruptRecordError(
                        f"bad snappy data: block of {length} bytes at {pos - 4}, "
                        f"{n - pos} bytes left"
                    )
                blocks.append(view[pos : pos + length])
                pos += length
        sizes: list[int] = []
        total = 0
        try:
            for block in blocks:
                size = int(cramjam.snappy.decompress_raw_len(block))
                total += size
                if total > limit:
                    raise _too_large("snappy", limit)
                sizes.append(size)
            out = bytearray(total)
            with memoryview(out) as target:
                at = 0
                for block, size in zip(blocks, sizes, strict=True):
                    if cramjam.snappy.decompress_raw_into(block, target[at : at + size]) != size:
                        raise CorruptRecordError("bad snappy data: a block's size is wrong")
                    at += size
        except cramjam.DecompressionError as exc:
            raise CorruptRecordError(f"bad snappy data: {exc}") from None
        finally:
            for block in blocks:
                block.release()
    return bytes(out)


def _lz4_bound(payload: Buffer) -> int:
    """Check the frame as Kafka's ``Lz4BlockInputStream`` does; return a bound on its output.

    The checks cramjam's decoder would not make are Kafka's own restrictions (see the module
    docstring): a frame cramjam reads but a Java consumer cannot must be refused here. The
    frame must also end exactly where the payload does: Kafka reads one frame and ignores what
    follows, so bytes after it are either garbage or records no Java consumer would see. The
    bound (the size of each stored block, the maximum block size for a compressed one) is
    exact for a producer's full blocks, so the first decompression pass is nearly always the
    only one. Checksums (header, blocks, content) are left to cramjam, which verifies them.
    """
    n = len(payload)
    if n < 7:
        raise CorruptRecordError(f"bad lz4 data: {n} bytes, shorter than a frame header")
    if payload[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("bad lz4 data: not an LZ4 frame (wrong magic)")
    flg = payload[4]
    bd = payload[5]
    if flg & 0x03:
        raise CorruptRecordError("bad lz4 data: reserved bits set in the frame flags")
    if flg & 0xC0 != _LZ4_FLG_VERSION_1:
        raise CorruptRecordError(f"bad lz4 data: frame version {flg >> 6} (only 1)")
    if not flg & _LZ4_FLG_INDEPENDENT:
        raise CorruptRecordError("bad lz4 data: dependent blocks, which Kafka does not read")
    code = (bd >> 4) & 0x07
    if bd & 0x8F or code < 4:
        raise CorruptRecordError(f"bad lz4 data: block descriptor 0x{bd:02x}")
    max_block = 1 << (2 * code + 8)
    checksum = 4 if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
    pos = 7 + (8 if flg & _LZ4_FLG_CONTENT_SIZE else 0)
    bound = 0
    while True:
        if n - pos < 4:
            raise CorruptRecordError("bad lz4 data: the frame ends without an end mark")
        (word,) = _UINT32_LE.unpack_from(payload, pos)
        pos += 4
        if word == 0:
            break
        size = word & ~_LZ4_UNCOMPRESSED_BIT
        if size == 0 or size > max_block:
            raise CorruptRecordError(f"bad lz4 data: block of {size} bytes (at most {max_block})")
        if n - pos < size + checksum:
            raise CorruptRecordError("bad lz4 data: truncated block")
        bound += size if word & _LZ4_UNCOMPRESSED_BIT else max_block
        pos += size + checksum
    if flg & _LZ4_FLG_CONTENT_CHECKSUM:
        pos += 4
    if pos != n:
        raise CorruptRecordError(
            f"bad lz4 data: {n - pos} bytes after the frame"
            if pos < n
            else "bad lz4 data: truncated content checksum"
        )
    return bound
