"""Topic reconcile: assignment, persisted partition state, LeaderAndIsr and UpdateMetadata.

Order matters as in Kafka's controller: the partition state of record (the Topic's status,
where Kafka would use ZooKeeper) is written *before* brokers are told, so a crash in between
is repaired by the next pass, never lost. Every step is idempotent: a second run with nothing
new sends the same full state (brokers treat it as a no-op) and writes no status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import kopf
from pydantic import ValidationError

from jbod_broker import wire
from jbod_broker.errors import KafkaError
from jbod_broker.storage.names import new_topic_id

from ..clients.brokers import BrokerPool
from ..clients.kube import BROKER_CLUSTERS, TOPICS, KubeClient
from ..models import BrokerCluster, Topic, kafka_topic_name
from ..plan import partition_state, topic_spec
from ..plan.assignment import BrokerInfo, DirUsage, assign_partitions, choose_log_dir
from ..plan.conditions import set_condition
from .context import Ctx, post_events

log = logging.getLogger(__name__)


class TopicNotReady(Exception):
    """Cannot progress now (no cluster, too few brokers); retried after ``delay`` seconds."""

    def __init__(self, message: str, reason: str, delay: float = 10.0) -> None:
        super().__init__(message)
        self.reason = reason
        self.delay = delay


def broker_infos(bc: BrokerCluster, live: set[int]) -> list[BrokerInfo]:
    racks = bc.spec.racks or []
    return [
        BrokerInfo(id=i, rack=racks[i % len(racks)] if racks else None, live=i in live)
        for i in range(bc.spec.replicas)
    ]


def dir_usages(desc: wire.DescribeLogDirsResponse) -> list[DirUsage]:
    return [
        DirUsage(
            name=d.path.rstrip("/").rsplit("/", 1)[-1],
            path=d.path,
            live=d.is_live,
            cordoned=d.cordoned,
            usable_bytes=d.usable_bytes,
            replicas=len(d.partitions),
        )
        for d in desc.log_dirs
    ]


def plan_new_partitions(
    t: Topic,
    bc: BrokerCluster,
    describes: dict[int, wire.DescribeLogDirsResponse | None],
    existing: dict[int, dict[str, Any]],
) -> dict[int, dict[str, Any]]:
    """Partition states for partitions the status does not have yet. Pure."""
    missing = [p for p in range(t.spec.partitions) if p not in existing]
    if not missing:
        return {}
    live = {i for i, d in describes.items() if d is not None}
    rf = t.spec.replication_factor
    if rf > len(live):
        raise TopicNotReady(
            f"replicationFactor {rf} needs {rf} live brokers; {len(live)} of "
            f"{bc.spec.replicas} answer ({sorted(live)})",
            "NotEnoughBrokers",
        )
    assignment = assign_partitions(
        missing,
        rf,
        broker_infos(bc, live),
        existing={p: [r["brokerId"] for r in s["replicas"]] for p, s in existing.items()},
    )
    planned: dict[int, dict[str, int]] = {}
    out: dict[int, dict[str, Any]] = {}
    for p in missing:
        replicas = []
        for b in assignment[p]:
            desc = describes[b]
            assert desc is not None
            usage = planned.setdefault(b, {})
            d = choose_log_dir(dir_usages(desc), usage)
            usage[d.name] = usage.get(d.name, 0) + 1
            replicas.append({"brokerId": b, "logDir": d.path})
        out[p] = {
            "partition": p,
            "replicas": replicas,
            "leader": assignment[p][0],
            "leaderEpoch": 0,
            "isr": list(assignment[p]),
            "partitionEpoch": 0,
            "offlineReplicas": [],
        }
    return out


def leader_and_isr_parts(
    t: Topic,
    states: list[dict[str, Any]],
    broker: int,
    new: set[int],
    configs: dict[str, str],
    topic_id: str | None,
) -> list[wire.LeaderAndIsrPartition]:
    return [
        partition_state.leader_and_isr(
            kafka_topic_name(t),
            s,
            is_new=s["partition"] in new,
            min_isr=topic_spec.min_insync_replicas(configs),
            configs=configs,
            topic_id=topic_id,
        )
        for s in states
        if broker in partition_state.replica_ids(s)
    ]


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
    lock: asyncio.Lock | None = None,
) -> TopicOutcome:
    """Check the Topic, create missing partitions, report readiness; returns the status
    written and the Events to post.

    Observe (the Topic, its cluster, the namespace's other Topics) → decide
    (``topic_spec.check_topic``, pure) → act (partitions) → write the status once. A refused
    Topic gets its reason as the Ready condition and nothing is sent to any broker.

    Leader and ISR of existing partitions belong to the cluster's controller
    (``ClusterController``); this handler only adds partitions, under the controller's lock
    and on a freshly read status, so it never writes back a stale leader or ISR.
    """
    t = Topic.model_validate(body)
    ns = t.metadata.namespace or "default"
    status: dict[str, Any] = dict(body.get("status") or {})
    try:
        refusal = topic_spec.check_topic(t, await _other_topics(kube, t))
        if refusal is None:
            bc = await _cluster(kube, t)
            existing = status.get("partitions") or []
            if t.spec.partitions < len(existing):
                raise TopicNotReady(
                    f"partitions cannot decrease from {len(existing)} to {t.spec.partitions}",
                    "PartitionDecreaseRefused",
                    delay=60,
                )
            if len(existing) < t.spec.partitions:
                describes = await pool.describe(ns, bc.metadata.name, list(range(bc.spec.replicas)))
                async with lock or asyncio.Lock():
                    fresh = await kube.get(TOPICS, ns, t.metadata.name)
                    if fresh is None:
                        return TopicOutcome(status)
                    status = dict(fresh.get("status") or {})
                    # Again on what is stored now, under the lock every partition creation of
                    # the cluster takes: of two Topics racing for one Kafka name, the second
                    # to get here sees the first one's partitions.
                    stored = Topic.model_validate(fresh)
                    refusal = topic_spec.check_topic(stored, await _other_topics(kube, t))
                    if refusal is None:
                        status = await _create_partitions(kube, pool, stored, bc, fresh, describes)
    except TopicNotReady as e:
        conditions = set_condition(
            list(status.get("conditions") or []),
            "Ready",
            False,
            e.reason,
            str(e),
            t.metadata.generation,
            now=time.time(),
        )
        failed = {**status, "observedGeneration": t.metadata.generation, "conditions": conditions}
        await kube.write_status(TOPICS, ns, t.metadata.name, _mine(status), _mine(failed))
        raise
    new_status, events = topic_spec.ready_status(t, status, refusal, now=time.time())
    if refusal is None and not new_status.get("topicId"):
        # A Topic made before topic ids (its partitions all exist): it gets its id now, and
        # the controller's next pass hands it to the brokers with the rest of the state.
        new_status = {**new_status, "topicId": new_topic_id()}
    # ``status`` is what is stored now (the body's, or what was read or written under the lock).
    await kube.write_status(TOPICS, ns, t.metadata.name, _mine(status), _mine(new_status))
    return TopicOutcome(new_status, events)


async def _create_partitions(
    kube: KubeClient,
    pool: BrokerPool,
    t: Topic,
    bc: BrokerCluster,
    fresh: dict[str, Any],
    describes: dict[int, wire.DescribeLogDirsResponse | None],
) -> dict[str, Any]:
    """Plan the missing partitions, write them as the state of record (with the configs in
    force), then tell the brokers; returns the status written (``fresh``'s if none missing)."""
    status = dict(fresh.get("status") or {})
    existing = {s["partition"]: s for s in status.get("partitions") or []}
    new = plan_new_partitions(t, bc, describes, existing)
    if not new:
        return status
    # The state of record first: a crash after this is finished by the next pass.
    states = sorted({**existing, **new}.values(), key=lambda s: s["partition"])
    configs = topic_spec.accepted_configs(t.spec)
    conditions = set_condition(
        list(status.get("conditions") or []),
        "Ready",
        False,
        "Creating",
        f"creating {len(new)} partitions",
        t.metadata.generation,
        now=time.time(),
    )
    fresh["status"] = status = {
        **status,
        # KIP-516: assigned once, with the first partitions, before any broker hears of them.
        "topicId": status.get("topicId") or new_topic_id(),
        "topicName": kafka_topic_name(t),
        "configs": configs,
        "partitions": states,
        "conditions": conditions,
    }
    await kube.replace_status(TOPICS, t.metadata.namespace or "default", fresh)
    live = [i for i, d in describes.items() if d is not None]
    await _send_state(
        pool, t.metadata.namespace or "default", bc, t, states, live, set(new), status["topicId"]
    )
    return status


def _mine(status: dict[str, Any]) -> dict[str, Any]:
    """What this handler may write: never the partition states (the controller's)."""
    return {k: v for k, v in status.items() if k != "partitions"}


async def _send_state(
    pool: BrokerPool,
    ns: str,
    bc: BrokerCluster,
    t: Topic,
    states: list[dict[str, Any]],
    live: list[int],
    new: set[int],
    topic_id: str,
) -> dict[int, set[int]]:
    """Preferred dirs, LeaderAndIsr, UpdateMetadata; returns offline replicas per partition."""
    cluster = bc.metadata.name
    name = kafka_topic_name(t)
    configs = topic_spec.accepted_configs(t.spec)
    endpoints = pool.endpoints(ns, cluster, live)
    offline: dict[int, set[int]] = {}
    for b in live:
        client = await pool.client(ns, cluster, b)
        moves = [
            (name, s["partition"], r["logDir"])
            for s in states
            if s["partition"] in new
            for r in s["replicas"]
            if r["brokerId"] == b and r.get("logDir")
        ]
        try:
            if moves:
                # KIP-113: the broker remembers the directory of a replica it does not hold
                # yet (REPLICA_NOT_AVAILABLE) and creates it there on LeaderAndIsr.
                await client.alter_replica_log_dirs(moves)
            parts = leader_and_isr_parts(t, states, b, new, configs, topic_id)
            if not parts:
                continue
            resp = await client.leader_and_isr(
                wire.LeaderAndIsrRequest(
                    controller_id=0,
                    controller_epoch=pool.controller_epoch,
                    partitions=parts,
                    live_leaders=endpoints,
                )
            )
        except KafkaError as e:
            log.warning(
                "broker did not take the partition state",
                extra={"event": "leader_and_isr_failed", "broker": b, "error": str(e)},
            )
            continue
        for r in resp.partitions:
            if r.error == "KAFKA_STORAGE_ERROR":
                offline.setdefault(r.partition, set()).add(b)
    meta = wire.UpdateMetadataRequest(
        controller_id=0,
        controller_epoch=pool.controller_epoch,
        live_brokers=endpoints,
        partitions=[
            partition_state.metadata(
                name,
                s,
                offline.get(s["partition"], set())
                | (set(partition_state.replica_ids(s)) - set(live)),
                topic_id=topic_id,
            )
            for s in states
        ],
    )
    for b in live:
        try:
            await (await pool.client(ns, cluster, b)).update_metadata(meta)
        except KafkaError:
            continue
    return offline


async def delete_topic(kube: KubeClient, pool: BrokerPool, body: dict[str, Any]) -> None:
    """StopReplica(delete) on every live broker holding a replica (KIP-112 scenario 8)."""
    t = Topic.model_validate(body)
    ns = t.metadata.namespace or "default"
    status = body.get("status") or {}
    states = status.get("partitions") or []
    brokers = sorted({r["brokerId"] for s in states for r in s["replicas"]})
    name = kafka_topic_name(t)
    for b in brokers:
        parts = [
            wire.StopReplicaPartition(topic=name, partition=s["partition"], delete=True)
            for s in states
            if b in {r["brokerId"] for r in s["replicas"]}
        ]
        try:
            client = await pool.client(ns, t.spec.cluster_name, b)
            await client.stop_replica(
                wire.StopReplicaRequest(
                    controller_id=0, controller_epoch=pool.controller_epoch, partitions=parts
                )
            )
        except KafkaError as e:
            log.warning(
                "could not delete replicas on broker",
                extra={"event": "stop_replica_failed", "broker": b, "error": str(e)},
            )


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
            outcome = await reconcile_topic(ctx.kube, ctx.pool, dict(body), ctrl.lock)
        except TopicNotReady as e:
            raise kopf.TemporaryError(str(e), delay=e.delay) from e
    post_events(body, outcome.events)


async def on_topic_deleted(ctx: Ctx, body: kopf.Body) -> None:
    ctx.require_leader()
    async with ctx.lock(body):
        await delete_topic(ctx.kube, ctx.pool, dict(body))
    ctx.forget(body)
