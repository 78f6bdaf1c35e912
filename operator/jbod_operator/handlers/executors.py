"""Which adapter executes the steps of the cluster a LogDirMove or a PartitionReassignment
names (issue 22): the one place that chooses.

Today every cluster is a BrokerCluster, whose brokers the operator controls
(``control.our_brokers``). A cluster the operator does not run is the second case, executed
through Kafka's Admin API; ``plan.execution`` maps every method to the calls it makes there.
"""

from __future__ import annotations

import asyncio

from ..clients.brokers import BrokerPool
from ..clients.kube import KubeClient
from ..control.cluster_controller import ClusterController
from ..control.our_brokers import OurBrokersLogDirMoves, OurBrokersReassignments
from ..plan.execution import LogDirMoveExecutor, ReassignmentExecutor


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


def reassignments_on(
    kube: KubeClient, pool: BrokerPool, ctrl: ClusterController, namespace: str, cluster: str
) -> ReassignmentExecutor:
    """The executor of a PartitionReassignment's steps on ``cluster``, whose controller
    ``ctrl`` is; one executor serves one pass."""
    return OurBrokersReassignments(kube, pool, ctrl, namespace, cluster)
