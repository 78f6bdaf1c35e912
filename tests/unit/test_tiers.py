"""The rules `make test`'s parallel run schedules by (tests/tiers.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.tiers import KAFKA_JVM_MODULES, KAFKA_JVMS, unit_of_work

REPO = Path(__file__).resolve().parents[2]


def test_kafka_modules_are_one_unit_and_every_other_module_its_own() -> None:
    assert unit_of_work("e2e/test_kafka_rebalance.py::test_x[a::b]") == KAFKA_JVMS
    assert unit_of_work("tests/integration/test_kafka_jars.py::test_y") == KAFKA_JVMS
    assert unit_of_work("e2e/test_rebalance.py::test_z") == "e2e/test_rebalance.py"
    assert unit_of_work("tests/integration/test_cli.py") == "tests/integration/test_cli.py"


def test_the_kafka_list_names_modules_that_exist_and_every_module_that_starts_kafka() -> None:
    """A renamed module would drop out of the Kafka unit silently; one that starts Kafka
    itself (not through the kafka_jbod fixture, which collection checks) must be listed."""
    assert all((REPO / m).is_file() for m in KAFKA_JVM_MODULES), KAFKA_JVM_MODULES
    starts = {
        str(p.relative_to(REPO))
        for tier in ("tests/integration", "e2e")
        for p in (REPO / tier).glob("test_*.py")
        if re.search(r"\bkafka_jbod\b|\bKafkaCluster\(", p.read_text(encoding="utf-8"))
    }
    assert starts == KAFKA_JVM_MODULES
