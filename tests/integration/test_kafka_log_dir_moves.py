"""The LogDirMove adapter over Kafka's Admin API (``control/kafka_log_dir_moves.py``) against
real Apache Kafka 4.3: one dedicated KRaft controller and 4 brokers x 2 log dirs (the
``kafka_jbod`` fixture).

- A move under a throttle: the throttle is Kafka's broker config (DescribeConfigs reads it
  back), the move shows as a future copy growing in the target dir (progress and rate), a
  cancel points the replica back at its dir and the future copy is gone, a second start with
  the throttle lifted (no config left) ends with the replica in its target dir.
- The cordon of a drained dir is ``cordoned.log.dirs`` (DescribeLogDirs' flag and the config),
  set and lifted.
- A replica the broker does not host is "not there yet"; a dir the broker does not have is
  refused with Kafka's error name.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Iterator

import pytest

from jbod_broker import wire
from jbod_operator.clients.kafka_admin import KafkaAdmin, KafkaConnection
from jbod_operator.control.kafka_log_dir_moves import (
    COPY_THROTTLE,
    CORDONED_LOG_DIRS,
    KafkaLogDirMoves,
)
from jbod_operator.models.log_dir_move import Drain
from jbod_operator.plan.kafka_types import ConfigKind
from jbod_operator.plan.port_types import CancelMoves, Cordon, SetThrottle, Start, StartAnswer
from tests.integration.conftest import JBOD_BROKERS, JBOD_LOG_DIRS
from tests.kafka_jars import KafkaCluster
from tests.waiting import wait_async

with warnings.catch_warnings():  # kafka-python 3.0's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration

TOPIC = "ldm-adapter"
RECORDS = 6000
"""6000 x 1 KiB on partition 0: a copy that lasts seconds under THROTTLE."""
THROTTLE = 400_000


@pytest.fixture(scope="module")
def topic(kafka_jbod: KafkaCluster) -> Iterator[str]:
    """Partition 0 on brokers 1,2 with ~6 MiB; partition 1 on brokers 2,3, small."""
    client = KafkaAdminClient(bootstrap_servers=kafka_jbod.bootstrap)
    try:
        client.create_topics(
            [NewTopic(TOPIC, replica_assignments={0: [1, 2], 1: [2, 3]})],
            wait_for_metadata=True,
        )
    finally:
        client.close()
    producer = KafkaProducer(bootstrap_servers=kafka_jbod.bootstrap, acks="all")
    try:
        for i in range(RECORDS):
            producer.send(TOPIC, value=bytes(1024), partition=0 if i % 50 else 1)
        producer.flush(60)
    finally:
        producer.close()
    yield TOPIC


def run(coro_fn: Callable[[KafkaLogDirMoves, KafkaAdmin], Awaitable[None]], bootstrap: str) -> None:
    async def go() -> None:
        admin = KafkaAdmin(KafkaConnection(tuple(bootstrap.split(","))))
        try:
            await coro_fn(KafkaLogDirMoves(admin, poll_s=0.2), admin)
        finally:
            await admin.close()

    asyncio.run(go())


def test_a_throttled_move_shows_progress_cancels_and_ends_with_no_throttle_left(
    kafka_jbod: KafkaCluster, topic: str
) -> None:
    async def scenario(ex: KafkaLogDirMoves, admin: KafkaAdmin) -> None:
        assert await ex.cluster_size() == JBOD_BROKERS + 1  # ids 1-4; 0 answers as absent
        dirs = await ex.describe_dirs(list(range(JBOD_BROKERS + 1)))
        assert dirs[0] is None
        b1 = dirs[1]
        assert b1 is not None and len(b1.dirs) == JBOD_LOG_DIRS
        assert [d.name for d in b1.dirs] == sorted(
            wire.log_dir_short_name(str(p)) for p in kafka_jbod.broker(1).log_dirs
        )
        here = b1.locate(topic, 0)
        assert here is not None and here.replicas[(topic, 0)] >= RECORDS * 1024 // 2
        there = next(d for d in b1.dirs if d.path != here.path)
        replica = (1, topic, 0)

        async def throttle() -> str | None:
            entry = (await admin.describe_configs(ConfigKind.BROKER, "1")).get(COPY_THROTTLE)
            return None if entry is None else entry.value

        async def throttle_is(value: str | None) -> bool:
            return await throttle() == value

        await ex.set_throttle(SetThrottle((1,), THROTTLE))
        # Configs reach the broker's metadata a moment after the call: read back by condition.
        await wait_async(lambda: throttle_is(str(THROTTLE)), "the throttle set on broker 1")

        assert (await ex.start(Start(replica, there.path))).answer == StartAnswer.ACCEPTED
        assert await ex.wait_for_a_move_to_end({1: [(topic, 0)]}, 2.0) is True
        # The rate is the future copy's growth between two reads: on a busy machine the copy
        # can stall between two of them (rate 0, no ETA, truthfully), so read until it moved.

        async def moving() -> wire.ReplicaLogDirInfo | None:
            (info,) = await ex.describe_moves(1, [(topic, 0)])
            assert info.state in (wire.MoveState.COPYING, wire.MoveState.CATCHING_UP)
            assert (info.current_log_dir, info.future_log_dir) == (here.path, there.path)
            assert 0 < info.bytes_copied < info.bytes_total
            return info if info.rate_bytes_per_sec > 0 else None

        info = await wait_async(moving, "the copy's rate above 0", 30)
        assert info.rate_bytes_per_sec > 0 and info.eta_seconds is not None

        await ex.cancel(CancelMoves((replica,)))
        now = await ex.describe_dirs([1])
        b1_now = now[1]
        assert b1_now is not None
        back = b1_now.locate(topic, 0)
        assert back is not None and back.path == here.path
        assert not b1_now.has_future((topic, 0))
        (info,) = await ex.describe_moves(1, [(topic, 0)])
        assert (info.state, info.future_log_dir) == (wire.MoveState.NONE, None)

        # Again, the throttle lifted: no config left, and the move ends in its target dir.
        await ex.set_throttle(SetThrottle((1,), 0))
        await wait_async(lambda: throttle_is(None), "no throttle config left on broker 1")
        assert (await ex.start(Start(replica, there.path))).answer == StartAnswer.ACCEPTED

        async def moved() -> bool:
            bd = (await ex.describe_dirs([1]))[1]
            where = bd.locate(topic, 0) if bd else None
            return (
                bd is not None
                and where is not None
                and where.path == there.path
                and (not bd.has_future((topic, 0)))
            )

        await wait_async(moved, "the replica in its target dir, no future copy")

    run(scenario, kafka_jbod.bootstrap)


def test_the_cordon_of_a_drained_dir_is_cordoned_log_dirs(
    kafka_jbod: KafkaCluster, topic: str
) -> None:
    async def scenario(ex: KafkaLogDirMoves, admin: KafkaAdmin) -> None:
        path = str(kafka_jbod.broker(2).log_dirs[1])
        drain = Drain(broker_id=2, log_dir=wire.log_dir_short_name(path))

        async def cordoned() -> tuple[bool, str | None]:
            bd = (await ex.describe_dirs([2]))[2]
            d = bd.find(path) if bd else None
            assert d is not None
            cfg = await admin.describe_configs(ConfigKind.BROKER, "2")
            entry = cfg.get(CORDONED_LOG_DIRS)
            return d.cordoned, None if entry is None else entry.value

        assert await cordoned() == (False, None)
        await ex.cordon(Cordon(drain, True))
        await wait_async(lambda: _eq(cordoned(), (True, path)), "the dir cordoned")
        await ex.cordon(Cordon(drain, True))  # again: nothing changes
        assert await cordoned() == (True, path)
        await ex.cordon(Cordon(drain, False))
        await wait_async(lambda: _is_lifted(cordoned()), "the cordon lifted")

    run(scenario, kafka_jbod.bootstrap)


async def _eq(value: Awaitable[object], want: object) -> bool:
    return await value == want


async def _is_lifted(value: Awaitable[tuple[bool, str | None]]) -> bool:
    flag, config = await value
    return not flag and not config


def test_a_replica_not_hosted_waits_and_an_unknown_dir_is_refused(
    kafka_jbod: KafkaCluster, topic: str
) -> None:
    async def scenario(ex: KafkaLogDirMoves, admin: KafkaAdmin) -> None:
        target = str(kafka_jbod.broker(4).log_dirs[0])
        assert (await ex.start(Start((4, topic, 0), target))).answer == StartAnswer.NOT_THERE_YET
        refused = await ex.start(Start((2, topic, 1), "/no/such/dir"))
        assert refused.answer == StartAnswer.REFUSED and refused.message

    run(scenario, kafka_jbod.bootstrap)
