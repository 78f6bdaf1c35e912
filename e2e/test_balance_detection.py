"""Continuous detection end to end (issue 16): a skew injected into a running cluster (every
replica moved onto disk a, then filled) is sampled, held for the window, and turned into a
dirs-only Rebalance by the operator itself; auto-approved, it is planned by the Spark job,
executed as LogDirMoves and ends Ready with every broker's disks in the band, after which
detection sees even disks and creates nothing more."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import LeaderTracker, Scenario, wait_async
from e2e.test_reassignment import closes_clients
from e2e.test_rebalance import (
    PLAN_TIMEOUT,
    _scenario,
    all_on_disk_a,
    assert_in_band,
    children,
    phase,
)
from jbod_operator.models.rebalance import CLUSTER_LABEL, TRIGGER_LABEL
from tests.integration.counting import fill_bytes
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.e2e

THRESHOLD = 5.0
WINDOW_S = 2


@pytest.fixture
def sc(
    kube_cluster: KubeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Scenario]:
    with _scenario(kube_cluster, tmp_path, request, 3) as s:
        yield s


def detected(sc: Scenario) -> list[dict[str, Any]]:
    raw = sc.kube.run("get", "-n", sc.ns, "rebalances", "-l", f"{CLUSTER_LABEL}=kip", "-o", "json")
    items: list[dict[str, Any]] = json.loads(raw)["items"]
    return items


def balance_status(sc: Scenario) -> dict[str, Any]:
    bc = sc.kube.get("brokercluster", "kip") or {}
    return dict((bc.get("status") or {}).get("balance") or {})


@pytest.mark.timeout(600)  # one Spark job (20-40 s to start) and the moves, on 2 shared cores
@closes_clients
async def test_a_sustained_skew_is_detected_rebalanced_and_ends_in_band(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=4, rf=3, min_isr=2)
    await all_on_disk_a(sc, tps, [0, 1, 2])
    tracker = LeaderTracker(sc, tps)
    await fill_bytes(tracker, tps, 2.5)  # each broker: 10 MiB on disk a, none on b (of 64)
    sc.kube.run(
        "patch",
        "brokercluster",
        "kip",
        "-n",
        sc.ns,
        "--type=merge",
        "-p",
        json.dumps(
            {
                "spec": {
                    "balance": {
                        "enabled": True,
                        "diskSpreadThresholdPercent": THRESHOLD,
                        "windowSeconds": WINDOW_S,
                        "cooldownSeconds": 3600,
                        "triggers": ["disk-imbalance"],
                        "autoApprove": True,
                        "sampleIntervalSeconds": 1,
                        "historySamples": 30,
                    }
                }
            }
        ),
    )
    (made,) = await wait_async(lambda: detected(sc), what="a Rebalance created by detection")
    name = made["metadata"]["name"]
    assert made["metadata"]["labels"][TRIGGER_LABEL] == "disk-imbalance"
    assert made["spec"] == {**made["spec"], "clusterName": "kip", "mode": "dirs-only"}
    assert made["spec"]["autoApprove"] is True
    seen = balance_status(sc)
    assert seen["diskSpreadPercent"] > 10, seen

    st = await phase(sc, name, "Ready", timeout=PLAN_TIMEOUT + 240)
    assert_in_band(st, {0, 1, 2})
    kids = children(sc, name)
    assert kids and {k["kind"] for k in kids} == {"LogDirMove"}, kids
    assert all(k["status"]["phase"] == "Succeeded" for k in kids), kids

    # The sampler sees the disks even now, and creates nothing more.
    after = await wait_async(
        lambda: (s := balance_status(sc)).get("diskSpreadPercent", 100) <= THRESHOLD and s,
        what="even disks in status.balance",
    )
    assert "sustainedSince" not in after, after
    assert after["lastTriggered"]["name"] == name
    assert [r["metadata"]["name"] for r in detected(sc)] == [name]
    await tracker.stop()
