"""Fixtures for integration tests that need a real Kubernetes API (see tests/kube_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_jars import QUICK_START_JVM, KafkaCluster, KafkaJarsMissing, classpath
from tests.kube_cluster import KubeBinariesMissing, KubeCluster
from tests.task_dump import _dump_tasks_before_timeout  # noqa: F401  (autouse)

JBOD_BROKERS = 4
JBOD_LOG_DIRS = 2
JBOD_HEAP = "320m"
"""Five JVMs (one controller, four brokers) at this heap fit a 2-core CI machine."""
JBOD_SETTINGS = {
    # A broker that stops is fenced in seconds, not the default 9 s (scenarios stop brokers).
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "auto.create.topics.enable": "false",
}


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[KubeCluster]:
    """A kube-apiserver + etcd on loopback, shared by the session. Fails (never skips) when the
    binaries are missing: run `make kube-bins` (and `make kubectl-bins` for kubectl)."""
    cluster = KubeCluster()
    missing = ""
    try:
        cluster.require_kubectl()
        cluster.start()
    except KubeBinariesMissing as exc:
        missing = str(exc)
    if missing:
        pytest.fail(missing, pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def kafka_jbod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Apache Kafka in KRaft mode as platform teams run it with JBOD disks: one dedicated
    controller and 4 brokers (ids 1-4) with 2 log dirs each, on loopback. One per test module
    (it takes seconds to start): a module's tests share it, so each test uses its own topics.
    Fails (never skips) when the jars are missing: ``make kafka-jars`` (part of ``make setup``).
    """
    try:
        classpath()
    except KafkaJarsMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    with KafkaCluster(
        tmp_path_factory.mktemp("kafka-jbod"),
        nodes=JBOD_BROKERS,
        controllers=1,
        log_dirs=JBOD_LOG_DIRS,
        heap=JBOD_HEAP,
        settings=JBOD_SETTINGS,
        jvm_options=QUICK_START_JVM,
    ) as kafka:
        yield kafka
