"""A KafkaCluster naming a real Apache Kafka cluster the operator does not run (issue 22): the
real API server, the operator process, and Apache Kafka 4.3 in KRaft mode with one dedicated
controller and 4 brokers x 2 log dirs (the ``kafka_jbod`` fixture, one per module).

- Pointed at the cluster, the resource becomes Ready with what the Admin API reports: the
  cluster id, every broker unfenced with its address, and each broker's two log dirs (the
  fixture's paths) with their sizes and replica counts.
- Pointed at an address that never answers, it says so (Ready=False, Unreachable, the address
  and the client's error in the message), and nothing changes on the Kafka cluster nor in the
  other resource's status.
- A SASL spec whose Secret is missing says which Secret, without dialling.
- The API server refuses, by the CRD's CEL rules, security settings that cannot work.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jbod_operator.clients.kafka_admin import KafkaAdmin, KafkaConnection
from jbod_operator.plan.kafka_types import BrokerLogDirs, ConfigKind
from tests.integration.conftest import JBOD_BROKERS, JBOD_LOG_DIRS
from tests.kafka_jars import KafkaCluster
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube, OperatorProcess, wait_for

pytestmark = pytest.mark.e2e

NS = "kafka-cluster"
REPO = Path(__file__).resolve().parents[1]
BAD_BOOTSTRAP = "no-such-broker.invalid:9092"
"""A name that never resolves (RFC 2606): nothing is dialled, nothing answers."""


def kafka_cluster(name: str, bootstrap: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": name},
        "spec": {"bootstrapServers": bootstrap, "refreshIntervalSeconds": 5, **spec},
    }


@pytest.fixture(scope="module")
def env(
    kube_cluster: KubeCluster, kafka_jbod: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kube, OperatorProcess]]:
    work = tmp_path_factory.mktemp("kafka-cluster-e2e")
    kube_cluster.kubectl("apply", "-f", str(REPO / "crds"), check=True)
    kube_cluster.wait_established()
    kube_cluster.kubectl("create", "namespace", NS, check=False)
    kube = Kube(kube_cluster, NS)
    op = OperatorProcess(kube_cluster, NS, str(work), env={"JBOD_OPERATOR_LEASE_NAMESPACE": NS})
    op.start()
    try:
        yield kube, op
    finally:
        op.stop()
        print(f"--- {op.log_path}\n{op.tail(40)}")


def ready(kube: Kube, name: str) -> dict[str, Any] | None:
    c = kube.condition("kafkacluster", name, "Ready")
    return c if c is not None and c["status"] == "True" else None


Placement = list[tuple[int, str, str, int, bool]]
"""(broker, log dir, topic, partition, is future) of every replica."""


def kafka_state(kafka: KafkaCluster) -> tuple[Placement, dict[str, Any]]:
    """Where every replica is and every broker's modified configs: what "nothing changed" on
    the Kafka cluster compares (sizes left out: the internal topics may write)."""

    async def go() -> tuple[list[BrokerLogDirs], dict[str, Any]]:
        admin = KafkaAdmin(KafkaConnection(tuple(kafka.bootstrap.split(","))))
        try:
            dirs = await admin.describe_log_dirs()
            configs = {
                str(b): await admin.describe_configs(ConfigKind.BROKER, str(b))
                for b in range(1, JBOD_BROKERS + 1)
            }
            return dirs, configs
        finally:
            await admin.close()

    dirs, configs = asyncio.run(go())
    placement = sorted(
        (b.broker_id, d.path, r.topic, r.partition, r.is_future)
        for b in dirs
        for d in b.dirs
        for r in d.replicas
    )
    return placement, configs


def test_a_kafka_cluster_becomes_ready_with_its_brokers_and_dirs(
    env: tuple[Kube, OperatorProcess], kafka_jbod: KafkaCluster
) -> None:
    kube, _ = env
    kube.apply(kafka_cluster("jbod", kafka_jbod.bootstrap.split(",")))
    cond = wait_for(lambda: ready(kube, "jbod"), timeout=90, what="KafkaCluster jbod Ready")
    assert cond["reason"] == "Ready"
    assert (
        cond["message"] == f"{JBOD_BROKERS} brokers, {JBOD_BROKERS * JBOD_LOG_DIRS} log dirs read"
    )
    obj = kube.get("kafkacluster", "jbod")
    assert obj is not None
    status = obj["status"]
    assert status["clusterId"] == kafka_jbod.cluster_id
    assert status["controllerId"] in range(1, JBOD_BROKERS + 1)  # a broker, not node 100
    assert status["brokerCount"] == JBOD_BROKERS
    assert status["logDirCount"] == JBOD_BROKERS * JBOD_LOG_DIRS
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    types = {c["type"]: c["status"] for c in status["conditions"]}
    assert types == {"Reachable": "True", "Ready": "True", "Degraded": "False"}
    assert [b["id"] for b in status["brokers"]] == list(range(1, JBOD_BROKERS + 1))
    for b in status["brokers"]:
        node = kafka_jbod.broker(b["id"])
        assert (b["host"], b["port"], b["fenced"]) == ("127.0.0.1", node.port, False)
        assert [d["path"] for d in b["logDirs"]] == sorted(str(p) for p in node.log_dirs)
        for d in b["logDirs"]:
            assert d["totalBytes"] > 0 and 0 < d["usableBytes"] <= d["totalBytes"]
            assert d["cordoned"] is False and d["offline"] is False
            assert d["replicaCount"] >= 0 and d["replicaBytes"] >= 0
    # kubectl's columns: brokers, dirs, ready.
    table = kube.run("get", "kafkacluster", "jbod", "-n", NS)
    header, row = table.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "BROKERS", "DIRS", "READY"]
    assert row.split()[:4] == ["jbod", str(JBOD_BROKERS), str(JBOD_BROKERS * JBOD_LOG_DIRS), "True"]


def test_a_bad_bootstrap_address_is_not_ready_says_why_and_changes_nothing(
    env: tuple[Kube, OperatorProcess], kafka_jbod: KafkaCluster
) -> None:
    kube, _ = env
    before = kafka_state(kafka_jbod)
    good_before = (kube.get("kafkacluster", "jbod") or {}).get("status", {}).get("brokers")
    kube.apply(kafka_cluster("nowhere", [BAD_BOOTSTRAP]))

    def refused() -> dict[str, Any] | None:
        c = kube.condition("kafkacluster", "nowhere", "Ready")
        return c if c is not None and c["status"] == "False" else None

    cond = wait_for(refused, timeout=90, what="KafkaCluster nowhere Ready=False")
    assert cond["reason"] == "Unreachable"
    assert BAD_BOOTSTRAP in cond["message"] and "KafkaTimeoutError" in cond["message"]
    reachable = kube.condition("kafkacluster", "nowhere", "Reachable")
    assert reachable is not None and reachable["status"] == "False"
    status = (kube.get("kafkacluster", "nowhere") or {})["status"]
    assert "brokers" not in status and "clusterId" not in status
    table = kube.run("get", "kafkacluster", "nowhere", "-n", NS)
    assert table.splitlines()[1].split()[1:2] == ["False"]  # READY (no brokers, no dirs)
    # Nothing changed on the Kafka cluster, nor in the other resource.
    assert kafka_state(kafka_jbod) == before
    if good_before is not None:
        assert ready(kube, "jbod") is not None
        after = (kube.get("kafkacluster", "jbod") or {})["status"]["brokers"]
        assert [(b["id"], [d["path"] for d in b["logDirs"]]) for b in after] == [
            (b["id"], [d["path"] for d in b["logDirs"]]) for b in good_before
        ]

    # Deleted, it goes (kopf's finalizer removed once its daemon, and client, stopped).
    kube.run("delete", "kafkacluster", "nowhere", "-n", NS, "--wait=false")
    wait_for(lambda: kube.get("kafkacluster", "nowhere") is None, what="KafkaCluster nowhere gone")


def test_a_missing_secret_is_named_without_dialling(
    env: tuple[Kube, OperatorProcess], kafka_jbod: KafkaCluster
) -> None:
    kube, _ = env
    ref = {"secretKeyRef": {"name": "kafka-admin", "key": "password"}}
    kube.apply(
        kafka_cluster(
            "locked",
            kafka_jbod.bootstrap.split(","),
            securityProtocol="SASL_PLAINTEXT",
            sasl={"mechanism": "SCRAM-SHA-512", "username": ref, "password": ref},
        )
    )

    def refused() -> dict[str, Any] | None:
        c = kube.condition("kafkacluster", "locked", "Ready")
        return c if c is not None and c["status"] == "False" else None

    cond = wait_for(refused, timeout=90, what="KafkaCluster locked Ready=False")
    assert (cond["reason"], cond["message"]) == (
        "CredentialsMissing",
        f"Secret {NS}/kafka-admin not found",
    )


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"bootstrapServers": []}, "should have at least 1 items"),
        ({"bootstrapServers": ["k:9092"], "securityProtocol": "TLS"}, "Unsupported value"),
        (
            {"bootstrapServers": ["k:9092"], "securityProtocol": "SASL_SSL"},
            "sasl is required with SASL_PLAINTEXT and SASL_SSL",
        ),
        ({"bootstrapServers": ["k:9092"], "tls": {}}, "tls needs securityProtocol SSL"),
    ],
)
def test_the_api_server_refuses_what_cannot_work(
    env: tuple[Kube, OperatorProcess], spec: dict[str, Any], says: str
) -> None:
    kube, _ = env
    obj = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": "refused"},
        "spec": spec,
    }
    out = kube.run("apply", "-n", NS, "-f", "-", input=json.dumps(obj), check=False)
    assert says in out, out
    assert kube.get("kafkacluster", "refused") is None
