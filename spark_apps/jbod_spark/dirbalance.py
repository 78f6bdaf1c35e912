"""Directory balance within one broker (KIP-113's problem): pure numpy, no I/O.

Given a broker's directories (capacity, bytes that never move, which may receive) and its
replicas (size, current dir or "to place"), choose a dir for every replica so that

* every directory ends inside a band ``[U - w, U]`` of utilisation (``w`` = tolerance), with
  ``U`` never above the capacity threshold nor above the caller's ceiling (so the broker's
  largest utilisation is never raised), and
* as few bytes as possible move: ``U`` is placed, between the mean ``T`` and ``T + w``, where
  the bytes that must leave dirs above ``U`` equal the bytes that must enter dirs below
  ``U - w``; a dir sheds its excess with the largest replicas that fit in it (then one small
  overshoot), and a dir below the band is topped up with the largest replica that fits its
  deficit. Replicas that arrive on the broker (``cur == -1``) are placed first and for free.

The result is deterministic: every tie goes to the lower index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arrays import F64, I64, BoolA

EPS = 1e-12


@dataclass(frozen=True)
class BrokerDirsProblem:
    capacity: F64
    """Per dir (k)."""
    fixed: F64
    """Per dir: bytes that stay whatever happens (non-replica data)."""
    usable: BoolA
    """Per dir: may receive replicas (live, not cordoned, not being drained)."""
    sizes: I64
    """Per replica (n)."""
    cur: I64
    """Per replica: its dir now (0..k-1), or -1 for a replica to place (arrives on the broker)."""
    movable: BoolA
    """Per replica: balancing may move it (replicas on unusable dirs are always placed)."""


@dataclass(frozen=True)
class DirBalanceParams:
    tolerance: float = 0.04
    threshold: float = 0.8
    ceiling: float | None = None
    """No dir may be pushed above this utilisation (unless the broker's mean already is)."""
    upper: float | None = None
    """Fixed upper bound (targeted mode): dirs above it shed down to it; no band filling."""
    shed: bool = True
    fill: bool = True
    min_move_bytes: int = 0


def _choose_upper(load: F64, cap: F64, pool_bytes: float, t: float, w: float) -> float:
    """The U in [t, t+w] minimising max(bytes out above U, bytes in below U-w net of pool)."""

    def out(u: float) -> float:
        return float(np.maximum(0.0, load - u * cap).sum())

    def inn(u: float) -> float:
        return max(0.0, float(np.maximum(0.0, (u - w) * cap - load).sum()) - pool_bytes)

    lo, hi = t, t + w
    if out(hi) >= inn(hi):
        return hi
    if out(lo) <= inn(lo):
        return lo
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if out(mid) > inn(mid):
            lo = mid
        else:
            hi = mid
    return hi


def balance_broker_dirs(p: BrokerDirsProblem, params: DirBalanceParams) -> I64:
    """The dir of every replica after balancing (same indexing as ``p.cur``).

    The band steps are greedy, and with a few large replicas they can end worse than not
    balancing at all (a dir shed to empty while its big replica, fitting nowhere, went back
    home; an arriving replica taking the dir a shed one had left). So the result is kept only
    if it is no worse — largest utilisation first, then spread — than just placing the
    replicas that must be placed; in targeted mode the fixed upper bound is the goal instead.
    """
    balanced = _balance(p, params)
    if params.upper is not None:
        return balanced
    plain = _place_only(p)
    return plain if _score(p, plain) < _score(p, balanced) else balanced


def _usable(p: BrokerDirsProblem) -> BoolA:
    return p.usable & (p.capacity > 0)


def _score(p: BrokerDirsProblem, dirs: I64) -> tuple[float, float]:
    """(largest, spread) of the usable dirs' utilisation, rounded so that float noise ties."""
    k = int(p.capacity.shape[0])
    on = dirs >= 0
    load = p.fixed.astype(np.float64) + np.bincount(
        dirs[on], weights=p.sizes[on].astype(np.float64), minlength=k
    )
    usable = _usable(p)
    if not usable.any():
        return (0.0, 0.0)
    util = load[usable] / p.capacity[usable]
    return (round(float(util.max()), 9), round(float(util.max() - util.min()), 9))


def _must_place(p: BrokerDirsProblem, usable: BoolA) -> tuple[BoolA, F64]:
    """Replicas that arrive or sit on a dir that may not keep them, and the load of each dir
    from the replicas that stay (plus its fixed bytes)."""
    cur_ok = p.cur >= 0
    place = ~cur_ok
    place[cur_ok] = ~usable[p.cur[cur_ok]]
    stay = ~place
    load = p.fixed.astype(np.float64) + np.bincount(
        p.cur[stay], weights=p.sizes[stay].astype(np.float64), minlength=p.capacity.shape[0]
    )
    return place, load


def _place_only(p: BrokerDirsProblem) -> I64:
    """No balancing: the replicas that must be placed go, largest first, where utilisation
    ends lowest; every other replica stays."""
    new = p.cur.copy()
    usable = _usable(p)
    if not usable.any():
        return new
    place, load = _must_place(p, usable)
    cap = p.capacity.astype(np.float64)
    u_idx = np.flatnonzero(usable)
    pool = np.flatnonzero(place)
    for i in pool[np.lexsort((pool, -p.sizes[pool]))].tolist():
        s = float(p.sizes[i])
        d = int(u_idx[int(np.argmin((load[u_idx] + s) / cap[u_idx]))])
        new[i] = d
        load[d] += s
    return new


def _balance(p: BrokerDirsProblem, params: DirBalanceParams) -> I64:
    """The band steps: shed, place, fill (see the module docstring)."""
    k = int(p.capacity.shape[0])
    n = int(p.sizes.shape[0])
    new = p.cur.copy()
    usable = _usable(p)
    if n == 0 or not usable.any():
        return new
    cap = p.capacity.astype(np.float64)
    sizes_f = p.sizes.astype(np.float64)
    cur_ok = p.cur >= 0
    in_pool, load = _must_place(p, usable)
    stay = ~in_pool
    u_idx = np.flatnonzero(usable)
    ucap = cap[u_idx]
    pool_free = float(sizes_f[in_pool].sum())
    t = (float(load[u_idx].sum()) + pool_free) / float(ucap.sum())
    util = load[u_idx] / ucap
    w = params.tolerance
    before_max = float(util.max())
    balanced = float(util.max() - util.min()) <= w + EPS and before_max <= params.threshold + EPS
    if not in_pool.any() and params.upper is None and balanced:
        return new  # within tolerance: a move would gain too little
    if params.upper is not None:
        upper = max(params.upper, t)
        lower = -np.inf
    else:
        upper = _choose_upper(load[u_idx], ucap, pool_free, t, w)
        upper = max(min(upper, params.threshold), t)
        if params.ceiling is not None:
            upper = min(upper, max(params.ceiling, t))
        lower = upper - w
    # An empty replica changes no dir's bytes: moving it would be a move for nothing.
    can_move = p.movable & (p.sizes >= max(params.min_move_bytes, 1))
    origin = np.full(n, -1, dtype=np.int64)

    # 1. shed: each dir above the band gives its excess, largest replicas that fit first.
    if params.shed:
        for d in u_idx.tolist():
            excess = load[d] - upper * cap[d]
            if excess <= EPS * cap[d]:
                continue
            cand = np.flatnonzero((new == d) & stay & can_move)
            if cand.size == 0:
                continue
            order = cand[np.lexsort((cand, p.sizes[cand]))]  # ascending size, then index
            sz = sizes_f[order]
            taken = np.zeros(order.size, dtype=np.bool_)
            rem = excess
            hi = order.size - 1
            while rem > 0 and hi >= 0:
                j = int(np.searchsorted(sz[: hi + 1], rem, side="right")) - 1
                if j < 0:
                    break
                taken[j] = True
                rem -= sz[j]
                hi = j - 1
            if rem > 0:
                free_idx = np.flatnonzero(~taken)
                if free_idx.size:
                    taken[free_idx[0]] = True  # the smallest that covers the rest
                    rem -= sz[free_idx[0]]
            picked = order[taken]
            origin[picked] = d
            in_pool[picked] = True
            load[d] -= float(sizes_f[picked].sum())
            new[picked] = -1

    # 2. place the pool, largest first, each where utilisation is lowest and it fits under U.
    pool = np.flatnonzero(in_pool)
    if pool.size:
        pool = pool[np.lexsort((pool, -p.sizes[pool]))]
        for i in pool.tolist():
            s = sizes_f[i]
            after = (load[u_idx] + s) / ucap
            fits = after <= upper + EPS
            if fits.any():
                cur_u = load[u_idx] / ucap
                j = int(np.argmin(np.where(fits, cur_u, np.inf)))
                d = int(u_idx[j])
            elif origin[i] >= 0:
                d = int(origin[i])  # put it back: no move
            else:
                d = int(u_idx[int(np.argmin(after))])
            new[i] = d
            load[d] += s

    # 3. fill: dirs still below the band take the largest replica that fits their deficit.
    if params.fill and params.upper is None and params.shed:
        blocked = np.zeros(k, dtype=np.bool_)
        movable_now = can_move | (origin >= 0) | ~cur_ok
        for _ in range(10 * n + k):
            cu = np.where(usable & ~blocked, load / np.where(cap > 0, cap, 1.0), np.inf)
            r = int(np.argmin(cu))
            if not np.isfinite(cu[r]) or load[r] >= lower * cap[r] - EPS * cap[r]:
                break
            need = lower * cap[r] - load[r]
            room = upper * cap[r] - load[r]
            donors = np.flatnonzero(usable & (load > lower * cap + EPS * cap))
            donors = donors[donors != r]
            moved = False
            if donors.size:
                du = load[donors] / cap[donors]
                for d in donors[np.lexsort((donors, -du))].tolist():
                    avail = load[d] - lower * cap[d]
                    limit = min(avail, room)
                    cand = np.flatnonzero((new == d) & movable_now)
                    if cand.size == 0:
                        continue
                    cs = sizes_f[cand]
                    ok = cs <= min(need, limit) + EPS
                    if ok.any():
                        i = int(cand[int(np.argmax(np.where(ok, cs, -1.0)))])
                    else:
                        ok2 = cs <= limit + EPS
                        if not ok2.any():
                            continue
                        i = int(cand[int(np.argmin(np.where(ok2, cs, np.inf)))])
                    new[i] = r
                    load[d] -= sizes_f[i]
                    load[r] += sizes_f[i]
                    moved = True
                    break
            if not moved:
                blocked[r] = True
    return new
