"""Properties of KIP-435's step planner and batch collector (hypothesis), over random
assignments, limits, live brokers and budgets in use:

- a partition walks to its target in at most ``max_steps`` steps, each strictly lowering a
  measure, the last one equal to the target in order;
- no assignment along the way has fewer replicas than ``min(len(original), len(target))``
  nor fewer than ``min(min_isr, len(target))`` (the min-ISR rule: when the target allows it);
- R bounds removals always and additions except to reach min ISR exactly;
- the preferred leader is elected in the first step, and only there;
- a dead broker is never added, and a partition that waits names why;
- a batch never goes over P, L or a broker's budget, takes leader movements first, and
  leaves out only steps that would break a limit;
- ``plan_all`` is the collector and the planner run in a loop, and ends at every target.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jbod_operator.plan.reassignment_steps import (
    Batch,
    Limits,
    PartitionMove,
    PlannedStep,
    Step,
    Waiting,
    WaitReason,
    collect_batch,
    max_steps,
    next_step,
    plan_all,
)

MAX_RF = 6


@st.composite
def assignments(draw: Any, n_brokers: int | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A current and a target replica list over the same brokers (RF may change)."""
    nb = n_brokers or draw(st.integers(1, 10))
    brokers = list(range(nb))
    current = tuple(draw(st.permutations(brokers))[: draw(st.integers(1, min(nb, MAX_RF)))])
    target = tuple(draw(st.permutations(brokers))[: draw(st.integers(1, min(nb, MAX_RF)))])
    return current, target


def measure(current: tuple[int, ...], target: tuple[int, ...], leader: int) -> int:
    """What every step lowers: replicas to remove, replicas to add, the order, the leader."""
    c, t = set(current), set(target)
    return len(c - t) + len(t - c) + (current != target) + (leader != target[0])


def after(leader: int, s: Step) -> int:
    return leader if s.leader_to_elect is None else s.leader_to_elect


def check_step(
    s: Step,
    current: tuple[int, ...],
    target: tuple[int, ...],
    r: int,
    min_isr: int,
    live: set[int] | None = None,
) -> None:
    c = set(current)
    in_sync = c if live is None else c & live
    assert len(set(s.replicas)) == len(s.replicas)
    assert set(s.replicas) == (c | set(s.adding)) - set(s.removing)
    assert not set(s.adding) & c and set(s.removing) <= c
    assert set(s.adding) <= set(target) and not set(s.removing) & set(target)
    assert list(s.adding) == [b for b in target if b in s.adding]  # FTR order
    assert list(s.removing) == [b for b in current if b in s.removing]  # CR order
    assert len(s.removing) <= r
    if len(s.adding) > r:  # only the min-ISR rule goes past R, and only as far as it needs
        assert len(in_sync - set(s.removing)) + len(s.adding) == min(min_isr, len(target))
    assert s.is_last == (s.replicas == target)


@settings(max_examples=400, deadline=None)
@given(
    assignments(),
    st.integers(1, 4),
    st.integers(1, 4),
    st.data(),
)
def test_a_partition_walks_to_its_target(
    ab: tuple[tuple[int, ...], tuple[int, ...]], r: int, min_isr: int, data: Any
) -> None:
    original, target = ab
    leader = data.draw(st.sampled_from(original))
    current, lead = original, leader
    steps: list[Step] = []
    while (
        s := next_step(current, target, min_isr=min_isr, replica_movements=r, leader=lead)
    ) is not None:
        assert isinstance(s, Step)
        check_step(s, current, target, r, min_isr)
        assert len(s.replicas) >= min(len(original), len(target))
        assert len(s.replicas) >= min(min_isr, len(target))
        assert measure(s.replicas, target, after(lead, s)) < measure(current, target, lead)
        if steps:
            assert s.leader_to_elect is None  # the preferred leader was elected first
        steps.append(s)
        current, lead = s.replicas, after(lead, s)
        assert len(steps) <= max_steps(original, target, r)
    assert current == target and lead == target[0]
    assert (steps == []) == (original == target and leader == target[0])
    assert all(not s.is_last for s in steps[:-1])


@settings(max_examples=300, deadline=None)
@given(assignments(), st.lists(st.integers(1, 4), min_size=1, max_size=6), st.integers(1, 3))
def test_limits_changed_at_every_step_still_end_at_the_target(
    ab: tuple[tuple[int, ...], tuple[int, ...]], rs: list[int], min_isr: int
) -> None:
    original, target = ab
    current, lead = original, original[0]
    n = 0
    while True:
        r = rs[n % len(rs)]  # a different R for each step, as a user editing the resource
        s = next_step(current, target, min_isr=min_isr, replica_movements=r, leader=lead)
        if s is None:
            break
        assert isinstance(s, Step)
        check_step(s, current, target, r, min_isr)
        current, lead, n = s.replicas, after(lead, s), n + 1
        assert n <= max_steps(original, target, min(rs))
    assert current == target


@settings(max_examples=300, deadline=None)
@given(assignments(n_brokers=8), st.integers(1, 3), st.integers(1, 3), st.data())
def test_dead_brokers_are_never_added_and_waiting_says_why(
    ab: tuple[tuple[int, ...], tuple[int, ...]], r: int, min_isr: int, data: Any
) -> None:
    original, target = ab
    current, lead = original, original[0]
    for _ in range(12):
        live = data.draw(st.sets(st.integers(0, 7)), label="live")
        s = next_step(current, target, min_isr=min_isr, replica_movements=r, live=live, leader=lead)
        if s is None:
            break
        if isinstance(s, Waiting):
            assert s.brokers
            if s.reason is WaitReason.NO_LIVE_IN_SYNC_REPLICA:
                assert not set(current) & live
            elif s.reason is WaitReason.TARGET_BROKERS_NOT_LIVE:
                assert set(s.brokers) <= set(target) - live
            else:  # every broker is live here: in-sync means live and a current replica
                assert set(s.brokers) <= set(target) & set(current) - live
            continue
        assert set(s.adding) <= live
        check_step(s, current, target, r, min_isr, live)
        # With targets down, removals wait for the additions that replace them.
        assert len(s.replicas) >= min(len(current), len(target))
        assert measure(s.replicas, target, after(lead, s)) < measure(current, target, lead)
        current, lead = s.replicas, after(lead, s)
    # Every broker back: it finishes.
    while (
        s := next_step(current, target, min_isr=min_isr, replica_movements=r, leader=lead)
    ) is not None:
        assert isinstance(s, Step)
        current, lead = s.replicas, after(lead, s)
    assert current == target


# -- batches ---------------------------------------------------------------------------------


@st.composite
def plans(draw: Any, max_partitions: int = 12) -> list[PartitionMove]:
    nb = draw(st.integers(1, 8))
    topics = draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=max_partitions))
    out = []
    for p, topic in enumerate(topics):
        current, target = draw(assignments(n_brokers=nb))
        out.append(PartitionMove(topic, p, current, target, leader=draw(st.sampled_from(current))))
    return out


limits_st = st.builds(
    Limits,
    replica_movements=st.integers(1, 3),
    partition_movements=st.integers(1, 8),
    leader_movements=st.integers(1, 4),
    moves_per_broker=st.integers(1, 5),
)


def charged(steps: list[PlannedStep]) -> dict[int, int]:
    out: dict[int, int] = {}
    for s in steps:
        for b in s.step.brokers_charged:
            out[b] = out.get(b, 0) + 1
    return out


def check_batch(
    b: Batch,
    offered: list[PlannedStep],
    limits: Limits,
    in_use: dict[int, int],
    p_in_flight: int = 0,
    l_in_flight: int = 0,
) -> None:
    taken = list(b.steps)
    assert len({(s.topic, s.partition) for s in taken}) == len(taken)
    assert all(s in offered for s in taken)
    # leader movements first, each group in the plan's order
    leaders = [s for s in offered if s.step.involves_leader_movement]
    others = [s for s in offered if not s.step.involves_leader_movement]
    assert taken == [s for s in leaders if s in taken] + [s for s in others if s in taken]
    assert len(taken) <= limits.partition_movements - p_in_flight or not taken
    assert b.leader_movements == sum(s.step.involves_leader_movement for s in taken)
    assert b.leader_movements <= max(0, limits.leader_movements - l_in_flight)
    moves = charged(taken)
    assert dict(b.moves_per_broker) == moves
    for broker, n in moves.items():
        assert in_use.get(broker, 0) + n <= limits.moves_per_broker
    # Maximal: every step left out would break a limit if it were added now.
    for s in offered:
        if s in taken:
            continue
        over_p = len(taken) + 1 > limits.partition_movements - p_in_flight
        over_l = (
            s.step.involves_leader_movement
            and b.leader_movements + 1 > limits.leader_movements - l_in_flight
        )
        over_budget = any(
            in_use.get(x, 0) + moves.get(x, 0) + 1 > limits.moves_per_broker
            for x in s.step.brokers_charged
        )
        assert over_p or over_l or over_budget, s
    for broker in b.blocked_brokers:
        assert in_use.get(broker, 0) + moves.get(broker, 0) >= limits.moves_per_broker
        assert any(broker in s.step.brokers_charged for s in offered if s not in taken)


def first_steps(parts: list[PartitionMove], r: int) -> list[PlannedStep]:
    out = []
    for p in parts:
        s = next_step(p.current, p.target, min_isr=1, replica_movements=r, leader=p.leader)
        if isinstance(s, Step):
            out.append(PlannedStep(p.topic, p.partition, s))
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), limits_st, st.dictionaries(st.integers(0, 7), st.integers(0, 7)), st.data())
def test_a_batch_keeps_every_limit_and_leaves_out_only_what_would_break_one(
    parts: list[PartitionMove], limits: Limits, in_use: dict[int, int], data: Any
) -> None:
    offered = first_steps(parts, limits.replica_movements)
    p_in_flight = data.draw(st.integers(0, limits.partition_movements))
    l_in_flight = data.draw(st.integers(0, limits.leader_movements))
    b = collect_batch(
        offered,
        limits,
        in_use,
        partitions_in_flight=p_in_flight,
        leader_movements_in_flight=l_in_flight,
    )
    check_batch(b, offered, limits, in_use, p_in_flight, l_in_flight)


def reference_plan(parts: list[PartitionMove], limits: Limits, min_isr: int) -> list[Batch]:
    """plan_all as the KIP says it: compute every partition's next step, collect a batch,
    run it, repeat; with the public functions only."""
    state = {
        (p.topic, p.partition): (p.current, p.current[0] if p.leader is None else p.leader)
        for p in parts
    }
    batches: list[Batch] = []
    while True:
        offered: list[PlannedStep] = []
        for p in parts:
            current, lead = state[(p.topic, p.partition)]
            s = next_step(
                current,
                p.target,
                min_isr=min_isr,
                replica_movements=limits.replica_movements,
                leader=lead,
            )
            if s is not None:
                assert isinstance(s, Step)
                offered.append(PlannedStep(p.topic, p.partition, s))
        if not offered:
            return batches
        b = collect_batch(offered, limits, {})
        check_batch(b, offered, limits, {})
        assert b.steps
        for ps in b.steps:
            _, lead = state[(ps.topic, ps.partition)]
            state[(ps.topic, ps.partition)] = (ps.step.replicas, after(lead, ps.step))
        batches.append(b)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), limits_st, st.integers(1, 3))
def test_plan_all_is_the_collector_in_a_loop_and_ends_at_every_target(
    parts: list[PartitionMove], limits: Limits, min_isr: int
) -> None:
    batches = plan_all(parts, limits, min_isr=min_isr)
    assert batches == reference_plan(parts, limits, min_isr)
    # Each partition's steps across batches are its lone walk: batching changes when a step
    # runs, never what it is.
    for p in parts:
        mine = [
            s.step
            for b in batches
            for s in b.steps
            if (s.topic, s.partition) == (p.topic, p.partition)
        ]
        current, lead = p.current, p.leader if p.leader is not None else p.current[0]
        for s in mine:
            assert s == next_step(
                current,
                p.target,
                min_isr=min_isr,
                replica_movements=limits.replica_movements,
                leader=lead,
            )
            current, lead = s.replicas, after(lead, s)
        assert current == p.target
        assert len(mine) <= max_steps(p.current, p.target, limits.replica_movements)
