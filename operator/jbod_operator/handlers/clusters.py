"""BrokerCluster reconcile: a readable pipeline of named steps, status written once at the end.

token Secret → storage changes (classified before anything acts) → ConfigMap, Service, PDB,
StatefulSet (server-side apply) → observe brokers → status. Adding a log dir recreates the
StatefulSet with orphaned pods (volumeClaimTemplates are immutable) and keeps every PVC;
removing one is refused, with the condition ``LogDirRemovalBlocked`` naming the directory,
until it is verified empty on every broker (a remove-disks Rebalance or a LogDirMove drain
empties it; Strimzi #9640 deletes the claim of a disk that still holds data). Lowering
``spec.replicas`` is refused the same way (``plan.scale_down``), with the condition
``ScaleDownBlocked``, while a broker that would go still holds replicas by the Topic statuses.

``status.balance`` belongs to continuous detection (``handlers.balance``) and
``status.strayReplicas`` to the cluster controller: this reconcile never writes them, so a pass
that read the object before their writer cannot put an older value back.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import kopf

from jbod_broker import wire

from ..clients.brokers import BrokerPool
from ..clients.kube import (
    BROKER_CLUSTERS,
    CONFIGMAPS,
    PDBS,
    SECRETS,
    SERVICES,
    STATEFULSETS,
    TOPICS,
    KubeClient,
)
from ..models import BrokerCluster
from ..models.broker_cluster import rack_for
from ..plan import builders, scale_down, storage_diff
from ..plan.conditions import set_condition
from ..plan.storage_diff import diff_log_dirs, log_dirs_from_statefulset, removal_blockers
from ..settings import OperatorSettings
from .context import Ctx, post_events

log = logging.getLogger(__name__)
REMOVAL_BLOCKED = storage_diff.CONDITION


class StatefulSetTerminating(Exception):
    """The old StatefulSet is still being deleted (orphan propagation): try again shortly."""

    def __init__(self, message: str, events: list[tuple[str, str, str]] | None = None) -> None:
        super().__init__(message)
        self.events = events or []


@dataclass
class ClusterOutcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message) to post as Kubernetes Events."""


def nonempty_dirs(
    describes: dict[int, wire.DescribeLogDirsResponse | None], names: list[str]
) -> dict[str, list[str]]:
    """For each named dir: what still holds it, one entry per replica (``broker 2: orders-3``,
    a move's ``-future`` log included) or per broker we cannot ask (it may hold some)."""
    out: dict[str, list[str]] = {}
    for name in names:
        for b, desc in describes.items():
            if desc is None:
                out.setdefault(name, []).append(f"broker {b} did not answer")
                continue
            for d in desc.log_dirs:
                if wire.refers_to_log_dir(name, d.path):
                    out.setdefault(name, []).extend(
                        f"broker {b}: {p.topic}-{p.partition}" for p in d.partitions
                    )
    return out


def broker_states(
    bc: BrokerCluster,
    describes: dict[int, wire.DescribeLogDirsResponse | None],
    pool_url: Any,
    count: int | None = None,
) -> list[dict[str, Any]]:
    """``count``: the brokers there are (the spec's, unless a scale-down waits)."""
    racks = bc.spec.racks or []
    out = []
    for b in range(bc.spec.replicas if count is None else count):
        desc = describes.get(b)
        dirs = []
        offline = []
        if desc is not None:
            for d in desc.log_dirs:
                name = wire.log_dir_short_name(d.path)
                dirs.append(
                    {
                        "name": name,
                        "path": d.path,
                        "live": d.is_live,
                        **({"error": d.error} if d.error else {}),
                        # Whole percent, not bytes: status must not churn on every write
                        # to the disk (exact figures: describe-log-dirs).
                        "usedPercent": (
                            100 - (100 * d.usable_bytes) // d.total_bytes if d.total_bytes else 0
                        ),
                        "cordoned": d.cordoned,
                        "replicas": len(d.partitions),
                    }
                )
                if not d.is_live:
                    offline.append(name)
        out.append(
            {
                "id": b,
                **({"rack": rack} if (rack := rack_for(racks, b)) else {}),
                "live": desc is not None,
                "url": pool_url(b),
                "offlineLogDirs": offline,
                "logDirs": dirs,
            }
        )
    return out


async def reconcile_cluster(
    kube: KubeClient, pool: BrokerPool, settings: OperatorSettings, body: dict[str, Any]
) -> ClusterOutcome:
    bc = BrokerCluster.model_validate(body)
    ns = bc.metadata.namespace or "default"
    if bc.metadata.namespace is None:
        bc = bc.model_copy(update={"metadata": bc.metadata.model_copy(update={"namespace": ns})})
    name = bc.metadata.name
    gen = bc.metadata.generation
    status: dict[str, Any] = dict(body.get("status") or {})
    status.pop("balance", None)  # continuous detection's (handlers.balance)
    status.pop("strayReplicas", None)  # the cluster controller's
    conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
    outcome = ClusterOutcome(status)

    # 1. The token brokers and operator share: created once, never rotated silently.
    secret_name = builders.token_secret_name(bc)
    if await kube.get(SECRETS, ns, secret_name) is None:
        await kube.create(SECRETS, ns, builders.build_token_secret(bc, secrets.token_hex(24)))
        pool.forget_token(ns, name)

    # 2. Storage changes, classified before anything acts on them.
    sts_name = builders.statefulset_name(bc)
    current_sts = await kube.get(STATEFULSETS, ns, sts_name)
    if current_sts is not None and current_sts["metadata"].get("deletionTimestamp"):
        # An earlier pass deleted it with orphan propagation; the garbage collector finishes
        # that (pods and PVCs keep running), then the new StatefulSet is created and adopts them.
        raise StatefulSetTerminating(f"waiting for StatefulSet {ns}/{sts_name} to be deleted")
    scale = await _scale_decision(kube, bc, current_sts)
    count = scale.replicas
    ids = list(range(count))
    describes = await pool.describe(ns, name, ids)
    effective = bc
    storage_msg = ""
    removal_msg = ""
    recreate = False
    if current_sts is not None:
        current = log_dirs_from_statefulset(current_sts)
        diff = diff_log_dirs(current, list(bc.spec.log_dirs))
        keep = list(bc.spec.log_dirs)
        problems: list[str] = list(diff.refused_messages())
        blockers: list[str] = []
        if diff.removed:
            blockers = removal_blockers(
                diff.removed, nonempty_dirs(describes, [d.name for d in diff.removed])
            )
            if blockers:
                removal_msg = "; ".join(blockers)
                problems += blockers
                keep = keep + [d for d in current if d.name in {r.name for r in diff.removed}]
        if problems:
            storage_msg = "; ".join(problems)
            if not (problems == blockers and _holds(conditions, REMOVAL_BLOCKED, removal_msg)):
                outcome.events.append(("Warning", "StorageChangeRefused", storage_msg))
            keep_names = {d.name for d in keep}
            ordered = [d for d in current if d.name in keep_names]
            ordered += [d for d in keep if d.name not in {c.name for c in ordered}]
            # Refused resizes keep the current template.
            effective = bc.model_copy(
                update={"spec": bc.spec.model_copy(update={"log_dirs": ordered})}
            )
        recreate = diff_log_dirs(current, list(effective.spec.log_dirs)).recreate_statefulset
    if scale.blocked:
        effective = effective.model_copy(
            update={"spec": effective.spec.model_copy(update={"replicas": count})}
        )
        if not _holds(conditions, scale_down.CONDITION, scale.message):
            outcome.events.append(("Warning", "ScaleDownRefused", scale.message))

    # 3. The objects, by server-side apply (idempotent).
    controller_url = f"{settings.controller_url.rstrip('/')}/clusters/{ns}/{name}"
    await kube.apply(CONFIGMAPS, ns, builders.build_configmap(effective))
    await kube.apply(SERVICES, ns, builders.build_headless_service(effective))
    await kube.apply(PDBS, ns, builders.build_pdb(effective))
    sts = builders.build_statefulset(
        effective, controller_url=controller_url, token_secret=secret_name
    )
    if recreate:
        # volumeClaimTemplates are immutable: delete the StatefulSet but orphan its pods and
        # PVCs, create the new one; it adopts the pods and rolls them onto the new template.
        await kube.delete(STATEFULSETS, ns, sts_name, propagation="Orphan")
        outcome.events.append(
            (
                "Normal",
                "StatefulSetRecreated",
                "log dirs changed: StatefulSet deleted with orphaned pods and PVCs; it is "
                "created again with the new claim templates",
            )
        )
        left = await kube.get(STATEFULSETS, ns, sts_name)
        if left is not None:
            raise StatefulSetTerminating(
                f"waiting for StatefulSet {ns}/{sts_name} to be deleted", outcome.events
            )
    await kube.apply(STATEFULSETS, ns, sts)

    # 4. Observe and report.
    brokers = broker_states(bc, describes, lambda b: pool.url(ns, name, b), count)
    ready = sum(1 for b in brokers if b["live"])
    offline = [f"broker {b['id']}: {d}" for b in brokers for d in b["offlineLogDirs"]]
    refused = "; ".join(m for m in (storage_msg, scale.message) if m)
    conditions = set_condition(
        conditions,
        "Ready",
        ready == count and not refused,
        (
            "BrokersNotReady"
            if ready < count
            else scale_down.CONDITION
            if scale.blocked
            else REMOVAL_BLOCKED
            if removal_msg
            else "StorageChangeRefused"
            if storage_msg
            else "AllBrokersReady"
        ),
        refused or f"{ready}/{count} brokers answer",
        gen,
    )
    if scale.blocked or any(c.get("type") == scale_down.CONDITION for c in conditions):
        conditions = set_condition(
            conditions,
            scale_down.CONDITION,
            bool(scale.blocked),
            scale_down.REASON_BLOCKED if scale.blocked else scale_down.REASON_CLEAR,
            scale.message or "no broker that would be removed holds a replica",
            gen,
        )
    if removal_msg or any(c.get("type") == REMOVAL_BLOCKED for c in conditions):
        conditions = set_condition(
            conditions,
            REMOVAL_BLOCKED,
            bool(removal_msg),
            storage_diff.REASON_BLOCKED if removal_msg else storage_diff.REASON_CLEAR,
            removal_msg or "no log dir removed from the spec holds a replica",
            gen,
        )
    conditions = set_condition(
        conditions,
        "Degraded",
        bool(offline) or bool(storage_msg),
        "LogDirOffline" if offline else ("StorageChangeRefused" if storage_msg else "Healthy"),
        "; ".join(offline) if offline else (storage_msg or "every log dir is live"),
        gen,
    )
    conditions = set_condition(
        conditions,
        "Progressing",
        ready < count,
        "WaitingForBrokers" if ready < count else "Stable",
        f"{count - ready} brokers not answering yet" if ready < count else "",
        gen,
    )
    prev_offline = {
        (b["id"], d) for b in status.get("brokers") or [] for d in b.get("offlineLogDirs", [])
    }
    for b in brokers:
        for d in b["offlineLogDirs"]:
            if (b["id"], d) not in prev_offline:
                outcome.events.append(
                    ("Warning", "LogDirOffline", f"broker {b['id']}: log dir {d} is offline")
                )
    outcome.status = {
        **status,
        "observedGeneration": gen,
        "conditions": conditions,
        "readyBrokers": ready,
        "brokers": brokers,
        "logDirs": [d.name for d in effective.spec.log_dirs],
    }
    before = {
        k: v for k, v in (body.get("status") or {}).items() if k not in ("balance", "strayReplicas")
    }
    if outcome.status != before:
        await kube.patch_status(BROKER_CLUSTERS, ns, name, outcome.status)
    return outcome


def _holds(conditions: list[dict[str, Any]], type_: str, message: str) -> bool:
    """The condition already says this (True, same message): its Event was posted before."""
    c = next((c for c in conditions if c.get("type") == type_), None)
    return bool(c and c.get("status") == "True" and c.get("message") == message)


async def _scale_decision(
    kube: KubeClient, bc: BrokerCluster, current_sts: dict[str, Any] | None
) -> scale_down.ScaleDecision:
    """The broker count to apply: a decrease waits while a leaving broker holds replicas."""
    current = None if current_sts is None else (current_sts.get("spec") or {}).get("replicas")
    if current is None or bc.spec.replicas >= int(current):
        return scale_down.ScaleDecision(bc.spec.replicas)
    topics = [
        t
        for t in await kube.list(TOPICS, bc.metadata.namespace)
        if (t.get("spec") or {}).get("clusterName") == bc.metadata.name
    ]
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
