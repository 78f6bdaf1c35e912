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
    replicas that must be placed, and never when it widens the spread past the band while
    no disk is above the threshold; in targeted mode the fixed upper bound is the goal.
    """
    balanced = _balance(p, params)
    if params.upper is not None:
        return balanced
    plain = _place_only(p)
    keep, got = _score(p, plain), _score(p, balanced)
    # Lowering the fullest disk is worth a wider spread only above the threshold: below it a
    # move that leaves the disks further apart than before and outside the band gains
    # nothing (one replica too large to split between two disks of different sizes).
    wider = got[1] > max(keep[1], params.tolerance) + 1e-9
    if wider and keep[0] <= params.threshold + 1e-9:
        return plain
    return plain if keep < got else balanced


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


@dataclass
class _Work:
    """One broker's band steps in progress: the placement and loads they change in place."""

    p: BrokerDirsProblem
    new: I64
    """Each replica's dir (-1 while in the pool)."""
    load: F64
    """Bytes per dir under ``new`` (the pool's excluded)."""
    in_pool: BoolA
    origin: I64
    """The dir a shed replica came from (-1: it was not shed)."""
    can_move: BoolA
    usable: BoolA
    u_idx: I64
    cap: F64
    sizes_f: F64
    upper: float
    lower: float


def _band(
    load: F64, ucap: F64, pool_free: float, t: float, params: DirBalanceParams
) -> tuple[float, float]:
    """The band ``[lower, upper]`` the steps aim every usable dir into."""
    if params.upper is not None:
        return max(params.upper, t), -np.inf
    upper = _choose_upper(load, ucap, pool_free, t, params.tolerance)
    upper = max(min(upper, params.threshold), t)
    if params.ceiling is not None:
        upper = min(upper, max(params.ceiling, t))
    return upper, upper - params.tolerance


def _shed(w: _Work) -> None:
    """1. Each dir above the band gives its excess, largest replicas that fit first."""
    stay = ~w.in_pool
    for d in w.u_idx.tolist():
        excess = w.load[d] - w.upper * w.cap[d]
        if excess <= EPS * w.cap[d]:
            continue
        cand = np.flatnonzero((w.new == d) & stay & w.can_move)
        if cand.size == 0:
            continue
        order = cand[np.lexsort((cand, w.p.sizes[cand]))]  # ascending size, then index
        sz = w.sizes_f[order]
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
        w.origin[picked] = d
        w.in_pool[picked] = True
        w.load[d] -= float(w.sizes_f[picked].sum())
        w.new[picked] = -1


def _place(w: _Work) -> None:
    """2. Place the pool, largest first, each where utilisation is lowest and it fits under
    the band's top; else back where it was shed from (no move), else the least-full dir."""
    pool = np.flatnonzero(w.in_pool)
    if not pool.size:
        return
    ucap = w.cap[w.u_idx]
    pool = pool[np.lexsort((pool, -w.p.sizes[pool]))]
    for i in pool.tolist():
        s = w.sizes_f[i]
        after = (w.load[w.u_idx] + s) / ucap
        fits = after <= w.upper + EPS
        if fits.any():
            cur_u = w.load[w.u_idx] / ucap
            d = int(w.u_idx[int(np.argmin(np.where(fits, cur_u, np.inf)))])
        elif w.origin[i] >= 0:
            d = int(w.origin[i])  # put it back: no move
        else:
            d = int(w.u_idx[int(np.argmin(after))])
        w.new[i] = d
        w.load[d] += s


def _fill_one(w: _Work, r: int, movable_now: BoolA) -> bool:
    """Move into dir ``r`` (below the band) the largest replica of the fullest donor that fits
    its deficit, else the smallest that fits its room; False when no donor has one."""
    cap, load, lower = w.cap, w.load, w.lower
    need = lower * cap[r] - load[r]
    room = w.upper * cap[r] - load[r]
    donors = np.flatnonzero(w.usable & (load > lower * cap + EPS * cap))
    donors = donors[donors != r]
    if not donors.size:
        return False
    du = load[donors] / cap[donors]
    for d in donors[np.lexsort((donors, -du))].tolist():
        limit = min(load[d] - lower * cap[d], room)
        cand = np.flatnonzero((w.new == d) & movable_now)
        if cand.size == 0:
            continue
        cs = w.sizes_f[cand]
        ok = cs <= min(need, limit) + EPS
        if ok.any():
            i = int(cand[int(np.argmax(np.where(ok, cs, -1.0)))])
        else:
            ok2 = cs <= limit + EPS
            if not ok2.any():
                continue
            i = int(cand[int(np.argmin(np.where(ok2, cs, np.inf)))])
        w.new[i] = r
        load[d] -= w.sizes_f[i]
        load[r] += w.sizes_f[i]
        return True
    return False


def _fill(w: _Work) -> None:
    """3. Dirs still below the band take replicas from dirs above its bottom, emptiest first;
    a dir no donor can help is left alone."""
    k, n = int(w.cap.shape[0]), int(w.new.shape[0])
    blocked = np.zeros(k, dtype=np.bool_)
    movable_now = w.can_move | (w.origin >= 0) | ~(w.p.cur >= 0)
    for _ in range(10 * n + k):
        cu = np.where(w.usable & ~blocked, w.load / np.where(w.cap > 0, w.cap, 1.0), np.inf)
        r = int(np.argmin(cu))
        if not np.isfinite(cu[r]) or w.load[r] >= w.lower * w.cap[r] - EPS * w.cap[r]:
            break
        if not _fill_one(w, r, movable_now):
            blocked[r] = True


def _balance(p: BrokerDirsProblem, params: DirBalanceParams) -> I64:
    """The band steps: shed, place, fill (see the module docstring)."""
    n = int(p.sizes.shape[0])
    new = p.cur.copy()
    usable = _usable(p)
    if n == 0 or not usable.any():
        return new
    cap = p.capacity.astype(np.float64)
    sizes_f = p.sizes.astype(np.float64)
    in_pool, load = _must_place(p, usable)
    u_idx = np.flatnonzero(usable)
    ucap = cap[u_idx]
    pool_free = float(sizes_f[in_pool].sum())
    t = (float(load[u_idx].sum()) + pool_free) / float(ucap.sum())
    util = load[u_idx] / ucap
    balanced = (
        float(util.max() - util.min()) <= params.tolerance + EPS
        and float(util.max()) <= params.threshold + EPS
    )
    if not in_pool.any() and params.upper is None and balanced:
        return new  # within tolerance: a move would gain too little
    upper, lower = _band(load[u_idx], ucap, pool_free, t, params)
    # An empty replica changes no dir's bytes: moving it would be a move for nothing.
    can_move = p.movable & (p.sizes >= max(params.min_move_bytes, 1))
    origin = np.full(n, -1, dtype=np.int64)
    w = _Work(p, new, load, in_pool, origin, can_move, usable, u_idx, cap, sizes_f, upper, lower)
    if params.shed:
        _shed(w)
    _place(w)
    if params.fill and params.upper is None and params.shed:
        _fill(w)
    return w.new
