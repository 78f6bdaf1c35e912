"""The audit's pure comparison (``e2e.reassignment_audit.compare``): each kind of problem it
exists to find is found, and a clean end is clean. The e2e torture and the Kafka module run it
against real brokers; these cases pin down what it calls a problem."""

from __future__ import annotations

from typing import Any

from e2e.reassignment_audit import Held, PartitionHeld, RecordedPartition, _throttles_of, compare
from jbod_broker import wire

TP = ("t", 0)


def pr(
    phase: str,
    target: list[int],
    dirs: list[str] | None,
    original: list[int],
    original_dirs: list[str] | None = None,
) -> dict[str, Any]:
    part: dict[str, Any] = {"topic": "t", "partition": 0, "replicas": target}
    if dirs is not None:
        part["logDirs"] = dirs
    return {
        "metadata": {"name": "r"},
        "spec": {"partitions": [part]},
        "status": {
            "phase": phase,
            "original": [
                {"topic": "t", "partition": 0, "replicas": original, "logDirs": original_dirs}
            ],
        },
    }


def held(replicas: list[int], dirs: list[str], leader: int | None = None) -> Held:
    h = Held()
    h.partitions[TP] = PartitionHeld(
        tuple(replicas), replicas[0] if leader is None else leader, tuple(replicas)
    )
    h.placement[TP] = dict(zip(replicas, dirs, strict=True))
    return h


def record(replicas: list[int], dirs: list[str | None]) -> dict[tuple[str, int], Any]:
    return {
        TP: RecordedPartition(tuple(replicas), replicas[0], dict(zip(replicas, dirs, strict=True)))
    }


def test_a_clean_end_has_no_problem() -> None:
    h = held([3, 1, 2], ["a", "b", "a"])
    got = compare(
        pr("Succeeded", [3, 1, 2], ["a", "b", "any"], [0, 1, 2]),
        h,
        record([3, 1, 2], ["a", "b", "a"]),
    )
    assert got == []


def test_replicas_in_another_order_or_dir_are_problems() -> None:
    got = compare(
        pr("Succeeded", [3, 1, 2], ["a", "b", "a"], [0, 1, 2]), held([1, 3, 2], ["a", "b", "a"])
    )
    assert len(got) == 1 and "are none of: target [3, 1, 2]" in got[0], got
    got = compare(
        pr("Succeeded", [3, 1, 2], ["a", "b", "a"], [0, 1, 2]), held([3, 1, 2], ["a", "a", "a"])
    )
    assert len(got) == 1 and "broker 1 is in dir 'a', named 'b'" in got[0], got


def test_a_cancel_ends_at_its_target_or_its_original_never_with_another_size() -> None:
    p = pr("Cancelled", [1, 2, 0], None, [0, 3, 2])
    assert compare(p, held([1, 2, 0], ["a", "a", "a"])) == []
    assert compare(p, held([0, 3, 2], ["a", "a", "a"])) == []
    got = compare(p, held([1, 0, 3, 2], ["a", "a", "a", "a"]))
    assert len(got) == 1 and "(4 replicas, the end has 3)" in got[0], got


def test_a_rollback_ends_at_the_original_dirs() -> None:
    p = pr("RolledBack", [1, 2, 0], ["a", "a", "a"], [0, 3, 2], ["a", "b", "a"])
    assert compare(p, held([0, 3, 2], ["a", "b", "a"])) == []
    got = compare(p, held([0, 3, 2], ["a", "a", "a"]))
    assert len(got) == 1 and "broker 3 is in dir 'a', named 'b' (original)" in got[0], got


def test_a_leader_other_than_the_first_replica_in_the_isr_is_a_problem() -> None:
    got = compare(
        pr("Succeeded", [3, 1, 2], None, [0, 1, 2]), held([3, 1, 2], ["a", "a", "a"], leader=1)
    )
    assert len(got) == 1 and "led by 1, not its first replica 3" in got[0], got


def test_strays_futures_and_throttles_are_problems() -> None:
    h = held([3, 1, 2], ["a", "a", "a"])
    h.placement[TP][0] = "b"
    h.futures[TP] = {1: "b"}
    h.throttles.append("broker 1: throttle left")
    got = compare(pr("Succeeded", [3, 1, 2], None, [0, 1, 2]), h)
    assert any("stray replica on broker 0 (dir 'b')" in p for p in got), got
    assert any("future replica left on broker 1" in p for p in got), got
    assert any("broker 1: throttle left" in p for p in got), got
    assert len(got) == 3, got


def test_a_state_of_record_other_than_what_the_brokers_hold_is_a_problem() -> None:
    p = pr("Succeeded", [3, 1, 2], None, [0, 1, 2])
    got = compare(p, held([3, 1, 2], ["a", "b", "a"]), record([3, 1, 2], ["a", "a", None]))
    assert len(got) == 2, got
    assert "names dir 'a' for broker 1, which holds it in 'b'" in got[0], got
    assert "names dir None for broker 2" in got[1], got
    # What status.original recorded against where the replicas were before.
    got = compare(
        pr("Succeeded", [3, 1, 2], None, [0, 1, 2], ["a", "any", "a"]),
        held([3, 1, 2], ["a", "b", "a"]),
        before={TP: {0: "a", 1: "b", 2: "a"}},
    )
    assert len(got) == 1 and "status.original records dir None for broker 1" in got[0], got


def test_a_cancel_back_at_its_original_is_back_in_the_original_dirs() -> None:
    p = pr("Cancelled", [1, 2, 0], ["b", "b", "b"], [0, 3, 2], ["a", "a", "a"])
    assert compare(p, held([1, 2, 0], ["b", "b", "a"])) == []  # 0 and 2 were originals
    got = compare(p, held([0, 3, 2], ["a", "a", "b"]))
    assert len(got) == 1 and "broker 2 is in dir 'b', named 'a' (original)" in got[0], got


def test_a_broker_throttle_left_is_read_as_a_problem() -> None:
    assert _throttles_of(1, wire.ThrottleConfig()) == []
    assert _throttles_of(1, wire.ThrottleConfig(leader_replication_throttled_rate=0)) == []
    cfg = wire.ThrottleConfig(
        follower_replication_throttled_rate=1024,
        leader_replication_throttled_replicas=[wire.ReplicaRef(topic="t", partition=0)],
    )
    got = _throttles_of(1, cfg)
    assert got == [
        "broker 1: throttle follower_replication_throttled_rate=1024 left",
        "broker 1: leader_replication_throttled_replicas left: ['t-0']",
    ], got
