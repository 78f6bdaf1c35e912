"""Rebalance: a snapshot, a proposal from the Spark job, approval, then children in waves.

A pass observes (the Rebalance afresh; its cluster's record and snapshots through the
adapter ``handlers.executors.snapshots_of`` picks: a BrokerCluster's spec, Topics and brokers,
or a KafkaCluster's Admin API, both giving one ``ClusterSnapshot``; a fingerprint of what
placement depends on, the planning job through the :class:`JobLauncher`, the proposal
ConfigMap once there is one, the children by their label, and, once every child succeeded, a
fresh snapshot), lets ``plan.rebalance.decide`` take every transition, carries out the actions
in order and writes the status once; the command annotation is removed last, after the status
that acted on it is written. A cluster that cannot be read now (Kafka unreachable, its
credentials missing, a name of both kinds) makes the pass do nothing: it is tried again on
the next one, the Rebalance's phase untouched.
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

from ..clients.kube import (
    CONFIGMAPS,
    LOG_DIR_MOVES,
    REASSIGNMENTS,
    REBALANCES,
    ApiError,
    KubeClient,
)
from ..clients.planning_jobs import OUTPUT_FILES, JobLauncher, JobRef
from ..models import Rebalance
from ..models.plan_report import PlanReport
from ..models.rebalance import CHILD_LABEL, COMMAND_ANNOTATION, RebalancePhase
from ..plan import proposal_configmap
from ..plan import rebalance as rp
from ..plan.conditions import iso
from ..plan.execution import ClusterSnapshots, ClusterUnusable
from ..plan.port_types import ClusterRecord
from .balance import metric_history
from .context import Ctx, post_events, unless_stopped
from .executors import snapshots_of

log = logging.getLogger(__name__)
Phase = RebalancePhase


@dataclass
class _Seen:
    """What observe read that act needs again (the cluster's record, the proposal's
    children)."""

    record: ClusterRecord | None = None
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
    kube: KubeClient, cluster: ClusterSnapshots, launcher: JobLauncher, rb: Rebalance
) -> tuple[rp.Observation, _Seen]:
    ns = rb.metadata.namespace or "default"
    seen = _Seen()
    st = rb.status
    phase = st.phase if st else None
    seen.record = rec = await cluster.record()
    if rec is None:
        return rp.Observation(rb=rb, now=time.time(), cluster=None), seen
    snap = await cluster.snapshot(iso(time.time())) if phase is None else None
    obs: dict[str, Any] = {
        "cluster": rp.cluster_view(rec.size, rec.dir_names, snap, rec.broker_ids),
        "fingerprint": rec.fingerprint,
    }
    if phase == Phase.PENDING_PROPOSAL and st is not None and st.job:
        job = await launcher.state(job_ref(rb, st.job))
        obs["job"] = job
        if job.state == rp.JobState.SUCCEEDED:
            seen.outputs = await launcher.outputs(job_ref(rb, st.job))
            obs["report"], obs["waves"] = await _read_proposal(cluster, rb, seen)
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
            fresh = await cluster.snapshot(iso(time.time()))
            obs["measured"] = rp.measure(rp.disk_uses(fresh, rb))
            obs["left_behind"] = tuple(rp.left_behind(rb, rec.held, fresh))
    return rp.Observation(rb=rb, now=time.time(), **obs), seen


async def _read_proposal(
    cluster: ClusterSnapshots, rb: Rebalance, seen: _Seen
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
    snap = await cluster.snapshot(iso(time.time()))
    seen.waves_doc = rp.waves_document(
        rp.planned_moves(snap, kafka), snap, rb.spec.capacity_threshold_percent / 100.0
    )
    return report, int(seen.waves_doc["waves"])


class _Acts:
    def __init__(
        self,
        kube: KubeClient,
        cluster: ClusterSnapshots,
        launcher: JobLauncher,
        rb: Rebalance,
        seen: _Seen,
        metrics: str = "",
    ) -> None:
        self.kube = kube
        self.cluster = cluster
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
        snap = await self.cluster.snapshot(iso(time.time()))
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
    cluster: ClusterSnapshots,
    launcher: JobLauncher,
    body: Mapping[str, Any],
    metrics: str = "",
) -> Outcome | None:
    """One pass: observe, decide, act, write the status once, then drop the command.
    ``cluster`` reads the named cluster (``handlers.executors.snapshots_of``); ``metrics``
    is the cluster's sampled history (JSON lines) a planning job starts with. None: the
    cluster could not be read, nothing was done."""
    rb = Rebalance.model_validate(body)
    try:
        obs, seen = await observe(kube, cluster, launcher, rb)
        decision = rp.decide(obs)
        await _Acts(kube, cluster, launcher, rb, seen, metrics).run(decision.actions)
    except ClusterUnusable as why:
        log.warning(
            "cluster not read, Rebalance pass skipped",
            extra={"name": rb.metadata.name, "reason": why.reason, "error": why.message},
        )
        return None
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
        cluster = fresh["spec"]["clusterName"]
        history = metric_history(ctx, meta["namespace"], cluster)
        source = await snapshots_of(ctx, meta["namespace"], cluster)
        out = await reconcile(ctx.kube, source, ctx.launcher(), fresh, history)
    if out is not None:
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
