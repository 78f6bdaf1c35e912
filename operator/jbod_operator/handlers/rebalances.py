"""Rebalance: a snapshot, a proposal from the Spark job, approval, then children in waves.

A pass observes (the Rebalance afresh, its BrokerCluster and Topics, a fingerprint of what
placement depends on, the planning job through the :class:`JobLauncher`, the proposal
ConfigMap once there is one, the children by their label, and, once every child succeeded, a
fresh describe-log-dirs of every broker), lets ``plan.rebalance.decide`` take every transition,
carries out the actions in order and writes the status once; the command annotation is
removed last, after the status that acted on it is written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from pydantic import ValidationError

from ..clients.brokers import BrokerPool
from ..clients.kube import (
    BROKER_CLUSTERS,
    CONFIGMAPS,
    LOG_DIR_MOVES,
    REASSIGNMENTS,
    REBALANCES,
    TOPICS,
    ApiError,
    KubeClient,
)
from ..clients.planning_jobs import OUTPUT_FILES, JobLauncher, JobRef
from ..models import BrokerCluster, Rebalance
from ..models.plan_report import PlanReport
from ..models.rebalance import CHILD_LABEL, COMMAND_ANNOTATION, RebalancePhase
from ..models.snapshot import ClusterSnapshot
from ..plan import proposal_configmap
from ..plan import rebalance as rp
from ..plan.conditions import now_iso
from ..plan.snapshot import build_snapshot
from .balance import metric_history
from .context import Ctx, post_events, unless_stopped

log = logging.getLogger(__name__)
Phase = RebalancePhase


@dataclass
class _Seen:
    """What observe read that act needs again (raw objects, the proposal's children)."""

    bc: dict[str, Any] | None = None
    topics: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, bytes] = field(default_factory=dict)
    waves_doc: dict[str, Any] | None = None
    packed: tuple[dict[str, str], dict[str, str]] | None = None
    """The proposal ConfigMap's data and binaryData (``plan.proposal_configmap``)."""
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)


def _proposal_files(seen: _Seen) -> dict[str, bytes]:
    """The proposal ConfigMap's files: the job's outputs and the waves they were put in."""
    files = {n: seen.outputs[n] for n in OUTPUT_FILES if n in seen.outputs}
    files["waves.json"] = json.dumps(seen.waves_doc or {"waves": 0, "partitions": []}).encode()
    return files


@dataclass
class Outcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]]
    active: bool


def owner_reference(rb: Rebalance) -> dict[str, Any]:
    """The children and the proposal ConfigMap go with their Rebalance. No
    ``blockOwnerDeletion``: a Rebalance deleted in the foreground need not wait for them, and
    the operator needs no ``rebalances/finalizers`` grant."""
    return {
        "apiVersion": rb.api_version,
        "kind": rb.kind,
        "name": rb.metadata.name,
        "uid": rb.metadata.uid,
        "controller": True,
    }


def job_ref(rb: Rebalance, job: str) -> JobRef:
    """Planning job ``job`` of ``rb``: in its namespace, owned by it."""
    return JobRef(rb.metadata.namespace or "default", job, owner_reference(rb))


async def _snapshot(
    pool: BrokerPool, ns: str, rb: Rebalance, bc: dict[str, Any], topics: list[dict[str, Any]]
) -> ClusterSnapshot:
    """The cluster as the planner sees it: the Topics' state of record and every live
    broker's describe-log-dirs (the same pure builder as ``jbod_spark.collect``)."""
    described = await pool.describe(ns, rb.spec.cluster_name, list(range(_broker_count(bc))))
    return build_snapshot(
        rb.spec.cluster_name,
        bc,
        topics,
        {b: d for b, d in described.items() if d is not None},
        namespace=ns,
        captured_at=now_iso(),
    )


def _broker_count(bc: dict[str, Any]) -> int:
    """Every broker there is, the leaving ones of a scale-down that waits included: that wait
    names a remove-brokers Rebalance of them as its remedy (``plan.scale_down``)."""
    return BrokerCluster.model_validate(bc).broker_count


def _cluster_view(bc: dict[str, Any], snap: ClusterSnapshot | None) -> rp.ClusterView:
    size = _broker_count(bc)
    names = tuple(str(d["name"]) for d in bc["spec"].get("logDirs") or [])
    dirs: dict[int, tuple[tuple[str, str], ...]] = {
        b: tuple((n, n) for n in names) for b in range(size)
    }
    if snap is not None:
        for b in range(size):
            found = tuple((d.name, d.path) for d in snap.log_dirs if d.broker_id == b and d.live)
            if found:
                dirs[b] = found
    return rp.ClusterView(size=size, dirs=dirs)


def _child_view(kind: str, obj: Mapping[str, Any]) -> rp.ChildView:
    st = obj.get("status") or {}
    to_move = st.get("bytesToMove") if kind == "PartitionReassignment" else st.get("bytesTotal")
    moved = st.get("bytesMoved") if kind == "PartitionReassignment" else st.get("bytesCopied")
    message = ""
    for c in st.get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Failed", "Cancelled", "RolledBack"):
            message = str(c.get("message") or "")
    return rp.ChildView(
        kind=kind,
        name=obj["metadata"]["name"],
        phase=st.get("phase"),
        bytes_to_move=int(to_move or 0),
        bytes_moved=int(moved or 0),
        rate=int(st.get("rateBytesPerSecond") or 0),
        message=message,
    )


async def observe(
    kube: KubeClient, pool: BrokerPool, launcher: JobLauncher, rb: Rebalance
) -> tuple[rp.Observation, _Seen]:
    ns = rb.metadata.namespace or "default"
    seen = _Seen()
    st = rb.status
    phase = st.phase if st else None
    seen.bc = await kube.get(BROKER_CLUSTERS, ns, rb.spec.cluster_name)
    if seen.bc is None:
        return rp.Observation(rb=rb, now=time.time(), cluster=None), seen
    seen.topics = [
        t
        for t in await kube.list(TOPICS, ns)
        if (t.get("spec") or {}).get("clusterName") == rb.spec.cluster_name
    ]
    snap = await _snapshot(pool, ns, rb, seen.bc, seen.topics) if phase is None else None
    obs: dict[str, Any] = {
        "cluster": _cluster_view(seen.bc, snap),
        "fingerprint": rp.cluster_fingerprint(seen.bc, seen.topics),
    }
    if phase == Phase.PENDING_PROPOSAL and st is not None and st.job:
        job = await launcher.state(job_ref(rb, st.job))
        obs["job"] = job
        if job.state == rp.JobState.SUCCEEDED:
            seen.outputs = await launcher.outputs(job_ref(rb, st.job))
            obs["report"], obs["waves"] = await _read_proposal(pool, ns, rb, seen)
            obs["unplaced"] = tuple((seen.waves_doc or {}).get("unplaced") or ())
            try:
                seen.packed = proposal_configmap.pack(_proposal_files(seen))
            except proposal_configmap.ProposalTooLarge as e:
                # Nothing can be written for it: the plan fails as a job would, saying why.
                obs["job"] = rp.JobView(job.name, rp.JobState.FAILED, str(e))
    if phase in (Phase.PROPOSAL_READY, Phase.REBALANCING) and st and st.proposal_config_map:
        cm = await kube.get(CONFIGMAPS, ns, st.proposal_config_map)
        manifests = waves_json = None
        if cm is not None:
            try:
                manifests = proposal_configmap.read_text(cm, "manifests.json")
                waves_json = proposal_configmap.read_text(cm, "waves.json")
            except ValueError as e:
                log.warning(
                    "unreadable proposal", extra={"name": rb.metadata.name, "error": str(e)}
                )
        # A ConfigMap without its files (edited by hand) is as good as gone.
        obs["proposal_found"] = manifests is not None and waves_json is not None
        if manifests is not None and waves_json is not None:
            children, waves = rp.plan_children(rb, json.loads(manifests), json.loads(waves_json))
            obs["planned"] = tuple(c.plan for c in children)
            obs["waves"] = waves
            seen.bodies = {c.plan.name: c.body for c in children}
    if phase == Phase.REBALANCING:
        kids: dict[str, rp.ChildView] = {}
        selector = f"{CHILD_LABEL}={rb.metadata.name}"
        for o in await kube.list(REASSIGNMENTS, ns, label_selector=selector):
            kids[o["metadata"]["name"]] = _child_view("PartitionReassignment", o)
        for o in await kube.list(LOG_DIR_MOVES, ns, label_selector=selector):
            kids[o["metadata"]["name"]] = _child_view("LogDirMove", o)
        obs["children"] = kids
        planned = obs.get("planned", ())
        if st is not None and st.wave >= obs.get("waves", 0) and rp.all_done(planned, kids):
            # The end state, measured now: never the planned figures.
            fresh = await _snapshot(pool, ns, rb, seen.bc, seen.topics)
            obs["measured"] = rp.measure(rp.disk_uses(fresh, rb))
            obs["left_behind"] = tuple(rp.left_behind(rb, seen.topics, fresh))
    return rp.Observation(rb=rb, now=time.time(), **obs), seen


async def _read_proposal(
    pool: BrokerPool, ns: str, rb: Rebalance, seen: _Seen
) -> tuple[PlanReport | None, int]:
    """The job's report, and the proposal's moves put into waves (``order_waves``) against a
    snapshot taken now: the moves' sizes and the disks' use (no replica moved since the plan;
    what grew since is counted)."""
    try:
        report = PlanReport.model_validate_json(seen.outputs["report.json"])
        kafka = json.loads(seen.outputs["reassignment.json"])
    except (KeyError, ValueError, ValidationError) as e:
        log.warning("unreadable job outputs", extra={"name": rb.metadata.name, "error": str(e)})
        return None, 0
    assert seen.bc is not None
    snap = await _snapshot(pool, ns, rb, seen.bc, seen.topics)
    seen.waves_doc = rp.waves_document(
        rp.planned_moves(snap, kafka), snap, rb.spec.capacity_threshold_percent / 100.0
    )
    return report, int(seen.waves_doc["waves"])


class _Acts:
    def __init__(
        self,
        kube: KubeClient,
        pool: BrokerPool,
        launcher: JobLauncher,
        rb: Rebalance,
        seen: _Seen,
        metrics: str = "",
    ) -> None:
        self.kube = kube
        self.pool = pool
        self.launcher = launcher
        self.metrics = metrics
        self.rb = rb
        self.ns = rb.metadata.namespace or "default"
        self.seen = seen

    async def run(self, actions: tuple[rp.Action, ...]) -> None:
        for a in actions:
            if isinstance(a, rp.StartPlanning):
                await self._start(a)
            elif isinstance(a, rp.CancelJob | rp.CleanupJob):
                await self.launcher.cleanup(job_ref(self.rb, a.job))
            elif isinstance(a, rp.WriteProposal):
                await self._write_proposal(a)
            elif isinstance(a, rp.CreateChildren):
                await self._create(a)
            elif isinstance(a, rp.CancelChildren):
                await self._cancel(a)

    async def _start(self, a: rp.StartPlanning) -> None:
        assert self.seen.bc is not None
        snap = await _snapshot(self.pool, self.ns, self.rb, self.seen.bc, self.seen.topics)
        await self.launcher.start(
            job_ref(self.rb, a.job),
            snap.model_dump_json(by_alias=True).encode(),
            rp.job_args(self.rb, a.job),
            self.metrics.encode(),
        )

    async def _write_proposal(self, a: rp.WriteProposal) -> None:
        data, binary = self.seen.packed or proposal_configmap.pack(_proposal_files(self.seen))
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": a.config_map,
                "namespace": self.ns,
                "labels": {CHILD_LABEL: self.rb.metadata.name},
                "ownerReferences": [owner_reference(self.rb)],
            },
            "data": data,
            "binaryData": binary,
        }
        await self.kube.apply(CONFIGMAPS, self.ns, body)

    async def _create(self, a: rp.CreateChildren) -> None:
        for name in a.names:
            body = json.loads(json.dumps(self.seen.bodies[name]))
            body["metadata"]["namespace"] = self.ns
            body["metadata"]["ownerReferences"] = [owner_reference(self.rb)]
            res = REASSIGNMENTS if body["kind"] == "PartitionReassignment" else LOG_DIR_MOVES
            try:
                if res is REASSIGNMENTS:
                    await self.kube.create(REASSIGNMENTS, self.ns, body)
                else:
                    await self.kube.create(LOG_DIR_MOVES, self.ns, body)
            except ApiError as e:
                if e.status != 409:  # created by a pass that did not get to write the status
                    raise

    async def _cancel(self, a: rp.CancelChildren) -> None:
        cancel = {"spec": {"cancel": True}}
        for kind, name in a.children:
            try:
                if kind == "PartitionReassignment":
                    await self.kube.patch(REASSIGNMENTS, self.ns, name, cancel)
                else:
                    await self.kube.patch(LOG_DIR_MOVES, self.ns, name, cancel)
            except ApiError as e:
                if e.status != 404:
                    raise


async def reconcile(
    kube: KubeClient,
    pool: BrokerPool,
    launcher: JobLauncher,
    body: Mapping[str, Any],
    metrics: str = "",
) -> Outcome:
    """One pass: observe, decide, act, write the status once, then drop the command.
    ``metrics`` is the cluster's sampled history (JSON lines) a planning job starts with."""
    rb = Rebalance.model_validate(body)
    obs, seen = await observe(kube, pool, launcher, rb)
    decision = rp.decide(obs)
    await _Acts(kube, pool, launcher, rb, seen, metrics).run(decision.actions)
    before = rb.status.dump() if rb.status else {}
    await kube.write_status(
        REBALANCES, rb.metadata.namespace, rb.metadata.name, before, decision.status.dump()
    )
    if any(isinstance(a, rp.RemoveCommand) for a in decision.actions):
        await kube.patch(
            REBALANCES,
            rb.metadata.namespace,
            rb.metadata.name,
            {"metadata": {"annotations": {COMMAND_ANNOTATION: None}}},
        )
    return Outcome(decision.status.dump(), list(decision.events), decision.active)


# -- kopf's side ------------------------------------------------------------------------------


async def run_pass(ctx: Ctx, body: kopf.Body | Mapping[str, Any]) -> Outcome | None:
    """A pass on the freshly read object (the body an event carried may be stale)."""
    ctx.require_leader()
    meta = body["metadata"]
    async with ctx.lock(body):
        fresh = await ctx.kube.get(REBALANCES, meta["namespace"], meta["name"])
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            return None
        history = metric_history(ctx, meta["namespace"], fresh["spec"]["clusterName"])
        out = await reconcile(ctx.kube, ctx.pool, ctx.launcher(), fresh, history)
    post_events(body, out.events)
    return out


async def follow(ctx: Ctx, body: kopf.Body, stopped: kopf.DaemonStopped, interval: float) -> None:
    """Follow one Rebalance while it lives: a pass every ``interval`` (the command annotation
    is read by the next pass; a planning job or children are looked at as often)."""
    while not stopped:
        if ctx.elector.is_leader:
            try:
                await run_pass(ctx, body)
            except kopf.TemporaryError:
                pass
            except Exception:
                log.exception("rebalance pass failed", extra={"name": body["metadata"]["name"]})
        await unless_stopped(asyncio.sleep(interval), stopped)
    # Deleted or the operator stops: a planning job of this Rebalance is stopped with it.
    status = body.get("status") or {}
    fresh = await ctx.kube.get(REBALANCES, body["metadata"]["namespace"], body["metadata"]["name"])
    job = ((fresh or {}).get("status") or status).get("job")
    if job and (fresh is None or fresh["metadata"].get("deletionTimestamp")):
        await ctx.launcher().cleanup(JobRef(body["metadata"]["namespace"], job))
    ctx.forget(body)
