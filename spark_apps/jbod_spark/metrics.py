"""Balance figures and the lower bound on bytes moved, for any before/after placement.

Used by the plan report and by the benchmark (for our plans and for the baselines alike).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .arrays import F64, I64, BoolA, ClusterArrays


@dataclass(frozen=True)
class BalanceFigures:
    largest_util: float
    """Largest directory utilisation (fraction) over the dirs that count."""
    worst_spread_pp: float
    """Largest per-broker (max - min) directory utilisation, in percentage points."""
    std_pp: float
    """Standard deviation of directory utilisation, in percentage points."""
    above_threshold: int
    """Directories above the capacity threshold."""

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


def dir_used(a: ClusterArrays, rep_dir: I64, sizes: I64 | None = None) -> F64:
    sz = (a.rep_size if sizes is None else sizes).astype(np.float64)
    return a.dir_other.astype(np.float64) + np.bincount(rep_dir, weights=sz, minlength=a.n_dirs)


def counted_dirs(a: ClusterArrays, drain_dir: BoolA) -> BoolA:
    """The dirs whose balance is measured: live, not cordoned, not drained, of a live broker."""
    return (
        a.dir_live
        & ~a.dir_cordoned
        & ~drain_dir
        & a.broker_live[a.dir_broker]
        & (a.dir_capacity > 0)
    )


def figures(a: ClusterArrays, used: F64, counted: BoolA, threshold: float) -> BalanceFigures:
    if not counted.any():
        return BalanceFigures(0.0, 0.0, 0.0, 0)
    util = used[counted] / a.dir_capacity[counted]
    b = a.dir_broker[counted]
    mx = np.full(a.n_brokers, -np.inf)
    mn = np.full(a.n_brokers, np.inf)
    np.maximum.at(mx, b, util)
    np.minimum.at(mn, b, util)
    has = np.isfinite(mx)
    spread = float((mx[has] - mn[has]).max()) if has.any() else 0.0
    return BalanceFigures(
        largest_util=float(util.max()),
        worst_spread_pp=100.0 * spread,
        std_pp=100.0 * float(util.std()),
        above_threshold=int((util > threshold + 1e-12).sum()),
    )


def broker_spreads_pp(a: ClusterArrays, used: F64, counted: BoolA) -> F64:
    util = np.where(counted, used / np.where(a.dir_capacity > 0, a.dir_capacity, 1), np.nan)
    mx = np.full(a.n_brokers, -np.inf)
    mn = np.full(a.n_brokers, np.inf)
    np.fmax.at(mx, a.dir_broker, util)
    np.fmin.at(mn, a.dir_broker, util)
    return np.where(np.isfinite(mx) & np.isfinite(mn), 100.0 * (mx - mn), 0.0)


def bytes_moved(a: ClusterArrays, rep_broker: I64, rep_dir: I64) -> int:
    changed = (rep_broker != a.rep_broker) | (rep_dir != a.rep_dir)
    return int(a.rep_size[changed].sum())


def lower_bound_bytes(
    a: ClusterArrays, used_before: F64, used_after: F64, counted: BoolA, drain_dir: BoolA
) -> int:
    """Bytes any plan must move to reach the same balance: every counted dir inside its broker's
    achieved band [min, max] of utilisation, and every drained dir empty.

    Each moved byte leaves exactly one dir and enters exactly one, so the bytes moved are at
    least the larger of (bytes that must leave dirs above their band) and (bytes that must enter
    dirs below it)."""
    cap = a.dir_capacity.astype(np.float64)
    util_after = np.where(counted, used_after / np.where(cap > 0, cap, 1.0), np.nan)
    hi = np.full(a.n_brokers, -np.inf)
    lo = np.full(a.n_brokers, np.inf)
    np.fmax.at(hi, a.dir_broker, util_after)
    np.fmin.at(lo, a.dir_broker, util_after)
    hi_d = hi[a.dir_broker]
    lo_d = lo[a.dir_broker]
    out = np.where(counted, np.maximum(0.0, used_before - hi_d * cap), 0.0)
    inn = np.where(counted, np.maximum(0.0, lo_d * cap - used_before), 0.0)
    on_drained = used_before - a.dir_other
    out = out + np.where(drain_dir, np.maximum(0.0, on_drained), 0.0)
    return int(max(float(np.nan_to_num(out).sum()), float(np.nan_to_num(inn).sum())))
