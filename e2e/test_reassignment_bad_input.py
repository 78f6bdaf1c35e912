"""Bad PartitionReassignments against the real API server, the operator process and local
brokers.

Each one is either refused by the CRD schema at ``kubectl apply`` (the object is not stored)
or accepted and marked Failed by the operator, with the partition and the cause in the Failed
condition and a Warning Event. In every case nothing changed: the Topics' partition states of
record are as they were, and every broker holds the replicas it held, where it held them.

One cluster (4 brokers x dirs a, b, c) serves the module; each case compares against a
snapshot it takes itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import Scenario
from jbod_broker.wire import log_dir_folder
from tests.kube_cluster import KubeCluster
from tests.operator_harness import wait_for
from tests.permissions import require_permissions

pytestmark = pytest.mark.e2e

NS = "reassign-bad-input"
DIRS = ("a", "b", "c")


@pytest.fixture(scope="module")
def sc(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    work: Path = tmp_path_factory.mktemp("reassign-bad-input")
    with Scenario(
        kube_cluster,
        work,
        NS,
        brokers=4,
        dirs=DIRS,
        operator_env={"JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS": "0.3"},
    ) as s:
        s.create_topic("orders", partitions=2, rf=2, min_isr=2)
        yield s


def manifest(name: str, partitions: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name},
        "spec": {"clusterName": "kip", "partitions": partitions, **spec},
    }


def replicas(sc: Scenario, p: int) -> list[int]:
    return [r["brokerId"] for r in sc.partitions("orders")[p]["replicas"]]


def free_broker(sc: Scenario, p: int) -> int:
    return next(b for b in range(sc.size) if b not in replicas(sc, p))


def snapshot(sc: Scenario) -> tuple[list[dict[str, Any]], dict[int, list[str]]]:
    """The partition states of record, and every broker's partition folders on disk."""
    assert sc.brokers is not None
    disks = {
        b: sorted(
            f"{os.path.basename(d)}/{n}"
            for d in sc.brokers[b].log_dirs
            if os.access(d, os.R_OK)
            for n in os.listdir(d)
            if n.startswith("orders-")
        )
        for b in range(sc.size)
    }
    # The controller may rewrite a state of record with its defaults spelled out (an empty
    # diskOfflineReplicas) without changing it: compare the states, not their spelling.
    states = [{"diskOfflineReplicas": [], **s} for s in sc.partitions("orders")]
    return states, disks


def refused(sc: Scenario, obj: dict[str, Any]) -> str:
    """``kubectl apply`` fails; returns its message. The object was not stored."""
    p = sc.kc.kubectl("apply", "-n", sc.ns, "-f", "-", input=json.dumps(obj))
    assert p.returncode != 0, f"accepted: {p.stdout}"
    assert sc.kube.get("partitionreassignment", obj["metadata"]["name"]) is None
    return p.stderr


def failed(sc: Scenario, obj: dict[str, Any]) -> str:
    """Accepted by the schema, then Failed by the operator; returns the Failed message."""
    before = snapshot(sc)
    sc.kube.apply(obj)
    name = obj["metadata"]["name"]
    cond = wait_for(
        lambda: (
            (c := sc.kube.condition("partitionreassignment", name, "Failed"))
            and c["status"] == "True"
            and c
        ),
        what=f"{name} Failed",
    )
    st = (sc.kube.get("partitionreassignment", name) or {})["status"]
    assert st["phase"] == "Failed" and cond["reason"] == "InvalidSpec", st
    assert cond["observedGeneration"] == 1 and cond["lastTransitionTime"], cond
    events = sc.kube.run("get", "events", "-n", sc.ns, "-o", "json")
    assert any(
        e["reason"] == "InvalidSpec" and e["involvedObject"]["name"] == name
        for e in json.loads(events)["items"]
    ), events
    assert snapshot(sc) == before, "a refused reassignment changed something"
    sc.kube.run("delete", "partitionreassignment", name, "-n", sc.ns)
    return str(cond["message"])


def part(p: int, reps: list[int], dirs: list[str] | None = None, topic: str = "orders") -> Any:
    out: dict[str, Any] = {"topic": topic, "partition": p, "replicas": reps}
    if dirs is not None:
        out["logDirs"] = dirs
    return out


SCHEMA_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "no partitions": ({"partitions": []}, "spec.partitions"),
    "partition twice": (
        {"partitions": [part(0, [0, 1]), part(0, [1, 2])]},
        "Duplicate value",
    ),
    "broker twice": ({"partitions": [part(0, [1, 1])]}, "Duplicate value"),
    "no replicas": ({"partitions": [part(0, [])]}, "spec.partitions[0].replicas"),
    "negative partition": ({"partitions": [part(-1, [0, 1])]}, "spec.partitions[0].partition"),
    "negative broker": ({"partitions": [part(0, [-1, 1])]}, "spec.partitions[0].replicas[0]"),
    "dirs count": ({"partitions": [part(0, [0, 1], ["a"])]}, "one directory per replica"),
    "bad dir": ({"partitions": [part(0, [0, 1], ["a", "../x"])]}, "logDirs[1]"),
    "bad topic name": ({"partitions": [part(0, [0, 1], topic="a/b")]}, "topic"),
    "zero replica movements": (
        {"partitions": [part(0, [0, 1])], "maxConcurrentReplicaMovements": 0},
        "maxConcurrentReplicaMovements",
    ),
    "zero partition movements": (
        {"partitions": [part(0, [0, 1])], "maxConcurrentPartitionMovements": 0},
        "maxConcurrentPartitionMovements",
    ),
    "zero leader movements": (
        {"partitions": [part(0, [0, 1])], "maxConcurrentLeaderMovements": 0},
        "maxConcurrentLeaderMovements",
    ),
    "huge moves per broker": (
        {"partitions": [part(0, [0, 1])], "maxConcurrentMovesPerBroker": 1000},
        "maxConcurrentMovesPerBroker",
    ),
    "zero throttle": (
        {"partitions": [part(0, [0, 1])], "throttleBytesPerSecond": 0},
        "throttleBytesPerSecond",
    ),
    "huge throttle": (
        {"partitions": [part(0, [0, 1])], "throttleBytesPerSecond": 2**60},
        "throttleBytesPerSecond",
    ),
    "tiny stall window": (
        {"partitions": [part(0, [0, 1])], "stallAfterSeconds": 1},
        "stallAfterSeconds",
    ),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_CASES))
def test_refused_by_schema(sc: Scenario, case: str) -> None:
    spec, where = SCHEMA_CASES[case]
    name = "bad-" + case.replace(" ", "-")
    msg = refused(sc, manifest(name, **spec))
    assert where in msg, msg


def test_unknown_topic(sc: Scenario) -> None:
    msg = failed(sc, manifest("no-topic", [part(0, [0, 1], topic="nope")]))
    assert "nope-0: topic 'nope' does not exist" in msg, msg


def test_unknown_partition(sc: Scenario) -> None:
    msg = failed(sc, manifest("no-partition", [part(7, [0, 1])]))
    assert "orders-7: topic 'orders' has no partition 7" in msg, msg


def test_unknown_broker(sc: Scenario) -> None:
    msg = failed(sc, manifest("no-broker", [part(0, [replicas(sc, 0)[0], 9])]))
    assert "orders-0: broker 9 does not exist (brokers 0-3)" in msg, msg


def test_rf_change_without_the_flag(sc: Scenario) -> None:
    msg = failed(sc, manifest("rf-up", [part(0, [0, 1, 2])]))
    assert "orders-0: the target has 3 replicas, the partition 2" in msg, msg
    assert "allowReplicationFactorChange" in msg, msg


def test_target_smaller_than_min_isr(sc: Scenario) -> None:
    msg = failed(sc, manifest("below-min-isr", [part(0, [0])], allowReplicationFactorChange=True))
    assert "fewer than the topic's min.insync.replicas 2" in msg, msg


def test_dir_not_on_that_broker(sc: Scenario) -> None:
    b = free_broker(sc, 0)
    keep = replicas(sc, 0)[0]
    msg = failed(sc, manifest("no-dir", [part(0, [keep, b], ["any", "z"])]))
    assert f"orders-0: broker {b} has no log dir 'z'" in msg, msg


def test_many_wrong_partitions_each_named(sc: Scenario) -> None:
    msg = failed(
        sc,
        manifest(
            "two-wrong",
            [part(0, [0, 1, 2]), part(5, [0, 1])],
        ),
    )
    assert msg.startswith("2 partition(s) refused"), msg
    assert "orders-0" in msg and "orders-5" in msg, msg


def test_cordoned_dir(sc: Scenario) -> None:
    b = free_broker(sc, 1)
    keep = replicas(sc, 1)[0]
    assert sc.brokers is not None
    path = next(d for d in sc.brokers[b].log_dirs if d.endswith(log_dir_folder("c")))
    client_run(sc, b, path, True)
    try:
        msg = failed(sc, manifest("to-cordoned", [part(1, [keep, b], ["any", "c"])]))
        assert f"log dir c of broker {b} is cordoned" in msg, msg
    finally:
        client_run(sc, b, path, False)


def test_offline_dir(sc: Scenario, tmp_path: Path) -> None:
    require_permissions(tmp_path)
    b = free_broker(sc, 1)
    keep = replicas(sc, 1)[0]
    assert sc.brokers is not None
    path = next(d for d in sc.brokers[b].log_dirs if d.endswith(log_dir_folder("c")))
    os.chmod(path, 0)
    try:
        wait_for(lambda: not dir_live(sc, b, path), what=f"broker {b} reporting {path} offline")
        msg = failed(sc, manifest("to-offline", [part(1, [keep, b], ["any", "c"])]))
        assert f"log dir c of broker {b} is offline" in msg, msg
    finally:
        os.chmod(path, 0o755)
    # KIP-112: a failed dir stays offline until the broker restarts.
    sc.brokers[b].stop()
    sc.brokers[b].start()
    wait_for(lambda: dir_live(sc, b, path), what=f"broker {b}'s dir live again")


def test_conflict_with_another_reassignment(sc: Scenario) -> None:
    """An active PartitionReassignment (paused, so it stays active) holds partition 0: a
    second one naming it is refused with the first one's name."""
    keep = replicas(sc, 0)
    sc.kube.apply(manifest("first", [part(0, list(reversed(keep)))], pause=True))
    wait_for(
        lambda: (
            ((sc.kube.get("partitionreassignment", "first") or {}).get("status") or {}).get("phase")
            == "Paused"
        ),
        what="first Paused",
    )
    try:
        msg = failed(sc, manifest("second", [part(0, keep)]))
        assert "orders-0: PartitionReassignment first is moving this partition" in msg, msg
    finally:
        sc.kube.run("delete", "partitionreassignment", "first", "-n", sc.ns)


def test_the_plan_cannot_change_once_written(sc: Scenario) -> None:
    """A written PartitionReassignment's partitions and cluster are refused by the API server
    (its status describes that plan); its limits and controls stay changeable."""
    keep = replicas(sc, 0)
    sc.kube.apply(manifest("fixed", [part(0, list(reversed(keep)))], pause=True))
    wait_for(
        lambda: (
            ((sc.kube.get("partitionreassignment", "fixed") or {}).get("status") or {}).get("phase")
            == "Paused"
        ),
        what="fixed Paused",
    )
    try:
        before = snapshot(sc)
        stored = sc.kube.get("partitionreassignment", "fixed")
        assert stored is not None
        for change, message in (
            ({"partitions": [part(1, [0, 1])]}, "partitions are immutable"),
            ({"partitions": [part(0, [free_broker(sc, 0), keep[0]])]}, "partitions are immutable"),
            ({"clusterName": "other"}, "clusterName is immutable"),
        ):
            p = sc.kc.kubectl(
                "patch",
                "partitionreassignment",
                "fixed",
                "-n",
                sc.ns,
                "--type",
                "merge",
                "-p",
                json.dumps({"spec": change}),
            )
            assert p.returncode != 0 and message in p.stderr, (change, p.stdout, p.stderr)
        after = sc.kube.get("partitionreassignment", "fixed")
        assert after is not None and after["spec"] == stored["spec"], after
        ok = sc.kc.kubectl(
            "patch",
            "partitionreassignment",
            "fixed",
            "-n",
            sc.ns,
            "--type",
            "merge",
            "-p",
            json.dumps({"spec": {"maxConcurrentPartitionMovements": 2}}),
        )
        assert ok.returncode == 0, ok.stderr
        assert snapshot(sc) == before, "a refused change moved something"
    finally:
        sc.kube.run("delete", "partitionreassignment", "fixed", "-n", sc.ns)


def client_run(sc: Scenario, b: int, path: str, cordoned: bool) -> None:
    import asyncio

    async def go() -> None:
        await sc.client(b).cordon_log_dir(path, cordoned)
        await sc.close_clients()

    asyncio.run(go())


def dir_live(sc: Scenario, b: int, path: str) -> bool:
    import asyncio

    async def go() -> bool:
        try:
            desc = await sc.client(b).describe_log_dirs()
            return any(d.path == path and d.is_live for d in desc.log_dirs)
        finally:
            await sc.close_clients()

    return asyncio.run(go())
