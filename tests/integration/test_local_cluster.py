"""LocalCluster, the brokers-as-processes harness every integration test stands on: a start
that fails must not leave brokers running (a CI run ended with three leaked broker processes
after one broker of a cluster could not bind its port)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jbod_broker import local
from tests.unit.test_local_ports import listening

pytestmark = pytest.mark.integration

__all__ = ["listening"]


def test_a_cluster_whose_broker_fails_to_start_leaves_none_running(
    tmp_path: Path, listening: int
) -> None:
    c = local.LocalCluster(base_dir=str(tmp_path), size=2, num_dirs=1)
    c.brokers[1].kafka_port = listening  # taken: broker 1 exits with "address already in use"
    with pytest.raises(RuntimeError, match="broker 1 exited"):
        c.start()
    assert not [b.broker_id for b in c.brokers if b.alive]
