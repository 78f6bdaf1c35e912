"""Which topic configs a topic may carry, and which values each one takes: the one rule the
broker (parsing a LeaderAndIsr's configs) and the operator (checking a Topic before anything
is sent) share (issue 14).

Kafka refuses an unknown key or a value out of range with INVALID_CONFIG (``LogConfig``'s
``ConfigDef``); accepting either silently leaves a user believing a setting is in force. The
ranges below are Kafka's (``storage/.../log/LogConfig.java``), except where this broker cannot
honour Kafka's floor, which is then raised and says why. Kafka's own topic configs that this
broker does not implement (compaction, tiered storage, recompression...) are refused too, with
a message saying so: a ``cleanup.policy=compact`` that compacts nothing would lose the user's
keys without a word. A value of Kafka's default behaviour that this broker has anyway
(``cleanup.policy=delete``, ``compression.type=producer``) is accepted.

Integers are ASCII digits with an optional ``-`` (no spaces, no ``+``, no other scripts'
digits: the strict parsing issue 14 asks of every integer the broker reads), within the Java
type Kafka gives the config (``INT`` or ``LONG``).

Pure: no I/O, no imports from the rest of the broker, so the operator can use it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

MIN_SEGMENT_BYTES = 64
"""A segment must hold one record batch (61-byte header); Kafka's floor, 14, is a legacy
record's overhead and predates v2 batches."""
MIN_MAX_MESSAGE_BYTES = 64
"""The smallest batch is 61 bytes; Kafka's floor is 0, a topic nothing can be written to."""

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_INTEGER = re.compile(r"-?[0-9]{1,19}")

MIN_INSYNC_REPLICAS = "min.insync.replicas"
"""A topic config that the operator also reads: the partitions' min ISR (issue 14)."""


class TopicConfigError(ValueError):
    """A topic config that cannot be applied; the message names the key and the rule."""


@dataclass(frozen=True, slots=True)
class Integer:
    """Kafka's ``INT`` (``bits=32``) or ``LONG`` config with ``atLeast(minimum)``."""

    minimum: int | None
    bits: int = 64
    why: str = ""

    def parse(self, key: str, raw: str) -> int:
        top = INT_MAX if self.bits == 32 else LONG_MAX
        if _INTEGER.fullmatch(raw) is None or not -top - 1 <= int(raw) <= top:
            kind = "a 32-bit" if self.bits == 32 else "a 64-bit"
            raise TopicConfigError(f"{key}={raw!r} is not {kind} integer")
        value = int(raw)
        if self.minimum is not None and value < self.minimum:
            why = f" ({self.why})" if self.why else ""
            raise TopicConfigError(f"{key}={raw!r}: must be at least {self.minimum}{why}")
        return value


@dataclass(frozen=True, slots=True)
class Choice:
    """Kafka's ``STRING`` (or ``LIST``, comma-separated) config with a set of values; only
    ``supported`` is what this broker does (``why`` says what it does instead)."""

    values: tuple[str, ...]
    supported: frozenset[str]
    why: str
    is_list: bool = False

    def parse(self, key: str, raw: str) -> str:
        items = [v.strip() for v in raw.split(",")] if self.is_list else [raw]
        wrong = [v for v in items if v not in self.values]
        if wrong or not raw:
            raise TopicConfigError(
                f"{key}={raw!r}: Kafka allows {', '.join(self.values)}"
                + (" (comma-separated)" if self.is_list else "")
            )
        if set(items) - self.supported or not items:
            raise TopicConfigError(f"{key}={raw!r} is not implemented by this broker: {self.why}")
        return raw


Rule = Integer | Choice

TOPIC_CONFIGS: Mapping[str, Rule] = {
    "segment.bytes": Integer(
        MIN_SEGMENT_BYTES, bits=32, why="a segment holds at least one record batch"
    ),
    "segment.ms": Integer(1),
    "retention.bytes": Integer(None),  # any value; negative means no size limit (Kafka's)
    "retention.ms": Integer(-1, why="-1 means no time limit"),
    "index.interval.bytes": Integer(0, bits=32),
    "max.message.bytes": Integer(
        MIN_MAX_MESSAGE_BYTES, bits=32, why="a record batch takes at least 61 bytes"
    ),
    "flush.messages": Integer(1),
    MIN_INSYNC_REPLICAS: Integer(1, bits=32),
    "cleanup.policy": Choice(
        ("compact", "delete"),
        frozenset({"delete"}),
        "it deletes by retention and does not compact",
        is_list=True,
    ),
    "compression.type": Choice(
        ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        frozenset({"producer"}),
        "it stores batches as the producer compressed them",
    ),
    "message.timestamp.type": Choice(
        ("CreateTime", "LogAppendTime"),
        frozenset({"CreateTime"}),
        "it keeps the producer's timestamps",
    ),
    "unclean.leader.election.enable": Choice(
        ("true", "false"),
        frozenset({"false"}),
        "its controller elects leaders from the ISR only",
    ),
}
"""The configs this broker applies, with Kafka's type and range for each."""

KAFKA_ONLY: frozenset[str] = frozenset(
    {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "segment.index.bytes",
        "segment.jitter.ms",
    }
)
"""Kafka's other topic configs: refused with a message saying this broker does not implement
them (not "unknown": the user spelt them right)."""


def problem(key: str, raw: str) -> str | None:
    """What is wrong with one entry, or None when the broker applies it as given."""
    rule = TOPIC_CONFIGS.get(key)
    if rule is None:
        if key in KAFKA_ONLY:
            return f"{key} is a Kafka topic config this broker does not implement"
        return f"unknown topic config {key!r}"
    try:
        rule.parse(key, raw)
    except TopicConfigError as e:
        return str(e)
    return None


def problems(configs: Mapping[str, str]) -> list[str]:
    """Every entry's problem, by key: a user fixes them all in one edit."""
    return [p for key in sorted(configs) if (p := problem(key, configs[key])) is not None]


def parse(configs: Mapping[str, str]) -> dict[str, int | str]:
    """The configs with their values typed; TopicConfigError names every bad entry."""
    found = problems(configs)
    if found:
        raise TopicConfigError("; ".join(found))
    return {key: TOPIC_CONFIGS[key].parse(key, raw) for key, raw in configs.items()}
