"""Each goal's figure for a placement, its bounds and whether it is met (pure numpy).

One home for the rules of the goals (``jbod_operator.models.goals`` names them): the optimiser
(:mod:`jbod_spark.goal_moves`) balances against these bounds, the report recomputes every
goal from the plan's final placement with them, and the benchmark applies them to the
Cruise-Control-like baseline's placement, so a goal reported met is met by the same rule
everywhere.

Bounds of a distribution goal (Cruise Control's): the average ``avg`` over the brokers that
count (live, not being removed, with capacity), and ``[avg * (2 - t), avg * t]`` for a
threshold ``t`` (1.10: ±10 %); counts round the bounds outward (floor, ceiling). Below a
low-utilisation floor the goal is met whatever the spread. TopicReplicaDistributionGoal uses
Cruise Control's gap rule: ``avg ± clamp(avg * (t - 1), min gap, max gap)`` per topic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from jbod_operator.models.goals import (
    DEFAULT_SOFT_GOALS,
    HARD_GOALS,
    SOFT_GOALS,
    TOPIC_MAX_GAP,
    TOPIC_MIN_GAP,
    GoalName,
    GoalThresholds,
)
from jbod_operator.models.plan_report import GoalReport

from .arrays import F64, I64, BoolA, ClusterArrays, sorted_unique
from .metrics import broker_spreads_pp, dir_used
from .options import Mode, PlanOptions

EPS = 1e-9

BROKER_GOALS: tuple[GoalName, ...] = (
    GoalName.DISK_USAGE,
    GoalName.REPLICA_DISTRIBUTION,
    GoalName.LEADER_REPLICA_DISTRIBUTION,
    GoalName.LEADER_BYTES_IN,
    GoalName.POTENTIAL_NW_OUT,
)
"""The distribution goals with one figure per broker."""
LEADER_GOALS = frozenset({GoalName.LEADER_REPLICA_DISTRIBUTION, GoalName.LEADER_BYTES_IN})
"""Their figure moves with leadership (a leader change moves it without moving bytes)."""
COUNT_GOALS = frozenset(
    {
        GoalName.REPLICA_DISTRIBUTION,
        GoalName.LEADER_REPLICA_DISTRIBUTION,
        GoalName.TOPIC_REPLICA_DISTRIBUTION,
    }
)

_METRIC = {
    GoalName.DISK_USAGE: ("disk utilisation per broker", "fraction of capacity"),
    GoalName.REPLICA_DISTRIBUTION: ("replicas per broker", ""),
    GoalName.LEADER_REPLICA_DISTRIBUTION: ("leaders per broker", ""),
    GoalName.LEADER_BYTES_IN: ("leader bytes-in per broker", "B/s"),
    GoalName.POTENTIAL_NW_OUT: ("potential bytes-out per broker", "B/s"),
    GoalName.TOPIC_REPLICA_DISTRIBUTION: ("replicas of one topic per broker", ""),
    GoalName.INTRA_BROKER_DISK_USAGE: ("spread of one broker's disks", "pp"),
    GoalName.RACK_AWARE: ("partitions spanning fewer racks than before", ""),
    GoalName.REPLICA_CAPACITY: ("brokers over the replica capacity", ""),
    GoalName.DISK_CAPACITY: ("disks and brokers over the capacity threshold", ""),
    GoalName.ONE_REPLICA_PER_BROKER: ("partitions with two replicas on one broker", ""),
}


@dataclass(frozen=True)
class GoalRules:
    """What the goals are measured against (from the plan's options)."""

    thresholds: GoalThresholds
    capacity_threshold: float
    band_pp: float
    """IntraBrokerDiskUsageDistributionGoal: the largest spread between one broker's disks."""
    broker_band: float | None = None
    """An absolute band for DiskUsageDistributionGoal (a user's), else the relative rule."""
    order: tuple[GoalName, ...] = ()
    """The goals worked on, highest first; a soft goal not in it is reported only."""
    required: frozenset[GoalName] = field(default_factory=frozenset)
    left_out: str = "not worked on: the Rebalance's goals leave it out"
    """The reason given for a soft goal not in ``order`` that is not met."""


def goal_rules(opts: PlanOptions) -> GoalRules:
    """The goals of a plan's options, in the order its mode works on them: every soft goal
    in full and the add/remove modes, only the intra-broker one in dirs-only mode, none in
    targeted mode (it only relieves hot disks)."""
    order = opts.goal_order()
    left_out = GoalRules.left_out
    if opts.mode is Mode.DIRS_ONLY:
        order = tuple(g for g in order if g in HARD_GOALS or g is GoalName.INTRA_BROKER_DISK_USAGE)
        left_out = "not worked on: dirs-only mode moves no replica between brokers"
    elif opts.mode is Mode.TARGETED:
        order = tuple(g for g in order if g in HARD_GOALS)
        left_out = "not worked on: targeted mode only relieves disks above its target"
    return GoalRules(
        thresholds=opts.thresholds,
        capacity_threshold=opts.capacity_threshold,
        band_pp=100.0 * opts.dir_balance_tolerance,
        broker_band=opts.broker_balance_tolerance,
        order=order,
        required=frozenset(opts.required_goals),
        left_out=left_out,
    )


@dataclass(frozen=True)
class Bounds:
    average: float
    lower: float
    upper: float
    low_utilisation: bool
    """The average is below the goal's floor: met whatever the spread."""


def relative_bounds(avg: float, threshold: float, *, integral: bool, floor: float = 0.0) -> Bounds:
    lo, hi = avg * max(0.0, 2.0 - threshold), avg * threshold
    if integral:
        lo, hi = float(math.floor(lo + EPS)), float(math.ceil(hi - EPS))
    return Bounds(avg, lo, hi, avg <= floor + EPS and floor > 0.0)


def topic_bounds(avg: F64, threshold: float) -> tuple[F64, F64]:
    """Per topic (lower, upper) replicas on one broker: Cruise Control's gap rule."""
    gap = np.clip(avg * (threshold - 1.0), TOPIC_MIN_GAP, TOPIC_MAX_GAP)
    return np.maximum(0.0, np.floor(avg - gap + EPS)), np.ceil(avg + gap - EPS)


def partition_rates(a: ClusterArrays) -> F64:
    """Bytes-in per second of each partition, from the metric history; a partition without
    history counts by its size, scaled by the bytes-in per byte of those with one (by its size
    alone when none has history, so the network goals still spread the data)."""
    size = np.bincount(a.rep_part, weights=a.rep_size.astype(np.float64), minlength=a.n_parts)
    rf = np.maximum(1, np.bincount(a.rep_part, minlength=a.n_parts))
    psize = size / rf
    rate = a.part_bytes_in.astype(np.float64)
    known = rate > 0
    if not known.any():
        return np.asarray(psize, dtype=np.float64)
    scale = float(rate[known].sum()) / max(1.0, float(psize[known].sum()))
    return np.asarray(np.where(known, rate, psize * scale), dtype=np.float64)


def topic_index(a: ClusterArrays) -> tuple[I64, int]:
    """Each partition's topic as an index, and the number of topics."""
    names = sorted(set(a.part_topic))
    idx = {n: i for i, n in enumerate(names)}
    return np.array([idx[t] for t in a.part_topic], dtype=np.int64), len(names)


def replica_weight(goal: GoalName, sizes: F64, leader: BoolA, rates: F64) -> F64:
    """What each replica adds to its broker's figure for ``goal``: ``sizes`` its bytes,
    ``leader`` whether it leads, ``rates`` its partition's bytes-in (per replica). The one
    home of the rule: the report, the optimiser and the Cruise-Control-like baseline use it."""
    if goal is GoalName.DISK_USAGE:
        return np.asarray(sizes, dtype=np.float64)
    if goal is GoalName.REPLICA_DISTRIBUTION:
        return np.ones(sizes.shape[0])
    if goal is GoalName.LEADER_REPLICA_DISTRIBUTION:
        return leader.astype(np.float64)
    if goal is GoalName.LEADER_BYTES_IN:
        return np.where(leader, rates, 0.0)
    if goal is GoalName.POTENTIAL_NW_OUT:
        return np.asarray(rates, dtype=np.float64)
    raise ValueError(f"{goal} has no per-broker figure")


def one_weight(goal: GoalName, size: float, leader: bool, rate: float) -> float:
    """:func:`replica_weight` of one replica (the moves' hot path: no arrays)."""
    if goal is GoalName.DISK_USAGE:
        return size
    if goal is GoalName.REPLICA_DISTRIBUTION:
        return 1.0
    if goal is GoalName.LEADER_REPLICA_DISTRIBUTION:
        return 1.0 if leader else 0.0
    if goal is GoalName.LEADER_BYTES_IN:
        return rate if leader else 0.0
    return rate


def broker_bounds(
    goal: GoalName, values: F64, eligible: BoolA, rules: GoalRules, capacity: F64 | None = None
) -> Bounds:
    """The bounds of a per-broker goal over the eligible brokers' ``values``. For the disk
    goal the values are utilisations and the average is weighted by ``capacity`` (the
    cluster's bytes over its capacity, as Cruise Control's): the average of brokers of
    different sizes would move as replicas move."""
    t = rules.thresholds
    vals = values[eligible]
    avg = float(vals.mean()) if vals.size else 0.0
    if capacity is not None and vals.size and float(capacity[eligible].sum()) > 0:
        cap = capacity[eligible]
        avg = float((vals * cap).sum() / cap.sum())
    if goal is GoalName.DISK_USAGE:
        if rules.broker_band is not None:
            half = rules.broker_band / 2.0
            return Bounds(avg, max(0.0, avg - half), avg + half, False)
        return relative_bounds(avg, t.disk, integral=False, floor=t.disk_low_utilisation)
    if goal in (GoalName.LEADER_BYTES_IN, GoalName.POTENTIAL_NW_OUT):
        return relative_bounds(
            avg, t.network, integral=False, floor=t.network_low_utilisation_bytes_per_second
        )
    th = t.replica_count if goal is GoalName.REPLICA_DISTRIBUTION else t.leader_replica_count
    return relative_bounds(avg, th, integral=True)


def broker_limits(
    goal: GoalName, values: F64, eligible: BoolA, rules: GoalRules, capacity: F64
) -> tuple[F64, F64]:
    """Per broker (lower, upper) of a per-broker goal, in the unit of ``values`` (bytes for
    the disk goal, whose bounds are utilisations times each broker's ``capacity``); a goal
    met by its low-utilisation floor has no limits (-inf, inf). What the optimiser and the
    Cruise-Control-like baseline move against."""
    n = values.shape[0]
    disk = goal is GoalName.DISK_USAGE
    scale = capacity if disk else np.ones(n)
    figure = values / np.where(scale > 0, scale, 1.0) if disk else values
    b = broker_bounds(goal, figure, eligible, rules, capacity if disk else None)
    if b.low_utilisation:
        return np.full(n, -np.inf), np.full(n, np.inf)
    return b.lower * scale, b.upper * scale


def distance(v: float, lo: float, hi: float) -> float:
    """How far ``v`` is outside ``[lo, hi]`` (0 inside)."""
    return max(0.0, lo - v, v - hi)


def worse(old: float, new: float, lo: float, hi: float) -> bool:
    """``new`` is further outside ``[lo, hi]`` than ``old``: the acceptance rule of a move
    (a goal already optimised must not end further from its bounds)."""
    return distance(new, lo, hi) > distance(old, lo, hi) + 1e-9 * max(1.0, abs(hi))


@dataclass(frozen=True)
class Placement:
    """Where every replica is (broker, dir) and which replicas lead."""

    rb: I64
    rd: I64
    leader: BoolA


@dataclass(frozen=True)
class Scope:
    """Which brokers and dirs the goals count: brokers that stay (live, not removed, with
    capacity) and the dirs whose balance counts."""

    eligible: BoolA
    counted: BoolA


def broker_values(
    goal: GoalName, a: ClusterArrays, p: Placement, counted: BoolA, rates: F64
) -> F64:
    nb = a.n_brokers
    if goal is GoalName.DISK_USAGE:
        used = a.dir_other.astype(np.float64) + np.bincount(
            p.rd, weights=a.rep_size.astype(np.float64), minlength=a.n_dirs
        )
        cap = np.bincount(a.dir_broker[counted], weights=a.dir_capacity[counted], minlength=nb)
        load = np.bincount(a.dir_broker[counted], weights=used[counted], minlength=nb)
        return np.asarray(np.where(cap > 0, load / np.where(cap > 0, cap, 1.0), 0.0))
    w = replica_weight(goal, a.rep_size.astype(np.float64), p.leader, rates[a.rep_part])
    return np.asarray(np.bincount(p.rb, weights=w, minlength=nb), dtype=np.float64)


def _distribution(
    goal: GoalName,
    a: ClusterArrays,
    before: Placement,
    after: Placement,
    sc: Scope,
    rules: GoalRules,
    rates: F64,
) -> GoalReport:
    vb = broker_values(goal, a, before, sc.counted, rates)
    va = broker_values(goal, a, after, sc.counted, rates)
    cap: F64 | None = None
    if goal is GoalName.DISK_USAGE:
        c = sc.counted
        w = a.dir_capacity[c].astype(np.float64)
        cap = np.bincount(a.dir_broker[c], weights=w, minlength=a.n_brokers).astype(np.float64)
    bd = broker_bounds(goal, va, sc.eligible, rules, cap)
    bb = broker_bounds(goal, vb, sc.eligible, rules, cap)
    e = sc.eligible

    def outside(v: F64, b: Bounds) -> int:
        if b.low_utilisation:
            return 0
        return int(((v[e] < b.lower - EPS) | (v[e] > b.upper + EPS)).sum())

    ob, oa = outside(vb, bb), outside(va, bd)
    return _report(goal, rules, bd, vb[e], va[e], ob, oa)


def _report(
    goal: GoalName, rules: GoalRules, bd: Bounds, vb: F64, va: F64, ob: int, oa: int
) -> GoalReport:
    metric, unit = _METRIC[goal]
    return GoalReport(
        name=str(goal),
        hard=False,
        priority=rules.order.index(goal) if goal in rules.order else -1,
        metric=metric,
        unit=unit,
        average=bd.average,
        lower=bd.lower,
        upper=bd.upper,
        min_before=float(vb.min()) if vb.size else 0.0,
        max_before=float(vb.max()) if vb.size else 0.0,
        min_after=float(va.min()) if va.size else 0.0,
        max_after=float(va.max()) if va.size else 0.0,
        violations_before=ob,
        violations_after=oa,
        met_before=ob == 0,
        met_after=oa == 0,
        required=goal in rules.required,
    )


def topic_counts(a: ClusterArrays, rb: I64, tidx: I64, n_topics: int) -> F64:
    nb = a.n_brokers
    flat = tidx[a.rep_part] * nb + rb
    return np.bincount(flat, minlength=n_topics * nb).reshape(n_topics, nb).astype(np.float64)


def topic_limits(
    a: ClusterArrays, tidx: I64, n_topics: int, eligible: BoolA, t: float
) -> tuple[F64, F64]:
    per_topic = np.bincount(tidx[a.rep_part], minlength=n_topics).astype(np.float64)
    avg = per_topic / max(1, int(eligible.sum()))
    return topic_bounds(avg, t)


def _topics(
    a: ClusterArrays, before: Placement, after: Placement, sc: Scope, rules: GoalRules
) -> GoalReport:
    tidx, nt = topic_index(a)
    lo, hi = topic_limits(a, tidx, nt, sc.eligible, rules.thresholds.topic_replica_count)
    cb = topic_counts(a, before.rb, tidx, nt)[:, sc.eligible]
    ca = topic_counts(a, after.rb, tidx, nt)[:, sc.eligible]

    def outside(c: F64) -> int:
        return int(((c < lo[:, None] - EPS) | (c > hi[:, None] + EPS)).sum())

    avg = float(np.mean((lo + hi) / 2.0)) if nt else 0.0
    bd = Bounds(avg, float(lo.min()) if nt else 0.0, float(hi.max()) if nt else 0.0, False)
    return _report(
        GoalName.TOPIC_REPLICA_DISTRIBUTION,
        rules,
        bd,
        cb.ravel(),
        ca.ravel(),
        outside(cb),
        outside(ca),
    )


def _intra(
    a: ClusterArrays, before: Placement, after: Placement, sc: Scope, rules: GoalRules
) -> GoalReport:
    has = sc.eligible & (np.bincount(a.dir_broker[sc.counted], minlength=a.n_brokers) > 0)
    sb = broker_spreads_pp(a, dir_used(a, before.rd), sc.counted)[has]
    sa = broker_spreads_pp(a, dir_used(a, after.rd), sc.counted)[has]
    band = rules.band_pp
    bd = Bounds(float(sa.mean()) if sa.size else 0.0, 0.0, band, False)
    return _report(
        GoalName.INTRA_BROKER_DISK_USAGE,
        rules,
        bd,
        sb,
        sa,
        int((sb > band + 1e-6).sum()),
        int((sa > band + 1e-6).sum()),
    )


def rack_narrowed(a: ClusterArrays, rb: I64) -> int:
    """Partitions whose replicas on ``rb`` span fewer racks than now (RackAwareGoal)."""
    racks = a.broker_rack + 1
    nr = int(racks.max()) + 1 if racks.size else 1

    def distinct(brokers: I64) -> I64:
        k = sorted_unique(a.rep_part * nr + racks[brokers])
        return np.bincount(k // nr, minlength=a.n_parts)

    return int((distinct(rb) < distinct(a.rep_broker)).sum())


def duplicated_partitions(a: ClusterArrays, rb: I64) -> int:
    """Partitions with two replicas on one broker of ``rb`` (OneReplicaPerBrokerGoal)."""
    nb = max(1, a.n_brokers)
    distinct = np.bincount(sorted_unique(a.rep_part * nb + rb) // nb, minlength=a.n_parts)
    return int((distinct != np.bincount(a.rep_part, minlength=a.n_parts)).sum())


def dirs_over_threshold(a: ClusterArrays, used: F64, threshold: float) -> I64:
    """The live dirs of live brokers above ``threshold`` of their capacity (DiskCapacityGoal
    and the plan's capacity check)."""
    cap = a.dir_capacity.astype(np.float64)
    live = a.dir_live & a.broker_live[a.dir_broker] & (cap > 0)
    util = np.where(live, used / np.where(cap > 0, cap, 1.0), 0.0)
    return np.flatnonzero(util > threshold + 1e-12)


def _over_capacity(a: ClusterArrays, p: Placement, sc: Scope, rules: GoalRules) -> int:
    used = dir_used(a, p.rd)
    cap = a.dir_capacity.astype(np.float64)
    thr = rules.capacity_threshold
    dirs = int(dirs_over_threshold(a, used, thr).size)
    c = sc.counted
    bcap = np.bincount(a.dir_broker[c], weights=cap[c], minlength=a.n_brokers)
    bused = np.bincount(a.dir_broker[c], weights=used[c], minlength=a.n_brokers)
    brokers = int((sc.eligible & (bcap > 0) & (bused > thr * bcap * (1 + 1e-12))).sum())
    return dirs + brokers


def _hard(goal: GoalName, rules: GoalRules, before: int, after: int, met: bool) -> GoalReport:
    metric, unit = _METRIC[goal]
    return GoalReport(
        name=str(goal),
        hard=True,
        priority=rules.order.index(goal) if goal in rules.order else -1,
        metric=metric,
        unit=unit,
        violations_before=before,
        violations_after=after,
        met_before=before == 0,
        met_after=met,
        required=True,
    )


def hard_goals(
    a: ClusterArrays, before: Placement, after: Placement, sc: Scope, rules: GoalRules
) -> list[GoalReport]:
    """The hard goals, counted on the placement. RackAwareGoal counts partitions whose
    replicas span fewer racks than before (a plan never narrows a partition's racks);
    ReplicaCapacityGoal brokers holding more replicas than the capacity, where the plan added
    to them; DiskCapacityGoal disks and brokers above the capacity threshold."""
    cap = rules.thresholds.max_replicas_per_broker
    nb_before = np.bincount(before.rb, minlength=a.n_brokers)
    nb_after = np.bincount(after.rb, minlength=a.n_brokers)
    over_b = int((sc.eligible & (nb_before > cap)).sum())
    over_a = int((sc.eligible & (nb_after > cap)).sum())
    grew = bool((sc.eligible & (nb_after > cap) & (nb_after > nb_before)).any())
    disk_b, disk_a = _over_capacity(a, before, sc, rules), _over_capacity(a, after, sc, rules)
    dup_b, dup_a = duplicated_partitions(a, before.rb), duplicated_partitions(a, after.rb)
    rack = rack_narrowed(a, after.rb)
    return [
        _hard(GoalName.RACK_AWARE, rules, 0, rack, rack == 0),
        _hard(GoalName.REPLICA_CAPACITY, rules, over_b, over_a, not grew and over_a <= over_b),
        _hard(GoalName.DISK_CAPACITY, rules, disk_b, disk_a, disk_a == 0),
        _hard(GoalName.ONE_REPLICA_PER_BROKER, rules, dup_b, dup_a, dup_a == 0),
    ]


def evaluate(
    a: ClusterArrays,
    after: Placement,
    sc: Scope,
    rules: GoalRules,
    reasons: dict[GoalName, str] | None = None,
) -> list[GoalReport]:
    """Every goal for the placement ``after`` against the snapshot's: the hard goals first,
    then the soft goals worked on in their order, then the ones only reported. A goal not met
    carries ``reasons[goal]`` (the optimiser's account of what stopped it)."""
    before = Placement(a.rep_broker, a.rep_dir, a.rep_leader)
    rates = partition_rates(a)
    out = hard_goals(a, before, after, sc, rules)
    soft = [g for g in rules.order if g in SOFT_GOALS]
    soft += [g for g in DEFAULT_SOFT_GOALS if g not in soft]
    for g in soft:
        if g is GoalName.TOPIC_REPLICA_DISTRIBUTION:
            r = _topics(a, before, after, sc, rules)
        elif g is GoalName.INTRA_BROKER_DISK_USAGE:
            r = _intra(a, before, after, sc, rules)
        else:
            r = _distribution(g, a, before, after, sc, rules, rates)
        out.append(r)
    why = reasons or {}
    for i, r in enumerate(out):
        if r.met_after:
            continue
        g = GoalName(r.name)
        text = why.get(g) or (
            "not worked on: the Rebalance's goals leave it out"
            if r.priority < 0
            else "the planner found no move that keeps the goals above it"
        )
        out[i] = r.model_copy(update={"reason": text})
    return out


GOAL_NOTE = "goal-reason\t"
"""Notes that carry a goal's reason through the Spark job's rows (``frames``): the prefix,
the goal's name, a tab, the reason."""


def reason_notes(reasons: dict[GoalName, str]) -> list[str]:
    return [f"{GOAL_NOTE}{g}\t{why}" for g, why in reasons.items()]


def split_notes(notes: list[str]) -> tuple[list[str], dict[GoalName, str]]:
    """(the notes for a person, each goal's reason) from the notes as the job's rows carry
    them."""
    plain: list[str] = []
    reasons: dict[GoalName, str] = {}
    for n in notes:
        if n.startswith(GOAL_NOTE):
            name, _, why = n[len(GOAL_NOTE) :].partition("\t")
            reasons[GoalName(name)] = why
        else:
            plain.append(n)
    return plain, reasons
