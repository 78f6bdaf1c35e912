"""Kafka's error names the operator decides on have one home (``plan.kafka_types.KafkaErrorName``)
and one spelling: Kafka's own, as kafka-python's error classes carry it (the name the Admin
client's answers and ``KafkaAdminError.error`` give)."""

from __future__ import annotations

import warnings

import pytest

from jbod_operator.plan.kafka_types import KafkaErrorName

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_errors


def _kafka_names() -> set[str]:
    out: set[str] = set()
    todo: list[type] = [kafka_errors.BrokerResponseError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        message = getattr(cls, "message", None)
        if isinstance(message, str):
            out.add(message)
    return out


@pytest.mark.parametrize("name", list(KafkaErrorName))
def test_each_name_is_kafka_s(name: KafkaErrorName) -> None:
    assert name.value in _kafka_names()
    assert name.name == name.value  # compares and hashes as the name read from Kafka
    assert name == name.value and hash(name) == hash(name.value)
