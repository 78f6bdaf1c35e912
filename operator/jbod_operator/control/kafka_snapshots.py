"""What a Rebalance reads of an Apache Kafka cluster the operator does not run: the second
``plan.execution.ClusterSnapshots`` (issue 22), over ``clients.kafka_admin``.

The brokers' dirs read as every Kafka adapter reads them (``control.kafka_reads``:
DescribeCluster, then DescribeLogDirs one broker at a time, asked again once), with Metadata
of every topic as the partition state of record, made into the snapshot a BrokerCluster gives
by ``plan.kafka_dirs.kafka_snapshot`` (pure). It writes nothing: a Rebalance's children
(LogDirMoves, PartitionReassignments naming the same KafkaCluster) carry its plan out through
their own adapters.
"""

from __future__ import annotations

from collections import Counter

from ..clients.kafka_admin import KafkaAdmin, KafkaAdminError
from ..models.snapshot import ClusterSnapshot
from ..plan.execution import ClusterUnusable
from ..plan.kafka_dirs import cluster_size_of, kafka_snapshot
from ..plan.port_types import ClusterRecord
from ..plan.rebalance import snapshot_fingerprint
from .kafka_reads import read_cluster


class KafkaSnapshots:
    """A KafkaCluster's snapshots for one Rebalance pass. ``dir_capacity`` is the
    KafkaCluster's ``spec.logDirCapacity`` in bytes (0: none given)."""

    def __init__(self, admin: KafkaAdmin, cluster: str, namespace: str, dir_capacity: int) -> None:
        self.admin = admin
        self.cluster = cluster
        self.ns = namespace
        self.dir_capacity = dir_capacity

    async def snapshot(self, captured_at: str) -> ClusterSnapshot:
        desc, dirs = await read_cluster(self.admin)
        try:
            metadata = await self.admin.describe_topics()
        except KafkaAdminError as exc:
            await self.admin.close()
            raise ClusterUnusable("KafkaUnreachable", f"Kafka's Metadata failed: {exc}") from None
        return kafka_snapshot(
            self.cluster,
            desc,
            dirs,
            metadata,
            dir_capacity=self.dir_capacity,
            namespace=self.ns,
            captured_at=captured_at,
        )

    async def record(self) -> ClusterRecord | None:
        """Kafka's record is what it reports: a snapshot read now gives the brokers, the dir
        names, the fingerprint and the replicas per broker. A KafkaCluster always exists
        here (the adapter is chosen by it), so never None."""
        snap = await self.snapshot("")
        return ClusterRecord(
            size=cluster_size_of(b.id for b in snap.brokers),
            dir_names=tuple(sorted({d.name for d in snap.log_dirs})),
            fingerprint=snapshot_fingerprint("KafkaCluster", snap),
            held=dict(Counter(r.broker_id for r in snap.replicas)),
            broker_ids=frozenset(b.id for b in snap.brokers),
        )
