"""LogDirMove on an Apache Kafka cluster the operator does not run (issue 22, scenarios (b) and
(e)): the real API server, the operator process, a KafkaCluster naming Apache Kafka 4.3 in
KRaft mode (one controller, 4 brokers x 2 log dirs: the ``kafka_jbod`` fixture), and Kafka's
Java producer (idempotent, acks=all; the topic's min.insync.replicas 2) writing numbered
records all along, read back at the end by a consumer: none lost, none twice, in order.

- (b) A LogDirMove with a throttle moves a bulky replica and a replica being written to; the
  throttle is Kafka's broker config while it runs (DescribeConfigs) and gone after; each
  replica is in its target dir (DescribeLogDirs), no future copy left. A second, slower one is
  cancelled mid-way: the replica stays in its dir, its future copy is gone, no throttle left.
- (e) A dir drained: cordoned while it drains (``cordoned.log.dirs``, Kafka 4.3), verified
  empty by DescribeLogDirs, still cordoned once Succeeded; deleting the LogDirMove lifts the
  cordon.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e import kafka_env
from e2e.kafka_env import (
    CLUSTER,
    PARTITIONS,
    broker_configs,
    finish,
    in_thread,
    log_dirs,
    operators_on_kafka,
    true,
    wait_until,
)
from jbod_operator.control.kafka_log_dir_moves import COPY_THROTTLE, CORDONED_LOG_DIRS
from jbod_operator.plan.kafka_types import BrokerLogDirs, LogDir
from tests.integration.java_clients import JavaProducer
from tests.kafka_jars import KafkaCluster
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube

pytestmark = pytest.mark.e2e

NS = "kafka-ldm"
BULK_RECORDS = 8000
"""8000 x 1 KiB per bulk partition: seconds to copy under the throttles below."""


@pytest.fixture(scope="module")
def env(
    kube_cluster: KubeCluster, kafka_jbod: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kube]:
    work = tmp_path_factory.mktemp("kafka-ldm-e2e")
    with operators_on_kafka(kube_cluster, kafka_jbod, work, NS) as (kube, _):
        yield kube


def create_topics(
    kafka: KafkaCluster, counted: str, bulk: str, bulk_at: dict[int, list[int]]
) -> None:
    """``counted`` for the Java producer (min ISR 2), ``bulk`` filled with BULK_RECORDS per
    partition so that its copies last seconds under a throttle."""
    kafka_env.create_topics(kafka, counted, bulk, bulk_at, BULK_RECORDS)


def where(dirs: list[BrokerLogDirs], broker: int, topic: str, part: int) -> dict[str, str]:
    """``current``/``future`` -> the dir path of each copy of the replica on ``broker``."""
    out = {}
    for b in dirs:
        if b.broker_id == broker:
            for d in b.dirs:
                for r in d.replicas:
                    if (r.topic, r.partition) == (topic, part):
                        out["future" if r.is_future else "current"] = d.path
    return out


def dir_of(dirs: list[BrokerLogDirs], broker: int, path: str) -> LogDir:
    return next(d for b in dirs if b.broker_id == broker for d in b.dirs if d.path == path)


def other_dir(kafka: KafkaCluster, broker: int, path: str) -> str:
    return next(str(p) for p in kafka.broker(broker).log_dirs if str(p) != path)


def move(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "LogDirMove",
        "metadata": {"name": name},
        "spec": {"clusterName": CLUSTER, **spec},
    }


def phase(kube: Kube, name: str) -> str | None:
    return ((kube.get("logdirmove", name) or {}).get("status") or {}).get("phase")


def test_b_a_throttled_move_then_a_cancelled_one(env: Kube, kafka_jbod: KafkaCluster) -> None:
    asyncio.run(_throttled_then_cancelled(env, kafka_jbod))


async def _throttled_then_cancelled(kube: Kube, kafka: KafkaCluster) -> None:
    counted, bulk = "ldm-b-counted", "ldm-b-bulk"
    create_topics(kafka, counted, bulk, {0: [1, 2]})
    producer = await JavaProducer.start(
        kafka.bootstrap, counted, PARTITIONS, 4000, ("none",), pace_ms=10
    )
    await wait_until(lambda: true(len(producer.acks) > 100), "the producer under way")

    # -- a throttled move: the bulky replica and one being written to, on broker 1 ---------
    dirs = await log_dirs(kafka)
    src = {t: where(dirs, 1, t, 0)["current"] for t in (bulk, counted)}
    dst = {t: other_dir(kafka, 1, src[t]) for t in src}
    rate = 2 * 1024 * 1024
    kube.apply(
        move(
            "throttled",
            throttleBytesPerSecond=rate,
            moves=[
                {"brokerId": 1, "topic": t, "partition": 0, "logDir": dst[t]}
                for t in (bulk, counted)
            ],
        )
    )
    await in_thread(lambda: phase(kube, "throttled") == "Moving", "throttled Moving", 60)
    await wait_until(lambda: _has(COPY_THROTTLE, str(rate), kafka, 1), "the throttle on broker 1")
    await in_thread(lambda: phase(kube, "throttled") == "Succeeded", "throttled Succeeded")
    status = (kube.get("logdirmove", "throttled") or {})["status"]
    assert status["progressPercent"] == 100 and status["bytesTotal"] >= BULK_RECORDS * 1024
    assert [r["state"] for r in status["replicas"]] == ["Succeeded", "Succeeded"]
    dirs = await log_dirs(kafka)
    for t in (bulk, counted):
        assert where(dirs, 1, t, 0) == {"current": dst[t]}
    await wait_until(
        lambda: _no(COPY_THROTTLE, broker_configs(kafka, 1)), "the throttle lifted on broker 1"
    )

    # -- a slower one, cancelled mid-way: broker 2's bulky replica ---------------------------
    here = where(dirs, 2, bulk, 0)["current"]
    there = other_dir(kafka, 2, here)
    kube.apply(
        move(
            "cancelled",
            throttleBytesPerSecond=256 * 1024,
            moves=[{"brokerId": 2, "topic": bulk, "partition": 0, "logDir": there}],
        )
    )

    async def copying() -> bool:
        return where(await log_dirs(kafka), 2, bulk, 0) == {"current": here, "future": there}

    await wait_until(copying, "a future copy on broker 2")
    await wait_until(
        lambda: _has(COPY_THROTTLE, str(256 * 1024), kafka, 2), "the throttle on broker 2"
    )
    kube.run(
        "patch",
        "logdirmove",
        "cancelled",
        "-n",
        NS,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"cancel": True}}),
    )
    await in_thread(lambda: phase(kube, "cancelled") == "Cancelled", "Cancelled")
    assert where(await log_dirs(kafka), 2, bulk, 0) == {"current": here}  # no future copy
    await wait_until(lambda: _has(COPY_THROTTLE, None, kafka, 2), "no throttle on broker 2")
    status = (kube.get("logdirmove", "cancelled") or {})["status"]
    assert [r["state"] for r in status["replicas"]] == ["Cancelled"]

    await finish(kafka, producer, counted)


async def _has(key: str, value: str | None, kafka: KafkaCluster, broker: int) -> bool:
    """The broker's config ``key`` is ``value`` (None: not set). Configs reach the broker's
    metadata a moment after the call that set them: tests read them back by condition."""
    return (await broker_configs(kafka, broker)).get(key) == value


async def _no(key: str, configs: Any) -> bool:
    return key not in await configs


def test_e_a_dir_drained_cordoned_and_verified_empty(env: Kube, kafka_jbod: KafkaCluster) -> None:
    asyncio.run(_drain(env, kafka_jbod))


async def _drain(kube: Kube, kafka: KafkaCluster) -> None:
    counted, bulk = "ldm-e-counted", "ldm-e-bulk"
    create_topics(kafka, counted, bulk, {0: [3, 4], 1: [4, 3]})
    producer = await JavaProducer.start(
        kafka.bootstrap, counted, PARTITIONS, 3000, ("none",), pace_ms=10
    )
    await wait_until(lambda: true(len(producer.acks) > 100), "the producer under way")

    # Broker 3's fuller dir, named as the KafkaCluster's status lists it: its path.
    dirs = await log_dirs(kafka)
    (b3,) = [b for b in dirs if b.broker_id == 3]
    drained = max(b3.dirs, key=lambda d: len(d.replicas))
    before = sorted((r.topic, r.partition) for r in drained.replicas if not r.is_future)
    assert before, "broker 3's fuller dir holds nothing to drain"
    kube.apply(
        move("drain", drain={"brokerId": 3, "logDir": drained.path}, throttleBytesPerSecond=2**21)
    )

    async def cordoned_while_draining() -> bool:
        d = dir_of(await log_dirs(kafka), 3, drained.path)
        return d.cordoned is True

    await wait_until(cordoned_while_draining, "broker 3's dir cordoned")
    await wait_until(
        lambda: _has(CORDONED_LOG_DIRS, drained.path, kafka, 3), "cordoned.log.dirs on broker 3"
    )
    await in_thread(lambda: phase(kube, "drain") == "Succeeded", "drain Succeeded")
    cond = kube.condition("logdirmove", "drain", "Succeeded")
    assert cond is not None and cond["reason"] == "Drained"

    dirs = await log_dirs(kafka)
    d = dir_of(dirs, 3, drained.path)
    assert d.replicas == () and d.cordoned is True  # verified empty, stays cordoned
    rest = other_dir(kafka, 3, drained.path)
    for t, p in before:
        assert where(dirs, 3, t, p) == {"current": rest}
    await wait_until(lambda: _has(COPY_THROTTLE, None, kafka, 3), "no throttle on broker 3")

    # Deleted, the LogDirMove lifts the cordon.
    kube.run("delete", "logdirmove", "drain", "-n", NS)

    async def lifted() -> bool:
        d = dir_of(await log_dirs(kafka), 3, drained.path)
        return d.cordoned is False and not (await broker_configs(kafka, 3)).get(CORDONED_LOG_DIRS)

    await wait_until(lifted, "the cordon lifted")
    await finish(kafka, producer, counted)
