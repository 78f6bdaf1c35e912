"""A Kafka client against brokers the operator controls (issue 18): the brokers tell the
operator their Kafka endpoints in heartbeats, the operator passes every live broker's on in
UpdateMetadata, and a client bootstrapping from one broker finds the leaders on the others,
produces at acks=all and reads everything back at the offsets it was given."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

from e2e.scenario import Scenario
from tests.kube_cluster import KubeCluster
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def sc(kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    with Scenario(kube_cluster, tmp_path, "kafka-clients") as s:
        yield s


def test_a_kafka_client_finds_every_broker_through_the_operator(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=3)
    assert sc.brokers is not None
    bootstrap = sc.brokers[0].kafka_endpoint
    want = {b.broker_id: b.kafka_endpoint for b in sc.brokers.brokers}
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})

    def metadata() -> Any:
        md = admin.list_topics(timeout=10)
        got = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
        parts = md.topics.get("orders")
        ok = got == want and parts is not None and len(parts.partitions) == len(tps)
        return parts if ok else None

    parts = wait_for(metadata, f"Metadata naming {want} and every partition", 30)
    for p, pm in parts.partitions.items():
        assert pm.leader == sc.leader(tps[p]) and len(pm.isrs) == 3

    acked: list[tuple[int, int, bytes]] = []
    prod = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "gzip"}
    )

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    for i in range(300):
        prod.produce("orders", value=b"v%d" % i, partition=i % 3, on_delivery=report)
    assert prod.flush(30) == 0
    assert len(acked) == 300

    cons = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        cons.assign(
            [
                confluent_kafka.TopicPartition("orders", p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(3)
            ]
        )
        got_back: list[tuple[Any, Any, Any]] = []
        deadline = time.monotonic() + 30
        while len(got_back) < len(acked):
            assert time.monotonic() < deadline, f"read {len(got_back)} of {len(acked)}"
            for m in cons.consume(100, timeout=0.5):
                assert m.error() is None, m.error()
                got_back.append((m.partition(), m.offset(), m.value()))
    finally:
        cons.close()
    assert sorted(got_back) == sorted(acked)
