"""A LogDirMove to a directory without room (issue 13), against the real API server, the
operator process and a broker whose dir ``b`` is a 4 MiB tmpfs.

Kafka would start the copy, hit ENOSPC and take the whole disk offline (KIP-112). The operator
checks the room with what the broker reports before it sends anything: the LogDirMove ends
Failed, its reason names the free and the needed bytes, and nothing moved (no future copy, no
throttle, the replica where it was, the small disk still online).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.scenario import LeaderTracker, Scenario
from e2e.test_logdirmove_bad_input import (
    assert_nothing_moved,
    failed,
    log_dirs,
    manifest,
    mv,
    placement,
)
from jbod_broker.storage.names import TopicPartition
from tests.integration.counting import fill_bytes
from tests.kube_cluster import KubeCluster
from tests.tmpfs import mounted_tmpfs

pytestmark = pytest.mark.e2e

NS = "ldm-room"
SMALL = "4m"


@pytest.fixture(scope="module")
def sc(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    work: Path = tmp_path_factory.mktemp("ldm-room")
    small = work / "brokers" / "broker-0" / "data-b"
    with (
        mounted_tmpfs(str(small), SMALL),
        Scenario(
            kube_cluster,
            work,
            NS,
            brokers=1,
            dirs=("a", "b"),
            operator_env={"JBOD_OPERATOR_MOVE_POLL_SECONDS": "0.5"},
        ) as s,
    ):
        yield s


def test_a_move_to_a_dir_without_room_fails_before_anything_is_sent(sc: Scenario) -> None:
    tp = TopicPartition("big", 0)
    sc.create_topic("big", partitions=1, rf=1, min_isr=1)

    async def fill() -> None:
        await fill_bytes(LeaderTracker(sc, [tp]), [tp], 10)
        await sc.close_clients()

    asyncio.run(fill())
    before, futures = placement(sc)
    assert before[(0, "big", 0)].endswith("/data-a") and not futures, before

    cond = failed(sc, manifest("too-big", moves=[mv(0, "big", 0, "b")]), "InsufficientSpace")
    message = cond["message"]
    need = int(re.search(r"no room for (\d+) bytes", message).group(1))  # type: ignore[union-attr]
    free = int(re.search(r": (\d+) bytes free", message).group(1))  # type: ignore[union-attr]
    assert "data-b" in message and need > 9 * 1024 * 1024 > 4 * 1024 * 1024 >= free, message
    assert_nothing_moved(sc, before)
    small = next(d for d in log_dirs(sc, 0) if d["path"].endswith("/data-b"))
    assert small["is_live"] and small["error"] is None, small
