"""Kafka's own reassignment tool as issue 22's bench drives it, on Apache Kafka (three KRaft
nodes): a partition moves as planned, the wait ends when Kafka moves nothing, and the tool's
throttle stays on the brokers until ``--verify`` (the behaviour users forget, known-bugs.md)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kafka_jars import QUICK_START_JVM, TOPIC_COMMAND, KafkaCluster, run_class
from tests.kafka_reassign import execute, moves_in_flight, reassign_and_wait, tool_plan, verify
from tests.waiting import wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.admin
    from kafka.admin import ConfigResource, ConfigResourceType

pytestmark = pytest.mark.integration

THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka"), nodes=3, heap="384m", jvm_options=QUICK_START_JVM
    ) as k:
        run_class(
            TOPIC_COMMAND,
            "--bootstrap-server",
            k.bootstrap,
            "--create",
            "--topic",
            "t",
            "--replica-assignment",
            "1:2,2:3",
        )
        p = kafka.KafkaProducer(bootstrap_servers=k.bootstrap, acks="all")
        for i in range(2000):
            p.send("t", b"x" * 1000, partition=i % 2)
        p.flush()
        p.close()
        yield k


def replicas(admin: kafka.admin.KafkaAdminClient, partition: int) -> list[int]:
    (topic,) = admin.describe_topics(["t"])
    (p,) = [p for p in topic["partitions"] if p["partition_index"] == partition]
    return list(p["replica_nodes"])


def broker_throttles(admin: kafka.admin.KafkaAdminClient, broker: int) -> dict[str, str]:
    res = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker))])
    configs = res["broker"][str(broker)]
    return {k: v["value"] for k, v in configs.items() if k in THROTTLE_KEYS}


def test_the_tool_moves_the_plan_and_the_wait_ends_when_kafka_moves_nothing(
    cluster: KafkaCluster, tmp_path: Path
) -> None:
    plan = tool_plan({("t", 0): [3, 1]})
    wall = reassign_and_wait(cluster.bootstrap, plan, tmp_path)
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        assert wall > 0
        assert replicas(admin, 0) == [3, 1]
        assert moves_in_flight(admin, [("t", 0), ("t", 1)]) == set()
    finally:
        admin.close()


def test_the_tools_throttle_stays_until_verify(cluster: KafkaCluster, tmp_path: Path) -> None:
    plan = tool_plan({("t", 1): [1, 2]})
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        execute(cluster.bootstrap, plan, tmp_path, "--throttle", "50000000")
        assert broker_throttles(admin, 1) == dict.fromkeys(THROTTLE_KEYS, "50000000")
        # 1 MB under a 50 MB/s throttle.
        wait_for(lambda: not moves_in_flight(admin, [("t", 1)]), "Kafka to finish moving t-1", 60)
        # Done moving, and the throttle is still there: only --verify takes it away.
        assert broker_throttles(admin, 1) == dict.fromkeys(THROTTLE_KEYS, "50000000")
        assert verify(cluster.bootstrap, plan, tmp_path)
        assert broker_throttles(admin, 1) == {}
        assert replicas(admin, 1) == [1, 2]
    finally:
        admin.close()
