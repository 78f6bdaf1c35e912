"""One reader of Kafka's log dirs (``control.kafka_reads``) for every Kafka adapter: a broker
whose DescribeLogDirs does not answer is asked once more before it counts as not answering.
The LogDirMove adapter used to ask once (one timeout, and a live broker's dirs were "not
answering" for the pass) while the reassignment adapter asked twice."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from jbod_operator.clients.kafka_admin import KafkaAdminError
from jbod_operator.control import kafka_reads
from jbod_operator.control.kafka_log_dir_moves import KafkaLogDirMoves
from jbod_operator.control.kafka_snapshots import KafkaSnapshots
from jbod_operator.plan.kafka_types import (
    BrokerLogDirs,
    ClusterDescription,
    KafkaBroker,
    LogDir,
    LogDirReplica,
)


class FlakyAdmin:
    """Brokers 1 and 2; DescribeLogDirs of a broker fails as many times as ``fails`` says."""

    def __init__(self, fails: dict[int, int]) -> None:
        self.fails = dict(fails)
        self.asked: list[int] = []

    async def describe_cluster(self) -> ClusterDescription:
        return ClusterDescription("c", 1, tuple(KafkaBroker(b, "h", 9092) for b in (1, 2)))

    async def describe_log_dirs(self, brokers: Iterable[int]) -> list[BrokerLogDirs]:
        (b,) = list(brokers)
        self.asked.append(b)
        if self.fails.get(b, 0) > 0:
            self.fails[b] -= 1
            raise KafkaAdminError("DescribeLogDirs", "KafkaTimeoutError")
        future = LogDirReplica("t", 0, 10, 0, True)
        current = LogDirReplica("t", 0, 100, 0, False)
        return [
            BrokerLogDirs(
                b,
                (
                    LogDir(f"/k{b}/data-0", None, 1000, 500, False, (current,)),
                    LogDir(f"/k{b}/data-1", None, 1000, 500, False, (future,)),
                ),
            )
        ]

    async def describe_topics(self) -> list[object]:
        return []

    async def close(self) -> None:
        return None


@pytest.fixture(autouse=True)
def _no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_reads, "DIRS_RETRY_PAUSE_S", 0.0)


def test_the_reader_asks_again_once_then_gives_up() -> None:
    admin = FlakyAdmin({1: 1, 2: 2})
    assert asyncio.run(kafka_reads.read_log_dirs(admin, 1)).broker_id == 1  # type: ignore[arg-type]
    with pytest.raises(KafkaAdminError, match="KafkaTimeoutError"):
        asyncio.run(kafka_reads.read_log_dirs(admin, 2))  # type: ignore[arg-type]
    assert admin.asked == [1, 1, 2, 2]


def test_a_log_dir_move_reads_a_broker_that_missed_one_answer() -> None:
    """describe_dirs, describe_moves and the wait read through the one reader."""
    admin = FlakyAdmin({1: 1, 2: 2})
    ex = KafkaLogDirMoves(admin)  # type: ignore[arg-type]
    dirs = asyncio.run(ex.describe_dirs([1, 2]))
    assert dirs[1] is not None and dirs[2] is None
    admin.fails = {1: 1}
    (move,) = asyncio.run(ex.describe_moves(1, [("t", 0)]))
    assert move.future_log_dir == "/k1/data-1"
    admin.fails = {1: 1}
    assert asyncio.run(ex.wait_for_a_move_to_end({1: [("t", 0)]}, 0.0))


def test_a_rebalance_snapshot_reads_through_the_same_reader() -> None:
    admin = FlakyAdmin({2: 1})
    snap = asyncio.run(KafkaSnapshots(admin, "k", "ns", 0).snapshot("now"))  # type: ignore[arg-type]
    assert {d.broker_id for d in snap.log_dirs} == {1, 2}
