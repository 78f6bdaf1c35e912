"""The inter-broker step: drains, relief, then the soft goals across brokers (replicas,
bytes, leaders, topics, network), in the order of :mod:`jbod_spark.goal_moves`.

Pure numpy over one cluster's :class:`ClusterArrays`. Every move chooses the destination
broker *and* its directory together (the least utilised one that stays under the ceiling), so
moved data never piles onto one disk (Cruise Control #1590). Hard constraints are checked on
every move (:class:`jbod_spark.state.PlacementState`).

The result is a tentative placement; the directory step (:mod:`jbod_spark.dirbalance`) then
evens out the directories of each broker, placing the replicas that arrived for free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from jbod_operator.models.goals import GoalName

from .arrays import F64, I64, BoolA, ClusterArrays
from .goal_moves import Limits, optimise
from .goals import GoalRules, broker_bounds, goal_rules
from .options import Mode, PlanOptions
from .state import EPS, PlacementState, drain_mask, resolve_dir_refs

__all__ = [
    "InterResult",
    "balance_leaders",
    "drain_mask",
    "plan_inter_broker",
    "projected_sizes",
    "resolve_dir_refs",
]


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
    goal_reasons: dict[GoalName, str] = field(default_factory=dict)
    """Per soft goal worked on: what stopped it, for the report of a goal not met."""


def projected_sizes(a: ClusterArrays, opts: PlanOptions) -> I64:
    if opts.horizon_seconds <= 0:
        return a.rep_size
    growth = np.maximum(0.0, a.part_growth[a.rep_part]) * opts.horizon_seconds
    return a.rep_size + np.rint(growth).astype(np.int64)


def _place_mandatory(
    st: PlacementState, idx: I64, mask: BoolA, dceil: F64, blimit: F64
) -> list[str]:
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


def _give(st: PlacementState, excess: F64, mask: BoolA, dceil: F64, blimit: F64) -> None:
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


def _new_brokers(a: ClusterArrays, opts: PlanOptions) -> BoolA:
    bidx = a.broker_index()
    new = np.zeros(a.n_brokers, dtype=np.bool_)
    for b in opts.brokers:
        if b not in bidx:
            raise ValueError(f"add-brokers: unknown broker {b}")
        new[bidx[b]] = True
    return new


def _disk_upper(st: PlacementState, elig: BoolA, rules: GoalRules, extra: float) -> float:
    """DiskUsageDistributionGoal's upper bound (a utilisation) once the drained replicas
    (``extra`` bytes) are placed: where the dir step's ceilings are drawn."""
    cap = float(st.bcap[elig].sum())
    mean = (float(st.bload[elig].sum()) + extra) / cap if cap > 0 else 0.0
    one = np.ones(1, dtype=np.bool_)
    return broker_bounds(GoalName.DISK_USAGE, np.array([mean]), one, rules).upper


def _goals(
    st: PlacementState, rules: GoalRules, mask: BoolA, dceil: F64, targets: BoolA, note: str
) -> dict[GoalName, str]:
    """Leaders off brokers that may not lead, then every soft goal in its order."""
    a = st.a
    st.leader = balance_leaders(a, st.rb, st.leader, st.eligible, 10.0, targets)
    lim = Limits(
        mask=mask,
        donors=st.eligible & (st.bcap > 0),
        dceil=dceil,
        blimit=st.opts.capacity_threshold * st.bcap,
        leader_targets=targets,
        mode_note=note,
    )
    return optimise(st, rules, lim)


def plan_inter_broker(a: ClusterArrays, opts: PlanOptions, sizes: I64 | None = None) -> InterResult:
    """Drains, relief and the soft goals across brokers for one cluster (all modes)."""
    sizes = projected_sizes(a, opts) if sizes is None else sizes
    st = PlacementState(a, sizes, opts)
    rules = goal_rules(opts)
    nb = a.n_brokers
    mode = opts.mode
    thr = opts.capacity_threshold
    notes: list[str] = []
    reasons: dict[GoalName, str] = {}
    elig = st.eligible & (st.bcap > 0)
    recv_mask = elig.copy()
    new = _new_brokers(a, opts) if mode is Mode.ADD_BROKERS else recv_mask
    if mode is Mode.ADD_BROKERS:
        recv_mask &= new
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
    band = (float("nan"), float("nan"))
    ceiling = np.full(nb, thr)
    upper_fixed = np.full(nb, np.nan)
    balance_b = st.eligible.copy()

    if mode in (Mode.FULL, Mode.ADD_BROKERS, Mode.REMOVE_BROKERS, Mode.REMOVE_DIRS):
        u = min(thr, _disk_upper(st, elig, rules, float(st.size[mandatory_idx].sum())))
        fill_ceiling = min(thr, u + opts.dir_balance_tolerance)
        dceil = np.minimum(thr, np.maximum(st.max_before, fill_ceiling))
        if mode is Mode.ADD_BROKERS:
            dceil = np.where(recv_mask, fill_ceiling, dceil)
        removing = mode in (Mode.REMOVE_BROKERS, Mode.REMOVE_DIRS)
        notes += _place_mandatory(
            st, mandatory_idx, recv_mask, dceil, (thr if removing else u) * st.bcap
        )
        if removing:
            # drained dirs whose broker cannot hold their data under the threshold
            over = np.where(elig, st.bload - thr * st.bcap, 0.0)
            _give(st, np.maximum(over, 0.0), recv_mask, dceil, thr * st.bcap)
        band = (float("nan"), u)
        note = (
            "add-brokers moves replicas between brokers only onto the new ones"
            if mode is Mode.ADD_BROKERS
            else ""
        )
        targets = recv_mask if mode is Mode.ADD_BROKERS else st.eligible
        reasons = _goals(st, rules, recv_mask, dceil, targets, note)
        # What moved lands somewhere: every broker's disks are balanced in the same plan
        # (moves within a broker), so a disk added to an old broker fills too.
        ceiling = dceil
    elif mode is Mode.TARGETED:
        tgt = opts.target_utilisation
        dceil = np.full(nb, min(tgt, thr))
        blimit = min(tgt, thr) * st.bcap
        notes += _place_mandatory(st, mandatory_idx, recv_mask, dceil, blimit)
        excess = np.where(elig, st.bload - min(tgt, thr) * st.bcap, 0.0)
        _give(st, np.maximum(excess, 0.0), recv_mask, dceil, blimit)
        upper_fixed = np.full(nb, min(tgt, thr))
        ceiling = dceil
        balance_b = np.zeros(nb, dtype=np.bool_)
    else:  # dirs-only
        ceiling = st.max_before.copy()
        over = np.where(elig, st.bload - thr * st.bcap, 0.0)
        if (over > 0).any():
            notes.append(
                f"{int((over > 0).sum())} brokers hold more than {thr:.0%} of their capacity: "
                "dirs-only cannot bring them under the threshold"
            )
    return InterResult(
        rep_broker=st.rb,
        rep_dir=st.rd,
        rep_leader=st.leader,
        arrived=st.rb != a.rep_broker,
        drain_dir=st.drain,
        balance_broker=balance_b,
        broker_ceiling=ceiling.astype(np.float64),
        broker_upper=upper_fixed,
        band=band,
        notes=notes,
        goal_reasons=reasons,
    )
