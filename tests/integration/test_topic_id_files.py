"""Topic ids (KIP-516) on a broker process: ``partition.metadata`` is written when the replica
is created, read by Kafka's own reader (``PartitionMetadataFile`` from the 4.3 jars), kept
through a restart and through a KIP-113 move to another disk, and a LeaderAndIsr naming
another id is refused with INCONSISTENT_TOPIC_ID while the replica keeps serving."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import PARTITION_METADATA, new_topic_id
from jbod_broker.storage.records import build_batch
from tests.kafka_jars import KafkaJarsMissing, classpath, read_partition_metadata

TOPIC = "ids"


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    try:
        classpath()
    except KafkaJarsMissing as e:
        pytest.fail(str(e), pytrace=False)


def _state(topic_id: str, epoch: int) -> wire.LeaderAndIsrRequest:
    return wire.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=1,
        partitions=[
            wire.LeaderAndIsrPartition(
                topic=TOPIC,
                partition=0,
                leader=0,
                leader_epoch=epoch,
                isr=[0],
                replicas=[0],
                is_new_replica=True,
                topic_id=topic_id,
            )
        ],
    )


def _replica_dirs(cluster: LocalCluster) -> list[Path]:
    return [p for d in cluster[0].log_dirs if (p := Path(d) / f"{TOPIC}-0").is_dir()]


async def _refused(c: BrokerClient, other: str, epoch: int, *, serving: bool = True) -> None:
    (res,) = (await c.leader_and_isr(_state(other, epoch))).partitions
    assert res.error == "INCONSISTENT_TOPIC_ID", res
    if serving:
        # Nothing changed: still the leader at the old epoch, still taking records.
        await c.produce(TOPIC, 0, build_batch([(None, b"after refusal")]))


def test_partition_metadata_written_kept_moved_and_checked(tmp_path: Path) -> None:
    tid, other = new_topic_id(), new_topic_id()
    cluster = LocalCluster(str(tmp_path), size=1, num_dirs=2)
    cluster.start()
    try:

        async def create_and_refuse() -> None:
            async with BrokerClient(cluster[0].url, token=cluster.token) as c:
                (res,) = (await c.leader_and_isr(_state(tid, 0))).partitions
                assert res.error is None
                await c.produce(TOPIC, 0, build_batch([(b"k", b"v")] * 10))
                await _refused(c, other, 1)
                meta = await c.metadata()
                assert [(p.topic, p.topic_id) for p in meta.partitions] == [(TOPIC, tid)]

        asyncio.run(create_and_refuse())
        (replica,) = _replica_dirs(cluster)
        assert read_partition_metadata(replica) == (0, tid)

        cluster[0].stop()
        cluster[0].start()

        async def after_restart_then_move() -> Path:
            async with BrokerClient(cluster[0].url, token=cluster.token) as c:
                # Checked against the file read at load (the broker serves the replica only
                # once a controller's state is accepted).
                await _refused(c, other, 1, serving=False)
                (res,) = (await c.leader_and_isr(_state(tid, 1))).partitions
                assert res.error is None
                await c.produce(TOPIC, 0, build_batch([(None, b"after restart")]))
                dest = next(d for d in cluster[0].log_dirs if not str(replica).startswith(d))
                (moved,) = (await c.alter_replica_log_dirs([(TOPIC, 0, dest)])).partitions
                assert moved.error is None
                while True:  # long-polls until the move ends
                    (info,) = (
                        await c.describe_replica_log_dirs([(TOPIC, 0)], wait_ms=20_000)
                    ).partitions
                    if info.state.finished:
                        break
                assert info.state == wire.MoveState.DONE, info
                await _refused(c, other, 2)  # the moved replica still knows its id
                return Path(dest) / f"{TOPIC}-0"

        moved_to = asyncio.run(after_restart_then_move())
        assert _replica_dirs(cluster) == [moved_to]
        assert (moved_to / PARTITION_METADATA).is_file()
        assert read_partition_metadata(moved_to) == (0, tid)
    finally:
        cluster.stop()
