"""Which Topics the operator takes to the brokers (plan.topic_spec, pure; issue 14 (6)):
Kafka's name rules, config rules and name collisions, and the configs in force."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from jbod_operator.models import Condition, PartitionReassignmentSpec, Topic
from jbod_operator.plan import topic_spec
from jbod_operator.plan.topic_spec import Refusal, check_topic, ready_status

NOW = 1_767_225_600.0
"""The time a decision is made at (conditions' ``lastTransitionTime``): 2026-01-01."""


def topic(
    name: str,
    *,
    created: str = "2024-01-01T00:00:00Z",
    cluster: str = "bc1",
    status: dict[str, Any] | None = None,
    deleting: bool = False,
    **spec: Any,
) -> Topic:
    body: dict[str, Any] = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Topic",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "generation": 3,
            "creationTimestamp": created,
            **({"deletionTimestamp": "2024-01-02T00:00:00Z"} if deleting else {}),
        },
        "spec": {"clusterName": cluster, "partitions": 3, "replicationFactor": 3, **spec},
    }
    if status is not None:
        body["status"] = status
    return Topic.model_validate(body)


ON_BROKERS = {
    "partitions": [
        {"partition": 0, "replicas": [{"brokerId": 0}], "leader": 0, "leaderEpoch": 0, "isr": [0]}
    ]
}


# -- names --------------------------------------------------------------------------------------


def test_a_kubernetes_name_longer_than_kafka_allows_is_refused() -> None:
    refusal = check_topic(topic("t" * 253), [])
    assert refusal is not None and refusal.reason == "InvalidTopicName"
    assert "253 characters long, the limit is 249" in refusal.message
    assert "set spec.topicName" in refusal.message


def test_a_long_kubernetes_name_with_a_topic_name_is_fine() -> None:
    assert check_topic(topic("t" * 253, topicName="short"), []) is None
    assert check_topic(topic("t" * 249), []) is None


# -- collisions ---------------------------------------------------------------------------------


def test_dot_and_underscore_collide_and_the_later_one_is_refused() -> None:
    first = topic("a.b", created="2024-01-01T00:00:00Z")
    second = topic("a-b", topicName="a_b", created="2024-01-01T00:00:05Z")
    assert check_topic(first, [second]) is None
    refusal = check_topic(second, [first])
    assert refusal == Refusal(
        "TopicNameCollision",
        "Kafka topic 'a_b' collides with 'a.b' of Topic ns/a.b: Kafka refuses names that "
        "differ only in '.' and '_'",
    )


def test_the_same_kafka_name_twice_the_later_one_is_refused() -> None:
    older = topic("orders", created="2024-01-01T00:00:00Z")
    newer = topic("orders-again", topicName="orders", created="2024-01-01T00:01:00Z")
    assert check_topic(older, [newer]) is None
    refusal = check_topic(newer, [older])
    assert refusal is not None and refusal.reason == "DuplicateTopicName"
    assert refusal.message == "Kafka topic 'orders' of cluster bc1 is Topic ns/orders's"


def test_same_second_the_name_decides() -> None:
    a = topic("x-a", topicName="shared")
    b = topic("x-b", topicName="shared")
    assert check_topic(a, [b]) is None
    refusal = check_topic(b, [a])
    assert refusal is not None and "ns/x-a" in refusal.message


def test_a_topic_already_on_the_brokers_keeps_its_name_even_when_younger() -> None:
    """Two Topics that raced (one created its partitions before the other was seen): the
    one on the brokers keeps the name, whatever the timestamps say."""
    holder = topic("zzz", topicName="shared", created="2024-01-02T00:00:00Z", status=ON_BROKERS)
    older = topic("aaa", topicName="shared", created="2024-01-01T00:00:00Z")
    assert check_topic(holder, [older]) is None
    refusal = check_topic(older, [holder])
    assert refusal is not None and "ns/zzz" in refusal.message


def test_a_topic_whose_partitions_are_in_shards_holds_its_name_by_its_topic_id() -> None:
    """The shape stored since issue 39: the states are in PartitionShards, the Topic's
    status has only the topic id recorded before them. Without reading the id, a younger
    Topic created in the same second with a name that sorts first would take the name."""
    holder = topic("a.b", created="2024-01-01T00:00:00Z", status={"topicId": "A" * 22})
    rival = topic("a-b", topicName="a_b", created="2024-01-01T00:00:00Z")
    assert check_topic(holder, [rival]) is None
    refusal = check_topic(rival, [holder])
    assert refusal is not None and refusal.reason == "TopicNameCollision"


def test_a_topic_being_deleted_still_holds_its_name() -> None:
    going = topic("old", topicName="shared", deleting=True, status=ON_BROKERS)
    refusal = check_topic(topic("new", topicName="shared", created="2024-02-01T00:00:00Z"), [going])
    assert refusal is not None and "goes ahead once it is gone" in refusal.message


def test_topics_of_another_cluster_do_not_collide() -> None:
    other = topic("a.b", cluster="bc2")
    assert (
        check_topic(topic("a-b", topicName="a_b", created="2024-03-01T00:00:00Z"), [other]) is None
    )


# -- configs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configs", "words"),
    [
        ({"retention.ms": "-5"}, "retention.ms='-5': must be at least -1"),
        ({"retension.ms": "1000"}, "unknown topic config 'retension.ms'"),
        ({"segment.bytes": "13"}, "segment.bytes='13': must be at least 64"),
        ({"cleanup.policy": "compactt"}, "Kafka allows compact, delete"),
        ({"min.insync.replicas": "0"}, "must be at least 1"),
        ({"min.insync.replicas": "4"}, "more than the replicationFactor 3"),
    ],
)
def test_bad_configs_are_refused_with_the_rule(configs: dict[str, str], words: str) -> None:
    refusal = check_topic(topic("t", configs=configs), [])
    assert refusal is not None and refusal.reason == "InvalidConfig"
    assert words in refusal.message


def test_every_bad_config_is_named_at_once() -> None:
    refusal = check_topic(topic("t", configs={"retention.ms": "-5", "x.y": "1"}), [])
    assert refusal is not None
    assert refusal.message == (
        "retention.ms='-5': must be at least -1 (-1 means no time limit); "
        "unknown topic config 'x.y'"
    )


def test_min_isr_in_two_places_must_agree() -> None:
    spec: dict[str, Any] = {"minInsyncReplicas": 2, "configs": {"min.insync.replicas": "3"}}
    refusal = check_topic(topic("t", **spec), [])
    assert refusal is not None and "disagrees with spec.minInsyncReplicas 2" in refusal.message
    same: dict[str, Any] = {"minInsyncReplicas": 2, "configs": {"min.insync.replicas": "2"}}
    assert check_topic(topic("t", **same), []) is None


def test_the_name_is_checked_before_configs_and_configs_before_rivals() -> None:
    rival = topic("a.b")
    bad = topic("a-b", topicName="a_b", created="2024-05-01T00:00:00Z", configs={"x": "1"})
    refusal = check_topic(bad, [rival])
    assert refusal is not None and refusal.reason == "InvalidConfig"


# -- the configs in force -------------------------------------------------------------------------


def test_accepted_configs_carry_the_min_isr_field() -> None:
    t = topic("t", minInsyncReplicas=2, configs={"retention.ms": "1000"})
    assert topic_spec.accepted_configs(t.spec) == {
        "retention.ms": "1000",
        "min.insync.replicas": "2",
    }
    assert topic_spec.accepted_configs(topic("t").spec) == {}


def test_configs_in_force_come_from_the_status_not_the_spec() -> None:
    body = {
        "spec": {"configs": {"retention.ms": "-5"}, "minInsyncReplicas": 3},
        "status": {"configs": {"retention.ms": "1000", "min.insync.replicas": "2"}},
    }
    configs = topic_spec.configs_in_force(body)
    assert configs == {"retention.ms": "1000", "min.insync.replicas": "2"}
    assert topic_spec.min_insync_replicas(configs) == 2
    assert topic_spec.configs_in_force({"spec": {}, "status": {"configs": {}}}) == {}


def test_a_topic_without_recorded_configs_sends_its_spec_s_valid_entries() -> None:
    body = {"spec": {"configs": {"retention.ms": "1000", "bogus": "1", "segment.ms": "0"}}}
    assert topic_spec.configs_in_force(body) == {"retention.ms": "1000"}
    assert topic_spec.min_insync_replicas({}) == 1


# -- status and events ---------------------------------------------------------------------------


def test_a_refusal_is_the_ready_condition_and_one_event() -> None:
    t = topic("t", configs={"retention.ms": "-5"})
    refusal = check_topic(t, [])
    assert refusal is not None
    status, events = topic_spec.ready_status(t, {}, refusal, now=NOW)
    (ready,) = status["conditions"]
    assert ready["type"] == "Ready" and ready["status"] == "False"
    assert ready["reason"] == "InvalidConfig" and ready["message"] == refusal.message
    assert ready["observedGeneration"] == 3 and ready["lastTransitionTime"]
    assert status["observedGeneration"] == 3
    assert "configs" not in status and "topicName" not in status
    assert events == [("Warning", "InvalidConfig", refusal.message)]
    # The next periodic pass finds the same refusal: same status, no second Event.
    again, events = topic_spec.ready_status(t, status, refusal, now=NOW)
    assert again == status and events == []


def test_an_accepted_topic_records_its_name_and_configs() -> None:
    t = topic("t", topicName="k", minInsyncReplicas=2)
    status, events = topic_spec.ready_status(t, {"configs": {"stale": "1"}}, None, now=NOW)
    assert status["topicName"] == "k"
    assert status["configs"] == {"min.insync.replicas": "2"}
    assert status["conditions"][0]["reason"] == "Reconciled" and events == []


# -- PartitionReassignment: each partition once ----------------------------------------------------


def test_a_reassignment_naming_a_partition_twice_is_refused() -> None:
    target = {"topic": "orders", "partition": 0, "replicas": [1, 2]}
    spec = {"clusterName": "bc1", "partitions": [target, {**target, "replicas": [2, 3]}]}
    with pytest.raises(ValidationError, match="orders-0 is named twice"):
        PartitionReassignmentSpec.model_validate(spec)
    other = {**target, "partition": 1}
    PartitionReassignmentSpec.model_validate({**spec, "partitions": [target, other]})


def test_the_ready_message_of_a_topic_of_100000_leaderless_partitions_is_bounded() -> None:
    """Issue 39: every partition of a 100,000-partition Topic offline made a message over the
    32 KiB a condition holds, and the status write was refused every pass."""
    t = Topic.model_validate(
        {
            "metadata": {"name": "big", "namespace": "ns", "generation": 1},
            "spec": {"clusterName": "c", "partitions": 100_000, "replicationFactor": 3},
        }
    )
    states = [
        {"partition": p, "replicas": [], "leader": -1, "leaderEpoch": 1, "isr": [1],
         "offlineReplicas": [1, 2, 3]}
        for p in range(100_000)
    ]  # fmt: skip
    status, _ = ready_status(t, {"partitions": states}, None, now=0.0)
    (ready,) = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready["status"] == "False" and ready["reason"] == "OfflinePartitions"
    assert "[0, 1, 2" in ready["message"] and "and 99980 more" in ready["message"]
    assert len(ready["message"]) < 1000
    Condition.model_validate(ready)
