"""A plan and what it is delivered as: LogDirMove and PartitionReassignment manifests (for
``kubectl apply``), kafka-reassign-partitions JSON (with ``log_dirs``) and a report.

Every partition appears in exactly one resource: a partition whose replicas only change
directories goes into a LogDirMove; one that changes brokers (or its leader) goes into a
PartitionReassignment that names the final directory of *every* replica, so no replica is
ever the subject of two moves at once (KAFKA-9087).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from jbod_operator.models.common import API_VERSION, CamelModel
from jbod_operator.models.goals import GoalName
from jbod_operator.models.log_dir_move import MAX_MOVES
from jbod_operator.models.plan_report import (
    BrokerReport,
    ConstraintCheck,
    DirReport,
    GoalReport,
    PlanReport,
    Summary,
)
from jbod_operator.models.reassignment import MAX_PARTITIONS

from .arrays import F64, I64, BoolA, ClusterArrays
from .feasibility import assess
from .goals import (
    Placement,
    Scope,
    dirs_over_threshold,
    duplicated_partitions,
    evaluate,
    goal_rules,
    rack_narrowed,
)
from .metrics import (
    BalanceFigures,
    broker_spreads_pp,
    counted_dirs,
    dir_used,
    figures,
    lower_bound_bytes,
)
from .options import PlanOptions

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class Move(CamelModel):
    topic: str
    partition: int
    from_broker: int
    from_dir: str
    to_broker: int
    to_dir: str
    to_dir_name: str
    size_bytes: int
    kind: Literal["intra", "inter"]


class PartitionTarget(CamelModel):
    topic: str
    partition: int
    replicas: list[int]
    """Target replica list, preferred leader first."""
    log_dirs: list[str]
    """Absolute path of each replica's directory, same order."""
    log_dir_names: list[str]
    brokers_changed: bool
    leader_changed: bool


def dir_ref(name: str, path: str) -> str:
    """How a manifest names a dir: its BrokerCluster name when it is one, else its path."""
    return name if _DNS_LABEL.match(name) and len(name) <= 63 else path


class Plan(CamelModel):
    cluster_name: str
    namespace: str
    plan_id: str
    moves: list[Move]
    partitions: list[PartitionTarget]
    """Every partition that changes (brokers, order or directories)."""
    report: PlanReport

    # -- delivery ------------------------------------------------------------------------

    def _name(self, prefix: str | None, kind: str, i: int) -> str:
        base = prefix or f"{self.cluster_name}-plan-{self.plan_id}"
        base = re.sub(r"[^a-z0-9-]", "-", base.lower()).strip("-")[:200] or "plan"
        return f"{base}-{kind}-{i}"

    def log_dir_moves(
        self,
        *,
        name_prefix: str | None = None,
        throttle_bytes_per_second: int | None = None,
        max_moves: int = MAX_MOVES,
    ) -> list[dict[str, Any]]:
        """LogDirMove manifests for the partitions whose replicas stay on their brokers."""
        changed = {(p.topic, p.partition) for p in self.partitions if p.brokers_changed}
        changed |= {(p.topic, p.partition) for p in self.partitions if p.leader_changed}
        entries = [
            {
                "brokerId": m.to_broker,
                "topic": m.topic,
                "partition": m.partition,
                "logDir": dir_ref(m.to_dir_name, m.to_dir),
            }
            for m in self.moves
            if m.kind == "intra" and (m.topic, m.partition) not in changed
        ]
        out = []
        for i in range(0, len(entries), max_moves):
            spec: dict[str, Any] = {
                "clusterName": self.cluster_name,
                "moves": entries[i : i + max_moves],
            }
            if throttle_bytes_per_second is not None:
                spec["throttleBytesPerSecond"] = throttle_bytes_per_second
            out.append(self._manifest("LogDirMove", name_prefix, "dirs", i // max_moves, spec))
        return out

    def partition_reassignments(
        self,
        *,
        name_prefix: str | None = None,
        throttle_bytes_per_second: int | None = None,
        max_partitions: int = MAX_PARTITIONS,
    ) -> list[dict[str, Any]]:
        """PartitionReassignment manifests: partitions that change brokers or leader, with the
        final directory of every replica."""
        entries = [
            {
                "topic": p.topic,
                "partition": p.partition,
                "replicas": p.replicas,
                "logDirs": [
                    dir_ref(n, d) for n, d in zip(p.log_dir_names, p.log_dirs, strict=True)
                ],
            }
            for p in self.partitions
            if p.brokers_changed or p.leader_changed
        ]
        out = []
        for i in range(0, len(entries), max_partitions):
            spec: dict[str, Any] = {
                "clusterName": self.cluster_name,
                "partitions": entries[i : i + max_partitions],
            }
            if throttle_bytes_per_second is not None:
                spec["throttleBytesPerSecond"] = throttle_bytes_per_second
            out.append(
                self._manifest(
                    "PartitionReassignment", name_prefix, "brokers", i // max_partitions, spec
                )
            )
        return out

    def manifests(self, **kw: Any) -> list[dict[str, Any]]:
        return self.partition_reassignments(**kw) + self.log_dir_moves(**kw)

    def _manifest(
        self, kind: str, prefix: str | None, what: str, i: int, spec: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": kind,
            "metadata": {
                "name": self._name(prefix, what, i),
                "namespace": self.namespace,
                "labels": {"jbod.io/cluster": self.cluster_name[:63], "jbod.io/plan": self.plan_id},
            },
            "spec": spec,
        }

    def kafka_reassignment(self) -> dict[str, Any]:
        """kafka-reassign-partitions.sh JSON (KIP-113: ``log_dirs``, absolute paths)."""
        return {
            "version": 1,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "replicas": p.replicas,
                    "log_dirs": p.log_dirs,
                }
                for p in self.partitions
            ],
        }


# -- building a plan from a before and an after placement ---------------------------------


def _plan_id(parts: list[PartitionTarget], cluster: str) -> str:
    h = hashlib.sha256(cluster.encode())
    for p in parts:
        h.update(f"{p.topic}\0{p.partition}\0{p.replicas}\0{p.log_dirs}\n".encode())
    return h.hexdigest()[:10]


def check_constraints(
    a: ClusterArrays,
    rb: I64,
    rd: I64,
    leader: BoolA,
    drain_dir: BoolA,
    removed: BoolA,
    threshold: float,
    used_after: F64,
    used_before: F64,
) -> list[ConstraintCheck]:
    out: list[ConstraintCheck] = []
    rf_b = np.bincount(a.rep_part, minlength=a.n_parts)
    out.append(
        ConstraintCheck(
            name="replication_factor_kept",
            ok=bool((np.bincount(a.rep_part, minlength=a.n_parts) == rf_b).all()),
        )
    )
    dup = duplicated_partitions(a, rb)
    out.append(
        ConstraintCheck(
            name="one_replica_per_broker",
            ok=dup == 0,
            detail=f"{dup} partitions have two replicas on one broker" if dup else "",
        )
    )
    narrowed = rack_narrowed(a, rb)
    out.append(
        ConstraintCheck(
            name="rack_spread_kept",
            ok=narrowed == 0,
            detail=f"{narrowed} partitions span fewer racks" if narrowed else "",
        )
    )
    over = dirs_over_threshold(a, used_after, threshold)
    detail = ""
    if over.size:
        util_a = used_after[over] / a.dir_capacity[over]
        worst = int(over[int(np.argmax(util_a))])
        was = int(np.isin(over, dirs_over_threshold(a, used_before, threshold)).sum())
        detail = (
            f"{over.size} dirs above {threshold:.0%} ({was} were already), worst "
            f"{a.dir_path[worst]} of broker {a.broker_ids[a.dir_broker[worst]]} at "
            f"{float(util_a.max()):.1%}"
        )
    out.append(ConstraintCheck(name="capacity_threshold", ok=over.size == 0, detail=detail))
    left = np.flatnonzero(drain_dir[rd])
    out.append(
        ConstraintCheck(
            name="drained_dirs_empty",
            ok=left.size == 0,
            detail=f"{left.size} replicas left on offline, cordoned or drained dirs"
            if left.size
            else "",
        )
    )
    moved = (rb != a.rep_broker) | (rd != a.rep_dir)
    dest_ok = (
        a.dir_live[rd]
        & ~a.dir_cordoned[rd]
        & ~drain_dir[rd]
        & a.broker_live[rb]
        & ~removed[rb]
        & (a.dir_broker[rd] == rb)
    )
    bad = int((moved & ~dest_ok).sum())
    out.append(
        ConstraintCheck(
            name="destinations_valid",
            ok=bad == 0,
            detail=f"{bad} moves to a dead, removed, offline or cordoned place" if bad else "",
        )
    )
    n_lead_b = np.bincount(a.rep_part[a.rep_leader], minlength=a.n_parts)
    n_lead_a = np.bincount(a.rep_part[leader], minlength=a.n_parts)
    bad_l = int((n_lead_a != n_lead_b).sum())
    out.append(
        ConstraintCheck(
            name="one_leader_per_partition",
            ok=bad_l == 0,
            detail=f"{bad_l} partitions changed their number of leaders" if bad_l else "",
        )
    )
    return out


@dataclass(frozen=True)
class _Changes:
    """What a placement changes, replica by replica and partition by partition."""

    moved_b: BoolA
    """Per replica: its broker changed (an inter-broker move)."""
    moved: BoolA
    """Per replica: its broker or its dir changed."""
    leader_changed: BoolA
    """Per partition: its leader's broker changed."""
    part_changed: BoolA
    """Per partition: a replica moved or the leader changed (it needs a target)."""
    part_bchanged: BoolA
    """Per partition: a replica changed broker."""


def _changes(a: ClusterArrays, rb: I64, rd: I64, leader: BoolA) -> _Changes:
    moved_b = rb != a.rep_broker
    moved = moved_b | (rd != a.rep_dir)
    lead_b_before = np.full(a.n_parts, -1, dtype=np.int64)
    lead_b_before[a.rep_part[a.rep_leader]] = a.rep_broker[a.rep_leader]
    lead_b_after = np.full(a.n_parts, -1, dtype=np.int64)
    lead_b_after[a.rep_part[leader]] = rb[leader]
    leader_changed = lead_b_before != lead_b_after
    part_changed = np.zeros(a.n_parts, dtype=np.bool_)
    part_changed[a.rep_part[moved]] = True
    part_changed |= leader_changed
    part_bchanged = np.zeros(a.n_parts, dtype=np.bool_)
    part_bchanged[a.rep_part[moved_b]] = True
    return _Changes(moved_b, moved, leader_changed, part_changed, part_bchanged)


def _moves(a: ClusterArrays, rb: I64, rd: I64, ch: _Changes) -> list[Move]:
    bid = a.broker_ids
    return [
        Move(
            topic=a.part_topic[a.rep_part[i]],
            partition=int(a.part_num[a.rep_part[i]]),
            from_broker=int(bid[a.rep_broker[i]]),
            from_dir=a.dir_path[a.rep_dir[i]],
            to_broker=int(bid[rb[i]]),
            to_dir=a.dir_path[rd[i]],
            to_dir_name=a.dir_name[rd[i]],
            size_bytes=int(a.rep_size[i]),
            kind="inter" if ch.moved_b[i] else "intra",
        )
        for i in np.flatnonzero(ch.moved)
    ]


def _partition_targets(
    a: ClusterArrays, rb: I64, rd: I64, leader: BoolA, ch: _Changes
) -> list[PartitionTarget]:
    """Each changed partition's replicas, leader first, with their dirs."""
    bid = a.broker_ids
    start = a.part_start()
    parts: list[PartitionTarget] = []
    for p in np.flatnonzero(ch.part_changed):
        sl = np.arange(start[p], start[p + 1])
        lead = sl[leader[sl]]
        order = list(lead) + [int(i) for i in sl if not leader[i]]
        parts.append(
            PartitionTarget(
                topic=a.part_topic[p],
                partition=int(a.part_num[p]),
                replicas=[int(bid[rb[i]]) for i in order],
                log_dirs=[a.dir_path[rd[i]] for i in order],
                log_dir_names=[a.dir_name[rd[i]] for i in order],
                brokers_changed=bool(ch.part_bchanged[p]),
                leader_changed=bool(ch.leader_changed[p]),
            )
        )
    return parts


@dataclass(frozen=True)
class _Usage:
    """Bytes on each dir before and after, and which dirs the balance counts."""

    before: F64
    after: F64
    counted: BoolA


def _summary(
    a: ClusterArrays,
    ch: _Changes,
    use: _Usage,
    *,
    rd: I64,
    leaving: BoolA,
    constraints: list[ConstraintCheck],
    n_parts: int,
    opts: PlanOptions,
) -> Summary:
    fb: BalanceFigures = figures(a, use.before, use.counted, opts.capacity_threshold)
    fa: BalanceFigures = figures(a, use.after, use.counted, opts.capacity_threshold)
    fz = assess(a, rd, use.before, use.after, use.counted, opts, constraints)
    sz = a.rep_size
    moved, moved_b = ch.moved, ch.moved_b
    return Summary(
        largest_util_before=fb.largest_util,
        largest_util_after=fa.largest_util,
        worst_spread_pp_before=fb.worst_spread_pp,
        worst_spread_pp_after=fa.worst_spread_pp,
        std_pp_before=fb.std_pp,
        std_pp_after=fa.std_pp,
        dirs_above_threshold_before=fb.above_threshold,
        dirs_above_threshold_after=fa.above_threshold,
        bytes_moved=int(sz[moved].sum()),
        bytes_moved_inter_broker=int(sz[moved_b].sum()),
        bytes_moved_intra_broker=int(sz[moved & ~moved_b].sum()),
        lower_bound_bytes=lower_bound_bytes(a, use.before, use.after, use.counted, leaving),
        replica_moves_inter_broker=int(moved_b.sum()),
        replica_moves_intra_broker=int((moved & ~moved_b).sum()),
        leader_moves=int(ch.leader_changed.sum()),
        partitions_changed=n_parts,
        broker_spread_pp_before=fz.broker_spread_pp_before,
        broker_spread_pp_after=fz.broker_spread_pp_after,
        disk_spread_pp_before=fz.disk_spread_pp_before,
        disk_spread_pp_after=fz.disk_spread_pp_after,
        balance_band_pp=100.0 * opts.dir_balance_tolerance,
        capacity_threshold_percent=100.0 * opts.capacity_threshold,
        band_scope=fz.band_scope,
        feasible=fz.feasible,
        best_spread_pp=fz.best_spread_pp,
        infeasible_reasons=fz.reasons,
    )


def _utilisation(a: ClusterArrays, used: F64) -> F64:
    cap = a.dir_capacity.astype(np.float64)
    return np.where(cap > 0, used / np.where(cap > 0, cap, 1.0), 0.0)


def _broker_reports(a: ClusterArrays, rb: I64, leader: BoolA, use: _Usage) -> list[BrokerReport]:
    """Each broker's capacity, bytes, replicas, leaders, fullest dir and spread, before/after."""
    n, on = a.n_brokers, a.dir_broker
    cap = a.dir_capacity.astype(np.float64)
    ub, ua = _utilisation(a, use.before), _utilisation(a, use.after)
    sp_b = broker_spreads_pp(a, use.before, use.counted)
    sp_a = broker_spreads_pp(a, use.after, use.counted)
    nrep_b, nrep_a = np.bincount(a.rep_broker, minlength=n), np.bincount(rb, minlength=n)
    nl_b = np.bincount(a.rep_broker[a.rep_leader], minlength=n)
    nl_a = np.bincount(rb[leader], minlength=n)
    bcap = np.bincount(on, weights=cap, minlength=n)
    bub = np.bincount(on, weights=use.before, minlength=n)
    bua = np.bincount(on, weights=use.after, minlength=n)
    mxb, mxa = np.zeros(n), np.zeros(n)
    np.maximum.at(mxb, on[use.counted], ub[use.counted])
    np.maximum.at(mxa, on[use.counted], ua[use.counted])
    out = []
    for b in range(n):
        rk = int(a.broker_rack[b])
        out.append(
            BrokerReport(
                broker_id=int(a.broker_ids[b]),
                rack=a.rack_names[rk] if rk >= 0 else None,
                live=bool(a.broker_live[b]),
                capacity_bytes=int(bcap[b]),
                used_before=int(bub[b]),
                used_after=int(bua[b]),
                replicas_before=int(nrep_b[b]),
                replicas_after=int(nrep_a[b]),
                leaders_before=int(nl_b[b]),
                leaders_after=int(nl_a[b]),
                max_dir_util_before=float(mxb[b]),
                max_dir_util_after=float(mxa[b]),
                spread_pp_before=float(sp_b[b]),
                spread_pp_after=float(sp_a[b]),
            )
        )
    return out


def _dir_reports(a: ClusterArrays, drain_dir: BoolA, use: _Usage) -> list[DirReport]:
    ub, ua = _utilisation(a, use.before), _utilisation(a, use.after)
    return [
        DirReport(
            broker_id=int(a.broker_ids[a.dir_broker[d]]),
            name=a.dir_name[d],
            path=a.dir_path[d],
            capacity_bytes=int(a.dir_capacity[d]),
            used_before=int(use.before[d]),
            used_after=int(use.after[d]),
            util_before=float(ub[d]),
            util_after=float(ua[d]),
            live=bool(a.dir_live[d]),
            cordoned=bool(a.dir_cordoned[d]),
            drained=bool(drain_dir[d]),
        )
        for d in range(a.n_dirs)
    ]


def _with_goals(s: Summary, goals: list[GoalReport]) -> Summary:
    """A plan is feasible only when its required goals are met (the hard ones, and the soft
    ones the Rebalance names); the hard goals the constraint checks already cover say so
    there, the others are added here with their reason."""
    covered = {str(GoalName.DISK_CAPACITY), str(GoalName.RACK_AWARE)}
    covered |= {str(GoalName.ONE_REPLICA_PER_BROKER), str(GoalName.INTRA_BROKER_DISK_USAGE)}
    missed = [g for g in goals if g.required and not g.met_after and g.name not in covered]
    if not missed:
        return s
    why = [f"goal {g.name} not met: {g.reason}" for g in missed]
    return s.model_copy(
        update={"feasible": False, "infeasible_reasons": [*s.infeasible_reasons, *why]}
    )


def build_plan(
    a: ClusterArrays,
    rb: I64,
    rd: I64,
    leader: BoolA,
    *,
    drain_dir: BoolA,
    removed: BoolA,
    opts: PlanOptions,
    notes: list[str] | None = None,
    with_dirs: bool = True,
    goal_reasons: dict[GoalName, str] | None = None,
) -> Plan:
    """The placement ``(rb, rd, leader)`` as a plan: the moves, each changed partition's
    target, and the report (summary, constraint checks, per broker and per dir figures)."""
    ch = _changes(a, rb, rd, leader)
    moves = _moves(a, rb, rd, ch)
    parts = _partition_targets(a, rb, rd, leader, ch)
    plan_id = _plan_id(parts, a.cluster)
    leaving = drain_dir | removed[a.dir_broker]
    use = _Usage(dir_used(a, a.rep_dir), dir_used(a, rd), counted_dirs(a, leaving))
    constraints = check_constraints(
        a, rb, rd, leader, drain_dir, removed, opts.capacity_threshold, use.after, use.before
    )
    summary = _summary(
        a, ch, use, rd=rd, leaving=leaving, constraints=constraints, n_parts=len(parts), opts=opts
    )
    eligible = a.broker_live & ~removed
    eligible &= np.bincount(a.dir_broker[use.counted], minlength=a.n_brokers) > 0
    goals = evaluate(
        a, Placement(rb, rd, leader), Scope(eligible, use.counted), goal_rules(opts), goal_reasons
    )
    summary = _with_goals(summary, goals)
    report = PlanReport(
        cluster_name=a.cluster,
        mode=str(opts.mode),
        plan_id=plan_id,
        options=json.loads(opts.model_dump_json(by_alias=True)),
        summary=summary,
        constraints=constraints,
        brokers=_broker_reports(a, rb, leader, use) if with_dirs else [],
        dirs=_dir_reports(a, drain_dir, use) if with_dirs else [],
        notes=list(notes or []),
        goals=goals,
    )
    return Plan(
        cluster_name=a.cluster,
        namespace=a.namespace,
        plan_id=plan_id,
        moves=moves,
        partitions=parts,
        report=report,
    )
