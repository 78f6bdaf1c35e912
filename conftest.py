"""Session wiring for every tier: how tests are shared out between pytest-xdist workers.

``tests/tiers.py`` has the rules. Here: with ``--dist loadfile`` the scheduler takes a module as
one unit of work and Apache Kafka's modules together as one; the Kafka unit is queued first and
e2e next (the longest units), so short modules fill the end of the run on whichever worker is
free; and each worker picks loopback ports from its own slice, so that two workers never give
two processes the same port.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from jbod_broker.local import PORT_SLICE_ENV
from tests.tiers import KAFKA_JVMS, unit_of_work


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... in a worker only
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and count:
        os.environ.setdefault(PORT_SLICE_ENV, f"{int(worker[2:])}/{int(count)}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Stable: a module's tests keep their order. The scheduler queues units in this order.
    items.sort(
        key=lambda i: (unit_of_work(i.nodeid) != KAFKA_JVMS, not i.nodeid.startswith("e2e/"))
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with Apache Kafka's modules as one file (see tests/tiers.py)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False  # keep the order above, not the most tests first

    class KafkaModulesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_work(nodeid)

    return KafkaModulesTogether(config, log)
