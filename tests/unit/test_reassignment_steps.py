"""KIP-435's step planner and batch collector (plan/reassignment_steps.py), case by case.

The seed's example step by step, the min-ISR first step, what waits and why, the leader
rules, RF changes, cancel and rollback, and batch collection under each limit.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from jbod_operator.plan.election import NO_LEADER
from jbod_operator.plan.reassignment_steps import (
    Batch,
    Limits,
    PartitionMove,
    PlannedStep,
    Step,
    Waiting,
    WaitReason,
    cancel_step,
    collect_batch,
    max_steps,
    next_step,
    plan_all,
    rollback_target,
)

WIDE = Limits(
    replica_movements=1, partition_movements=100, leader_movements=100, moves_per_broker=64
)


def walk(
    current: tuple[int, ...],
    target: tuple[int, ...],
    *,
    r: int,
    min_isr: int = 1,
    leader: int | None = None,
) -> list[Step]:
    """Every step to the target, each new replica assumed in sync and each election done."""
    steps: list[Step] = []
    lead = current[0] if leader is None else leader
    while True:
        s = next_step(current, target, min_isr=min_isr, replica_movements=r, leader=lead)
        assert not isinstance(s, Waiting)
        if s is None:
            return steps
        steps.append(s)
        current = s.replicas
        if s.leader_to_elect is not None:
            lead = s.leader_to_elect
        assert len(steps) < 100


# -- the seed's example -------------------------------------------------------------------


@pytest.mark.parametrize("min_isr", [1, 2, 3, 4, 5])
def test_the_seeds_example_step_by_step(min_isr: int) -> None:
    # KIP-435's "Reassignment Example": (0,1,2,3,4) -> (5,6,7,8,9), leader 0, R = 2 (the
    # batches it names are (0,1)(5,6); (2,3)(7,8); 4 9).
    steps = walk((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), r=2, min_isr=min_isr, leader=0)
    assert [s.replicas for s in steps] == [
        (5, 0, 1, 2, 3, 4),  # +5, new leader (5) is elected
        (5, 6, 2, 3, 4),  # -[0,1] +[6]
        (5, 6, 7, 8, 4),  # -[2,3] +[7,8]
        (5, 6, 7, 8, 9),  # -[4] +[9], requested order is matched, reassignment finished
    ]
    assert [(s.adding, s.removing) for s in steps] == [
        ((5,), ()),
        ((6,), (0, 1)),
        ((7, 8), (2, 3)),
        ((9,), (4,)),
    ]
    assert [s.leader_to_elect for s in steps] == [5, None, None, None]
    assert [s.involves_leader_movement for s in steps] == [True, False, False, False]
    assert [s.is_last for s in steps] == [False, False, False, True]
    assert steps[0].during == (5, 0, 1, 2, 3, 4)
    assert steps[1].during == (5, 6, 2, 3, 4, 0, 1)
    assert len(steps) <= max_steps((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), 2) == 4


def test_the_seeds_example_as_a_plan_of_batches() -> None:
    limits = Limits(
        replica_movements=2, partition_movements=1, leader_movements=1, moves_per_broker=5
    )
    batches = plan_all(
        [PartitionMove("t", 0, (0, 1, 2, 3, 4), (5, 6, 7, 8, 9), leader=0)], limits, min_isr=2
    )
    assert [b.steps[0].step.replicas for b in batches] == [
        (5, 0, 1, 2, 3, 4),
        (5, 6, 2, 3, 4),
        (5, 6, 7, 8, 4),
        (5, 6, 7, 8, 9),
    ]
    assert [b.leader_movements for b in batches] == [1, 0, 0, 0]
    assert batches[1].moves_per_broker == {6: 1, 0: 1, 1: 1}


def test_the_example_with_one_replica_at_a_time() -> None:
    steps = walk((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), r=1, leader=0)
    assert [s.replicas for s in steps] == [
        (5, 0, 1, 2, 3, 4),
        (5, 1, 2, 3, 4),  # the leader step's removal comes due: -[0], nothing added
        (5, 6, 2, 3, 4),
        (5, 6, 7, 3, 4),
        (5, 6, 7, 8, 4),
        (5, 6, 7, 8, 9),
    ]
    assert len(steps) == max_steps((0, 1, 2, 3, 4), (5, 6, 7, 8, 9), 1)


# -- the min-ISR rule -----------------------------------------------------------------------


def test_min_isr_first_step_adds_two_at_once_on_four_brokers() -> None:
    # KIP-435: 4 brokers, min.insync.replicas 3, one in-sync replica: add 2 in one step, past
    # R = 1, so producers with acks=all can continue.
    s = next_step((0,), (0, 1, 2), min_isr=3, replica_movements=1)
    assert isinstance(s, Step)
    assert s.adding == (1, 2) and s.removing == () and s.replicas == (0, 1, 2) and s.is_last
    # With min ISR 2, R holds: one at a time.
    s2 = next_step((0,), (0, 1, 2), min_isr=2, replica_movements=1)
    assert isinstance(s2, Step) and s2.adding == (1,)


def test_min_isr_first_step_with_a_new_preferred_leader() -> None:
    steps = walk((0,), (1, 2, 3), r=1, min_isr=3)
    assert [(s.adding, s.removing, s.replicas) for s in steps] == [
        ((1, 2), (), (1, 2, 0)),  # the new leader and one more: three replicas at once
        ((3,), (0,), (1, 2, 3)),
    ]
    assert steps[0].leader_to_elect == 1


def test_min_isr_counts_the_isr_not_the_replicas() -> None:
    # Two replicas, only 0 in sync: replacing 1 by 2 alone leaves 2 in sync after the step;
    # min ISR 3 needs 3 as well, at once.
    s = next_step((0, 1), (0, 2, 3), min_isr=3, replica_movements=1, isr=(0,))
    assert isinstance(s, Step)
    assert (s.adding, s.removing, s.replicas) == ((2, 3), (1,), (0, 2, 3))
    # Both in sync, min ISR 2: R holds.
    s2 = next_step((0, 1), (0, 2, 3), min_isr=2, replica_movements=1)
    assert isinstance(s2, Step) and (s2.adding, s2.removing) == ((2,), (1,))


def test_an_in_sync_replica_is_kept_when_no_target_can_replace_it() -> None:
    # RF 4 -> 2, in sync: 0 and 2; broker 4 (the only new target) is down. Dropping 1 and 2
    # would leave one in-sync replica under min ISR 2: 2 stays, 1 (lagging) goes.
    s = next_step(
        (0, 1, 2, 3), (0, 4), min_isr=2, replica_movements=2, isr=(0, 2), live={0, 1, 2, 3}
    )
    assert isinstance(s, Step)
    assert s.removing == (1,) and s.adding == () and s.replicas == (0, 2, 3)


# -- waiting (KIP-435 step 2) ----------------------------------------------------------------


def test_a_target_broker_not_live_makes_the_step_wait() -> None:
    w = next_step((0, 1, 2), (0, 1, 5), min_isr=2, replica_movements=1, live={0, 1, 2, 3})
    assert w == Waiting(WaitReason.TARGET_BROKERS_NOT_LIVE, (5,))
    assert "5" in w.message
    # When it is back, the step starts.
    s = next_step((0, 1, 2), (0, 1, 5), min_isr=2, replica_movements=1, live={0, 1, 2, 5})
    assert isinstance(s, Step) and s.adding == (5,) and s.removing == (2,)


def test_a_live_target_still_moves_while_another_is_down() -> None:
    s = next_step((0, 1, 2), (0, 4, 5), min_isr=1, replica_movements=2, live={0, 1, 2, 5})
    assert isinstance(s, Step)
    # 5 replaces 1; 2 stays until 4 can replace it (never fewer than 3 replicas).
    assert (s.adding, s.removing, s.replicas) == ((5,), (1,), (0, 5, 2))


def test_a_new_preferred_leader_not_live_makes_the_partition_wait() -> None:
    w = next_step((0, 1, 2), (5, 1, 6), min_isr=1, replica_movements=2, live={0, 1, 2, 6})
    assert w == Waiting(WaitReason.TARGET_BROKERS_NOT_LIVE, (5,))


def test_an_offline_partition_waits() -> None:
    w = next_step((0, 1, 2), (3, 4, 5), min_isr=1, replica_movements=1, isr=(0,), live={1, 2, 3})
    assert isinstance(w, Waiting) and w.reason is WaitReason.NO_LIVE_IN_SYNC_REPLICA
    assert w.brokers == (0, 1, 2) and "offline" in w.message


def test_the_last_in_sync_replica_stays_until_the_target_catches_up() -> None:
    # RF 2 -> 1 keeping 0, which lags; 1 leads and is the only one in sync. Removing 1 now
    # would leave no in-sync replica (KAFKA-19975 is the opposite mistake: waiting for an
    # unchanged replica that nothing depends on).
    w = next_step((0, 1), (0,), min_isr=1, replica_movements=1, leader=1, isr=(1,))
    assert w == Waiting(WaitReason.TARGET_REPLICAS_NOT_IN_SYNC, (0,))
    assert "in sync" in w.message
    s = next_step((0, 1), (0,), min_isr=1, replica_movements=1, leader=1, isr=(0, 1))
    assert isinstance(s, Step) and s.removing == (1,) and s.leader_to_elect == 0


def test_a_target_replica_down_blocks_the_removal_of_the_last_live_one() -> None:
    w = next_step((1, 0), (1,), min_isr=1, replica_movements=1, live={0})
    assert w == Waiting(WaitReason.TARGET_BROKERS_NOT_LIVE, (1,))


def test_a_shrink_needs_no_live_target() -> None:
    s = next_step((0, 1, 2), (0, 1), min_isr=1, replica_movements=1, live={0, 1})
    assert isinstance(s, Step) and s.removing == (2,) and s.replicas == (0, 1) and s.is_last


# -- leaders and order ------------------------------------------------------------------------


def test_a_reorder_alone_is_one_last_step_electing_the_new_preferred_leader() -> None:
    s = next_step((0, 1, 2), (1, 0, 2), min_isr=2, replica_movements=1)
    assert s == Step(adding=(), removing=(), replicas=(1, 0, 2), leader_to_elect=1, is_last=True)
    assert s.involves_leader_movement and s.brokers_charged == ()


def test_at_target_only_the_preferred_leader_may_remain_to_elect() -> None:
    assert next_step((0, 1, 2), (0, 1, 2), min_isr=2, replica_movements=1) is None
    s = next_step((0, 1, 2), (0, 1, 2), min_isr=2, replica_movements=1, leader=2)
    assert s == Step(adding=(), removing=(), replicas=(0, 1, 2), leader_to_elect=0, is_last=True)
    offline = next_step((0, 1, 2), (0, 1, 2), min_isr=2, replica_movements=1, leader=NO_LEADER)
    assert isinstance(offline, Step) and offline.leader_to_elect == 0


def test_a_removed_leader_hands_over_to_the_target_preferred_leader_in_the_same_step() -> None:
    s = next_step((0, 1, 2), (1, 2, 3), min_isr=2, replica_movements=1)
    assert isinstance(s, Step)
    assert (s.adding, s.removing, s.replicas, s.leader_to_elect) == ((3,), (0,), (1, 2, 3), 1)


def test_a_preferred_leader_already_a_replica_is_elected_in_the_first_step() -> None:
    steps = walk((0, 1, 2), (2, 5, 6), r=1)
    assert [s.leader_to_elect for s in steps] == [2, None]
    assert [s.replicas for s in steps] == [(2, 5, 1), (2, 5, 6)]


def test_rf_increase_and_decrease() -> None:
    grow = walk((0, 1), (0, 1, 2, 3), r=1)
    assert [s.replicas for s in grow] == [(0, 1, 2), (0, 1, 2, 3)]
    shrink = walk((0, 1, 2, 3), (0, 1), r=1)
    assert [s.replicas for s in shrink] == [(0, 1, 3), (0, 1)]
    both = walk((0, 1, 2), (0, 3, 4, 5, 6), r=2)
    assert [s.replicas for s in both] == [(0, 3, 4), (0, 3, 4, 5, 6)]
    assert all(len(s.adding) <= 2 and len(s.removing) <= 2 for s in both)


def test_a_limit_changed_between_steps_applies_to_the_next_step() -> None:
    c, t = (0, 1, 2, 3, 4, 5), (0, 6, 7, 8, 9, 10)
    first = next_step(c, t, min_isr=2, replica_movements=1)
    assert isinstance(first, Step) and (first.adding, first.removing) == ((6,), (1,))
    second = next_step(first.replicas, t, min_isr=2, replica_movements=3)
    assert isinstance(second, Step) and (second.adding, second.removing) == ((7, 8, 9), (2, 3, 4))
    third = next_step(second.replicas, t, min_isr=2, replica_movements=1)
    assert isinstance(third, Step) and third.is_last and third.replicas == t


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"current": (), "target": (1,)}, "must not be empty"),
        ({"current": (1, 1), "target": (1,)}, "twice"),
        ({"current": (1,), "target": (2, 2)}, "twice"),
        ({"current": (1,), "target": (2,), "replica_movements": 0}, "replica_movements"),
        ({"current": (1,), "target": (2,), "min_isr": 0}, "min_isr"),
        ({"current": (1,), "target": (2,), "leader": 7}, "not one of the current"),
    ],
)
def test_bad_input_is_refused(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"min_isr": 1, "replica_movements": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        next_step(**args)  # type: ignore[arg-type]


def test_limits_must_be_positive() -> None:
    for name in (
        "replica_movements",
        "partition_movements",
        "leader_movements",
        "moves_per_broker",
    ):
        with pytest.raises(ValueError, match=name):
            replace(WIDE, **{name: 0})


# -- cancel and rollback ----------------------------------------------------------------------


def test_cancel_removes_the_added_replicas_and_keeps_the_leader() -> None:
    # The example's second step in flight: 6 catching up, 0 and 1 not removed yet.
    s = cancel_step((5, 6, 2, 3, 4, 0, 1), (5, 0, 1, 2, 3, 4), adding=(6,), leader=5)
    assert s == Step(
        adding=(), removing=(6,), replicas=(5, 0, 1, 2, 3, 4), leader_to_elect=None, is_last=True
    )


def test_cancel_restores_the_original_order_and_leader() -> None:
    # Kafka 4.3 restored [2,1] as [1,2]. Here the step [2,1] -> [3,2,1] had elected 3.
    s = cancel_step((3, 2, 1), (2, 1), adding=(3,), leader=3)
    assert s is not None
    assert s.replicas == (2, 1) and s.removing == (3,) and s.leader_to_elect == 2


def test_cancel_refuses_a_finished_step_and_strangers() -> None:
    with pytest.raises(ValueError, match="roll it back"):
        cancel_step((5, 6, 2, 3, 4), (5, 0, 1, 2, 3, 4), adding=(6,))
    with pytest.raises(ValueError, match="neither"):
        cancel_step((0, 1, 9), (0, 1), adding=())
    assert cancel_step((0, 1), (0, 1), adding=()) is None


def test_rollback_walks_back_to_the_original_order_and_leader() -> None:
    original = (2, 1)
    forward = walk(original, (3, 4), r=1)
    assert forward[-1].replicas == (3, 4)
    back = walk((3, 4), rollback_target(original), r=1, leader=3)
    assert [s.replicas for s in back] == [(2, 3, 4), (2, 4), (2, 1)]
    assert [s.leader_to_elect for s in back] == [2, None, None]


def test_rollback_from_half_way() -> None:
    original, target = (0, 1, 2, 3, 4), (5, 6, 7, 8, 9)
    half = walk(original, target, r=2, leader=0)[:2]
    assert half[-1].replicas == (5, 6, 2, 3, 4)
    back = walk(half[-1].replicas, rollback_target(original), r=2, leader=5)
    assert back[-1].replicas == original and back[0].leader_to_elect == 0
    with pytest.raises(ValueError):
        rollback_target((1, 1))


# -- batch collection ---------------------------------------------------------------------------


def planned(
    name: str, current: tuple[int, ...], target: tuple[int, ...], leader: int | None = None
) -> PlannedStep:
    s = next_step(current, target, min_isr=1, replica_movements=1, leader=leader)
    assert isinstance(s, Step)
    return PlannedStep(name, 0, s)


def names(b: Batch) -> list[str]:
    return [s.topic for s in b.steps]


# In plan order: a, b (leader), c, d (leader), e. Brokers: a 1->11, b 2->12 with a new
# leader, c 3->13, d 4->14 with a new leader, e 1->15 (shares broker 1 with a).
STEPS = [
    planned("a", (0, 1), (0, 11)),
    planned("b", (2, 0), (12, 0)),
    planned("c", (0, 3), (0, 13)),
    planned("d", (4, 0), (14, 0)),
    planned("e", (0, 1), (0, 15)),
]


def test_leader_movements_come_first_then_the_others_in_plan_order() -> None:
    b = collect_batch(STEPS, WIDE, {})
    assert names(b) == ["b", "d", "a", "c", "e"]
    assert b.leader_movements == 2 and b.held_by_leader_limit == 0 and b.blocked_brokers == ()


def test_partition_limit() -> None:
    assert names(collect_batch(STEPS, replace(WIDE, partition_movements=1), {})) == ["b"]
    assert names(collect_batch(STEPS, replace(WIDE, partition_movements=3), {})) == ["b", "d", "a"]
    # Steps still running from an earlier batch count against P.
    b = collect_batch(STEPS, replace(WIDE, partition_movements=3), {}, partitions_in_flight=2)
    assert names(b) == ["b"]


def test_leader_limit_lets_other_steps_take_the_place() -> None:
    b = collect_batch(STEPS, replace(WIDE, leader_movements=1, partition_movements=3), {})
    assert names(b) == ["b", "a", "c"] and b.leader_movements == 1 and b.held_by_leader_limit == 1
    b2 = collect_batch(STEPS, replace(WIDE, leader_movements=1), {}, leader_movements_in_flight=1)
    assert names(b2) == ["a", "c", "e"] and b2.held_by_leader_limit == 2


def test_per_broker_budget_counts_moves_in_use_incoming_and_outgoing() -> None:
    # Broker 1 has 4 of its 5 moves used by other work: a (removing from 1) fits, then e,
    # which also removes from 1, does not. Removals count (outgoing), as in Cruise Control.
    b = collect_batch(STEPS, replace(WIDE, moves_per_broker=5), {1: 4})
    assert names(b) == ["b", "d", "a", "c"]
    assert b.blocked_brokers == (1,)
    # b and d are leader steps: they add the new leader and remove nothing yet.
    assert b.moves_per_broker == {12: 1, 14: 1, 11: 1, 1: 1, 13: 1, 3: 1}
    # Incoming: broker 12 full holds back b (a leader movement); d still goes first.
    b2 = collect_batch(STEPS, replace(WIDE, moves_per_broker=5), {12: 5})
    assert names(b2) == ["d", "a", "c", "e"] and b2.blocked_brokers == (12,)
    # A broker over its budget (shared with LogDirMoves) takes nothing more.
    b3 = collect_batch(STEPS, replace(WIDE, moves_per_broker=2), {1: 7, 0: 0})
    assert "a" not in names(b3) and "e" not in names(b3)


def test_a_limit_changed_between_batches_applies_to_the_next_batch() -> None:
    first = collect_batch(STEPS, replace(WIDE, partition_movements=1), {})
    rest = [s for s in STEPS if s not in first.steps]
    second = collect_batch(rest, replace(WIDE, partition_movements=3, leader_movements=1), {})
    assert names(first) == ["b"] and names(second) == ["d", "a", "c"]


def test_a_partition_twice_in_one_collection_is_a_bug() -> None:
    with pytest.raises(ValueError, match="two steps"):
        collect_batch([STEPS[0], STEPS[0]], WIDE, {})


def test_steps_that_charge_no_broker_fit_a_full_cluster() -> None:
    reorder = planned("r", (0, 1), (1, 0))
    assert reorder.step.brokers_charged == ()
    b = collect_batch([STEPS[0], reorder], replace(WIDE, moves_per_broker=1), {0: 1, 1: 1, 11: 1})
    assert names(b) == ["r"]


# -- the simulator ------------------------------------------------------------------------------


def test_plan_all_moves_six_partitions_onto_three_other_brokers() -> None:
    # e2e (a)'s plan: 6 brokers, 6 partitions RF 3 on brokers 0-2, all moved to 3-5.
    parts = [
        PartitionMove(
            "t", p, tuple((p + k) % 3 for k in range(3)), tuple(3 + (p + k) % 3 for k in range(3))
        )
        for p in range(6)
    ]
    limits = Limits(
        replica_movements=1, partition_movements=2, leader_movements=1, moves_per_broker=2
    )
    batches = plan_all(parts, limits, min_isr=2)
    final: dict[int, tuple[int, ...]] = {}
    for b in batches:
        assert len(b.steps) <= 2 and b.leader_movements <= 1
        assert all(v <= 2 for v in b.moves_per_broker.values())
        for s in b.steps:
            final[s.partition] = s.step.replicas
    assert final == {p.partition: p.target for p in parts}
    assert batches == plan_all(parts, limits, min_isr=2)  # deterministic
    # Each partition: one leader step, then three replacing steps (R = 1).
    assert sum(len(b.steps) for b in batches) == 6 * 4


def test_plan_all_takes_min_isr_per_topic_and_skips_finished_partitions() -> None:
    parts = [
        PartitionMove("strict", 0, (0,), (0, 1, 2)),
        PartitionMove("loose", 0, (0,), (0, 1, 2)),
        PartitionMove("done", 0, (0, 1), (0, 1)),
    ]
    batches = plan_all(parts, WIDE, min_isr={"strict": 3})
    by_topic = {
        t: [s.step.adding for b in batches for s in b.steps if s.topic == t]
        for t in ("strict", "loose", "done")
    }
    assert by_topic == {"strict": [(1, 2)], "loose": [(1,), (2,)], "done": []}
    assert plan_all([], WIDE, min_isr=1) == []
    with pytest.raises(ValueError, match="named twice"):
        plan_all([parts[0], parts[0]], WIDE, min_isr=1)
