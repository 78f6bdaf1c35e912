"""Which adapter executes the steps of the cluster a LogDirMove or a PartitionReassignment
names, and which one reads the snapshot of the cluster a Rebalance names (issue 22): the one
place that chooses.

A BrokerCluster's brokers the operator controls (``control.our_brokers``). A KafkaCluster
names a cluster the operator does not run: its LogDirMoves and PartitionReassignments are
executed through Kafka's Admin API (``control.kafka_log_dir_moves``,
``control.kafka_reassignments``); ``plan.execution`` maps every method to the calls it makes
there. A name that is both kinds, or a KafkaCluster whose Secrets are missing, gets an executor
that does nothing and says why (``ClusterUnusable`` when observed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager

from jbod_broker import wire

from ..clients.kafka_admin import KafkaAdmin
from ..clients.kube import BROKER_CLUSTERS, KAFKA_CLUSTERS
from ..control.kafka_log_dir_moves import KafkaLogDirMoves
from ..control.kafka_reassignments import KafkaReassignments
from ..control.kafka_snapshots import KafkaSnapshots
from ..control.our_brokers import (
    OurBrokersLogDirMoves,
    OurBrokersReassignments,
    OurBrokersSnapshots,
)
from ..models.kafka_cluster import KafkaCluster
from ..models.reassignment import PartitionReassignment
from ..models.snapshot import ClusterSnapshot
from ..plan.execution import (
    ClusterSnapshots,
    ClusterUnusable,
    LogDirMoveExecutor,
    ReassignmentExecutor,
)
from ..plan.port_types import (
    BrokerDirs,
    CancelMoves,
    ClusterRecord,
    ClusterSeen,
    Cordon,
    Delete,
    PartitionsSeen,
    PreferDir,
    RecordDirs,
    RecordInTopic,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
    Tell,
    Throttle,
    ThrottleSeen,
    WritePartition,
)
from ..plan.snapshot import quantity_bytes
from .context import Ctx
from .kafka_clusters import CredentialsMissing, admin_for, connection_for


async def _kafka_admin(
    ctx: Ctx, namespace: str, cluster: str
) -> tuple[KafkaAdmin, KafkaCluster] | ClusterUnusable | None:
    """The Admin API client of the KafkaCluster named ``cluster``, with the KafkaCluster;
    None when no KafkaCluster has that name (our brokers' adapter then); why not when it
    cannot be worked on: a BrokerCluster of the same name, or its Secrets missing."""
    kafka = await ctx.kube.get(KAFKA_CLUSTERS, namespace, cluster)
    if kafka is None:
        return None
    if await ctx.kube.get(BROKER_CLUSTERS, namespace, cluster) is not None:
        return ClusterUnusable(
            "ClusterAmbiguous",
            f"both a BrokerCluster and a KafkaCluster are named {namespace}/{cluster}: "
            "nothing is done until one of them is renamed or deleted",
        )
    kc = KafkaCluster.model_validate(kafka)
    try:
        conn = await connection_for(ctx.kube, namespace, kc.spec)
    except CredentialsMissing as exc:
        return ClusterUnusable("CredentialsMissing", f"KafkaCluster {namespace}/{cluster}: {exc}")
    return await admin_for(ctx, (namespace, cluster), conn), kc


async def log_dir_moves_on(ctx: Ctx, namespace: str, cluster: str) -> LogDirMoveExecutor:
    """The executor of a LogDirMove's moves on ``cluster``: Kafka's Admin API when a
    KafkaCluster has that name, else our brokers (their controller's lock held while a moved
    replica is recorded in its Topic)."""
    admin = await _kafka_admin(ctx, namespace, cluster)
    if admin is None:
        ctrl = ctx.ensure_controller(namespace, cluster)
        return OurBrokersLogDirMoves(ctx.kube, ctx.pool, namespace, cluster, ctrl.lock)
    if isinstance(admin, ClusterUnusable):
        return UnusableLogDirMoves(admin)
    return KafkaLogDirMoves(admin[0])


class UnusableLogDirMoves:
    """The executor of a cluster that cannot be worked on: observing says why
    (:class:`ClusterUnusable`), acting does nothing."""

    def __init__(self, why: ClusterUnusable) -> None:
        self.why = why

    async def cluster_size(self) -> int | None:
        raise self.why

    async def describe_dirs(self, brokers: Sequence[int]) -> Mapping[int, BrokerDirs | None]:
        return {}

    async def describe_moves(
        self, broker: int, replicas: Sequence[tuple[str, int]]
    ) -> Sequence[wire.ReplicaLogDirInfo]:
        return []

    async def wait_for_a_move_to_end(
        self, by_broker: Mapping[int, Sequence[tuple[str, int]]], wait_s: float
    ) -> bool:
        return False

    async def reassigning(self) -> Mapping[tuple[str, int], str]:
        return {}

    async def start(self, action: Start) -> StartResult:
        return StartResult(action.replica, StartAnswer.BROKER_AWAY)

    async def resend(self, action: Resend) -> None:
        return None

    async def cancel(self, action: CancelMoves) -> None:
        return None

    async def set_throttle(self, action: SetThrottle) -> None:
        return None

    async def cordon(self, action: Cordon) -> None:
        return None

    async def record_placement(self, action: RecordInTopic) -> None:
        return None


async def reassignments_on(ctx: Ctx, namespace: str, cluster: str) -> ReassignmentExecutor:
    """The executor of one pass of a PartitionReassignment on ``cluster``: a BrokerCluster's
    brokers through its controller; a KafkaCluster through its Admin API client, the passes
    of the cluster's resources serialized by one lock. A name that is neither is left to our
    brokers' adapter, which reports the cluster missing."""
    admin = await _kafka_admin(ctx, namespace, cluster)
    if admin is None:
        ctrl = ctx.ensure_controller(namespace, cluster)
        return OurBrokersReassignments(ctx.kube, ctx.pool, ctrl, namespace, cluster)
    if isinstance(admin, ClusterUnusable):
        return UnusableReassignments(admin)
    lock = ctx.locks.setdefault(f"kafkacluster/{namespace}/{cluster}", asyncio.Lock())
    return KafkaReassignments(admin[0], lock, cluster)


async def snapshots_of(ctx: Ctx, namespace: str, cluster: str) -> ClusterSnapshots:
    """What a Rebalance pass reads of ``cluster``: a KafkaCluster through its Admin API
    client (its ``spec.logDirCapacity`` as the dirs' size), else a BrokerCluster's spec,
    Topics and brokers (which reports the cluster missing when there is none)."""
    admin = await _kafka_admin(ctx, namespace, cluster)
    if admin is None:
        return OurBrokersSnapshots(ctx.kube, ctx.pool, namespace, cluster)
    if isinstance(admin, ClusterUnusable):
        return UnusableSnapshots(admin)
    client, kc = admin
    capacity = quantity_bytes(kc.spec.log_dir_capacity) if kc.spec.log_dir_capacity else 0
    return KafkaSnapshots(client, cluster, namespace, capacity)


class UnusableSnapshots:
    """The snapshots of a cluster that cannot be worked on: reading it says why."""

    def __init__(self, why: ClusterUnusable) -> None:
        self.why = why

    async def record(self) -> ClusterRecord | None:
        raise self.why

    async def snapshot(self, captured_at: str) -> ClusterSnapshot:
        raise self.why


class UnusableReassignments:
    """The reassignment executor of a cluster that cannot be worked on: observing the cluster
    says why (:class:`ClusterUnusable`); nothing else is reached (the plan waits)."""

    def __init__(self, why: ClusterUnusable) -> None:
        self.why = why

    async def cluster(self) -> ClusterSeen | None:
        raise self.why

    def serialized(self) -> AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def liveness(self) -> tuple[frozenset[int], bool]:
        return frozenset(), False

    async def partitions(self, pr: PartitionReassignment) -> PartitionsSeen:
        raise self.why

    async def write_partitions(self, writes: Sequence[WritePartition]) -> None:
        return None

    async def throttles(self, brokers: Sequence[int]) -> Mapping[int, ThrottleSeen]:
        return {}

    async def record_dirs(self, records: Sequence[RecordDirs]) -> None:
        return None

    async def prefer_dirs(self, prefer: Sequence[PreferDir]) -> None:
        return None

    async def tell(self, tells: Sequence[Tell]) -> None:
        return None

    async def delete(self, deletes: Sequence[Delete]) -> None:
        return None

    async def throttle(self, actions: Sequence[Throttle]) -> None:
        return None

    async def announce(self) -> None:
        return None
