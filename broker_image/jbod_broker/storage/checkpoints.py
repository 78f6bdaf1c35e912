"""Kafka's checkpoint files, in Kafka's text format so its tools and ours read the same bytes.

Per log directory: ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint`` and
``replication-offset-checkpoint`` (high watermarks), each::

    0                 <- version
    2                 <- number of entries
    topic 0 1234
    topic 1 99

Per replica: ``leader-epoch-checkpoint`` (``epoch start_offset`` lines) and
``partition.metadata`` (the topic id, KIP-516). Per directory: ``meta.properties`` identifies
the broker and the directory.

Pure parsing and formatting here; files are written with
:func:`jbod_broker.storage.diskio.write_atomically` by the callers, under their failure guard.
"""

from __future__ import annotations

import os
import re

from .errors import CorruptRecordError
from .names import TopicPartition, parse_topic_id

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0


class CheckpointError(CorruptRecordError):
    """A checkpoint file that cannot be parsed: recovery must not trust it."""


def format_offsets(offsets: dict[TopicPartition, int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    lines += [f"{tp.topic} {tp.partition} {off}" for tp, off in sorted(offsets.items())]
    return ("\n".join(lines) + "\n").encode()


def parse_offsets(data: bytes, source: str) -> dict[TopicPartition, int]:
    lines = data.decode(errors="replace").splitlines()
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise CheckpointError(f"{source}: unknown checkpoint version {lines[0]!r}")
        count = int(lines[1])
        entries = lines[2 : 2 + count]
        if len(entries) != count:
            raise CheckpointError(f"{source}: expected {count} entries, found {len(entries)}")
        out: dict[TopicPartition, int] = {}
        for line in entries:
            topic, part, off = line.split(" ")
            out[TopicPartition(topic, int(part))] = int(off)
        return out
    except (IndexError, ValueError) as e:
        raise CheckpointError(f"{source}: malformed checkpoint ({e})") from e


def read_offsets(path: str) -> dict[TopicPartition, int]:
    """Missing file: no entries (a new directory). OSError propagates to the failure guard."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    return parse_offsets(data, path)


def format_epochs(entries: list[tuple[int, int]]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{epoch} {start}" for epoch, start in entries]
    return ("\n".join(lines) + "\n").encode()


def parse_epochs(data: bytes, source: str) -> list[tuple[int, int]]:
    lines = data.decode(errors="replace").splitlines()
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise CheckpointError(f"{source}: unknown checkpoint version {lines[0]!r}")
        count = int(lines[1])
        out = []
        for line in lines[2 : 2 + count]:
            epoch, start = line.split(" ")
            out.append((int(epoch), int(start)))
        if len(out) != count:
            raise CheckpointError(f"{source}: expected {count} entries, found {len(out)}")
        return out
    except (IndexError, ValueError) as e:
        raise CheckpointError(f"{source}: malformed checkpoint ({e})") from e


PARTITION_METADATA_VERSION = 0


def format_partition_metadata(topic_id: str) -> bytes:
    """Kafka's ``partition.metadata`` (``PartitionMetadata.encode``): two lines, the second
    without a newline, exactly as Kafka writes them, so Kafka's reader takes our file."""
    parse_topic_id(topic_id)
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id}".encode()


def parse_partition_metadata(data: bytes, source: str) -> str:
    """The topic id in a ``partition.metadata`` file, read as Kafka's
    ``PartitionMetadataReadBuffer`` reads it: ``version: <n>`` (n at least 0, later versions
    read the same way, as Kafka does for downgrades), then ``topic_id: <id>``, each split at
    a colon followed by whitespace. A file Kafka would refuse raises ``CheckpointError``."""
    lines = data.decode("utf-8", errors="replace").splitlines()
    try:
        version_parts = re.split(r":\s+", lines[0])
        if len(version_parts) != 2 or version_parts[0] != "version":
            raise CheckpointError(f"{source}: malformed line {lines[0]!r}")
        version = int(version_parts[1])
        if version < PARTITION_METADATA_VERSION:
            raise CheckpointError(f"{source}: unknown partition metadata version {version}")
        id_parts = re.split(r":\s+", lines[1])
        if len(id_parts) != 2 or id_parts[0] != "topic_id":
            raise CheckpointError(f"{source}: malformed line {lines[1]!r}")
        parse_topic_id(id_parts[1])
        return id_parts[1]
    except (IndexError, ValueError) as e:
        raise CheckpointError(f"{source}: malformed partition metadata ({e})") from e


def format_properties(props: dict[str, str]) -> bytes:
    return "".join(f"{k}={v}\n" for k, v in sorted(props.items())).encode()


def parse_properties(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in data.decode(errors="replace").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def read_properties(path: str) -> dict[str, str] | None:
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return parse_properties(f.read())
