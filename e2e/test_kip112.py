"""KIP-112 system tests 1-3 (log dir failure at bootstrap, on the leader, on a follower), each
followed by the KIP's second half: another topic, the other two brokers killed, produce and
consume on the new topic. 3 brokers x 2 log dirs, acks=all, min ISR 2, counted records."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import LeaderTracker, Scenario, wait_async
from jbod_broker.storage.names import TopicPartition
from jbod_broker.wire import log_dir_short_name
from tests.integration.counting import CountingProducer, consume_all, verify, wait_acked_more
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.e2e


@pytest.fixture
def sc(
    kube_cluster: KubeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Scenario]:
    ns = request.node.name.replace("_", "-")[:50]
    with Scenario(kube_cluster, tmp_path, ns) as s:
        yield s


WRITES = 100
"""Records acknowledged to call it "writes go on" (a count, not a window of time)."""


async def produce(sc: Scenario, tps: list[TopicPartition], records: int) -> CountingProducer:
    """Produce until ``records`` are acknowledged."""
    tracker = LeaderTracker(sc, tps)
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    try:
        await wait_acked_more(prod, records)
    finally:
        await prod.stop()
    await tracker.stop()
    return prod


async def check_no_loss(sc: Scenario, tps: list[TopicPartition], *prods: CountingProducer) -> None:
    tracker = LeaderTracker(sc, tps)
    acked: dict[TopicPartition, list[bytes]] = {}
    for p in prods:
        for tp, v in p.acked.items():
            acked.setdefault(tp, []).extend(v)
    consumed = {tp: await consume_all(tracker, tp, timeout_s=60) for tp in tps}
    verify(acked, consumed)
    assert sum(len(v) for v in acked.values()) > 0


async def second_half(sc: Scenario, survivor: int) -> None:
    """Another topic; kill the two other brokers; the survivor serves it alone."""
    new = sc.create_topic("second", rf=3, min_isr=1)
    tp = new[0]
    # The survivor created its replica on a live directory (it has an offline one).
    st = sc.state(tp)
    d = next(r["logDir"] for r in st["replicas"] if r["brokerId"] == survivor)
    assert os.path.isdir(os.path.join(d, "second-0"))
    assert sc.brokers is not None
    for b in range(3):
        if b != survivor:
            sc.brokers[b].kill()
    await wait_async(lambda: sc.leader(tp) == survivor, what="the survivor to lead")
    prod = await produce(sc, new, WRITES)
    assert prod.acked_count > 0, prod.errors
    await check_no_loss(sc, new, prod)


def offline_dir_reported(sc: Scenario, broker: int, d: str) -> bool:
    bc = sc.kube.get("brokercluster", "kip") or {}
    status = bc.get("status") or {}
    b = next((x for x in status.get("brokers", []) if x["id"] == broker), None)
    degraded: dict[str, Any] = next(
        (c for c in status.get("conditions", []) if c["type"] == "Degraded"), {}
    )
    name = log_dir_short_name(d)
    return bool(b and name in b.get("offlineLogDirs", []) and degraded.get("status") == "True")


async def test_kip112_failure_at_bootstrap(sc: Scenario) -> None:
    tps = sc.create_topic("orders")
    tp = tps[0]
    first = await produce(sc, tps, WRITES)
    old = sc.leader(tp)
    d = sc.replica_dir(tp, old)
    assert sc.brokers is not None
    sc.brokers[old].kill()
    await wait_async(lambda: sc.leader(tp) not in (old, -1), what="a new leader")
    os.chmod(d, 0)  # the previous leader's disk is now unreadable
    sc.brokers[old].start()
    await wait_async(
        lambda: old in sc.state(tp).get("diskOfflineReplicas", []), what="offline replica"
    )
    assert old not in sc.state(tp)["isr"] and old in sc.state(tp)["offlineReplicas"]
    await wait_async(lambda: offline_dir_reported(sc, old, d), what="Degraded BrokerCluster")
    events = sc.kube.run("get", "events", "-n", sc.ns, "-o", "json")
    assert "LogDirOffline" in events
    second = await produce(sc, tps, WRITES)
    assert second.acked_count > 0, second.errors
    await check_no_loss(sc, tps, first, second)
    await second_half(sc, old)
    await sc.close_clients()


async def test_kip112_leader_dir_failure(sc: Scenario) -> None:
    tps = sc.create_topic("orders")
    tp = tps[0]
    tracker = LeaderTracker(sc, tps)
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    await wait_acked_more(prod, WRITES, "writes before the failure")
    old = sc.leader(tp)
    d = sc.replica_dir(tp, old)
    os.chmod(d, 0)
    await wait_async(lambda: sc.leader(tp) not in (old, -1), what="a new leader", timeout=60)
    before = prod.acked_count
    await wait_acked_more(prod, WRITES, "writes acknowledged by the new leader")
    await prod.stop()
    await tracker.stop()
    assert prod.acked_count > before, f"no writes acknowledged by the new leader: {prod.errors}"
    st = sc.state(tp)
    assert old in st["offlineReplicas"] and old not in st["isr"]
    await wait_async(lambda: offline_dir_reported(sc, old, d), what="Degraded BrokerCluster")
    await check_no_loss(sc, tps, prod)
    await second_half(sc, old)
    await sc.close_clients()


async def test_kip112_follower_dir_failure(sc: Scenario) -> None:
    tps = sc.create_topic("orders")
    tp = tps[0]
    tracker = LeaderTracker(sc, tps)
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    await wait_acked_more(prod, WRITES, "writes before the failure")
    leader = sc.leader(tp)
    follower = next(r["brokerId"] for r in sc.state(tp)["replicas"] if r["brokerId"] != leader)
    d = sc.replica_dir(tp, follower)
    os.chmod(d, 0)
    await wait_async(
        lambda: follower not in sc.state(tp)["isr"], what="the follower out of the ISR"
    )
    before = prod.acked_count
    await wait_acked_more(prod, WRITES, "writes with the follower out of the ISR")
    await prod.stop()
    await tracker.stop()
    assert prod.acked_count > before, prod.errors
    assert sc.leader(tp) == leader  # a follower's disk does not move leadership
    await wait_async(lambda: offline_dir_reported(sc, follower, d), what="Degraded BrokerCluster")
    await check_no_loss(sc, tps, prod)
    await second_half(sc, follower)
    await sc.close_clients()
