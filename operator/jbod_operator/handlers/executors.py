"""Which adapter executes the steps of the cluster a LogDirMove or a PartitionReassignment
names (issue 22): the one place that chooses.

A BrokerCluster's brokers the operator controls (``control.our_brokers``). A KafkaCluster
names a cluster the operator does not run: its LogDirMoves are executed through Kafka's Admin
API (``control.kafka_log_dir_moves``); ``plan.execution`` maps every method to the calls it
makes there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jbod_broker import wire

from ..clients.brokers import BrokerPool
from ..clients.kube import BROKER_CLUSTERS, KAFKA_CLUSTERS, KubeClient
from ..control.cluster_controller import ClusterController
from ..control.kafka_log_dir_moves import KafkaLogDirMoves
from ..control.our_brokers import OurBrokersLogDirMoves, OurBrokersReassignments
from ..models.kafka_cluster import KafkaCluster
from ..plan.execution import ClusterUnusable, LogDirMoveExecutor, ReassignmentExecutor
from ..plan.logdirmove import (
    BrokerDirs,
    CancelMoves,
    Cordon,
    RecordInTopic,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
)
from .context import Ctx
from .kafka_clusters import CredentialsMissing, admin_for, connection_for


async def log_dir_moves_on(ctx: Ctx, namespace: str, cluster: str) -> LogDirMoveExecutor:
    """The executor of a LogDirMove's moves on ``cluster``: Kafka's Admin API when a
    KafkaCluster has that name, else our brokers (their controller's lock held while a moved
    replica is recorded in its Topic). A BrokerCluster and a KafkaCluster of one name, or a
    KafkaCluster whose Secrets are missing: an executor that does nothing and says why."""
    kafka = await ctx.kube.get(KAFKA_CLUSTERS, namespace, cluster)
    if kafka is None:
        ctrl = ctx.ensure_controller(namespace, cluster)
        return OurBrokersLogDirMoves(ctx.kube, ctx.pool, namespace, cluster, ctrl.lock)
    if await ctx.kube.get(BROKER_CLUSTERS, namespace, cluster) is not None:
        return Unusable(
            "ClusterAmbiguous",
            f"both a BrokerCluster and a KafkaCluster are named {namespace}/{cluster}: "
            "nothing is done until one of them is renamed or deleted",
        )
    spec = KafkaCluster.model_validate(kafka).spec
    try:
        conn = await connection_for(ctx.kube, namespace, spec)
    except CredentialsMissing as exc:
        return Unusable("CredentialsMissing", f"KafkaCluster {namespace}/{cluster}: {exc}")
    return KafkaLogDirMoves(await admin_for(ctx, (namespace, cluster), conn))


class Unusable:
    """The executor of a cluster that cannot be worked on: observing says why
    (:class:`ClusterUnusable`), acting does nothing."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason, self.message = reason, message

    async def cluster_size(self) -> int | None:
        raise ClusterUnusable(self.reason, self.message)

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


def reassignments_on(
    kube: KubeClient, pool: BrokerPool, ctrl: ClusterController, namespace: str, cluster: str
) -> ReassignmentExecutor:
    """The executor of a PartitionReassignment's steps on ``cluster``, whose controller
    ``ctrl`` is; one executor serves one pass."""
    return OurBrokersReassignments(kube, pool, ctrl, namespace, cluster)
