"""Baselines the benchmark compares the planner with (pure, single process).

* :func:`kafka_default`: every replica re-placed on its broker by Kafka's own rule, the live
  directory with the fewest partitions (ties to the first), as if all had been created anew.
* :func:`plain_greedy`: per broker, repeatedly move the largest replica of the fullest
  directory to the emptiest one as long as that lowers the larger of the two utilisations,
  until the broker's spread is within the tolerance.
* :func:`cruise_control_greedy`: Cruise Control's way over the broker goals, goal by goal,
  each move the best for the current goal that breaks no higher one.
"""

from __future__ import annotations

import numpy as np

from jbod_operator.models.goals import GoalName

from .arrays import F64, I64, BoolA, ClusterArrays
from .goals import (
    broker_limits,
    goal_rules,
    one_weight,
    partition_rates,
    replica_weight,
    worse,
)
from .options import PlanOptions


def kafka_default(a: ClusterArrays) -> I64:
    rd = a.rep_dir.copy()
    order = np.argsort(a.rep_broker, kind="stable")
    bstart = np.searchsorted(a.rep_broker[order], np.arange(a.n_brokers + 1))
    dstart = np.searchsorted(a.dir_broker, np.arange(a.n_brokers + 1))
    for b in range(a.n_brokers):
        dirs = np.arange(dstart[b], dstart[b + 1])
        dirs = dirs[a.dir_live[dirs] & ~a.dir_cordoned[dirs]]
        reps = order[bstart[b] : bstart[b + 1]]
        if dirs.size == 0 or reps.size == 0:
            continue
        # fewest partitions first, from empty: the k-th replica goes to dir k mod n
        rd[reps] = dirs[np.arange(reps.size) % dirs.size]
    return rd


def plain_greedy(a: ClusterArrays, tolerance: float = 0.04) -> I64:
    rd = a.rep_dir.copy()
    size = a.rep_size.astype(np.float64)
    cap = a.dir_capacity.astype(np.float64)
    load = a.dir_other.astype(np.float64) + np.bincount(rd, weights=size, minlength=a.n_dirs)
    order = np.argsort(a.rep_broker, kind="stable")
    bstart = np.searchsorted(a.rep_broker[order], np.arange(a.n_brokers + 1))
    dstart = np.searchsorted(a.dir_broker, np.arange(a.n_brokers + 1))
    for b in range(a.n_brokers):
        dirs = np.arange(dstart[b], dstart[b + 1])
        dirs = dirs[a.dir_live[dirs] & ~a.dir_cordoned[dirs] & (cap[dirs] > 0)]
        reps = order[bstart[b] : bstart[b + 1]]
        if dirs.size < 2 or reps.size == 0:
            continue
        reps = reps[np.argsort(-size[reps], kind="stable")]  # largest first
        for _ in range(reps.size):
            u = load[dirs] / cap[dirs]
            hi, lo = int(dirs[int(np.argmax(u))]), int(dirs[int(np.argmin(u))])
            u_hi, u_lo = load[hi] / cap[hi], load[lo] / cap[lo]
            if u_hi - u_lo <= tolerance:
                break
            on_hi = reps[rd[reps] == hi]
            ok = (load[lo] + size[on_hi]) / cap[lo] < u_hi
            if not ok.any():
                break
            i = int(on_hi[int(np.argmax(ok))])  # the largest that lowers the pair's maximum
            rd[i] = lo
            load[hi] -= size[i]
            load[lo] += size[i]
    return rd


# -- a Cruise-Control-like greedy over the broker goals ---------------------------------------

CC_GOALS: tuple[GoalName, ...] = (
    GoalName.DISK_USAGE,
    GoalName.REPLICA_DISTRIBUTION,
    GoalName.LEADER_REPLICA_DISTRIBUTION,
    GoalName.LEADER_BYTES_IN,
    GoalName.POTENTIAL_NW_OUT,
)


class _CC:
    """The greedy's state: where replicas are, each dir's bytes, each goal's figure."""

    def __init__(self, a: ClusterArrays, opts: PlanOptions) -> None:
        self.a = a
        self.rules = goal_rules(opts)
        self.thr = opts.capacity_threshold
        self.rb = a.rep_broker.copy()
        self.rd = a.rep_dir.copy()
        self.leader = a.rep_leader.copy()
        self.size = a.rep_size.astype(np.float64)
        self.rates = partition_rates(a)
        self.cap = a.dir_capacity.astype(np.float64)
        self.dload = a.dir_other.astype(np.float64) + np.bincount(
            self.rd, weights=self.size, minlength=a.n_dirs
        )
        self.dir_ok = a.dir_live & ~a.dir_cordoned & (self.cap > 0)
        self.elig = a.broker_live & (
            np.bincount(a.dir_broker[self.dir_ok], minlength=a.n_brokers) > 0
        )
        self.bcap = np.bincount(
            a.dir_broker, weights=self.cap * self.dir_ok, minlength=a.n_brokers
        ).astype(np.float64)
        self.start = a.part_start()
        self.vals: dict[GoalName, F64] = {}
        self.lo: dict[GoalName, F64] = {}
        self.hi: dict[GoalName, F64] = {}
        for g in CC_GOALS:
            w = self.weights(g)
            v = np.bincount(self.rb, weights=w, minlength=a.n_brokers).astype(np.float64)
            self.vals[g] = v
            self.lo[g], self.hi[g] = broker_limits(g, v, self.elig, self.rules, self.bcap)

    def weights(self, g: GoalName) -> F64:
        return replica_weight(g, self.size, self.leader, self.rates[self.a.rep_part])

    def weights_one(self, g: GoalName, i: int) -> float:
        rate = float(self.rates[self.a.rep_part[i]])
        return one_weight(g, float(self.size[i]), bool(self.leader[i]), rate)

    def dest_dir(self, r: int, s: float) -> int:
        a = self.a
        ds = np.flatnonzero((a.dir_broker == r) & self.dir_ok)
        if ds.size == 0:
            return -1
        u = (self.dload[ds] + s) / self.cap[ds]
        d = int(ds[int(np.argmin(u))])
        return d if self.dload[d] + s <= self.thr * self.cap[d] else -1

    def allowed(self, i: int, r: int) -> int:
        """The dir of ``r`` replica ``i`` may go to under the hard goals, or -1."""
        a = self.a
        p = int(a.rep_part[i])
        brokers = self.rb[self.start[p] : self.start[p + 1]]
        if r in brokers:
            return -1
        src = int(self.rb[i])
        racks = a.broker_rack
        others = brokers[brokers != src]
        if racks[r] != racks[src] and racks[r] in racks[others]:
            return -1
        return self.dest_dir(r, float(self.size[i]))

    def accepted(self, i: int, src: int, dst: int, done: list[GoalName]) -> bool:
        for h in done:
            w = self.weights_one(h, i)
            v, lo, hi = self.vals[h], self.lo[h], self.hi[h]
            for b, new in ((src, v[src] - w), (dst, v[dst] + w)):
                if worse(v[b], new, lo[b], hi[b]):
                    return False
        return True

    def move(self, i: int, r: int, d: int) -> None:
        src = int(self.rb[i])
        for g in CC_GOALS:
            w = self.weights_one(g, i)
            self.vals[g][src] -= w
            self.vals[g][r] += w
        self.dload[self.rd[i]] -= self.size[i]
        self.dload[d] += self.size[i]
        self.rb[i] = r
        self.rd[i] = d


def _cc_goal(cc: _CC, g: GoalName, done: list[GoalName]) -> None:
    """Brokers above the goal's upper bound give, largest replica first, each to the broker
    lowest on the goal that takes it; then brokers below the lower bound take the same way."""
    v, lo, hi = cc.vals[g], cc.lo[g], cc.hi[g]
    if not np.isfinite(hi).any():
        return
    for b in [int(x) for x in np.argsort(-(v - hi), kind="stable") if cc.elig[x]]:
        if v[b] <= hi[b]:
            continue
        mine = np.flatnonzero(cc.rb == b)
        w = cc.weights(g)[mine]
        for i in mine[np.argsort(-w, kind="stable")].tolist():
            if v[b] <= hi[b]:
                break
            wi = cc.weights_one(g, i)
            if wi <= 0:
                break
            for r in np.argsort(v - lo, kind="stable").tolist():
                if not cc.elig[r] or r == b or v[r] + wi > hi[r]:
                    continue
                d = cc.allowed(i, r)
                if d >= 0 and cc.accepted(i, b, r, done):
                    cc.move(i, r, d)
                    break
    for r in [int(x) for x in np.argsort(v - lo, kind="stable") if cc.elig[x]]:
        if v[r] >= lo[r]:
            continue
        for b in np.argsort(-(v - lo), kind="stable").tolist():
            if v[r] >= lo[r]:
                break
            if not cc.elig[b] or b == r or v[b] <= lo[b]:
                continue
            mine = np.flatnonzero(cc.rb == b)
            w = cc.weights(g)[mine]
            for i in mine[np.argsort(-w, kind="stable")].tolist():
                wi = cc.weights_one(g, i)
                if v[r] >= lo[r] or wi <= 0:
                    break
                if v[r] + wi > hi[r] or v[b] - wi < lo[b]:
                    continue
                d = cc.allowed(i, r)
                if d >= 0 and cc.accepted(i, b, r, done):
                    cc.move(i, r, d)


def cruise_control_greedy(
    a: ClusterArrays, opts: PlanOptions | None = None
) -> tuple[I64, I64, BoolA]:
    """A Cruise-Control-like plan (full mode) over the broker goals, goal by goal in the
    default order: for each goal, each move the best for that goal (the largest replica of the
    broker furthest above the bounds, to the broker furthest below) that breaks no hard goal
    and takes no goal already optimised further from its bounds. No swaps, leadership moves
    with its replica, bytes moved are not weighed. Returns (broker, dir, leader) per replica."""
    cc = _CC(a, opts or PlanOptions())
    done: list[GoalName] = []
    for g in CC_GOALS:
        _cc_goal(cc, g, done)
        done.append(g)
    return cc.rb, cc.rd, cc.leader
