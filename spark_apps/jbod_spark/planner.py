"""The planner, without Spark: a snapshot (or its arrays) and options in, a :class:`Plan` out.

Steps (the Spark driver runs the same functions, the second one in parallel per broker):

1. :func:`~jbod_spark.interbroker.plan_inter_broker` (one cluster at a time): drains, balance of
   bytes / replica counts across brokers, each move naming its destination directory, and
   leadership balance (no bytes moved).
2. :func:`dir_step` (one broker at a time): evens out the broker's directories with the fewest
   bytes, placing the replicas that arrived in step 1 for free.
3. :func:`~jbod_spark.outputs.build_plan`: moves, manifests, Kafka JSON, report and checks.

Deterministic: the same snapshot and options give the same plan (no randomness, every tie
broken by a canonical index).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jbod_operator.models.snapshot import ClusterSnapshot

from .arrays import F64, I64, BoolA, ClusterArrays, from_snapshot
from .dirbalance import BrokerDirsProblem, DirBalanceParams, balance_broker_dirs
from .interbroker import InterResult, drain_mask, plan_inter_broker, projected_sizes
from .options import Mode, PlanOptions
from .outputs import Plan, build_plan

__all__ = [
    "BrokerStepParams",
    "broker_dir_step",
    "dir_step",
    "plan",
    "plan_arrays",
    "plan_directory_balance",
    "removed_brokers",
    "step_params",
]


@dataclass(frozen=True)
class BrokerStepParams:
    """What the directory step of one broker needs besides its dirs and replicas."""

    balance: bool
    ceiling: float
    upper: float
    """NaN when none (targeted mode sets it)."""


def step_params(opts: PlanOptions, inter: InterResult, b: int) -> BrokerStepParams:
    return BrokerStepParams(
        balance=bool(inter.balance_broker[b]),
        ceiling=float(inter.broker_ceiling[b]),
        upper=float(inter.broker_upper[b]),
    )


def dir_step(
    capacity: I64,
    fixed: I64,
    usable: BoolA,
    sizes: I64,
    cur: I64,
    movable: BoolA,
    opts: PlanOptions,
    sp: BrokerStepParams,
) -> I64:
    """Local dir index of every replica of one broker after the directory step.

    ``cur`` is each replica's local dir, or -1 when it arrived on the broker."""
    upper = None if np.isnan(sp.upper) else sp.upper
    targeted = upper is not None
    params = DirBalanceParams(
        tolerance=opts.dir_balance_tolerance,
        threshold=opts.capacity_threshold,
        ceiling=sp.ceiling,
        upper=upper,
        shed=sp.balance or targeted,
        fill=sp.balance and not targeted,
        min_move_bytes=opts.min_move_bytes,
    )
    prob = BrokerDirsProblem(
        capacity=capacity.astype(np.float64),
        fixed=fixed.astype(np.float64),
        usable=usable,
        sizes=sizes,
        cur=cur,
        movable=movable,
    )
    return balance_broker_dirs(prob, params)


def removed_brokers(a: ClusterArrays, opts: PlanOptions) -> BoolA:
    return drain_mask(a, opts)[1]


def broker_dir_step(
    dir_idx: I64,
    capacity: I64,
    fixed: I64,
    usable: BoolA,
    dir_live: BoolA,
    rep_dir: I64,
    arrived: BoolA,
    sizes: I64,
    opts: PlanOptions,
    sp: BrokerStepParams,
) -> I64:
    """The directory step of one broker, on global indices: its dirs (sorted ``dir_idx`` with
    their capacity, fixed bytes, whether they may receive and whether they can be read) and its
    replicas after step 1 (tentative global dir, whether they arrived, planning size). Returns
    each replica's final global dir. Replicas on an unreadable dir stay where they are."""
    new = rep_dir.copy()
    if rep_dir.size == 0 or dir_idx.size == 0:
        return new
    local = np.searchsorted(dir_idx, rep_dir)
    local = np.minimum(local, dir_idx.size - 1)
    cur = np.where(arrived, -1, local)
    readable = arrived | dir_live[local]
    on_unusable = readable & ~arrived & ~usable[local]
    if not sp.balance and np.isnan(sp.upper) and not arrived.any() and not on_unusable.any():
        return new
    sel = np.flatnonzero(readable)
    new_local = dir_step(
        capacity,
        fixed,
        usable,
        sizes[sel],
        cur[sel],
        np.ones(sel.size, dtype=np.bool_),
        opts,
        sp,
    )
    placed = new_local >= 0
    new[sel[placed]] = dir_idx[new_local[placed]]
    return new


def plan_arrays(a: ClusterArrays, opts: PlanOptions) -> tuple[I64, I64, BoolA, InterResult]:
    """Final (broker, dir, leader) of every replica, and step 1's result."""
    sizes = projected_sizes(a, opts)
    inter = plan_inter_broker(a, opts, sizes)
    rd = inter.rep_dir.copy()
    order = np.argsort(inter.rep_broker, kind="stable")
    bstart = np.searchsorted(inter.rep_broker[order], np.arange(a.n_brokers + 1))
    dstart = np.searchsorted(a.dir_broker, np.arange(a.n_brokers + 1))
    usable_all = a.dir_live & ~a.dir_cordoned & ~inter.drain_dir
    for b in range(a.n_brokers):
        if not a.broker_live[b]:
            continue
        reps = order[bstart[b] : bstart[b + 1]]
        dirs = np.arange(dstart[b], dstart[b + 1])
        rd[reps] = broker_dir_step(
            dirs,
            a.dir_capacity[dirs],
            a.dir_other[dirs],
            usable_all[dirs],
            a.dir_live[dirs],
            inter.rep_dir[reps],
            inter.arrived[reps],
            sizes[reps],
            opts,
            step_params(opts, inter, b),
        )
    return inter.rep_broker, rd, inter.rep_leader, inter


def _arrays(snapshot: ClusterSnapshot | ClusterArrays) -> ClusterArrays:
    return snapshot if isinstance(snapshot, ClusterArrays) else from_snapshot(snapshot)


def plan(snapshot: ClusterSnapshot | ClusterArrays, options: PlanOptions | None = None) -> Plan:
    """A plan for one cluster, in the mode of ``options`` (default: full rebalance)."""
    opts = options or PlanOptions()
    a = _arrays(snapshot)
    rb, rd, leader, inter = plan_arrays(a, opts)
    return build_plan(
        a,
        rb,
        rd,
        leader,
        drain_dir=inter.drain_dir,
        removed=removed_brokers(a, opts),
        opts=opts,
        notes=inter.notes,
        goal_reasons=inter.goal_reasons,
    )


def plan_directory_balance(
    snapshot: ClusterSnapshot | ClusterArrays,
    *,
    tolerance: float = 0.04,
    capacity_threshold: float = 0.8,
    min_move_bytes: int = 0,
    capacity_bytes: int | None = None,
) -> Plan:
    """Even out the directories of each broker; no replica changes broker (dirs-only mode).

    The plan's :meth:`Plan.log_dir_moves` are the LogDirMove manifests to apply. No broker's
    largest directory utilisation goes up, and directories that are cordoned are drained to the
    broker's other directories. ``capacity_bytes`` plans as if every dir had that size and held
    only its replicas (dirs sharing one filesystem report the whole disk)."""
    opts = PlanOptions(
        mode=Mode.DIRS_ONLY,
        dir_balance_tolerance=tolerance,
        capacity_threshold=capacity_threshold,
        min_move_bytes=min_move_bytes,
    )
    a = _arrays(snapshot)
    if capacity_bytes is not None:
        a = a.with_capacity(capacity_bytes)
    return plan(a, opts)


def utilisation(a: ClusterArrays, rep_dir: I64) -> F64:
    used = a.dir_other + np.bincount(rep_dir, weights=a.rep_size, minlength=a.n_dirs)
    return np.asarray(used / np.where(a.dir_capacity > 0, a.dir_capacity, 1), dtype=np.float64)
