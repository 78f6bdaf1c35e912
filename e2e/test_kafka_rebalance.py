"""Rebalance on an Apache Kafka cluster the operator does not run (issue 22, scenario (f)): the
real API server, the operator process, a KafkaCluster naming Apache Kafka 4.3 in KRaft mode
(one controller, 4 brokers x 2 log dirs: the ``kafka_jbod`` fixture), the Spark job on
``local[*]``, and Kafka's Java producer (idempotent, acks=all; min.insync.replicas 2) writing
numbered records while the plan runs, read back at the end by a consumer: none lost, none
twice, in order.

(f) Every replica is put in the first dir of its broker (AlterReplicaLogDirs while the topics
are empty), a bulk topic filled: each broker's disks are far apart. A dirs-only Rebalance is
snapshotted from DescribeCluster, DescribeLogDirs and Metadata, planned by the Spark job,
approved by annotation and executed as LogDirMoves naming the KafkaCluster; it ends Ready with
every broker's disks measured in the band, each broker's replicas in both its dirs
(DescribeLogDirs, no future copy left) and no copy throttle left (DescribeConfigs).

(f, detected) Continuous detection on the KafkaCluster (``spec.balance``, as a
BrokerCluster's): a new topic skewed into the first dirs makes the sampler, reading
DescribeLogDirs and Metadata, create one dirs-only Rebalance of the KafkaCluster and say so in
``KafkaCluster.status.balance``; the test deletes it at once (planning it again is (f)).

The dirs of the test cluster share one filesystem, so the KafkaCluster gives
``logDirCapacity`` (as a BrokerCluster gives each dir's size): each dir counts as that size,
used by its replicas' bytes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.kafka_env import (
    CLUSTER,
    COUNTED,
    PARTITIONS,
    admin,
    broker_configs,
    create_topics,
    fill_bulk,
    finish,
    in_thread,
    log_dirs,
    operators_on_kafka,
    true,
    wait_until,
)
from jbod_operator.control.kafka_log_dir_moves import COPY_THROTTLE
from jbod_operator.models.rebalance import CLUSTER_LABEL, TRIGGER_LABEL
from jbod_operator.plan.kafka_types import BrokerLogDirs
from tests.integration.java_clients import JavaProducer
from tests.kafka_jars import KafkaCluster
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube

pytestmark = pytest.mark.e2e

NS = "kafka-rb"
BULK_RECORDS = 4000
"""4000 x 1 KiB per bulk partition (placed as the counted topic, :data:`COUNTED`): two 4 MiB
replicas per broker, all in its first dir."""
DIR_CAPACITY = "32Mi"
"""So the skew is 25 percentage points per broker, and one bulk replica per dir is in band."""
PLAN_TIMEOUT = 300
"""A Spark job on a crowded 2-core machine: start (20-40 s) plus planning."""


@pytest.fixture(scope="module")
def env(
    kube_cluster: KubeCluster, kafka_jbod: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kube]:
    work = tmp_path_factory.mktemp("kafka-rb-e2e")
    with operators_on_kafka(
        kube_cluster,
        kafka_jbod,
        work,
        NS,
        operator_env={
            "JBOD_OPERATOR_REBALANCE_WORK_DIR": str(work / "jobs"),
            "JBOD_OPERATOR_REBALANCE_POLL_SECONDS": "0.5",
            "JBOD_OPERATOR_MOVE_POLL_SECONDS": "0.5",
        },
        spec={"logDirCapacity": DIR_CAPACITY},
    ) as (kube, _):
        yield kube


def replicas_by_dir(dirs: list[BrokerLogDirs], topics: set[str]) -> dict[tuple[int, str], int]:
    """(broker, dir path) -> how many current replicas of ``topics`` it holds; futures apart
    (``-1`` per future copy, so a dir with one in flight never looks settled)."""
    out: dict[tuple[int, str], int] = {}
    for b in dirs:
        for d in b.dirs:
            n = 0
            for r in d.replicas:
                if r.topic in topics:
                    n += -1 if r.is_future else 1
            out[(b.broker_id, d.path)] = n
    return out


async def skew_into_first_dirs(kafka: KafkaCluster, topics: list[str]) -> None:
    """Every replica of ``topics`` into the first log dir of its broker (while they are empty:
    the copies are instant), then wait until DescribeLogDirs shows it there."""
    wanted = {
        (t, p, b): str(kafka.broker(b).log_dirs[0])
        for t in topics
        for p, brokers in COUNTED.items()
        for b in brokers
    }
    a = admin(kafka)
    try:
        errors = await a.alter_replica_log_dirs(wanted)
        assert not any(errors.values()), errors

        async def settled() -> bool:
            dirs = await a.describe_log_dirs()
            where = {
                (r.topic, r.partition, b.broker_id): (d.path, r.is_future)
                for b in dirs
                for d in b.dirs
                for r in d.replicas
                if r.topic in topics
            }
            return all(where.get(k) == (v, False) for k, v in wanted.items())

        await wait_until(settled, "every replica in its broker's first dir")
    finally:
        await a.close()


async def skewed_topics(kafka: KafkaCluster, counted: str, bulk: str) -> None:
    """The counted and the bulk topic, every replica in its broker's first dir, then the bulk
    one filled: each broker's disks 25 percentage points apart."""
    create_topics(kafka, counted, bulk, COUNTED, BULK_RECORDS, fill=False)
    await skew_into_first_dirs(kafka, [counted, bulk])
    await asyncio.to_thread(fill_bulk, kafka, bulk, PARTITIONS, BULK_RECORDS)


def status(kube: Kube, name: str) -> dict[str, Any]:
    return dict((kube.get("rebalance", name) or {}).get("status") or {})


async def phase(kube: Kube, name: str, want: str, timeout: float = PLAN_TIMEOUT) -> dict[str, Any]:
    def reached() -> bool:
        st = status(kube, name)
        assert st.get("phase") != "NotReady", st
        return st.get("phase") == want

    await in_thread(reached, f"Rebalance {name} {want}", timeout)
    return status(kube, name)


def listed(kube: Kube, kind: str, selector: str) -> list[dict[str, Any]]:
    raw = kube.run("get", "-n", NS, kind, "-l", selector, "-o", "json")
    items: list[dict[str, Any]] = json.loads(raw)["items"]
    return items


def children(kube: Kube, name: str) -> list[dict[str, Any]]:
    selector = f"jbod.io/rebalance={name}"
    return listed(kube, "partitionreassignments", selector) + listed(kube, "logdirmoves", selector)


@pytest.mark.timeout(900)
def test_f_a_dirs_only_rebalance_planned_by_spark_and_executed(
    env: Kube, kafka_jbod: KafkaCluster
) -> None:
    asyncio.run(_dirs_only(env, kafka_jbod))


async def _dirs_only(kube: Kube, kafka: KafkaCluster) -> None:
    counted, bulk = "rb-f-counted", "rb-f-bulk"
    topics = {counted, bulk}
    await skewed_topics(kafka, counted, bulk)
    started = time.monotonic()
    timings: dict[str, float] = {}

    kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "Rebalance",
            "metadata": {"name": "even"},
            "spec": {
                "clusterName": CLUSTER,
                "mode": "dirs-only",
                "throttleBytesPerSecond": 1024 * 1024,
            },
        }
    )
    st = await phase(kube, "even", "ProposalReady")
    timings["plan"] = round(time.monotonic() - started, 1)
    p = st["proposal"]
    assert p["feasible"] and p["movesBetweenBrokers"] == 0 and p["movesBetweenDisks"] > 0, p
    assert p["worstSpreadBefore"] > 10 and p["worstSpreadAfter"] <= 4, p
    # The goals, read from Kafka's own snapshot (issue 40): the hard ones hold, the disks' goal
    # is the one dirs-only works on; a broker goal it leaves alone says so
    goals = {g["name"]: g for g in p["goals"]}
    assert all(g["met"] for g in goals.values() if g["hard"]), goals
    assert goals["IntraBrokerDiskUsageDistributionGoal"]["met"], goals
    assert all("dirs-only" in g["reason"] for g in goals.values() if not g["met"]), goals

    # The counted producer runs from the approval to past the end of the moves.
    producer = await JavaProducer.start(
        kafka.bootstrap, counted, PARTITIONS, 4000, ("none",), pace_ms=10
    )
    await wait_until(lambda: true(len(producer.acks) > 100), "the producer under way")
    kube.run("annotate", "-n", NS, "rebalance", "even", "jbod.io/rebalance=approve", "--overwrite")
    await phase(kube, "even", "Rebalancing", 60)
    await in_thread(lambda: children(kube, "even"), "the Rebalance's children", 60)
    assert not producer.done, "the producer ended before the moves started"
    st = await phase(kube, "even", "Ready", 300)
    timings["approve_to_ready"] = round(time.monotonic() - started - timings["plan"], 1)

    kids = children(kube, "even")
    assert kids and {k["kind"] for k in kids} == {"LogDirMove"}, kids
    assert all(k["spec"]["clusterName"] == CLUSTER for k in kids), kids
    assert all(k["status"]["phase"] == "Succeeded" for k in kids), kids
    measured = {m["brokerId"]: m for m in st["measured"]}
    assert set(measured) == {1, 2, 3, 4}, st
    assert all(m["spread"] <= 4 for m in measured.values()), st

    # Kafka's own view: each broker's replicas in both its dirs, nothing in flight.
    held = replicas_by_dir(await log_dirs(kafka), topics)
    for b in (1, 2, 3, 4):
        per_dir = [n for (broker, _), n in held.items() if broker == b]
        assert len(per_dir) == 2 and min(per_dir) > 0, held
    for b in (1, 2, 3, 4):
        cfg = await broker_configs(kafka, b)
        assert cfg.get(COPY_THROTTLE) is None, (b, cfg)

    await finish(kafka, producer, counted)
    assert len(producer.acks) == 4000
    print(json.dumps({"timings_s": timings, "moves": p["movesBetweenDisks"]}))


def balance_status(kube: Kube) -> dict[str, Any]:
    return dict(
        ((kube.get("kafkacluster", CLUSTER) or {}).get("status") or {}).get("balance") or {}
    )


def detected(kube: Kube) -> list[dict[str, Any]]:
    return listed(kube, "rebalances", TRIGGER_LABEL)


@pytest.mark.timeout(300)
def test_f_detected_a_sustained_skew_creates_a_rebalance_of_the_kafka_cluster(
    env: Kube, kafka_jbod: KafkaCluster
) -> None:
    asyncio.run(_detected(env, kafka_jbod))


async def _detected(kube: Kube, kafka: KafkaCluster) -> None:
    await skewed_topics(kafka, "rb-d-counted", "rb-d-bulk")
    balance = {
        "enabled": True,
        "diskSpreadThresholdPercent": 10,
        "windowSeconds": 2,
        "cooldownSeconds": 3600,
        "triggers": ["disk-imbalance"],
        "sampleIntervalSeconds": 1,
        "historySamples": 30,
    }
    patch = {"spec": {"balance": balance}}
    kube.run("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(patch))
    try:
        await in_thread(lambda: detected(kube), "a Rebalance created by detection")
        (rb,) = detected(kube)
        name = rb["metadata"]["name"]
        assert rb["metadata"]["labels"][TRIGGER_LABEL] == "disk-imbalance"
        assert rb["metadata"]["labels"][CLUSTER_LABEL] == CLUSTER
        assert rb["spec"] == {**rb["spec"], "clusterName": CLUSTER, "mode": "dirs-only"}
        assert rb["metadata"]["ownerReferences"][0]["kind"] == "KafkaCluster"
        seen = await in_thread(
            lambda: (s := balance_status(kube)).get("lastTriggered") and s,
            "KafkaCluster status.balance.lastTriggered",
            30,
        )
        assert seen["lastTriggered"]["name"] == name, seen
        assert seen["diskSpreadPercent"] > 10 and seen["knownBrokers"] == [1, 2, 3, 4], seen
        # The KafkaCluster's refresh keeps writing its own status and leaves this one alone.
        refreshed = (kube.get("kafkacluster", CLUSTER) or {})["status"]
        assert refreshed["brokerCount"] == 4 and refreshed["balance"]["lastTriggered"], refreshed
    finally:
        off = {"spec": {"balance": {**balance, "enabled": False}}}
        kube.run("patch", "kafkacluster", CLUSTER, "-n", NS, "--type=merge", "-p", json.dumps(off))
        for r in detected(kube):
            kube.run("delete", "rebalance", "-n", NS, r["metadata"]["name"], "--wait=false")
