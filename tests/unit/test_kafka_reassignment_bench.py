"""bench/kafka_reassignment.py's pure parts: the order of the sides and the yardstick's steps."""

from __future__ import annotations

from bench.kafka_reassignment import (
    ORDER,
    ORDER_WITH_STEPS,
    kip435_batches,
    schedule,
    targets,
    warmup_sides,
)


def test_two_sides_alternate_and_each_moves_each_way_as_often() -> None:
    order = schedule(3)
    assert order == ["kafka", "ours", "ours", "kafka", "kafka", "ours"]
    assert schedule(2, ORDER) == ["kafka", "ours", "ours", "kafka"]


def test_with_the_steps_side_each_side_moves_each_way_once_per_six_moves() -> None:
    order = schedule(2, ORDER_WITH_STEPS)
    assert len(order) == 6
    for side in ("kafka", "ours", "steps"):
        ways = {i % 2 for i, s in enumerate(order) if s == side}  # moves alternate direction
        assert ways == {0, 1}, side
    assert [order.count(s) for s in ("kafka", "ours", "steps")] == [2, 2, 2]
    nine = schedule(3, ORDER_WITH_STEPS)
    assert [nine.count(s) for s in ("kafka", "ours", "steps")] == [3, 3, 3]


def test_the_unbatched_steps_are_every_leader_step_then_every_other_one() -> None:
    plan = targets(8, (3, 4))
    now = {p: (r, r[0], sorted(r)) for p, r in targets(8, (1, 2)).items()}
    batches = kip435_batches(now, plan, replica_movements=2)
    assert len(batches) == 2
    first, second = batches
    assert first == {p: ([plan[p][0], *now[p][0]], True) for p in range(8)}
    assert second == {p: (plan[p], False) for p in range(8)}


def test_the_warm_up_moves_follow_the_schedule_s_order_one_per_side() -> None:
    assert warmup_sides(ORDER_WITH_STEPS, 3) == ["kafka", "ours", "steps"]
    assert warmup_sides(ORDER, 2) == ["kafka", "ours"]
    assert warmup_sides(ORDER, 0) == []
