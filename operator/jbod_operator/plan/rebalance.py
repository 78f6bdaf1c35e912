"""Rebalance decisions, pure: every transition of a Rebalance from one typed observation.

The handler (``handlers/rebalances.py``) observes the Rebalance, its cluster (a
BrokerCluster or a KafkaCluster, read through ``plan.execution.ClusterSnapshots``), a
fingerprint of the cluster (what placement depends on), the planning job's state and outputs,
the children it created, and at the end a fresh measure of every disk; :func:`decide` turns
that into a new status, Events and an ordered list of typed actions; the handler carries them
out and writes the status once. Every phase change goes through :func:`machine.transition`
over :data:`PHASE_TRANSITIONS` (drawn in ``RebalancePhase``'s docstring; a test keeps them
equal).

Rules (Strimzi's KafkaRebalance where they fit):

- the command annotation ``jbod.io/rebalance`` is acted on once and removed: ``approve`` (or
  ``spec.autoApprove``) runs a ready proposal, ``refresh`` re-plans from any phase but
  Rebalancing, ``stop`` cancels the planning job or the children (their own cancel: ``cancel:
  true``) and ends Stopped;
- an approved proposal whose snapshot no longer matches the cluster (a Topic or the
  BrokerCluster changed since) is planned again before anything runs, and the status says what
  changed (``replannedBecause``); the approval carries over to the new proposal;
- NotReady says why: the spec names brokers or disks the cluster lacks, the cluster is missing,
  the job failed, the balance is infeasible (the best spread the plan reaches and why, never a
  target it does not reach), a child failed, or the disks measured at the end are outside the
  band;
- Ready only when every child succeeded and a fresh describe-log-dirs puts every broker's disks
  inside the band and under the capacity threshold (never the planned figures).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from jbod_broker import wire

from ..models.common import Condition
from ..models.log_dir_move import ENDED_PHASES as MOVE_ENDED
from ..models.plan_report import PlanReport
from ..models.reassignment import ENDED_PHASES as REASSIGNMENT_ENDED
from ..models.reassignment import ReassignmentPhase
from ..models.rebalance import (
    CHILD_LABEL,
    CLUSTER_LABEL,
    COMMAND_ANNOTATION,
    MAX_CHILDREN,
    MAX_SUMMARY_ROWS,
    BrokerSummary,
    ChildStatus,
    DiskMeasure,
    DiskSummary,
    GoalSummary,
    ProposalSummary,
    Rebalance,
    RebalanceCommand,
    RebalanceMode,
    RebalancePhase,
    RebalanceStatus,
)
from ..models.snapshot import ClusterSnapshot
from ..models.topic import kafka_topic_name
from . import rebalance_order as order
from .conditions import iso, set_condition
from .machine import transition
from .port_types import id_ranges

Phase = RebalancePhase
Command = RebalanceCommand
TP = tuple[str, int]

PHASE_TRANSITIONS: Mapping[tuple[Phase | None, Phase], str] = {
    (None, Phase.PENDING_PROPOSAL): "accepted: snapshot taken, planning job started",
    (None, Phase.NOT_READY): "the spec names what the cluster lacks, or no cluster",
    (Phase.PENDING_PROPOSAL, Phase.PROPOSAL_READY): "the job wrote a proposal inside the band",
    (Phase.PENDING_PROPOSAL, Phase.NOT_READY): "the job failed, or the balance is infeasible",
    (Phase.PENDING_PROPOSAL, Phase.STOPPED): "stop while planning: the job is cancelled",
    (Phase.PROPOSAL_READY, Phase.PENDING_PROPOSAL): "refresh, or approved with a stale snapshot",
    (Phase.PROPOSAL_READY, Phase.REBALANCING): "approved with a fresh snapshot: children created",
    (Phase.REBALANCING, Phase.READY): "every child succeeded, every disk in the band",
    (Phase.REBALANCING, Phase.NOT_READY): "a child failed, not emptied, or disks outside the band",
    (Phase.REBALANCING, Phase.STOPPED): "stop: the children cancelled",
    (Phase.READY, Phase.PENDING_PROPOSAL): "refresh",
    (Phase.NOT_READY, Phase.PENDING_PROPOSAL): "refresh",
    (Phase.STOPPED, Phase.PENDING_PROPOSAL): "refresh",
}
"""Every allowed change of a Rebalance's phase (``None``: not accepted yet)."""

JOB_MODES: Mapping[RebalanceMode, str] = {
    RebalanceMode.FULL: "full",
    RebalanceMode.ADD_BROKERS: "add-brokers",
    RebalanceMode.REMOVE_BROKERS: "remove-brokers",
    RebalanceMode.REMOVE_DISKS: "remove-dirs",
    RebalanceMode.DIRS_ONLY: "dirs-only",
}
"""The Spark job's ``--mode`` for each of the resource's modes (the planner says dirs)."""

SUCCEEDED: str = ReassignmentPhase.SUCCEEDED
"""A child's phase when it did its part (a LogDirMove's Succeeded is the same string; a unit
test holds the two enums to it)."""
FAILED_CHILD_PHASES: frozenset[str] = (REASSIGNMENT_ENDED | MOVE_ENDED) - {SUCCEEDED}
"""A child that ended any other way did not do its part: the Rebalance cannot end Ready. Taken
from the children's own phase sets, so a new final phase of theirs is counted here too."""
CHILD_KINDS = ("PartitionReassignment", "LogDirMove")


class JobState(StrEnum):
    """The planning job as its launcher reports it."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    """The driver ended and wrote its outputs (a plan, feasible or not)."""
    FAILED = "Failed"
    UNKNOWN = "Unknown"
    """The launcher does not know the job (an operator restarted while it ran)."""


# -- observations -------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterView:
    """The BrokerCluster as far as the spec's checks need it."""

    size: int
    dirs: Mapping[int, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    """Per broker: (name, path) of each log dir (from describe-log-dirs, else the spec's
    names with the name as path)."""
    ids: frozenset[int] | None = None
    """The brokers the cluster has (None: 0 to ``size`` - 1)."""

    @property
    def broker_ids(self) -> frozenset[int]:
        return self.ids if self.ids is not None else frozenset(range(self.size))


@dataclass(frozen=True)
class JobView:
    name: str
    state: JobState
    message: str = ""


@dataclass(frozen=True)
class ChildPlan:
    """One child of the proposal: which wave runs it, and the bytes it is planned to move."""

    kind: str
    name: str
    wave: int
    bytes_planned: int = 0


@dataclass(frozen=True)
class ChildView:
    """A child as observed (its status)."""

    kind: str
    name: str
    phase: str | None = None
    bytes_to_move: int = 0
    bytes_moved: int = 0
    rate: int = 0
    message: str = ""


@dataclass(frozen=True)
class Observation:
    rb: Rebalance
    now: float
    cluster: ClusterView | None
    """None: the BrokerCluster does not exist."""
    fingerprint: Mapping[str, str] = field(default_factory=dict)
    """The cluster now (:func:`fingerprint`)."""
    job: JobView | None = None
    """The job ``status.job`` names, as its launcher sees it (None: no job named)."""
    report: PlanReport | None = None
    """The job's report, read when it succeeded."""
    planned: tuple[ChildPlan, ...] = ()
    """The children of the proposal by wave (from its manifests and the wave ordering)."""
    waves: int = 0
    proposal_found: bool = True
    """False when the proposal ConfigMap the status names is gone (deleted by hand)."""
    unplaced: tuple[str, ...] = ()
    """Moves of the proposal that no wave can take under the capacity threshold (why each)."""
    children: Mapping[str, ChildView] = field(default_factory=dict)
    """This Rebalance's children that exist, by name."""
    measured: tuple[DiskMeasure, ...] | None = None
    """Every broker's disks measured afresh, taken once every child succeeded."""
    left_behind: tuple[str, ...] = ()
    """Taken with ``measured``: what the mode empties (remove-brokers, remove-disks) that still
    holds replicas, in words (:func:`left_behind`)."""


# -- actions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartPlanning:
    """Snapshot the cluster and start the planning job ``job`` on it."""

    job: str


@dataclass(frozen=True)
class CancelJob:
    job: str


@dataclass(frozen=True)
class CleanupJob:
    job: str


@dataclass(frozen=True)
class WriteProposal:
    """The job's outputs into the ``<name>-proposal`` ConfigMap, owned by the Rebalance."""

    job: str
    config_map: str


@dataclass(frozen=True)
class CreateChildren:
    """Create these children of the proposal (owned by the Rebalance, labelled with it)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class CancelChildren:
    """``spec.cancel: true`` on each: every child undoes what it started by its own rules."""

    children: tuple[tuple[str, str], ...]
    """(kind, name)."""


@dataclass(frozen=True)
class RemoveCommand:
    """The command annotation acted on: removed, so it is never acted on twice."""


Action = (
    StartPlanning
    | CancelJob
    | CleanupJob
    | WriteProposal
    | CreateChildren
    | CancelChildren
    | RemoveCommand
)


@dataclass(frozen=True)
class Decision:
    status: RebalanceStatus
    events: tuple[tuple[str, str, str], ...] = ()
    actions: tuple[Action, ...] = ()
    active: bool = False
    """Something runs (a job, children): look again soon."""


# -- pure helpers the handler shares ------------------------------------------------------


def config_map_name(rb_name: str) -> str:
    return f"{rb_name}-proposal"


def job_name(rb_name: str, plan: int) -> str:
    return f"{rb_name}-{plan}"


def fingerprint_of(kind: str, name: str, content: Any) -> tuple[str, str]:
    """One entry of a cluster fingerprint: ``Kind/name`` and a digest of ``content`` (the
    parts of the object that placement depends on, as JSON-able data)."""
    raw = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return f"{kind}/{name}", hashlib.sha256(raw).hexdigest()[:16]


def stale(before: Mapping[str, str] | None, now: Mapping[str, str]) -> list[str]:
    """What changed in the cluster since the snapshot, in words (empty: still fresh)."""
    if before is None:
        return ["no snapshot recorded"]
    out = []
    for key in sorted(set(before) | set(now)):
        if key not in now:
            out.append(f"{key} deleted")
        elif key not in before:
            out.append(f"{key} created")
        elif before[key] != now[key]:
            out.append(f"{key} changed")
    return out


def job_args(rb: Rebalance, job: str) -> list[str]:
    """The Spark job's arguments after ``--snapshot``/``--out`` (every launcher passes these);
    the children's names start with the job's (:func:`job_name`)."""
    spec = rb.spec
    args = [
        "--mode",
        JOB_MODES[spec.mode],
        "--capacity-threshold",
        repr(spec.capacity_threshold_percent / 100.0),
        "--dir-tolerance",
        repr(spec.balance_band_percent / 100.0),
        "--name-prefix",
        job,
    ]
    if spec.brokers:
        args += ["--brokers", ",".join(str(b) for b in spec.brokers)]
    if spec.log_dirs:
        args += ["--log-dirs", ",".join(f"{d.broker_id}:{d.log_dir}" for d in spec.log_dirs)]
    if spec.throttle_bytes_per_second is not None:
        args += ["--throttle", str(spec.throttle_bytes_per_second)]
    if spec.goals is not None:
        args += ["--goals", ",".join(spec.goals)]
    if spec.required_goals:
        args += ["--required-goals", ",".join(spec.required_goals)]
    if spec.goal_thresholds is not None:
        args += ["--goal-thresholds", spec.goal_thresholds.model_dump_json(by_alias=True)]
    return args


def child_spec_limits(rb: Rebalance, kind: str) -> dict[str, Any]:
    """The execution limits a child gets from its Rebalance (the fields its kind has)."""
    s = rb.spec
    out: dict[str, Any] = {"maxConcurrentMovesPerBroker": s.max_concurrent_moves_per_broker}
    if kind == "PartitionReassignment":
        out |= {
            "maxConcurrentReplicaMovements": s.max_concurrent_replica_movements,
            "maxConcurrentPartitionMovements": s.max_concurrent_partition_movements,
            "maxConcurrentLeaderMovements": s.max_concurrent_leader_movements,
        }
    if s.throttle_bytes_per_second is not None:
        out["throttleBytesPerSecond"] = s.throttle_bytes_per_second
    return out


def _pp(util: float) -> float:
    return round(100.0 * util, 2)


def summarise(report: PlanReport, waves: int, unplaced: Sequence[str] = ()) -> ProposalSummary:
    """``status.proposal`` from the job's report and the wave ordering: the figures a person
    approves on. Moves no wave can take under the capacity threshold make it infeasible."""
    s = report.summary
    problems = list(s.infeasible_reasons)
    problems += [f"{c.name}: {c.detail}" for c in report.constraints if not c.ok]
    problems += [f"no order keeps the disks under the threshold for {u}" for u in unplaced[:20]]
    rows = len(report.brokers) > MAX_SUMMARY_ROWS or len(report.dirs) > MAX_SUMMARY_ROWS
    return ProposalSummary(
        plan_id=report.plan_id,
        moves=s.replica_moves_inter_broker + s.replica_moves_intra_broker,
        moves_between_brokers=s.replica_moves_inter_broker,
        moves_between_disks=s.replica_moves_intra_broker,
        leader_moves=s.leader_moves,
        partitions_changed=s.partitions_changed,
        bytes_to_move=s.bytes_moved,
        worst_spread_before=round(s.worst_spread_pp_before, 2),
        worst_spread_after=round(s.worst_spread_pp_after, 2),
        largest_utilisation_before=_pp(s.largest_util_before),
        largest_utilisation_after=_pp(s.largest_util_after),
        feasible=s.feasible and report.ok and not unplaced,
        band_scope=s.band_scope,
        problems=problems,
        goals=[GoalSummary.of(g) for g in report.goals],
        brokers=[
            BrokerSummary(
                broker_id=b.broker_id,
                spread_before=round(b.spread_pp_before, 2),
                spread_after=round(b.spread_pp_after, 2),
                replicas_before=b.replicas_before,
                replicas_after=b.replicas_after,
                leaders_before=b.leaders_before,
                leaders_after=b.leaders_after,
                used_bytes_before=b.used_before,
                used_bytes_after=b.used_after,
            )
            for b in report.brokers[:MAX_SUMMARY_ROWS]
        ],
        disks=[
            DiskSummary(
                broker_id=d.broker_id,
                name=d.name,
                utilisation_before=_pp(d.util_before),
                utilisation_after=_pp(d.util_after),
            )
            for d in report.dirs[:MAX_SUMMARY_ROWS]
        ],
        truncated=rows,
        waves=waves,
    )


@dataclass(frozen=True)
class DiskUse:
    """One disk as measured: what :func:`measure` reads."""

    broker_id: int
    name: str
    capacity_bytes: int
    used_bytes: int
    live: bool = True
    counted: bool = True
    """False for a disk being emptied (remove-disks) or of a broker being emptied."""


def measure(disks: Sequence[DiskUse]) -> tuple[DiskMeasure, ...]:
    """Per broker: the spread of its counted disks' utilisation (pp) and the fullest one (%)."""
    by_broker: dict[int, list[float]] = {}
    for d in disks:
        if d.live and d.counted and d.capacity_bytes > 0:
            by_broker.setdefault(d.broker_id, []).append(100.0 * d.used_bytes / d.capacity_bytes)
    return tuple(
        DiskMeasure(
            broker_id=b,
            spread=round(max(u) - min(u), 2),
            largest_utilisation=round(max(u), 2),
        )
        for b, u in sorted(by_broker.items())
    )


def outside_band(rb: Rebalance, measured: Sequence[DiskMeasure]) -> list[str]:
    """Every broker in the band's scope whose disks are outside the band, and every disk over
    the capacity threshold, in words. The scope is the proposal's (the planner's for the mode):
    the end state is held to what was proposed, never more and never less."""
    band, limit = rb.spec.balance_band_percent, rb.spec.capacity_threshold_percent
    scope = _band_scope(rb)
    out = []
    for m in measured:
        if (scope is None or m.broker_id in scope) and m.spread > band + 1e-9:
            out.append(f"broker {m.broker_id}: disks spread {m.spread:.1f} pp (band {band:g} pp)")
        if m.largest_utilisation > limit + 1e-9:
            out.append(
                f"broker {m.broker_id}: a disk at {m.largest_utilisation:.1f}% "
                f"(threshold {limit:g}%)"
            )
    return out


def _band_scope(rb: Rebalance) -> frozenset[int] | None:
    """The brokers the band applies to (None: all), as the proposal says."""
    proposal = rb.status.proposal if rb.status else None
    scope = proposal.band_scope if proposal else "all"
    if scope == "none":
        return frozenset()
    return None


def band_brokers(rb: Rebalance, measured: Sequence[DiskMeasure]) -> list[DiskMeasure]:
    """The measured brokers the band applies to."""
    scope = _band_scope(rb)
    return [m for m in measured if scope is None or m.broker_id in scope]


def check_spec(rb: Rebalance, cluster: ClusterView) -> list[str]:
    """What the spec names that the cluster lacks (empty: it can be planned)."""
    spec = rb.spec
    ids = cluster.broker_ids
    # One rule for an id the cluster has never had, whatever its value (as a
    # PartitionReassignment's, ``plan.reassignment_goals``): refused, naming those it has.
    exists = f"brokers {id_ranges(ids)}"
    errors = []
    for b in spec.brokers or ():
        if b not in ids:
            errors.append(f"broker {b} does not exist ({exists})")
    if spec.mode == RebalanceMode.REMOVE_BROKERS and ids <= set(spec.brokers or ()):
        errors.append("remove-brokers would remove every broker")
    for d in spec.log_dirs or ():
        if d.broker_id not in ids:
            errors.append(f"broker {d.broker_id} does not exist ({exists})")
            continue
        dirs = cluster.dirs.get(d.broker_id, ())
        if not any(
            wire.refers_to_log_dir(d.log_dir, path) or d.log_dir in (name, path)
            for name, path in dirs
        ):
            names = ", ".join(n for n, _ in dirs) or "none"
            errors.append(f"broker {d.broker_id} has no log dir {d.log_dir!r} (it has {names})")
    if spec.mode == RebalanceMode.REMOVE_DISKS and spec.log_dirs and not errors:
        for b in {d.broker_id for d in spec.log_dirs}:
            named = [d for d in spec.log_dirs if d.broker_id == b]
            if len(named) >= len(cluster.dirs.get(b, ())):
                errors.append(f"remove-disks would empty every disk of broker {b}")
    return errors


def all_done(planned: Sequence[ChildPlan], children: Mapping[str, ChildView]) -> bool:
    """Every child of the proposal exists and succeeded (the handler then measures)."""
    return all((c := children.get(p.name)) is not None and c.phase == SUCCEEDED for p in planned)


# -- the cluster, the proposal's moves and its children (pure parts of the handler) -------


def cluster_fingerprint(
    broker_cluster: Mapping[str, Any], topics: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """What placement depends on, per object: the BrokerCluster's brokers, racks and disks;
    each Topic's partitions and where its replicas are (broker and disk). Leaders, ISRs and
    conditions are left out: they change all the time and move no byte."""
    spec = broker_cluster.get("spec") or {}
    out = dict(
        [
            fingerprint_of(
                "BrokerCluster",
                str(broker_cluster["metadata"]["name"]),
                [spec.get("replicas"), spec.get("racks"), spec.get("logDirs")],
            )
        ]
    )
    for t in topics:
        st = t.get("status") or {}
        parts = sorted(
            (
                int(p["partition"]),
                [(int(r["brokerId"]), r.get("logDir")) for r in p.get("replicas") or []],
            )
            for p in st.get("partitions") or []
        )
        key, digest = fingerprint_of(
            "Topic",
            kafka_topic_name(t),
            [
                (t.get("spec") or {}).get("partitions"),
                parts,
                bool(t["metadata"].get("deletionTimestamp")),
            ],
        )
        out[key] = digest
    return out


def snapshot_fingerprint(kind: str, snap: ClusterSnapshot) -> dict[str, str]:
    """What placement depends on, read from a snapshot, for a cluster whose record is not
    the operator's objects (a KafkaCluster: Kafka's metadata is its record): the brokers, their
    racks and dirs; per topic each partition's replicas in order with their dirs. Sizes and
    leaders are left out, as in :func:`cluster_fingerprint`; a broker that did not answer
    has no dirs to show, so it counts as a change."""
    out = dict(
        [
            fingerprint_of(
                kind,
                snap.cluster_name,
                [
                    sorted((b.id, b.rack or "") for b in snap.brokers),
                    sorted((d.broker_id, d.path) for d in snap.log_dirs),
                ],
            )
        ]
    )
    by_topic: dict[str, dict[int, list[tuple[int, str]]]] = {}
    for r in snap.replicas:
        by_topic.setdefault(r.topic, {}).setdefault(r.partition, []).append(
            (r.broker_id, r.log_dir)
        )
    for topic, parts in by_topic.items():
        key, digest = fingerprint_of("Topic", topic, sorted(parts.items()))
        out[key] = digest
    return out


def cluster_view(
    size: int,
    dir_names: Sequence[str],
    snap: ClusterSnapshot | None,
    ids: frozenset[int] | None = None,
) -> ClusterView:
    """The cluster as the spec's checks read it: each broker's live dirs from the snapshot
    when there is one, else the names the cluster's record gives (name as path); ``ids``:
    the brokers it has (None: 0 to ``size`` - 1)."""
    brokers = sorted(ids) if ids is not None else range(size)
    dirs: dict[int, tuple[tuple[str, str], ...]] = {
        b: tuple((n, n) for n in dir_names) for b in brokers
    }
    if snap is not None:
        for b in brokers:
            found = tuple((d.name, d.path) for d in snap.log_dirs if d.broker_id == b and d.live)
            if found:
                dirs[b] = found
    return ClusterView(size=size, dirs=dirs, ids=ids)


@dataclass(frozen=True)
class PlannedMove:
    """One replica of the proposal changing broker or disk, with its size at the snapshot."""

    topic: str
    partition: int
    from_broker: int
    from_dir: str
    to_broker: int
    to_dir: str
    size_bytes: int


def planned_moves(snap: ClusterSnapshot, kafka_plan: Mapping[str, Any]) -> list[PlannedMove]:
    """The replica moves of a kafka-reassign-partitions plan (``log_dirs`` are paths) against
    the snapshot it was planned from: a target replica on a broker that did not hold the
    partition comes from a replica that leaves (in order), sized as the partition's largest."""
    where: dict[TP, dict[int, tuple[str, int]]] = {}
    for r in snap.replicas:
        where.setdefault((r.topic, r.partition), {})[r.broker_id] = (r.log_dir, r.size_bytes)
    out = []
    for entry in kafka_plan.get("partitions") or []:
        key = (str(entry["topic"]), int(entry["partition"]))
        now = where.get(key, {})
        size = max((sz for _, sz in now.values()), default=0)
        targets = [int(b) for b in entry["replicas"]]
        dirs = list(entry.get("log_dirs") or [wire.ANY_LOG_DIR] * len(targets))
        leaving = [b for b in now if b not in targets]
        for b, d in zip(targets, dirs, strict=True):
            if b in now:
                src_dir, sz = now[b]
                if d not in (wire.ANY_LOG_DIR, src_dir):
                    out.append(PlannedMove(key[0], key[1], b, src_dir, b, d, sz))
            else:
                src = leaving.pop(0) if leaving else b
                src_dir = now.get(src, ("", 0))[0]
                out.append(PlannedMove(key[0], key[1], src, src_dir, b, d, size))
    return out


def assign_waves(
    moves: Sequence[PlannedMove], snap: ClusterSnapshot, threshold: float
) -> tuple[dict[TP, int], int, list[str]]:
    """Which wave runs each partition (from 1), how many waves, and the moves no wave can take
    (in words): ``plan.rebalance_order.order_waves`` over the snapshot's disks, so no disk goes
    over ``threshold`` (a fraction) at any point of the execution."""
    disks = [
        order.Disk(
            broker_id=d.broker_id,
            log_dir=d.path,
            capacity_bytes=d.capacity_bytes,
            used_bytes=d.used_bytes,
        )
        for d in snap.log_dirs
    ]
    plan = order.order_waves(
        disks,
        [
            order.Move(
                topic=m.topic,
                partition=m.partition,
                source=order.DiskRef(m.from_broker, m.from_dir),
                target=order.DiskRef(m.to_broker, m.to_dir),
                size_bytes=m.size_bytes,
            )
            for m in moves
        ],
        threshold=threshold,
    )
    wave_of = {(m.topic, m.partition): i for i, wave in enumerate(plan.waves, 1) for m in wave}
    unplaced = sorted({f"{u.move.topic}-{u.move.partition}: {u.message}" for u in plan.unscheduled})
    return wave_of, len(plan.waves), unplaced


def waves_document(
    moves: Sequence[PlannedMove], snap: ClusterSnapshot, threshold: float
) -> dict[str, Any]:
    """``waves.json`` of the proposal ConfigMap: each moving partition's wave and bytes, so the
    children of a later pass (or another operator) are built the same way."""
    wave_of, waves, unplaced = assign_waves(moves, snap, threshold)
    sizes: dict[TP, int] = {}
    for m in moves:
        sizes[(m.topic, m.partition)] = sizes.get((m.topic, m.partition), 0) + m.size_bytes
    return {
        "waves": waves,
        "partitions": [
            {"topic": t, "partition": p, "wave": w, "bytes": sizes.get((t, p), 0)}
            for (t, p), w in sorted(wave_of.items())
        ],
        "unplaced": unplaced,
    }


@dataclass(frozen=True)
class ChildManifest:
    plan: ChildPlan
    body: dict[str, Any]


def plan_children(
    rb: Rebalance, manifests: Mapping[str, Any], waves: Mapping[str, Any]
) -> tuple[list[ChildManifest], int]:
    """The children of a proposal, split by wave: each manifest of the job (a
    PartitionReassignment, a LogDirMove) keeps only the entries of one wave, gets the
    Rebalance's limits and its label; the owner reference is the handler's (it needs the uid)."""
    n_waves = int(waves.get("waves") or 0)
    wave_of = {(str(e["topic"]), int(e["partition"])): int(e["wave"]) for e in waves["partitions"]}
    size_of = {(str(e["topic"]), int(e["partition"])): int(e["bytes"]) for e in waves["partitions"]}
    out: list[ChildManifest] = []
    for item in manifests.get("items") or []:
        kind = str(item["kind"])
        key = "partitions" if kind == "PartitionReassignment" else "moves"
        by_wave: dict[int, list[dict[str, Any]]] = {}
        for e in item["spec"].get(key) or []:
            tp = (str(e["topic"]), int(e["partition"]))
            if tp in wave_of:  # a partition no wave can take is never run
                by_wave.setdefault(wave_of[tp], []).append(e)
        for wave, entries in sorted(by_wave.items()):
            name = str(item["metadata"]["name"])
            if n_waves > 1:
                name = f"{name}-w{wave}"
            spec = {
                **{k: v for k, v in item["spec"].items() if k != key},
                key: entries,
                **child_spec_limits(rb, kind),
            }
            labels = {
                **(item["metadata"].get("labels") or {}),
                CHILD_LABEL: rb.metadata.name,
                CLUSTER_LABEL: rb.spec.cluster_name,
            }
            body = {
                "apiVersion": item["apiVersion"],
                "kind": kind,
                "metadata": {"name": name, "labels": labels},
                "spec": spec,
            }
            tps = {(str(e["topic"]), int(e["partition"])) for e in entries}
            planned = sum(size_of.get(tp, 0) for tp in tps)
            out.append(ChildManifest(ChildPlan(kind, name, wave, planned), body))
    return out, n_waves


def disk_uses(snap: ClusterSnapshot, rb: Rebalance) -> list[DiskUse]:
    """The snapshot's disks as :func:`measure` reads them: disks being emptied (remove-disks)
    and the disks of brokers being emptied (remove-brokers) are outside the band."""
    removed = set(rb.spec.brokers or ()) if rb.spec.mode == RebalanceMode.REMOVE_BROKERS else set()
    drained = [
        (d.broker_id, d.log_dir)
        for d in (rb.spec.log_dirs or ())
        if rb.spec.mode == RebalanceMode.REMOVE_DISKS
    ]
    out = []
    for d in snap.log_dirs:
        emptied = any(
            b == d.broker_id and (wire.refers_to_log_dir(ref, d.path) or ref == d.name)
            for b, ref in drained
        )
        out.append(
            DiskUse(
                broker_id=d.broker_id,
                name=d.name,
                capacity_bytes=d.capacity_bytes,
                used_bytes=d.used_bytes,
                live=d.live,
                counted=not emptied and d.broker_id not in removed and not d.cordoned,
            )
        )
    return out


def _drains(rb: Rebalance, snap: ClusterSnapshot) -> list[tuple[int, str, str]]:
    """The disks a remove-disks Rebalance empties: (broker, the spec's reference, its path)."""
    if rb.spec.mode != RebalanceMode.REMOVE_DISKS:
        return []
    out = []
    for ref in rb.spec.log_dirs or ():
        for d in snap.log_dirs:
            if d.broker_id == ref.broker_id and (
                wire.refers_to_log_dir(ref.log_dir, d.path) or ref.log_dir == d.name
            ):
                out.append((ref.broker_id, ref.log_dir, d.path))
    return out


def left_behind(rb: Rebalance, held: Mapping[int, int], snap: ClusterSnapshot) -> list[str]:
    """What a remove mode was to empty and still holds replicas at the end, in words (empty:
    done). A remove-brokers Rebalance is read against ``held``, the replicas per broker of the
    state of record (our Topic statuses, which the scale-down waits on, ``plan.scale_down``:
    a broker that has already left the cluster is no longer described, but a status naming it
    still counts; Kafka's Metadata); a remove-disks one against
    where the brokers have their replicas (the snapshot: describe-log-dirs first), since the
    claim of a disk that still holds one would be deleted with it. Ready needs this empty:
    the planned moves all succeeding is not the proof (a partition created meanwhile can land
    on the disk, or a move can target it)."""
    out = []
    if rb.spec.mode == RebalanceMode.REMOVE_BROKERS:
        for b in sorted(set(rb.spec.brokers or ())):
            if held.get(b):
                n = held[b]
                out.append(f"broker {b} still holds {n} replica{'s' if n != 1 else ''}")
    for b, ref, path in _drains(rb, snap):
        on = sorted(
            f"{r.topic}-{r.partition}"
            for r in snap.replicas
            if r.broker_id == b and r.log_dir == path
        )
        if on:
            shown = ", ".join(on[:5]) + (f" and {len(on) - 5} more" if len(on) > 5 else "")
            out.append(f"log dir {ref} of broker {b} still holds {len(on)} replicas ({shown})")
    return out


def emptied(rb: Rebalance) -> str:
    """What a remove mode emptied, for the Ready message (empty for the other modes)."""
    if rb.spec.mode == RebalanceMode.REMOVE_BROKERS:
        ids = sorted(set(rb.spec.brokers or ()))
        return f"; no replica left on broker{'s' if len(ids) > 1 else ''} " + ", ".join(
            map(str, ids)
        )
    if rb.spec.mode == RebalanceMode.REMOVE_DISKS:
        dirs = [f"{d.log_dir} of broker {d.broker_id}" for d in rb.spec.log_dirs or ()]
        return f"; emptied: log dir{'s' if len(dirs) > 1 else ''} " + ", ".join(dirs)
    return ""


# -- one pass -----------------------------------------------------------------------------


@dataclass
class _Pass:
    obs: Observation
    status: RebalanceStatus
    phase: Phase | None
    events: list[tuple[str, str, str]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    active: bool = False

    @property
    def rb(self) -> Rebalance:
        return self.obs.rb

    @property
    def name(self) -> str:
        return self.obs.rb.metadata.name

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def update(self, **kw: Any) -> None:
        self.status = self.status.model_copy(update=kw)

    def to(self, phase: Phase, reason: str, message: str, *, warn: bool = False) -> None:
        """Enter ``phase`` (through the table), its condition True, an Event when it changed."""
        new = transition(PHASE_TRANSITIONS, self.phase, phase)
        if new != self.phase:
            self.event("Warning" if warn else "Normal", reason, message)
        self.phase = new
        self.update(phase=new)
        self.condition(reason, message)

    def condition(self, reason: str, message: str) -> None:
        """The current phase's condition True (Strimzi keeps one condition: the phase)."""
        assert self.phase is not None
        gen = self.rb.metadata.generation
        before = [
            c.model_dump(by_alias=True, exclude_none=True)
            for c in self.status.conditions
            if c.type == self.phase.value
        ]
        conds = set_condition(
            before, self.phase.value, True, reason, message, gen, now=self.obs.now
        )
        self.update(
            conditions=[Condition.model_validate(c) for c in conds], observed_generation=gen
        )

    def start_planning(self, because: str | None = None) -> None:
        if self.status.job and self.obs.job and self.obs.job.state == JobState.RUNNING:
            self.actions.append(CancelJob(self.status.job))
        plan = self.status.plans + 1
        job = job_name(self.name, plan)
        self.actions.append(StartPlanning(job))
        self.update(
            plans=plan,
            job=job,
            snapshot_time=iso(self.obs.now),
            snapshot_fingerprint=dict(self.obs.fingerprint),
            replanned_because=because,
            proposal=None,
            proposal_config_map=None,
            wave=0,
            children=[],
            bytes_to_move=0,
            bytes_moved=0,
            progress_percent=None,
            rate_bytes_per_second=None,
            eta_seconds=None,
            measured=None,
            start_time=None,
            completion_time=None,
        )
        mode = self.rb.spec.mode.value
        msg = f"planning {mode} (job {job})"
        if because:
            msg += f"; re-planned because {because}"
        self.to(Phase.PENDING_PROPOSAL, "Planning" if not because else "Replanning", msg)
        self.active = True


def _command(rb: Rebalance) -> tuple[Command | None, str | None]:
    """The annotation's command, or the unknown value it holds."""
    raw = (rb.metadata.annotations or {}).get(COMMAND_ANNOTATION)
    if raw is None:
        return None, None
    try:
        return Command(raw.strip()), None
    except ValueError:
        return None, raw


def decide(obs: Observation) -> Decision:
    """Every transition the observation allows, as a new status, Events and actions."""
    rb = obs.rb
    status = rb.status or RebalanceStatus()
    p = _Pass(obs, status, status.phase)
    cmd, unknown = _command(rb)
    if unknown is not None:
        p.actions.append(RemoveCommand())
        p.event(
            "Warning",
            "UnknownCommand",
            f"{COMMAND_ANNOTATION}={unknown!r} is not one of approve, refresh, stop: ignored",
        )
    if p.phase is None:
        _accept(p)
    else:
        if cmd is not None:
            p.actions.append(RemoveCommand())
            _command_in(p, cmd)
        _advance(p)
    return Decision(p.status, tuple(p.events), tuple(p.actions), p.active)


def _accept(p: _Pass) -> None:
    obs = p.obs
    if obs.cluster is None:
        p.to(
            Phase.NOT_READY,
            "ClusterNotFound",
            f"BrokerCluster {p.rb.spec.cluster_name} not found (nor a KafkaCluster of that "
            "name): nothing planned",
            warn=True,
        )
        return
    errors = check_spec(p.rb, obs.cluster)
    if errors:
        p.to(Phase.NOT_READY, "InvalidSpec", "; ".join(errors) + ": nothing planned", warn=True)
        return
    if _command(p.rb)[0] is not None:
        p.actions.append(RemoveCommand())
        if _command(p.rb)[0] == Command.APPROVE:
            p.update(approved=True)
    p.start_planning()


def _command_in(p: _Pass, cmd: Command) -> None:
    phase = p.phase
    if cmd == Command.STOP:
        if phase == Phase.PENDING_PROPOSAL:
            if p.status.job:
                p.actions.append(CancelJob(p.status.job))
            p.to(Phase.STOPPED, "Stopped", "stopped while planning: the job was cancelled")
        elif phase == Phase.REBALANCING:
            running = _cancel_children(p)
            p.update(rate_bytes_per_second=None, eta_seconds=None, completion_time=iso(p.obs.now))
            p.to(
                Phase.STOPPED,
                "Stopped",
                f"stopped: cancel sent to {running} running children (each undoes its steps "
                "in flight); moves already finished stay",
            )
        else:
            p.event("Warning", "CommandIgnored", f"stop: nothing runs in phase {phase}")
    elif cmd == Command.REFRESH:
        if phase == Phase.REBALANCING:
            p.event(
                "Warning",
                "CommandIgnored",
                "refresh is ignored while rebalancing: stop first, then refresh",
            )
        else:
            p.update(approved=False)
            p.start_planning()
    elif cmd == Command.APPROVE:
        if phase in (Phase.PENDING_PROPOSAL, Phase.PROPOSAL_READY):
            p.update(approved=True)
            if phase == Phase.PENDING_PROPOSAL:
                p.event("Normal", "Approved", "approved: runs once the proposal is ready")
        else:
            p.event("Warning", "CommandIgnored", f"approve: no proposal to run in phase {phase}")


def _advance(p: _Pass) -> None:
    if p.phase == Phase.PENDING_PROPOSAL:
        _pending(p)
    elif p.phase == Phase.PROPOSAL_READY:
        _ready(p)
    elif p.phase == Phase.REBALANCING:
        _rebalancing(p)


def _pending(p: _Pass) -> None:
    obs = p.obs
    if any(isinstance(a, StartPlanning) for a in p.actions):
        return  # the job starts in this pass
    job = obs.job
    if job is None or job.state == JobState.UNKNOWN:
        p.start_planning("the planning job was lost (the operator restarted)")
        return
    if job.state == JobState.RUNNING:
        p.active = True
        return
    if job.state == JobState.FAILED:
        p.actions.append(CleanupJob(job.name))
        p.to(Phase.NOT_READY, "JobFailed", f"the planning job failed: {job.message}", warn=True)
        return
    if obs.report is None:
        p.actions.append(CleanupJob(job.name))
        p.to(Phase.NOT_READY, "JobFailed", "the planning job wrote no report", warn=True)
        return
    summary = summarise(obs.report, obs.waves, obs.unplaced)
    cm = config_map_name(p.name)
    p.actions += [WriteProposal(job.name, cm), CleanupJob(job.name)]
    p.update(proposal=summary, proposal_config_map=cm)
    if not summary.feasible:
        why = "; ".join(summary.problems) or "the planner found no placement inside the targets"
        p.to(
            Phase.NOT_READY,
            "Infeasible",
            f"infeasible: the best achievable worst disk spread is "
            f"{obs.report.summary.best_spread_pp:.1f} pp (band "
            f"{p.rb.spec.balance_band_percent:g} pp): {why}; the proposal is in ConfigMap {cm}",
            warn=True,
        )
        return
    p.to(Phase.PROPOSAL_READY, "ProposalReady", _proposal_message(p, summary, cm))
    p.active = True


def unmet_goals_text(s: ProposalSummary | None) -> str:
    """``; soft goals not met: X (why), ...`` for a condition's message, or ``""``."""
    unmet = s.unmet_soft_goals() if s is not None else []
    if not unmet:
        return ""
    return "; soft goals not met: " + ", ".join(f"{g.name} ({g.reason})" for g in unmet[:5])


def _proposal_message(p: _Pass, s: ProposalSummary, cm: str) -> str:
    return (
        f"{s.moves} moves ({s.moves_between_brokers} between brokers, {s.moves_between_disks} "
        f"between disks), {s.bytes_to_move} bytes; worst disk spread {s.worst_spread_before:.1f}"
        f" -> {s.worst_spread_after:.1f} pp (band {p.rb.spec.balance_band_percent:g} pp)"
        f"{unmet_goals_text(s)}; plan in ConfigMap {cm}; approve with kubectl annotate "
        f"rebalance {p.name} {COMMAND_ANNOTATION}=approve"
    )


def _ready(p: _Pass) -> None:
    if not (p.status.approved or p.rb.spec.auto_approve):
        return
    changed = stale(p.status.snapshot_fingerprint, p.obs.fingerprint)
    if not p.obs.proposal_found:
        changed = [f"the proposal ConfigMap {p.status.proposal_config_map} is gone", *changed]
    if changed:
        p.start_planning("the proposal predates a change to the cluster: " + ", ".join(changed[:5]))
        return
    p.update(approved=True, start_time=iso(p.obs.now), wave=0, children=[])
    p.to(Phase.REBALANCING, "Rebalancing", "approved: creating the first wave of children")
    _next_wave(p)
    p.active = True


def _next_wave(p: _Pass) -> None:
    """Create the next wave that has children (an empty proposal has none: measured at once)."""
    wave = p.status.wave
    while wave < p.obs.waves:
        wave += 1
        batch = [c for c in p.obs.planned if c.wave == wave]
        if batch:
            p.actions.append(CreateChildren(tuple(c.name for c in batch)))
            listed = [*p.status.children, *(_child_status(c, None) for c in batch)]
            p.update(wave=wave, children=listed[:MAX_CHILDREN])
            p.event(
                "Normal",
                "WaveStarted",
                f"wave {wave}/{p.obs.waves}: " + ", ".join(f"{c.kind} {c.name}" for c in batch),
            )
            return
    p.update(wave=wave)


def _child_status(c: ChildPlan, v: ChildView | None) -> ChildStatus:
    return ChildStatus(
        kind=c.kind,
        name=c.name,
        wave=c.wave,
        phase=v.phase if v else None,
        bytes_to_move=(v.bytes_to_move if v and v.bytes_to_move else c.bytes_planned),
        bytes_moved=v.bytes_moved if v else 0,
    )


def _cancel_children(p: _Pass) -> int:
    running = tuple(
        (c.kind, c.name)
        for c in p.obs.children.values()
        if c.phase not in FAILED_CHILD_PHASES and c.phase != SUCCEEDED
    )
    if running:
        p.actions.append(CancelChildren(running))
    return len(running)


def _progress(p: _Pass) -> None:
    """Bytes, percent, rate and ETA over the whole proposal: children that exist report their
    own figures; those of later waves count with their planned bytes."""
    planned = p.obs.planned
    to_move = moved = rate = 0
    listed = []
    for c in planned:
        v = p.obs.children.get(c.name)
        created = c.wave <= p.status.wave
        cs = _child_status(c, v)
        if created:
            listed.append(cs)
        total = max(cs.bytes_to_move, 0)
        done = total if v is not None and v.phase == SUCCEEDED else min(cs.bytes_moved, total)
        to_move += total
        moved += done
        if v is not None and v.phase not in FAILED_CHILD_PHASES and v.phase != SUCCEEDED:
            rate += v.rate
    left = max(to_move - moved, 0)
    p.update(
        children=listed[:MAX_CHILDREN],
        bytes_to_move=to_move,
        bytes_moved=moved,
        progress_percent=100 if to_move == 0 else min(100, int(100 * moved / to_move)),
        rate_bytes_per_second=rate or None,
        eta_seconds=math.ceil(left / rate) if rate and left else (0 if not left else None),
    )


def _rebalancing(p: _Pass) -> None:
    if p.phase != Phase.REBALANCING:
        return  # stopped in this pass
    obs = p.obs
    p.active = True
    if not obs.proposal_found:
        running = _cancel_children(p)
        p.update(completion_time=iso(obs.now), rate_bytes_per_second=None, eta_seconds=None)
        p.to(
            Phase.NOT_READY,
            "ProposalGone",
            f"the proposal ConfigMap {p.status.proposal_config_map} was deleted while "
            f"rebalancing: cancel sent to {running} running children",
            warn=True,
        )
        p.active = False
        return
    created = [c for c in obs.planned if c.wave <= p.status.wave]
    for c in created:
        v = obs.children.get(c.name)
        gone = v is None and any(
            s.name == c.name and s.phase is not None for s in p.status.children
        )
        if gone or (v is not None and v.phase in FAILED_CHILD_PHASES):
            _progress(p)
            running = _cancel_children(p)
            what = "was deleted" if v is None else f"ended {v.phase}"
            detail = f": {v.message}" if v is not None and v.message else ""
            p.update(completion_time=iso(obs.now), rate_bytes_per_second=None, eta_seconds=None)
            p.to(
                Phase.NOT_READY,
                "ChildFailed",
                f"{c.kind} {c.name} {what}{detail}; cancel sent to {running} running children",
                warn=True,
            )
            p.active = False
            return
    if created and not all_done(created, obs.children):
        _progress(p)
        done = sum(1 for c in created if (v := obs.children.get(c.name)) and v.phase == SUCCEEDED)
        p.condition(
            "Rebalancing",
            f"wave {p.status.wave}/{obs.waves}: {done}/{len(created)} children succeeded, "
            f"{p.status.progress_percent}%",
        )
        return
    if p.status.wave < obs.waves:
        before = len(p.actions)
        _next_wave(p)
        if len(p.actions) > before:
            _progress(p)
            return  # the next wave was created
    _progress(p)
    if obs.measured is None:
        return  # every child succeeded: the handler measures the disks on the next pass
    out = outside_band(p.rb, obs.measured)
    p.update(measured=list(obs.measured), completion_time=iso(obs.now), eta_seconds=0)
    p.active = False
    scoped = band_brokers(p.rb, obs.measured)
    worst = max((m.spread for m in scoped), default=0.0)
    names = ", ".join(str(m.broker_id) for m in scoped) or "none"
    where = "" if len(scoped) == len(obs.measured) else f" over brokers {names} (the mode's scope)"
    if obs.left_behind:
        p.to(
            Phase.NOT_READY,
            "NotEmptied",
            "every child succeeded but what the mode empties still holds replicas: "
            + "; ".join(obs.left_behind[:10]),
            warn=True,
        )
        return
    if out:
        p.to(
            Phase.NOT_READY,
            "OutsideBand",
            "every child succeeded but the disks measured now are not inside the targets: "
            + "; ".join(out[:10]),
            warn=True,
        )
        return
    p.to(
        Phase.READY,
        "Ready",
        f"every child succeeded; measured now: worst disk spread {worst:.1f} pp{where} (band "
        f"{p.rb.spec.balance_band_percent:g} pp), every disk under "
        f"{p.rb.spec.capacity_threshold_percent:g}%{emptied(p.rb)}"
        f"{unmet_goals_text(p.status.proposal)}",
    )
