"""Apache Kafka's own broker and tools from Maven run here (``tests/kafka_jars.py``): the
yardstick the protocol bench measures against, and the tools the format tests use.

One combined KRaft node: formatted with Kafka's StorageTool, started, a topic created with
Kafka's topic command, a few thousand records produced with Kafka's ProducerPerformance (its
own count must say every record was acknowledged), then stopped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kafka_jars import (
    PRODUCER_PERFORMANCE,
    QUICK_START_JVM,
    TOPIC_COMMAND,
    KafkaCluster,
    KafkaJarsMissing,
    classpath,
    run_class,
)

pytestmark = pytest.mark.integration

RECORDS = 5000


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    try:
        classpath()
    except KafkaJarsMissing as e:
        pytest.fail(str(e), pytrace=False)


def test_kafka_broker_starts_takes_a_topic_and_records_then_stops(tmp_path: Path) -> None:
    with KafkaCluster(tmp_path, jvm_options=QUICK_START_JVM) as kafka:
        node = kafka.nodes[0]
        run_class(
            TOPIC_COMMAND,
            "--bootstrap-server",
            kafka.bootstrap,
            "--create",
            "--topic",
            "perf",
            "--partitions",
            "2",
            "--replication-factor",
            "1",
        )
        described = run_class(
            TOPIC_COMMAND, "--bootstrap-server", kafka.bootstrap, "--describe", "--topic", "perf"
        ).stdout
        assert re.search(r"Topic: perf\s+TopicId: \S+\s+PartitionCount: 2", described), described

        produced = run_class(
            PRODUCER_PERFORMANCE,
            "--topic",
            "perf",
            "--num-records",
            str(RECORDS),
            "--record-size",
            "1024",
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={kafka.bootstrap}",
            "acks=all",
        ).stdout
        # The tool's last line: "<n> records sent, ... records/sec (... MB/sec), ... latency".
        totals = re.findall(r"^(\d+) records sent", produced, re.M)
        assert totals and int(totals[-1]) == RECORDS, produced

        # The records are in Kafka's log dir: both partitions' folders, with data.
        logs = sorted(node.log_dir.glob("perf-*/00000000000000000000.log"))
        assert [p.parent.name for p in logs] == ["perf-0", "perf-1"]
        assert sum(p.stat().st_size for p in logs) > RECORDS * 1024
    assert node.proc is not None and node.proc.returncode is not None
    assert not node.alive
