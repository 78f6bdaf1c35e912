"""The partition state of record (a ``Topic.status.partitions`` entry) as broker requests.

One translation, used by the cluster controller (new partitions, elections, probes,
metadata) and a reassignment's steps, so brokers are always told the same thing. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jbod_broker import wire


def replica_ids(s: Mapping[str, Any]) -> list[int]:
    return [int(r["brokerId"]) for r in s["replicas"]]


def leader_and_isr(
    topic: str,
    s: Mapping[str, Any],
    *,
    is_new: bool,
    min_isr: int,
    configs: Mapping[str, str],
    topic_id: str | None,
) -> wire.LeaderAndIsrPartition:
    return wire.LeaderAndIsrPartition(
        topic=topic,
        partition=s["partition"],
        leader=s["leader"],
        leader_epoch=s["leaderEpoch"],
        isr=list(s["isr"]),
        partition_epoch=s.get("partitionEpoch", 0),
        replicas=replica_ids(s),
        is_new_replica=is_new,
        min_insync_replicas=min_isr,
        configs=dict(configs),
        topic_id=topic_id,
    )


def metadata(
    topic: str,
    s: Mapping[str, Any],
    offline: Iterable[int] | None = None,
    *,
    topic_id: str | None,
) -> wire.PartitionMetadata:
    """``offline`` defaults to the status' own offlineReplicas (KIP-112's union)."""
    return wire.PartitionMetadata(
        topic=topic,
        partition=s["partition"],
        leader=s["leader"],
        leader_epoch=s["leaderEpoch"],
        isr=list(s["isr"]),
        replicas=replica_ids(s),
        offline_replicas=sorted(s.get("offlineReplicas", []) if offline is None else offline),
        topic_id=topic_id,
    )
