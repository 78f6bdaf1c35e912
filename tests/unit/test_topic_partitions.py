"""A Topic's missing partitions, planned without I/O (``plan.topic_partitions``, issue 38)."""

from __future__ import annotations

from typing import Any

import pytest

from jbod_broker import wire
from jbod_operator.models import BrokerCluster, Topic
from jbod_operator.plan.topic_partitions import (
    TopicNotReady,
    dir_usages,
    missing_partitions,
    pass_status,
    plan_creation,
    plan_new_partitions,
)
from jbod_operator.plan.topic_spec import Refusal

NOW = 1_780_000_000.0
"""A fixed observation time: plan/ reads no clock."""


def topic(partitions: int = 3, rf: int = 2, **spec: Any) -> Topic:
    return Topic.model_validate(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "Topic",
            "metadata": {"name": "orders", "namespace": "ns", "generation": 4},
            "spec": {
                "clusterName": "c",
                "partitions": partitions,
                "replicationFactor": rf,
                **spec,
            },
        }
    )


def cluster(replicas: int = 3) -> BrokerCluster:
    return BrokerCluster.model_validate(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "BrokerCluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {
                "replicas": replicas,
                "logDirs": [{"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}],
            },
        }
    )


def log_dir(path: str, usable: int) -> wire.LogDirDescription:
    return wire.LogDirDescription(
        path=path,
        is_live=True,
        error=None,
        total_bytes=1 << 40,
        usable_bytes=usable,
        cordoned=False,
        partitions=[],
    )


def describes(live: list[int]) -> dict[int, wire.DescribeLogDirsResponse | None]:
    """Brokers 0-2, those in ``live`` answering with two dirs, ``data-b`` the roomier."""
    return {
        b: wire.DescribeLogDirsResponse(
            broker_id=b,
            log_dirs=[log_dir(f"/v/{b}/data-a", 1 << 30), log_dir(f"/v/{b}/data-b", 1 << 34)],
        )
        if b in live
        else None
        for b in range(3)
    }


def test_dirs_are_named_by_the_one_rule() -> None:
    """The BrokerCluster's name of a dir (``a``), as everywhere else, not its folder."""
    d = describes([0])[0]
    assert d is not None
    assert [u.name for u in dir_usages(d)] == ["a", "b"]
    assert [u.name for u in dir_usages(d)] == [wire.log_dir_short_name(x.path) for x in d.log_dirs]


def test_new_partitions_go_to_live_brokers_in_the_roomiest_dir() -> None:
    out = plan_new_partitions(topic(), cluster(), describes([0, 1, 2]), {})
    assert sorted(out) == [0, 1, 2]
    for p, s in out.items():
        ids = [r["brokerId"] for r in s["replicas"]]
        assert len(set(ids)) == 2 and s["leader"] == ids[0] and s["isr"] == ids
        assert (s["leaderEpoch"], s["partitionEpoch"], s["offlineReplicas"]) == (0, 0, [])
        assert s["partition"] == p
    # The first replica a broker gets goes where the room is; the next counts it as planned.
    first = {r["brokerId"]: r["logDir"] for r in out[0]["replicas"]}
    assert all(d.endswith("/data-b") for d in first.values())
    assert {r["logDir"] for s in out.values() for r in s["replicas"]} <= {
        f"/v/{b}/data-{x}" for b in range(3) for x in "ab"
    }


def test_only_missing_partitions_are_planned_and_existing_replicas_are_kept() -> None:
    existing = {
        0: {"partition": 0, "replicas": [{"brokerId": 2}, {"brokerId": 0}]},
    }
    out = plan_new_partitions(topic(), cluster(), describes([0, 1, 2]), existing)
    assert sorted(out) == [1, 2]
    assert plan_new_partitions(topic(1), cluster(), describes([0, 1, 2]), existing) == {}


def test_too_few_live_brokers_is_not_ready_and_names_the_live_ones() -> None:
    with pytest.raises(TopicNotReady, match=r"needs 2 live brokers; 1 of 3 answer \(\[1\]\)") as e:
        plan_new_partitions(topic(), cluster(), describes([1]), {})
    assert e.value.reason == "NotEnoughBrokers"


def test_a_partition_decrease_is_refused() -> None:
    status = {"partitions": [{"partition": p} for p in range(3)]}
    with pytest.raises(TopicNotReady, match="cannot decrease from 3 to 2") as e:
        missing_partitions(topic(2), status)
    assert e.value.reason == "PartitionDecreaseRefused" and e.value.delay == 60
    assert missing_partitions(topic(4), status) and not missing_partitions(topic(3), status)


def test_the_creation_is_the_whole_state_of_record() -> None:
    t = topic(2, configs={"retention.ms": "1000"})
    c = plan_creation(t, cluster(), describes([0, 1, 2]), {}, now=NOW)
    assert c.new == {0, 1} and c.live == (0, 1, 2) and c.topic == "orders" and c.refusal is None
    assert [s["partition"] for s in c.status["partitions"]] == [0, 1]
    assert c.status["topicName"] == "orders" and c.status["topicId"]
    assert c.status["configs"]["retention.ms"] == "1000"
    ready = next(x for x in c.status["conditions"] if x["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Creating")
    assert ready["observedGeneration"] == 4
    # Partitions added later keep the topic id and the partitions there are.
    more = plan_creation(topic(3), cluster(), describes([0, 1, 2]), c.status, now=NOW)
    assert more.new == {2} and more.status["topicId"] == c.status["topicId"]
    assert more.status["partitions"][:2] == c.status["partitions"]


def test_a_refused_or_complete_topic_creates_nothing() -> None:
    stored = {"partitions": [{"partition": 0, "replicas": [{"brokerId": 0}]}], "topicId": "x"}
    no = Refusal("DuplicateTopicName", "taken")
    assert plan_creation(topic(2), cluster(), describes([]), stored, no, now=NOW).new == frozenset()
    assert plan_creation(topic(2), cluster(), describes([]), stored, no, now=NOW).refusal == no
    done = plan_creation(topic(1), cluster(), describes([]), stored, now=NOW)
    assert done.new == frozenset() and done.status == stored


def test_a_topic_from_before_topic_ids_gets_one_at_the_end_of_its_pass() -> None:
    stored = {"partitions": [{"partition": 0, "replicas": [{"brokerId": 0}], "leader": 0}]}
    status, events = pass_status(topic(1), stored, None, now=NOW)
    assert status["topicId"] and events == []
    refused, _ = pass_status(topic(1), stored, Refusal("InvalidConfig", "bad"), now=NOW)
    assert "topicId" not in refused
