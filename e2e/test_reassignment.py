"""PartitionReassignment end to end: declared with kubectl, run by the operator in KIP-435
batches across broker processes, verified on disk and by a producer (acks=all) and a
consumer that count (min ISR 2)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.scenario import LeaderTracker, Scenario, wait_async
from jbod_broker.storage.names import TopicPartition
from jbod_broker.wire import log_dir_short_name
from jbod_operator.plan import reassignment_steps as steps
from tests.integration.counting import CountingProducer, consume_all, fill_bytes, verify
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
    await check(sc, tps, seed, prod)
    await sc.close_clients()
