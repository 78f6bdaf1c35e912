"""Issue 18: an idempotent producer's retry is never written twice, through a SIGKILL and
restart, a leader failover and a KIP-113 move swap (real broker processes, HTTP produce).

The producer here is the test: it sends batches with a producer id, epoch and sequence as
Kafka's idempotent producer does, then sends one of its last batches again (as a producer does
when the answer was lost). The broker must answer that retry with the offsets the batch got the
first time and leave the log end where it was; the next batch in sequence is appended, a gap is
refused with OUT_OF_ORDER_SEQUENCE_NUMBER, and a consumer reads every record exactly once.

Small segments (``segment.bytes``) make the brokers roll, so producer-state snapshots and the
replay after the last one are both on the path.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.counting import consume_all
from jbod_broker.errors import OutOfOrderSequenceError
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from tests.integration.controller_stub import ControllerStub

pytestmark = pytest.mark.integration

PID = 7_000
BATCH = 10
CONFIGS = {"segment.bytes": str(8 * 1024)}
SETTINGS = {
    "replica.lag.time.max.ms": "1500",
    "replica.fetch.wait.max.ms": "200",
    "replica.high.watermark.checkpoint.interval.ms": "200",
    "controller.retry.backoff.ms": "50",
    "controller.retry.backoff.max.ms": "500",
}


def batch(seq: int, *, epoch: int = 0) -> bytes:
    """The producer's batch number ``seq // BATCH``: records ``seq`` to ``seq + BATCH - 1``."""
    return build_batch(
        [(None, b"rec-%08d" % (seq + i) + b"." * 100) for i in range(BATCH)],
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=seq,
    )


async def produce_batches(c: BrokerClient, tp: TopicPartition, count: int) -> list[int]:
    """Send ``count`` batches in sequence (acks=all); returns each batch's base offset."""
    out = []
    for i in range(count):
        resp = await c.produce(tp.topic, tp.partition, batch(i * BATCH))
        assert resp is not None
        out.append(resp.base_offset)
    return out


async def log_end(c: BrokerClient, tp: TopicPartition) -> int:
    """The log end offset of the broker's current replica (not the high watermark: after a
    failover the new leader's high watermark may still be below its log end)."""
    resp = await c.describe_log_dirs(topics=[tp.topic])
    (end,) = [
        r.log_end_offset
        for d in resp.log_dirs
        for r in d.partitions
        if d.is_live and not r.is_future and (r.topic, r.partition) == (tp.topic, tp.partition)
    ]
    return end


async def assert_retries_answered(
    c: BrokerClient, tp: TopicPartition, offsets: list[int], *, back: int = 5
) -> None:
    """Each of the last ``back`` batches sent again: its original offsets, nothing written."""
    end = await log_end(c, tp)
    for i in range(len(offsets) - back, len(offsets)):
        resp = await c.produce(tp.topic, tp.partition, batch(i * BATCH))
        assert resp is not None
        assert (resp.base_offset, resp.last_offset) == (offsets[i], offsets[i] + BATCH - 1)
    assert await log_end(c, tp) == end


async def assert_exactly_once(c: BrokerClient, tp: TopicPartition, records: int) -> None:
    values = await consume_all(lambda _tp: c, tp)
    assert [v[:12] for v in values] == [b"rec-%08d" % i for i in range(records)]


def snapshot_files(cluster: LocalCluster, broker: int, tp: TopicPartition) -> list[str]:
    out = []
    for d in cluster[broker].log_dirs:
        folder = os.path.join(d, f"{tp.topic}-{tp.partition}")
        if os.path.isdir(folder):
            out += [n for n in os.listdir(folder) if n.endswith(".snapshot")]
    return out


@pytest.fixture
async def ctl() -> AsyncIterator[ControllerStub]:
    c = ControllerStub()
    await c.start()
    try:
        yield c
    finally:
        if c.cluster is not None:
            await asyncio.to_thread(c.cluster.stop)
        await c.stop()


async def start_cluster(ctl: ControllerStub, tmp_path: Path, size: int) -> LocalCluster:
    cluster = LocalCluster(
        str(tmp_path / "cluster"),
        size=size,
        num_dirs=2,
        controller_url=ctl.url,
        settings=dict(SETTINGS),
    )
    ctl.cluster = cluster
    await asyncio.to_thread(cluster.start)
    return cluster


async def test_a_retry_after_sigkill_and_restart_is_answered_with_its_offsets(
    ctl: ControllerStub, tmp_path: Path
) -> None:
    cluster = await start_cluster(ctl, tmp_path, 1)
    (tp,) = await ctl.create_topic("idem", 1, 1, configs=CONFIGS)
    c = ctl.client(0)
    offsets = await produce_batches(c, tp, 30)
    assert snapshot_files(cluster, 0, tp), "the segments rolled: snapshots were written"

    cluster[0].kill()  # no clean-shutdown snapshot: the restart replays after the last roll
    await asyncio.to_thread(cluster[0].start)
    await ctl.broker_back(0)

    await assert_retries_answered(c, tp, offsets)
    with pytest.raises(OutOfOrderSequenceError):
        await c.produce(tp.topic, tp.partition, batch(31 * BATCH))  # skips batch 30
    resp = await c.produce(tp.topic, tp.partition, batch(30 * BATCH))
    assert resp is not None and resp.base_offset == offsets[-1] + BATCH
    await assert_exactly_once(c, tp, 31 * BATCH)


async def test_a_retry_to_the_new_leader_after_a_failover_is_answered_with_its_offsets(
    ctl: ControllerStub, tmp_path: Path
) -> None:
    cluster = await start_cluster(ctl, tmp_path, 3)
    (tp,) = await ctl.create_topic("idem", 1, 3, min_isr=2, configs=CONFIGS)
    old = ctl.leader_of(tp)
    offsets = await produce_batches(ctl.client(old), tp, 30)  # acks=all: on every follower

    cluster[old].kill()
    await ctl.broker_died(old)
    new = ctl.leader_of(tp)
    assert new != old
    c = ctl.client(new)

    await assert_retries_answered(c, tp, offsets)
    resp = await c.produce(tp.topic, tp.partition, batch(30 * BATCH))
    assert resp is not None and resp.base_offset == offsets[-1] + BATCH
    await assert_exactly_once(c, tp, 31 * BATCH)


async def test_a_retry_right_after_a_move_swap_and_after_a_restart_is_recognised(
    ctl: ControllerStub, tmp_path: Path
) -> None:
    cluster = await start_cluster(ctl, tmp_path, 1)
    (tp,) = await ctl.create_topic("idem", 1, 1, configs=CONFIGS)
    c = ctl.client(0)
    offsets = await produce_batches(c, tp, 30)
    before = sorted(snapshot_files(cluster, 0, tp))

    src = next(d for d in cluster[0].log_dirs if os.path.isdir(os.path.join(d, "idem-0")))
    dest = next(d for d in cluster[0].log_dirs if d != src)
    res = await c.alter_replica_log_dirs([(tp.topic, tp.partition, dest)])
    assert res.partitions[0].error is None, res
    while True:
        r = await c.describe_replica_log_dirs([(tp.topic, tp.partition)], wait_ms=10_000)
        info = r.partitions[0]
        if info.state.finished:
            break
    assert info.state is wire.MoveState.DONE and info.current_log_dir == dest, info
    moved = os.path.join(dest, "idem-0")
    assert sorted(n for n in os.listdir(moved) if n.endswith(".snapshot")) == before

    await assert_retries_answered(c, tp, offsets)  # from the state the swap carried in memory

    cluster[0].kill()
    await asyncio.to_thread(cluster[0].start)
    await ctl.broker_back(0)
    await assert_retries_answered(c, tp, offsets)  # from the carried snapshots and the replay

    resp = await c.produce(tp.topic, tp.partition, batch(30 * BATCH))
    assert resp is not None and resp.base_offset == offsets[-1] + BATCH
    await assert_exactly_once(c, tp, 31 * BATCH)
