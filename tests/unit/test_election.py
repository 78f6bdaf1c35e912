"""The controller's election and ISR rules on plain data (KIP-112 included)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_operator.plan.election import (
    NO_LEADER,
    PartitionView,
    apply_to_status,
    decide,
    settled,
    validate_alter_partition,
    view_from_status,
)


def pv(
    leader: int = 1,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    offline: tuple[int, ...] = (),
    le: int = 5,
    pe: int = 7,
) -> PartitionView:
    return PartitionView("t", 0, replicas, leader, le, isr, pe, offline)


def test_nothing_changes_when_everyone_is_live() -> None:
    d = decide(pv(), {1, 2, 3})
    assert not d.changed and d.after == pv()


def test_dead_leader_is_replaced_from_the_isr_in_replica_order() -> None:
    d = decide(pv(), {2, 3})
    assert d.after.leader == 2 and d.after.isr == (2, 3)
    assert d.after.leader_epoch == 6 and d.after.partition_epoch == 8
    assert d.leader_changed


def test_dead_follower_only_shrinks_the_isr() -> None:
    d = decide(pv(), {1, 2})
    assert d.after.leader == 1 and d.after.isr == (1, 2)
    assert d.after.leader_epoch == 5 and d.after.partition_epoch == 8


def test_no_live_isr_member_means_offline_not_unclean() -> None:
    # Broker 3 is alive but was not in sync: it must not become leader (no unclean election).
    d = decide(pv(isr=(1, 2)), {3})
    assert d.after.leader == NO_LEADER
    assert d.after.isr == (1, 2)  # the last ISR is kept: they hold every committed record
    # When an ISR member comes back, it is elected.
    back = decide(d.after, {2, 3})
    assert back.after.leader == 2 and back.after.isr == (2,)


def test_replica_offline_by_disk_while_its_broker_lives() -> None:
    d = decide(pv(offline=(1,)), {1, 2, 3})
    assert d.after.leader == 2 and 1 not in d.after.isr
    # The disk is replaced and the broker reports the replica fine again: it is a follower
    # until it rejoins the ISR through AlterPartition; only then may it lead again.
    healed = decide(PartitionView("t", 0, (1, 2, 3), 2, 6, (2, 3), 8, ()), {1, 2, 3})
    assert healed.after.leader == 2 and not healed.changed


def test_preferred_leader_returns_once_in_sync() -> None:
    p = PartitionView("t", 0, (1, 2, 3), 2, 6, (1, 2, 3), 9, ())
    d = decide(p, {1, 2, 3})
    assert d.after.leader == 1 and d.after.leader_epoch == 7
    off = decide(p, {1, 2, 3}, preferred_election=False)
    assert off.after.leader == 2 and not off.changed


def test_alter_partition_validation_and_stale_epochs() -> None:
    p = pv()
    assert validate_alter_partition(p, 1, 5, 7, [1, 2]) is None
    assert validate_alter_partition(p, 1, 4, 7, [1, 2]) == "FENCED_LEADER_EPOCH"
    assert validate_alter_partition(p, 2, 5, 7, [1, 2]) == "FENCED_LEADER_EPOCH"
    assert validate_alter_partition(p, 1, 5, 6, [1, 2]) == "INVALID_UPDATE_VERSION"
    assert validate_alter_partition(p, 1, 5, 7, [2, 3]) == "INVALID_REQUEST"  # leader not in
    assert validate_alter_partition(p, 1, 5, 7, [1, 9]) == "INVALID_REQUEST"  # not a replica
    assert validate_alter_partition(pv(offline=(3,)), 1, 5, 7, [1, 3]) == "INELIGIBLE_REPLICA"


def test_status_round_trip_and_kip112_offline_union() -> None:
    s = {
        "partition": 0,
        "replicas": [{"brokerId": 1, "logDir": "/a"}, {"brokerId": 2}, {"brokerId": 3}],
        "leader": 1,
        "leaderEpoch": 5,
        "isr": [1, 2, 3],
        "partitionEpoch": 7,
        "diskOfflineReplicas": [2],
    }
    v = view_from_status("t", s)
    assert v.offline_replicas == (2,)
    out = apply_to_status(s, decide(v, {1, 2}).after, dead={3})
    assert out["isr"] == [1] and out["offlineReplicas"] == [2, 3]
    assert out["replicas"] == s["replicas"]


def test_an_isr_never_grows_to_a_broker_the_controller_knows_is_not_alive() -> None:
    """KIP-841: a leader may answer a fetch a follower sent before it died and count it caught
    up; the controller refuses to add a fenced broker. Shrinking, or keeping a member it
    already has, needs no live broker."""
    p = pv(isr=(1, 2))
    dead3 = frozenset({3})
    assert validate_alter_partition(p, 1, 5, 7, [1, 2, 3], dead3) == "INELIGIBLE_REPLICA"
    assert validate_alter_partition(p, 1, 5, 7, [1, 2, 3]) is None  # 3 alive
    assert validate_alter_partition(p, 1, 5, 7, [1], frozenset({2, 3})) is None  # a shrink
    assert validate_alter_partition(pv(), 1, 5, 7, [1, 2, 3], dead3) is None  # 3 already in


# -- settled: the pass' cheap check (issue 39) ---------------------------------------------------


@st.composite
def _states(draw: st.DrawFn) -> tuple[dict[str, Any], set[int], set[int]]:
    replicas = draw(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True))
    s = {
        "partition": 0,
        "replicas": [{"brokerId": b} for b in replicas],
        "leader": draw(st.sampled_from([*replicas, -1])),
        "leaderEpoch": 3,
        "isr": isr,
        "partitionEpoch": 5,
        "diskOfflineReplicas": draw(st.lists(st.sampled_from(replicas), max_size=1)),
        "offlineReplicas": [],
    }
    live = draw(st.sets(st.integers(0, 5)))
    return s, live, set(range(6)) - live


@settings(max_examples=500)
@given(_states(), st.booleans())
def test_a_settled_partition_is_one_the_decision_leaves_as_it_is(
    case: tuple[dict[str, Any], set[int], set[int]], preferred: bool
) -> None:
    s, live, dead = case
    if settled(s, live, dead, preferred_election=preferred):
        d = decide(view_from_status("t", s), live, preferred_election=preferred)
        assert not d.changed and apply_to_status(s, d.after, dead) == s
