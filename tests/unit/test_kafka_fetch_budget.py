"""Issue 36's pure rules for hostile Fetch and Metadata requests: the response budget spent
as partitions are read (``apis.FetchBudget``), a partition named twice served once (Kafka's
``LinkedHashMap``), Metadata read per topic from the controller's word and this broker's own
leaderships (``ReplicaManager.topic_metadata``), and a log read that can return nothing
touching no segment."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jbod_broker import wire
from jbod_broker.kafka.apis import FetchBudget, _unique_partitions
from jbod_broker.loop_slice import LoopSlice
from jbod_broker.storage.errors import OffsetOutOfRangeError
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from tests.unit.test_log import make_log
from tests.unit.test_replica_manager import lai, make


def test_the_budget_is_spent_as_partitions_take_records() -> None:
    b = FetchBudget(1000)
    assert (b.first, b.spent, b.limit(600)) == (True, False, 600)
    b.take(0)  # an empty partition takes nothing, and the next still gets its first batch whole
    assert b.first
    b.take(600)
    assert (b.first, b.left, b.limit(600), b.limit(300)) == (False, 400, 400, 300)
    assert b.fits(400) and not b.fits(401)
    b.take(400)
    assert (b.spent, b.limit(1 << 20), b.taken) == (True, 0, 1000)


def test_the_first_batch_goes_whole_past_the_budget_kip_74() -> None:
    b = FetchBudget(100)
    assert b.fits(5000) and not b.spent
    b.take(5000)
    assert (b.left, b.taken, b.spent) == (0, 5000, True)
    zero = FetchBudget(0)  # max_bytes 0 still lets the first batch through, as Kafka
    assert not zero.spent and zero.first
    assert FetchBudget(-5).left == 0


def test_a_partition_named_twice_is_served_once_at_its_first_place_with_its_last_values() -> None:
    def part(n: int, offset: int) -> Any:
        return SimpleNamespace(partition=n, fetch_offset=offset)

    topics = [
        SimpleNamespace(topic="a", partitions=[part(0, 1), part(1, 2)]),
        SimpleNamespace(topic="b", partitions=[part(0, 3)]),
        SimpleNamespace(topic="a", partitions=[part(0, 9)] * 3),
    ]
    wanted = asyncio.run(_unique_partitions(topics, LoopSlice()))
    assert [(tp, p.fetch_offset) for tp, p in wanted.items()] == [
        (TopicPartition("a", 0), 9),
        (TopicPartition("a", 1), 2),
        (TopicPartition("b", 0), 3),
    ]


def test_a_read_that_can_return_nothing_checks_the_offset_only(tmp_path: Path) -> None:
    lg = make_log(tmp_path)
    lg.append_as_leader(build_batch([(None, b"x" * 100)] * 3), leader_epoch=0)
    res = lg.read(0, 0, min_one=False)
    assert (res.data, res.log_end_offset) == (b"", 3)
    assert len(lg.read(0, 0).data) > 100  # with min_one the first batch still comes whole
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(4, 0, min_one=False)


def pm(topic: str, partition: int, leader: int) -> wire.PartitionMetadata:
    return wire.PartitionMetadata(
        topic=topic, partition=partition, leader=leader, leader_epoch=0, isr=[2], replicas=[2]
    )


def test_metadata_reads_the_topics_asked_for_with_own_leaderships_newer(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.update_metadata(
        wire.UpdateMetadataRequest(
            controller_id=0,
            controller_epoch=1,
            live_brokers=[],
            partitions=[pm("u", 1, 2), pm("u", 0, 2), pm("t", 0, 2)],
        )
    )
    assert [(p.partition, p.leader) for p in rm.topic_metadata("u", {})] == [(0, 2), (1, 2)]
    assert rm.topic_metadata("nope", {}) == []
    rm.leader_and_isr(lai(leader=1, epoch=3))  # t-0 led here now: newer than UpdateMetadata
    un = rm.unannounced_leaderships()
    assert un == {}  # t-0 is the controller's already
    assert [(p.leader, p.leader_epoch) for p in rm.topic_metadata("t", un)] == [(1, 3)]
    assert rm.metadata_topic_names(un) == ["t", "u"]
    assert [(p.topic, p.partition) for p in rm.metadata_response().partitions] == [
        ("t", 0),
        ("u", 0),
        ("u", 1),
    ]


def test_a_leadership_the_controller_has_not_announced_is_answered(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(leader=1, epoch=0))
    un = rm.unannounced_leaderships()
    assert un == {"t": [TopicPartition("t", 0)]}
    assert rm.metadata_topic_names(un) == ["t"]
    assert [p.leader for p in rm.topic_metadata("t", un)] == [1]
    # Gone by the time its topic's turn comes (a Metadata request served in slices): skipped.
    rm.partitions.clear()
    assert rm.topic_metadata("t", un) == []
