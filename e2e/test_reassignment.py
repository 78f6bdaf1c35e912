"""PartitionReassignment end to end: declared with kubectl, run by the operator in KIP-435
batches across broker processes, verified on disk and by a producer (acks=all) and a
consumer that count (min ISR 2)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import LeaderTracker, Scenario, wait_async
from jbod_broker import wire
from jbod_broker.storage.names import TopicPartition
from jbod_broker.wire import log_dir_short_name
from jbod_operator.plan import reassignment_steps as steps
from tests import waiting
from tests.broker_metrics import scrape
from tests.integration.counting import CountingProducer, consume_all, fill_bytes, verify
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.e2e


def closes_clients(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """The scenario's broker clients closed however the test ends (a failing test would
    otherwise leave sockets that fail the next test as unraisable warnings)."""

    @functools.wraps(test)
    async def run(**fixtures: Any) -> None:
        try:
            await test(**fixtures)
        finally:
            for f in fixtures.values():
                if isinstance(f, Scenario):
                    await f.close_clients()

    return run


@pytest.fixture
def sc(
    kube_cluster: KubeCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Scenario]:
    ns = request.node.name.replace("_", "-")[:50]
    with Scenario(
        kube_cluster,
        tmp_path,
        ns,
        brokers=6,
        operator_env={"JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS": "0.3"},
    ) as s:
        yield s


def manifest(name: str, partitions: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name},
        "spec": {"clusterName": "kip", "partitions": partitions, **spec},
    }


def status(sc: Scenario, name: str) -> dict[str, Any]:
    return dict((sc.kube.get("partitionreassignment", name) or {}).get("status") or {})


def onto_the_others(sc: Scenario, tps: list[TopicPartition]) -> list[dict[str, Any]]:
    """Each partition onto the three brokers that hold none of it, disks a, b, a."""
    out = []
    for tp in tps:
        cur = [r["brokerId"] for r in sc.state(tp)["replicas"]]
        others = [b for b in range(sc.size) if b not in cur]
        out.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": others,
                "logDirs": [sc.dirs[i % len(sc.dirs)] for i in range(len(others))],
            }
        )
    return out


async def check(sc: Scenario, tps: list[TopicPartition], *prods: CountingProducer) -> None:
    tracker = LeaderTracker(sc, tps)
    acked: dict[TopicPartition, list[bytes]] = {}
    for p in prods:
        for tp, v in p.acked.items():
            acked.setdefault(tp, []).extend(v)
    consumed = {tp: await consume_all(tracker, tp, timeout_s=60) for tp in tps}
    verify(acked, consumed)


def on_disk(sc: Scenario, tp: TopicPartition) -> dict[int, str]:
    """Broker → the dir name holding the partition's folder (none when deleted)."""
    assert sc.brokers is not None
    out = {}
    for b in range(sc.size):
        for d in sc.brokers[b].log_dirs:
            if os.path.isdir(os.path.join(d, f"{tp.topic}-{tp.partition}")):
                out[b] = log_dir_short_name(d)
    return out


def batches_from_events(sc: Scenario, name: str) -> list[list[tuple[str, int, list[int]]]]:
    raw = json.loads(sc.kube.run("get", "events", "-n", sc.ns, "-o", "json"))
    evs = [
        e
        for e in raw["items"]
        if e["reason"] == "BatchStarted" and e["involvedObject"]["name"] == name
    ]
    evs.sort(key=lambda e: int(re.match(r"batch (\d+)", e["message"])[1]))  # type: ignore[index]
    out = []
    for e in evs:
        entries = re.findall(r"([\w.-]+)-(\d+) \[([\d, ]*)\]->\[([\d, ]*)\]", e["message"])
        out.append([(t, int(p), [int(x) for x in tgt.split(", ")]) for t, p, _, tgt in entries])
    return out


@closes_clients
async def test_reassign_onto_other_brokers_in_batches(sc: Scenario) -> None:
    """(a) 6 brokers, 6 partitions RF 3 moved entirely onto the other three with small
    limits: the batches match the planner's, every new replica lands in its named disk, the
    old replicas are deleted, nothing acknowledged is lost or duplicated."""
    tps = sc.create_topic("orders", partitions=6, rf=3, min_isr=2)
    tracker = LeaderTracker(sc, tps)
    seed = CountingProducer(tracker, tps, records_per_batch=20)
    for _ in range(5):
        await seed.produce_one_round()
    await fill_bytes(tracker, tps, 0.5)
    targets = onto_the_others(sc, tps)
    before = {tp: [r["brokerId"] for r in sc.state(tp)["replicas"]] for tp in tps}
    leaders = {tp: sc.leader(tp) for tp in tps}
    limits = {
        "maxConcurrentReplicaMovements": 2,
        "maxConcurrentPartitionMovements": 2,
        "maxConcurrentLeaderMovements": 1,
    }
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    try:
        sc.kube.apply(manifest("spread", targets, **limits))
        await wait_async(
            lambda: status(sc, "spread").get("phase") == "Succeeded", what="Succeeded", timeout=240
        )
    finally:
        await prod.stop()
        await tracker.stop()
    st = status(sc, "spread")
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Succeeded"]["status"] == "True", st
    assert conds["Progressing"]["status"] == "False", st
    assert st["progressPercent"] == 100 and st["counts"] == {"Done": 6}, st
    assert st["startTime"] and st["completionTime"], st
    for t in targets:
        tp = TopicPartition(t["topic"], t["partition"])
        state = sc.state(tp)
        assert [r["brokerId"] for r in state["replicas"]] == t["replicas"], state
        assert state["leader"] == t["replicas"][0], state
        assert not state.get("addingReplicas") and not state.get("removingReplicas"), state
        assert "reassignedBy" not in state, state
        assert sorted(state["isr"]) == sorted(t["replicas"]), state
        # Every new replica in its named disk; the old ones deleted.
        want = dict(zip(t["replicas"], t["logDirs"], strict=True))
        try:
            await wait_async(lambda tp=tp, want=want: on_disk(sc, tp) == want, what=f"{tp} disks")
        except TimeoutError:
            raise AssertionError(f"{tp}: on disk {on_disk(sc, tp)}, wanted {want}") from None
    # The batches the operator ran are the planner's, given the same limits.
    planned = steps.plan_all(
        [
            steps.PartitionMove(
                topic=tp.topic,
                partition=tp.partition,
                current=tuple(before[tp]),
                target=tuple(t["replicas"]),
                leader=leaders[tp],
            )
            for tp, t in zip(tps, targets, strict=True)
        ],
        steps.Limits(
            replica_movements=2, partition_movements=2, leader_movements=1, moves_per_broker=5
        ),
        min_isr=2,
    )
    expected = [[(s.topic, s.partition, list(s.step.replicas)) for s in b.steps] for b in planned]
    seen = batches_from_events(sc, "spread")
    assert seen == expected, (seen, expected)
    assert st["batch"] == len(expected)
    # Unthrottled, the moves' bytes still count as reassignment traffic (Kafka's
    # ReassignmentBytesIn/OutPerSec): every new replica's broker fetched some, the old
    # leaders served some.
    assert sc.brokers is not None
    metrics = [scrape(sc.brokers[b].url) for b in range(sc.size)]
    for b in {b for t in targets for b in t["replicas"]}:
        assert metrics[b]["jbod_reassignment_bytes_in_total"] > 0, (b, metrics[b])
    assert sum(m["jbod_reassignment_bytes_out_total"] for m in metrics) > 0
    await check(sc, tps, seed, prod)
    await sc.close_clients()


# -- controls while running: pause, limits, throttle, cancel, rollback ------------------------

SLOW = 256 * 1024
"""bytes/s: a new replica of a 1 MiB partition takes a few seconds to catch up."""


def patch(sc: Scenario, name: str, **spec: Any) -> int:
    """Merge ``spec`` into the PartitionReassignment; returns its new generation."""
    sc.kube.run(
        "patch",
        "partitionreassignment",
        name,
        "-n",
        sc.ns,
        "--type=merge",
        "-p",
        json.dumps({"spec": spec}),
    )
    return int((sc.kube.get("partitionreassignment", name) or {})["metadata"]["generation"])


def in_flight(st: dict[str, Any]) -> int:
    counts = st.get("counts") or {}
    return int(counts.get("Adding", 0)) + int(counts.get("Removing", 0))


async def setup(sc: Scenario, mib: float = 1.0) -> tuple[list[TopicPartition], CountingProducer]:
    tps = sc.create_topic("orders", partitions=4, rf=3, min_isr=2)
    tracker = LeaderTracker(sc, tps)
    seed = CountingProducer(tracker, tps, records_per_batch=20)
    for _ in range(5):
        await seed.produce_one_round()
    await fill_bytes(tracker, tps, mib)
    return tps, seed


async def throttles(sc: Scenario) -> dict[int, tuple[int, int, int]]:
    """Broker → (leader rate, follower rate, throttled replicas)."""
    out = {}
    for b in range(sc.size):
        cfg = await sc.client(b).set_configs(wire.ThrottleConfig())
        out[b] = (
            cfg.leader_replication_throttled_rate or 0,
            cfg.follower_replication_throttled_rate or 0,
            len(cfg.leader_replication_throttled_replicas or [])
            + len(cfg.follower_replication_throttled_replicas or []),
        )
    return out


@closes_clients
async def test_reassignment_pause_limits_throttle(sc: Scenario) -> None:
    """(d) pause and resume, (g) limits and throttle changed while running."""
    tps, seed = await setup(sc, mib=3)
    targets = onto_the_others(sc, tps)
    sc.kube.apply(
        manifest(
            "ctl",
            targets,
            maxConcurrentPartitionMovements=1,
            maxConcurrentReplicaMovements=1,
            throttleBytesPerSecond=SLOW,
        )
    )
    await wait_async(lambda: in_flight(status(sc, "ctl")) > 0, what="a step in flight")

    async def throttled(rate: int) -> bool:
        return any(r == rate for r, _, n in (await throttles(sc)).values() if n)

    # The throttle is on the moving replicas' brokers only, and follows a change.
    await waiting.wait_async(lambda: throttled(SLOW), what="the throttle on the brokers")
    gen = patch(sc, "ctl", throttleBytesPerSecond=2 * SLOW)
    await wait_async(
        lambda: status(sc, "ctl").get("observedGeneration") == gen, what="the change seen"
    )
    await waiting.wait_async(lambda: throttled(2 * SLOW), what="the new throttle on the brokers")
    # Pause: the step in flight finishes, no new one starts.
    gen = patch(sc, "ctl", pause=True)
    await wait_async(lambda: status(sc, "ctl").get("phase") == "Paused", what="Paused")
    await wait_async(lambda: in_flight(status(sc, "ctl")) == 0, what="the step in flight done")
    batch = status(sc, "ctl")["batch"]
    gen = patch(sc, "ctl", maxConcurrentPartitionMovements=4, maxConcurrentReplicaMovements=3)
    await wait_async(lambda: status(sc, "ctl").get("observedGeneration") == gen, what="seen")
    st = status(sc, "ctl")
    assert st["phase"] == "Paused" and st["batch"] == batch and in_flight(st) == 0, st
    paused = {c["type"]: c for c in st["conditions"]}["Paused"]
    assert paused["status"] == "True", st
    # Resume: the new limits apply from the next batch on.
    patch(sc, "ctl", pause=False)
    await wait_async(
        lambda: status(sc, "ctl").get("phase") == "Succeeded", what="Succeeded", timeout=240
    )
    seen = batches_from_events(sc, "ctl")
    assert all(len(b) == 1 for b in seen[:batch]), seen
    assert any(len(b) > 1 for b in seen[batch:]), seen
    # The throttle is gone from every broker.
    assert all(v == (0, 0, 0) for v in (await throttles(sc)).values()), await throttles(sc)
    for t in targets:
        tp = TopicPartition(t["topic"], t["partition"])
        assert [r["brokerId"] for r in sc.state(tp)["replicas"]] == t["replicas"]
    await check(sc, tps, seed)
    await sc.close_clients()


@closes_clients
async def test_reassignment_cancel(sc: Scenario) -> None:
    """(e) cancel mid-way: partitions at their target kept, the others back at their
    original replicas (new replicas deleted, the original order and leader)."""
    tps, seed = await setup(sc, mib=2)
    before = {tp: sc.state(tp) for tp in tps}
    targets = onto_the_others(sc, tps)
    tracker = LeaderTracker(sc, tps)
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    try:
        sc.kube.apply(
            manifest(
                "oops", targets, maxConcurrentPartitionMovements=2, throttleBytesPerSecond=SLOW
            )
        )
        await wait_async(lambda: in_flight(status(sc, "oops")) > 0, what="a step in flight")
        adding = {
            (p["topic"], p["partition"]): p
            for p in status(sc, "oops")["partitions"]
            if p["state"] == "Adding"
        }
        patch(sc, "oops", cancel=True)
        await wait_async(
            lambda: status(sc, "oops").get("phase") == "Cancelled", what="Cancelled", timeout=120
        )
    finally:
        await prod.stop()
        await tracker.stop()
    st = status(sc, "oops")
    assert {c["type"]: c for c in st["conditions"]}["Cancelled"]["status"] == "True", st
    for tp in tps:
        state = sc.state(tp)
        reps = [r["brokerId"] for r in state["replicas"]]
        assert not state.get("addingReplicas") and not state.get("removingReplicas"), state
        assert "reassignedBy" not in state, state
        # Nothing is left on brokers that are not replicas.
        await wait_async(lambda tp=tp, reps=reps: set(on_disk(sc, tp)) == set(reps), what="clean")
        if (tp.topic, tp.partition) in adding and reps == [
            r["brokerId"] for r in before[tp]["replicas"]
        ]:
            assert state["leader"] == before[tp]["leader"], (state, before[tp])
    assert all(v == (0, 0, 0) for v in (await throttles(sc)).values())
    await check(sc, tps, seed, prod)
    await sc.close_clients()


@closes_clients
async def test_a_cancel_between_two_steps_leaves_no_partition_at_rf_plus_one(sc: Scenario) -> None:
    """Issue 37 item 3, no fault: ``[a, b, c] -> [x, c, a]`` adds the new preferred leader x
    first (four replicas) and drops b in a later step. Two such partitions, one per batch:
    cancelled while the second one's first step copies, the first one is between its steps.
    Every partition ends at three replicas, its original ones in order with their leader
    (or at its target), with nothing left on another broker."""
    tps, seed = await setup(sc, mib=1)
    first, second = tps[0], tps[1]
    before = {tp: [r["brokerId"] for r in sc.state(tp)["replicas"]] for tp in (first, second)}
    targets: list[dict[str, Any]] = []
    for tp, (a, b, c) in before.items():
        x = next(n for n in range(sc.size) if n not in (a, b, c))
        targets.append({"topic": tp.topic, "partition": tp.partition, "replicas": [x, c, a]})
    sc.kube.apply(
        manifest("between", targets, maxConcurrentPartitionMovements=1, throttleBytesPerSecond=SLOW)
    )

    def first_between_steps_second_copying() -> bool:
        one, two = sc.state(first), sc.state(second)
        return (
            len(one["replicas"]) == 4
            and not one.get("addingReplicas")
            and bool(two.get("addingReplicas"))
        )

    await wait_async(first_between_steps_second_copying, what="the cancel's moment", timeout=120)
    patch(sc, "between", cancel=True)
    await wait_async(
        lambda: status(sc, "between").get("phase") == "Cancelled", what="Cancelled", timeout=120
    )
    for t in targets:
        tp = TopicPartition(t["topic"], t["partition"])
        state = sc.state(tp)
        reps = [r["brokerId"] for r in state["replicas"]]
        assert reps in (before[tp], t["replicas"]), (tp, state)
        assert state["leader"] == reps[0], state
        await wait_async(lambda tp=tp, reps=reps: set(on_disk(sc, tp)) == set(reps), what="clean")
    assert all(v == (0, 0, 0) for v in (await throttles(sc)).values())
    # The partition can be reassigned again (a fourth replica made the next one refused).
    again = [{**targets[0], "replicas": before[first]}]
    sc.kube.apply(manifest("again", again))
    await wait_async(
        lambda: status(sc, "again").get("phase") == "Succeeded", what="Succeeded", timeout=120
    )
    await check(sc, tps, seed)


@closes_clients
async def test_reassignment_rollback(sc: Scenario) -> None:
    """(f) rollback after the end: every partition back to its original replicas, in order,
    with its original leader, each replica in the dir it was in."""
    tps, seed = await setup(sc)
    before = {tp: sc.state(tp) for tp in tps}
    targets = onto_the_others(sc, tps)
    sc.kube.apply(manifest("there", targets, maxConcurrentPartitionMovements=4))
    await wait_async(
        lambda: status(sc, "there").get("phase") == "Succeeded", what="Succeeded", timeout=240
    )
    patch(sc, "there", rollback=True)
    await wait_async(
        lambda: status(sc, "there").get("phase") == "RolledBack", what="RolledBack", timeout=240
    )
    for tp in tps:
        state, was = sc.state(tp), before[tp]
        assert [r["brokerId"] for r in state["replicas"]] == [
            r["brokerId"] for r in was["replicas"]
        ], (state, was)
        assert state["leader"] == was["leader"], (state, was)
        want = {r["brokerId"]: log_dir_short_name(r["logDir"]) for r in was["replicas"]}
        await wait_async(lambda tp=tp, want=want: on_disk(sc, tp) == want, what=f"{tp} home")
    await check(sc, tps, seed)
    await sc.close_clients()


@closes_clients
async def test_reassignment_target_broker_killed(sc: Scenario) -> None:
    """(c) a target broker SIGKILLed during catch-up: the partition waits and says why, then
    finishes when the broker is back."""
    tps, seed = await setup(sc, mib=3)
    targets = onto_the_others(sc, tps[:1])
    sc.kube.apply(manifest("bounce", targets, throttleBytesPerSecond=SLOW // 2))

    def catching_up() -> tuple[int] | None:
        for p in status(sc, "bounce").get("partitions", []):
            if p["state"] == "Adding" and p["addingReplicas"]:
                return (int(p["addingReplicas"][0]),)  # a tuple: broker 0 is not "false"
        return None

    (victim,) = await wait_async(catching_up, what="a new replica catching up")
    assert sc.brokers is not None
    sc.brokers[victim].kill()
    await wait_async(
        lambda: any(
            f"[{victim}]" in (p.get("message") or "") and "not live" in (p.get("message") or "")
            for p in status(sc, "bounce").get("partitions", [])
        ),
        what="the status saying it waits for the dead broker",
        timeout=60,
    )
    sc.brokers[victim].start()
    await wait_async(
        lambda: status(sc, "bounce").get("phase") == "Succeeded", what="Succeeded", timeout=240
    )
    await check(sc, tps, seed)
    await sc.close_clients()


# -- the operator killed at each kind of transition ---------------------------------------------

POINTS = ("reassignment-step-written", "reassignment-step-told", "reassignment-shrink-written")


@pytest.fixture
def sc_ha(kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    points = tmp_path / "failpoints"
    points.mkdir()
    env = {
        "JBOD_OPERATOR_LEASE_SECONDS": "6",
        "JBOD_OPERATOR_LEASE_RENEW_SECONDS": "1",
        "JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS": "0.3",
        "JBOD_FAILPOINTS": ",".join(POINTS),
        "JBOD_FAILPOINTS_DIR": str(points),
    }
    with Scenario(
        kube_cluster, tmp_path, "reassign-crash", brokers=6, operators=2, operator_env=env
    ) as s:
        s.points = points  # type: ignore[attr-defined]
        yield s


@closes_clients
async def test_reassignment_survives_operator_sigkill(sc_ha: Scenario) -> None:
    """(b) The active operator dies by SIGKILL right after persisting a step, right after
    telling the brokers, while new replicas catch up, and right after persisting a shrink; a
    standby takes over each time (the dead one comes back as the next standby). The
    reassignment ends at its target with nothing acknowledged lost or duplicated."""
    sc = sc_ha
    points: Path = sc.points  # type: ignore[attr-defined]
    tps, seed = await setup(sc, mib=2)
    targets = onto_the_others(sc, tps)
    tracker = LeaderTracker(sc, tps)
    tracker.start()
    prod = CountingProducer(tracker, tps, timeout_ms=5000)
    prod.start()
    restarts = 0

    async def revive() -> None:
        nonlocal restarts
        while True:
            for op in sc.ops:
                if op.proc is not None and op.proc.poll() is not None:
                    op.start()  # back as a standby
                    restarts += 1
            await asyncio.sleep(0.2)

    reviver = asyncio.get_running_loop().create_task(revive())
    try:
        sc.kube.apply(
            manifest(
                "crash",
                targets,
                maxConcurrentPartitionMovements=2,
                throttleBytesPerSecond=SLOW,
            )
        )
        # Killed from outside while new replicas catch up (the points inside fire by
        # themselves at the other three transitions).
        await wait_async(
            lambda: (points / POINTS[1]).exists() and in_flight(status(sc, "crash")) > 0,
            what="a step told and catching up",
            timeout=120,
        )
        holder = str(sc.lease_holder())
        active = next(op for op in sc.ops if op.proc and f"-{op.proc.pid}-" in holder)
        active.kill()
        await wait_async(
            lambda: status(sc, "crash").get("phase") == "Succeeded",
            what="Succeeded",
            timeout=300,
        )
    finally:
        reviver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reviver
        await prod.stop()
        await tracker.stop()
    assert sorted(p.name for p in points.iterdir()) == sorted(POINTS)
    assert restarts >= len(POINTS) + 1, restarts
    for t in targets:
        tp = TopicPartition(t["topic"], t["partition"])
        state = sc.state(tp)
        assert [r["brokerId"] for r in state["replicas"]] == t["replicas"], state
        assert not state.get("addingReplicas") and not state.get("removingReplicas"), state
        want = dict(zip(t["replicas"], t["logDirs"], strict=True))
        await wait_async(lambda tp=tp, want=want: on_disk(sc, tp) == want, what=f"{tp} disks")
    await check(sc, tps, seed, prod)
    await sc.close_clients()
