"""Continuous detection and the scale-down refusal (issue 16) on the real API server, with the
operator as a process and local broker processes whose log dirs are real small filesystems
(tmpfs; skipped, saying why, where mounting is forbidden): their utilisation is what
describe-log-dirs reports, as on a broker's own disks.

- A skew injected into one broker's disk and held for the window makes the sampler create one
  dirs-only Rebalance (labels, spec, Event, status.balance), and no second one while it has
  not finished.
- Lowering spec.replicas while the leaving broker holds replicas is refused with
  ScaleDownBlocked naming the broker and its replica count; the StatefulSet keeps its count
  until a PartitionReassignment has emptied the broker, then the decrease goes ahead.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jbod_broker import wire
from jbod_broker.local import LocalCluster
from jbod_operator.handlers.balance import OFF
from jbod_operator.models.rebalance import CLUSTER_LABEL, TRIGGER_LABEL
from jbod_operator.plan.conditions import parse_iso
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube, OperatorProcess, start_local_brokers, wait_for
from tests.tmpfs import mounted_tmpfs

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NS = "balance-it"
NAME = "skew"
DIRS = ["a", "b"]
BROKERS = 3
DISK = 32 * 2**20
WINDOW_S = 2


def broker_cluster(replicas: int = BROKERS) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": replicas,
            "logDirs": [{"name": d, "size": "32Mi"} for d in DIRS],
            "config": {"replica.lag.time.max.ms": "3000"},
            "balance": {
                "enabled": True,
                # One disk of broker 0 filled to 37.5 % is 37.5 pp from its other disk, and
                # broker 0 as a whole 18.75 pp from the others: a dirs-only skew.
                "diskSpreadThresholdPercent": 25,
                "windowSeconds": WINDOW_S,
                "cooldownSeconds": 3600,
                "triggers": ["disk-imbalance"],
                "sampleIntervalSeconds": 1,
                "historySamples": 30,
            },
        },
    }


@pytest.fixture(scope="module")
def env(
    kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kube, LocalCluster, str]]:
    work = tmp_path_factory.mktemp("balance")
    kube_cluster.kubectl("apply", "-f", str(REPO / "crds"), check=True)
    kube_cluster.wait_established()
    kube_cluster.kubectl("create", "namespace", NS, check=False)
    kube = Kube(kube_cluster, NS)
    op = OperatorProcess(kube_cluster, NS, str(work))
    brokers: LocalCluster | None = None
    base = str(work / "brokers")
    with contextlib.ExitStack() as disks:
        for b in range(BROKERS):
            for d in DIRS:
                disks.enter_context(
                    mounted_tmpfs(os.path.join(base, f"broker-{b}", wire.log_dir_folder(d)), "32m")
                )
        op.start()
        try:
            kube.apply(broker_cluster())
            wait_for(lambda: kube.get("statefulset", f"{NAME}-broker"), what="the StatefulSet")
            brokers = start_local_brokers(
                op,
                kube,
                NAME,
                base,
                size=BROKERS,
                dir_names=DIRS,
                settings={"replica.lag.time.max.ms": "3000"},
            )
            yield kube, brokers, base
        finally:
            if brokers is not None:
                brokers.stop()
            op.stop()
            print(op.tail(80))


def balance_status(kube: Kube) -> dict[str, Any]:
    return dict(((kube.get("brokercluster", NAME) or {}).get("status") or {}).get("balance") or {})


def rebalances(kube: Kube) -> list[dict[str, Any]]:
    items = json.loads(kube.run("get", "rebalances", "-n", NS, "-o", "json"))["items"]
    return [r for r in items if r["spec"]["clusterName"] == NAME]


def test_a_sustained_skew_creates_one_dirs_only_rebalance(
    env: tuple[Kube, LocalCluster, str],
) -> None:
    kube, _brokers, base = env
    # Sampling: every broker and dir accounted for, the disks even (empty filesystems).
    first = wait_for(
        lambda: (s := balance_status(kube)).get("knownBrokers") == [0, 1, 2] and s,
        what="the first samples in status.balance",
    )
    assert first["knownLogDirs"] == DIRS
    assert first["diskSpreadPercent"] < 25
    assert "sustainedSince" not in first
    assert rebalances(kube) == []

    # Inject the skew: 12 MiB of broker 0's disk a taken (37.5 % of its 32 MiB).
    with open(os.path.join(base, "broker-0", "data-a", "filler"), "wb") as f:
        f.write(os.urandom(12 * 2**20))
    skewed = wait_for(
        lambda: (s := balance_status(kube)).get("sustainedSince") and s,
        what="the skew seen by the sampler",
    )
    assert skewed["worstBroker"] == 0 and skewed["diskSpreadPercent"] >= 35

    (rb,) = wait_for(lambda: rebalances(kube), what="a Rebalance created by detection")
    meta = rb["metadata"]
    assert meta["labels"][TRIGGER_LABEL] == "disk-imbalance"
    assert meta["labels"][CLUSTER_LABEL] == NAME
    assert rb["spec"]["mode"] == "dirs-only"
    assert rb["spec"]["autoApprove"] is False
    assert meta["ownerReferences"][0]["kind"] == "BrokerCluster"

    st = wait_for(
        lambda: (s := balance_status(kube)).get("lastTriggered") and s,
        what="status.balance.lastTriggered",
    )
    assert st["lastTriggered"]["name"] == meta["name"]
    assert st["lastTriggered"]["trigger"] == "disk-imbalance"
    # Created only once the skew had held for the whole window.
    held = parse_iso(st["lastTriggered"]["created"], 0) - parse_iso(st["sustainedSince"], 0)
    assert held >= WINDOW_S, st
    assert st["activeRebalance"] == meta["name"]
    assert parse_iso(st["cooldownUntil"], 0) >= parse_iso(st["lastTriggered"]["created"], 0) + 3600

    events = json.loads(kube.run("get", "events", "-n", NS, "-o", "json"))["items"]
    created = [e for e in events if e.get("reason") == "RebalanceCreated"]
    assert created and meta["name"] in created[0]["message"]
    assert "dirs-only" in created[0]["message"]

    # The skew stays: later samples wait for that Rebalance instead of creating another.
    seen = st["samples"]
    later = wait_for(
        lambda: (s := balance_status(kube)).get("samples", 0) >= min(seen + 3, 30) and s,
        what="three more samples",
    )
    assert f"waiting for Rebalance {meta['name']}" in later["message"]
    assert len(rebalances(kube)) == 1

    # Turned off: the summary stops claiming to watch, what was accounted for stays.
    off = broker_cluster()
    off["spec"]["balance"]["enabled"] = False
    kube.apply(off)
    st = wait_for(
        lambda: (s := balance_status(kube)).get("message") == OFF and s,
        what="status.balance saying detection is off",
    )
    assert "sustainedSince" not in st and st["knownBrokers"] == [0, 1, 2]
    assert st["lastTriggered"]["name"] == meta["name"]


def test_scale_down_waits_until_the_leaving_broker_is_empty(
    env: tuple[Kube, LocalCluster, str],
) -> None:
    kube, _brokers, _base = env
    kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "Topic",
            "metadata": {"name": "held"},
            "spec": {"clusterName": NAME, "partitions": 3, "replicationFactor": 2},
        }
    )
    parts = wait_for(
        lambda: (kube.topic("held") or {}).get("status", {}).get("partitions"),
        what="the Topic's partitions",
    )
    on_2 = sum(1 for p in parts if 2 in {r["brokerId"] for r in p["replicas"]})
    assert on_2 > 0  # 3 partitions x 2 replicas over 3 brokers: broker 2 holds some

    kube.apply(broker_cluster(replicas=2))
    cond = wait_for(
        lambda: (
            (c := kube.condition("brokercluster", NAME, "ScaleDownBlocked"))
            and c["status"] == "True"
            and c
        ),
        what="ScaleDownBlocked",
    )
    assert cond["reason"] == "BrokersHoldReplicas"
    plural = "s" if on_2 != 1 else ""
    assert f"broker 2 still holds {on_2} replica{plural}" in cond["message"]
    assert "Rebalance (mode: remove-brokers, brokers: [2])" in cond["message"]
    sts = kube.get("statefulset", f"{NAME}-broker")
    assert sts is not None and sts["spec"]["replicas"] == 3
    ready = kube.condition("brokercluster", NAME, "Ready")
    assert ready is not None and ready["status"] == "False"
    assert ready["reason"] == "ScaleDownBlocked"
    events = json.loads(kube.run("get", "events", "-n", NS, "-o", "json"))["items"]
    assert any(e.get("reason") == "ScaleDownRefused" for e in events)

    # Empty broker 2 (what a remove-brokers Rebalance does, through its PartitionReassignment).
    kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "empty-2"},
            "spec": {
                "clusterName": NAME,
                "partitions": [
                    {"topic": "held", "partition": p["partition"], "replicas": [0, 1]}
                    for p in parts
                ],
            },
        }
    )
    wait_for(
        lambda: (
            ((kube.get("partitionreassignment", "empty-2") or {}).get("status") or {}).get("phase")
            == "Succeeded"
        ),
        what="the PartitionReassignment Succeeded",
        timeout=120,
    )
    cond = wait_for(
        lambda: (
            (c := kube.condition("brokercluster", NAME, "ScaleDownBlocked"))
            and c["status"] == "False"
            and c
        ),
        what="ScaleDownBlocked cleared",
    )
    assert cond["reason"] == "NoBrokerToEmpty"
    wait_for(
        lambda: (
            (kube.get("statefulset", f"{NAME}-broker") or {}).get("spec", {}).get("replicas") == 2
        ),
        what="the StatefulSet scaled to 2",
    )
