"""What a log's callers hand it and get back: its settings and the results of its calls.

Kept apart from :mod:`~jbod_broker.storage.log` so that the replica manager, the listener and
the move engine name these without the log's machinery (Kafka's ``LogConfig``,
``LogAppendInfo``, ``FetchDataInfo``, ``FileRecords`` slices live beside ``UnifiedLog`` too).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

from .records import DEFAULT_MAX_BATCH_BYTES
from .topic_configs import MIN_MAX_MESSAGE_BYTES, MIN_SEGMENT_BYTES


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-topic settings, named after Kafka's topic configs."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    max_message_bytes: int = DEFAULT_MAX_BATCH_BYTES
    flush_messages: int | None = None
    """fsync after this many records; ``None`` leaves flushing to the periodic flusher and the
    OS, as Kafka does by default (replication, not fsync, is what makes a write durable)."""

    def __post_init__(self) -> None:
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(
                f"segment.bytes must be at least {MIN_SEGMENT_BYTES}, got {self.segment_bytes}"
            )
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be positive, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must not be negative")
        if self.max_message_bytes < MIN_MAX_MESSAGE_BYTES:
            raise ValueError(f"max.message.bytes must be at least {MIN_MAX_MESSAGE_BYTES}")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError(f"flush.messages must be at least 1, got {self.flush_messages}")


class AppendInfo(NamedTuple):
    """What an append did (a NamedTuple: one is built per produce request)."""

    first_offset: int
    last_offset: int
    record_count: int
    batch_count: int
    size_in_bytes: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    data: bytes
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


class FileSlice:
    """``size`` bytes at ``position`` of a segment file, to be sent without being read (a
    follower's fetch, issue 18): ``fd`` is a duplicate descriptor its holder must
    :meth:`close` once the bytes are sent or dropped. ``len()`` is the size, so a codec writes
    the length prefix of a records field holding one as for bytes."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def close(self) -> None:
        """Idempotent: the descriptor is closed once (a closed number may be reused)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


EMPTY_SLICE = FileSlice(-1, 0, 0)
"""Nothing to send (no descriptor held)."""


@dataclass(frozen=True, slots=True)
class SliceResult:
    """A follower's read as a file range (:meth:`Log.read_slice`)."""

    records: FileSlice
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class LogSnapshot:
    """What describe-log-dirs and the move engine need, read under one lock hold."""

    size: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    recovery_point: int
    segments: int
