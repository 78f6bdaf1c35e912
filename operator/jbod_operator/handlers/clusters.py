"""BrokerCluster reconcile: a pipeline of named steps, status written once at the end.

token Secret → observe (the StatefulSet's claim templates, the broker count, each broker's
log dirs) → decide (``plan.cluster_reconcile``, pure: the storage plan, the conditions, the
Events) → act (ConfigMap, Service, PDB, StatefulSet by server-side apply) → status. Adding a
log dir recreates the StatefulSet with orphaned pods (volumeClaimTemplates are immutable) and
keeps every PVC; removing one is refused, with the condition ``LogDirRemovalBlocked`` naming
the directory, until it is verified empty on every broker (a remove-disks Rebalance or a
LogDirMove drain empties it; Strimzi #9640 deletes the claim of a disk that still holds data).
Lowering ``spec.replicas`` is refused the same way (``plan.scale_down``), with the condition
``ScaleDownBlocked``, while a broker that would go still holds replicas by the Topic statuses.

``status.balance`` belongs to continuous detection (``handlers.balance``) and
``status.strayReplicas`` to the cluster controller: this reconcile never writes them, so a pass
that read the object before their writer cannot put an older value back.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import kopf

from ..clients.brokers import BrokerPool
from ..clients.kube import (
    BROKER_CLUSTERS,
    CONFIGMAPS,
    PDBS,
    SECRETS,
    SERVICES,
    STATEFULSETS,
    KubeClient,
)
from ..clients.partition_store import store_of
from ..models import BrokerCluster
from ..plan import builders, cluster_reconcile, scale_down
from ..plan.cluster_reconcile import ClusterDecision, ClusterObservation
from ..plan.storage_diff import log_dirs_from_statefulset
from ..plan.topic_spec import Event
from ..settings import OperatorSettings
from .context import Ctx, post_events

log = logging.getLogger(__name__)
RECREATED: Event = (
    "Normal",
    "StatefulSetRecreated",
    "log dirs changed: StatefulSet deleted with orphaned pods and PVCs; it is "
    "created again with the new claim templates",
)
"""Posted by the act that recreates it (the decision says only that it is to be)."""


class StatefulSetTerminating(Exception):
    """The old StatefulSet is still being deleted (orphan propagation): try again shortly."""

    def __init__(self, message: str, events: list[Event] | None = None) -> None:
        super().__init__(message)
        self.events = events or []


@dataclass
class ClusterOutcome:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    """(type, reason, message) to post as Kubernetes Events."""


async def reconcile_cluster(
    kube: KubeClient, pool: BrokerPool, settings: OperatorSettings, body: dict[str, Any]
) -> ClusterOutcome:
    """Observe, decide (``plan.cluster_reconcile``), act, write the status once."""
    bc = _parsed(body)
    await _ensure_token(kube, pool, bc)
    decision = cluster_reconcile.decide(await _observe(kube, pool, bc, body))
    events = list(decision.refusals)
    await _apply(kube, settings, decision, events)
    if decision.changed:
        await kube.patch_status(BROKER_CLUSTERS, _ns(bc), bc.metadata.name, decision.status)
    return ClusterOutcome(decision.status, events + list(decision.offline))


def _parsed(body: dict[str, Any]) -> BrokerCluster:
    """The model, its namespace filled in (``default``) when the body has none."""
    bc = BrokerCluster.model_validate(body)
    if bc.metadata.namespace is None:
        meta = bc.metadata.model_copy(update={"namespace": "default"})
        bc = bc.model_copy(update={"metadata": meta})
    return bc


def _ns(bc: BrokerCluster) -> str:
    return bc.metadata.namespace or "default"


async def _ensure_token(kube: KubeClient, pool: BrokerPool, bc: BrokerCluster) -> None:
    """The token brokers and operator share: created once, never rotated silently."""
    ns = _ns(bc)
    if await kube.get(SECRETS, ns, builders.token_secret_name(bc)) is None:
        await kube.create(SECRETS, ns, builders.build_token_secret(bc, secrets.token_hex(24)))
        pool.forget_token(ns, bc.metadata.name)


async def _observe(
    kube: KubeClient, pool: BrokerPool, bc: BrokerCluster, body: dict[str, Any]
) -> ClusterObservation:
    """The StatefulSet's claim templates, the broker count, each broker's log dirs, the time."""
    ns, name = _ns(bc), bc.metadata.name
    sts_name = builders.statefulset_name(bc)
    current_sts = await kube.get(STATEFULSETS, ns, sts_name)
    if current_sts is not None and current_sts["metadata"].get("deletionTimestamp"):
        # An earlier pass deleted it with orphan propagation; the garbage collector finishes
        # that (pods and PVCs keep running), then the new StatefulSet is created and adopts them.
        raise StatefulSetTerminating(f"waiting for StatefulSet {ns}/{sts_name} to be deleted")
    scale = await _scale_decision(kube, bc, current_sts)
    ids = list(range(scale.replicas))
    return ClusterObservation(
        cluster=bc,
        status=dict(body.get("status") or {}),
        current_log_dirs=None if current_sts is None else log_dirs_from_statefulset(current_sts),
        scale=scale,
        describes=await pool.describe(ns, name, ids),
        urls={b: pool.url(ns, name, b) for b in ids},
        now=time.time(),
    )


async def _apply(
    kube: KubeClient,
    settings: OperatorSettings,
    decision: ClusterDecision,
    events: list[Event],
) -> None:
    """The objects, by server-side apply (idempotent); the StatefulSet recreated first when
    its claim templates change (``events`` gets the recreation's)."""
    bc = decision.effective
    ns, name = _ns(bc), bc.metadata.name
    await kube.apply(CONFIGMAPS, ns, builders.build_configmap(bc))
    await kube.apply(SERVICES, ns, builders.build_headless_service(bc))
    await kube.apply(PDBS, ns, builders.build_pdb(bc))
    sts = builders.build_statefulset(
        bc,
        controller_url=f"{settings.controller_url.rstrip('/')}/clusters/{ns}/{name}",
        token_secret=builders.token_secret_name(bc),
    )
    if decision.recreate:
        await _delete_orphaning(kube, bc, events)
    await kube.apply(STATEFULSETS, ns, sts)


async def _delete_orphaning(kube: KubeClient, bc: BrokerCluster, events: list[Event]) -> None:
    """volumeClaimTemplates are immutable: delete the StatefulSet but orphan its pods and
    PVCs; the new one adopts the pods and rolls them onto the new template. Raises
    :class:`StatefulSetTerminating` while the old one is still there."""
    ns, sts_name = _ns(bc), builders.statefulset_name(bc)
    await kube.delete(STATEFULSETS, ns, sts_name, propagation="Orphan")
    events.append(RECREATED)
    if await kube.get(STATEFULSETS, ns, sts_name) is not None:
        raise StatefulSetTerminating(
            f"waiting for StatefulSet {ns}/{sts_name} to be deleted", events
        )


async def _scale_decision(
    kube: KubeClient, bc: BrokerCluster, current_sts: dict[str, Any] | None
) -> scale_down.ScaleDecision:
    """The broker count to apply: a decrease waits while a leaving broker holds replicas."""
    current = None if current_sts is None else (current_sts.get("spec") or {}).get("replicas")
    if current is None or bc.spec.replicas >= int(current):
        return scale_down.ScaleDecision(bc.spec.replicas)
    topics = await store_of(kube).topics(bc.metadata.namespace or "default", bc.metadata.name)
    held = scale_down.replicas_per_broker(topics)
    return scale_down.decide_replicas(int(current), bc.spec.replicas, held)


# -- kopf's side ------------------------------------------------------------------------------


async def on_cluster(ctx: Ctx, body: kopf.Body) -> None:
    """A change or a periodic pass: reconcile under the object's lock, post its Events."""
    if body.get("metadata", {}).get("deletionTimestamp"):
        return
    ctx.ensure_controller(body["metadata"]["namespace"], body["metadata"]["name"])
    ctx.require_leader()
    async with ctx.lock(body):
        try:
            outcome = await reconcile_cluster(ctx.kube, ctx.pool, ctx.settings, dict(body))
        except StatefulSetTerminating as e:
            post_events(body, e.events)
            raise kopf.TemporaryError(str(e), delay=2) from e
    post_events(body, outcome.events)


async def on_cluster_deleted(ctx: Ctx, body: kopf.Body) -> None:
    c = ctx.controllers.pop((body["metadata"]["namespace"], body["metadata"]["name"]), None)
    if c is not None:
        await c.stop()
