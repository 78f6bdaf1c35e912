"""LogDirMove end to end: declared with kubectl, driven by the operator, verified on disk.
Each scenario runs a producer (acks=all) and a consumer that count."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import LeaderTracker, Scenario, wait_async
from jbod_broker.storage.names import TopicPartition
from jbod_broker.wire import log_dir_folder, log_dir_short_name
from tests.integration.counting import CountingProducer, consume_all, fill_bytes, verify
from tests.kube_cluster import KubeCluster
from tests.permissions import require_permissions

pytestmark = pytest.mark.e2e

THROTTLE = 2 * 1024 * 1024  # bytes/s: slow enough to watch and to interrupt


@pytest.fixture
def sc(
    kube_cluster: KubeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Scenario]:
    ns = request.node.name.replace("_", "-")[:50]
    with Scenario(
        kube_cluster, tmp_path, ns, operator_env={"JBOD_OPERATOR_MOVE_POLL_SECONDS": "0.5"}
    ) as s:
        yield s


def move_manifest(name: str, moves: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "LogDirMove",
        "metadata": {"name": name},
        "spec": {"clusterName": "kip", "moves": moves, **spec},
    }


def other_dir(sc: Scenario, tp: TopicPartition) -> tuple[int, str]:
    st = sc.state(tp)
    r = st["replicas"][0]
    current = log_dir_short_name(r["logDir"])
    return r["brokerId"], next(d for d in sc.dirs if d != current)


def every_replica_to_other_dir(sc: Scenario, tps: list[TopicPartition]) -> list[dict[str, Any]]:
    out = []
    for tp in tps:
        b, d = other_dir(sc, tp)
        out.append({"brokerId": b, "topic": tp.topic, "partition": tp.partition, "logDir": d})
    return out


def phase(sc: Scenario, name: str) -> str | None:
    m = sc.kube.get("logdirmove", name) or {}
    sc.last_status = m.get("status")  # type: ignore[attr-defined]
    return (m.get("status") or {}).get("phase")


async def fill(sc: Scenario, tps: list[TopicPartition], mib: float) -> CountingProducer:
    """Counted records, then ``mib`` MiB of bulk per partition (so moves take time)."""
    tracker = LeaderTracker(sc, tps)
    prod = CountingProducer(tracker, tps, records_per_batch=20)
    for _ in range(10):
        await prod.produce_one_round()
    await fill_bytes(tracker, tps, mib)
    return prod


class Traffic:
    """A producer that keeps writing while moves run."""

    def __init__(self, sc: Scenario, tps: list[TopicPartition]) -> None:
        self.tracker = LeaderTracker(sc, tps)
        self.prod = CountingProducer(self.tracker, tps, timeout_ms=5000)

    async def __aenter__(self) -> CountingProducer:
        self.tracker.start()
        self.prod.start()
        return self.prod

    async def __aexit__(self, *exc: object) -> None:
        await self.prod.stop()
        await self.tracker.stop()


async def check(sc: Scenario, tps: list[TopicPartition], *prods: CountingProducer) -> None:
    tracker = LeaderTracker(sc, tps)
    acked: dict[TopicPartition, list[bytes]] = {}
    for p in prods:
        for tp, v in p.acked.items():
            acked.setdefault(tp, []).extend(v)
    consumed = {tp: await consume_all(tracker, tp, timeout_s=60) for tp in tps}
    verify(acked, consumed)


def no_leftovers(sc: Scenario) -> list[str]:
    assert sc.brokers is not None
    return [
        os.path.join(d, n)
        for b in sc.brokers.brokers
        for d in b.log_dirs
        if os.access(d, os.R_OK)
        for n in os.listdir(d)
        if n.endswith(("-future", "-delete"))
    ]


async def test_kip113_move_within_broker(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=3, rf=1, min_isr=1)
    seed = await fill(sc, tps, 4)
    moves = every_replica_to_other_dir(sc, tps)
    async with Traffic(sc, tps) as prod:
        sc.kube.apply(move_manifest("even", moves, throttleBytesPerSecond=THROTTLE))
        table = await wait_async(
            lambda: (
                (out := sc.kube.run("get", "logdirmoves", "-n", sc.ns)) and "Moving" in out and out
            ),
            what="kubectl get logdirmoves showing progress",
        )
        header = table.splitlines()[0].split()
        assert header[:6] == ["NAME", "CLUSTER", "STATE", "PROGRESS", "RATE", "ETA"], table
        await wait_async(lambda: phase(sc, "even") == "Succeeded", what="Succeeded", timeout=120)
    m = sc.kube.get("logdirmove", "even") or {}
    st = m["status"]
    assert st["progressPercent"] == 100 and all(r["state"] == "Succeeded" for r in st["replicas"])
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Succeeded"]["status"] == "True" and conds["Progressing"]["status"] == "False"
    assert all(c["observedGeneration"] == 1 and c["lastTransitionTime"] for c in conds.values())
    for mv, tp in zip(moves, tps, strict=True):
        # On disk, and in the Topic's status: the replica is in its new dir.
        assert log_dir_short_name(sc.state(tp)["replicas"][0]["logDir"]) == mv["logDir"]
        assert os.path.isdir(
            os.path.join(sc.state(tp)["replicas"][0]["logDir"], f"orders-{tp.partition}")
        )
    events = sc.kube.run("get", "events", "-n", sc.ns, "-o", "json")
    assert "ReplicaMoved" in events and "AllMoved" in events
    await wait_async(lambda: not no_leftovers(sc), what="no -future/-delete folders")
    await check(sc, tps, seed, prod)
    await sc.close_clients()


async def test_logdirmove_cancel(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=2, rf=1, min_isr=1)
    seed = await fill(sc, tps, 4)
    before = {tp: sc.state(tp)["replicas"][0]["logDir"] for tp in tps}
    moves = every_replica_to_other_dir(sc, tps)
    sc.kube.apply(move_manifest("slow", moves, throttleBytesPerSecond=256 * 1024))
    await wait_async(lambda: phase(sc, "slow") == "Moving", what="Moving")
    sc.kube.run(
        "patch",
        "logdirmove",
        "slow",
        "-n",
        sc.ns,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"cancel": True}}),
    )
    await wait_async(lambda: phase(sc, "slow") == "Cancelled", what="Cancelled")
    assert {tp: sc.state(tp)["replicas"][0]["logDir"] for tp in tps} == before
    await wait_async(lambda: not no_leftovers(sc), what="futures removed")
    # The throttle was lifted.
    cfg = await sc.client(moves[0]["brokerId"]).set_configs(
        __import__("jbod_broker.wire", fromlist=["ThrottleConfig"]).ThrottleConfig()
    )
    assert cfg.intra_broker_throttled_rate == 0
    await check(sc, tps, seed)
    await sc.close_clients()


async def test_logdirmove_operator_killed(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=3, rf=1, min_isr=1)
    seed = await fill(sc, tps, 4)
    moves = every_replica_to_other_dir(sc, tps)
    async with Traffic(sc, tps) as prod:
        sc.kube.apply(
            move_manifest(
                "survive", moves, throttleBytesPerSecond=THROTTLE, maxConcurrentMovesPerBroker=1
            )
        )
        await wait_async(lambda: phase(sc, "survive") == "Moving", what="Moving")
        sc.ops[0].kill()
        await asyncio.sleep(1)
        sc.ops[0].start()
        await wait_async(lambda: phase(sc, "survive") == "Succeeded", what="Succeeded", timeout=120)
    st = (sc.kube.get("logdirmove", "survive") or {})["status"]
    assert all(r["state"] == "Succeeded" for r in st["replicas"])
    await check(sc, tps, seed, prod)
    await sc.close_clients()


async def test_logdirmove_broker_killed(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=3, rf=1, min_isr=1)
    seed = await fill(sc, tps, 4)
    moves = every_replica_to_other_dir(sc, tps)
    sc.kube.apply(move_manifest("bounce", moves, throttleBytesPerSecond=512 * 1024))
    await wait_async(lambda: phase(sc, "bounce") == "Moving", what="Moving")
    victim = moves[0]["brokerId"]
    assert sc.brokers is not None
    sc.brokers[victim].kill()
    await asyncio.sleep(1)
    sc.brokers[victim].start()
    await wait_async(lambda: phase(sc, "bounce") == "Succeeded", what="Succeeded", timeout=120)
    await wait_async(lambda: not no_leftovers(sc), what="no -future/-delete folders")
    await check(sc, tps, seed)
    await sc.close_clients()


async def test_logdirmove_dest_dir_fails(sc: Scenario, tmp_path: Path) -> None:
    require_permissions(tmp_path)
    tps = sc.create_topic("orders", partitions=3, rf=1, min_isr=1)
    seed = await fill(sc, tps, 4)
    moves = every_replica_to_other_dir(sc, tps)
    sc.kube.apply(move_manifest("doomed", moves, throttleBytesPerSecond=512 * 1024))
    await wait_async(lambda: phase(sc, "doomed") == "Moving", what="Moving")
    bad = moves[0]
    assert sc.brokers is not None
    dest = next(
        d for d in sc.brokers[bad["brokerId"]].log_dirs if log_dir_short_name(d) == bad["logDir"]
    )
    os.chmod(dest, 0)
    try:
        await wait_async(lambda: phase(sc, "doomed") == "Failed", what="Failed", timeout=120)
        st = (sc.kube.get("logdirmove", "doomed") or {})["status"]
        failed = [r for r in st["replicas"] if r["state"] == "Failed"]
        assert failed and f"broker {bad['brokerId']}" in failed[0]["message"]
        assert dest in failed[0]["message"] or log_dir_folder(bad["logDir"]) in failed[0]["message"]
        # The other brokers' moves carried on.
        assert any(r["state"] == "Succeeded" for r in st["replicas"])
        failed_cond = next(c for c in st["conditions"] if c["type"] == "Failed")
        assert failed_cond["status"] == "True" and failed_cond["message"]
    finally:
        os.chmod(dest, 0o755)
    await check(sc, tps, seed)
    await sc.close_clients()


async def test_logdir_drain(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=6, rf=2, min_isr=1)
    seed = await fill(sc, tps, 1)
    sc.kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "LogDirMove",
            "metadata": {"name": "drain-a"},
            "spec": {"clusterName": "kip", "drain": {"brokerId": 0, "logDir": "a"}},
        }
    )
    await wait_async(lambda: phase(sc, "drain-a") == "Succeeded", what="drained", timeout=120)
    assert sc.brokers is not None
    a0 = next(d for d in sc.brokers[0].log_dirs if d.endswith("data-a"))
    assert not [n for n in os.listdir(a0) if "-" in n and os.path.isdir(os.path.join(a0, n))]
    # A new topic does not land on the cordoned dir.
    new = sc.create_topic("fresh", partitions=4, rf=3, min_isr=1)
    for tp in new:
        assert not any(r["logDir"] == a0 for r in sc.state(tp)["replicas"])
    # Only now may the dir leave the cluster spec: accepted, no StorageChangeRefused.
    # (Every broker's dir a must be empty: drain the others too.)
    for b in (1, 2):
        sc.kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "LogDirMove",
                "metadata": {"name": f"drain-a-{b}"},
                "spec": {"clusterName": "kip", "drain": {"brokerId": b, "logDir": "a"}},
            }
        )
        await wait_async(
            lambda b=b: phase(sc, f"drain-a-{b}") == "Succeeded", what="drained", timeout=120
        )
    bc = sc.kube.get("brokercluster", "kip") or {}
    spec = bc["spec"]
    spec["logDirs"] = [d for d in spec["logDirs"] if d["name"] != "a"]
    sc.kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "BrokerCluster",
            "metadata": {"name": "kip"},
            "spec": spec,
        }
    )

    def templates() -> list[str]:
        sc.kube.finish_orphan_deletions()
        sts = sc.kube.get("statefulset", "kip-broker") or {}
        return [t["metadata"]["name"] for t in sts.get("spec", {}).get("volumeClaimTemplates", [])]

    await wait_async(lambda: templates() == ["data-b"], what="data-a removed from the template")
    await check(sc, tps, seed)
    await sc.close_clients()
