"""The Kafka adapter of PartitionReassignment (``control.kafka_reassignments``) against Apache
Kafka 4.3 (the ``kafka_jbod`` fixture: one KRaft controller, brokers 1-4 with 2 log dirs each),
driven through the executor interface the handler uses, no operator: Kafka's state read as the
partition state of record, a step submitted with its new replica's dir named first and landing
there, a throttled step seen in flight as this resource's (and as someone else's without the
status), its cancel restoring the original order and leader, the throttle configs set and
removed."""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import replace
from typing import Any

import pytest

from jbod_operator.clients.kafka_admin import KafkaAdmin, KafkaConnection
from jbod_operator.control.kafka_reassignments import KafkaReassignments
from jbod_operator.models import PartitionReassignment
from jbod_operator.plan import kafka_reassignment as kr
from jbod_operator.plan.kafka_types import ConfigKind
from jbod_operator.plan.port_types import PartView, Tell, Throttle, WritePartition
from tests.kafka_jars import KafkaCluster
from tests.waiting import wait_async

pytestmark = pytest.mark.integration

with warnings.catch_warnings():  # kafka-python 3.0's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

TOPIC = "adapter"
THROTTLE_KEYS = {*kr.BROKER_THROTTLE_KEYS, *kr.TOPIC_THROTTLE_KEYS}


@pytest.fixture(scope="module")
def topic(kafka_jbod: KafkaCluster) -> str:
    """Partition 0 on brokers 2,1 (2 leads), partition 1 on 1,2; 1 MiB in each."""
    client = KafkaAdminClient(bootstrap_servers=kafka_jbod.bootstrap)
    try:
        client.create_topics(
            [NewTopic(TOPIC, replica_assignments={0: [2, 1], 1: [1, 2]})],
            wait_for_metadata=True,
        )
    finally:
        client.close()
    producer = KafkaProducer(bootstrap_servers=kafka_jbod.bootstrap, acks="all", linger_ms=20)
    try:
        for i in range(2048):
            producer.send(TOPIC, value=bytes(1024), partition=i % 2)
        producer.flush(60)
    finally:
        producer.close()
    return TOPIC


def resource(current_batch: list[dict[str, Any]]) -> PartitionReassignment:
    return PartitionReassignment.model_validate(
        {
            "metadata": {"name": "pr", "namespace": "kafka"},
            "spec": {
                "clusterName": "jbod",
                "partitions": [
                    {"topic": TOPIC, "partition": 0, "replicas": [3, 1]},
                    {"topic": TOPIC, "partition": 1, "replicas": [4, 2]},
                ],
            },
            "status": {"phase": "Running", "currentBatch": current_batch},
        }
    )


async def throttles(admin: KafkaAdmin) -> dict[str, set[str]]:
    out = {}
    for b in range(1, 5):
        got = await admin.describe_configs(ConfigKind.BROKER, str(b))
        out[f"broker {b}"] = {k for k in got if k in THROTTLE_KEYS}
    got = await admin.describe_configs(ConfigKind.TOPIC, TOPIC)
    out["topic"] = {k for k in got if k in THROTTLE_KEYS}
    return {k: v for k, v in out.items() if v}


async def test_steps_throttles_and_a_cancel_through_the_executor(
    kafka_jbod: KafkaCluster, topic: str
) -> None:
    admin = KafkaAdmin(KafkaConnection(tuple(kafka_jbod.bootstrap.split(","))))
    try:
        await _scenario(admin, kafka_jbod)
    finally:
        await admin.close()


async def _scenario(admin: KafkaAdmin, kafka: KafkaCluster) -> None:
    ex = KafkaReassignments(admin, asyncio.Lock(), "jbod")
    seen = await ex.cluster()
    assert seen is not None
    assert seen.size == 5 and seen.dir_names == ("0", "1")
    assert await ex.liveness() == (frozenset({1, 2, 3, 4}), True)
    path3 = {d.name: d.path for d in seen.brokers[3].dirs}  # type: ignore[union-attr]
    path4 = {d.name: d.path for d in seen.brokers[4].dirs}  # type: ignore[union-attr]

    parts = await ex.partitions(resource([]))
    pv0 = parts.topics[TOPIC].partitions[0]
    assert (pv0.replicas, pv0.leader, pv0.adding, pv0.reassigned_by) == ((2, 1), 2, (), None)
    assert parts.topics[TOPIC].min_isr == 1 and parts.others_in_flight == 0

    # A throttled step on partition 0: throttles first (as the handler orders them), then the
    # step, its new replica's dir named before it is submitted.
    async with ex.serialized():
        await ex.throttle(
            [
                Throttle(2, 1024, frozenset({(TOPIC, 0)}), frozenset()),
                Throttle(3, 1024, frozenset(), frozenset({(TOPIC, 0)})),
            ]
        )
        step = replace(
            pv0,
            replicas=(2, 1, 3),
            dirs=(*pv0.dirs, path3["1"]),
            adding=(3,),
            target=(3, 2, 1),
            reassigned_by="pr",
        )
        await ex.write_partitions([WritePartition(TOPIC, step)])
    assert await throttles(admin) == {
        "broker 2": set(kr.BROKER_THROTTLE_KEYS),
        "broker 3": set(kr.BROKER_THROTTLE_KEYS),
        "topic": set(kr.TOPIC_THROTTLE_KEYS),
    }
    topic_cfg = await admin.describe_configs(ConfigKind.TOPIC, TOPIC, kr.TOPIC_THROTTLE_KEYS)
    assert topic_cfg[kr.LEADER_REPLICAS].value == "0:2"
    assert topic_cfg[kr.FOLLOWER_REPLICAS].value == "0:3"
    (flying,) = await admin.list_partition_reassignments()
    assert (flying.topic, flying.partition, flying.adding) == (TOPIC, 0, (3,))

    # In flight: this resource's when its status lists that target; else someone else's.
    mine = await ex.partitions(resource([_entry(0, [2, 1], [3, 2, 1])]))
    pv = mine.topics[TOPIC].partitions[0]
    assert (pv.replicas, pv.adding, pv.target, pv.reassigned_by) == (
        (3, 2, 1),
        (3,),
        (3, 2, 1),
        "pr",
    )
    assert mine.claims == {} and mine.others_in_flight == 0
    other = await ex.partitions(
        PartitionReassignment.model_validate(
            {**resource([]).model_dump(by_alias=True, exclude_none=True), "status": {}}
        )
    )
    assert other.claims == {(TOPIC, 0): kr.FOREIGN} and other.busy == {3: 1}
    assert other.others_in_flight == 1

    # The cancel: a null target; the order before the step and its leader as they were.
    await ex.partitions(resource([_entry(0, [2, 1], [3, 2, 1])]))
    back = replace(pv, replicas=(2, 1), dirs=pv.dirs[1:], adding=(), removing=(3,), target=())
    await ex.write_partitions([WritePartition(TOPIC, back)])
    assert await admin.list_partition_reassignments() == []

    async def as_before() -> bool:
        (meta,) = await admin.describe_topics([TOPIC])
        return (meta.partitions[0].replicas, meta.partitions[0].leader) == ((2, 1), 2)

    await wait_async(as_before, "partition 0 back at [2, 1] led by 2 in Metadata")

    # Lifted: every throttle config of the pass deleted.
    await ex.throttle(
        [Throttle(2, 0, frozenset(), frozenset()), Throttle(3, 0, frozenset(), frozenset())]
    )
    assert await throttles(admin) == {}

    # An unthrottled step on partition 1 to broker 4, dir "1": Kafka ends it, the new replica
    # in the dir named, the leader elected when the plan elects the first replica.
    parts = await ex.partitions(resource([]))
    pv1 = parts.topics[TOPIC].partitions[1]
    step = replace(
        pv1,
        replicas=(1, 2, 4),
        dirs=(*pv1.dirs, path4["1"]),
        adding=(4,),
        removing=(1,),
        target=(4, 2),
        reassigned_by="pr",
    )
    await ex.write_partitions([WritePartition(TOPIC, step)])

    async def ended() -> bool:
        return not await admin.list_partition_reassignments()

    await wait_async(ended, "the step on partition 1 to end")
    where = [
        d.path
        for b in await admin.describe_log_dirs([4])
        for d in b.dirs
        for r in d.replicas
        if (r.topic, r.partition) == (TOPIC, 1)
    ]
    assert where == [path4["1"]]

    async def at_target() -> PartView | None:
        # Metadata comes from a broker's cache, which follows the controller's record.
        d = (await ex.partitions(resource([]))).topics[TOPIC].partitions[1]
        return d if d.replicas == (4, 2) else None

    done = await wait_async(at_target, "Metadata to show partition 1 at [4, 2]")
    if done.leader != 4:
        elected = replace(done, leader=4)
        await ex.write_partitions([WritePartition(TOPIC, elected)])
        await ex.tell([Tell(TOPIC, 1, frozenset({4, 2}))])

    async def led_by_4() -> bool:
        (meta,) = await admin.describe_topics([TOPIC])
        return meta.partitions[1].leader == 4

    await wait_async(led_by_4, "partition 1 led by broker 4")


def _entry(p: int, current: list[int], target: list[int]) -> dict[str, Any]:
    return {"topic": TOPIC, "partition": p, "currentBrokers": current, "targetBrokers": target}
