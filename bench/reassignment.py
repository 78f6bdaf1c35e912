"""PartitionReassignment across brokers against the same brokers' plain follower replication
(issue 15). One harness: the real API server (tests.kube_cluster), the operator process and
two local broker processes with log dirs a and b (e2e.scenario.Scenario). Figures:

``reassign_seconds``, ``replication_seconds``, ``reassign_to_replication_ratio`` (target >= 0.8)
    The same bytes (``--size-mib``, 1 GiB; ``--quick`` 256 MiB) in ``--partitions`` partitions,
    written through the broker in ~1 MiB batches, moved from one broker to the other two ways:

    (a) a PartitionReassignment of a Topic ``bench`` (RF 1, every partition on one broker) to
        the other, unthrottled, with limits that start every partition at once. Timed from
        the apply (one server-side apply PATCH straight to the API server) to the moment a
        watch on the API server, opened before it, sees phase Succeeded. A partition [0] ->
        [1] is two KIP-435 steps (add 1 and elect it; then drop 0 and delete it), so this
        holds the operator's whole work: status writes, LeaderAndIsr, the new replica's
        catch-up, the ISR join reported by AlterPartition, the election, the StopReplica with
        delete.
    (b) the yardstick: Kafka's own follower replication of the same bytes between the same
        two brokers, with no reassignment. A Topic ``yardN`` (RF 2, replicas [source,
        destination], the source leading, min ISR 1, the same partitions and batches) is filled
        while the destination broker is stopped; then it starts again and its followers fetch
        everything from offset 0, as a broker back from maintenance does. Timed from the
        brokers' own logs: the destination told to follow (``become_follower``, the
        controller's LeaderAndIsr) to the source adding the last partition's replica to the
        ISR (``isr_expand``: the follower has every committed byte). The process start-up and
        the controller's noticing it are not counted, so this is the data path alone: the
        fetch protocol, the leader's reads, the follower's appends, the ISR rule.

    Each repetition runs both directions (0 -> 1, then back), each a yardstick and a
    reassignment side by side, alternating which goes first; here one direction is steadily
    slower than the other whichever way it is moved, so each is compared with its own.
    ``paired_ratio_median`` is the median of those pairs.

    Why this yardstick and not another: a new replica of a reassignment *is* a follower
    fetching from offset 0 (KIP-455: adding replicas are followers), so the fairest comparison
    is the same fetcher moving the same bytes between the same processes and disks; the
    ratio then shows what the operator's steps add. An RF 2 topic filled by a producer would
    time the producer instead (its follower keeps up as data arrives); a direct
    alter-replica-log-dirs is within one broker and does not cross the wire.
    ``reassign_breakdown_median_seconds`` splits (a) with the brokers' logs the same way:
    apply to the new replicas told to follow, their catch-up (the window (b) times), and the
    last ISR join to Succeeded seen (the shrink and the second step: election, delete).
    ``operator_overhead_seconds`` (reassign seconds less its own catch-up window) and
    ``catchup_to_reassign_ratio`` pair them within each run: what the operator adds, free of
    the run-to-run noise of a shared machine.

``throttle_error_pct`` (target <= 5)
    A PartitionReassignment of a Topic ``thr`` (RF 1, broker 0 -> 1, ``--throttle-mib`` MiB/s,
    8 by default) with ``throttleBytesPerSecond`` set, which the operator applies on the leader
    (leader.replication.throttled.*) and on the new follower (follower.*). The new replicas'
    bytes are sampled from broker 1's describe-log-dirs every 0.1 s; the measured rate is the
    least-squares slope of bytes over time between 10 % and 90 % of the data (the start and
    end of a move are not the rate). Error = |measured - throttle| / throttle.

``p99_ms_incremental``, ``p99_ms_all_at_once``
    KIP-435's point: sending a whole plan at once (what Kafka's tool does) lets reassignment
    traffic crowd out producers. A Topic ``heavy`` (``--heavy-partitions`` partitions RF 1,
    ``--heavy-mib`` MiB each) moves between the brokers while an acks=all producer sends
    16 KiB requests every 20 ms to a partition of Topic ``live`` (RF 2, min ISR 2) whose leader
    is the source broker and whose follower is the destination: its follower shares the
    destination's fetcher for that leader with the new replicas, so a full fetch round of
    catch-up data delays its acknowledgement. Per-request latency p99 over the whole move
    (apply to Succeeded), once with the resource's default limits (incremental: at most
    ``maxConcurrentMovesPerBroker`` 5 moves per broker) and once with limits that start every
    partition at once. Reported as they come out, with p50, max, produce errors and each
    move's duration (incremental moves take longer: the trade); ``p99_ms_idle`` is the same
    producer with nothing moving. Repetitions alternate which mode goes first.

``plan_10k_partitions_s`` (target <= 1)
    ``plan.reassignment_steps.plan_all`` in process for 10,000 partitions (RF 3, 12 brokers,
    current and target replicas drawn at random from a fixed seed, min ISR 2, the resource's
    default limits). The figure is the best of five wall times (as ``timeit`` advises: the
    machine's other load only ever adds to it), with their median, the CPU seconds of the best
    and the steps and batches it planned.

The brokers run with their default flush and checkpoint intervals (not the e2e scenario's
fast test values). The operator's pass interval while a reassignment runs is its default
(JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS, 0.5 s) unless ``--poll-seconds`` is given. Warm
page cache (the data was just written; ``sync`` before each timed part). Prints one JSON object
as its last line (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import annotated_types

from bench.logdirmove_cr import PhaseWatch, big_batch, server_side_apply, wall
from e2e.scenario import Scenario
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from jbod_operator.models.reassignment import (
    ENDED_PHASES,
    PartitionReassignmentSpec,
)
from jbod_operator.plan import reassignment_steps as steps
from tests.kube_cluster import KubeCluster
from tests.operator_harness import wait_for

REPO = Path(__file__).resolve().parents[1]

MiB = 1024 * 1024
SEGMENT_BYTES = 64 * MiB
NS = "reassign-bench"
PLURAL = "partitionreassignments"
SRC, DST = 0, 1
LIVE_INTERVAL_S = 0.02
"""The latency producer's pace: one acks=all request of 16 KiB every 20 ms (0.8 MB/s)."""


def log(msg: str) -> None:
    print(f"[reassignment] {msg}", file=sys.stderr, flush=True)


def p(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``values``, nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def spec_default(field: str) -> int:
    """A limit's default: the resource's model is its one home."""
    value = PartitionReassignmentSpec.model_fields[field].default
    assert isinstance(value, int)
    return value


def spec_max(field: str) -> int:
    """A limit's largest allowed value, from the resource's model (its one home)."""
    for m in PartitionReassignmentSpec.model_fields[field].metadata:
        if isinstance(m, annotated_types.Le):
            le: int = m.le  # type: ignore[assignment]
            return le
    raise LookupError(f"{field} has no maximum")


def all_at_once(partitions: int) -> dict[str, int]:
    """Limits that start every partition of a plan at once: Kafka's behaviour."""
    assert partitions <= spec_max("max_concurrent_partition_movements"), partitions
    return {
        "maxConcurrentPartitionMovements": partitions,
        "maxConcurrentLeaderMovements": partitions,
        "maxConcurrentReplicaMovements": spec_max("max_concurrent_replica_movements"),
        "maxConcurrentMovesPerBroker": spec_max("max_concurrent_moves_per_broker"),
    }


# -- the planner, in process ------------------------------------------------------------------


def plan_10k(seed: int = 15) -> dict[str, Any]:
    rng = random.Random(seed)
    brokers = list(range(12))
    moves = []
    for i in range(10_000):
        cur = tuple(rng.sample(brokers, 3))
        moves.append(
            steps.PartitionMove(
                topic=f"t{i % 50}", partition=i, current=cur, target=tuple(rng.sample(brokers, 3))
            )
        )
    limits = steps.Limits(
        replica_movements=spec_default("max_concurrent_replica_movements"),
        partition_movements=spec_default("max_concurrent_partition_movements"),
        leader_movements=spec_default("max_concurrent_leader_movements"),
        moves_per_broker=spec_default("max_concurrent_moves_per_broker"),
    )
    times, cpu = [], []
    batches: list[steps.Batch] = []
    for _ in range(5):
        t, c = time.perf_counter(), time.process_time()
        batches = steps.plan_all(moves, limits, min_isr=2)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return {
        "seconds": min(times),
        "median": statistics.median(times),
        "cpu": min(cpu),
        "batches": len(batches),
        "steps": sum(len(b.steps) for b in batches),
    }


# -- the cluster ------------------------------------------------------------------------------


def manifest(name: str, targets: Mapping[TopicPartition, list[int]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name},
        "spec": {
            "clusterName": "kip",
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": r}
                for tp, r in targets.items()
            ],
            **spec,
        },
    }


class BrokerLog:
    """Events of one broker's JSON log (``become_follower``, ``isr_expand``) after a time."""

    def __init__(self, path: str) -> None:
        self.path = path

    def events(self, event: str, topic: str, since: float) -> list[tuple[float, str]]:
        """(wall time, partition) of each ``event`` on ``topic`` at or after ``since``."""
        out = []
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if f'"{event}"' not in line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                part = str(rec.get("partition", ""))
                if rec.get("event") != event or part.rsplit("-", 1)[0] != topic:
                    continue
                t = wall(rec["ts"])
                if t >= since - 0.01:
                    out.append((t, part))
        return out


class Bench:
    def __init__(self, kc: KubeCluster, work: Path, poll: float | None) -> None:
        self.kc = kc
        work.mkdir(parents=True, exist_ok=True)
        env = {} if poll is None else {"JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS": str(poll)}
        self.sc = Scenario(
            kc,
            work,
            NS,
            brokers=2,
            dirs=("a", "b"),
            operator_env=env,
            broker_settings={
                "log.segment.bytes": str(SEGMENT_BYTES),
                # The broker's defaults, not the e2e scenario's fast test values.
                "log.flush.scheduler.interval.ms": "5000",
                "replica.high.watermark.checkpoint.interval.ms": "5000",
            },
        )
        self.runs = 0

    def start(self) -> None:
        self.sc.start()

    def stop(self) -> None:
        self.sc.stop()

    def broker_log(self, b: int) -> BrokerLog:
        assert self.sc.brokers is not None
        return BrokerLog(self.sc.brokers[b].log_path)

    @contextlib.asynccontextmanager
    async def client(self, b: int) -> AsyncIterator[BrokerClient]:
        """A client of broker ``b`` for the calling thread's event loop alone."""
        assert self.sc.brokers is not None
        c = BrokerClient(self.sc.brokers[b].url, token=self.sc.brokers.token, timeout_s=60)
        try:
            yield c
        finally:
            await c.close()

    def replicas(self, tp: TopicPartition) -> list[int]:
        return [r["brokerId"] for r in self.sc.state(tp)["replicas"]]

    def isr(self, tp: TopicPartition) -> list[int]:
        return sorted(self.sc.state(tp)["isr"])

    def topic(self, name: str, partitions: int, rf: int, min_isr: int) -> list[TopicPartition]:
        return self.sc.create_topic(name, partitions=partitions, rf=rf, min_isr=min_isr)

    def phase(self, name: str) -> str | None:
        pr = self.sc.kube.get("partitionreassignment", name) or {}
        return (pr.get("status") or {}).get("phase")

    def delete(self, kind: str, name: str) -> None:
        self.sc.kube.run("delete", kind, name, "-n", NS, "--wait=false")

    def place(self, targets: Mapping[TopicPartition, list[int]]) -> None:
        """Untimed set-up: each partition onto exactly these replicas, the first leading."""
        todo = {
            tp: r
            for tp, r in targets.items()
            if self.replicas(tp) != r or self.sc.leader(tp) != r[0]
        }
        if todo:
            self.runs += 1
            name = f"place-{self.runs}"
            self.sc.kube.apply(manifest(name, todo, **all_at_once(len(todo))))
            wait_for(lambda: self.phase(name) == "Succeeded", timeout=300, what=f"{name} done")
            self.delete("partitionreassignment", name)

    async def fill(self, tps: list[TopicPartition], batches: int, batch: bytes) -> None:
        """``batches`` batches into each partition, through its leader, acks=all."""

        async def one(tp: TopicPartition) -> None:
            client = self.sc.client(self.sc.leader(tp))
            for _ in range(batches):
                await client.produce(tp.topic, tp.partition, batch, acks=-1)

        await asyncio.gather(*(one(tp) for tp in tps))
        await self.sc.close_clients()

    def reassign(
        self,
        targets: Mapping[TopicPartition, list[int]],
        spec: Mapping[str, Any],
        during: Callable[[threading.Event], Any] | None = None,
    ) -> tuple[float, float, Any]:
        """Apply a PartitionReassignment and wait for Succeeded. Returns (seconds from the
        start of the apply to Succeeded seen, the wall time the apply started, what ``during``
        returned: it runs in this thread until Succeeded is seen, its event set then)."""
        self.runs += 1
        name = f"move-{self.runs}"
        obj = manifest(name, targets, **spec)
        os.sync()
        watch = PhaseWatch(self.kc, NS, PLURAL, name, ENDED_PHASES)
        watch.start()
        watch.ready.wait(30)
        done = threading.Event()
        result: list[Any] = []
        if during is not None:
            runner = threading.Thread(target=lambda: result.append(during(done)), daemon=True)
            runner.start()
        wall_start, start = time.time(), time.monotonic()
        server_side_apply(self.kc, NS, PLURAL, obj)
        phase, at = watch.wait(900)
        done.set()
        if during is not None:
            runner.join(60)
        if phase != "Succeeded":
            st = (self.sc.kube.get("partitionreassignment", name) or {}).get("status") or {}
            raise RuntimeError(f"{name} ended {phase}: {json.dumps(st)[:2000]}")
        self.delete("partitionreassignment", name)
        return at - start, wall_start, result[0] if result else None

    def catchup_window(
        self, topic: str, src: int, dst: int, since: float, partitions: int
    ) -> tuple[float, float]:
        """(first ``become_follower`` on ``dst``, last ``isr_expand`` on ``src``) of
        ``topic`` after ``since``, wall times from the brokers' logs."""
        started = self.broker_log(dst).events("become_follower", topic, since)
        joined = self.broker_log(src).events("isr_expand", topic, since)
        if not started or len({part for _, part in joined}) != partitions:
            raise RuntimeError(
                f"{topic}: {len(started)} become_follower on {dst}, "
                f"{len({part for _, part in joined})} partitions joined the ISR on {src}"
            )
        return min(t for t, _ in started), max(t for t, _ in joined)


# -- (a) and (b): reassignment against follower replication -----------------------------------


def timed_reassign(bench: Bench, tps: list[TopicPartition], dst: int) -> dict[str, float]:
    src = 1 - dst
    took, wall_start, _ = bench.reassign({tp: [dst] for tp in tps}, all_at_once(len(tps)))
    first, last = bench.catchup_window(tps[0].topic, src, dst, wall_start, len(tps))
    return {
        "seconds": took,
        "to_first_follow": first - wall_start,
        "catchup": last - first,
        "last_join_to_succeeded": wall_start + took - last,
    }


def replication(
    bench: Bench, name: str, src: int, partitions: int, batches: int, batch: bytes
) -> tuple[float, int]:
    """(b): a Topic RF 2 on [src, dst] filled while dst is down; seconds from dst told to
    follow to its last ISR join, from the brokers' logs. Returns also the bytes it holds."""
    assert bench.sc.brokers is not None
    dst = 1 - src
    tps = bench.topic(name, partitions, rf=2, min_isr=1)
    bench.place({tp: [src, dst] for tp in tps})
    bench.sc.brokers[dst].stop()
    wait_for(
        lambda: all(bench.isr(tp) == [src] for tp in tps),
        timeout=60,
        what=f"{name}: broker {dst} out of the ISR",
    )
    asyncio.run(bench.fill(tps, batches, batch))
    size = topic_bytes(bench, name, src)
    os.sync()
    since = time.time()
    bench.sc.brokers[dst].start()
    wait_for(
        lambda: all(bench.isr(tp) == sorted([src, dst]) for tp in tps),
        timeout=600,
        what=f"{name}: broker {dst} back in the ISR",
    )
    first, last = bench.catchup_window(name, src, dst, since, partitions)
    bench.delete("topic", name)
    wait_for(lambda: bench.sc.kube.get("topic", name) is None, timeout=120, what=f"{name} gone")
    return last - first, size


def topic_bytes(bench: Bench, topic: str, broker: int) -> int:
    """Bytes of the topic's segments on one broker's disks."""
    assert bench.sc.brokers is not None
    total = 0
    for d in bench.sc.brokers[broker].log_dirs:
        for root, _, files in os.walk(d):
            if os.path.basename(root).rsplit("-", 1)[0] == topic:
                total += sum(
                    os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".log")
                )
    return total


# -- throttle ---------------------------------------------------------------------------------


def sample_sizes(bench: Bench, topic: str, broker: int, done: threading.Event) -> list[Any]:
    """(monotonic time, bytes of ``topic``'s non-future replicas on ``broker``) every 0.1 s
    from describe-log-dirs, until ``done``."""

    async def run() -> list[tuple[float, int]]:
        out = []
        async with bench.client(broker) as client:
            while not done.is_set():
                r = await client.describe_log_dirs(topics=[topic])
                t = time.monotonic()
                size = sum(
                    rep.size
                    for d in r.log_dirs
                    for rep in d.partitions
                    if rep.topic == topic and not rep.is_future
                )
                out.append((t, size))
                await asyncio.sleep(0.1)
        return out

    return asyncio.run(run())


def slope(points: list[tuple[float, int]]) -> float:
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(b for _, b in points) / n
    num = sum((t - mx) * (b - my) for t, b in points)
    den = sum((t - mx) ** 2 for t, _ in points)
    return num / den


def throttle_run(
    bench: Bench, partitions: int, batches: int, batch: bytes, rate: int
) -> dict[str, Any]:
    tps = bench.topic("thr", partitions, rf=1, min_isr=1)
    bench.place({tp: [SRC] for tp in tps})
    asyncio.run(bench.fill(tps, batches, batch))
    total = topic_bytes(bench, "thr", SRC)
    took, _, samples = bench.reassign(
        {tp: [DST] for tp in tps},
        {"throttleBytesPerSecond": rate, **all_at_once(len(tps))},
        during=functools.partial(sample_sizes, bench, "thr", DST),
    )
    middle = [(t, b) for t, b in samples if 0.1 * total <= b <= 0.9 * total]
    if len(middle) < 5:
        raise RuntimeError(f"too few samples in the middle of the move: {samples}")
    measured = slope(middle)
    moving = [(t, b) for t, b in samples if 0 < b < total]
    whole = (
        (moving[-1][1] - moving[0][1]) / (moving[-1][0] - moving[0][0]) if len(moving) > 1 else 0
    )
    return {
        "bytes": total,
        "seconds": took,
        "measured": measured,
        "whole_window": whole,
        "samples": len(middle),
        "error_pct": abs(measured - rate) / rate * 100,
    }


# -- latency ----------------------------------------------------------------------------------


def produce_latencies(
    bench: Bench, tp: TopicPartition, leader: int, done: threading.Event
) -> tuple[list[float], int]:
    """acks=all requests of 16 records of 1 KiB every LIVE_INTERVAL_S to ``tp`` until
    ``done``: each request's latency (s) and the number that failed."""
    batch = build_batch([(None, b"l" * 1024)] * 16)

    async def run() -> tuple[list[float], int]:
        lat: list[float] = []
        errors = 0
        next_at = time.monotonic()
        async with bench.client(leader) as client:
            while not done.is_set():
                t = time.monotonic()
                try:
                    await client.produce(tp.topic, tp.partition, batch, acks=-1, timeout_ms=30_000)
                    lat.append(time.monotonic() - t)
                except KafkaError:
                    errors += 1
                next_at += LIVE_INTERVAL_S
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        return lat, errors

    return asyncio.run(run())


def summary(lat: list[float], errors: int, took: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "p99_ms": round(p(lat, 0.99) * 1000, 1),
        "p50_ms": round(p(lat, 0.5) * 1000, 1),
        "max_ms": round(max(lat) * 1000, 1),
        "requests": len(lat),
        "errors": errors,
    }
    if took is not None:
        out["move_seconds"] = round(took, 2)
    return out


@contextlib.contextmanager
def stopwatch_event(seconds: float) -> Iterator[threading.Event]:
    done = threading.Event()
    timer = threading.Timer(seconds, done.set)
    timer.start()
    try:
        yield done
    finally:
        timer.cancel()


# -- main -------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="256 MiB, about two minutes")
    ap.add_argument("--size-mib", type=int, default=None, help="default 1024 (quick: 256)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--reps", type=int, default=None, help="default 2 (quick: 1)")
    ap.add_argument("--poll-seconds", type=float, default=None, help="default: the operator's")
    ap.add_argument("--throttle-mib", type=float, default=8.0)
    ap.add_argument("--throttle-seconds", type=float, default=None, help="default 8 (quick: 5)")
    ap.add_argument("--heavy-partitions", type=int, default=12)
    ap.add_argument("--heavy-mib", type=int, default=None, help="per partition; 32 (quick: 16)")
    ap.add_argument("--latency-reps", type=int, default=None, help="default 2 (quick: 1)")
    args = ap.parse_args()
    size = (args.size_mib or (256 if args.quick else 1024)) * MiB
    reps = args.reps or (1 if args.quick else 2)
    lat_reps = args.latency_reps or (1 if args.quick else 2)
    parts = args.partitions
    batch = big_batch()
    batches = max(1, size // parts // len(batch))
    rate = int(args.throttle_mib * MiB)
    thr_seconds = args.throttle_seconds or (5 if args.quick else 8)
    thr_parts = 2
    thr_batches = max(1, int(rate * thr_seconds) // thr_parts // len(batch))
    heavy_batches = max(1, (args.heavy_mib or (16 if args.quick else 32)) * MiB // len(batch))
    t0 = time.monotonic()
    loadavg_start = os.getloadavg()

    log("planning 10,000 partitions in process")
    plan = plan_10k()
    log(f"plan_all: {plan}")

    work = Path(tempfile.mkdtemp(prefix="jbod-reassign-bench-", dir="/tmp"))
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", str(work)], capture_output=True, text=True
    ).stdout.strip()
    kc = KubeCluster()
    moves: list[dict[str, float]] = []
    directions: list[str] = []
    repl_times: list[float] = []
    repl_ways: list[str] = []
    lat_runs: dict[str, list[dict[str, Any]]] = {"incremental": [], "all_at_once": []}
    with contextlib.redirect_stdout(sys.stderr):
        try:
            kc.require_kubectl()
            log("starting the API server, the operator and two brokers")
            kc.start()
            bench = Bench(kc, work / "cluster", args.poll_seconds)
            try:
                bench.start()
                # (a) and (b)
                tps = bench.topic("bench", parts, rf=1, min_isr=1)
                bench.place({tp: [SRC] for tp in tps})
                log(f"filling {parts} partitions with {batches} batches of {len(batch)} B")
                f0 = time.monotonic()
                asyncio.run(bench.fill(tps, batches, batch))
                fill_s = time.monotonic() - f0
                moved_bytes = topic_bytes(bench, "bench", SRC)
                log(f"{moved_bytes} B in {fill_s:.1f}s")
                repl_bytes = 0
                for rep in range(reps):
                    # Both directions, each side first in turn: 0->1 then back, pairwise.
                    sides = [("y", SRC), ("r", SRC), ("r", DST), ("y", DST)]
                    if rep % 2:
                        sides = [("r", SRC), ("y", SRC), ("y", DST), ("r", DST)]
                    for side, src in sides:
                        way = f"{src}->{1 - src}"
                        if side == "y":
                            name = f"yard{len(repl_times)}"
                            took, repl_bytes = replication(bench, name, src, parts, batches, batch)
                            repl_times.append(took)
                            repl_ways.append(way)
                            log(f"rep {rep} follower replication {way}: {took:.3f}s")
                        else:
                            run = timed_reassign(bench, tps, 1 - src)
                            moves.append(run)
                            directions.append(way)
                            parts_s = ", ".join(f"{k} {v:.3f}s" for k, v in run.items())
                            log(f"rep {rep} reassign {way}: {parts_s}")
                bench.delete("topic", "bench")
                wait_for(lambda: bench.sc.kube.get("topic", "bench") is None, what="bench gone")

                # throttle
                log(f"throttle: {thr_parts} partitions, {thr_batches} batches each, {rate} B/s")
                thr = throttle_run(bench, thr_parts, thr_batches, batch, rate)
                log(f"throttle: {thr}")
                bench.delete("topic", "thr")

                # latency
                live = bench.topic("live", 2, rf=2, min_isr=2)
                bench.place({live[0]: [SRC, DST], live[1]: [DST, SRC]})
                heavy = bench.topic("heavy", args.heavy_partitions, rf=1, min_isr=1)
                bench.place({tp: [SRC] for tp in heavy})
                asyncio.run(bench.fill(heavy, heavy_batches, batch))
                heavy_bytes = topic_bytes(bench, "heavy", SRC)
                with stopwatch_event(3.0) as done:
                    idle = summary(*produce_latencies(bench, live[0], SRC, done))
                log(f"latency, nothing moving: {idle}")
                src = SRC
                for rep in range(lat_reps):
                    order = ["incremental", "all_at_once"]
                    if rep % 2:
                        order.reverse()
                    for mode in order:
                        dst = 1 - src
                        limits = all_at_once(len(heavy)) if mode == "all_at_once" else {}
                        # The live partition led by the source: its follower is on dst.
                        lp = live[0] if src == SRC else live[1]
                        took, _, (lat, errors) = bench.reassign(
                            {tp: [dst] for tp in heavy},
                            limits,
                            during=functools.partial(produce_latencies, bench, lp, src),
                        )
                        run_summary = summary(lat, errors, took)
                        run_summary["direction"] = f"{src}->{dst}"
                        lat_runs[mode].append(run_summary)
                        log(f"latency rep {rep} {mode}: {run_summary}")
                        src = dst
            finally:
                bench.stop()
        finally:
            kc.stop()
            shutil.rmtree(work, ignore_errors=True)

    def med(key: str) -> float:
        return round(statistics.median(m[key] for m in moves), 3)

    reassign_s = statistics.median(m["seconds"] for m in moves)
    repl_s = statistics.median(repl_times)
    ratio = repl_s / reassign_s
    p99_inc = statistics.median(r["p99_ms"] for r in lat_runs["incremental"])
    p99_all = statistics.median(r["p99_ms"] for r in lat_runs["all_at_once"])
    result = {
        "bench": "reassignment",
        "quick": args.quick,
        "bytes": moved_bytes,
        "replication_bytes": repl_bytes,
        "partitions": parts,
        "batch_bytes": len(batch),
        "brokers": 2,
        "poll_seconds": args.poll_seconds,
        "reps": reps,
        "reassign_seconds": round(reassign_s, 3),
        "replication_seconds": round(repl_s, 3),
        "reassign_to_replication_ratio": round(ratio, 3),
        "reassign_breakdown_median_seconds": {
            "apply_to_first_follow": med("to_first_follow"),
            "catchup": med("catchup"),
            "last_isr_join_to_succeeded": med("last_join_to_succeeded"),
        },
        # Paired within each reassignment: what the operator adds to its own new replicas'
        # catch-up (the brokers' log), free of the load swings between runs.
        "operator_overhead_seconds": round(
            statistics.median(m["seconds"] - m["catchup"] for m in moves), 3
        ),
        "catchup_to_reassign_ratio": round(
            statistics.median(m["catchup"] / m["seconds"] for m in moves), 3
        ),
        "reassign_seconds_all": {
            d: [round(m["seconds"], 3) for m, dd in zip(moves, directions, strict=True) if dd == d]
            for d in sorted(set(directions))
        },
        "replication_seconds_all": {
            d: [round(t, 3) for t, dd in zip(repl_times, repl_ways, strict=True) if dd == d]
            for d in sorted(set(repl_ways))
        },
        # Each follower replication against the reassignment in the same direction and
        # repetition, next to it in time: less of the machine's load swings between them.
        "paired_ratio_median": round(
            statistics.median(r / m["seconds"] for r, m in zip(repl_times, moves, strict=True)),
            3,
        ),
        "reassign_mib_per_s": round(moved_bytes / MiB / reassign_s, 1),
        "replication_mib_per_s": round(repl_bytes / MiB / repl_s, 1),
        "throttle_bytes_per_s": rate,
        "throttle_measured_bytes_per_s": round(thr["measured"]),
        "throttle_whole_window_bytes_per_s": round(thr["whole_window"]),
        "throttle_error_pct": round(thr["error_pct"], 2),
        "throttle_move": {
            "bytes": thr["bytes"],
            "seconds": round(thr["seconds"], 2),
            "samples": thr["samples"],
        },
        "p99_ms_incremental": p99_inc,
        "p99_ms_all_at_once": p99_all,
        "p99_ms_idle": idle["p99_ms"],
        "latency_runs": lat_runs,
        "latency_idle": idle,
        "heavy": {
            "partitions": args.heavy_partitions,
            "bytes": heavy_bytes,
            "incremental_limits": {
                "maxConcurrentPartitionMovements": spec_default(
                    "max_concurrent_partition_movements"
                ),
                "maxConcurrentMovesPerBroker": spec_default("max_concurrent_moves_per_broker"),
            },
        },
        "plan_10k_partitions_s": round(plan["seconds"], 3),
        "plan_10k": {
            "median_s": round(plan["median"], 3),
            "cpu_s": round(plan["cpu"], 3),
            "batches": plan["batches"],
            "steps": plan["steps"],
        },
        "fill_seconds": round(fill_s, 1),
        "fs": fs or "unknown",
        "target": {
            "reassign_to_replication_ratio": 0.8,
            "throttle_error_pct": 5,
            "plan_10k_partitions_s": 1,
        },
        "meets_target": ratio >= 0.8 and thr["error_pct"] <= 5 and plan["seconds"] <= 1,
        "loadavg_start": [round(x, 2) for x in loadavg_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
