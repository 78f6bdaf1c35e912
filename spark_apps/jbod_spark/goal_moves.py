"""The soft goals worked on one after the other, as Cruise Control does (pure numpy).

Each goal, in priority order, moves replicas (or, for the leader goals, leadership alone)
from brokers above its upper bound to brokers below its lower one. A move is taken only when

* the hard goals hold (:meth:`state.PlacementState.receivers_for`: one replica per broker, racks
  kept, no disk or broker above the ceilings, dead, removed and drained places never chosen,
  and the replica capacity), and
* no goal already worked on ends further from its bounds, on either broker (Cruise Control's
  acceptance rule: a lower goal never undoes a higher one).

A broker that no move can fix is set aside, with the cause counted (a higher goal refused,
the hard goals refused, no replica small enough, the mode's rule), so a goal not met is
reported with why. Each replica moves at most once and each partition's leadership at most
once, so the bytes moved stay near what the goals need and every loop ends.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from jbod_operator.models.goals import GoalName

from .arrays import F64, I64, BoolA
from .goals import (
    BROKER_GOALS,
    LEADER_GOALS,
    GoalRules,
    broker_limits,
    distance,
    one_weight,
    partition_rates,
    replica_weight,
    topic_counts,
    topic_index,
    topic_limits,
    worse,
)
from .state import PlacementState

TRIES = 16
"""Candidate replicas tried per broker per step (largest that fits first)."""
RECEIVERS = 8
"""Receivers tried per candidate (the furthest below their bounds first)."""
TOL = 1e-9
SWAP_PARTNERS = 4
"""Brokers tried as the other side of a swap (the best swap of their candidates is taken)."""
HARD_REFUSED = "the hard goals (racks, one replica per broker, capacity) refused"


@dataclass
class Limits:
    """The hard goals' limits for this mode, as :meth:`PlacementState.receivers_for` takes them."""

    mask: BoolA
    """Brokers that may receive replicas."""
    donors: BoolA
    """Brokers that may give replicas for balance (drains are placed before)."""
    dceil: F64
    blimit: F64
    leader_targets: BoolA
    mode_note: str = ""
    """Why a broker outside ``mask`` cannot be helped (add-brokers: only the new ones)."""


@dataclass
class GoalState:
    """Per-broker figures of every goal, kept up to date as moves are made."""

    st: PlacementState
    rules: GoalRules
    rates: F64
    tidx: I64
    n_topics: int
    vals: dict[GoalName, F64] = field(default_factory=dict)
    lo: dict[GoalName, F64] = field(default_factory=dict)
    hi: dict[GoalName, F64] = field(default_factory=dict)
    tcount: F64 = field(default_factory=lambda: np.zeros((0, 0)))
    tlo: F64 = field(default_factory=lambda: np.zeros(0))
    thi: F64 = field(default_factory=lambda: np.zeros(0))
    causes: dict[GoalName, Counter[str]] = field(default_factory=dict)
    largest: F64 = field(default_factory=lambda: np.zeros(0))
    """Per broker: its largest replica (what bounds how even its disks can be)."""
    maxcap: F64 = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def build(cls, st: PlacementState, rules: GoalRules) -> GoalState:
        a = st.a
        tidx, nt = topic_index(a)
        gs = cls(st, rules, partition_rates(a), tidx, nt)
        elig = st.eligible & (st.bcap > 0)
        for g in BROKER_GOALS:
            # the disk goal's figure is st.bload itself, kept up to date by st.move
            v = st.bload if g is GoalName.DISK_USAGE else gs._figure(g)
            gs.vals[g] = v
            gs.lo[g], gs.hi[g] = broker_limits(g, v, elig, rules, st.bcap)
        gs.largest = np.zeros(a.n_brokers)
        np.maximum.at(gs.largest, st.rb, np.where(st.counts_dir[st.rd], st.size, 0.0))
        gs.maxcap = np.zeros(a.n_brokers)
        np.maximum.at(gs.maxcap, a.dir_broker, np.where(st.recv_dir, st.cap, 0.0))
        gs.tcount = topic_counts(a, st.rb, tidx, nt)
        gs.tlo, gs.thi = topic_limits(a, tidx, nt, elig, rules.thresholds.topic_replica_count)
        return gs

    def _figure(self, g: GoalName) -> F64:
        ws = self.weights(g)
        return np.asarray(
            np.bincount(self.st.rb, weights=ws, minlength=self.st.a.n_brokers), dtype=np.float64
        )

    def weights(self, g: GoalName) -> F64:
        st = self.st
        return replica_weight(g, st.size, st.leader, self.rates[st.a.rep_part])

    def weight(self, g: GoalName, i: int) -> float:
        st = self.st
        rate = float(self.rates[st.a.rep_part[i]])
        return one_weight(g, float(st.size[i]), bool(st.leader[i]), rate)

    # -- acceptance ------------------------------------------------------------------------

    def refusal(self, i: int, src: int, dst: int, higher: list[GoalName]) -> GoalName | None:
        """The first goal in ``higher`` that moving replica ``i`` from ``src`` to ``dst``
        takes further from its bounds, or None."""
        for g in higher:
            if g is GoalName.INTRA_BROKER_DISK_USAGE:
                if self.intraworse(i, src, dst):
                    return g
                continue
            if g is GoalName.TOPIC_REPLICA_DISTRIBUTION:
                k = int(self.tidx[self.st.a.rep_part[i]])
                c, lo, hi = self.tcount[k], float(self.tlo[k]), float(self.thi[k])
                if worse(c[src], c[src] - 1, lo, hi) or worse(c[dst], c[dst] + 1, lo, hi):
                    return g
                continue
            if g not in self.vals:
                continue
            w = self.weight(g, i)
            if w and self._worse_pair(g, src, dst, w):
                return g
        return None

    def _intra_bound(self, b: int, load: float, largest: float) -> float:
        """How far apart ``b``'s disks must be at least (feasibility's bound: the disk holding
        its largest replica against the broker's mean), as a fraction."""
        st = self.st
        if self.maxcap[b] <= 0 or st.bcap[b] <= 0:
            return 0.0
        return float(largest / self.maxcap[b] - load / st.bcap[b])

    def _largest_without(self, i: int, b: int) -> float:
        st = self.st
        if st.size[i] < self.largest[b]:
            return float(self.largest[b])
        on = (st.rb == b) & st.counts_dir[st.rd]
        on[i] = False
        return float(st.size[on].max()) if on.any() else 0.0

    def intraworse(self, i: int, src: int, dst: int) -> bool:
        """Moving ``i`` makes a broker's disks harder to even out beyond the band: a lower goal
        taking small replicas off a broker that holds a giant one would leave its disks
        further apart than any dir step could mend."""
        st = self.st
        band = self.rules.band_pp / 100.0
        s = float(st.size[i])
        for b, load, lg in (
            (src, st.bload[src] - s, self._largest_without(i, src)),
            (dst, st.bload[dst] + s, max(float(self.largest[dst]), s)),
        ):
            old = self._intra_bound(b, float(st.bload[b]), float(self.largest[b]))
            new = self._intra_bound(b, float(load), lg)
            if max(band, new) > max(band, old) + 1e-9:
                return True
        return False

    def _worse_pair(self, g: GoalName, src: int, dst: int, w: float) -> bool:
        v, lo, hi = self.vals[g], self.lo[g], self.hi[g]
        return worse(v[src], v[src] - w, lo[src], hi[src]) or worse(
            v[dst], v[dst] + w, lo[dst], hi[dst]
        )

    def swap_refusal(
        self, i: int, j: int, src: int, dst: int, higher: list[GoalName]
    ) -> GoalName | None:
        """The first goal in ``higher`` that swapping ``i`` (src to dst) with ``j`` (dst to
        src) takes further from its bounds, or None."""
        a = self.st.a
        same_topic = self.tidx[a.rep_part[i]] == self.tidx[a.rep_part[j]]
        for g in higher:
            if g is GoalName.INTRA_BROKER_DISK_USAGE:
                if self.intraworse(i, src, dst) or self.intraworse(j, dst, src):
                    return g
                continue
            if g is GoalName.TOPIC_REPLICA_DISTRIBUTION:
                if not same_topic and (
                    self.refusal(i, src, dst, [g]) or self.refusal(j, dst, src, [g])
                ):
                    return g
                continue
            if g not in self.vals:
                continue
            dw = self.weight(g, i) - self.weight(g, j)
            if dw and self._worse_pair(g, src, dst, dw):
                return g
        return None

    def leader_refusal(self, p: int, src: int, dst: int, higher: list[GoalName]) -> GoalName | None:
        for g in higher:
            if g not in LEADER_GOALS:
                continue
            w = one_weight(g, 0.0, True, float(self.rates[p]))
            if w and self._worse_pair(g, src, dst, w):
                return g
        return None

    # -- moves -----------------------------------------------------------------------------

    def move(self, i: int, dst: int) -> None:
        st = self.st
        src = int(st.rb[i])
        for g in BROKER_GOALS:
            if g is GoalName.DISK_USAGE:
                continue  # st.bload, updated by st.move
            w = self.weight(g, i)
            self.vals[g][src] -= w
            self.vals[g][dst] += w
        k = int(self.tidx[st.a.rep_part[i]])
        self.tcount[k, src] -= 1
        self.tcount[k, dst] += 1
        self.largest[src] = self._largest_without(i, src)
        self.largest[dst] = max(float(self.largest[dst]), float(st.size[i]))
        st.move(i, dst)

    def move_leader(self, i: int, j: int) -> None:
        st = self.st
        p = int(st.a.rep_part[i])
        src, dst = int(st.rb[i]), int(st.rb[j])
        for g in LEADER_GOALS:
            w = one_weight(g, 0.0, True, float(self.rates[p]))
            self.vals[g][src] -= w
            self.vals[g][dst] += w
        st.leader[i] = False
        st.leader[j] = True

    def allowed(self, i: int, lim: Limits) -> BoolA:
        """Per broker: the hard goals allow replica ``i`` onto it."""
        cap = self.rules.thresholds.max_replicas_per_broker
        ok = self.st.allowed(i, lim.mask, lim.dceil, lim.blimit)
        return ok & (self.vals[GoalName.REPLICA_DISTRIBUTION] + 1 <= cap)

    def hard_ok(self, i: int, r: int, lim: Limits) -> bool:
        """The hard goals allow replica ``i`` onto broker ``r``."""
        return bool(self.allowed(i, lim)[r])

    def cause(self, g: GoalName, what: str) -> None:
        self.causes.setdefault(g, Counter())[what] += 1


def _movable(st: PlacementState, i: int, b: int) -> bool:
    return (
        int(st.rb[i]) == b
        and not st.moved[i]
        and not st.rejected[i]
        and bool(st.counts_dir[st.rd[i]])
        and not bool(st.intra_drain[st.rd[i]])
    )


@dataclass
class _ByBroker:
    """Each broker's replicas sorted by weight, largest first; ties go to the smallest bytes,
    then to followers. A partition's replicas are the same size, so without that last key
    the leader (listed first) would always be the one moved: the demo's new broker took 10
    of 27 leaders by moves made for bytes and counts, and add-brokers moves leadership only
    onto the new brokers, so no leader goal could give them back."""

    order: I64
    w: F64
    start: I64

    @classmethod
    def of(cls, gs: GoalState, g: GoalName) -> _ByBroker:
        st = gs.st
        w = gs.weights(g)
        n = st.a.n_replicas
        order = np.lexsort((np.arange(n), st.leader, st.size, -w, st.rb))
        start = np.searchsorted(st.rb[order], np.arange(st.a.n_brokers + 1))
        return cls(order, w[order], start.astype(np.int64))

    def smallest(self, st: PlacementState, b: int) -> list[int]:
        """Up to :data:`TRIES` movable replicas of ``b``, smallest weight first."""
        lo, hi = int(self.start[b]), int(self.start[b + 1])
        out: list[int] = []
        j = hi - 1
        while j >= lo and len(out) < TRIES:
            i = int(self.order[j])
            if _movable(st, i, b):
                out.append(i)
            j -= 1
        return out

    def candidates(self, st: PlacementState, b: int, limit: float) -> list[int]:
        """Up to :data:`TRIES` movable replicas of ``b`` of weight in (0, limit], largest
        first."""
        lo, hi = int(self.start[b]), int(self.start[b + 1])
        seg = -self.w[lo:hi]
        j = lo + int(np.searchsorted(seg, -limit - TOL, side="left"))
        out: list[int] = []
        while j < hi and len(out) < TRIES:
            i = int(self.order[j])
            if self.w[j] > 0 and _movable(st, i, b):
                out.append(i)
            j += 1
        return out


def _place(
    gs: GoalState,
    g: GoalName,
    i: int,
    src: int,
    receivers: list[int],
    lim: Limits,
    higher: list[GoalName],
) -> bool:
    """Move replica ``i`` to the first of ``receivers`` that has room under ``g``'s upper
    bound (per-broker goals), that the hard goals allow and that no higher goal refuses."""
    per_broker = g in gs.vals
    v, hi = (gs.vals[g], gs.hi[g]) if per_broker else (None, None)
    w = gs.weight(g, i) if per_broker else 0.0
    ok = gs.allowed(i, lim)
    hard = [r for r in receivers if not ok[r]]
    if hard:
        gs.cause(g, HARD_REFUSED)
    for r in [r for r in receivers if ok[r]][:RECEIVERS]:
        if v is not None and hi is not None and v[r] + w > hi[r] + TOL * max(1.0, abs(hi[r])):
            gs.cause(g, "no broker below its bounds has room for the replicas left")
            continue
        refused = gs.refusal(i, src, r, higher)
        if refused is not None:
            gs.cause(g, f"{refused} (higher priority) refused")
            continue
        gs.move(i, r)
        return True
    return False


def _hint(gs: GoalState, g: GoalName, r: int, need: float, order: tuple[GoalName, ...]) -> float:
    """The disk goal taking bytes onto ``r`` while a lower replica-count goal also wants ``r``
    to gain replicas: aim at replicas of the size that fills both (few large replicas would
    fill its bytes and leave its count short)."""
    c = GoalName.REPLICA_DISTRIBUTION
    if g is not GoalName.DISK_USAGE or c not in order or order.index(c) < order.index(g):
        return need
    short = float((gs.lo[c][r] + gs.hi[c][r]) / 2.0 - gs.vals[c][r])
    if short <= 1.0:
        return need
    want = float((gs.lo[g][r] + gs.hi[g][r]) / 2.0 - gs.vals[g][r])
    return max(0.0, min(need, want / short))


def balance_broker_goal(
    gs: GoalState, g: GoalName, higher: list[GoalName], lim: Limits, order: tuple[GoalName, ...]
) -> None:
    """Bring every broker's figure of ``g`` within its bounds by replica moves."""
    st = gs.st
    nb = st.a.n_brokers
    v, lo, hi = gs.vals[g], gs.lo[g], gs.hi[g]
    if not np.isfinite(hi).any():
        return
    by = _ByBroker.of(gs, g)
    scale = np.maximum(np.abs(hi), 1.0)
    blocked_give = ~lim.donors.copy()
    blocked_take = ~lim.mask.copy()
    for _ in range(st.a.n_replicas + 2 * nb):
        over = ~blocked_give & (v > hi + TOL * scale)
        if over.any():
            b = int(np.argmax(np.where(over, (v - hi) / scale, -np.inf)))
            if not _give(gs, g, b, by, higher, lim):
                blocked_give[b] = True
            continue
        under = ~blocked_take & (v < lo - TOL * scale)
        if not under.any():
            return
        r = int(np.argmax(np.where(under, (lo - v) / scale, -np.inf)))
        if not _take(gs, g, r, by, higher, lim, order):
            blocked_take[r] = True


def _give(
    gs: GoalState, g: GoalName, b: int, by: _ByBroker, higher: list[GoalName], lim: Limits
) -> bool:
    st = gs.st
    v, lo, hi = gs.vals[g], gs.lo[g], gs.hi[g]
    recv = lim.mask.copy()
    recv[b] = False
    room = np.where(recv, hi - v, -np.inf)
    if not (room > TOL).any():
        gs.cause(g, "no broker that may receive has room below its upper bound")
        return False
    limit = min(float(room.max()), float(v[b] - min(lo[b], hi[b])))
    receivers = [
        int(x)
        for x in np.argsort(np.where(recv, (v - lo) / np.maximum(hi, 1.0), np.inf), kind="stable")
        if recv[x]
    ]
    cands = by.candidates(st, b, limit)
    if any(_place(gs, g, i, b, receivers, lim, higher) for i in cands):
        return True
    if _swap(gs, g, b, receivers, by, higher, lim):
        return True
    if not cands:
        gs.cause(g, "no replica small enough to move without overshooting")
    return False


def _swap(
    gs: GoalState,
    g: GoalName,
    src: int,
    dsts: list[int],
    by: _ByBroker,
    higher: list[GoalName],
    lim: Limits,
) -> bool:
    """Swap a replica of ``src`` for a smaller one of a broker in ``dsts`` when no single
    move fits (Cruise Control's swaps): only where both may receive (never in add-brokers
    mode, where replicas cross only onto the new brokers)."""
    st = gs.st
    if not lim.mask[src]:
        return False
    v, lo, hi = gs.vals[g], gs.lo[g], gs.hi[g]
    mine = by.candidates(st, src, float("inf"))
    best: tuple[float, int, int, int] | None = None
    for r in dsts[:SWAP_PARTNERS]:
        if not lim.donors[r]:
            continue
        base = distance(v[r], lo[r], hi[r]) + distance(v[src], lo[src], hi[src])
        for i in mine:
            for j in by.smallest(st, r):
                dw = gs.weight(g, i) - gs.weight(g, j)
                after = distance(v[r] + dw, lo[r], hi[r]) + distance(v[src] - dw, lo[src], hi[src])
                if dw <= TOL or after >= base - TOL * max(1.0, abs(hi[r])):
                    continue
                if best is not None and after - base >= best[0]:
                    continue
                if not (gs.hard_ok(i, r, lim) and gs.hard_ok(j, src, lim)):
                    continue
                if gs.swap_refusal(i, j, src, r, higher) is not None:
                    continue
                best = (after - base, i, j, r)
    if best is None:
        return False
    _, i, j, r = best
    gs.move(i, r)
    gs.move(j, src)
    return True


def _take(
    gs: GoalState,
    g: GoalName,
    r: int,
    by: _ByBroker,
    higher: list[GoalName],
    lim: Limits,
    order: tuple[GoalName, ...],
) -> bool:
    st = gs.st
    v, lo, hi = gs.vals[g], gs.lo[g], gs.hi[g]
    donors = lim.donors.copy()
    donors[r] = False
    spare = np.where(donors, v - lo, -np.inf)
    # donors in the receiver's rack first: with a replica of every partition in every rack,
    # only they can give it one without narrowing a partition's racks
    racks = st.a.broker_rack
    other_rack = (racks != racks[r]).astype(np.float64)
    by_rack = np.lexsort((np.arange(spare.size), -spare, other_rack))
    cand_donors = [int(x) for x in by_rack if spare[x] > TOL][:RECEIVERS]
    if not cand_donors:
        gs.cause(g, "no broker above its lower bound to take from")
        return False
    need = float(hi[r] - v[r])
    hint = _hint(gs, g, r, need, order)
    for limit in dict.fromkeys((hint, need)):
        for d in cand_donors:
            for i in by.candidates(st, d, min(limit, float(spare[d]))):
                if _place(gs, g, i, d, [r], lim, higher):
                    return True
    gs.cause(g, "no replica of a fuller broker fits its room")
    return False


def balance_topic_goal(gs: GoalState, higher: list[GoalName], lim: Limits) -> None:
    """Each topic's replicas per broker within the topic's bounds, topic by topic."""
    st = gs.st
    a = st.a
    g = GoalName.TOPIC_REPLICA_DISTRIBUTION
    nb = a.n_brokers
    key = gs.tidx[a.rep_part] * nb + st.rb
    order = np.lexsort((np.arange(a.n_replicas), st.leader, st.size, key))
    start = np.searchsorted(key[order], np.arange(gs.n_topics * nb + 1))
    for k in range(gs.n_topics):
        c, lo, hi = gs.tcount[k], float(gs.tlo[k]), float(gs.thi[k])
        out = (lim.donors | lim.mask) & ((c < lo) | (c > hi))
        if not out.any():
            continue
        blocked = np.zeros(nb, dtype=np.bool_)
        for _ in range(int(c.sum()) + 2 * nb):
            over = lim.donors & ~blocked & (c > hi)
            under = lim.mask & ~blocked & (c < lo)
            if over.any():
                b = int(np.argmax(np.where(over, c, -np.inf)))
                recv = [
                    int(x)
                    for x in np.argsort(
                        np.where(lim.mask & (c + 1 <= hi), c, np.inf), kind="stable"
                    )
                    if lim.mask[x] and c[x] + 1 <= hi and x != b
                ]
                donor_list = [b]
            elif under.any():
                r = int(np.argmin(np.where(under, c, np.inf)))
                recv = [r]
                donor_list = [
                    int(x)
                    for x in np.argsort(
                        -np.where(lim.donors & (c - 1 >= lo), c, -np.inf), kind="stable"
                    )[:RECEIVERS]
                    if lim.donors[x] and c[x] - 1 >= lo and x != r
                ]
                b = r
            else:
                break
            if not recv or not donor_list:
                gs.cause(g, "no broker of the topic has room within its bounds")
                blocked[b] = True
                continue
            moved = False
            for d in donor_list:
                seg = order[start[k * nb + d] : start[k * nb + d + 1]]
                tries = 0
                for i in seg.tolist():
                    if tries >= TRIES or moved:
                        break
                    if not _movable(st, i, d):
                        continue
                    tries += 1
                    moved = _place(gs, g, i, d, recv, lim, higher)
                if moved:
                    break
            if not moved:
                blocked[b] = True


def balance_leader_goal(gs: GoalState, g: GoalName, higher: list[GoalName], lim: Limits) -> None:
    """Bring each broker's leaders (or their bytes-in) within bounds by moving leadership to
    a follower (no bytes move), at most once per partition."""
    st = gs.st
    a = st.a
    v, lo, hi = gs.vals[g], gs.lo[g], gs.hi[g]
    if not np.isfinite(hi).any():
        return
    start = a.part_start()
    rates = gs.rates
    done = np.zeros(a.n_parts, dtype=np.bool_)
    nb = a.n_brokers
    allowed = st.eligible
    scale = np.maximum(np.abs(hi), 1.0)
    blocked_give = ~allowed.copy()
    blocked_take = ~lim.leader_targets.copy()

    def w_of(p: int) -> float:
        return 1.0 if g is GoalName.LEADER_REPLICA_DISTRIBUTION else float(rates[p])

    for _ in range(a.n_parts + 2 * nb):
        over = ~blocked_give & (v > hi + TOL * scale)
        under = ~blocked_take & (v < lo - TOL * scale)
        if over.any():
            b = int(np.argmax(np.where(over, (v - hi) / scale, -np.inf)))
            mine = np.flatnonzero(st.leader & (st.rb == b))
            giving = True
        elif under.any():
            b = int(np.argmax(np.where(under, (lo - v) / scale, -np.inf)))
            mine = np.flatnonzero(~st.leader & (st.rb == b))
            giving = False
        else:
            return
        ps = a.rep_part[mine]
        keep = ~done[ps]
        mine, ps = mine[keep], ps[keep]
        ws = np.array([w_of(int(p)) for p in ps]) if ps.size else np.zeros(0)
        moved = False
        for x in np.argsort(-ws, kind="stable")[: TRIES * 4].tolist():
            i, p, w = int(mine[x]), int(ps[x]), float(ws[x])
            sl = np.arange(start[p], start[p + 1])
            if giving:
                if v[b] - w < min(lo[b], hi[b]) - TOL * scale[b] and distance(
                    v[b] - w, lo[b], hi[b]
                ) >= distance(v[b], lo[b], hi[b]):
                    continue
                others = [int(j) for j in sl if j != i and lim.leader_targets[st.rb[j]]]
                others.sort(key=lambda j: v[st.rb[j]] - lo[st.rb[j]])
                pairs = [
                    (i, j)
                    for j in others
                    if v[st.rb[j]] + w <= hi[st.rb[j]] + TOL * scale[st.rb[j]]
                ]
            else:
                cur = [int(j) for j in sl if st.leader[j]]
                if not cur or not allowed[st.rb[cur[0]]] or v[b] + w > hi[b] + TOL * scale[b]:
                    continue
                src = int(st.rb[cur[0]])
                if worse(v[src], v[src] - w, lo[src], hi[src]):
                    continue
                pairs = [(cur[0], i)]
            for li, lj in pairs:
                refused = gs.leader_refusal(p, int(st.rb[li]), int(st.rb[lj]), higher)
                if refused is not None:
                    gs.cause(g, f"{refused} (higher priority) refused")
                    continue
                gs.move_leader(li, lj)
                done[p] = True
                moved = True
                break
            if moved:
                break
        if not moved:
            gs.cause(g, "no partition's leadership can move within the bounds")
            if giving:
                blocked_give[b] = True
            else:
                blocked_take[b] = True


def optimise(st: PlacementState, rules: GoalRules, lim: Limits) -> dict[GoalName, str]:
    """Work on the soft goals of ``rules.order`` in turn; the reason each may end unmet."""
    gs = GoalState.build(st, rules)
    order = rules.order
    done: list[GoalName] = []
    for g in order:
        if g is GoalName.TOPIC_REPLICA_DISTRIBUTION:
            balance_topic_goal(gs, done, lim)
        elif g in LEADER_GOALS:
            # leadership first (no bytes move), then leader replicas themselves where no
            # follower can take over (Cruise Control's order for its leader goals)
            balance_leader_goal(gs, g, done, lim)
            balance_broker_goal(gs, g, done, lim, order)
        elif g in BROKER_GOALS:
            balance_broker_goal(gs, g, done, lim, order)
        elif g is not GoalName.INTRA_BROKER_DISK_USAGE:
            continue  # hard goals hold on every move
        # (the intra-broker goal is the dir step's; the goals after it keep its bound)
        done.append(g)
    return {g: _reason(gs, g, lim) for g in order}


def _reason(gs: GoalState, g: GoalName, lim: Limits) -> str:
    causes = gs.causes.get(g)
    parts = [f"{what} ({n}x)" for what, n in (causes or Counter()).most_common(3)]
    if lim.mode_note:
        parts.append(lim.mode_note)
    return "; ".join(parts) or "the planner found no move that keeps the goals above it"
