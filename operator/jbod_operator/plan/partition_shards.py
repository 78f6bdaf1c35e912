"""The sharding rule of the partition state of record (issue 39): one home for where a
partition's state lives, how shards are named and built, and how a Topic is read back whole.

Shard ``k`` of a Topic holds partitions ``[k*SHARD_SIZE, (k+1)*SHARD_SIZE)``: a partition's
shard never changes, so no write ever moves one between objects, and each shard is written
alone with its resourceVersion (``clients.partition_store``). A Topic stored by an operator
before shards (``status.partitions``) is read per shard: a shard that exists is the record
for its range, one that does not yet falls back to the Topic's legacy entries. Creating a
shard from those entries (which every write to a missing shard does) is what moves them, and
a crash between two such creations loses nothing: each range is read from exactly one place.

Everything here is pure: the store (async, the operator) and the CLI (kubectl's JSON) read
through :func:`join` and build objects with :func:`shard_body`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..models.common import API_VERSION
from ..models.partition_shard import SHARD_SIZE, TOPIC_UID_LABEL, PartitionShard

State = dict[str, Any]
"""One partition state as stored (camelCase keys, ``models.topic.PartitionState``)."""

_NAME_LENGTH = 253


def shard_of(partition: int) -> int:
    return partition // SHARD_SIZE


def shard_range(shard: int) -> range:
    return range(shard * SHARD_SIZE, (shard + 1) * SHARD_SIZE)


def shard_count(partitions: int) -> int:
    """Shards holding partitions ``0..partitions-1``."""
    return -(-partitions // SHARD_SIZE)


def shard_name(topic: str, shard: int) -> str:
    """``<topic>-<shard>``: injective (the suffix holds no dash), within a name's 253
    characters; a Topic name too long for the suffix is cut and given a hash of the whole."""
    suffix = f"-{shard}"
    if len(topic) + len(suffix) <= _NAME_LENGTH:
        return topic + suffix
    digest = hashlib.sha256(topic.encode()).hexdigest()[:12]
    head = topic[: _NAME_LENGTH - len(suffix) - len(digest) - 1].rstrip(".-")
    return f"{head}-{digest}{suffix}"


def split(states: Iterable[Mapping[str, Any]]) -> dict[int, list[State]]:
    """States by shard, each shard's sorted by partition."""
    out: dict[int, list[State]] = {}
    for s in states:
        out.setdefault(shard_of(int(s["partition"])), []).append(dict(s))
    for v in out.values():
        v.sort(key=lambda s: int(s["partition"]))
    return out


def apply(
    states: Sequence[Mapping[str, Any]], updates: Mapping[int, Mapping[str, Any]]
) -> list[State]:
    """``states`` (one shard's) with ``updates`` (partition → new state) put in, by partition."""
    by_partition: dict[int, State] = {int(s["partition"]): dict(s) for s in states}
    by_partition.update({p: dict(s) for p, s in updates.items()})
    return [by_partition[p] for p in sorted(by_partition)]


def owner_reference(topic: Mapping[str, Any]) -> dict[str, Any]:
    """Garbage collection with the Topic. Not blocking its deletion: the Topic's own
    finalizer deletes the replicas first, and the shards after it."""
    meta = topic["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "Topic",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def shard_body(
    topic: Mapping[str, Any],
    shard: int,
    states: Sequence[Mapping[str, Any]],
    *,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """The PartitionShard object for shard ``shard`` of ``topic`` (as read from the API: its
    uid is needed) holding ``states``; with ``resource_version`` it replaces the stored one
    only if nobody wrote it since."""
    meta = topic["metadata"]
    body_meta: dict[str, Any] = {
        "name": shard_name(meta["name"], shard),
        "namespace": meta.get("namespace") or "default",
        "labels": {TOPIC_UID_LABEL: meta["uid"]},
        "ownerReferences": [owner_reference(topic)],
    }
    if resource_version is not None:
        body_meta["resourceVersion"] = resource_version
    return {
        "apiVersion": API_VERSION,
        "kind": PartitionShard.kind,
        "metadata": body_meta,
        "spec": {
            "clusterName": topic["spec"]["clusterName"],
            "topic": meta["name"],
            "topicUid": meta["uid"],
            "shard": shard,
            "partitions": [dict(s) for s in states],
        },
    }


def shards_of(
    topic: Mapping[str, Any], shards: Iterable[Mapping[str, Any]]
) -> dict[int, Mapping[str, Any]]:
    """The stored shards of ``topic`` by index: those its uid owns (a re-created Topic of the
    same name never reads its predecessor's)."""
    uid = topic["metadata"].get("uid")
    return {
        int(o["spec"]["shard"]): o
        for o in shards
        if uid
        and o["spec"].get("topicUid") == uid
        and o["spec"].get("topic") == topic["metadata"]["name"]
    }


def legacy_states(topic: Mapping[str, Any]) -> list[State]:
    """What an operator before shards kept in the Topic's status."""
    return list((topic.get("status") or {}).get("partitions") or [])


def join_states(topic: Mapping[str, Any], shards: Mapping[int, Mapping[str, Any]]) -> list[State]:
    """The Topic's partition states, by partition: each range from its shard when it exists,
    else from the legacy status (see the module's docstring)."""
    legacy = split(legacy_states(topic))
    out: list[State] = []
    for k in sorted(set(legacy) | set(shards)):
        out += shards[k]["spec"]["partitions"] if k in shards else legacy[k]
    return out


def join(topic: Mapping[str, Any], shards: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``topic`` with ``status.partitions`` read from its shards: the shape every reader
    (controller, reassignment adapters, planners, the CLI) works on."""
    states = join_states(topic, shards_of(topic, shards))
    status = dict(topic.get("status") or {})
    status["partitions"] = states
    return {**topic, "status": status}


def join_all(
    topics: Iterable[Mapping[str, Any]], shards: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Every Topic joined (one pass over the shards)."""
    by_uid: dict[str, list[Mapping[str, Any]]] = {}
    for o in shards:
        by_uid.setdefault(str(o["spec"].get("topicUid")), []).append(o)
    return [join(t, by_uid.get(str(t["metadata"].get("uid")), [])) for t in topics]


def migrated(topic: Mapping[str, Any], shards: Mapping[int, Mapping[str, Any]]) -> bool:
    """Whether every range of the legacy status has its shard (the legacy entries can go)."""
    return set(split(legacy_states(topic))) <= set(shards)
