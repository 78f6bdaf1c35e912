"""Scaling brokers down is refused while a leaving broker holds replicas (plan/scale_down.py)."""

from __future__ import annotations

from typing import Any

from jbod_operator.plan.scale_down import ScaleDecision, decide_replicas, replicas_per_broker


def topic(*partitions: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"partitions": list(partitions)}}


def part(*brokers: int, **roles: list[int]) -> dict[str, Any]:
    return {"replicas": [{"brokerId": b, "logDir": "/d/a"} for b in brokers], **roles}


def test_replicas_per_broker_counts_every_role_once_per_partition() -> None:
    topics = [
        topic(part(0, 1, 2), part(1, 2, 3)),
        # A reassignment in flight: 4 being added (also in replicas), 5 the target, 3 removed.
        topic(part(0, 4, addingReplicas=[4], removingReplicas=[3], targetReplicas=[0, 5])),
        {"status": {}},  # a Topic not created on the brokers yet
        {},
    ]
    assert replicas_per_broker(topics) == {0: 2, 1: 2, 2: 2, 3: 2, 4: 1, 5: 1}


def test_an_increase_or_no_change_is_applied() -> None:
    assert decide_replicas(3, 5, {0: 1}) == ScaleDecision(5)
    assert decide_replicas(3, 3, {0: 1}) == ScaleDecision(3)
    assert decide_replicas(None, 2, {5: 9}) == ScaleDecision(2)  # the first StatefulSet


def test_a_decrease_waits_while_a_leaving_broker_holds_replicas() -> None:
    d = decide_replicas(5, 3, {0: 7, 3: 12, 4: 1})
    assert d.replicas == 5
    assert d.blocked == {3: 12, 4: 1}
    assert d.message == (
        "spec.replicas 3 would remove brokers 3, 4, but broker 3 still holds 12 replicas; "
        "broker 4 still holds 1 replica; keeping 5 brokers. Empty them first with a Rebalance "
        "(mode: remove-brokers, brokers: [3, 4])"
    )


def test_one_holding_broker_is_enough_to_wait_and_the_remedy_names_every_leaving_one() -> None:
    d = decide_replicas(5, 3, {4: 2})
    assert d.replicas == 5 and d.blocked == {4: 2}
    assert "brokers: [3, 4]" in d.message


def test_a_decrease_goes_ahead_once_the_leaving_brokers_are_empty() -> None:
    assert decide_replicas(5, 3, {0: 7, 1: 7, 2: 7}) == ScaleDecision(3)
    assert decide_replicas(5, 3, {3: 0}) == ScaleDecision(3)
