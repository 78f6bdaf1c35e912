"""Which adapter executes the steps of the cluster a LogDirMove or a PartitionReassignment
names (issue 22): the one place that chooses.

A BrokerCluster's brokers the operator controls (``control.our_brokers``). A KafkaCluster
names a cluster the operator does not run: its steps go through Kafka's Admin API
(``control.kafka_reassignments``); ``plan.execution`` maps every method to the calls made there.
"""

from __future__ import annotations

import asyncio

from ..clients.brokers import BrokerPool
from ..clients.kube import BROKER_CLUSTERS, KAFKA_CLUSTERS, KubeClient
from ..control.kafka_reassignments import KafkaReassignments
from ..control.our_brokers import OurBrokersLogDirMoves, OurBrokersReassignments
from ..models.kafka_cluster import KafkaCluster
from ..plan.execution import LogDirMoveExecutor, ReassignmentExecutor
from .context import Ctx
from .kafka_clusters import admin_for, connection_for


def log_dir_moves_on(
    kube: KubeClient,
    pool: BrokerPool,
    namespace: str,
    cluster: str,
    topic_lock: asyncio.Lock | None = None,
) -> LogDirMoveExecutor:
    """The executor of a LogDirMove's moves on ``cluster``; ``topic_lock`` is its
    controller's, held while a moved replica is recorded in its Topic."""
    return OurBrokersLogDirMoves(kube, pool, namespace, cluster, topic_lock)


async def reassignments_on(ctx: Ctx, namespace: str, cluster: str) -> ReassignmentExecutor:
    """The executor of one pass of a PartitionReassignment on ``cluster``: a BrokerCluster's
    brokers through its controller; a KafkaCluster through its Admin API client, the passes
    of the cluster's resources serialized by one lock. A name that is neither is left to our
    brokers' adapter, which reports the cluster missing."""
    if await ctx.kube.get(BROKER_CLUSTERS, namespace, cluster) is None:
        raw = await ctx.kube.get(KAFKA_CLUSTERS, namespace, cluster)
        if raw is not None:
            kc = KafkaCluster.model_validate(raw)
            conn = await connection_for(ctx.kube, namespace, kc.spec)
            admin = await admin_for(ctx, (namespace, cluster), conn)
            lock = ctx.locks.setdefault(f"kafkacluster/{namespace}/{cluster}", asyncio.Lock())
            return KafkaReassignments(admin, lock, cluster)
    ctrl = ctx.ensure_controller(namespace, cluster)
    return OurBrokersReassignments(ctx.kube, ctx.pool, ctrl, namespace, cluster)
