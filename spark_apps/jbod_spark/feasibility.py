"""Whether a plan reaches its targets, and if not, what it does reach and why.

A Rebalance states two targets: the band (the largest accepted spread between the disks of one
broker, ``dir_balance_tolerance``) and the capacity threshold. The planner is a heuristic, so a
plan that misses a target must say so, give the spread it does reach, and explain the miss in
terms a person can act on. The explanations are lower bounds that hold for *any* placement of
the replicas a broker ends with, so a reason given here is a proof, not a guess:

* the disk holding a broker's largest replica is at least ``(other bytes + size) / capacity``
  full, and the emptiest disk is at most the broker's capacity-weighted mean, so no placement
  brings its disks closer than the difference (a partition larger than half a disk of a broker
  that is not nearly half full cannot be balanced);
* a replica larger than the threshold's share of every disk it may sit on, or a broker (in
  dirs-only mode) or a cluster holding more than the threshold of its capacity, cannot be
  brought under the threshold.

When no such bound explains a miss, the reason says that the planner found no better placement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from jbod_operator.models.common import human_bytes
from jbod_operator.models.plan_report import BandScope, ConstraintCheck

from .arrays import F64, I64, BoolA, ClusterArrays
from .metrics import broker_spreads_pp
from .options import Mode, PlanOptions

__all__ = ["EPS_PP", "MAX_REASONS", "Feasibility", "assess", "band_scope"]

EPS_PP = 1e-6
"""Spreads are compared with the band within this many percentage points (float noise)."""
MAX_REASONS = 8
"""At most this many reasons are listed; the rest are counted (250 brokers could each miss)."""


@dataclass(frozen=True)
class Feasibility:
    feasible: bool
    band_scope: BandScope
    best_spread_pp: float
    broker_spread_pp_before: float
    broker_spread_pp_after: float
    disk_spread_pp_before: float
    disk_spread_pp_after: float
    reasons: list[str] = field(default_factory=list)


def band_scope(a: ClusterArrays, opts: PlanOptions) -> tuple[BandScope, BoolA]:
    """The brokers whose disks the mode balances, so the band applies to them: every broker in
    every Rebalance mode (add-brokers moves replicas between brokers only onto the new ones,
    the remove modes empty what they name, and each balances the disks that stay; the emptied
    ones are not counted), none in targeted mode, which only relieves."""
    if opts.mode is Mode.TARGETED:
        return "none", np.zeros(a.n_brokers, dtype=np.bool_)
    return "all", np.ones(a.n_brokers, dtype=np.bool_)


def _spread_pp(values: F64) -> float:
    return 100.0 * float(values.max() - values.min()) if values.size else 0.0


def _broker_utils(a: ClusterArrays, used: F64, counted: BoolA) -> F64:
    cap = np.bincount(a.dir_broker[counted], weights=a.dir_capacity[counted], minlength=a.n_brokers)
    use = np.bincount(a.dir_broker[counted], weights=used[counted], minlength=a.n_brokers)
    has = cap > 0
    return np.asarray(use[has] / cap[has], dtype=np.float64)


def _replica_name(a: ClusterArrays, i: int) -> str:
    p = int(a.rep_part[i])
    return f"{a.part_topic[p]}-{int(a.part_num[p])}"


def _band_reason(
    a: ClusterArrays, b: int, rd: I64, used: F64, counted: BoolA, band_pp: float, got_pp: float
) -> str:
    bid = int(a.broker_ids[b])
    dirs = np.flatnonzero(counted & (a.dir_broker == b))
    cap = a.dir_capacity[dirs].astype(np.float64)
    on = np.flatnonzero(np.isin(rd, dirs))
    if on.size:
        i = int(on[np.lexsort((on, -a.rep_size[on]))[0]])
        size = float(a.rep_size[i])
        mean = float(used[dirs].sum() / cap.sum())
        floor = float(((a.dir_other[dirs] + size) / cap).min())
        bound_pp = 100.0 * (floor - mean)
        if bound_pp > band_pp + EPS_PP:
            what = (
                "is larger than half of any disk"
                if size > float(cap.max()) / 2
                else f"fills at least {floor:.1%} of any disk"
            )
            return (
                f"partition {_replica_name(a, i)} ({human_bytes(size)}) {what} of broker {bid} "
                f"(the largest is {human_bytes(float(cap.max()))}): wherever it sits, that "
                f"disk is at least {floor:.1%} full while the broker's disks average "
                f"{mean:.1%}, so they cannot come within {bound_pp:.1f} pp of each other "
                f"(band {band_pp:.1f} pp; this plan: {got_pp:.1f} pp)"
            )
    return (
        f"broker {bid}: disks {got_pp:.1f} pp apart after the plan (band {band_pp:.1f} pp): "
        "the planner found no placement within the band"
    )


def _threshold_reason(
    a: ClusterArrays,
    d: int,
    rd: I64,
    used: F64,
    counted: BoolA,
    util: F64,
    threshold: float,
    dirs_only: bool,
) -> str:
    b = int(a.dir_broker[d])
    bid = int(a.broker_ids[b])
    where = f"disk {a.dir_name[d]} of broker {bid}"
    scope = counted & (a.dir_broker == b) if dirs_only else counted
    cap = a.dir_capacity[scope].astype(np.float64)
    on = np.flatnonzero(rd == d)
    if on.size and cap.size:
        i = int(on[np.lexsort((on, -a.rep_size[on]))[0]])
        size = float(a.rep_size[i])
        floor = float(((a.dir_other[scope] + size) / cap).min())
        if floor > threshold + 1e-12:
            return (
                f"{where} ends at {util[d]:.1%}: partition {_replica_name(a, i)} "
                f"({human_bytes(size)}) is larger than {threshold:.0%} of any disk it may sit "
                f"on (it fills at least {floor:.1%} of one)"
            )
    if cap.size:
        held = float(used[scope].sum())
        if held > threshold * float(cap.sum()):
            who = f"broker {bid}" if dirs_only else "the cluster"
            why = ": dirs-only mode moves nothing to another broker" if dirs_only else ""
            return (
                f"{where} ends at {util[d]:.1%}: {who} holds {human_bytes(held)} on disks of "
                f"{human_bytes(float(cap.sum()))}, more than {threshold:.0%} of them{why}"
            )
    return f"{where} ends at {util[d]:.1%}: the planner found no placement under {threshold:.0%}"


def _capped(items: I64, reason: Callable[[int], str], what: str) -> list[str]:
    """The reasons of the first :data:`MAX_REASONS` items, then a count of the rest (each
    reason scans the replicas, so only the ones listed are worked out)."""
    out = [reason(int(x)) for x in items[:MAX_REASONS]]
    if items.size > MAX_REASONS:
        out.append(f"... and {items.size - MAX_REASONS} more {what}")
    return out


def assess(
    a: ClusterArrays,
    rd: I64,
    used_before: F64,
    used_after: F64,
    counted: BoolA,
    opts: PlanOptions,
    constraints: list[ConstraintCheck],
) -> Feasibility:
    """The plan's feasibility against ``opts``' band and threshold and the hard constraints.

    ``rd`` is every replica's dir after the plan, ``counted`` the dirs whose balance counts
    (live, not cordoned or drained, of a live broker that stays)."""
    band_pp = 100.0 * opts.dir_balance_tolerance
    thr = opts.capacity_threshold
    scope_name, scope = band_scope(a, opts)
    spreads = broker_spreads_pp(a, used_after, counted)
    in_scope = scope & (np.bincount(a.dir_broker[counted], minlength=a.n_brokers) > 0)
    best = float(spreads[in_scope].max()) if in_scope.any() else 0.0
    reasons: list[str] = []
    out_of_band = np.flatnonzero(in_scope & (spreads > band_pp + EPS_PP))
    reasons += _capped(
        out_of_band[np.argsort(-spreads[out_of_band], kind="stable")],
        lambda b: _band_reason(a, b, rd, used_after, counted, band_pp, float(spreads[b])),
        "brokers out of the band",
    )
    cap = a.dir_capacity.astype(np.float64)
    live_dir = a.dir_live & a.broker_live[a.dir_broker] & (cap > 0)
    util = np.where(live_dir, used_after / np.where(cap > 0, cap, 1.0), 0.0)
    over = np.flatnonzero(util > thr + 1e-12)
    dirs_only = opts.mode is Mode.DIRS_ONLY
    reasons += _capped(
        over[np.argsort(-util[over], kind="stable")],
        lambda d: _threshold_reason(a, d, rd, used_after, counted, util, thr, dirs_only),
        "disks above the threshold",
    )
    reasons += [
        f"constraint {c.name} fails: {c.detail}" if c.detail else f"constraint {c.name} fails"
        for c in constraints
        if not c.ok and c.name != "capacity_threshold"
    ]
    return Feasibility(
        feasible=not reasons,
        band_scope=scope_name,
        best_spread_pp=best,
        broker_spread_pp_before=_spread_pp(_broker_utils(a, used_before, counted)),
        broker_spread_pp_after=_spread_pp(_broker_utils(a, used_after, counted)),
        disk_spread_pp_before=_spread_pp(_dir_utils(a, used_before, counted)),
        disk_spread_pp_after=_spread_pp(_dir_utils(a, used_after, counted)),
        reasons=reasons,
    )


def _dir_utils(a: ClusterArrays, used: F64, counted: BoolA) -> F64:
    return np.asarray(used[counted] / a.dir_capacity[counted], dtype=np.float64)
