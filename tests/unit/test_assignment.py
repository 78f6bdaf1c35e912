"""Replica assignment (Kafka's rack-aware round robin, deterministic) and log dir choice."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_operator.plan.assignment import (
    BrokerInfo,
    DirUsage,
    assign_partitions,
    choose_log_dir,
    plan_log_dirs,
    rack_alternated,
)

# -- strategies ---------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn, *, racked: bool | None = None) -> list[BrokerInfo]:
    """Between 1 and 12 brokers with distinct, non-contiguous ids; all racked or none."""
    ids = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True))
    use_racks = draw(st.booleans()) if racked is None else racked
    n_racks = draw(st.integers(1, 4))
    out = []
    for i in ids:
        rack = f"r{draw(st.integers(0, n_racks - 1))}" if use_racks else None
        out.append(BrokerInfo(id=i, rack=rack, live=draw(st.booleans())))
    if not any(b.live for b in out):
        out[0] = BrokerInfo(out[0].id, out[0].rack, True)
    return out


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[BrokerInfo], int, int, int]:
    brokers = draw(clusters())
    n_live = sum(b.live for b in brokers)
    rf = draw(st.integers(1, n_live))
    partitions = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 10_000))
    return brokers, rf, partitions, seed


def live_ids(brokers: list[BrokerInfo]) -> set[int]:
    return {b.id for b in brokers if b.live}


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(problems())
def test_replicas_are_distinct_live_brokers(p: tuple[list[BrokerInfo], int, int, int]) -> None:
    brokers, rf, n, seed = p
    a = assign_partitions(range(n), rf, brokers, seed_offset=seed)
    assert sorted(a) == list(range(n))
    for replicas in a.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= live_ids(brokers)


@settings(max_examples=300, deadline=None)
@given(problems())
def test_replicas_spread_over_racks(p: tuple[list[BrokerInfo], int, int, int]) -> None:
    brokers, rf, n, seed = p
    rack = {b.id: b.rack for b in brokers}
    n_racks = len({b.rack for b in brokers if b.live})
    for replicas in assign_partitions(range(n), rf, brokers, seed_offset=seed).values():
        # No two replicas share a rack while some rack has none.
        assert len({rack[b] for b in replicas}) == min(rf, n_racks)


@settings(max_examples=300, deadline=None)
@given(problems(), st.integers(1, 5))
def test_leaders_balanced(p: tuple[list[BrokerInfo], int, int, int], rounds: int) -> None:
    brokers, rf, _, seed = p
    live = live_ids(brokers)
    n = rounds * len(live)
    leaders = Counter(
        r[0] for r in assign_partitions(range(n), rf, brokers, seed_offset=seed).values()
    )
    assert set(leaders) == live
    assert set(leaders.values()) == {rounds}


@settings(max_examples=200, deadline=None)
@given(problems())
def test_leaders_within_one_for_any_count(p: tuple[list[BrokerInfo], int, int, int]) -> None:
    brokers, rf, n, seed = p
    leaders = Counter(
        r[0] for r in assign_partitions(range(n), rf, brokers, seed_offset=seed).values()
    )
    counts = [leaders.get(b, 0) for b in live_ids(brokers)]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=200, deadline=None)
@given(problems())
def test_deterministic(p: tuple[list[BrokerInfo], int, int, int]) -> None:
    brokers, rf, n, seed = p
    first = assign_partitions(range(n), rf, brokers, seed_offset=seed)
    assert assign_partitions(list(range(n)), rf, list(reversed(brokers)), seed_offset=seed) == first
    assert assign_partitions(range(n), rf, brokers, seed_offset=seed) == first


@settings(max_examples=200, deadline=None)
@given(problems(), st.integers(1, 40))
def test_increase_keeps_existing_and_continues(
    p: tuple[list[BrokerInfo], int, int, int], extra: int
) -> None:
    brokers, rf, n, seed = p
    before = assign_partitions(range(n), rf, brokers, seed_offset=seed)
    # The seed is forgotten: the pattern is found again from partition 0.
    after = assign_partitions(range(n + extra), rf, brokers, existing=before, seed_offset=seed + 1)
    assert {q: after[q] for q in range(n)} == before
    # The same as assigning everything at once: leaders stay balanced.
    assert after == assign_partitions(range(n + extra), rf, brokers, seed_offset=seed)
    only_new = assign_partitions(range(n, n + extra), rf, brokers, existing=before)
    assert only_new == {q: after[q] for q in range(n, n + extra)}


@settings(max_examples=100, deadline=None)
@given(problems())
def test_existing_on_dead_brokers_is_untouched(p: tuple[list[BrokerInfo], int, int, int]) -> None:
    brokers, rf, n, seed = p
    dead = [b.id for b in brokers if not b.live]
    existing = {0: dead[:1] or [12345]}
    a = assign_partitions(range(n + 1), rf, brokers, existing=existing, seed_offset=seed)
    assert a[0] == existing[0]
    for q in range(1, n + 1):
        assert set(a[q]) <= live_ids(brokers)


# -- examples -----------------------------------------------------------------------------


def test_kafka_rack_alternated_order() -> None:
    brokers = [
        BrokerInfo(0, "rack1"),
        BrokerInfo(1, "rack3"),
        BrokerInfo(2, "rack3"),
        BrokerInfo(3, "rack2"),
        BrokerInfo(4, "rack2"),
        BrokerInfo(5, "rack1"),
    ]
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    assert rack_alternated(brokers) == [0, 3, 1, 5, 4, 2]


def test_rack_unaware_matches_kafka_round_robin() -> None:
    # Kafka with fixedStartIndex=0 on brokers 0..4, rf 3.
    a = assign_partitions(range(10), 3, [BrokerInfo(i) for i in range(5)])
    assert a[0] == [0, 1, 2]
    assert a[1] == [1, 2, 3]
    assert a[4] == [4, 0, 1]
    assert a[5] == [0, 2, 3]  # the shift grew after one round
    assert a[9] == [4, 1, 2]


def test_seed_moves_the_first_leader() -> None:
    brokers = [BrokerInfo(i) for i in range(3)]
    assert assign_partitions([0], 1, brokers, seed_offset=0)[0] == [0]
    assert assign_partitions([0], 1, brokers, seed_offset=2)[0] == [2]
    assert assign_partitions([0], 1, brokers, seed_offset=5)[0] == [2]


def test_only_live_brokers_get_replicas() -> None:
    brokers = [BrokerInfo(0), BrokerInfo(1, live=False), BrokerInfo(2)]
    a = assign_partitions(range(4), 2, brokers)
    assert all(set(r) == {0, 2} for r in a.values())


def test_rf_larger_than_live_brokers_is_refused() -> None:
    brokers = [BrokerInfo(0), BrokerInfo(1), BrokerInfo(2, live=False)]
    with pytest.raises(ValueError, match=r"replication factor 3 is larger than .* \(2: \[0, 1\]\)"):
        assign_partitions(range(3), 3, brokers)
    with pytest.raises(ValueError, match="at least 1"):
        assign_partitions(range(3), 0, brokers)
    with pytest.raises(ValueError, match="larger than"):
        assign_partitions(range(3), 1, [])


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        assign_partitions([0], 1, [BrokerInfo(1), BrokerInfo(1)])
    with pytest.raises(ValueError, match="no rack"):
        assign_partitions([0], 1, [BrokerInfo(0, "a"), BrokerInfo(1)])
    with pytest.raises(ValueError, match="negative"):
        assign_partitions([-1], 1, [BrokerInfo(0)])


def test_returns_only_requested_partitions() -> None:
    brokers = [BrokerInfo(i) for i in range(3)]
    a = assign_partitions([3, 4], 2, brokers, existing={0: [1, 2], 3: [0, 2]})
    assert sorted(a) == [3, 4]
    assert a[3] == [0, 2]
    assert a[4][0] == brokers[(4 + 1) % 3].id  # continues from partition 0's leader (1)


# -- log dirs -----------------------------------------------------------------------------


def du(
    name: str,
    usable: int,
    replicas: int = 0,
    *,
    live: bool = True,
    cordoned: bool = False,
) -> DirUsage:
    return DirUsage(name, f"/var/lib/jbod/data-{name}", live, cordoned, usable, replicas)


def test_most_usable_bytes_wins() -> None:
    assert choose_log_dir([du("a", 10, 0), du("b", 1000, 50)]).name == "b"


def test_ties_fewest_replicas_then_order() -> None:
    dirs = [du("a", 100, 3), du("b", 100, 2), du("c", 100, 2)]
    assert choose_log_dir(dirs).name == "b"
    assert choose_log_dir(dirs, {"b": 1}).name == "c"
    assert choose_log_dir(dirs, {"b": 1, "c": 1}, planned_replica_bytes=0).name == "a"


def test_offline_and_cordoned_are_skipped() -> None:
    dirs = [du("a", 10**12, live=False), du("b", 10**12, cordoned=True), du("c", 5, 9)]
    assert choose_log_dir(dirs).name == "c"


def test_no_eligible_dir_is_an_error() -> None:
    with pytest.raises(ValueError, match="no live log directory"):
        choose_log_dir([du("a", 10, live=False)])
    with pytest.raises(ValueError, match="cordoned"):
        choose_log_dir([du("a", 10, cordoned=True)])


def test_planned_replicas_spread_a_batch() -> None:
    # Nearly equal disks: six new (empty) partitions must not all go to the largest.
    gib = 1 << 30
    dirs = [du("a", 100 * gib + 5), du("b", 100 * gib), du("c", 100 * gib + 1)]
    chosen = [d.name for d in plan_log_dirs(dirs, 6)]
    assert Counter(chosen) == {"a": 2, "b": 2, "c": 2}
    assert chosen[:3] == ["a", "c", "b"]


def test_planned_replicas_fill_the_emptier_disk_first() -> None:
    gib = 1 << 30
    dirs = [du("small", 10 * gib), du("big", 13 * gib)]
    chosen = [d.name for d in plan_log_dirs(dirs, 5)]
    # Three on big bring it level with small; the tie goes to the one with fewer replicas.
    assert chosen == ["big", "big", "big", "small", "big"]


def test_plan_log_dirs_counts_earlier_plans() -> None:
    dirs = [du("a", 100), du("b", 100)]
    assert [d.name for d in plan_log_dirs(dirs, 2, {"a": 1})] == ["b", "a"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10**13), st.integers(0, 100)), min_size=1, max_size=6),
    st.integers(1, 30),
)
def test_batch_never_starves_equal_dirs(dirs_raw: list[tuple[int, int]], count: int) -> None:
    gib = 1 << 30
    # All dirs with the same free space and replicas: a batch spreads within one.
    usable, replicas = dirs_raw[0]
    dirs = [du(str(i), usable, replicas) for i in range(len(dirs_raw))]
    counts = Counter(d.name for d in plan_log_dirs(dirs, count, planned_replica_bytes=gib))
    got = [counts.get(d.name, 0) for d in dirs]
    assert max(got) - min(got) <= 1
