"""The order of a Rebalance's moves (plan/rebalance_order.py): hand-written cases and
hypothesis properties, each checked by walking the waves with a simple simulator written here
(a destination holds the bytes from the wave's start, the source until its end), never with the
module's own internals.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jbod_operator.plan.rebalance_order import (
    Disk,
    DiskRef,
    Move,
    StuckReason,
    WavePlan,
    order_waves,
)
from jbod_spark.options import Mode, PlanOptions
from jbod_spark.planner import plan as make_plan
from jbod_spark.synthetic import synthetic_cluster, to_snapshot

# -- the independent checker ------------------------------------------------------------------


def limit(d: Disk, threshold: float) -> float:
    """What the disk may hold while it receives: the threshold and the broker's headroom."""
    return min(threshold * d.capacity_bytes, d.capacity_bytes - d.headroom_bytes)


def simulate(disks: Sequence[Disk], plan: WavePlan, threshold: float) -> dict[DiskRef, int]:
    """Walk the waves; fail if a receiving disk goes over its limit at any point. Returns what
    each disk holds (used + reserved) after the last wave."""
    by_ref = {d.ref: d for d in disks}
    held = {d.ref: d.used_bytes + d.reserved_bytes for d in disks}
    for n, wave in enumerate(plan.waves):
        assert wave, f"wave {n} is empty"
        coming: Counter[DiskRef] = Counter()
        going: Counter[DiskRef] = Counter()
        for m in wave:
            coming[m.target] += m.size_bytes
            if m.source is not None:  # a new replica leaves no disk
                going[m.source] += m.size_bytes
        for ref, b in coming.items():
            if b > 0:  # mid-wave every incoming byte is there and nothing has left yet
                assert held[ref] + b <= limit(by_ref[ref], threshold), (
                    f"wave {n}: {ref} would hold {held[ref] + b}, "
                    f"over {limit(by_ref[ref], threshold)}"
                )
        for ref in set(coming) | set(going):
            held[ref] += coming[ref] - going[ref]
    return held


def fits_alone(
    disks: Sequence[Disk], held: dict[DiskRef, int], group: Sequence[Move], threshold: float
) -> bool:
    by_ref = {d.ref: d for d in disks}
    coming: Counter[DiskRef] = Counter()
    for m in group:
        coming[m.target] += m.size_bytes
    return all(
        b == 0 or held[ref] + b <= limit(by_ref[ref], threshold) for ref, b in coming.items()
    )


def by_partition(moves: Sequence[Move]) -> dict[tuple[str, int], list[Move]]:
    out: dict[tuple[str, int], list[Move]] = defaultdict(list)
    for m in moves:
        out[(m.topic, m.partition)].append(m)
    return out


def most_schedulable(
    disks: Sequence[Disk], groups: Sequence[Sequence[Move]], threshold: float
) -> int:
    """Brute force: the most partitions any one-at-a-time order runs (every subset reached)."""
    by_ref = {d.ref: d for d in disks}
    start = {d.ref: d.used_bytes + d.reserved_bytes for d in disks}

    def held_after(done: int) -> dict[DiskRef, int]:
        held = dict(start)
        for k, g in enumerate(groups):
            if done >> k & 1:
                for m in g:
                    held[m.target] += m.size_bytes
                    if m.source is not None:
                        held[m.source] -= m.size_bytes
        return held

    seen = {0}
    frontier = [0]
    best = 0
    while frontier:
        done = frontier.pop()
        best = max(best, bin(done).count("1"))
        held = held_after(done)
        for k, g in enumerate(groups):
            if done >> k & 1:
                continue
            coming: Counter[DiskRef] = Counter()
            for m in g:
                coming[m.target] += m.size_bytes
            if all(b == 0 or held[r] + b <= limit(by_ref[r], threshold) for r, b in coming.items()):
                nxt = done | 1 << k
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
    return best


def check(
    disks: Sequence[Disk],
    moves: Sequence[Move],
    plan: WavePlan,
    threshold: float,
    cap: int | None = None,
) -> dict[DiskRef, int]:
    """Every property a plan must have; returns the end state."""
    held = simulate(disks, plan, threshold)
    scheduled = [m for w in plan.waves for m in w]
    stuck = [u.move for u in plan.unscheduled]
    assert Counter(scheduled) + Counter(stuck) == Counter(moves), "each move exactly once"
    wave_of: dict[tuple[str, int], set[int]] = defaultdict(set)
    for n, w in enumerate(plan.waves):
        if cap is not None:
            assert len(w) <= cap
        for m in w:
            wave_of[(m.topic, m.partition)].add(n)
    stuck_keys = {(m.topic, m.partition) for m in stuck}
    for key, waves in wave_of.items():
        assert len(waves) == 1, f"{key} split over waves {waves}"
        assert key not in stuck_keys, f"{key} partly scheduled"
    groups = by_partition(stuck)
    for u in plan.unscheduled:
        assert u.message
        if u.reason is StuckReason.NO_ROOM:
            group = groups[(u.move.topic, u.move.partition)]
            assert not fits_alone(disks, held, group, threshold), f"{u.move} fits at the end"
            assert u.blockers
            for bl in u.blockers:
                d = next(d for d in disks if d.ref == bl.disk)
                assert held[bl.disk] + bl.need_bytes > limit(d, threshold)
    return held


def keys(wave: Sequence[Move]) -> list[tuple[str, int]]:
    return sorted({(m.topic, m.partition) for m in wave})


A, B, C, D = DiskRef(0, "a"), DiskRef(1, "b"), DiskRef(2, "c"), DiskRef(3, "d")


def disk(ref: DiskRef, used: int, capacity: int = 100, **kw: int) -> Disk:
    return Disk(ref.broker_id, ref.log_dir, capacity, used, **kw)


# -- hand-written cases ------------------------------------------------------------------------


def test_swap_of_two_full_disks_through_a_third() -> None:
    """A and B sit at the threshold and swap 30 bytes; a third disk takes 30 off A first, so
    B's replica can come in, then A's can go to B. At once both would go to 110."""
    disks = [disk(A, 80), disk(B, 80), disk(C, 0)]
    moves = [Move("t", 0, A, B, 30), Move("t", 1, B, A, 30), Move("t", 2, A, C, 30)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("t", 2)], [("t", 1)], [("t", 0)]]
    assert not plan.unscheduled and plan.exhaustive
    assert plan.wave_of() == {("t", 2): 1, ("t", 1): 2, ("t", 0): 3}


def test_drain_of_a_disk_to_remove_goes_first() -> None:
    """Broker 0's dir a is removed (90% full): its replicas leave for b, c and broker 1's e
    before the ordinary rebalance move from d, so later waves get the room it frees."""
    a, b, c = DiskRef(0, "a"), DiskRef(0, "b"), DiskRef(0, "c")
    d, e = DiskRef(1, "d"), DiskRef(1, "e")
    disks = [disk(a, 90), disk(b, 20), disk(c, 30), disk(d, 50), disk(e, 10)]
    moves = [
        Move("t", 0, a, b, 30),
        Move("t", 1, a, c, 30),
        Move("t", 2, a, e, 30),
        Move("u", 0, d, e, 20),
    ]
    plan = order_waves(disks, moves, threshold=0.8, max_moves_per_wave=2)
    held = check(disks, moves, plan, 0.8, cap=2)
    assert all(m.source == a for m in plan.waves[0])
    assert [keys(w) for w in plan.waves] == [[("t", 0), ("t", 1)], [("t", 2), ("u", 0)]]
    assert held[a] == 0
    assert not plan.unscheduled


def test_a_chain_runs_from_its_free_end() -> None:
    """A→B→C→D with only D having room: C→D, then B→C, then A→B."""
    disks = [disk(A, 80), disk(B, 80), disk(C, 80), disk(D, 0)]
    moves = [Move("t", 0, A, B, 30), Move("t", 1, B, C, 30), Move("t", 2, C, D, 30)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("t", 2)], [("t", 1)], [("t", 0)]]


def test_a_cycle_with_room_for_one_step_runs_in_one_wave() -> None:
    """A→B while B→A: each disk has room for the other's replica beside its own."""
    disks = [disk(A, 70), disk(B, 70)]
    moves = [Move("t", 0, A, B, 10), Move("t", 1, B, A, 10)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("t", 0), ("t", 1)]]


def test_a_cycle_with_room_for_one_side_runs_in_two_waves() -> None:
    disks = [disk(A, 70), disk(B, 80)]
    moves = [Move("t", 0, A, B, 10), Move("t", 1, B, A, 10)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("t", 1)], [("t", 0)]]


def test_deadlock_is_reported_with_the_disks_and_bytes_that_block() -> None:
    """A and B are full and swap: no order fits. Nothing goes over; both moves are reported,
    each naming the disk, the bytes it needs and the bytes the other stuck move would free;
    an unrelated move still runs."""
    disks = [disk(A, 80), disk(B, 80), disk(C, 10), disk(D, 0)]
    moves = [Move("t", 0, A, B, 30), Move("t", 1, B, A, 30), Move("u", 0, C, D, 10)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("u", 0)]]
    assert plan.exhaustive
    stuck = {(u.move.topic, u.move.partition): u for u in plan.unscheduled}
    assert set(stuck) == {("t", 0), ("t", 1)}
    (blocker,) = stuck[("t", 0)].blockers
    assert (blocker.disk, blocker.need_bytes, blocker.available_bytes) == (B, 30, 0)
    assert blocker.leaving_bytes == 30  # t-1 would free it, but t-1 waits for A
    assert stuck[("t", 0)].reason is StuckReason.NO_ROOM
    assert "broker 1 dir b" in stuck[("t", 0)].message
    assert "no order of the plan" in stuck[("t", 0)].message


def test_a_deadlock_among_many_other_moves_is_still_proven() -> None:
    """The same swap beside 3,000 moves of a crowded cluster: the search over the crowd (which
    may end on its budget) is kept apart from the swap's two disks, so the swap is still
    reported as a true deadlock."""
    disks, moves = random_cluster(random.Random(7), brokers=12, dirs=5, partitions=3000, fill=0.8)
    a, b = DiskRef(900, "a"), DiskRef(901, "b")
    disks += [disk(a, 80), disk(b, 80)]
    moves += [Move("swap", 0, a, b, 30), Move("swap", 1, b, a, 30)]
    plan = order_waves(disks, moves, threshold=0.8, max_moves_per_wave=200)
    check(disks, moves, plan, 0.8, cap=200)
    swap = [u for u in plan.unscheduled if u.move.topic == "swap"]
    assert len(swap) == 2
    assert all("no order of the plan gives it room" in u.message for u in swap)


def test_a_partitions_replicas_stay_in_one_wave() -> None:
    """t-0 moves two replicas: one to x (room now), one to y (room only after y's drain). Both
    go together, in the wave after the drain."""
    a, b, x, y, w = (DiskRef(0, "a"), DiskRef(1, "b"), DiskRef(2, "x"), DiskRef(3, "y"),
                     DiskRef(4, "w"))  # fmt: skip
    disks = [disk(a, 50), disk(b, 50), disk(x, 0), disk(y, 80), disk(w, 0)]
    moves = [Move("t", 0, a, x, 20), Move("t", 0, b, y, 20), Move("u", 0, y, w, 40)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(wv) for wv in plan.waves] == [[("u", 0)], [("t", 0)]]


def test_a_partition_larger_than_a_wave_is_reported_not_split() -> None:
    a, b, x, y = DiskRef(0, "a"), DiskRef(1, "b"), DiskRef(2, "x"), DiskRef(3, "y")
    disks = [disk(a, 50), disk(b, 50), disk(x, 0), disk(y, 0)]
    moves = [Move("t", 0, a, x, 20), Move("t", 0, b, y, 20), Move("u", 0, a, y, 5)]
    plan = order_waves(disks, moves, threshold=0.8, max_moves_per_wave=1)
    check(disks, moves, plan, 0.8, cap=1)
    assert [keys(wv) for wv in plan.waves] == [[("u", 0)]]
    assert {u.reason for u in plan.unscheduled} == {StuckReason.TOO_MANY_MOVES}
    assert len(plan.unscheduled) == 2


def test_a_disk_above_the_threshold_only_goes_down() -> None:
    """A starts at 90% (threshold 80%): it receives nothing until its drain brought it to 70;
    then 10 more fit, 15 more never would. A replica of 0 bytes may go to it at once."""
    disks = [disk(A, 90), disk(B, 0), disk(C, 50), disk(D, 50)]
    moves = [
        Move("t", 0, A, B, 20),
        Move("t", 1, C, A, 10),
        Move("t", 2, D, A, 15),
        Move("t", 3, D, A, 0),
    ]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("t", 0), ("t", 3)], [("t", 1)]]
    (stuck,) = plan.unscheduled
    assert stuck.move.partition == 2 and stuck.reason is StuckReason.NO_ROOM
    assert stuck.blockers[0].disk == A and stuck.blockers[0].available_bytes == 0


def test_moves_of_other_resources_and_the_brokers_headroom_count() -> None:
    """B has 40 bytes reserved by a LogDirMove in flight: 30 more would pass 80; C's broker
    keeps 30 bytes free, so C takes 30 (to 70), not 40."""
    disks = [disk(A, 60), disk(B, 20, reserved_bytes=40), disk(C, 40, headroom_bytes=30)]
    moves = [Move("t", 0, A, B, 30), Move("t", 1, A, C, 30)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("t", 1)]]
    (stuck,) = plan.unscheduled
    assert stuck.move.partition == 0 and stuck.blockers[0].available_bytes == 20
    assert "40 reserved" in stuck.message
    tight = [disk(A, 60), disk(C, 41, headroom_bytes=30)]
    assert order_waves(tight, moves[1:], threshold=0.8).unscheduled


def test_at_a_contended_disk_a_move_freeing_contended_room_goes_first() -> None:
    """D has room for one of two 6-byte replicas: u (from E, nothing waits on E) or y (from
    H, which x waits for; x frees G, which w needs to leave D). Taking u first strands the
    cycle D→G→H→D; the order must take y first. Every disk is at 100% except D."""
    d, e, g, h, k = (DiskRef(0, "d"), DiskRef(1, "e"), DiskRef(2, "g"), DiskRef(3, "h"),
                     DiskRef(4, "k"))  # fmt: skip
    disks = [
        disk(d, 6, capacity=12),
        disk(e, 6, capacity=6),
        disk(g, 6, capacity=6),
        disk(h, 6, capacity=6),
        disk(k, 0, capacity=6),
    ]
    moves = [
        Move("a-u", 0, e, d, 6),  # sorts first by name: a plain greedy takes it first
        Move("w", 0, d, g, 6),
        Move("x", 0, g, h, 6),
        Move("y", 0, h, d, 6),
        Move("z", 0, e, k, 0),
    ]
    plan = order_waves(disks, moves, threshold=1.0)
    check(disks, moves, plan, 1.0)
    assert not plan.unscheduled
    assert most_schedulable(disks, list(by_partition(moves).values()), 1.0) == 5


def test_a_choice_that_strands_the_rest_is_undone() -> None:
    """Y has room for 8 bytes; X (above its threshold) sends it 1 and 8 and gets 1 back once
    it is at 7 or less. Taking the small one first (the usual preference) leaves X at 8 and
    Y without room for the big one: 1 move of 3. The search goes back on that choice: the big
    one, then the one back to X, then the small one."""
    x, y = DiskRef(0, "x"), DiskRef(0, "y")
    disks = [Disk(0, "x", 10, 9), Disk(0, "y", 100, 72)]
    moves = [Move("small", 0, x, y, 1), Move("big", 0, x, y, 8), Move("back", 0, y, x, 1)]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("big", 0)], [("back", 0)], [("small", 0)]]


def test_a_move_that_fits_now_waits_when_taking_the_room_now_strands_an_earlier_one() -> None:
    """D (110 bytes, threshold 100%) holds 55: k (1 byte) leaves it for E, j (56) comes from
    A, m (1) leaves D for A once j left A, v (1) comes from B. The order k, j, m, v fits; v
    also fits D at once beside k, but then D sits at 55 and j never fits. So v waits."""
    a, b, d, e = DiskRef(0, "a"), DiskRef(1, "b"), DiskRef(2, "d"), DiskRef(3, "e")
    disks = [Disk(0, "a", 56, 56), Disk(1, "b", 10, 1), Disk(2, "d", 110, 55), Disk(3, "e", 10, 0)]
    moves = [
        Move("k", 0, d, e, 1),
        Move("j", 0, a, d, 56),
        Move("m", 0, d, a, 1),
        Move("v", 0, b, d, 1),
    ]
    plan = order_waves(disks, moves, threshold=1.0)
    check(disks, moves, plan, 1.0)
    assert [keys(w) for w in plan.waves] == [[("k", 0)], [("j", 0)], [("m", 0)], [("v", 0)]]


def test_a_new_replica_counts_at_its_target_only() -> None:
    """The replication factor grows: t-0 gets a third replica on C (no disk loses it) and
    moves one from A to B. C has room for 30 once u-0 left it; B has room at once."""
    disks = [disk(A, 50), disk(B, 0), disk(C, 70), disk(D, 0)]
    moves = [Move("t", 0, None, C, 30), Move("t", 0, A, B, 30), Move("u", 0, C, D, 20)]
    plan = order_waves(disks, moves, threshold=0.8)
    held = check(disks, moves, plan, 0.8)
    assert [keys(w) for w in plan.waves] == [[("u", 0)], [("t", 0)]]
    assert held == {A: 20, B: 30, C: 80, D: 20}
    assert not Move("t", 0, None, C, 1).intra_broker and Move("t", 0, C, C, 1).intra_broker


def test_invalid_moves_are_reported_and_bad_arguments_refused() -> None:
    disks = [disk(A, 0), disk(B, 0)]
    moves = [
        Move("t", 0, A, DiskRef(1, "nope"), 1),
        Move("t", 1, A, A, 1),
        Move("t", 2, A, B, 1),
        Move("t", 2, A, DiskRef(1, "b"), 2),  # the same replica twice
        Move("t", 3, A, B, 1),
        Move("t", 4, None, B, 1),
        Move("t", 4, None, B, 2),  # two new replicas on one broker
    ]
    plan = order_waves(disks, moves, threshold=0.8)
    check(disks, moves, plan, 0.8)
    reasons = {(u.move.partition, u.reason) for u in plan.unscheduled}
    assert reasons == {
        (0, StuckReason.UNKNOWN_DISK),
        (1, StuckReason.SAME_DISK),
        (2, StuckReason.CONFLICTING_MOVES),
        (4, StuckReason.CONFLICTING_MOVES),
    }
    assert [keys(w) for w in plan.waves] == [[("t", 3)]]
    for bad in (0, 80, -0.1, math.nan):
        with pytest.raises(ValueError, match="threshold"):
            order_waves(disks, [], threshold=bad)
    with pytest.raises(ValueError, match="max_moves_per_wave"):
        order_waves(disks, [], threshold=0.8, max_moves_per_wave=0)
    with pytest.raises(ValueError, match="twice"):
        order_waves([disk(A, 0), disk(A, 1)], [], threshold=0.8)
    with pytest.raises(ValueError):
        Move("t", 0, A, B, -1)
    with pytest.raises(ValueError):
        Disk(0, "a", 10, -1)


def test_a_large_plan_keeps_every_rule() -> None:
    """A few thousand moves over 60 disks (no clock: the rules, not the time)."""
    rng = random.Random(16)
    disks, moves = random_cluster(rng, brokers=12, dirs=5, partitions=3000, fill=0.65)
    plan = order_waves(disks, moves, threshold=0.8, max_moves_per_wave=200)
    check(disks, moves, plan, 0.8, cap=200)
    assert len(plan.scheduled) > len(moves) * 0.9


@pytest.mark.parametrize(("seed", "mode"), [(1, Mode.FULL), (2, Mode.DIRS_ONLY), (3, Mode.FULL)])
def test_the_planners_plans_run_whole_under_the_threshold(seed: int, mode: Mode) -> None:
    """What the Rebalance will order: the planner's plans for skewed synthetic clusters (dirs
    named by path, as in its reassignment JSON), in waves of at most 25 moves."""
    snap = to_snapshot(synthetic_cluster(seed, 8, 4, 2400))
    planned = make_plan(snap, PlanOptions(mode=mode, capacity_threshold=0.8))
    disks = [Disk(d.broker_id, d.path, d.capacity_bytes, d.used_bytes) for d in snap.log_dirs]
    moves = [
        Move(
            m.topic,
            m.partition,
            DiskRef(m.from_broker, m.from_dir),
            DiskRef(m.to_broker, m.to_dir),
            m.size_bytes,
        )
        for m in planned.moves
    ]
    assert len(moves) > 50
    plan = order_waves(disks, moves, threshold=0.8, max_moves_per_wave=25)
    check(disks, moves, plan, 0.8, cap=25)
    assert not plan.unscheduled


# -- properties --------------------------------------------------------------------------------


def random_cluster(
    rng: random.Random, *, brokers: int, dirs: int, partitions: int, fill: float
) -> tuple[list[Disk], list[Move]]:
    """Replicas placed at random, then a plan moving some of them (inter- and intra-broker)."""
    refs = [DiskRef(b, f"d{k}") for b in range(brokers) for k in range(dirs)]
    held: Counter[DiskRef] = Counter()
    moves: list[Move] = []
    for p in range(partitions):
        rf = rng.randint(1, min(3, brokers))
        owners = rng.sample(range(brokers), rf)
        size = rng.randint(0, 60)
        where = {b: DiskRef(b, f"d{rng.randrange(dirs)}") for b in owners}
        for r in where.values():
            held[r] += size
        targets: set[int] = set()
        for b, src in where.items():
            if rng.random() < 0.5:
                continue
            free = [x for x in range(brokers) if x not in where and x not in targets]
            if free and rng.random() < 0.6:
                tb = rng.choice(free)
                targets.add(tb)
                dst = DiskRef(tb, f"d{rng.randrange(dirs)}")
            elif dirs > 1:
                dst = rng.choice([r for r in refs if r.broker_id == b and r != src])
            else:
                continue
            moves.append(Move(f"t{p % 7}", p, src, dst, size))
    # each disk filled to between a third and ``fill`` of its capacity
    disks = [
        Disk(r.broker_id, r.log_dir, int(held[r] / rng.uniform(0.33, fill)) + 50, held[r])
        for r in refs
    ]
    return disks, moves


@st.composite
def clusters(draw: st.DrawFn, max_partitions: int = 7) -> tuple[list[Disk], list[Move], float]:
    """Replicas on 1-4 brokers of 1-3 dirs, a plan moving some of them, and disks sized around
    what they hold (some above the threshold, some with little room) so the order matters."""
    brokers = draw(st.integers(1, 4))
    dirs = draw(st.integers(1, 3))
    refs = [DiskRef(b, f"d{k}") for b in range(brokers) for k in range(dirs)]
    held: Counter[DiskRef] = Counter()
    moves: list[Move] = []
    for p in range(draw(st.integers(0, max_partitions))):
        rf = draw(st.integers(1, min(3, brokers)))
        owners = draw(st.permutations(range(brokers)))[:rf]
        size = draw(st.integers(0, 80))
        where = {b: refs[b * dirs + draw(st.integers(0, dirs - 1))] for b in owners}
        for r in where.values():
            held[r] += size
        targets: set[int] = set()
        free = [x for x in range(brokers) if x not in where]
        if free and draw(st.integers(0, 5)) == 0:  # the replication factor grows
            tb = draw(st.sampled_from(free))
            targets.add(tb)
            dst = refs[tb * dirs + draw(st.integers(0, dirs - 1))]
            moves.append(Move(draw(st.sampled_from(["a", "b"])), p, None, dst, size))
        for b, src in where.items():
            kind = draw(st.sampled_from(["stay", "inter", "intra"]))
            free = [x for x in range(brokers) if x not in where and x not in targets]
            if kind == "inter" and free:
                tb = draw(st.sampled_from(free))
                targets.add(tb)
                dst = refs[tb * dirs + draw(st.integers(0, dirs - 1))]
            elif kind == "intra" and dirs > 1:
                dst = draw(st.sampled_from([r for r in refs if r.broker_id == b and r != src]))
            else:
                continue
            moves.append(Move(draw(st.sampled_from(["a", "b"])), p, src, dst, size))
    threshold = draw(st.sampled_from([0.5, 0.7, 0.8, 0.85, 0.9, 1.0]))
    disks = []
    for r in refs:
        used = held[r] + draw(st.integers(0, 30))
        room = draw(st.integers(-20, 120))  # below (or above) the threshold
        disks.append(
            Disk(
                r.broker_id,
                r.log_dir,
                max(math.ceil((used + room) / threshold), used, 1),
                used,
                reserved_bytes=draw(st.sampled_from([0, 0, 0, 10, 40])),
                headroom_bytes=draw(st.sampled_from([0, 0, 0, 5, 30])),
            )
        )
    return disks, moves, threshold


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([None, None, 1, 2, 3, 5]), st.randoms(use_true_random=False))
def test_properties_over_random_clusters_and_plans(
    case: tuple[list[Disk], list[Move], float], cap: int | None, rng: random.Random
) -> None:
    """No disk over its limit at any point; each move once, scheduled or reported; partitions
    never split; waves non-empty and within the cap; a stuck partition does not fit at the
    end; as many partitions scheduled as any one-at-a-time order manages (brute force); the
    same plan whatever the input order."""
    disks, moves, threshold = case
    plan = order_waves(disks, moves, threshold=threshold, max_moves_per_wave=cap)
    check(disks, moves, plan, threshold, cap)
    assert plan.exhaustive
    valid = {
        (u.move.topic, u.move.partition)
        for u in plan.unscheduled
        if u.reason is not StuckReason.NO_ROOM
    }
    groups = [g for k, g in by_partition(moves).items() if k not in valid]
    scheduled = {(m.topic, m.partition) for m in plan.scheduled}
    assert len(scheduled) == most_schedulable(disks, groups, threshold)
    shuffled_moves, shuffled_disks = list(moves), list(disks)
    rng.shuffle(shuffled_moves)
    rng.shuffle(shuffled_disks)
    again = order_waves(shuffled_disks, shuffled_moves, threshold=threshold, max_moves_per_wave=cap)
    assert again == plan


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from([None, 4, 25]))
def test_properties_over_larger_plans(seed: int, cap: int | None) -> None:
    """Hundreds of moves, disks filled up to near the threshold: the rules still hold."""
    rng = random.Random(seed)
    disks, moves = random_cluster(
        rng, brokers=rng.randint(2, 6), dirs=rng.randint(1, 4), partitions=200, fill=0.8
    )
    threshold = rng.choice([0.7, 0.8, 0.9])
    plan = order_waves(disks, moves, threshold=threshold, max_moves_per_wave=cap)
    check(disks, moves, plan, threshold, cap)
