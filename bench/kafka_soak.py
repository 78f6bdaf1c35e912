"""The Kafka port under hostile and careless clients for minutes on end (issue 36's soak).

Two brokers (2 log dirs each) under the controller stub, topic ``t`` (4 partitions, RF 2,
min ISR 2). A counting producer (librdkafka through confluent-kafka, acks=all, idempotent,
a steady rate) and a counting consumer (assigned to every partition, tailing) run through
two phases of the same run:

- ``baseline``: nothing else;
- ``attack``: as well, :data:`CLIENTS` clients in a process of their own, each looping over
  a mix of valid produce and fetch (to a topic of their own, ``noise``) and the attacks issue
  36 found: a Fetch naming one partition 2,048 times, a Fetch of 25,000 entries from a
  replica id that is no follower, size-only frames of 100 MiB held open, bodies trickled byte
  by byte, Metadata naming 100,000 topics, 10,000 pipelined ApiVersions, control and
  transactional batches, ListOffsets timestamps that name nothing, garbage. Heavy attacks are
  bounded in how many run at once; every client stops at the phase's end. Loopback only.

A follower's broker id is never spoofed (a Fetch with it moves that follower's state on the
leader: closing that needs authentication, issue 41).

At the end the consumer catches up to the high watermark and :func:`jbod_broker.counting.verify`
checks every acknowledged value read exactly once and in order. The JSON has the producer's
latency in each phase (p50/p99, from send to acknowledgement), /readyz's worst answer during
the attack (asked from another process), each broker's peak RSS, and each attack's outcomes
(answered, refused as Kafka would, closed). Prints one JSON object as its last line; exits 1
if a record was lost or duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import confluent_kafka
from kio.schema.errors import ErrorCode

from jbod_broker.counting import verify
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from tests.bad_batches import client_refused_batches
from tests.integration.controller_stub import stub_cluster
from tests.integration.kafka_wire import encode_request, read_response
from tests.integration.test_broker_loop import ReadyzProbe
from tests.integration.test_kafka_bad_input import (
    api_versions_request,
    list_offsets_request,
    produce_to,
)
from tests.integration.test_kafka_hostile_fetch import fetch_request, metadata_request

TOPIC = "t"
NOISE = "noise"
PARTITIONS = 4
CLIENTS = 200
VALUE_BYTES = 256
SETTINGS = {"broker.heartbeat.interval.ms": "500", "request.body.timeout.ms": "10000"}
HEAVY_AT_ONCE = {
    "fetch_2048_duplicates": 2,
    "fetch_25000_entries": 1,
    "size_only_100mib": 3,
    "metadata_100000_topics": 1,
    "pipelined_10000_api_versions": 1,
    "trickled_body": 10,
}
"""Attacks that cost the broker (or this process) much: at most this many at once."""
WEIGHTS = {
    "valid_produce": 30,
    "valid_fetch": 30,
    "fetch_2048_duplicates": 3,
    "fetch_25000_entries": 1,
    "size_only_100mib": 3,
    "metadata_100000_topics": 1,
    "pipelined_10000_api_versions": 1,
    "trickled_body": 3,
    "client_refused_batch": 5,
    "list_offsets_naming_nothing": 5,
    "garbage": 5,
}


def log(msg: str) -> None:
    print(f"[kafka_soak] {msg}", file=sys.stderr, flush=True)


# -- the attackers (a process of their own) ---------------------------------------------------


class Attackers:
    """What every attacking client sends, encoded once (the big ones cost this process
    seconds to build), and the outcome of each try by kind."""

    def __init__(self, endpoint: str, seconds: float) -> None:
        self.endpoint = endpoint
        self.deadline = time.monotonic() + seconds
        self.outcomes: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.gates = {k: asyncio.Semaphore(n) for k, n in HEAVY_AT_ONCE.items()}
        names = [f"ghost-{i}" for i in range(100_000)]
        self.frames = {
            "fetch_2048_duplicates": encode_request(fetch_request(2_048)),
            "fetch_25000_entries": encode_request(fetch_request(25_000, replica_id=7)),
            "metadata_100000_topics": encode_request(metadata_request(names)),
            "api_versions": encode_request(api_versions_request()),
            "valid_fetch": encode_request(fetch_request(1, partition_max_bytes=64 * 1024)),
        }
        refused = client_refused_batches().values()
        self.refused = [encode_request(produce_to({NOISE: b.data})) for b in refused]
        self.list_offsets = [
            encode_request(list_offsets_request(7, (0, ts))) for ts in (-6, -(2**63))
        ]

    async def client(self, rng: random.Random) -> None:
        kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
        while time.monotonic() < self.deadline:
            kind = rng.choices(kinds, weights)[0]
            gate = self.gates.get(kind)
            if gate is not None and gate.locked():
                kind = "valid_fetch"
                gate = None
            try:
                if gate is None:
                    outcome = await self.one(kind, rng)
                else:
                    async with gate:
                        outcome = await self.one(kind, rng)
            except (ConnectionError, asyncio.IncompleteReadError, EOFError):
                outcome = "closed"
            except TimeoutError:
                outcome = "timed out"
            self.outcomes[kind][outcome] += 1
            await asyncio.sleep(rng.uniform(0, 0.2))

    async def one(self, kind: str, rng: random.Random) -> str:
        remaining = max(0.5, self.deadline - time.monotonic())
        async with asyncio.timeout(min(60, remaining + 5)):
            action: Callable[[random.Random], Awaitable[str]] = getattr(self, kind)
            return await action(rng)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = self.endpoint.rsplit(":", 1)
        return await asyncio.open_connection(host, int(port))

    async def _call(self, frame: bytes, api_key: int, version: int) -> Any:
        reader, writer = await self._connect()
        try:
            writer.write(frame)
            await writer.drain()
            return (await read_response(reader, api_key, version))[1]
        finally:
            writer.close()

    async def _until_closed(self, head: bytes) -> str:
        """Send ``head`` and nothing more: the broker should close the connection."""
        reader, writer = await self._connect()
        try:
            writer.write(head)
            await writer.drain()
            return "closed" if await reader.read(1) == b"" else "answered"
        finally:
            writer.close()

    async def valid_produce(self, rng: random.Random) -> str:
        frame = encode_request(produce_to({NOISE: build_batch([(None, b"n" * 100)] * 4)}))
        resp = await self._call(frame, 0, 9)
        code = resp.responses[0].partition_responses[0].error_code
        return "answered" if code == ErrorCode.none else f"error {code.name}"

    async def valid_fetch(self, rng: random.Random) -> str:
        """A consumer's fetch of the counting topic from its start, 64 KiB at most: careless
        (it never moves on), not heavy (200 clients reading 1 MiB each measured only how
        fast the broker walks batches)."""
        resp = await self._call(self.frames["valid_fetch"], 1, 12)
        return "answered" if resp.responses else "empty"

    async def fetch_2048_duplicates(self, rng: random.Random) -> str:
        await self._call(self.frames["fetch_2048_duplicates"], 1, 12)
        return "answered"

    async def fetch_25000_entries(self, rng: random.Random) -> str:
        await self._call(self.frames["fetch_25000_entries"], 1, 12)
        return "answered"

    async def metadata_100000_topics(self, rng: random.Random) -> str:
        await self._call(self.frames["metadata_100000_topics"], 3, 8)
        return "answered"

    async def pipelined_10000_api_versions(self, rng: random.Random) -> str:
        reader, writer = await self._connect()
        try:
            writer.write(self.frames["api_versions"] * 10_000)
            await writer.drain()
            for _ in range(10_000):
                await read_response(reader, 18, 3)
            return "answered"
        finally:
            writer.close()

    async def size_only_100mib(self, rng: random.Random) -> str:
        return await self._until_closed(struct.pack(">i", 100 << 20))

    async def trickled_body(self, rng: random.Random) -> str:
        frame = encode_request(produce_to({NOISE: build_batch([(None, b"s" * 60_000)])}))
        reader, writer = await self._connect()
        try:
            writer.write(frame[:4])
            for i in range(4, len(frame)):
                if reader.at_eof() or time.monotonic() > self.deadline:
                    break
                writer.write(frame[i : i + 1])
                await writer.drain()
                await asyncio.sleep(0.1)
            return "closed" if await reader.read(1) == b"" else "answered"
        finally:
            writer.close()

    async def client_refused_batch(self, rng: random.Random) -> str:
        resp = await self._call(rng.choice(self.refused), 0, 9)
        code = resp.responses[0].partition_responses[0].error_code
        refused = {ErrorCode.invalid_record, ErrorCode.transactional_id_authorization_failed}
        return "refused as Kafka" if code in refused else f"unexpected {code.name}"

    async def list_offsets_naming_nothing(self, rng: random.Random) -> str:
        resp = await self._call(rng.choice(self.list_offsets), 2, 7)
        code = resp.topics[0].partitions[0].error_code
        return "refused as Kafka" if code == ErrorCode.unsupported_version else f"{code.name}"

    async def garbage(self, rng: random.Random) -> str:
        junk = rng.randbytes(rng.randint(1, 64))
        return await self._until_closed(struct.pack(">i", len(junk)) + junk)


async def attack(endpoint: str, seconds: float, clients: int, seed: int) -> dict[str, Any]:
    a = Attackers(endpoint, seconds)
    rng = random.Random(seed)
    await asyncio.gather(*(a.client(random.Random(rng.random())) for _ in range(clients)))
    return {k: dict(v) for k, v in a.outcomes.items() if v}


# -- the counting producer and consumer -------------------------------------------------------


class CountingKafkaProducer:
    """acks=all and idempotent through librdkafka, at a steady rate, round robin over the
    partitions: each value sent once (``soak-p-<seq>``); acknowledged values kept by
    partition, and each one's latency from send to acknowledgement in the phase it was sent."""

    def __init__(self, bootstrap: str, rate: int) -> None:
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
            }
        )
        self.rate = rate
        self.phase = "baseline"
        self.acked: dict[TopicPartition, list[bytes]] = {}
        self.latencies: dict[str, list[float]] = {}
        self.failed: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        left = self.producer.flush(60)
        if left:
            raise RuntimeError(f"{left} records neither acknowledged nor failed after 60 s")

    def _run(self) -> None:
        seq = 0
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = t0 + seq / self.rate
            now = time.monotonic()
            if due > now:
                self.producer.poll(due - now)
                continue
            value = b"soak-p-%d" % seq + b"." * (VALUE_BYTES - 16)
            self._send(seq % PARTITIONS, value, self.phase)
            seq += 1
            self.producer.poll(0)

    def _send(self, partition: int, value: bytes, phase: str) -> None:
        sent = time.monotonic()

        def done(err: Any, msg: Any) -> None:
            if err is not None:
                self.failed[phase] += 1
                return
            tp = TopicPartition(TOPIC, msg.partition())
            self.acked.setdefault(tp, []).append(value.split(b".", 1)[0])
            self.latencies.setdefault(phase, []).append(time.monotonic() - sent)

        self.producer.produce(TOPIC, value, partition=partition, on_delivery=done)


class TailingConsumer:
    """Every partition from its start, all along; :meth:`catch_up` reads to the high
    watermarks once the producer has stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "unused",  # librdkafka wants one; nothing is committed
                "enable.auto.commit": False,
            }
        )
        self.consumer.assign(
            [
                confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(PARTITIONS)
            ]
        )
        self.read: dict[TopicPartition, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._poll()

    def _poll(self) -> None:
        for msg in self.consumer.consume(500, 0.2):
            partition, offset, value = msg.partition(), msg.offset(), msg.value()
            if msg.error() is not None or partition is None or offset is None or value is None:
                continue
            self.read.setdefault(TopicPartition(TOPIC, partition), []).append(
                value.split(b".", 1)[0]
            )
            self.next_offset[partition] = offset + 1

    def catch_up(self, timeout_s: float = 120) -> None:
        self._stop.set()
        self._thread.join(30)
        ends = {
            p: self.consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(TOPIC, p), timeout=10
            )[1]
            for p in range(PARTITIONS)
        }
        deadline = time.monotonic() + timeout_s
        while any(self.next_offset.get(p, 0) < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the consumer did not reach the high watermarks {ends}")
            self._poll()
        self.consumer.close()


# -- the run ----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class RssWatch:
    """Each broker's largest resident set while the run lasts, sampled every 0.2 s (VmHWM is
    the process's whole life, start-up included)."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peak_kib = dict.fromkeys(pids, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for pid in self.pids:
                try:
                    with open(f"/proc/{pid}/status", encoding="ascii") as f:
                        kib = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
                except (FileNotFoundError, StopIteration):
                    continue  # gone: said by brokers_alive
                self.peak_kib[pid] = max(self.peak_kib[pid], kib)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(5)
        return [round(self.peak_kib[p] / 1024, 1) for p in self.pids]


def probe_dir(base: str, broker_id: int) -> Path:
    d = Path(base) / f"probe-{broker_id}"
    d.mkdir()
    return d


def soak(args: argparse.Namespace) -> dict[str, Any]:
    """The run; its brokers' files (gigabytes over ten minutes) removed after it."""
    base = tempfile.mkdtemp(prefix="kafka-soak-")
    try:
        return run_phases(base, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_phases(base: str, args: argparse.Namespace) -> dict[str, Any]:
    with stub_cluster(base, 2, num_dirs=2, settings=SETTINGS) as sc:
        sc.loop.run(sc.ctl.create_topic(TOPIC, PARTITIONS, 2, min_isr=2))
        sc.loop.run(sc.ctl.create_topic(NOISE, 1, 2))
        bootstrap = sc.cluster.bootstrap_servers
        pids = [b.proc.pid for b in sc.cluster.brokers if b.proc is not None]
        producer = CountingKafkaProducer(bootstrap, args.rate)
        consumer = TailingConsumer(bootstrap)
        producer.start()
        consumer.start()
        log(f"baseline for {args.baseline_s} s")
        time.sleep(args.baseline_s)
        producer.phase = "attack"
        rss = RssWatch(pids)
        probes = [ReadyzProbe(b.url, probe_dir(base, b.broker_id)) for b in sc.cluster.brokers]
        log(f"attack for {args.attack_s} s, {args.clients} clients")
        attackers = subprocess.run(
            [
                sys.executable,
                __file__,
                "--attack",
                sc.cluster[0].kafka_endpoint,
                "--attack-s",
                str(args.attack_s),
                "--clients",
                str(args.clients),
            ],
            capture_output=True,
            text=True,
            timeout=args.attack_s + 300,
        )
        if attackers.returncode != 0:
            raise RuntimeError(f"the attackers failed:\n{attackers.stderr[-3000:]}")
        readyz = [max(p.finish()) for p in probes]
        peaks = rss.stop()
        producer.phase = "after"
        producer.stop()
        consumer.catch_up()
        alive = all(b.alive for b in sc.cluster.brokers)
    try:
        verify(producer.acked, consumer.read)
        verified, problem = True, None
    except AssertionError as e:
        verified, problem = False, str(e)
    lat = producer.latencies
    out: dict[str, Any] = {
        "bench": "kafka_soak",
        "baseline_s": args.baseline_s,
        "attack_s": args.attack_s,
        "clients": args.clients,
        "rate_per_s": args.rate,
        "acked": sum(len(v) for v in producer.acked.values()),
        "read": sum(len(v) for v in consumer.read.values()),
        "failed_sends": dict(producer.failed),
        "verified_exactly_once_in_order": verified,
        "problem": problem,
        "brokers_alive": alive,
    }
    for phase in ("baseline", "attack"):
        out[f"produce_p50_ms_{phase}"] = round(percentile(lat.get(phase, []), 0.5) * 1000, 1)
        out[f"produce_p99_ms_{phase}"] = round(percentile(lat.get(phase, []), 0.99) * 1000, 1)
    out["readyz_worst_ms_attack"] = [round(x * 1000, 1) for x in readyz]
    out["broker_rss_peak_mib_attack"] = peaks
    out["attacks"] = json.loads(attackers.stdout.strip().splitlines()[-1])
    out["loadavg_1m_end"] = os.getloadavg()[0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 s baseline, 40 s attack")
    ap.add_argument("--baseline-s", type=float, default=120)
    ap.add_argument("--attack-s", type=float, default=600)
    ap.add_argument("--clients", type=int, default=CLIENTS)
    ap.add_argument("--rate", type=int, default=500, help="counting producer records/s")
    ap.add_argument("--attack", metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.attack:
        print(json.dumps(asyncio.run(attack(args.attack, args.attack_s, args.clients, 36))))
        return
    if args.quick:
        args.baseline_s, args.attack_s = 20.0, 40.0
    out = soak(args)
    print(json.dumps(out))
    if not (out["verified_exactly_once_in_order"] and out["brokers_alive"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
