"""PartitionReassignment on Apache Kafka (issue 22): the real API server, the operator process
and Apache Kafka 4.3 in KRaft mode (one controller, 4 brokers x 2 log dirs: the ``kafka_jbod``
fixture), with Kafka's Java producer at acks=all (idempotent, topic min ISR 2) sending
throughout and a consumer reading everything back, nothing lost or duplicated.

- (a) 8 partitions RF 2 moved from brokers 1,2 to 3,4 with small limits and a throttle: the
  batches the operator ran are the planner's; ListPartitionReassignments, sampled throughout,
  never shows more partitions in flight than the limit; every new replica is in its named dir
  (DescribeLogDirs); no throttle config is left on a broker or the topic (DescribeConfigs);
  every partition led by its first replica.
- (d) cancel mid-batch (a slow throttle, so the cancel lands mid-step) and rollback after the
  end, each ending with every partition at its original replicas, in order, led by its
  preferred leader, and no throttle left.
- issue 37's audit (``e2e.reassignment_audit``) on Kafka: one seeded random reassignment
  (random targets, dirs named or ``any``, limits, a throttle) and a random one cancelled
  mid-batch, each end checked against Kafka's Admin API (replicas, order, leader, dirs, no
  future replica, no stray, no throttle left).

(c) and (g), an operator or a broker stopped mid-way, are ``e2e/test_kafka_reassignment_ha.py``
(its own Kafka cluster, two operators), which imports the helpers here.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import reassignment_audit as audit
from e2e.kafka_env import operators_on_kafka
from jbod_operator.clients.kafka_admin import KafkaAdmin, KafkaConnection
from jbod_operator.plan import reassignment_steps as steps
from jbod_operator.plan.kafka_types import ConfigKind
from tests import waiting
from tests.integration.java_clients import (
    KEEP_COUNTED_RECORDS,
    Consumed,
    JavaProducer,
    check_exactly_once_in_order,
    consume,
)
from tests.kafka_jars import KafkaCluster
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube, OperatorProcess, wait_for

with warnings.catch_warnings():  # kafka-python 3.0's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

NS = "kafka-reassign"
REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 8
BALLAST = 1024 * 1024
"""Bytes written to each partition before a move, so a throttled step lasts seconds."""
CANCEL_BALLAST = 5 * 1024 * 1024
"""The cancelled topic's: a cancel must land while its first steps copy, however slow the
machine. A new replica's first fetch may take a whole ``replica.fetch.max.bytes`` (1 MiB)
before Kafka's quota holds it back, so 1 MiB could end a step before a slow cancel. (Steps
also used to end within seconds because each pass rewrote the topic's throttled-replica lists
one broker at a time, dropping the followers between two calls: now written once per pass.)"""
THROTTLE = 512 * 1024
"""bytes/s per broker: each step's new replica copies its partition in about 2 s."""
THROTTLE_KEYS = {
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}
LIMITS = {"maxConcurrentPartitionMovements": 2, "maxConcurrentReplicaMovements": 1}


@pytest.fixture(scope="module")
def env(
    kube_cluster: KubeCluster, kafka_jbod: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kube, OperatorProcess]]:
    work = tmp_path_factory.mktemp("kafka-reassign-e2e")
    with operators_on_kafka(kube_cluster, kafka_jbod, work, NS) as (kube, (op,)):
        yield kube, op


def admin_call(kafka: KafkaCluster, fn: Any) -> Any:
    async def go() -> Any:
        admin = KafkaAdmin(KafkaConnection(tuple(kafka.bootstrap.split(","))))
        try:
            return await fn(admin)
        finally:
            await admin.close()

    return asyncio.run(go())


def create_topic(kafka: KafkaCluster, name: str, ballast: int = BALLAST) -> dict[int, list[int]]:
    """8 partitions on brokers 1 and 2, leaders alternating, min ISR 2, ``ballast`` bytes in
    each."""
    assignment = {p: [1, 2] if p % 2 == 0 else [2, 1] for p in range(PARTITIONS)}
    client = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        client.create_topics(
            [
                NewTopic(
                    name,
                    replica_assignments=assignment,
                    topic_configs={"min.insync.replicas": "2", **KEEP_COUNTED_RECORDS},
                )
            ]
        )
    finally:
        client.close()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all", linger_ms=20)
    try:
        for p in range(PARTITIONS):
            for _ in range(ballast // 1024):
                producer.send(name, os.urandom(512).hex().encode(), partition=p)
        producer.flush()
    finally:
        producer.close()
    return assignment


def metadata(kafka: KafkaCluster, topic: str) -> dict[int, tuple[list[int], int | None]]:
    (t,) = admin_call(kafka, lambda a: a.describe_topics([topic]))
    return {p.partition: (list(p.replicas), p.leader) for p in t.partitions}


class InFlight:
    """ListPartitionReassignments sampled on a thread until stopped: the most partitions of
    ``topic`` Kafka showed in flight at once, and each partition's steps in the order Kafka
    showed them (a target is listed again only when it comes back after another target or
    after nothing in flight: a step submitted twice)."""

    def __init__(self, kafka: KafkaCluster, topic: str) -> None:
        self.client = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
        self.topic = topic
        self.most = 0
        self.samples = 0
        self.steps: dict[int, list[list[int]]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last: dict[int, list[int]] = {}
        while not self.stop.wait(0.1):
            now = self.client.list_partition_reassignments()
            mine = {tp.partition: o for tp, o in now.items() if tp.topic == self.topic}
            self.most = max(self.most, len(mine))
            self.samples += 1
            seen = {
                p: [b for b in o["replicas"] if b not in o["removing_replicas"]]
                for p, o in mine.items()
            }
            for p, target in seen.items():
                if last.get(p) != target:
                    self.steps.setdefault(p, []).append(target)
            last = seen

    def __enter__(self) -> InFlight:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.client.close()


def reassignment(
    name: str, topic: str, targets: dict[int, list[int]], **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name},
        "spec": {
            "clusterName": "jbod",
            "partitions": [
                {
                    "topic": topic,
                    "partition": p,
                    "replicas": reps,
                    "logDirs": [str((p + i) % 2) for i in range(len(reps))],
                }
                for p, reps in sorted(targets.items())
            ],
            **spec,
        },
    }


def status(kube: Kube, name: str) -> dict[str, Any]:
    return (kube.get("partitionreassignment", name) or {}).get("status") or {}


def phase_is(kube: Kube, name: str, *phases: str) -> dict[str, Any] | None:
    st = status(kube, name)
    return st if st.get("phase") in phases else None


async def wait_succeeded(kube: Kube, name: str, timeout: float) -> dict[str, Any]:
    """The status once the reassignment ended, which must be Succeeded with every partition
    Done."""
    st: dict[str, Any] = await asyncio.to_thread(
        wait_for,
        lambda: phase_is(kube, name, "Succeeded", "Failed"),
        timeout,
        f"PartitionReassignment {name} Succeeded",
    )
    assert st["phase"] == "Succeeded", st
    assert st["counts"] == {"Done": PARTITIONS} and st["progressPercent"] == 100, st
    return st


def batches_from_events(kube: Kube, name: str) -> list[list[tuple[str, int, list[int]]]]:
    raw = json.loads(kube.run("get", "events", "-n", kube.namespace, "-o", "json"))
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


def events_of(kube: Kube, name: str) -> list[tuple[str, str, str]]:
    """The resource's Events, oldest first (what an assertion shows when batches differ)."""
    raw = json.loads(kube.run("get", "events", "-n", kube.namespace, "-o", "json"))
    evs = [e for e in raw["items"] if e["involvedObject"]["name"] == name]
    evs.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [(e.get("lastTimestamp") or "", e["reason"], e["message"]) for e in evs]


def throttles_left(kafka: KafkaCluster, topic: str) -> dict[str, list[str]]:
    async def go(a: KafkaAdmin) -> dict[str, list[str]]:
        out = {}
        for b in range(1, 5):
            got = await a.describe_configs(ConfigKind.BROKER, str(b))
            out[f"broker {b}"] = sorted(k for k in got if k in THROTTLE_KEYS)
        got = await a.describe_configs(ConfigKind.TOPIC, topic)
        out[f"topic {topic}"] = sorted(k for k in got if k in THROTTLE_KEYS)
        return {k: v for k, v in out.items() if v}

    result: dict[str, list[str]] = admin_call(kafka, go)
    return result


def dirs_of(kafka: KafkaCluster, topic: str) -> dict[tuple[int, int], str]:
    """(partition, broker) -> the dir name ('0' or '1') holding its current replica."""
    out = {}
    for b in admin_call(kafka, lambda a: a.describe_log_dirs()):
        for d in b.dirs:
            for r in d.replicas:
                if r.topic == topic and not r.is_future:
                    out[(r.partition, b.broker_id)] = d.path.rstrip("/").rsplit("data-", 1)[1]
    return out


async def start_producer(kafka: KafkaCluster, topic: str, count: int) -> JavaProducer:
    p = await JavaProducer.start(kafka.bootstrap, topic, PARTITIONS, count, ["none"], pace_ms=5)
    await waiting.wait_async(lambda: len(p.acks) >= 100, lambda: f"100 acks: {p.errors}", 60)
    return p


async def finish_and_check(kafka: KafkaCluster, topic: str, p: JavaProducer, count: int) -> None:
    await p.wait(240)
    assert p.errors == []
    assert sorted(a.n for a in p.acks) == list(range(count))
    got: list[Consumed] = [
        r for r in await consume(kafka.bootstrap, topic, PARTITIONS) if dict(r.headers).get("n")
    ]
    check_exactly_once_in_order(p.acks, got)
    assert len(got) == count


async def test_a_move_to_other_brokers_in_batches_within_the_limits(
    env: tuple[Kube, OperatorProcess], kafka_jbod: KafkaCluster
) -> None:
    kube, _ = env
    topic = "moved"
    before = await asyncio.to_thread(create_topic, kafka_jbod, topic)
    first = await asyncio.to_thread(metadata, kafka_jbod, topic)
    leaders = {p: lead for p, (_, lead) in first.items()}
    targets = {p: [3, 4] if p % 2 == 0 else [4, 3] for p in range(PARTITIONS)}
    count = 4000
    prod = await start_producer(kafka_jbod, topic, count)
    with InFlight(kafka_jbod, topic) as sampler:
        kube.apply(
            reassignment("spread", topic, targets, throttleBytesPerSecond=THROTTLE, **LIMITS)
        )
        st = await wait_succeeded(kube, "spread", 240)
    # Kafka never had more of the topic's partitions in flight than the limit.
    assert sampler.samples > 20
    assert 0 < sampler.most <= LIMITS["maxConcurrentPartitionMovements"], sampler.most
    # Each partition at its target in order, led by its first replica; each replica in its dir.
    now = await asyncio.to_thread(metadata, kafka_jbod, topic)
    assert {p: r for p, (r, _) in now.items()} == targets
    assert {p: lead for p, (_, lead) in now.items()} == {p: t[0] for p, t in targets.items()}
    want = {(p, b): str((p + i) % 2) for p, reps in targets.items() for i, b in enumerate(reps)}
    got = await asyncio.to_thread(
        wait_for,
        lambda: (d := dirs_of(kafka_jbod, topic)) == want and d,
        60,
        "every replica in its named dir, the old ones deleted",
    )
    assert got == want
    # The batches the operator ran are the planner's, given the same limits.
    planned = steps.plan_all(
        [
            steps.PartitionMove(topic, p, tuple(before[p]), tuple(targets[p]), leaders[p])
            for p in range(PARTITIONS)
        ],
        steps.Limits(
            replica_movements=LIMITS["maxConcurrentReplicaMovements"],
            partition_movements=LIMITS["maxConcurrentPartitionMovements"],
            leader_movements=5,
            moves_per_broker=5,
        ),
        min_isr=2,
    )
    expected = [[(s.topic, s.partition, list(s.step.replicas)) for s in b.steps] for b in planned]
    ran = batches_from_events(kube, "spread")
    if ran != expected:
        print("batches run:", *ran, "planned:", *expected, sep="\n")
        print("events:", *events_of(kube, "spread"), sep="\n")
    assert ran == expected
    assert st["batch"] == len(expected)
    # No throttle left behind, on a broker or on the topic.
    assert await asyncio.to_thread(throttles_left, kafka_jbod, topic) == {}
    await finish_and_check(kafka_jbod, topic, prod, count)


def at_replicas(kafka: KafkaCluster, topic: str, assignment: dict[int, list[int]]) -> bool:
    """Every partition of ``assignment`` at its replicas, in order, led by the first."""
    return not away_from(kafka, topic, assignment)


def away_from(
    kafka: KafkaCluster, topic: str, assignment: dict[int, list[int]]
) -> dict[int, tuple[list[int], int | None]]:
    """The partitions of ``assignment`` not at its replicas in order led by the first: their
    replicas and leader as Kafka's Metadata shows them."""
    now = metadata(kafka, topic)
    return {p: now[p] for p, reps in assignment.items() if now[p] != (reps, reps[0])}


async def test_cancel_mid_batch_then_rollback_after_the_end(
    env: tuple[Kube, OperatorProcess], kafka_jbod: KafkaCluster
) -> None:
    kube, _ = env
    count = 4000
    # Cancel while the first batch is in flight: the steps undone, every partition back at its
    # original replicas in order (Kafka's revert may swap them) with its preferred leader.
    topic = "cancelled"
    before = await asyncio.to_thread(create_topic, kafka_jbod, topic, CANCEL_BALLAST)
    targets = {p: [3, 4] if p % 2 == 0 else [4, 3] for p in range(PARTITIONS)}
    prod = await start_producer(kafka_jbod, topic, count)
    kube.apply(reassignment("undo", topic, targets, throttleBytesPerSecond=16 * 1024, **LIMITS))
    await asyncio.to_thread(
        wait_for,
        lambda: (st := status(kube, "undo")).get("currentBatch") and st,
        60,
        "the first batch in flight",
    )
    listed = await asyncio.to_thread(
        admin_call, kafka_jbod, lambda a: a.list_partition_reassignments()
    )
    assert {o.topic for o in listed} == {topic}, listed  # in flight on Kafka: the cancel undoes
    kube.run(
        "patch", "partitionreassignment", "undo", "-n", NS, "--type=merge",
        "-p", json.dumps({"spec": {"cancel": True}}),
    )  # fmt: skip
    st = await asyncio.to_thread(
        wait_for, lambda: phase_is(kube, "undo", "Cancelled"), 120, "Cancelled"
    )
    assert st["phase"] == "Cancelled", st
    try:
        await asyncio.to_thread(
            wait_for,
            lambda: at_replicas(kafka_jbod, topic, before),
            60,
            "the original replicas, in order, with their preferred leaders",
        )
    except TimeoutError as e:
        away = await asyncio.to_thread(away_from, kafka_jbod, topic, before)
        raise AssertionError(
            f"{e}: not back (partition: (replicas, leader)): {away}; originals: {before}; "
            f"status: {json.dumps(status(kube, 'undo'))}"
        ) from None
    assert (
        await asyncio.to_thread(admin_call, kafka_jbod, lambda a: a.list_partition_reassignments())
        == []
    )
    assert await asyncio.to_thread(throttles_left, kafka_jbod, topic) == {}
    await finish_and_check(kafka_jbod, topic, prod, count)

    # Rollback after the end: walked back in steps to the originals, in order, led by each
    # first replica.
    topic = "rolled"
    before = await asyncio.to_thread(create_topic, kafka_jbod, topic)
    prod = await start_producer(kafka_jbod, topic, count)
    kube.apply(
        reassignment("back", topic, targets, **{**LIMITS, "maxConcurrentPartitionMovements": 4})
    )
    await asyncio.to_thread(wait_for, lambda: phase_is(kube, "back", "Succeeded"), 240, "Succeeded")
    kube.run(
        "patch", "partitionreassignment", "back", "-n", NS, "--type=merge",
        "-p", json.dumps({"spec": {"rollback": True}}),
    )  # fmt: skip
    st = await asyncio.to_thread(
        wait_for, lambda: phase_is(kube, "back", "RolledBack"), 240, "RolledBack"
    )
    assert st["phase"] == "RolledBack", st
    assert await asyncio.to_thread(at_replicas, kafka_jbod, topic, before)
    assert await asyncio.to_thread(throttles_left, kafka_jbod, topic) == {}
    await finish_and_check(kafka_jbod, topic, prod, count)


AUDIT_SEED = int((os.environ.get("TORTURE_SEEDS") or "1").split(",")[0])
"""The seed of the audited plans (the torture module's first seed: ``make torture`` varies
both)."""


def random_spec(
    rng: random.Random, topic: str, now: dict[int, tuple[list[int], int | None]]
) -> dict[str, Any]:
    """A random PartitionReassignment spec for 3-8 partitions of ``topic`` (RF 2 on brokers
    1-4, each target other than where the partition is), dirs named or ``any``."""
    parts = []
    for p in sorted(rng.sample(range(PARTITIONS), rng.randint(3, PARTITIONS))):
        reps = now[p][0]
        while reps == now[p][0]:
            reps = rng.sample(range(1, 5), 2)
        dirs = [rng.choice(("0", "1", "any")) for _ in reps]
        parts.append({"topic": topic, "partition": p, "replicas": reps, "logDirs": dirs})
    return {
        "clusterName": "jbod",
        "partitions": parts,
        "maxConcurrentPartitionMovements": rng.randint(1, 3),
        "maxConcurrentReplicaMovements": rng.randint(1, 2),
    }


async def audit_kafka(kafka: KafkaCluster, kube: Kube, name: str, before: Any) -> list[str]:
    """The audit of ``name`` on Kafka, repeated until clean or settled (the problems left)."""

    async def once() -> list[str]:
        admin = KafkaAdmin(KafkaConnection(tuple(kafka.bootstrap.split(","))))
        try:
            pr = await asyncio.to_thread(kube.get, "partitionreassignment", name)
            return await audit.audit_kafka(pr or {}, admin, before)
        finally:
            await admin.close()

    problems, _ = await audit.settled(once, 20)
    return problems


async def placement(kafka: KafkaCluster, topic: str) -> dict[tuple[str, int], dict[int, str]]:
    admin = KafkaAdmin(KafkaConnection(tuple(kafka.bootstrap.split(","))))
    try:
        return (await audit.read_kafka(admin, [topic])).placement
    finally:
        await admin.close()


async def test_audit_of_a_random_reassignment_and_a_cancel(
    env: tuple[Kube, OperatorProcess], kafka_jbod: KafkaCluster
) -> None:
    kube, _ = env
    rng = random.Random(f"kafka:{AUDIT_SEED}")
    topic = "audited"
    await asyncio.to_thread(create_topic, kafka_jbod, topic, CANCEL_BALLAST)
    count = 2000
    prod = await start_producer(kafka_jbod, topic, count)
    # A random plan to its end.
    spec = random_spec(rng, topic, await asyncio.to_thread(metadata, kafka_jbod, topic))
    spec["throttleBytesPerSecond"] = 4 * 1024 * 1024
    before = await placement(kafka_jbod, topic)
    kube.apply({"apiVersion": "jbod.io/v1alpha1", "kind": "PartitionReassignment",
                "metadata": {"name": "audit-run"}, "spec": spec})  # fmt: skip
    st = await asyncio.to_thread(
        wait_for, lambda: phase_is(kube, "audit-run", "Succeeded", "Failed"), 240, "the end"
    )
    assert st["phase"] == "Succeeded", (AUDIT_SEED, spec, st)
    problems = await audit_kafka(kafka_jbod, kube, "audit-run", before)
    print(f"\naudit on Kafka, seed {AUDIT_SEED}: {json.dumps(spec)} -> {problems}")
    assert problems == [], (f"seed {AUDIT_SEED}", spec, problems)
    # Another random plan, cancelled while its first batch copies (a slow throttle).
    spec = random_spec(rng, topic, await asyncio.to_thread(metadata, kafka_jbod, topic))
    spec["throttleBytesPerSecond"] = 16 * 1024
    before = await placement(kafka_jbod, topic)
    kube.apply({"apiVersion": "jbod.io/v1alpha1", "kind": "PartitionReassignment",
                "metadata": {"name": "audit-cancel"}, "spec": spec})  # fmt: skip
    await asyncio.to_thread(
        wait_for,
        lambda: (s := status(kube, "audit-cancel")).get("currentBatch") and s,
        60,
        "the first batch in flight",
    )
    kube.run(
        "patch", "partitionreassignment", "audit-cancel", "-n", NS, "--type=merge",
        "-p", json.dumps({"spec": {"cancel": True}}),
    )  # fmt: skip
    st = await asyncio.to_thread(
        wait_for, lambda: phase_is(kube, "audit-cancel", "Cancelled", "Failed"), 120, "Cancelled"
    )
    assert st["phase"] == "Cancelled", (AUDIT_SEED, spec, st)
    problems = await audit_kafka(kafka_jbod, kube, "audit-cancel", before)
    print(f"\naudit on Kafka, seed {AUDIT_SEED}, cancelled: {json.dumps(spec)} -> {problems}")
    assert problems == [], (f"seed {AUDIT_SEED}", spec, problems)
    await finish_and_check(kafka_jbod, topic, prod, count)


async def test_an_id_the_cluster_does_not_have_is_refused_whatever_its_value(
    env: tuple[Kube, OperatorProcess], kafka_jbod: KafkaCluster
) -> None:
    """Brokers 1-4: broker 0 (below the highest id) is refused at once as broker 9 is, each
    message naming the brokers that exist, and Kafka is asked nothing (the topic stays where
    it was). Broker 0 used to be accepted and wait for ever "to be live"."""
    kube, _ = env
    topic = "unknown-broker"
    before = await asyncio.to_thread(create_topic, kafka_jbod, topic, 0)
    for name, missing in (("to-zero", 0), ("to-nine", 9)):
        kube.apply(reassignment(name, topic, {0: [missing, 2]}))
    for name, missing in (("to-zero", 0), ("to-nine", 9)):
        st = await asyncio.to_thread(
            wait_for, lambda n=name: phase_is(kube, n, "Failed"), 60, f"{name} Failed"
        )
        (failed,) = [c for c in st["conditions"] if c["type"] == "Failed"]
        assert failed["reason"] == "InvalidSpec", failed
        want = f"{topic}-0: broker {missing} does not exist (brokers 1-4)"
        assert want in failed["message"], failed
    now = await asyncio.to_thread(metadata, kafka_jbod, topic)
    assert {p: r for p, (r, _) in now.items()} == before
