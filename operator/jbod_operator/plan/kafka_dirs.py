"""Kafka's DescribeCluster, DescribeLogDirs and Metadata read as the plans' observed models,
pure: the one reading every Kafka adapter (``control.kafka_log_dir_moves``,
``control.kafka_reassignments``, ``control.kafka_snapshots``) uses, so a LogDirMove, a
PartitionReassignment and a Rebalance see a Kafka dir alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from jbod_broker import wire

from ..models.snapshot import ClusterSnapshot
from .kafka_types import BrokerLogDirs, ClusterDescription, LogDir, TopicMetadata
from .port_types import BrokerDirs, Dir
from .snapshot import RecordedPartition, assemble


def kafka_dir(d: LogDir) -> Dir:
    """One Kafka log dir as the plan sees a dir. Kafka reports no reservation nor headroom
    (its free bytes already count what the copies wrote); a broker older than KIP-1066
    reports no cordon (``None``): not cordoned, and it cannot be."""
    return Dir(
        name=wire.log_dir_short_name(d.path),
        path=d.path,
        live=d.error is None,
        cordoned=bool(d.cordoned),
        usable_bytes=d.usable_bytes or 0,
        replicas={(r.topic, r.partition): r.size_bytes for r in d.replicas if not r.is_future},
        futures=frozenset((r.topic, r.partition) for r in d.replicas if r.is_future),
        total_bytes=d.total_bytes or 0,
        can_cordon=d.cordoned is not None,
    )


def kafka_broker_dirs(read: BrokerLogDirs) -> BrokerDirs:
    """One broker's DescribeLogDirs answer as the plans read a broker's dirs."""
    return BrokerDirs(read.broker_id, tuple(kafka_dir(d) for d in read.dirs))


def cluster_size_of(brokers: Iterable[int]) -> int:
    """The plans' cluster size for Kafka's broker ids (not dense from 0 as ours are): ids up
    to the highest pass the plans' range checks. A PartitionReassignment checks each id
    against the ids DescribeCluster lists (``ClusterSeen.broker_ids``) instead: one below the
    highest that no broker has is refused, as one above it is."""
    return max(brokers, default=-1) + 1


def kafka_snapshot(
    cluster_name: str,
    cluster: ClusterDescription,
    dirs: Mapping[int, BrokerDirs | None],
    metadata: Sequence[TopicMetadata],
    *,
    dir_capacity: int = 0,
    namespace: str = "default",
    captured_at: str | None = None,
) -> ClusterSnapshot:
    """A KafkaCluster as the planner sees it, the same snapshot a BrokerCluster gives
    (``plan.snapshot.assemble``): the brokers and racks of DescribeCluster, each answering
    broker's DescribeLogDirs, and Metadata's replica lists and leaders as the partition state
    of record (every topic, internal ones too: their bytes are on the disks). Metadata names
    no dir, so a replica of a broker that did not answer has none and is left out, as is that
    broker's unknown dirs.

    ``dir_capacity`` (the KafkaCluster's ``spec.logDirCapacity``) plays the BrokerCluster
    spec's dir size: dirs of one broker on one filesystem are each counted as that size, used
    by their replicas' bytes; without it each dir is its filesystem's figures."""
    sizes = {d.name: dir_capacity for bd in dirs.values() if bd is not None for d in bd.dirs}
    partitions = [
        RecordedPartition(
            topic=t.name,
            partition=p.partition,
            replicas=tuple(p.replicas),
            leader=-1 if p.leader is None else p.leader,
        )
        for t in sorted(metadata, key=lambda t: t.name)
        if t.error is None
        for p in sorted(t.partitions, key=lambda p: p.partition)
    ]
    return assemble(
        cluster_name,
        {b.broker_id: b.rack for b in cluster.brokers},
        {b: bd for b, bd in dirs.items() if bd is not None},
        partitions,
        sizes if dir_capacity > 0 else {},
        namespace=namespace,
        captured_at=captured_at,
    )
