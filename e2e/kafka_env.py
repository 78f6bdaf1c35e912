"""What the e2e modules on an Apache Kafka cluster share (issue 22): the operator process and a
KafkaCluster naming the module's ``kafka_jbod`` cluster, the topics a counting producer writes
to beside a bulky one, and reading Kafka back (DescribeLogDirs, DescribeConfigs) by condition.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jbod_operator.clients.kafka_admin import KafkaAdmin, KafkaConnection
from jbod_operator.plan.kafka_types import BrokerLogDirs, ConfigKind
from tests import waiting
from tests.integration.java_clients import (
    KEEP_COUNTED_RECORDS,
    JavaProducer,
    check_exactly_once_in_order,
    consume,
)
from tests.kafka_jars import KafkaCluster
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube, OperatorProcess, wait_for

with warnings.catch_warnings():  # kafka-python 3.0's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
CLUSTER = "jbod"
"""The KafkaCluster's name."""
PARTITIONS = 4
COUNTED = {0: [1, 2], 1: [2, 3], 2: [3, 4], 3: [4, 1]}
"""Where the counted topic's replicas are (min ISR 2)."""


@contextmanager
def operators_on_kafka(
    kube_cluster: KubeCluster,
    kafka: KafkaCluster,
    work: Path,
    ns: str,
    *,
    operators: int = 1,
    operator_env: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> Iterator[tuple[Kube, list[OperatorProcess]]]:
    """The CRDs, the namespace, ``operators`` operator processes (the first holds the Lease
    before the others start, so they are its standbys) and the KafkaCluster :data:`CLUSTER`
    on ``kafka`` (``spec`` added to its bootstrap servers), Ready before it is handed out;
    each operator's log printed after. Every e2e module on Kafka runs against this."""
    kube_cluster.kubectl("apply", "-f", str(REPO / "crds"), check=True)
    kube_cluster.wait_established()
    kube_cluster.kubectl("create", "namespace", ns, check=False)
    kube = Kube(kube_cluster, ns)
    ops = [
        OperatorProcess(
            kube_cluster,
            ns,
            str(work),
            name=f"operator-{i}",
            env={"JBOD_OPERATOR_LEASE_NAMESPACE": ns, **(operator_env or {})},
        )
        for i in range(operators)
    ]
    try:
        ops[0].start()
        if operators > 1:
            wait_for(lambda: lease_holder(kube), what="the first operator to take the Lease")
        for op in ops[1:]:
            op.start()
        kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "KafkaCluster",
                "metadata": {"name": CLUSTER},
                "spec": {
                    "bootstrapServers": kafka.bootstrap.split(","),
                    "refreshIntervalSeconds": 5,
                    **(spec or {}),
                },
            }
        )
        wait_for(
            lambda: (
                (kube.condition("kafkacluster", CLUSTER, "Ready") or {}).get("status") == "True"
            ),
            timeout=90,
            what="KafkaCluster Ready",
        )
        yield kube, ops
    finally:
        for op in ops:
            op.stop()
            print(f"--- {op.log_path}\n{op.tail(60)}")


def lease_holder(kube: Kube) -> str | None:
    """The holder identity of the operators' Lease (it names the holder's pid)."""
    lease = kube.get("lease", "jbod-operator-leader") or {}
    holder: str | None = (lease.get("spec") or {}).get("holderIdentity")
    return holder


def create_topics(
    kafka: KafkaCluster,
    counted: str,
    bulk: str,
    bulk_at: dict[int, list[int]],
    records: int,
    *,
    fill: bool = True,
) -> None:
    """``counted`` for the Java producer (min ISR 2, at :data:`COUNTED`), ``bulk`` at
    ``bulk_at`` filled with ``records`` records of 1 KiB per partition (unless ``fill`` is
    False: :func:`fill_bulk` later)."""
    client = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        client.create_topics(
            [
                NewTopic(
                    counted,
                    replica_assignments=COUNTED,
                    topic_configs={"min.insync.replicas": "2", **KEEP_COUNTED_RECORDS},
                ),
                NewTopic(bulk, replica_assignments=bulk_at),
            ],
            wait_for_metadata=True,
        )
    finally:
        client.close()
    if fill:
        fill_bulk(kafka, bulk, len(bulk_at), records)


def fill_bulk(kafka: KafkaCluster, bulk: str, partitions: int, records: int) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all", linger_ms=20)
    try:
        for i in range(records * partitions):
            producer.send(bulk, value=bytes(1024), partition=i % partitions)
        producer.flush(120)
    finally:
        producer.close()


def admin(kafka: KafkaCluster) -> KafkaAdmin:
    return KafkaAdmin(KafkaConnection(tuple(kafka.bootstrap.split(","))))


async def log_dirs(kafka: KafkaCluster) -> list[BrokerLogDirs]:
    a = admin(kafka)
    try:
        return await a.describe_log_dirs()
    finally:
        await a.close()


async def broker_configs(kafka: KafkaCluster, broker: int) -> dict[str, str | None]:
    a = admin(kafka)
    try:
        cfg = await a.describe_configs(ConfigKind.BROKER, str(broker))
        return {k: e.value for k, e in cfg.items()}
    finally:
        await a.close()


async def wait_until(check: Any, what: str, timeout: float = 120) -> Any:
    """:func:`tests.waiting.wait_async` with the time a Kafka cluster's change may take."""
    return await waiting.wait_async(check, what, timeout)


async def in_thread(fn: Any, what: str, timeout: float = 120) -> Any:
    """``wait_for`` (a plain condition, kubectl's) off the event loop."""
    return await asyncio.to_thread(wait_for, fn, timeout, what)


async def true(value: bool) -> bool:
    """``value`` as a coroutine, for :func:`wait_until` on a plain condition."""
    return value


async def finish(kafka: KafkaCluster, producer: JavaProducer, topic: str) -> None:
    """The producer ended with every record acknowledged, and the consumer reads each once,
    in order, where it was acknowledged."""
    await producer.wait(240)
    assert not producer.errors, producer.errors[:5]
    got = await consume(kafka.bootstrap, topic, PARTITIONS)
    check_exactly_once_in_order(producer.acks, got)
    assert len(producer.acks) == len(got)
