"""PartitionReassignment on Apache Kafka when a process stops mid-way (issue 22): the real API
server, two operator processes (the second a standby on the Lease) and Apache Kafka 4.3 in
KRaft mode (the ``kafka_jbod`` fixture, this module's own), with Kafka's Java producer at
acks=all (idempotent, topic min ISR 2) sending throughout and a consumer reading everything
back, nothing lost or duplicated. The helpers are ``e2e.test_kafka_reassignment``'s.

- (c) the active operator SIGKILLed mid-reassignment, four times: right after a step was
  submitted to Kafka and before the status recorded it (the first pass, which also accepted
  the resource: the acceptance is written before the submit, so the originals survive),
  right after the preferred elections were asked (status still not written), right after the
  status recorded a step, and from outside while a step's new replica catches up. Each time
  the standby takes over the Lease (the dead one comes back as the next standby) and resumes
  without repeating a step: Kafka never shows a partition's target twice
  (ListPartitionReassignments, sampled throughout) and no step is in two batches (a step
  Kafka finished while no operator was active is where the next batch starts from). At the
  end the recorded originals are the topic's, every partition is at its target led by its
  first replica, each replica in its named dir, and no throttle is left on a broker or the
  topic.
- (g) a target broker stopped (controlled shutdown, then fenced) while a step adds a replica
  on it: the partition waits, its status names the broker, and the reassignment finishes once
  the broker is back, every partition led by its first replica, with no throttle left
  (Cruise Control #664's stall, reported as it is for our brokers). It used to time out on a
  loaded machine: the operator's Kafka client had dropped the broker from its broker list and
  reads it again only every 5 minutes (fixed in ``clients/kafka_admin``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.kafka_env import lease_holder, operators_on_kafka
from e2e.test_kafka_reassignment import (
    LIMITS,
    PARTITIONS,
    InFlight,
    admin_call,
    at_replicas,
    batches_from_events,
    create_topic,
    dirs_of,
    finish_and_check,
    reassignment,
    start_producer,
    status,
    throttles_left,
    wait_succeeded,
)
from jbod_operator.handlers.failpoints import ENV_DIR, ENV_POINTS
from tests.kafka_jars import KafkaCluster
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube, OperatorProcess, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

NS = "kafka-reassign-ha"
SLOW = 128 * 1024
"""bytes/s per broker: a step's new replica copies its 1 MiB in about 8 s, longer than a
takeover (the Lease lasts 6 s), so a standby finds steps of the dead operator in flight."""
CRAWL = 16 * 1024
"""bytes/s per broker: a step's copy takes over a minute, so a broker stopped mid-step is
stopped before the step can end (its controlled shutdown takes seconds, more when loaded)."""
POINTS = ("reassignment-step-written", "reassignment-step-told", "reassignment-step-recorded")
"""Where the active operator kills itself in (c), each once: a step submitted to Kafka and
the status not written; the elections asked and the status not written; the status written.
(``reassignment-shrink-written`` never fires on Kafka: its controller shrinks by itself.)"""


class HaEnv:
    """Two operators on the Lease of :data:`NS` with the failpoints of :data:`POINTS`,
    disarmed (each point's file present: a point fires only where none is) until a scenario
    arms them."""

    def __init__(self, kube: Kube, ops: list[OperatorProcess], points: Path) -> None:
        self.kube = kube
        self.ops = ops
        self.points = points
        self.disarm()

    def disarm(self) -> None:
        for point in POINTS:
            (self.points / point).touch()

    def arm(self) -> None:
        for point in POINTS:
            (self.points / point).unlink(missing_ok=True)

    def fired(self) -> list[str]:
        return sorted(p.name for p in self.points.iterdir() if p.stat().st_size > 0)

    def active(self) -> OperatorProcess | None:
        """The live operator holding the Lease (None while it is held by a dead one)."""
        holder = str(lease_holder(self.kube))
        for op in self.ops:
            if op.proc and op.proc.poll() is None and f"-{op.proc.pid}-" in holder:
                return op
        return None


@pytest.fixture(scope="module")
def ha(
    kube_cluster: KubeCluster, kafka_jbod: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HaEnv]:
    work = tmp_path_factory.mktemp("kafka-reassign-ha")
    points = work / "failpoints"
    points.mkdir()
    env = {
        "JBOD_OPERATOR_LEASE_SECONDS": "6",
        "JBOD_OPERATOR_LEASE_RENEW_SECONDS": "1",
        ENV_POINTS: ",".join(POINTS),
        ENV_DIR: str(points),
    }
    with operators_on_kafka(kube_cluster, kafka_jbod, work, NS, operators=2, operator_env=env) as (
        kube,
        ops,
    ):
        yield HaEnv(kube, ops, points)


@contextlib.asynccontextmanager
async def reviving(ops: list[OperatorProcess]) -> Any:
    """Every operator that dies started again (as a standby: the other holds or takes the
    Lease); yields a one-item list counting the restarts."""
    restarts = [0]

    async def revive() -> None:
        while True:
            for op in ops:
                if op.proc is not None and op.proc.poll() is not None:
                    op.start()
                    restarts[0] += 1
            await asyncio.sleep(0.2)

    task = asyncio.get_running_loop().create_task(revive())
    try:
        yield restarts
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def ended_at_targets(kafka: KafkaCluster, topic: str, targets: dict[int, list[int]]) -> bool:
    """Nothing in flight, every partition at its target, in order, led by its first replica
    (Metadata comes from a broker's cache, which follows the controller's record)."""
    listed = admin_call(kafka, lambda a: a.list_partition_reassignments())
    return not listed and at_replicas(kafka, topic, targets)


def wait_no_throttle_left(kafka: KafkaCluster, topic: str) -> None:
    """Until DescribeConfigs shows no throttle on a broker or the topic (each broker answers
    from its metadata cache, which follows the controller's record of the last lift)."""
    wait_for(
        lambda: throttles_left(kafka, topic) == {}, 30, "no throttle left on a broker or the topic"
    )


async def test_c_operator_sigkilled_mid_reassignment_the_standby_resumes(
    ha: HaEnv, kafka_jbod: KafkaCluster
) -> None:
    kube = ha.kube
    topic = "survived"
    before = await asyncio.to_thread(create_topic, kafka_jbod, topic)
    targets = {p: [3, 4] if p % 2 == 0 else [4, 3] for p in range(PARTITIONS)}
    count = 6000
    prod = await start_producer(kafka_jbod, topic, count)
    ha.arm()
    async with reviving(ha.ops) as restarts:
        with InFlight(kafka_jbod, topic) as sampler:
            kube.apply(reassignment("crash", topic, targets, throttleBytesPerSecond=SLOW, **LIMITS))

            # The points inside fire by themselves; then one more kill, from outside, while a
            # new replica catches up (the status lists the step, Kafka has it in flight).
            def catching_up() -> OperatorProcess | None:
                if ha.fired() != sorted(POINTS) or not status(kube, "crash").get("currentBatch"):
                    return None
                if not admin_call(kafka_jbod, lambda a: a.list_partition_reassignments()):
                    return None
                return ha.active()

            victim = await asyncio.to_thread(
                wait_for, catching_up, 240, "every failpoint fired, then a step in flight"
            )
            victim.kill()
            st = await wait_succeeded(kube, "crash", 480)
    assert restarts[0] >= len(POINTS) + 1, restarts
    # The originals are the topic's before anything moved: the acceptance was recorded
    # before the first steps were submitted (they may have ended before the standby looked).
    assert {o["partition"]: o["replicas"] for o in st["original"]} == before, st["original"]
    # No step twice: Kafka showed each partition's targets once each, and no step is in two
    # batches (a batch adopted after a kill says "resumed" and lists none).
    for p, seen in sampler.steps.items():
        assert len(seen) == len({tuple(t) for t in seen}), (p, seen)
    ran = [step for batch in batches_from_events(kube, "crash") for step in batch]
    assert len(ran) == len({(t, p, tuple(tgt)) for t, p, tgt in ran}), ran
    await asyncio.to_thread(
        wait_for,
        lambda: ended_at_targets(kafka_jbod, topic, targets),
        60,
        "every partition at its target, led by its first replica",
    )
    want = {(p, b): str((p + i) % 2) for p, reps in targets.items() for i, b in enumerate(reps)}
    await asyncio.to_thread(
        wait_for,
        lambda: dirs_of(kafka_jbod, topic) == want,
        60,
        "every replica in its named dir, the old ones deleted",
    )
    await asyncio.to_thread(wait_no_throttle_left, kafka_jbod, topic)
    await finish_and_check(kafka_jbod, topic, prod, count)


async def test_g_a_target_broker_stopped_mid_step_is_waited_for_and_said(
    ha: HaEnv, kafka_jbod: KafkaCluster
) -> None:
    """Broker 3 stops while a step adds a replica on it: the partition waits, its status
    names the broker, and the reassignment finishes once the broker is back; no throttle is
    left, nothing lost.

    The first steps copy at a crawl (:data:`CRAWL`), so the step adding on broker 3 is still
    in flight when the broker's controlled shutdown ends, however slow the machine; the
    throttle is raised once the wait is said, and the rest moves at :data:`SLOW`."""
    kube = ha.kube
    ha.disarm()
    count = 3000
    topic = "stalled"
    before = await asyncio.to_thread(create_topic, kafka_jbod, topic)
    targets = {p: [3, 4] if p % 2 == 0 else [4, 3] for p in range(PARTITIONS)}
    prod = await start_producer(kafka_jbod, topic, count)
    kube.apply(reassignment("stall", topic, targets, throttleBytesPerSecond=CRAWL, **LIMITS))

    def adding_on_3() -> bool:
        listed = admin_call(kafka_jbod, lambda a: a.list_partition_reassignments())
        return any(o.topic == topic and 3 in o.adding for o in listed)

    await asyncio.to_thread(wait_for, adding_on_3, 60, "a step adding a replica on broker 3")
    await asyncio.to_thread(kafka_jbod.stop_broker, 3)
    try:

        def waiting() -> dict[str, Any] | None:
            for p in status(kube, "stall").get("partitions") or []:
                if "waiting for brokers [3] (not live)" in (p.get("message") or ""):
                    return dict(p)
            return None

        said = await asyncio.to_thread(wait_for, waiting, 90, "the partition says it waits for 3")
        assert said["state"] == "Adding" and said["addingReplicas"] == [3], said
        assert status(kube, "stall")["phase"] == "Running"
        kube.run(
            "patch", "partitionreassignment", "stall", "-n", NS, "--type=merge",
            "-p", json.dumps({"spec": {"throttleBytesPerSecond": SLOW}}),
        )  # fmt: skip
    finally:
        await asyncio.to_thread(kafka_jbod.start_broker, 3)
    st = await wait_succeeded(kube, "stall", 300)
    assert {o["partition"]: o["replicas"] for o in st["original"]} == before, st["original"]
    await asyncio.to_thread(
        wait_for,
        lambda: ended_at_targets(kafka_jbod, topic, targets),
        60,
        "every partition at its target, led by its first replica",
    )
    await asyncio.to_thread(wait_no_throttle_left, kafka_jbod, topic)
    await finish_and_check(kafka_jbod, topic, prod, count)
