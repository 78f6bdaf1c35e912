"""Which tests may share the machine with which: what `make test`'s parallel run reads.

`make test` runs the integration and e2e tiers on two pytest-xdist workers with
``--dist loadfile``, refined by the root ``conftest.py``: a test module is one unit of work, so
its fixtures (a broker cluster, an API server's objects, a Kafka cluster) are built once and its
tests run in order on one worker. Two rules refine that:

- :data:`KAFKA_JVM_MODULES` start Apache Kafka (one controller and four brokers: five JVMs).
  They form one unit, so two Kafka clusters never start side by side on a 2-core machine; the
  other worker runs our own, lighter tests meanwhile. ``tests/unit/test_tiers.py`` fails when a
  module that starts Kafka (the ``kafka_jbod`` fixture or its own ``KafkaCluster``) is not
  listed.
- :data:`SERIAL` marks modules that measure time (an event loop that answers within 100 ms, a
  failover within 10 s, a long poll that ends within seconds). A second worker's load would
  measure the machine, not the code: `make test` runs them afterwards, alone.
"""

from __future__ import annotations

import pytest

KAFKA_JVMS = "kafka-jvms"
"""The unit of work the modules below make together."""

KAFKA_JVM_MODULES = frozenset(
    {
        "tests/integration/test_kafka_admin.py",
        "tests/integration/test_kafka_jars.py",
        "tests/integration/test_kafka_log_dir_moves.py",
        "tests/integration/test_kafka_reassign_tool.py",
        "tests/integration/test_kafka_reassignments.py",
        "e2e/test_kafka_cluster.py",
        "e2e/test_kafka_log_dir_move.py",
        "e2e/test_kafka_reassignment.py",
        "e2e/test_kafka_reassignment_ha.py",
        "e2e/test_kafka_rebalance.py",
    }
)

SERIAL = pytest.mark.serial


def unit_of_work(nodeid: str) -> str:
    """The unit a test is scheduled in: its module, or :data:`KAFKA_JVMS`."""
    module = nodeid.split("::", 1)[0]
    return KAFKA_JVMS if module in KAFKA_JVM_MODULES else module
