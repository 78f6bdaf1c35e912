"""Topic reconcile: the name and config rules, the missing partitions, readiness.

Observe (the Topic, its cluster, the namespace's other Topics, the brokers' dirs) → decide
(``plan.topic_spec``, ``plan.topic_partitions``: pure) → act → write the status once. The act
is the cluster controller's (``ClusterController.create_partitions``): it writes the partition
state of record (the Topic's status, where Kafka would use ZooKeeper) *before* brokers are
told, so a crash in between is repaired by the next pass, never lost, and a broker refusing
the controller epoch steps the operator down before anything is written. Every step is
idempotent: a second run with nothing new writes nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import kopf
from pydantic import ValidationError

from jbod_broker import wire
from jbod_broker.errors import StaleControllerEpochError

from ..clients.brokers import BrokerPool
from ..clients.kube import BROKER_CLUSTERS, TOPICS, KubeClient
from ..clients.partition_store import store_of
from ..control.broker_commands import BrokerCommands
from ..control.cluster_controller import ClusterController
from ..models import BrokerCluster, Topic, kafka_topic_name
from ..plan import partition_shards, topic_partitions, topic_spec
from ..plan.topic_partitions import PartitionCreation, TopicNotReady
from .context import Ctx, post_events

log = logging.getLogger(__name__)

__all__ = ["TopicNotReady", "TopicOutcome", "delete_topic", "reconcile_topic"]


@dataclass
class TopicOutcome:
    """What a pass wrote and the Events it asks kopf to post."""

    status: dict[str, Any]
    events: list[topic_spec.Event] = field(default_factory=list)


async def _other_topics(kube: KubeClient, t: Topic) -> list[Topic]:
    """The namespace's other Topics, for the name rules (one list call). One that does not
    parse as the model (stored before a schema change) is left out rather than stop the pass."""
    out = []
    for o in await kube.list(TOPICS, t.metadata.namespace or "default"):
        if o["metadata"]["name"] == t.metadata.name:
            continue
        try:
            out.append(Topic.model_validate(o))
        except ValidationError:
            log.warning("unreadable Topic left out", extra={"topic": o["metadata"]["name"]})
    return out


async def _cluster(kube: KubeClient, t: Topic) -> BrokerCluster:
    ns = t.metadata.namespace or "default"
    cluster = await kube.get(BROKER_CLUSTERS, ns, t.spec.cluster_name)
    if cluster is None:
        raise TopicNotReady(
            f"BrokerCluster {ns}/{t.spec.cluster_name} does not exist", "ClusterNotFound"
        )
    return BrokerCluster.model_validate(cluster)


async def reconcile_topic(
    kube: KubeClient,
    pool: BrokerPool,
    body: dict[str, Any],
    ctrl: ClusterController | None = None,
) -> TopicOutcome:
    """Check the Topic, have ``ctrl`` create missing partitions, report readiness; returns
    the status written and the Events to post.

    A refused Topic gets its reason as the Ready condition and nothing is sent to any broker.
    Leader and ISR of existing partitions belong to the cluster's controller; without one
    (a test, a tool) a controller that is not running is made for the pass. A
    StaleControllerEpochError leaves the status as it is."""
    t = Topic.model_validate(body)
    store = store_of(kube)
    await store.shards(t.metadata.namespace or "default")
    stored: dict[str, Any] = dict(store.join(body)["status"])
    ctrl = ctrl or ClusterController(
        t.metadata.namespace or "default", t.spec.cluster_name, kube, pool
    )
    if partition_shards.legacy_states(body):
        await ctrl.migrate(t.metadata.name)
    try:
        refusal = topic_spec.check_topic(t, await _other_topics(kube, t))
        creation = (
            PartitionCreation(stored, refusal=refusal)
            if refusal is not None
            else await _created(kube, pool, ctrl, t, stored)
        )
    except TopicNotReady as e:
        await _write(
            kube, t, stored, topic_partitions.not_ready_status(t, stored, e, now=time.time())
        )
        raise
    if creation is None:
        return TopicOutcome(stored)  # the Topic is gone
    status, events = topic_partitions.pass_status(
        t, creation.status, creation.refusal, now=time.time()
    )
    # ``creation.status`` is what is stored now (the body's, or what was read or written
    # under the controller's lock).
    await _write(kube, t, creation.status, status)
    return TopicOutcome(status, events)


async def _created(
    kube: KubeClient, pool: BrokerPool, ctrl: ClusterController, t: Topic, stored: dict[str, Any]
) -> PartitionCreation | None:
    """The missing partitions created (by ``ctrl``, on the Topic as stored then, checked
    again: another Topic may have taken its Kafka name since), or ``stored`` if none is."""
    bc = await _cluster(kube, t)
    if not topic_partitions.missing_partitions(t, stored):
        return PartitionCreation(stored)
    ns = t.metadata.namespace or "default"
    describes = await pool.describe(ns, bc.metadata.name, list(range(bc.spec.replicas)))

    async def decide(fresh: dict[str, Any]) -> PartitionCreation:
        again = Topic.model_validate(fresh)
        refusal = topic_spec.check_topic(again, await _other_topics(kube, t))
        return topic_partitions.plan_creation(
            again, bc, describes, fresh.get("status") or {}, refusal, now=time.time()
        )

    return await ctrl.create_partitions(t.metadata.name, decide)


async def _write(kube: KubeClient, t: Topic, before: dict[str, Any], after: dict[str, Any]) -> None:
    """The pass' one status write: never the partition states (the controller's)."""
    await kube.write_status(
        TOPICS,
        t.metadata.namespace or "default",
        t.metadata.name,
        topic_partitions.without_partitions(before),
        topic_partitions.without_partitions(after),
    )


async def delete_topic(kube: KubeClient, pool: BrokerPool, body: dict[str, Any]) -> None:
    """StopReplica(delete) on every live broker holding a replica (KIP-112 scenario 8), then
    the Topic's PartitionShards."""
    t = Topic.model_validate(body)
    store = store_of(kube)
    await store.shards(t.metadata.namespace or "default")
    joined = store.join(body)
    states = joined["status"]["partitions"]
    commands = BrokerCommands(pool, t.metadata.namespace or "default", t.spec.cluster_name)
    name = kafka_topic_name(t)
    for b in sorted({r["brokerId"] for s in states for r in s["replicas"]}):
        parts = [
            wire.StopReplicaPartition(topic=name, partition=s["partition"], delete=True)
            for s in states
            if b in {r["brokerId"] for r in s["replicas"]}
        ]
        await commands.stop_replica(b, parts)
    await store.delete(joined)


# -- kopf's side ------------------------------------------------------------------------------


async def on_topic(ctx: Ctx, body: kopf.Body) -> None:
    """A change or a periodic pass; "not yet" becomes a kopf.TemporaryError."""
    if body.get("metadata", {}).get("deletionTimestamp"):
        return
    ctx.require_leader()
    ns = body["metadata"]["namespace"]
    ctrl = ctx.ensure_controller(ns, body["spec"]["clusterName"])
    async with ctx.lock(body):
        try:
            outcome = await reconcile_topic(ctx.kube, ctx.pool, dict(body), ctrl)
        except TopicNotReady as e:
            raise kopf.TemporaryError(str(e), delay=e.delay) from e
        except StaleControllerEpochError as e:
            # The controller stepped down (its on_fenced): the active operator takes it on.
            raise kopf.TemporaryError(f"stepped down: {e}", delay=5) from e
    post_events(body, outcome.events)


async def on_topic_deleted(ctx: Ctx, body: kopf.Body) -> None:
    ctx.require_leader()
    async with ctx.lock(body):
        try:
            await delete_topic(ctx.kube, ctx.pool, dict(body))
        except StaleControllerEpochError as e:
            await ctx.elector.step_down()
            raise kopf.TemporaryError(f"stepped down: {e}", delay=5) from e
    ctx.forget(body)


def on_shard_event(ctx: Ctx, event: kopf.RawEvent) -> None:
    """A PartitionShard event into the store (a standby's too: it takes over warm)."""
    obj = event.get("object")
    if isinstance(obj, dict) and obj.get("spec"):
        store_of(ctx.kube).observe(obj, deleted=event.get("type") == "DELETED")
