"""The operator against the real API server with local broker processes (issue 5).

A BrokerCluster yields its StatefulSet (one PVC template per disk), Service, ConfigMap, token
Secret and PDB; a Topic yields assignments in its status that the local brokers serve; a
producer and a consumer through it lose nothing; every reconcile is idempotent.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from jbod_operator.clients.brokers import BrokerPool
from jbod_operator.clients.kube import KubeClient
from jbod_operator.handlers.clusters import reconcile_cluster
from jbod_operator.handlers.topics import reconcile_topic
from jbod_operator.settings import OperatorSettings
from tests.integration.counting import CountingProducer, consume_all, verify
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube, OperatorProcess, start_local_brokers, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NS = "topics-it"
DIRS = ["a", "b", "c"]


def broker_cluster(name: str = "demo", replicas: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "logDirs": [{"name": d, "size": "1Gi"} for d in DIRS],
            "config": {"replica.lag.time.max.ms": "3000"},
        },
    }


def topic(name: str, partitions: int, rf: int = 3, min_isr: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": {
            "clusterName": "demo",
            "partitions": partitions,
            "replicationFactor": rf,
            "minInsyncReplicas": min_isr,
        },
    }


@pytest.fixture(scope="module")
def env(
    kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kube, OperatorProcess, LocalCluster]]:
    work = tmp_path_factory.mktemp("operator")
    kube_cluster.kubectl("apply", "-f", str(REPO / "crds"), check=True)
    kube_cluster.wait_established()
    kube_cluster.kubectl("create", "namespace", NS, check=False)
    kube = Kube(kube_cluster, NS)
    op = OperatorProcess(kube_cluster, NS, str(work))
    op.start()
    brokers: LocalCluster | None = None
    try:
        kube.apply(broker_cluster())
        wait_for(lambda: kube.get("statefulset", "demo-broker"), what="the StatefulSet")
        brokers = start_local_brokers(
            op,
            kube,
            "demo",
            str(work / "brokers"),
            size=3,
            dir_names=DIRS,
            settings={"replica.lag.time.max.ms": "3000"},
        )
        yield kube, op, brokers
    finally:
        if brokers is not None:
            brokers.stop()
        op.stop()
        print(op.tail())


def test_broker_cluster_yields_statefulset_with_a_pvc_template_per_disk(
    env: tuple[Kube, OperatorProcess, LocalCluster],
) -> None:
    kube, _op, _brokers = env
    sts = kube.get("statefulset", "demo-broker")
    assert sts is not None
    templates = [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]]
    assert templates == ["data-a", "data-b", "data-c"]
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["serviceName"] == "demo-brokers"
    svc = kube.get("service", "demo-brokers")
    assert svc is not None and svc["spec"]["clusterIP"] == "None"
    assert kube.get("configmap", "demo-broker-config") is not None
    assert kube.get("poddisruptionbudget", "demo-broker") is not None
    assert kube.secret_value("demo-broker-token", "token")
    ready = wait_for(
        lambda: (
            (c := kube.condition("brokercluster", "demo", "Ready")) and c["status"] == "True" and c
        ),
        what="BrokerCluster Ready",
    )
    assert ready["observedGeneration"] == 1
    status = kube.get("brokercluster", "demo")["status"]  # type: ignore[index]
    assert status["readyBrokers"] == 3
    assert {d["name"] for d in status["brokers"][0]["logDirs"]} == set(DIRS)


def leader_lookup(kube: Kube, brokers: LocalCluster, name: str) -> Any:
    clients: dict[int, BrokerClient] = {}

    def lookup(tp: TopicPartition) -> BrokerClient:
        st = kube.topic(name)["status"]["partitions"]  # type: ignore[index]
        leader = next(p["leader"] for p in st if p["partition"] == tp.partition)
        if leader not in clients:
            clients[leader] = BrokerClient(brokers[leader].url, token=brokers.token)
        return clients[leader]

    lookup.clients = clients  # type: ignore[attr-defined]
    return lookup


def test_topic_gets_assignments_and_brokers_serve_it(
    env: tuple[Kube, OperatorProcess, LocalCluster],
) -> None:
    kube, _op, brokers = env
    kube.apply(topic("orders", 3))
    wait_for(
        lambda: (c := kube.condition("topic", "orders", "Ready")) and c["status"] == "True",
        what="Topic Ready",
    )
    status = kube.topic("orders")["status"]  # type: ignore[index]
    parts = status["partitions"]
    assert [p["partition"] for p in parts] == [0, 1, 2]
    assert {p["leader"] for p in parts} == {0, 1, 2}  # leaders spread over the brokers
    for p in parts:
        ids = [r["brokerId"] for r in p["replicas"]]
        assert sorted(ids) == [0, 1, 2] and p["isr"] == ids
        for r in p["replicas"]:
            # The directory the operator chose is where the broker created the replica.
            path = r["logDir"]
            assert os.path.isdir(os.path.join(path, f"orders-{p['partition']}")), path

    async def produce_consume() -> None:
        lookup = leader_lookup(kube, brokers, "orders")
        tps = [TopicPartition("orders", p) for p in range(3)]
        prod = CountingProducer(lookup, tps)
        for _ in range(20):
            await prod.produce_one_round()
        assert prod.acked_count == 300, prod.errors
        consumed = {tp: await consume_all(lookup, tp) for tp in tps}
        verify(prod.acked, consumed)
        for c in lookup.clients.values():
            await c.close()

    asyncio.run(produce_consume())


def placed(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Partition states without an empty diskOfflineReplicas (the same as absent): the
    controller's first pass over a new partition writes it whenever that pass comes."""
    return [
        {k: v for k, v in p.items() if not (k == "diskOfflineReplicas" and v == [])} for p in parts
    ]


def test_partition_increase(env: tuple[Kube, OperatorProcess, LocalCluster]) -> None:
    kube, _op, _brokers = env
    kube.apply(topic("grow", 2))
    wait_for(
        lambda: len((kube.topic("grow") or {}).get("status", {}).get("partitions", [])) == 2,
        what="2 partitions",
    )
    before = kube.topic("grow")["status"]["partitions"]  # type: ignore[index]
    kube.apply(topic("grow", 5))
    after = wait_for(
        lambda: (
            (p := (kube.topic("grow") or {}).get("status", {}).get("partitions", []))
            and len(p) == 5
            and p
        ),
        what="5 partitions",
    )
    assert placed(after[:2]) == placed(before)  # existing partitions untouched
    err = kube.run(
        "apply", "-n", NS, "-f", "-", input=__import__("json").dumps(topic("grow", 3)), check=False
    )
    assert "partitions cannot be decreased" in err


def test_every_reconcile_is_idempotent(
    env: tuple[Kube, OperatorProcess, LocalCluster], kube_cluster: KubeCluster
) -> None:
    kube, op, _brokers = env
    wait_for(
        lambda: (c := kube.condition("topic", "orders", "Ready")) and c["status"] == "True",
        what="Topic Ready",
    )
    # Stop the operator so only our two calls write.
    op.stop()
    try:
        watched = [
            ("brokercluster", "demo"),
            ("topic", "orders"),
            ("statefulset", "demo-broker"),
            ("service", "demo-brokers"),
            ("configmap", "demo-broker-config"),
            ("secret", "demo-broker-token"),
            ("poddisruptionbudget", "demo-broker"),
        ]

        async def run_twice() -> list[dict[str, str]]:
            client = KubeClient.from_env(str(kube_cluster.kubeconfig))
            settings = OperatorSettings(
                namespace=NS,
                controller_url=op.url,
                broker_endpoints_file=op.endpoints_file,
            )
            pool = BrokerPool(settings, client)
            versions = []
            try:
                for _ in range(2):
                    bc = kube.get("brokercluster", "demo")
                    await reconcile_cluster(client, pool, settings, bc)  # type: ignore[arg-type]
                    t = kube.topic("orders")
                    await reconcile_topic(client, pool, t)  # type: ignore[arg-type]
                    versions.append(
                        {
                            f"{k}/{n}": (kube.get(k, n) or {})["metadata"]["resourceVersion"]
                            for k, n in watched
                        }
                    )
            finally:
                await pool.close()
                await client.close()
            return versions

        first, second = asyncio.run(run_twice())
        changed = {k: (first[k], second[k]) for k in first if first[k] != second[k]}
        assert not changed, f"the second reconcile changed {changed}"
    finally:
        op.start()


def test_topic_deletion_stops_and_deletes_replicas(
    env: tuple[Kube, OperatorProcess, LocalCluster],
) -> None:
    kube, _op, brokers = env
    kube.apply(topic("doomed", 2))
    wait_for(
        lambda: (c := kube.condition("topic", "doomed", "Ready")) and c["status"] == "True",
        what="Topic Ready",
    )
    folders = [
        os.path.join(r["logDir"], f"doomed-{p['partition']}")
        for p in kube.topic("doomed")["status"]["partitions"]  # type: ignore[index]
        for r in p["replicas"]
    ]
    assert all(os.path.isdir(f) for f in folders)
    kube.run("delete", "topic", "doomed", "-n", NS, "--timeout=60s")
    wait_for(lambda: not any(os.path.exists(f) for f in folders), what="replica folders gone")

    # Nothing of the topic is left on any broker, not even a -delete folder (after deletion).
    def leftovers() -> list[str]:
        return [
            n
            for b in brokers.brokers
            for d in b.log_dirs
            for n in os.listdir(d)
            if n.startswith("doomed-")
        ]

    wait_for(lambda: not leftovers(), what="no doomed-* folder left")


def test_adding_a_log_dir_recreates_the_statefulset_and_removal_is_refused_while_in_use(
    env: tuple[Kube, OperatorProcess, LocalCluster],
) -> None:
    kube, _op, _brokers = env
    uid = kube.get("statefulset", "demo-broker")["metadata"]["uid"]  # type: ignore[index]
    bc = broker_cluster()
    bc["spec"]["logDirs"].append({"name": "d", "size": "2Gi"})
    kube.apply(bc)

    def templates() -> list[str]:
        kube.finish_orphan_deletions()
        sts = kube.get("statefulset", "demo-broker") or {}
        return [t["metadata"]["name"] for t in sts.get("spec", {}).get("volumeClaimTemplates", [])]

    wait_for(lambda: templates() == ["data-a", "data-b", "data-c", "data-d"], what="4 templates")
    assert kube.get("statefulset", "demo-broker")["metadata"]["uid"] != uid  # type: ignore[index]
    # Removing "a", which holds replicas of "orders", is refused and named; the template stays.
    bc["spec"]["logDirs"] = [d for d in bc["spec"]["logDirs"] if d["name"] != "a"]
    kube.apply(bc)
    cond = wait_for(
        lambda: (
            (c := kube.condition("brokercluster", "demo", "Degraded"))
            and c["reason"] == "StorageChangeRefused"
            and c
        ),
        what="removal refused",
    )
    assert "a" in cond["message"] and "holds" in cond["message"]
    assert "data-a" in templates()
    events = kube.run("get", "events", "-n", NS, "-o", "json")
    assert "StorageChangeRefused" in events
    # Put the spec back as it was.
    kube.apply(
        broker_cluster()
        | {
            "spec": broker_cluster()["spec"]
            | {
                "logDirs": [{"name": n, "size": "1Gi"} for n in DIRS]
                + [{"name": "d", "size": "2Gi"}]
            }
        }
    )


# -- issue 14 (6): Topics the brokers would refuse never reach them ---------------------------


def topic_with(name: str, partitions: int = 1, **spec: Any) -> dict[str, Any]:
    """``topic(name, partitions)`` with ``spec`` over its spec (None removes a field)."""
    body = topic(name, partitions)
    body["spec"] = {k: v for k, v in {**body["spec"], **spec}.items() if v is not None}
    return body


def folders_of(brokers: LocalCluster, kafka_name: str) -> list[str]:
    """Replica folders of ``kafka_name`` on any broker (current, future or being deleted)."""
    return sorted(
        n
        for b in brokers.brokers
        for d in b.log_dirs
        for n in os.listdir(d)
        if n.startswith(f"{kafka_name}-")
    )


def refused(kube: Kube, name: str, reason: str) -> dict[str, Any]:
    """The Topic's Ready condition once it says ``reason``, checked for the API conventions."""
    cond: dict[str, Any] = wait_for(
        lambda: (c := kube.condition("topic", name, "Ready")) and c["reason"] == reason and c,
        what=f"Topic {name} refused with {reason}",
    )
    assert cond["status"] == "False"
    assert cond["message"] and cond["lastTransitionTime"]
    got = kube.topic(name)
    assert got is not None
    assert cond["observedGeneration"] == got["metadata"]["generation"]
    assert not got["status"].get("partitions"), got["status"]
    return cond


def events_for(kube: Kube, name: str) -> list[dict[str, Any]]:
    out = json.loads(kube.run("get", "events", "-n", NS, "-o", "json"))
    return [e for e in out["items"] if e["involvedObject"].get("name") == name]


def test_a_topic_colliding_with_an_existing_one_is_refused_and_never_sent(
    env: tuple[Kube, OperatorProcess, LocalCluster],
) -> None:
    """Kafka refuses a.b next to a_b (they collide once '.' is read as '_'); the operator
    created both."""
    kube, _op, brokers = env
    kube.apply(topic_with("a.b"))
    wait_for(
        lambda: (c := kube.condition("topic", "a.b", "Ready")) and c["status"] == "True",
        what="a.b Ready",
    )
    kube.apply(topic_with("a-b", 2, topicName="a_b"))
    cond = refused(kube, "a-b", "TopicNameCollision")
    assert f"collides with 'a.b' of Topic {NS}/a.b" in cond["message"], cond
    events = wait_for(
        lambda: [e for e in events_for(kube, "a-b") if e["reason"] == "TopicNameCollision"],
        what="a TopicNameCollision Event",
    )
    assert events[0]["type"] == "Warning" and events[0]["message"] == cond["message"]
    assert folders_of(brokers, "a_b") == []
    assert kube.condition("topic", "a.b", "Ready")["status"] == "True"  # type: ignore[index]


def test_a_second_topic_with_the_same_kafka_name_is_refused(
    env: tuple[Kube, OperatorProcess, LocalCluster],
) -> None:
    kube, _op, brokers = env
    kube.apply(topic_with("shared-first", topicName="shared"))
    wait_for(
        lambda: (c := kube.condition("topic", "shared-first", "Ready")) and c["status"] == "True",
        what="shared-first Ready",
    )
    assert folders_of(brokers, "shared") == ["shared-0"] * 3
    kube.apply(topic_with("shared-second", 2, topicName="shared"))
    cond = refused(kube, "shared-second", "DuplicateTopicName")
    assert f"is Topic {NS}/shared-first's" in cond["message"], cond
    # The second Topic's extra partition was never created, nor the first one's touched.
    assert folders_of(brokers, "shared") == ["shared-0"] * 3
    first = kube.topic("shared-first")["status"]  # type: ignore[index]
    assert len(first["partitions"]) == 1


@pytest.mark.parametrize(
    ("name", "configs", "words"),
    [
        ("negative-retention", {"retention.ms": "-5"}, "retention.ms='-5': must be at least -1"),
        ("unknown-config", {"retension.ms": "1000"}, "unknown topic config 'retension.ms'"),
        ("min-isr-config", {"min.insync.replicas": "4"}, "more than the replicationFactor 3"),
    ],
)
def test_a_topic_with_bad_configs_is_refused_and_never_sent(
    env: tuple[Kube, OperatorProcess, LocalCluster],
    name: str,
    configs: dict[str, str],
    words: str,
) -> None:
    """retention.ms=-5 went to the brokers as it was; an unknown key was dropped silently."""
    kube, _op, brokers = env
    body = topic_with(name, configs=configs, minInsyncReplicas=None)
    kube.apply(body)
    cond = refused(kube, name, "InvalidConfig")
    assert words in cond["message"], cond
    wait_for(
        lambda: any(e["reason"] == "InvalidConfig" for e in events_for(kube, name)),
        what="an InvalidConfig Event",
    )
    assert folders_of(brokers, name) == []


def test_a_refused_config_edit_leaves_the_configs_in_force(
    env: tuple[Kube, OperatorProcess, LocalCluster],
) -> None:
    """The controller re-sends a topic's configs every few seconds: it sends the ones the
    operator accepted (status.configs), so a refused edit never reaches the brokers."""
    kube, _op, brokers = env
    kube.apply(topic_with("edited", configs={"retention.ms": "3600000"}))
    wait_for(
        lambda: (c := kube.condition("topic", "edited", "Ready")) and c["status"] == "True",
        what="edited Ready",
    )
    in_force = {"retention.ms": "3600000", "min.insync.replicas": "2"}
    assert kube.topic("edited")["status"]["configs"] == in_force  # type: ignore[index]
    kube.apply(topic_with("edited", configs={"retention.ms": "3600000", "cleanup.policy": "x"}))
    cond = wait_for(
        lambda: (
            (c := kube.condition("topic", "edited", "Ready"))
            and c["reason"] == "InvalidConfig"
            and c
        ),
        what="the edit refused",
    )
    assert cond["observedGeneration"] == 2 and "cleanup.policy='x'" in cond["message"]
    status = kube.topic("edited")["status"]  # type: ignore[index]
    assert status["configs"] == in_force and len(status["partitions"]) == 1
    assert folders_of(brokers, "edited") == ["edited-0"] * 3
    # A valid edit is taken: a removed key leaves the configs in force too.
    kube.apply(topic_with("edited", configs={"segment.ms": "60000"}))
    wait_for(
        lambda: (
            (kube.topic("edited") or {}).get("status", {}).get("configs")
            == {"segment.ms": "60000", "min.insync.replicas": "2"}
        ),
        what="the new configs in force",
    )
    wait_for(
        lambda: (c := kube.condition("topic", "edited", "Ready")) and c["status"] == "True",
        what="edited Ready again",
    )
