"""The placement the inter-broker step works on: where each replica is, each dir's and each
broker's load, and the hard goals every move is checked against (pure numpy).

:class:`PlacementState` is shared by the drains and relief steps (:mod:`jbod_spark.interbroker`)
and the soft goals (:mod:`jbod_spark.goal_moves`): one home for the rule of what a broker may
receive (one replica per broker, racks kept, no disk or broker over its ceiling, offline,
cordoned, dead and removed places never chosen).
"""

from __future__ import annotations

import numpy as np

from jbod_broker import wire

from .arrays import F64, I64, BoolA, ClusterArrays
from .options import Mode, PlanOptions

EPS = 1e-9
TRIES_PER_DIR = 12


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


class PlacementState:
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
        ok = self.allowed(i, mask, dceil, blimit, only)
        if not ok.any():
            return -1
        return int(np.argmin(np.where(ok, self.butil(), np.inf)))

    def allowed(self, i: int, mask: BoolA, dceil: F64, blimit: F64, only: int = -1) -> BoolA:
        """Per broker: may take replica ``i`` under the hard goals (``only``: that one alone)."""
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
        return ok

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
