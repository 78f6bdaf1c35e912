"""The inter-broker step: drains, balance of bytes and replica counts across brokers, leaders.

Pure numpy over one cluster's :class:`ClusterArrays`. Every move chooses the destination
broker *and* its directory together (the least utilised one that stays under the ceiling), so
moved data never piles onto one disk (Cruise Control #1590). Hard constraints are checked on
every move: one replica per broker, rack spread kept or improved, no directory above the
capacity threshold, offline and cordoned directories never chosen, dead or removed brokers
never chosen.

The result is a tentative placement; the directory step (:mod:`jbod_spark.dirbalance`) then
evens out the directories of each broker, placing the replicas that arrived for free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jbod_broker import wire

from .arrays import F64, I64, BoolA, ClusterArrays
from .dirbalance import _choose_upper
from .options import Mode, PlanOptions

EPS = 1e-9
TRIES_PER_DIR = 12


@dataclass
class InterResult:
    rep_broker: I64
    rep_dir: I64
    rep_leader: BoolA
    arrived: BoolA
    """Replicas this step put on a new broker (their directory is free to change again)."""
    drain_dir: BoolA
    """Per dir: must end empty (offline, cordoned, named in remove-dirs, removed broker)."""
    balance_broker: BoolA
    """Per broker: run the directory step with shedding and filling (else: place only)."""
    broker_ceiling: F64
    """Per broker: the directory step may not push a dir above this utilisation."""
    broker_upper: F64
    """Per broker: fixed upper bound for the directory step (targeted), NaN when none."""
    band: tuple[float, float]
    """Broker utilisation band aimed at (lower, upper); (nan, nan) when none."""
    notes: list[str] = field(default_factory=list)


def projected_sizes(a: ClusterArrays, opts: PlanOptions) -> I64:
    if opts.horizon_seconds <= 0:
        return a.rep_size
    growth = np.maximum(0.0, a.part_growth[a.rep_part]) * opts.horizon_seconds
    return a.rep_size + np.rint(growth).astype(np.int64)


def resolve_dir_refs(a: ClusterArrays, opts: PlanOptions) -> BoolA:
    named = np.zeros(a.n_dirs, dtype=np.bool_)
    bidx = a.broker_index()
    for ref in opts.log_dirs:
        b = bidx.get(ref.broker_id)
        if b is None:
            raise ValueError(f"remove-dirs: unknown broker {ref.broker_id}")
        hits = [
            d
            for d in range(a.n_dirs)
            if a.dir_broker[d] == b
            and ref.log_dir in (a.dir_name[d], a.dir_path[d], wire.log_dir_folder(a.dir_name[d]))
        ]
        if not hits:
            raise ValueError(f"remove-dirs: broker {ref.broker_id} has no log dir {ref.log_dir!r}")
        named[hits[0]] = True
    return named


def drain_mask(a: ClusterArrays, opts: PlanOptions) -> tuple[BoolA, BoolA]:
    """(dirs that must end empty, brokers being removed). A dead broker's dirs are left alone
    unless the broker is being removed."""
    bidx = a.broker_index()
    removed = np.zeros(a.n_brokers, dtype=np.bool_)
    if opts.mode is Mode.REMOVE_BROKERS:
        for b in opts.brokers:
            if b not in bidx:
                raise ValueError(f"remove-brokers: unknown broker {b}")
            removed[bidx[b]] = True
    db = a.dir_broker
    drain = ~a.dir_live | a.dir_cordoned | removed[db]
    if opts.mode is Mode.REMOVE_DIRS:
        drain |= resolve_dir_refs(a, opts)
    drain &= a.broker_live[db] | removed[db]
    return drain, removed


class _State:
    def __init__(self, a: ClusterArrays, sizes: I64, opts: PlanOptions) -> None:
        self.a = a
        self.opts = opts
        self.size = sizes.astype(np.float64)
        self.rb = a.rep_broker.copy()
        self.rd = a.rep_dir.copy()
        self.leader = a.rep_leader.copy()
        self.moved = np.zeros(a.n_replicas, dtype=np.bool_)
        self.rejected = np.zeros(a.n_replicas, dtype=np.bool_)
        self.start = a.part_start()
        self.n_rack_codes = int(a.broker_rack.max()) + 2 if a.n_brokers else 1
        self.cap = a.dir_capacity.astype(np.float64)
        self.dload = a.dir_other.astype(np.float64) + np.bincount(
            self.rd, weights=self.size, minlength=a.n_dirs
        )
        self.drain, removed = drain_mask(a, opts)
        self.removed = removed
        self.eligible = a.broker_live & ~removed
        db = a.dir_broker
        self.recv_dir = a.dir_live & ~self.drain & self.eligible[db] & (self.cap > 0)
        # drained but readable dirs of brokers that stay: their replicas may stay on the broker
        self.intra_drain = self.drain & a.dir_live & self.eligible[db]
        self.counts_dir = self.recv_dir | self.intra_drain
        self.bcap: F64 = np.bincount(
            db, weights=self.cap * self.recv_dir, minlength=a.n_brokers
        ).astype(np.float64)
        self.bload: F64 = np.bincount(
            db, weights=self.dload * self.counts_dir, minlength=a.n_brokers
        ).astype(np.float64)
        self.dstart = np.searchsorted(db, np.arange(a.n_brokers + 1)).astype(np.int64)
        util = np.where(self.cap > 0, self.dload / np.where(self.cap > 0, self.cap, 1.0), 0.0)
        self.max_before = np.zeros(a.n_brokers)
        np.maximum.at(self.max_before, db[self.recv_dir], util[self.recv_dir])
        self.bmin_dir = np.full(a.n_brokers, -1, dtype=np.int64)
        for b in range(a.n_brokers):
            self._refresh_min(b)
        # per dir: replica indices sorted by (size, index), for candidate search
        order = np.lexsort((np.arange(a.n_replicas), sizes, self.rd))
        self.by_dir = order
        self.by_dir_size = self.size[order]
        self.rstart = np.searchsorted(self.rd[order], np.arange(a.n_dirs + 1)).astype(np.int64)

    # -- helpers -------------------------------------------------------------------------

    def _refresh_min(self, b: int) -> None:
        lo, hi = int(self.dstart[b]), int(self.dstart[b + 1])
        ds = np.arange(lo, hi)
        ds = ds[self.recv_dir[lo:hi]]
        if ds.size == 0:
            self.bmin_dir[b] = -1
            return
        u = self.dload[ds] / self.cap[ds]
        self.bmin_dir[b] = int(ds[int(np.argmin(u))])

    def butil(self) -> F64:
        return np.where(self.bcap > 0, self.bload / np.where(self.bcap > 0, self.bcap, 1.0), np.inf)

    def receivers_for(self, i: int, mask: BoolA, dceil: F64, blimit: F64, only: int = -1) -> int:
        """The least utilised broker that may take replica ``i`` (or -1)."""
        a = self.a
        p = int(a.rep_part[i])
        pb = self.rb[self.start[p] : self.start[p + 1]]
        src = int(self.rb[i])
        s = self.size[i]
        if only >= 0:
            ok = np.zeros(a.n_brokers, dtype=np.bool_)
            ok[only] = mask[only]
        else:
            ok = mask.copy()
        ok[pb] = False
        others = pb[pb != src]
        racks = a.broker_rack
        if others.size and racks[src] not in racks[others]:
            # the racks the partition's other replicas are on (codes from -1: no rack), as a
            # lookup table: np.isin sorted both sides on every call, a second per 40,000 calls
            taken = np.zeros(self.n_rack_codes, dtype=np.bool_)
            taken[racks[others] + 1] = True
            ok &= ~taken[racks + 1]
        ok &= self.bmin_dir >= 0
        ok &= self.bload + s <= blimit + EPS
        md = np.where(self.bmin_dir >= 0, self.bmin_dir, 0)
        ok &= self.dload[md] + s <= dceil * self.cap[md] + EPS
        if not ok.any():
            return -1
        return int(np.argmin(np.where(ok, self.butil(), np.inf)))

    def move(self, i: int, r: int) -> None:
        s = self.size[i]
        src_b, src_d = int(self.rb[i]), int(self.rd[i])
        dst_d = int(self.bmin_dir[r])
        self.rb[i] = r
        self.rd[i] = dst_d
        self.moved[i] = True
        self.dload[src_d] -= s
        self.dload[dst_d] += s
        if self.counts_dir[src_d]:
            self.bload[src_b] -= s
        self.bload[r] += s
        self._refresh_min(src_b)
        self._refresh_min(r)

    def candidates(self, d: int, limit: float, overshoot: bool) -> list[int]:
        """Up to TRIES_PER_DIR replicas of dir ``d``: the largest not above ``limit`` first;
        with ``overshoot``, the smallest above it when none is."""
        lo, hi = int(self.rstart[d]), int(self.rstart[d + 1])
        if lo == hi:
            return []
        sz = self.by_dir_size[lo:hi]
        j = int(np.searchsorted(sz, limit + EPS, side="right")) - 1
        out: list[int] = []
        mm = self.opts.min_move_bytes
        while j >= 0 and len(out) < TRIES_PER_DIR:
            i = int(self.by_dir[lo + j])
            if sz[j] < mm:
                break
            if not self.moved[i] and not self.rejected[i]:
                out.append(i)
            j -= 1
        if not out and overshoot:
            j = int(np.searchsorted(sz, limit + EPS, side="right"))
            while j < hi - lo and len(out) < 2:
                i = int(self.by_dir[lo + j])
                if not self.moved[i] and not self.rejected[i] and sz[j] >= mm:
                    out.append(i)
                j += 1
        return out

    def source_dirs(self, b: int) -> list[int]:
        """A giver's dirs: drained ones first, then by utilisation, highest first."""
        lo, hi = int(self.dstart[b]), int(self.dstart[b + 1])
        ds = np.arange(lo, hi)
        ds = ds[self.counts_dir[lo:hi]]
        if ds.size == 0:
            return []
        u = np.where(self.intra_drain[ds], np.inf, self.dload[ds] / self.cap[ds])
        return [int(x) for x in ds[np.lexsort((ds, -u))]]


def _place_mandatory(st: _State, idx: I64, mask: BoolA, dceil: F64, blimit: F64) -> list[str]:
    """Replicas that must leave their broker, largest first, to the least utilised broker."""
    notes: list[str] = []
    thr_limit = st.opts.capacity_threshold * st.bcap
    thr_ceil = np.full(st.a.n_brokers, st.opts.capacity_threshold)
    for i in idx[np.lexsort((idx, -st.size[idx]))]:
        r = st.receivers_for(int(i), mask, dceil, blimit)
        if r < 0:
            r = st.receivers_for(int(i), mask, thr_ceil, thr_limit)
        if r < 0:
            st.rejected[i] = True
            a = st.a
            p = int(a.rep_part[i])
            notes.append(
                f"{a.part_topic[p]}-{a.part_num[p]} on broker {a.broker_ids[st.rb[i]]}: no broker "
                "can take it within the hard constraints"
            )
            continue
        st.move(int(i), r)
    return notes


def _give(st: _State, excess: F64, mask: BoolA, dceil: F64, blimit: F64) -> None:
    """Brokers above the band give their excess, from their fullest dirs first."""
    ex = excess.copy()
    while True:
        g = int(np.argmax(ex))
        if ex[g] <= EPS * max(1.0, st.bcap[g]):
            return
        done = False
        for d in st.source_dirs(g):
            for i in st.candidates(d, ex[g], overshoot=False):
                r = st.receivers_for(i, mask, dceil, blimit)
                if r < 0:
                    st.rejected[i] = True
                    continue
                ex[g] -= st.size[i]
                st.move(i, r)
                done = True
                break
            if done:
                break
        if not done:
            ex[g] = 0.0


def _take(
    st: _State,
    deficit: F64,
    donors: BoolA,
    floor: F64,
    mask: BoolA,
    dceil: F64,
    blimit: F64,
) -> None:
    """Brokers below the band take the largest replica that fits their deficit from the most
    utilised donors (which stay above ``floor`` bytes)."""
    de = deficit.copy()
    while True:
        r = int(np.argmax(de))
        if de[r] <= EPS * max(1.0, st.bcap[r]):
            return
        done = False
        util = st.butil()
        avail = st.bload - floor
        cand_donors = np.flatnonzero(donors & (avail > 0) & (np.arange(st.a.n_brokers) != r))
        cand_donors = cand_donors[np.lexsort((cand_donors, -util[cand_donors]))]
        for g in cand_donors[:8]:
            limit = min(de[r], avail[g])
            for d in st.source_dirs(int(g)):
                for i in st.candidates(d, limit, overshoot=False):
                    if st.receivers_for(i, mask, dceil, blimit, only=r) != r:
                        continue
                    de[r] -= st.size[i]
                    st.move(i, r)
                    done = True
                    break
                if done:
                    break
            if done:
                break
        if not done:
            de[r] = 0.0


def _balance_counts(st: _State, mask: BoolA, dceil: F64, blimit: F64) -> None:
    a = st.a
    tol = st.opts.count_balance_tolerance
    live_mask = mask.copy()
    if live_mask.sum() < 2:
        return
    counts = np.bincount(st.rb, minlength=a.n_brokers).astype(np.float64)
    mean = counts[live_mask].mean()
    hi, lo = mean * (1 + tol), mean * (1 - tol)
    # per broker: replicas sorted by size (ascending), smallest moved first
    order = np.lexsort((np.arange(a.n_replicas), st.size, st.rb))
    bstart = np.searchsorted(st.rb[order], np.arange(a.n_brokers + 1))
    ptr = bstart[:-1].copy()
    blocked = ~live_mask
    for _ in range(a.n_replicas):
        c = np.where(blocked, -np.inf, counts)
        g = int(np.argmax(c))
        c2 = np.where(live_mask, counts, np.inf)
        r = int(np.argmin(c2))
        if (counts[g] <= hi and counts[r] >= lo) or counts[g] - counts[r] <= 1 or c[g] < 0:
            return
        moved = False
        tries = 0
        j = int(ptr[g])
        while j < bstart[g + 1] and tries < 64:
            i = int(order[j])
            j += 1
            if st.moved[i] or st.rejected[i] or st.rb[i] != g:
                continue
            if not st.counts_dir[st.rd[i]] or st.intra_drain[st.rd[i]]:
                continue
            tries += 1
            if st.receivers_for(i, mask, dceil, blimit, only=r) == r:
                st.move(i, r)
                counts[g] -= 1
                counts[r] += 1
                moved = True
                break
        ptr[g] = j if moved else ptr[g]
        if not moved:
            blocked[g] = True


def balance_leaders(
    a: ClusterArrays,
    rep_broker: I64,
    leader: BoolA,
    allowed: BoolA,
    tol: float,
    targets: BoolA | None = None,
) -> BoolA:
    """Move leadership (the preferred leader: first in the replica list) from brokers above the
    mean to followers on brokers below it (only onto ``targets`` when given). Moves no bytes."""
    leader = leader.copy()
    targets = allowed if targets is None else targets & allowed
    start = a.part_start()
    nb = a.n_brokers
    if allowed.sum() < 2:
        return leader
    lead_b = rep_broker[leader]
    counts = np.bincount(lead_b, minlength=nb).astype(np.float64)
    mean = float(leader.sum()) / float(allowed.sum())
    hi = np.floor(mean * (1 + tol))
    lo = np.ceil(mean * (1 - tol))
    parts_led = np.flatnonzero(leader)
    # leaders on brokers that may not lead (dead, removed) must move
    for i in parts_led.tolist():
        b = int(rep_broker[i])
        if allowed[b]:
            continue
        p = int(a.rep_part[i])
        sl = np.arange(start[p], start[p + 1])
        cand = sl[allowed[rep_broker[sl]]]
        if cand.size == 0:
            continue
        j = int(cand[int(np.argmin(counts[rep_broker[cand]]))])
        leader[i] = False
        leader[j] = True
        counts[b] -= 1
        counts[rep_broker[j]] += 1
    order = np.argsort(rep_broker[leader], kind="stable")
    led = np.flatnonzero(leader)[order]
    lb = rep_broker[led]
    bstart = np.searchsorted(lb, np.arange(nb + 1))
    for g_ in np.argsort(-counts, kind="stable"):
        g = int(g_)
        if not allowed[g]:
            continue
        for i in led[bstart[g] : bstart[g + 1]].tolist():
            if counts[g] <= hi:
                break
            if not leader[i]:
                continue
            p = int(a.rep_part[i])
            sl = np.arange(start[p], start[p + 1])
            sl = sl[sl != i]
            sl = sl[targets[rep_broker[sl]]]
            if sl.size == 0:
                continue
            cb = counts[rep_broker[sl]]
            j = int(sl[int(np.argmin(cb))])
            if counts[rep_broker[j]] + 1 > max(lo, counts[g] - 1):
                continue
            leader[i] = False
            leader[j] = True
            counts[g] -= 1
            counts[rep_broker[j]] += 1
    # brokers still below the floor take leadership from the most loaded follower-partners
    for r_ in np.argsort(counts, kind="stable"):
        r = int(r_)
        if not targets[r] or counts[r] >= lo:
            continue
        mine = np.flatnonzero((rep_broker == r) & ~leader)
        for j in mine.tolist():
            if counts[r] >= lo:
                break
            p = int(a.rep_part[j])
            sl = np.arange(start[p], start[p + 1])
            cur = sl[leader[sl]]
            if cur.size == 0:
                continue
            i = int(cur[0])
            g = int(rep_broker[i])
            if counts[g] - 1 < lo or counts[g] <= counts[r] + 1:
                continue
            leader[i] = False
            leader[j] = True
            counts[g] -= 1
            counts[r] += 1
    return leader


def plan_inter_broker(a: ClusterArrays, opts: PlanOptions, sizes: I64 | None = None) -> InterResult:
    """Drains and cross-broker balance for one cluster (all modes)."""
    sizes = projected_sizes(a, opts) if sizes is None else sizes
    st = _State(a, sizes, opts)
    nb = a.n_brokers
    mode = opts.mode
    thr = opts.capacity_threshold
    w_dir = opts.dir_balance_tolerance
    notes: list[str] = []
    recv_mask = st.eligible & (st.bcap > 0)
    if mode is Mode.ADD_BROKERS:
        bidx = a.broker_index()
        new = np.zeros(nb, dtype=np.bool_)
        for b in opts.brokers:
            if b not in bidx:
                raise ValueError(f"add-brokers: unknown broker {b}")
            new[bidx[b]] = True
        recv_mask &= new
    # the band: brokers' utilisation (movable load / capacity) around the mean
    elig = st.eligible & (st.bcap > 0)
    mandatory_idx = np.flatnonzero(
        st.drain[st.rd] & ~st.intra_drain[st.rd] & (st.removed[st.rb] | a.broker_live[st.rb])
    )
    if mode is Mode.DIRS_ONLY:
        if mandatory_idx.size:
            notes.append(
                f"{mandatory_idx.size} replicas on offline dirs need another broker: "
                "not done in dirs-only mode"
            )
        mandatory_idx = mandatory_idx[:0]
    total_load = float(st.bload[elig].sum()) + float(st.size[mandatory_idx].sum())
    total_cap = float(st.bcap[elig].sum())
    mean = total_load / total_cap if total_cap > 0 else 0.0
    band = (float("nan"), float("nan"))
    ceiling = np.full(nb, thr)
    upper_fixed = np.full(nb, np.nan)
    balance_b = np.zeros(nb, dtype=np.bool_)

    if mode in (Mode.FULL, Mode.ADD_BROKERS):
        wb = opts.broker_balance_tolerance
        u = _choose_upper(
            st.bload[elig], st.bcap[elig], float(st.size[mandatory_idx].sum()), mean, wb
        )
        u = min(u, thr) if mean <= thr else mean
        lo = u - wb
        band = (lo, u)
        fill_ceiling = min(thr, u + w_dir)
        dceil = np.minimum(thr, np.maximum(st.max_before, fill_ceiling))
        if mode is Mode.ADD_BROKERS:
            dceil = np.full(nb, fill_ceiling)
        blimit = u * st.bcap
        notes += _place_mandatory(st, mandatory_idx, recv_mask, dceil, blimit)
        if mode is Mode.FULL:
            excess = np.where(elig, st.bload - min(u, thr) * st.bcap, 0.0)
            _give(st, np.maximum(excess, 0.0), recv_mask, dceil, blimit)
            deficit = np.where(recv_mask, lo * st.bcap - st.bload, 0.0)
            _take(st, np.maximum(deficit, 0.0), elig, lo * st.bcap, recv_mask, dceil, blimit)
            if opts.balance_counts:
                _balance_counts(st, recv_mask, dceil, blimit)
            balance_b = st.eligible.copy()
            ceiling = dceil
        else:
            deficit = np.where(recv_mask, lo * st.bcap - st.bload, 0.0)
            donors = elig & ~recv_mask
            _take(st, np.maximum(deficit, 0.0), donors, lo * st.bcap, recv_mask, dceil, blimit)
            # Replicas cross brokers only onto the new ones, but every broker's disks are
            # balanced (moves within a broker), so a disk added to an old broker fills too and
            # the whole cluster ends inside the band, as the Rebalance reports it.
            balance_b = st.eligible.copy()
            ceiling = np.where(
                recv_mask, dceil, np.minimum(thr, np.maximum(st.max_before, fill_ceiling))
            )
    elif mode is Mode.TARGETED:
        tgt = opts.target_utilisation
        dceil = np.full(nb, min(tgt, thr))
        blimit = min(tgt, thr) * st.bcap
        notes += _place_mandatory(st, mandatory_idx, recv_mask, dceil, blimit)
        excess = np.where(elig, st.bload - min(tgt, thr) * st.bcap, 0.0)
        _give(st, np.maximum(excess, 0.0), recv_mask, dceil, blimit)
        upper_fixed = np.full(nb, min(tgt, thr))
        ceiling = dceil
    elif mode in (Mode.REMOVE_BROKERS, Mode.REMOVE_DIRS):
        dceil = np.full(nb, thr)
        blimit = thr * st.bcap
        notes += _place_mandatory(st, mandatory_idx, recv_mask, dceil, blimit)
        # drained dirs whose broker cannot hold their data under the threshold: ship the rest
        over = np.where(elig, st.bload - thr * st.bcap, 0.0)
        _give(st, np.maximum(over, 0.0), recv_mask, dceil, blimit)
        # What is emptied lands somewhere: the disks of every broker that stays are balanced
        # in the same plan (moves within each broker), so the Rebalance ends inside the band.
        balance_b = st.eligible.copy()
        ceiling = np.minimum(thr, np.maximum(st.max_before, dceil))
    else:  # dirs-only
        balance_b = st.eligible.copy()
        ceiling = st.max_before.copy()
        over = np.where(elig, st.bload - thr * st.bcap, 0.0)
        if (over > 0).any():
            notes.append(
                f"{int((over > 0).sum())} brokers hold more than {thr:.0%} of their capacity: "
                "dirs-only cannot bring them under the threshold"
            )

    leader = st.leader
    if opts.balance_leaders and mode in (Mode.FULL, Mode.REMOVE_BROKERS, Mode.ADD_BROKERS):
        allowed = st.eligible.copy()
        tol = opts.leader_balance_tolerance if mode is not Mode.REMOVE_BROKERS else 10.0
        targets = recv_mask if mode is Mode.ADD_BROKERS else None
        leader = balance_leaders(a, st.rb, leader, allowed, tol, targets)
    return InterResult(
        rep_broker=st.rb,
        rep_dir=st.rd,
        rep_leader=leader,
        arrived=st.rb != a.rep_broker,
        drain_dir=st.drain,
        balance_broker=balance_b,
        broker_ceiling=ceiling.astype(np.float64),
        broker_upper=upper_fixed,
        band=band,
        notes=notes,
    )
