"""Failover: a leader broker killed with SIGKILL (time until a new leader serves writes), and
the active operator stopped mid-way (the standby takes over, bumps the controller epoch, and
the old operator's requests are refused). Counted records throughout."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.scenario import LeaderTracker, Scenario, wait_async
from jbod_broker import wire
from jbod_broker.errors import StaleControllerEpochError
from tests.integration.counting import CountingProducer, consume_all, verify, wait_acked_more
from tests.kube_cluster import KubeCluster
from tests.tiers import SERIAL

pytestmark = [pytest.mark.e2e, SERIAL]

WRITES = 100
"""Records acknowledged to call it "writes go on" (a count, not a window of time)."""


@pytest.fixture
def sc(kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    # Default liveness settings: the failover time printed is what a user gets.
    with Scenario(
        kube_cluster, tmp_path, "failover", broker_settings={"broker.heartbeat.interval.ms": "1000"}
    ) as s:
        yield s


async def test_broker_kill_failover(sc: Scenario) -> None:
    tps = sc.create_topic("orders", partitions=3)
    tracker = LeaderTracker(sc, tps)
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    await wait_acked_more(prod, WRITES, "writes before the kill")
    tp = tps[0]
    victim = sc.leader(tp)
    assert sc.brokers is not None
    killed_at = time.monotonic()
    sc.brokers[victim].kill()
    # Time until a write to the partition is acknowledged by a new leader.
    before = len(prod.acked.get(tp, []))
    await wait_async(
        lambda: len(prod.acked.get(tp, [])) > before and tracker.leaders[tp] != victim,
        what="a write acknowledged by a new leader",
        timeout=60,
        interval=0.05,  # the resolution of the failover time printed
    )
    failover_s = time.monotonic() - killed_at
    print(
        f"\nleader failover: {failover_s:.2f} s from SIGKILL to the first write acknowledged "
        f"by the new leader (session timeout 6 s, heartbeat 1 s)"
    )
    await wait_acked_more(prod, WRITES, "writes after the failover", tp=tp)
    await prod.stop()
    await tracker.stop()
    assert failover_s < 10, f"failover took {failover_s:.1f} s (target: under 10 s)"
    # The killed broker comes back: it catches up and rejoins the ISR (KIP-112 scenario 4).
    sc.brokers[victim].start()
    await wait_async(lambda: victim in sc.state(tp)["isr"], what="rejoin the ISR", timeout=60)
    consumed = {t: await consume_all(tracker, t) for t in tps}
    verify(prod.acked, consumed)
    await sc.close_clients()


@pytest.fixture
def sc2(kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    env = {
        "JBOD_OPERATOR_LEASE_SECONDS": "6",
        "JBOD_OPERATOR_LEASE_RENEW_SECONDS": "1",
    }
    with Scenario(kube_cluster, tmp_path, "opfailover", operators=2, operator_env=env) as s:
        yield s


async def test_operator_failover(sc2: Scenario) -> None:
    sc = sc2
    tps = sc.create_topic("orders", partitions=2)
    epoch_before = sc.controller_epoch()
    holder = sc.lease_holder()
    active = next(op for op in sc.ops if op.proc and f"-{op.proc.pid}-" in str(holder))
    standby = next(op for op in sc.ops if op is not active)
    tracker = LeaderTracker(sc, tps)
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    await wait_acked_more(prod, WRITES, "writes before the freeze")
    # Freeze the active operator mid-way (it cannot renew, but is not dead).
    assert active.proc is not None
    os.kill(active.proc.pid, signal.SIGSTOP)
    try:
        await wait_async(
            lambda: sc.lease_holder() != holder, what="the standby to take the Lease", timeout=40
        )
        assert standby.proc is not None and f"-{standby.proc.pid}-" in str(sc.lease_holder())
        epoch_after = sc.controller_epoch()
        assert epoch_after == epoch_before + 1
        # The new operator works: a broker dies and its partitions get new leaders.
        tp = tps[0]
        victim = sc.leader(tp)
        assert sc.brokers is not None
        sc.brokers[victim].kill()
        await wait_async(lambda: sc.leader(tp) not in (victim, -1), what="election by standby")
    finally:
        os.kill(active.proc.pid, signal.SIGCONT)
    # The old operator wakes up with the old epoch: brokers refuse what it sends...
    live = next(b for b in range(3) if b != victim)
    with pytest.raises(StaleControllerEpochError):
        await sc.client(live).update_metadata(
            wire.UpdateMetadataRequest(
                controller_id=0, controller_epoch=epoch_before, live_brokers=[]
            )
        )
    # ...and it notices it is no longer the active operator.
    await wait_async(
        lambda: (
            "no longer the active operator" in active.tail(200)
            or "stepping down" in active.tail(200)
        ),
        what="the old operator to step down",
    )
    sc.brokers[victim].start()
    await wait_acked_more(prod, WRITES, "writes under the new operator")
    await prod.stop()
    await tracker.stop()
    consumed = {t: await consume_all(tracker, t) for t in tps}
    verify(prod.acked, consumed)
    assert prod.acked_count > 0
    await sc.close_clients()
