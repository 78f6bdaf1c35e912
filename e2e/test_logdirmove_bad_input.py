"""Bad LogDirMoves against the real API server, the operator process and local brokers.

Each one is either refused by the CRD schema at ``kubectl apply`` (the message names the field)
or accepted and then marked Failed by the operator, with a reason and a message naming the
broker and directory in the Failed condition and a Warning Event. In every case nothing moved:
every replica is still in the directory it was in (describe-log-dirs on every broker), no
``-future`` copy exists (in describe-log-dirs or on disk) and no broker is left throttled
(``GET /v1/admin/configs``).

One cluster (3 brokers x dirs a, b, c) serves the whole module; each test compares against a
snapshot it takes itself. ``test_move_into_a_drained_dir`` is the regression test of a bug the
plan had: a move into a cordoned (drained) dir was accepted.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import LeaderTracker, Scenario
from jbod_broker.storage.names import TopicPartition
from jbod_broker.wire import log_dir_short_name
from tests import waiting
from tests.integration.counting import fill_bytes
from tests.kube_cluster import KubeCluster
from tests.operator_harness import wait_for
from tests.permissions import require_permissions

pytestmark = pytest.mark.e2e

NS = "ldm-bad-input"
DIRS = ("a", "b", "c")
FINAL = ("Succeeded", "Failed", "Cancelled")

Placement = dict[tuple[int, str, int], str]
"""(broker, topic, partition) -> the log dir holding the current replica."""


@pytest.fixture(scope="module")
def sc(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    work: Path = tmp_path_factory.mktemp("ldm-bad-input")
    with Scenario(
        kube_cluster,
        work,
        NS,
        dirs=DIRS,
        operator_env={"JBOD_OPERATOR_MOVE_POLL_SECONDS": "0.5"},
    ) as s:
        s.create_topic("orders", partitions=3, rf=1, min_isr=1)
        yield s


# -- observing the brokers --------------------------------------------------------------------


def admin(sc: Scenario, broker: int, name: str, body: dict[str, Any] | None = None) -> Any:
    """A broker admin call over HTTP: POST with a JSON body, or GET without one."""
    assert sc.brokers is not None
    req = urllib.request.Request(
        f"{sc.brokers[broker].url}/v1/admin/{name}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {sc.brokers.token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def log_dirs(sc: Scenario, broker: int) -> list[dict[str, Any]]:
    return list(admin(sc, broker, "describe-log-dirs", {})["log_dirs"])


def placement(sc: Scenario) -> tuple[Placement, list[str]]:
    """Where every current replica is, and every future replica (``broker:dir:topic-p``)."""
    where: Placement = {}
    futures: list[str] = []
    for b in range(sc.size):
        for d in log_dirs(sc, b):
            for p in d["partitions"]:
                if p["is_future"]:
                    futures.append(f"{b}:{d['path']}:{p['topic']}-{p['partition']}")
                else:
                    where[(b, p["topic"], p["partition"])] = d["path"]
    return where, futures


def future_folders(sc: Scenario) -> list[str]:
    assert sc.brokers is not None
    return [
        os.path.join(d, n)
        for b in sc.brokers.brokers
        for d in b.log_dirs
        if os.access(d, os.R_OK | os.X_OK)
        for n in os.listdir(d)
        if n.endswith("-future")
    ]


def throttles(sc: Scenario) -> dict[int, int]:
    return {b: admin(sc, b, "configs")["intra_broker_throttled_rate"] for b in range(sc.size)}


def what_moved(sc: Scenario, before: Placement) -> list[str]:
    now, futures = placement(sc)
    out = [
        f"broker {k[0]}: {k[1]}-{k[2]} {before.get(k)} -> {now.get(k)}"
        for k in sorted(set(before) | set(now))
        if before.get(k) != now.get(k)
    ]
    out += [f"future replica {f}" for f in futures]
    out += [f"future folder {f}" for f in future_folders(sc)]
    out += [f"broker {b} throttled at {r} B/s" for b, r in throttles(sc).items() if r]
    return out


def assert_nothing_moved(sc: Scenario, before: Placement, *, settle_s: float = 0) -> None:
    """Nothing moved, no future copy, no throttle; ``settle_s`` allows a cancel to finish."""
    if settle_s:
        waiting.wait_for(
            lambda: not what_moved(sc, before), lambda: f"{what_moved(sc, before)}", settle_s
        )
    assert not (problems := what_moved(sc, before)), problems


def dir_path(sc: Scenario, broker: int, name: str) -> str:
    assert sc.brokers is not None
    return next(d for d in sc.brokers[broker].log_dirs if log_dir_short_name(d) == name)


def replica_of(sc: Scenario, tp: TopicPartition) -> tuple[int, str]:
    """(broker, dir name) of a replica of an rf-1 topic, from the Topic status."""
    r = sc.state(tp)["replicas"][0]
    return int(r["brokerId"]), log_dir_short_name(r["logDir"])


# -- LogDirMoves ----------------------------------------------------------------------------


def manifest(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "LogDirMove",
        "metadata": {"name": name},
        "spec": {"clusterName": "kip", **spec},
    }


def mv(broker: int, topic: str, partition: int, log_dir: str) -> dict[str, Any]:
    return {"brokerId": broker, "topic": topic, "partition": partition, "logDir": log_dir}


def get_move(sc: Scenario, name: str) -> dict[str, Any]:
    m = sc.kube.get("logdirmove", name) or {}
    sc.last_status = m.get("status")  # type: ignore[attr-defined]
    return m


def phase(sc: Scenario, name: str) -> str | None:
    return (get_move(sc, name).get("status") or {}).get("phase")


def delete(sc: Scenario, *names: str) -> None:
    for n in names:
        sc.kube.run("delete", "logdirmove", n, "-n", sc.ns, "--ignore-not-found", "--wait=true")


def events_of(sc: Scenario, name: str) -> list[dict[str, Any]]:
    out = sc.kube.run(
        "get",
        "events",
        "-n",
        sc.ns,
        "--field-selector",
        f"involvedObject.name={name}",
        "-o",
        "json",
    )
    return list(json.loads(out)["items"])


def refused(sc: Scenario, obj: dict[str, Any]) -> str:
    """``kubectl apply`` fails; returns its message. The object was not stored."""
    p = sc.kc.kubectl("apply", "-n", sc.ns, "-f", "-", input=json.dumps(obj))
    assert p.returncode != 0, f"accepted: {p.stdout}"
    assert sc.kube.get("logdirmove", obj["metadata"]["name"]) is None
    return p.stderr


def failed(sc: Scenario, obj: dict[str, Any], reason: str, timeout: float = 30) -> dict[str, Any]:
    """Apply, wait for a final phase, demand Failed with ``reason`` in the Failed condition and a
    Warning Event with that reason. Returns the Failed condition."""
    name = obj["metadata"]["name"]
    sc.kube.apply(obj)
    final = wait_for(
        lambda: (p := phase(sc, name)) in FINAL and p, timeout=timeout, what=f"{name} finished"
    )
    st = get_move(sc, name)["status"]
    assert final == "Failed", st
    conds = {c["type"]: c for c in st["conditions"]}
    cond = conds["Failed"]
    assert cond["status"] == "True" and cond["reason"] == reason, cond
    assert cond["observedGeneration"] == 1 and cond["lastTransitionTime"], cond
    assert conds["Progressing"]["status"] == "False" and conds["Succeeded"]["status"] == "False"
    assert not any(r.get("state") == "Moving" for r in st.get("replicas") or []), st
    ev = wait_for(
        lambda: [e for e in events_of(sc, name) if e["reason"] == reason],
        timeout=15,
        what=f"a {reason} Event for {name}",
    )
    assert ev[0]["type"] == "Warning" and ev[0]["message"] == cond["message"], ev[0]
    assert ev[0]["involvedObject"]["kind"] == "LogDirMove"
    return cond


# -- refused by the schema ----------------------------------------------------------------------

SCHEMA_CASES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "relative-path": (
        {"moves": [mv(0, "orders", 0, "data/x")]},
        ["spec.moves[0].logDir", "should match"],
    ),
    "relative-path-drain": (
        {"drain": {"brokerId": 0, "logDir": "data/x"}},
        ["spec.drain.logDir", "should match"],
    ),
    "path-traversal": (
        {"moves": [mv(0, "orders", 0, "/x/../y")]},
        ["spec.moves[0].logDir", "should match"],
    ),
    "dot-segment": (
        {"drain": {"brokerId": 0, "logDir": "/x/./data-a"}},
        ["spec.drain.logDir", "should match"],
    ),
    "duplicate-replica": (
        {"moves": [mv(0, "orders", 0, "a"), mv(0, "orders", 0, "b")]},
        ["spec.moves[1]", "Duplicate value"],
    ),
    "negative-throttle": (
        {"moves": [mv(0, "orders", 0, "a")], "throttleBytesPerSecond": -1},
        ["spec.throttleBytesPerSecond", "greater than or equal to 0"],
    ),
    "both-moves-and-drain": (
        {"moves": [mv(0, "orders", 0, "a")], "drain": {"brokerId": 0, "logDir": "b"}},
        ["set exactly one of moves or drain"],
    ),
    "neither-moves-nor-drain": ({}, ["set exactly one of moves or drain"]),
    "empty-moves": ({"moves": []}, ["set exactly one of moves or drain"]),
    "max-concurrent-0": (
        {"moves": [mv(0, "orders", 0, "a")], "maxConcurrentMovesPerBroker": 0},
        ["spec.maxConcurrentMovesPerBroker", "greater than or equal to 1"],
    ),
    "timeout-0": (
        {"moves": [mv(0, "orders", 0, "a")], "timeoutSeconds": 0},
        ["spec.timeoutSeconds", "greater than or equal to 1"],
    ),
    "replica-wait-0": (
        {"moves": [mv(0, "orders", 0, "a")], "replicaWaitSeconds": 0},
        ["spec.replicaWaitSeconds", "greater than or equal to 1"],
    ),
    "negative-broker": (
        {"moves": [mv(-1, "orders", 0, "a")]},
        ["spec.moves[0].brokerId", "greater than or equal to 0"],
    ),
}


@pytest.mark.parametrize("case", list(SCHEMA_CASES))
def test_refused_by_schema(sc: Scenario, case: str) -> None:
    spec, expected = SCHEMA_CASES[case]
    before, _ = placement(sc)
    msg = refused(sc, manifest(f"bad-{case}", **spec))
    for text in expected:
        assert text in msg, msg
    assert_nothing_moved(sc, before)


# -- accepted, then Failed by the operator ----------------------------------------------------


def test_unknown_broker(sc: Scenario) -> None:
    before, _ = placement(sc)
    cond = failed(sc, manifest("unknown-broker", moves=[mv(7, "orders", 0, "a")]), "InvalidSpec")
    assert cond["message"] == "broker 7 does not exist (the cluster has brokers 0-2)"
    cond = failed(
        sc, manifest("unknown-broker-drain", drain={"brokerId": 7, "logDir": "a"}), "InvalidSpec"
    )
    assert cond["message"].startswith("broker 7 does not exist")
    assert "replicas" not in (get_move(sc, "unknown-broker").get("status") or {})
    assert_nothing_moved(sc, before)
    delete(sc, "unknown-broker", "unknown-broker-drain")


def test_unknown_dir(sc: Scenario) -> None:
    b, _ = replica_of(sc, TopicPartition("orders", 0))
    before, _ = placement(sc)
    cond = failed(sc, manifest("unknown-dir", moves=[mv(b, "orders", 0, "zzz")]), "InvalidSpec")
    assert cond["message"] == f"broker {b} has no log dir 'zzz' (it has: a, b, c)"
    # An absolute path that is not one of the broker's dirs (not even by its basename).
    elsewhere = "/nowhere/data-a"
    cond = failed(
        sc, manifest("unknown-path", moves=[mv(b, "orders", 0, elsewhere)]), "InvalidSpec"
    )
    assert cond["message"] == f"broker {b} has no log dir '{elsewhere}' (it has: a, b, c)"
    assert_nothing_moved(sc, before)
    delete(sc, "unknown-dir", "unknown-path")


def test_drain_of_unknown_dir(sc: Scenario) -> None:
    before, _ = placement(sc)
    cond = failed(
        sc, manifest("drain-unknown", drain={"brokerId": 1, "logDir": "zzz"}), "InvalidSpec"
    )
    assert cond["message"] == "broker 1 has no log dir 'zzz'"
    assert not any(d["cordoned"] for b in range(sc.size) for d in log_dirs(sc, b))
    assert_nothing_moved(sc, before)
    delete(sc, "drain-unknown")


def test_replica_not_on_that_broker(sc: Scenario) -> None:
    tp = TopicPartition("orders", 0)
    home, _ = replica_of(sc, tp)
    other = (home + 1) % sc.size
    before, _ = placement(sc)
    started = time.monotonic()
    # Throttled, to show the throttle is lifted when the move gives up.
    obj = manifest(
        "not-here",
        moves=[mv(other, "orders", 0, "c")],
        replicaWaitSeconds=2,
        throttleBytesPerSecond=1 << 20,
    )
    cond = failed(sc, obj, "ReplicaMovesFailed")
    # It retried before giving up (KIP-113). Only >= 1 s is certain: startTime is truncated to
    # the second, so the handler may give up up to 1 s before replicaWaitSeconds (a bug).
    assert time.monotonic() - started >= 1
    assert f"orders-0 is not on broker {other} (waited 2 s)" in cond["message"], cond
    st = get_move(sc, "not-here")["status"]
    assert [r["state"] for r in st["replicas"]] == ["Failed"]
    assert st["replicas"][0]["targetLogDir"] == dir_path(sc, other, "c")
    assert [e for e in events_of(sc, "not-here") if e["reason"] == "ReplicaNotFound"]
    assert_nothing_moved(sc, before)
    delete(sc, "not-here")


def test_unknown_topic(sc: Scenario) -> None:
    before, _ = placement(sc)
    obj = manifest("ghost", moves=[mv(1, "ghost", p, "c") for p in range(2)], replicaWaitSeconds=2)
    cond = failed(sc, obj, "ReplicaMovesFailed")
    assert cond["message"].startswith("2 of 2 replicas not moved: ghost-0 is not on broker 1")
    assert "ghost-1 is not on broker 1 (waited 2 s)" in cond["message"]
    assert_nothing_moved(sc, before)
    delete(sc, "ghost")


async def test_conflict_with_a_running_move(sc: Scenario) -> None:
    tp = TopicPartition("orders", 1)
    b, cur = replica_of(sc, tp)
    others = [d for d in DIRS if d != cur]
    await fill_bytes(LeaderTracker(sc, [tp]), [tp], 2)
    await sc.close_clients()
    before, _ = placement(sc)
    try:
        sc.kube.apply(
            manifest(
                "first", moves=[mv(b, "orders", 1, others[0])], throttleBytesPerSecond=128 << 10
            )
        )
        await asyncio.to_thread(
            wait_for, lambda: phase(sc, "first") == "Moving", what="first Moving"
        )
        assert throttles(sc)[b] == 128 << 10
        cond = await asyncio.to_thread(
            failed, sc, manifest("second", moves=[mv(b, "orders", 1, others[1])]), "Conflict"
        )
        assert cond["message"] == (
            f"refused: LogDirMove first (it already moves orders-1 on broker {b})"
        )
        st = get_move(sc, "second")["status"]
        assert not st.get("replicas"), st
        # The first one carries on, untouched, and never towards the second's target.
        assert phase(sc, "first") == "Moving"
        _, futures = placement(sc)
        assert futures == [f"{b}:{dir_path(sc, b, others[0])}:orders-1"], futures
    finally:
        # Deleting the running one cancels it: its future goes, its throttle is lifted.
        delete(sc, "first", "second")
    assert_nothing_moved(sc, before, settle_s=20)


def test_move_into_a_drained_dir(sc: Scenario) -> None:
    tp = TopicPartition("orders", 2)
    b, cur = replica_of(sc, tp)
    target = next(d for d in DIRS if d != cur)
    try:
        sc.kube.apply(manifest("drain-it", drain={"brokerId": b, "logDir": target}))
        wait_for(lambda: phase(sc, "drain-it") == "Succeeded", what="drain Succeeded")
        d = next(x for x in log_dirs(sc, b) if x["path"] == dir_path(sc, b, target))
        assert d["cordoned"] and not d["partitions"]
        before, _ = placement(sc)
        sc.kube.apply(manifest("into-drained", moves=[mv(b, "orders", 2, target)]))
        final = wait_for(
            lambda: (p := phase(sc, "into-drained")) in FINAL and p, what="into-drained finished"
        )
        assert final == "Failed", f"the move into the drained dir {target} ended {final}"
        assert_nothing_moved(sc, before)
    finally:
        delete(sc, "into-drained", "drain-it")


def test_offline_dir(sc: Scenario, tmp_path: Path) -> None:
    """A target, or a drain source, that is offline: chmod 000 one of a broker's dirs, wait
    until the broker reports it offline, then restore it (a restart brings it back)."""
    require_permissions(tmp_path)
    assert sc.brokers is not None
    where, _ = placement(sc)
    busy = set(where.values())
    # An empty dir, so that no replica goes offline with it.
    b, name = next((b, n) for b in range(sc.size) for n in DIRS if dir_path(sc, b, n) not in busy)
    path = dir_path(sc, b, name)
    replica = next(((t, p) for (broker, t, p) in where if broker == b), ("orders", 0))
    os.chmod(path, 0)
    try:
        wait_for(
            lambda: any(d["path"] == path and not d["is_live"] for d in log_dirs(sc, b)),
            what=f"broker {b} reporting {path} offline",
        )
        before, _ = placement(sc)
        cond = failed(
            sc, manifest("to-offline", moves=[mv(b, replica[0], replica[1], name)]), "InvalidSpec"
        )
        assert cond["message"] == f"broker {b}: target log dir {path} is offline"
        cond = failed(
            sc, manifest("drain-offline", drain={"brokerId": b, "logDir": path}), "InvalidSpec"
        )
        assert cond["message"] == (
            f"broker {b}: log dir {path} is offline; it cannot be read to drain it"
        )
        assert_nothing_moved(sc, before)
    finally:
        os.chmod(path, 0o755)
    delete(sc, "to-offline", "drain-offline")
    # KIP-112: a failed dir stays offline until the broker restarts.
    sc.brokers[b].stop()
    sc.brokers[b].start()
    wait_for(
        lambda: all(d["is_live"] for d in log_dirs(sc, b)), what=f"broker {b}'s dirs live again"
    )
