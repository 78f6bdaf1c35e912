"""BrokerCluster reconcile: a readable pipeline of named steps, status written once at the end.

token Secret → storage changes (classified before anything acts) → ConfigMap, Service, PDB,
StatefulSet (server-side apply) → observe brokers → status. Adding a log dir recreates the
StatefulSet with orphaned pods (volumeClaimTemplates are immutable) and keeps every PVC;
removing one is refused, with a condition naming the directory, until it is verified empty on
every broker (a LogDirMove drain empties it; Strimzi #9640).
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
    KubeClient,
)
from ..models import BrokerCluster
from ..plan import builders
from ..plan.conditions import set_condition
from ..plan.storage_diff import diff_log_dirs, log_dirs_from_statefulset, removal_blockers
from ..settings import OperatorSettings
from .context import Ctx, post_events

log = logging.getLogger(__name__)


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
    """For each named dir: what still holds it (replicas, or a broker we cannot ask)."""
    out: dict[str, list[str]] = {}
    for name in names:
        for b, desc in describes.items():
            if desc is None:
                out.setdefault(name, []).append(f"broker {b} did not answer")
                continue
            for d in desc.log_dirs:
                if d.path.rstrip("/").endswith("/data-" + name) and d.partitions:
                    reps = ", ".join(f"{p.topic}-{p.partition}" for p in d.partitions[:5])
                    out.setdefault(name, []).append(
                        f"broker {b} holds {len(d.partitions)} replicas ({reps})"
                    )
    return out


def broker_states(
    bc: BrokerCluster, describes: dict[int, wire.DescribeLogDirsResponse | None], pool_url: Any
) -> list[dict[str, Any]]:
    racks = bc.spec.racks or []
    out = []
    for b in range(bc.spec.replicas):
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
                **({"rack": racks[b % len(racks)]} if racks else {}),
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
    ids = list(range(bc.spec.replicas))
    describes = await pool.describe(ns, name, ids)
    effective = bc
    storage_msg = ""
    recreate = False
    if current_sts is not None:
        current = log_dirs_from_statefulset(current_sts)
        diff = diff_log_dirs(current, list(bc.spec.log_dirs))
        keep = list(bc.spec.log_dirs)
        problems: list[str] = list(diff.refused_messages())
        if diff.removed:
            blockers = removal_blockers(
                diff.removed, nonempty_dirs(describes, [d.name for d in diff.removed])
            )
            if blockers:
                problems += blockers
                keep = keep + [d for d in current if d.name in {r.name for r in diff.removed}]
        if problems:
            storage_msg = "; ".join(problems)
            outcome.events.append(("Warning", "StorageChangeRefused", storage_msg))
            keep_names = {d.name for d in keep}
            ordered = [d for d in current if d.name in keep_names]
            ordered += [d for d in keep if d.name not in {c.name for c in ordered}]
            # Refused resizes keep the current template.
            effective = bc.model_copy(
                update={"spec": bc.spec.model_copy(update={"log_dirs": ordered})}
            )
        recreate = diff_log_dirs(current, list(effective.spec.log_dirs)).recreate_statefulset

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
    brokers = broker_states(bc, describes, lambda b: pool.url(ns, name, b))
    ready = sum(1 for b in brokers if b["live"])
    offline = [f"broker {b['id']}: {d}" for b in brokers for d in b["offlineLogDirs"]]
    conditions = set_condition(
        conditions,
        "Ready",
        ready == bc.spec.replicas and not storage_msg,
        "AllBrokersReady" if ready == bc.spec.replicas else "BrokersNotReady",
        storage_msg or f"{ready}/{bc.spec.replicas} brokers answer",
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
        ready < bc.spec.replicas,
        "WaitingForBrokers" if ready < bc.spec.replicas else "Stable",
        f"{bc.spec.replicas - ready} brokers not answering yet" if ready < bc.spec.replicas else "",
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
    if outcome.status != body.get("status"):
        await kube.patch_status(BROKER_CLUSTERS, ns, name, outcome.status)
    return outcome


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
