"""Stray replicas, pure: what a broker holds that the partitions' state of record does not
place on it, and which of them the BrokerCluster's status lists.

Kafka's rule (KRaft brokers, ``LogManager.isStrayKraftReplica``): a log is stray when the
metadata does not list its broker among the partition's replicas, or does not have its
partition or topic at all. Ours is the same over the Topics' ``status.partitions[]`` (the
state of record): a replica on broker ``b`` is stray when

- its partition's entry does not list ``b`` in ``replicas`` (a broker in
  ``removingReplicas`` outside ``replicas`` was dropped by a step that has shrunk: stray too;
  ``addingReplicas`` are in ``replicas``, so a replica a reassignment is adding never is);
- or its topic has no Topic of the cluster (deleted while ``b`` was down), or that Topic is
  being deleted, or it names a partition the Topic cannot have (``>= spec.partitions``:
  partitions never decrease, so it is an older topic's of the same name).

A ``-future`` copy (a dir move in flight) goes with its replica: stray exactly when the
replica would be. Never stray: a partition of a Topic that exists and is not deleted whose
entry is not written yet (the Topic is creating its partitions), nor a replica in a dir that
is offline (describe-log-dirs does not list what it holds).

The caller (``control.cluster_controller``) reads describe-log-dirs first and the Topics
after it: every writer writes the state of record before it tells a broker, so a replica that
describe-log-dirs listed is in the record read after it unless the record dropped it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jbod_broker import wire

from ..models import kafka_topic_name
from ..models.broker_cluster import MAX_STRAYS
from ..models.common import StrayReplica
from .conditions import parse_iso


@dataclass(frozen=True)
class Stray:
    """One stray replica (its current copy, its future copy, or both) on one broker."""

    broker: int
    topic: str
    partition: int
    log_dir: str
    """The dir of its current copy (of its future copy when it has only that)."""

    def report(self) -> StrayReplica:
        return StrayReplica(
            broker_id=self.broker, topic=self.topic, partition=self.partition, log_dir=self.log_dir
        )

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} ({self.log_dir})"


@dataclass(frozen=True)
class TopicRecord:
    """One Kafka topic name as the cluster's Topics record it."""

    placed: Mapping[int, frozenset[int]]
    """Partition → the brokers its entry lists in ``replicas``."""
    spec_partitions: int
    deleting: bool


def record_index(topics: Iterable[Mapping[str, Any]]) -> dict[str, TopicRecord]:
    """The cluster's Topics by Kafka name. Of two Topics for one name (the second is refused
    and has no partitions) the one with partitions is the record. Built once per check and
    shared by every broker's (at 50,000 partitions, building it per broker held the
    controller's loop for 9 s)."""
    out: dict[str, TopicRecord] = {}
    for t in topics:
        parts = (t.get("status") or {}).get("partitions") or []
        rec = TopicRecord(
            placed={
                int(s["partition"]): frozenset(int(r["brokerId"]) for r in s["replicas"])
                for s in parts
            },
            spec_partitions=int((t.get("spec") or {}).get("partitions") or 0),
            deleting=bool(t["metadata"].get("deletionTimestamp")),
        )
        name = kafka_topic_name(t)
        if name not in out or (rec.placed and not out[name].placed):
            out[name] = rec
    return out


def is_stray(broker: int, topic: str, partition: int, records: Mapping[str, TopicRecord]) -> bool:
    rec = records.get(topic)
    if rec is None or rec.deleting:
        return True
    placed = rec.placed.get(partition)
    if placed is None:
        return partition >= rec.spec_partitions  # below it: its entry is being created
    return broker not in placed


def find_strays(
    broker: int, dirs: wire.DescribeLogDirsResponse, records: Mapping[str, TopicRecord]
) -> list[Stray]:
    """The stray replicas ``dirs`` (``broker``'s describe-log-dirs) lists, against
    ``records`` (``record_index`` of every Topic of the cluster, as read after ``dirs``),
    one per partition, in order."""
    found: dict[tuple[str, int], str] = {}
    for d in dirs.log_dirs:
        if d.error is not None or not d.is_live:
            continue
        for r in d.partitions:
            key = (r.topic, r.partition)
            if not is_stray(broker, r.topic, r.partition, records):
                continue
            if key not in found or not r.is_future:
                found[key] = d.path
    return [Stray(broker, t, p, found[(t, p)]) for t, p in sorted(found)]


def still_there(strays: Iterable[Stray], dirs: wire.DescribeLogDirsResponse | None) -> list[Stray]:
    """Those of ``strays`` that ``dirs`` (a describe-log-dirs after their deletion) still
    lists (all of them when the broker did not answer: their deletion is not confirmed)."""
    if dirs is None:
        return list(strays)
    held = {(r.topic, r.partition) for d in dirs.log_dirs for r in d.partitions}
    return [s for s in strays if (s.topic, s.partition) in held]


def pending(
    left: Iterable[StrayReplica],
    undeleted: Iterable[StrayReplica],
    checked: Mapping[int, float],
    brokers: int,
) -> list[StrayReplica]:
    """What the BrokerCluster's ``status.strayReplicas`` lists.

    ``left``: the replicas PartitionReassignments left on a broker that was down (their
    ``status.strayReplicas``, each with the time it was left). One is pending until its
    broker has been checked (describe-log-dirs, then the strays deleted) after that time:
    ``checked`` gives the wall time at which each broker's last check read its dirs. After
    that check, what the broker still holds is in ``undeleted`` (found and not deleted).
    ``brokers``: the cluster's broker count; a replica on a broker beyond it went with it.

    ``since`` is to the second (``plan.conditions.iso``): a check in the same second as the
    leaving may have read the dirs before it, so only a later second counts.
    """
    out: dict[tuple[int, str, int], StrayReplica] = {}
    for s in left:
        if s.broker_id >= brokers:
            continue
        at = checked.get(s.broker_id)
        if at is not None and at >= parse_iso(s.since, 0.0) + 1:
            continue
        out[(s.broker_id, s.topic, s.partition)] = s
    for s in undeleted:
        out[(s.broker_id, s.topic, s.partition)] = s
    return [out[k] for k in sorted(out)][:MAX_STRAYS]
