"""The controller passes on every broker's Kafka endpoint as its heartbeats said (issue 18)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from jbod_broker import wire
from jbod_operator.clients.brokers import BrokerPool
from jbod_operator.settings import OperatorSettings


def pool() -> BrokerPool:
    kube: Any = None  # endpoints() never reaches the API server
    return BrokerPool(OperatorSettings(), kube)


def test_endpoints_carry_the_kafka_endpoint_each_broker_last_sent() -> None:
    p = pool()
    p.note_kafka_endpoint("ns", "main", 0, "main-broker-0.main-brokers.ns.svc:9093")
    p.note_kafka_endpoint("ns", "main", 1, "old:1")
    p.note_kafka_endpoint("ns", "main", 1, "main-broker-1.main-brokers.ns.svc:9093")
    p.note_kafka_endpoint("ns", "other", 2, "elsewhere:9093")
    eps = {e.broker_id: e.kafka_endpoint for e in p.endpoints("ns", "main", [0, 1, 2])}
    assert eps == {
        0: "main-broker-0.main-brokers.ns.svc:9093",
        1: "main-broker-1.main-brokers.ns.svc:9093",
        2: None,  # no heartbeat with one: left out of Kafka Metadata
    }
    p.note_kafka_endpoint("ns", "main", 0, None)  # restarted without a Kafka listener
    assert p.endpoints("ns", "main", [0])[0].kafka_endpoint is None


@pytest.mark.parametrize("bad", ["host", "host:0", "host:70000", "a b:1", "PLAINTEXT://h:1", ""])
def test_a_heartbeat_with_a_malformed_endpoint_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError):
        wire.BrokerHeartbeat(broker_id=0, kafka_endpoint=bad)


def test_endpoints_split_back_into_host_and_port() -> None:
    assert wire.split_kafka_endpoint("b-0.svc:9093") == ("b-0.svc", 9093)
    assert wire.split_kafka_endpoint("[::1]:9093") == ("::1", 9093)
