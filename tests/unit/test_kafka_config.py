"""The Kafka listener's settings (issue 18): Kafka's syntax, beside the HTTP ``listeners``."""

from __future__ import annotations

import pytest

from jbod_broker.config import ConfigError, load_config

BASE = {"JBOD_BROKER_ID": "1", "JBOD_LOG_DIRS": "/d", "JBOD_AUTH_DISABLED": "true"}


def test_without_kafka_listeners_the_broker_speaks_http_only() -> None:
    c = load_config(env=BASE)
    assert c.kafka_bind is None and c.kafka_advertised is None
    assert c.listeners == "http://127.0.0.1:9092"


def test_the_advertised_listener_defaults_to_the_bound_one() -> None:
    c = load_config(env={**BASE, "JBOD_KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:9093"})
    assert c.kafka_bind == ("127.0.0.1", 9093)
    assert c.kafka_advertised == ("127.0.0.1", 9093)


def test_a_wildcard_bind_advertises_the_pod_name() -> None:
    c = load_config(
        env={
            **BASE,
            "JBOD_KAFKA_LISTENERS": "PLAINTEXT://:9093",
            "JBOD_KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://b-1.b.ns.svc:9093",
        }
    )
    assert c.kafka_bind == ("", 9093)
    assert c.kafka_advertised == ("b-1.b.ns.svc", 9093)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"JBOD_KAFKA_LISTENERS": "SSL://h:9093"}, "PLAINTEXT://HOST:PORT"),
        ({"JBOD_KAFKA_LISTENERS": "PLAINTEXT://h:9093,PLAINTEXT://h:9094"}, "one PLAINTEXT"),
        ({"JBOD_KAFKA_LISTENERS": "PLAINTEXT://h:99999"}, "PLAINTEXT://HOST:PORT"),
        ({"JBOD_KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9093"}, "wildcard"),
        ({"JBOD_KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://h:1"}, "kafka.listeners is not"),
    ],
)
def test_listeners_that_cannot_work_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(env={**BASE, **env})
