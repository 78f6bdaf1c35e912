"""File and directory name rules, in one place (Kafka's ``LogFileUtils``).

A replica lives in ``<topic>-<partition>``; while it is being moved its copy lives in
``<topic>-<partition>.<uuid>-future`` on the destination disk, and a replica waiting for
asynchronous deletion in ``<topic>-<partition>.<uuid>-delete``. Segment files are named by their
base offset padded to 20 digits so that a plain lexical sort is the offset order.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from .errors import InvalidTopicError

MAX_TOPIC_LENGTH = 249
MAX_NAME_BYTES = 255
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"

TOPIC_CHARS = "a-zA-Z0-9._-"
"""Kafka's legal topic characters (``Topic.LEGAL_CHARS``), as a regex character-class body."""
TOPIC_NAME_PATTERN = rf"^(\.?[{TOPIC_CHARS.replace('.', '')}]|\.\.[{TOPIC_CHARS}])[{TOPIC_CHARS}]*$"
"""The whole name rule but its length, as one regex: legal characters, and not "." or "..".
The API server's (and Go's and Rust's) regexes have no lookahead, so "not only dots" reads:
an optional dot then a non-dot, or two dots then anything. The CRD schemas and the wire models
take it from here; :func:`validate_topic` checks the same rule a reason at a time, for its
messages (tests/unit/test_names.py holds the two to the same verdicts)."""
_TOPIC_CHARS_RE = re.compile(rf"^[{TOPIC_CHARS}]+$")
_SPECIAL_RE = re.compile(
    r"^(?P<topic>.+)-(?P<partition>\d+)\.(?P<uid>[0-9a-f]{32})(?P<suffix>-future|-delete|-stray)$"
)
_PLAIN_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_SEGMENT_RE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")


# -- topic ids (KIP-516) ----------------------------------------------------------------------

TOPIC_ID_LENGTH = 22
"""Characters of a topic id as Kafka prints it: 16 bytes in base64url without padding."""
_RESERVED_TOPIC_IDS = (bytes(16), bytes(15) + b"\x01")
"""Kafka's ``Uuid.RESERVED``: the zero id ("no id") and the metadata topic's id."""


def format_topic_id(raw: bytes) -> str:
    """A topic id's 16 bytes as Kafka's ``Uuid.toString``: base64url, no padding.

    Kafka compares ids as 128-bit values and shows them in this form everywhere (its tools, the
    ``partition.metadata`` file), so the operator's status and the broker's files carry the
    same string a Kafka admin would see."""
    if len(raw) != 16:
        raise ValueError(f"a topic id has 16 bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_topic_id(text: str) -> bytes:
    """The 16 bytes of a topic id in Kafka's string form; ``ValueError`` for anything else:
    another length, a character outside base64url, or a reserved id (zero means "no id").

    Stricter than Kafka's ``Uuid.fromString`` on purpose: the one spelling Kafka prints is the
    only one accepted, so two strings never name the same id."""
    if len(text) != TOPIC_ID_LENGTH or not _TOPIC_ID_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a topic id (22 characters of base64url)")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"{text!r} is not a topic id ({e})") from e
    if format_topic_id(raw) != text:
        raise ValueError(f"{text!r} is not a topic id (not Kafka's spelling of its bytes)")
    if raw in _RESERVED_TOPIC_IDS:
        raise ValueError(f"{text!r} is a reserved id, not a topic's")
    return raw


def new_topic_id() -> str:
    """A fresh random id, drawn as Kafka's ``Uuid.randomUuid`` draws one: never a reserved id
    and never one whose string starts with ``-`` (command-line tools would read it as a flag).
    Also Kafka's form of a cluster id."""
    while True:
        raw = uuid.uuid4().bytes
        text = format_topic_id(raw)
        if raw not in _RESERVED_TOPIC_IDS and not text.startswith("-"):
            return text


_TOPIC_ID_RE = re.compile(r"[A-Za-z0-9_-]{22}")


def validate_topic(topic: str) -> None:
    """Kafka's topic rules: legal characters, length, and not '.' or '..'."""
    if not topic:
        raise InvalidTopicError("topic name is empty")
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(topic)} characters long, the limit is {MAX_TOPIC_LENGTH}"
        )
    if not _TOPIC_CHARS_RE.fullmatch(topic):
        raise InvalidTopicError(f"topic name {topic!r} has characters outside [{TOPIC_CHARS}]")


def unify_collision_chars(topic: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: '.' and '_' collide in metric names, so Kafka
    refuses a topic whose name equals an existing one's once every '.' is read as '_'."""
    return topic.replace(".", "_")


def validate_partition(partition: int) -> None:
    if not isinstance(partition, int) or isinstance(partition, bool):
        raise InvalidTopicError(f"partition must be an integer, got {partition!r}")
    if partition < 0 or partition > 2**31 - 1:
        raise InvalidTopicError(f"partition {partition} is out of range [0, 2^31-1]")


class TopicPartition(NamedTuple):
    """A partition's name. A named tuple, not a dataclass: every produce and fetch looks it
    up in several dicts, and a tuple's hash and equality run in C where a dataclass's are
    Python calls (9 hashes per produce request; issue 14's throughput)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @classmethod
    def checked(cls, topic: str, partition: int) -> TopicPartition:
        validate_topic(topic)
        validate_partition(partition)
        return cls(topic, partition)


class DirKind(Enum):
    CURRENT = "current"
    FUTURE = "future"
    DELETE = "delete"
    STRAY = "stray"


@dataclass(frozen=True, slots=True)
class ParsedDirName:
    tp: TopicPartition
    kind: DirKind


def log_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _special_name(tp: TopicPartition, suffix: str) -> str:
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}{suffix}"


def future_dir_name(tp: TopicPartition) -> str:
    """The name of a replica's copy being moved in; refuses names the filesystem cannot hold."""
    name = _special_name(tp, FUTURE_SUFFIX)
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidTopicError(
            f"cannot move {tp}: its future folder name would be {len(name.encode())} bytes, "
            f"over the {MAX_NAME_BYTES}-byte limit (shorten the topic name)"
        )
    return name


def delete_dir_name(tp: TopicPartition) -> str:
    """Name for a replica queued for deletion; the topic is cut so the name always fits."""
    tail = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
    room = MAX_NAME_BYTES - len(tail)
    return tp.topic[:room] + tail


def stray_dir_name(tp: TopicPartition) -> str:
    """Name for a duplicate copy set aside at start-up instead of being deleted."""
    tail = f"-{tp.partition}.{uuid.uuid4().hex}{STRAY_SUFFIX}"
    room = MAX_NAME_BYTES - len(tail)
    return tp.topic[:room] + tail


def parse_dir_name(name: str) -> ParsedDirName | None:
    """Recognise a replica folder; ``None`` for anything else (checkpoints, lost+found...)."""
    m = _SPECIAL_RE.match(name)
    if m:
        kind = {
            FUTURE_SUFFIX: DirKind.FUTURE,
            DELETE_SUFFIX: DirKind.DELETE,
            STRAY_SUFFIX: DirKind.STRAY,
        }[m.group("suffix")]
        return ParsedDirName(TopicPartition(m.group("topic"), int(m.group("partition"))), kind)
    m = _PLAIN_RE.match(name)
    if m:
        topic = m.group("topic")
        if not _TOPIC_CHARS_RE.fullmatch(topic) or len(topic) > MAX_TOPIC_LENGTH:
            return None
        return ParsedDirName(TopicPartition(topic, int(m.group("partition"))), DirKind.CURRENT)
    return None


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file(name: str) -> tuple[int, str] | None:
    m = _SEGMENT_RE.match(name)
    if not m:
        return None
    return int(m.group(1)), "." + m.group(2)


def snapshot_file_name(offset: int) -> str:
    """A producer-state snapshot: ``<offset, 20 digits>.snapshot`` (Kafka's ``LogFileUtils``)."""
    return segment_file_name(offset, PRODUCER_SNAPSHOT_SUFFIX)


def parse_snapshot_file(name: str) -> int | None:
    m = _SNAPSHOT_RE.match(name)
    return int(m.group(1)) if m else None
