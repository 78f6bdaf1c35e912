"""Seeded randomized faults under PartitionReassignments (issue 37): does a finished
reassignment hold what it claims, whatever was killed on the way?

Per seed (``random.Random``; every decision comes from it, the seed is in every message): a
BrokerCluster of 5 brokers x 2 dirs, two operator processes (one a standby, Lease 6 s renewed
every 1 s), two topics of 3 partitions RF 3 min ISR 2, a counting acks=all producer and a
tailing consumer over all of them; then ``TORTURE_STEPS`` random PartitionReassignments
(random targets with new preferred leaders, named dirs or ``any``, random limits, sometimes a
throttle; some cancelled or rolled back mid-way or after the end) while the active operator
(the Lease's holder) and single brokers (down 1-5 s) are SIGKILLed at random moments, also
right after a cancel or a rollback is seen (Cancelling, RollingBack). The killed operator is
started again, so there is always a standby.

After each reassignment reaches its end phase, ``e2e.reassignment_audit`` compares what the
brokers hold with what it claims; at the end every acknowledged record must have been read
exactly once, in order. The test fails with every problem found, per seed. One JSON line
gives the seeds, kills, reassignments, each operator takeover (SIGKILL to the standby holding
the Lease, and to its first status write) and the number of problems: the takeover figures
are printed, not asserted (so the module is not SERIAL, tests/tiers.py).

``TORTURE_SEEDS``: a comma list of seeds, or a count N (seeds 1..N); default two fixed seeds.
``TORTURE_STEPS``: reassignments per seed (default 3). ``make torture SEEDS=N`` runs seeds
1..N with 6 reassignments each (``STEPS=``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e import reassignment_audit as audit
from e2e.scenario import LeaderTracker, Scenario, dump, wait_async
from jbod_broker.storage.names import TopicPartition
from tests.integration.counting import CountingConsumer, CountingProducer, fill_bytes, verify
from tests.kube_cluster import KubeCluster

BROKERS = 5
DIRS = ("a", "b")
RF = 3
TOPICS = {"left": 3, "right": 3}
LEASE_ENV = {
    "JBOD_OPERATOR_LEASE_SECONDS": "6",
    "JBOD_OPERATOR_LEASE_RENEW_SECONDS": "1",
    "JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS": "0.3",
}
FILL_MIB = 0.3
"""Bulk per partition before the first reassignment (the counted records add little)."""
THROTTLES = (256 * 1024, 512 * 1024)
"""bytes/s: with :data:`FILL_MIB` per partition a throttled step lasts about a second."""
END_TIMEOUT_S = 240
"""A reassignment that has not ended by then never will: a finding."""
SETTLE_S = 15
"""How long the audit may wait for the brokers to agree with the end (metadata propagated,
the preferred leader elected, a restarted broker caught up)."""


def _seeds(raw: str | None) -> list[int]:
    if not raw:
        return [1, 2]
    if "," not in raw and raw.strip().isdigit():
        return list(range(1, int(raw) + 1))
    return [int(s) for s in raw.split(",") if s.strip()]


SEEDS = _seeds(os.environ.get("TORTURE_SEEDS"))
STEPS = int(os.environ.get("TORTURE_STEPS", "3"))

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120 + len(SEEDS) * (90 + STEPS * 300))]


@dataclass
class Tally:
    """What one seed did and found."""

    seed: int
    reassignments: list[str] = field(default_factory=list)
    operator_kills: int = 0
    broker_kills: int = 0
    during: dict[str, int] = field(default_factory=dict)
    """Kills by the phase the reassignment was in (Running, Cancelling, RollingBack...)."""
    takeover_s: list[float] = field(default_factory=list)
    first_write_s: list[float | None] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    settle_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    """Each reassignment's seconds from its creation to its end phase."""
    plans: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def problem(self, text: str, key: str | None = None) -> None:
        """One problem, once per seed (``key``: what makes it the same problem, e.g. a stray
        that every later audit sees again)."""
        key = key or text
        if key not in self._seen:
            self._seen.add(key)
            self.problems.append(f"seed {self.seed}: {text}")

    def fates(self) -> list[str]:
        """The seed's sequence of endings: every fate once before any repeats, shuffled."""
        rng = random.Random(f"{self.seed}:fates")
        out: list[str] = []
        while len(out) < STEPS:
            out += rng.sample(FATES, len(FATES))
        return out[:STEPS]


# -- the resource -------------------------------------------------------------------------


def pr_of(sc: Scenario, name: str) -> dict[str, Any]:
    return sc.kube.get("partitionreassignment", name) or {}


def status(sc: Scenario, name: str) -> dict[str, Any]:
    return dict(pr_of(sc, name).get("status") or {})


def patch(sc: Scenario, name: str, **spec: Any) -> int:
    sc.kube.run(
        "patch", "partitionreassignment", name, "-n", sc.ns, "--type=merge",
        "-p", json.dumps({"spec": spec}),
    )  # fmt: skip
    return int(pr_of(sc, name)["metadata"]["generation"])


def topics(sc: Scenario) -> list[dict[str, Any]]:
    return sc.kube.topics()


def in_flight(st: dict[str, Any]) -> bool:
    counts = st.get("counts") or {}
    return bool(counts.get("Adding") or counts.get("Removing") or counts.get("Placing"))


ENDED = {"Succeeded", "Cancelled", "RolledBack", "Failed"}
FATES = ("finish", "cancel", "rollback-mid", "rollback-end")
"""How a reassignment is to end: as planned, cancelled mid-way, rolled back mid-way, rolled
back after it succeeded."""


# -- a random plan ------------------------------------------------------------------------


def random_plan(
    rng: random.Random, sc: Scenario, tps: list[TopicPartition], fate: str
) -> dict[str, Any]:
    """A PartitionReassignment spec: 1-3 partitions (of those at RF 3: one left at another
    size by an earlier end is audited, not moved again) each onto 3 random brokers (often a
    new first replica), dirs named, ``any`` or left out; random limits; sometimes a throttle
    (always when it is to be cancelled or rolled back mid-way: so that a step is in flight)."""
    movable = [tp for tp in tps if len(sc.state(tp)["replicas"]) == RF]
    chosen = rng.sample(movable, rng.randint(1, min(3, len(movable)))) if movable else []
    parts = []
    for tp in chosen:
        now = [r["brokerId"] for r in sc.state(tp)["replicas"]]
        reps = now
        while reps == now:
            reps = rng.sample(range(BROKERS), RF)
        entry: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition, "replicas": reps}
        style = rng.choice(("named", "named", "mixed", "none"))
        if style != "none":
            choices = DIRS if style == "named" else (*DIRS, "any")
            entry["logDirs"] = [rng.choice(choices) for _ in reps]
        parts.append(entry)
    spec: dict[str, Any] = {
        "clusterName": "kip",
        "partitions": parts,
        "maxConcurrentPartitionMovements": rng.randint(1, 3),
        "maxConcurrentReplicaMovements": rng.randint(1, 2),
        "maxConcurrentLeaderMovements": rng.randint(1, 3),
    }
    if rng.random() < 0.5 or fate in ("cancel", "rollback-mid"):  # mid-way is mid-step
        spec["throttleBytesPerSecond"] = rng.choice(THROTTLES)
    return spec


# -- faults -------------------------------------------------------------------------------


class Faults:
    """SIGKILLs, one at a time (a lock): the active operator (found from the Lease, the
    killed one started again as the standby) or one broker (started again after its
    downtime). Each operator kill is timed: to the standby holding the Lease, and to its
    first status write on ``watch`` (the reassignment running, if it had not ended)."""

    def __init__(self, sc: Scenario, tally: Tally) -> None:
        self.sc = sc
        self.tally = tally
        self.lock = asyncio.Lock()
        self.watch: str | None = None

    async def run(self, kind: str, broker: int, down_s: float, *, ended: bool = True) -> None:
        """One fault; with ``ended`` False, none once the watched reassignment has ended (a
        fault then would test nothing of it)."""
        async with self.lock:
            phase = status(self.sc, self.watch).get("phase") if self.watch else None
            if not ended and phase in ENDED:
                return
            key = f"{kind}@{phase}"
            self.tally.during[key] = self.tally.during.get(key, 0) + 1
            if kind == "operator":
                await self._kill_operator()
            else:
                await self._kill_broker(broker, down_s)

    async def _kill_operator(self) -> None:
        sc = self.sc
        holder = str(sc.lease_holder())
        active = next((op for op in sc.ops if op.proc and f"-{op.proc.pid}-" in holder), None)
        if active is None:  # the Lease names neither: not a moment to measure a takeover at
            return
        standby = next(op for op in sc.ops if op is not active)
        assert standby.proc is not None
        watched = status(sc, self.watch) if self.watch else {}
        live = watched.get("phase") not in ENDED and bool(watched)
        killed = time.monotonic()
        active.kill()
        self.tally.operator_kills += 1
        pid = f"-{standby.proc.pid}-"
        await wait_async(
            lambda: pid in str(sc.lease_holder()),
            what="the standby to take the Lease",
            timeout=60,
        )
        self.tally.takeover_s.append(round(time.monotonic() - killed, 2))
        active.start()  # back as the standby
        first: float | None = None
        if live and self.watch is not None:
            name = self.watch
            with contextlib.suppress(TimeoutError):
                await wait_async(
                    lambda: status(sc, name) != watched, what="a status write", timeout=60
                )
                first = round(time.monotonic() - killed, 2)
        self.tally.first_write_s.append(first)
        print(
            f"\nseed {self.tally.seed}: operator SIGKILLed in {watched.get('phase')} of "
            f"{self.watch}: the standby held the Lease after {self.tally.takeover_s[-1]} s, "
            f"its first status write after {first} s"
        )

    async def _kill_broker(self, broker: int, down_s: float) -> None:
        assert self.sc.brokers is not None
        b = self.sc.brokers[broker]
        b.kill()
        self.tally.broker_kills += 1
        await asyncio.sleep(down_s)  # the seeded downtime itself
        await asyncio.to_thread(b.start)

    async def chaos(self, rng: random.Random, stop: asyncio.Event, first: str) -> None:
        """Faults at seeded moments until ``stop``: 1-3 of them, 0.5-6 s apart, the first of
        kind ``first`` (so that every seed kills operators and brokers both)."""
        for n in range(rng.randint(1, 3)):
            kind, broker, down = self.draw(rng)
            kind = first if n == 0 else kind
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), rng.uniform(0.5, 6))
            if stop.is_set():
                return
            await self.run(kind, broker, down, ended=False)

    @staticmethod
    def draw(rng: random.Random) -> tuple[str, int, float]:
        return rng.choice(("operator", "broker")), rng.randrange(BROKERS), rng.uniform(1, 5)

    def heal(self) -> None:
        """Every broker and both operators running (a fault that raised may have left one
        down)."""
        assert self.sc.brokers is not None
        for b in range(BROKERS):
            if not self.sc.brokers[b].alive:
                self.sc.brokers[b].start()
        for op in self.sc.ops:
            if op.proc is None or op.proc.poll() is not None:
                op.start()


# -- one reassignment ---------------------------------------------------------------------


async def wait_end(sc: Scenario, name: str, gen: int, phases: set[str]) -> dict[str, Any] | None:
    """The resource once it reached one of ``phases`` having seen generation ``gen``; None
    when it did not within :data:`END_TIMEOUT_S`."""

    def ended() -> dict[str, Any] | None:
        pr = pr_of(sc, name)
        st = pr.get("status") or {}
        ok = st.get("phase") in phases and int(st.get("observedGeneration") or 0) >= gen
        return pr if ok else None

    try:
        got: dict[str, Any] = await wait_async(ended, timeout=END_TIMEOUT_S, what=f"{name} ended")
        return got
    except TimeoutError:
        return None


async def control(
    sc: Scenario, name: str, fate: str, rng: random.Random, faults: Faults
) -> tuple[int, set[str]]:
    """Cancel or roll back as ``fate`` says, a fault right after the operator took it up;
    returns the generation to wait for and the phases that end it."""
    gen = int(pr_of(sc, name)["metadata"]["generation"])
    if fate == "finish":
        return gen, {"Succeeded", "Failed"}
    if fate == "rollback-end":
        await wait_async(
            lambda: status(sc, name).get("phase") in ENDED,
            timeout=END_TIMEOUT_S,
            what=f"{name} ended before its rollback",
        )
    else:
        with contextlib.suppress(TimeoutError):
            await wait_async(
                lambda: in_flight(st := status(sc, name)) or st.get("phase") in ENDED,
                timeout=60,
                what=f"{name}: a step in flight",
            )
        await asyncio.sleep(rng.uniform(0, 1.5))  # a seeded moment mid-way
    phase = status(sc, name).get("phase")
    if fate == "cancel" and phase in ENDED:
        return gen, {"Succeeded", "Failed"}  # it ended first: nothing left to cancel
    if phase == "Failed":
        return gen, {"Failed"}
    field_ = "cancel" if fate == "cancel" else "rollback"
    gen = patch(sc, name, **{field_: True})
    busy = {"Cancelling"} if fate == "cancel" else {"RollingBack"}
    with contextlib.suppress(TimeoutError):
        await wait_async(
            lambda: status(sc, name).get("phase") in busy | ENDED, timeout=30, what="taken up"
        )
    kind, broker, down = Faults.draw(rng)
    if status(sc, name).get("phase") in busy:
        await faults.run(kind, broker, down)
    if fate == "cancel":
        return gen, {"Cancelled", "Succeeded", "Failed"}  # Succeeded: it ended first
    return gen, {"RolledBack", "Failed"}


async def one_reassignment(
    sc: Scenario, tps: list[TopicPartition], i: int, tally: Tally, faults: Faults
) -> bool:
    """Reassignment ``i`` of the seed, with faults, then its audit; False when it did not
    end (the run cannot go on: its partitions stay claimed)."""
    rng = random.Random(f"{tally.seed}:{i}")
    fate = tally.fates()[i]
    spec = random_plan(rng, sc, tps, fate)
    if not spec["partitions"]:
        tally.problem("no partition at RF 3 left to move")
        return False
    name = f"r{i}"
    clients = {b: sc.client(b) for b in range(BROKERS)}
    before = await audit.placement_of(clients)
    began = time.monotonic()
    sc.kube.apply(
        {"apiVersion": "jbod.io/v1alpha1", "kind": "PartitionReassignment",
         "metadata": {"name": name}, "spec": spec}
    )  # fmt: skip
    faults.watch = name
    stop = asyncio.Event()
    chaos = asyncio.get_running_loop().create_task(
        faults.chaos(random.Random(f"{tally.seed}:{i}:chaos"), stop, ("operator", "broker")[i % 2])
    )
    try:
        gen, phases = await control(sc, name, fate, rng, faults)
        pr = await wait_end(sc, name, gen, phases)
    finally:
        stop.set()
        await chaos
        faults.heal()
    tally.step_s.append(round(time.monotonic() - began, 1))
    tally.reassignments.append(f"{name}:{fate}:{(pr or {}).get('status', {}).get('phase')}")
    tally.plans.append(f"seed {tally.seed} {name} ({fate}): {json.dumps(spec)}")
    if pr is None:
        tally.problem(
            f"{name} ({fate}) did not end within {END_TIMEOUT_S}s: {dump(status(sc, name))}"
        )
        return False
    if pr["status"]["phase"] == "Failed":
        tally.problem(f"{name} ({fate}) Failed: {dump(pr['status'])}")
        return True
    problems, waited = await audit.settled(
        lambda: audit.audit_brokers(pr_of(sc, name), clients, topics(sc), before), SETTLE_S
    )
    tally.settle_s.append(round(waited, 1))
    for p in problems:
        tally.problem(f"{name} ({fate}): {p}", key=p.split(": ", 1)[1])
    if problems:  # the evidence beside the finding: what the operator said it did
        print(f"\n--- seed {tally.seed} {name} ({fate}): events\n" + events_of(sc, name))
        print(f"--- seed {tally.seed} {name}: status\n{dump(pr['status'])}")
    return True


def events_of(sc: Scenario, name: str) -> str:
    raw = json.loads(sc.kube.run("get", "events", "-n", sc.ns, "-o", "json"))
    evs = [e for e in raw["items"] if e["involvedObject"]["name"] == name]
    evs.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return "\n".join(f"{e.get('lastTimestamp')} {e['reason']}: {e['message'][:300]}" for e in evs)


# -- one seed -----------------------------------------------------------------------------


@contextlib.contextmanager
def scenario(kube_cluster: KubeCluster, work: Path, seed: int) -> Iterator[Scenario]:
    with Scenario(
        kube_cluster, work, f"torture-{seed}", brokers=BROKERS, dirs=DIRS, operators=2,
        operator_env=LEASE_ENV,
    ) as sc:  # fmt: skip
        yield sc


async def run_seed(kube_cluster: KubeCluster, work: Path, seed: int) -> Tally:
    tally = Tally(seed)
    (work / f"seed-{seed}").mkdir()
    with scenario(kube_cluster, work / f"seed-{seed}", seed) as sc:
        tps = [tp for t, n in TOPICS.items() for tp in sc.create_topic(t, partitions=n, rf=RF)]
        tracker = LeaderTracker(sc, tps)
        tracker.start()
        await fill_bytes(tracker, tps, FILL_MIB)
        prod = CountingProducer(tracker, tps, timeout_ms=5000)
        cons = CountingConsumer(tracker, tps)
        prod.start()
        cons.start()
        faults = Faults(sc, tally)
        try:
            for i in range(STEPS):
                if not await one_reassignment(sc, tps, i, tally, faults):
                    break
        finally:
            await prod.stop()
            await cons.stop(timeout_s=120)
            await tracker.stop()
            await sc.close_clients()
        try:
            verify(prod.acked, cons.consumed)
        except AssertionError as e:
            tally.problem(f"counted records: {e}")
        if prod.acked_count == 0:
            tally.problem("no record was acknowledged")
        print(
            f"\nseed {seed}: {prod.acked_count} records acknowledged, {cons.count} read; "
            f"produce errors {prod.errors}"
        )
    return tally


async def test_reassignments_under_random_sigkills(
    kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    started = time.monotonic()
    tallies = []
    for seed in SEEDS:
        try:
            tallies.append(await run_seed(kube_cluster, tmp_path, seed))
        except Exception as e:  # one seed's crash is its finding; the other seeds still run
            t = Tally(seed)
            t.problem(f"crashed: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-4)}")
            tallies.append(t)
    problems = [p for t in tallies for p in t.problems]
    print(
        "\n"
        + json.dumps(
            {
                "seeds": SEEDS,
                "steps": STEPS,
                "operator_kills": sum(t.operator_kills for t in tallies),
                "broker_kills": sum(t.broker_kills for t in tallies),
                "kills_during": {str(t.seed): t.during for t in tallies},
                "reassignments": {str(t.seed): t.reassignments for t in tallies},
                "takeover_s": [s for t in tallies for s in t.takeover_s],
                "first_write_s": [s for t in tallies for s in t.first_write_s],
                "settle_s": [s for t in tallies for s in t.settle_s],
                "step_s": [s for t in tallies for s in t.step_s],
                "problems": len(problems),
                "wall_s": round(time.monotonic() - started, 1),
            }
        )
    )
    plans = [p for t in tallies for p in t.plans]
    assert not problems, (
        f"{len(problems)} problems (seeds {SEEDS}):\n"
        + "\n".join(problems)
        + "\nthe plans:\n"
        + "\n".join(plans)
    )
