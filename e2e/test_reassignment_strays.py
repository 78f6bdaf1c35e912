"""Stray replicas (issue 37, item 1): a replica a PartitionReassignment drops while its broker
is down, and the replicas of a Topic deleted meanwhile, are deleted when the broker returns
(as Kafka's brokers delete the logs the metadata does not place on them), with an Event; until
then the reassignment's and the BrokerCluster's status list what was left."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import Scenario, wait_async
from tests import waiting
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.e2e


@pytest.fixture
def sc(
    kube_cluster: KubeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Scenario]:
    ns = request.node.name.replace("_", "-")[:50]
    with Scenario(
        kube_cluster,
        tmp_path,
        ns,
        brokers=4,
        operator_env={"JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS": "0.3"},
    ) as s:
        yield s


def cluster_status(sc: Scenario) -> dict[str, Any]:
    return dict((sc.kube.get("brokercluster", "kip") or {}).get("status") or {})


def strays_of(status: dict[str, Any]) -> list[tuple[int, str, int]]:
    return sorted(
        (s["brokerId"], s["topic"], s["partition"]) for s in status.get("strayReplicas") or []
    )


def cluster_events(sc: Scenario, reason: str) -> list[str]:
    raw = json.loads(sc.kube.run("get", "events", "-n", sc.ns, "-o", "json"))
    return [
        e["message"]
        for e in raw["items"]
        if e["reason"] == reason and e["involvedObject"]["kind"] == "BrokerCluster"
    ]


async def held(sc: Scenario, broker: int) -> set[tuple[str, int, bool]]:
    """What describe-log-dirs of ``broker`` lists: (topic, partition, is_future)."""
    d = await sc.client(broker).describe_log_dirs()
    return {(r.topic, r.partition, r.is_future) for x in d.log_dirs for r in x.partitions}


async def until_held(
    sc: Scenario, broker: int, ok: Any, what: str, timeout: float = 60
) -> set[tuple[str, int, bool]]:
    async def check() -> tuple[set[tuple[str, int, bool]]] | None:
        now = await held(sc, broker)
        return (now,) if ok(now) else None  # a tuple: an empty set can be what is awaited

    # A broker restarting answers with an error: not yet.
    (got,) = await waiting.wait_async(check, what, timeout, retry=Exception)
    return got


async def test_replicas_dropped_or_deleted_while_their_broker_is_down_go_when_it_returns(
    sc: Scenario,
) -> None:
    try:
        await _run(sc)
    finally:
        await sc.close_clients()


async def _run(sc: Scenario) -> None:
    assert sc.brokers is not None
    [tp] = sc.create_topic("moved")
    doomed = sc.create_topic("doomed", partitions=2, rf=4)  # on every broker
    victim = sc.leader(tp)
    current = [r["brokerId"] for r in sc.state(tp)["replicas"]]
    spare = next(b for b in range(sc.size) if b not in current)
    target = [b for b in current if b != victim] + [spare]
    theirs = {(t.topic, t.partition) for t in [tp, *doomed]}
    assert theirs <= {(t, p) for t, p, _ in await held(sc, victim)}

    sc.brokers[victim].kill()
    # The controller counts it down once it elects another leader for its partition.
    await wait_async(
        lambda: sc.leader(tp) not in (victim, -1), what="another leader elected", timeout=60
    )
    sc.kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "drop"},
            "spec": {
                "clusterName": "kip",
                "partitions": [{"topic": tp.topic, "partition": tp.partition, "replicas": target}],
            },
        }
    )
    sc.kube.run("delete", "topic", "doomed", "-n", sc.ns, "--timeout=60s")
    await wait_async(
        lambda: (
            (sc.kube.get("partitionreassignment", "drop") or {}).get("status", {}).get("phase")
            == "Succeeded"
        ),
        what="Succeeded",
        timeout=90,
    )
    await wait_async(lambda: sc.kube.get("topic", "doomed") is None, what="doomed deleted")
    state = sc.state(tp)
    assert [r["brokerId"] for r in state["replicas"]] == target, state
    assert not state.get("removingReplicas"), state
    # Left on the dead broker: recorded by the reassignment, listed by the cluster.
    pr_status = (sc.kube.get("partitionreassignment", "drop") or {})["status"]
    assert strays_of(pr_status) == [(victim, tp.topic, tp.partition)], pr_status
    await wait_async(
        lambda: strays_of(cluster_status(sc)) == [(victim, tp.topic, tp.partition)],
        what="the BrokerCluster listing the stray",
    )

    sc.brokers[victim].start()
    left = await until_held(
        sc,
        victim,
        lambda h: not {(t, p) for t, p, _ in h} & theirs,
        what=f"broker {victim} holding none of {sorted(theirs)}",
    )
    assert not any(f for _, _, f in left), left  # no -future copy either
    deleted = await wait_async(
        lambda: [m for m in cluster_events(sc, "StrayReplicaDeleted") if f"broker {victim}:" in m],
        what="the StrayReplicaDeleted Event",
    )
    for name in (f"{tp.topic}-{tp.partition}", "doomed-0", "doomed-1"):
        assert any(name in m for m in deleted), (name, deleted)
    await wait_async(
        lambda: not cluster_status(sc).get("strayReplicas"), what="no stray listed any more"
    )
    # The reassignment keeps its record of what it left.
    pr_status = (sc.kube.get("partitionreassignment", "drop") or {})["status"]
    assert strays_of(pr_status) == [(victim, tp.topic, tp.partition)], pr_status
    # The partition's replicas are where the state of record places them.
    for b in target:
        assert (tp.topic, tp.partition, False) in await held(sc, b)
