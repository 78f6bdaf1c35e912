"""Produce and consume throughput through the broker's HTTP API, against the storage engine.

Three measurements in one run, on the same machine, with the same pre-built batches (16 records
of 1 KiB each, 16,707 bytes per RecordBatch v2; building them is the producer's work, so it
happens before any clock starts):

- storage: ``Log.append_as_leader`` of the batches in this process (as bench/log_append.py),
  no fsync while appending (the broker does not fsync per request either; its flusher runs every
  ``log.flush.scheduler.interval.ms``), then one fsync, timed separately.
- rf1: one broker process (``python -m jbod_broker``, LocalCluster) with no controller, so it
  applies ISR changes itself; the bench sends it LeaderAndIsr. Replication factor 1, acks=all
  (which for a one-replica ISR is acknowledged right after the append, like acks=1).
- rf3: three broker processes and tests/integration/controller_stub.ControllerStub as the
  controller; replication factor 3, min.insync.replicas=2, acks=all (acknowledged when the
  high watermark passes the batch, i.e. when every ISR member has it). Leaders are spread over
  the brokers, as Kafka's assignment does.

The client is one aiohttp session (keep-alive) with ``--producers`` coroutines, each keeping
one produce request (one batch, as Kafka's producer sends one batch per partition per request)
in flight, cycling over the partitions. Consumers are one coroutine per partition fetching
``--fetch-bytes`` per request from offset 0 to the high watermark, after the produce phase
(page cache warm). A warm-up topic is written first so connections and code paths are warm.

MB means MiB (2**20 bytes), as in bench/log_append.py. Nothing is asserted about speed: this is
the baseline. ``api_to_storage_ratio`` = produce_mb_s_rf1 / storage_append_mb_s. Broker CPU is
read from /proc (1.0 = one core busy for the whole phase); ``*_mb_per_broker_cpu_s`` and
``api_to_storage_cpu_ratio`` give the same comparison as cost per byte, which holds up far better
than MB/s when other work shares the machine. A produce phase stops at ``--max-secs`` (the JSON
then says ``produce_capped_*``), so ``--quick`` stays under a minute on a busy machine.

``--profile DIR`` adds runs with broker 0 under cProfile, timed by its event-loop thread's CPU
time (rf1, and rf3 where it leads a third of the partitions), and prints its top costs on stderr
and in the JSON; those runs are slowed by the profiler and are not the baseline. The machine
may be shared: the JSON carries the load average at the start and the end, so a run disturbed
by other work can be told apart.

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
from yarl import URL

from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalBroker, LocalCluster, lead_alone
from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, iter_batches
from tests.integration.controller_stub import ControllerStub
from tests.proc_cpu import total_cpu_seconds

MiB = 1024 * 1024
RECORD_BYTES = 1024
BATCH_RECORDS = 16
TOPIC = "bench"
WARMUP_TOPIC = "warmup"


def log(msg: str) -> None:
    print(f"[broker_throughput] {msg}", file=sys.stderr, flush=True)


def make_batches(count: int) -> list[bytes]:
    out = []
    for i in range(count):
        payload = os.urandom(RECORD_BYTES)
        records = [(b"key-%d-%d" % (i, j), payload) for j in range(BATCH_RECORDS)]
        out.append(build_batch(records))
    return out


def mb_s(nbytes: int, secs: float) -> float:
    return nbytes / MiB / secs if secs > 0 else 0.0


# -- storage engine, in process -------------------------------------------------------------


def storage_append(
    base: str, batches: Sequence[bytes], total: int
) -> tuple[float, float, int, float]:
    """Seconds appending ``total`` bytes, seconds for the final fsync, bytes appended, and the
    CPU seconds the appends took."""
    d = tempfile.mkdtemp(prefix="storage-", dir=base)
    lg = Log.create(
        os.path.join(d, "bench-0"),
        TopicPartition("bench", 0),
        LogConfig(),
        LogDirFailureChannel(),
        log_dir=d,
    )
    try:
        n = len(batches)
        written = i = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        while written < total:
            written += lg.append_as_leader(batches[i % n], 1).size_in_bytes
            i += 1
        t1 = time.perf_counter()
        cpu = time.process_time() - c0
        lg.flush()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, written, cpu
    finally:
        lg.close()
        shutil.rmtree(d, ignore_errors=True)


# -- the API --------------------------------------------------------------------------------


@dataclass
class Target:
    tp: TopicPartition
    leader_url: str

    def produce_url(self, acks: int) -> URL:
        return URL(
            f"{self.leader_url}/v1/data/produce?topic={self.tp.topic}"
            f"&partition={self.tp.partition}&acks={acks}&timeout_ms=30000",
            encoded=True,
        )

    def fetch_url(self, offset: int, max_bytes: int) -> URL:
        return URL(
            f"{self.leader_url}/v1/data/fetch?topic={self.tp.topic}"
            f"&partition={self.tp.partition}&offset={offset}&max_bytes={max_bytes}",
            encoded=True,
        )


@dataclass
class PhaseResult:
    secs: float = 0.0
    nbytes: int = 0
    records: int = 0
    requests: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    broker_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    capped: bool = False
    """The produce phase hit --max-secs before writing every byte asked for."""

    def rate(self) -> float:
        return mb_s(self.nbytes, self.secs)

    def summary(self, suffix: str, kind: str) -> dict[str, object]:
        out: dict[str, object] = {
            f"{kind}_mb_s_{suffix}": round(mb_s(self.nbytes, self.secs), 2),
            f"{kind}_records_s_{suffix}": round(self.records / self.secs if self.secs else 0.0),
            f"{kind}_requests_s_{suffix}": round(self.requests / self.secs if self.secs else 0.0),
            f"{kind}_bytes_{suffix}": self.nbytes,
            **({f"{kind}_capped_{suffix}": True} if self.capped else {}),
            f"{kind}_secs_{suffix}": round(self.secs, 3),
            f"{kind}_broker_cpu_{suffix}": round(self.broker_cpu_s / self.secs, 2)
            if self.secs
            else 0.0,
            f"{kind}_client_cpu_{suffix}": round(self.client_cpu_s / self.secs, 2)
            if self.secs
            else 0.0,
        }
        if self.broker_cpu_s > 0:
            # Cost rather than speed: MiB moved per CPU-second of the broker processes. Much
            # less sensitive than MB/s to other work sharing the machine.
            out[f"{kind}_mb_per_broker_cpu_s_{suffix}"] = round(
                self.nbytes / MiB / self.broker_cpu_s, 2
            )
        if self.latencies_ms:
            lat = sorted(self.latencies_ms)
            out[f"{kind}_p50_ms_{suffix}"] = round(statistics.median(lat), 2)
            out[f"{kind}_p99_ms_{suffix}"] = round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2)
            out[f"{kind}_max_ms_{suffix}"] = round(lat[-1], 2)
        return out


async def produce(
    session: aiohttp.ClientSession,
    targets: Sequence[Target],
    batches: Sequence[bytes],
    total: int,
    producers: int,
    pids: Sequence[int],
    *,
    acks: int = -1,
    timeout_s: float = 600,
) -> PhaseResult:
    """``producers`` coroutines, one request in flight each, until ``total`` bytes are acked."""
    urls = [t.produce_url(acks) for t in targets]
    headers = {"Content-Type": "application/octet-stream"}
    res = PhaseResult()
    claimed = 0
    deadline = time.monotonic() + timeout_s

    async def one(k: int) -> None:
        nonlocal claimed
        j = 0
        while claimed < total and time.monotonic() < deadline:
            batch = batches[(k * 7 + j) % len(batches)]
            claimed += len(batch)
            url = urls[(k + j) % len(urls)]
            j += 1
            t0 = time.perf_counter()
            async with session.post(url, data=batch, headers=headers) as r:
                body = await r.read()
                if r.status != 200:
                    raise RuntimeError(f"produce {url}: HTTP {r.status}: {body[:300]!r}")
            res.latencies_ms.append((time.perf_counter() - t0) * 1000)
            res.nbytes += len(batch)
            res.records += BATCH_RECORDS
            res.requests += 1

    cpu0 = total_cpu_seconds(pids)
    c0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(producers)))
    res.secs = time.perf_counter() - t0
    res.client_cpu_s = time.process_time() - c0
    res.broker_cpu_s = total_cpu_seconds(pids) - cpu0
    return res


async def consume(
    session: aiohttp.ClientSession,
    targets: Sequence[Target],
    fetch_bytes: int,
    expect_records: int,
    pids: Sequence[int],
) -> PhaseResult:
    """One coroutine per partition reads it from offset 0 to its high watermark."""
    res = PhaseResult()

    async def one(t: Target) -> None:
        offset = 0
        hw = None
        while hw is None or offset < hw:
            t0 = time.perf_counter()
            async with session.get(t.fetch_url(offset, fetch_bytes)) as r:
                data = await r.read()
                if r.status != 200:
                    raise RuntimeError(f"fetch {t.tp}: HTTP {r.status}: {data[:300]!r}")
                hw = int(r.headers["X-High-Watermark"])
            res.latencies_ms.append((time.perf_counter() - t0) * 1000)
            if not data:
                break
            last = None
            for _pos, h in iter_batches(data):
                res.records += h.records_count
                last = h
            assert last is not None
            offset = last.next_offset
            res.nbytes += len(data)
            res.requests += 1

    cpu0 = total_cpu_seconds(pids)
    c0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(one(t) for t in targets))
    res.secs = time.perf_counter() - t0
    res.client_cpu_s = time.process_time() - c0
    res.broker_cpu_s = total_cpu_seconds(pids) - cpu0
    if res.records != expect_records:
        raise RuntimeError(f"consumed {res.records} records, acknowledged {expect_records}")
    return res


async def run_phases(
    targets: list[Target],
    warmup: list[Target],
    batches: Sequence[bytes],
    total: int,
    args: argparse.Namespace,
    pids: Sequence[int],
    token: str,
) -> tuple[PhaseResult, PhaseResult]:
    conn = aiohttp.TCPConnector(limit=0, limit_per_host=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=120)
    # The data path needs the brokers' token (issue 14).
    auth = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=conn, timeout=timeout, headers=auth) as session:
        await produce(session, warmup, batches, args.warmup_mib * MiB, args.producers, pids)
        p = await produce(
            session, targets, batches, total, args.producers, pids, timeout_s=args.max_secs
        )
        p.capped = p.nbytes < total
        c = await consume(session, targets, args.fetch_bytes, p.records, pids)
    return p, c


def broker_pids(brokers: Sequence[LocalBroker]) -> list[int]:
    return [b.proc.pid for b in brokers if b.proc is not None]


PROFILED_MAIN = """
import cProfile, runpy, sys, time
out, config = sys.argv[1], sys.argv[2]
sys.argv = ["jbod_broker", "--config", config]
# CPU time of the event-loop thread, not wall time: on a shared machine wall time charges
# preemption to whatever call was running (typically socket.send on loopback).
prof = cProfile.Profile(time.thread_time)
try:
    prof.runcall(runpy.run_module, "jbod_broker", run_name="__main__", alter_sys=True)
except SystemExit as e:
    code = e.code
else:
    code = 0
finally:
    prof.dump_stats(out)
sys.exit(code)
"""


def start_profiled(b: LocalBroker, out: str, *, wait: bool = True) -> None:
    """LocalBroker.start, with the broker's event-loop thread under cProfile (CPU time)."""
    b.write_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JBOD_")}
    with open(b.log_path, "ab") as logf:
        b.proc = subprocess.Popen(
            [sys.executable, "-c", PROFILED_MAIN, out, b.config_path],
            stdout=logf,
            stderr=logf,
            env=env,
        )
    if wait:
        b.wait_ready()


async def bench_rf1(
    base: str,
    batches: Sequence[bytes],
    total: int,
    args: argparse.Namespace,
    profile_out: str | None = None,
) -> tuple[PhaseResult, PhaseResult]:
    cluster = LocalCluster(
        os.path.join(base, "rf1"), size=1, num_dirs=args.log_dirs, settings=args.settings
    )
    b = cluster[0]
    if profile_out:
        start_profiled(b, profile_out)
    else:
        cluster.start()
    try:
        async with BrokerClient(b.url, token=cluster.token) as client:
            await lead_alone(client, TOPIC, args.partitions)
            await lead_alone(client, WARMUP_TOPIC, args.partitions)
        targets = [Target(TopicPartition(TOPIC, p), b.url) for p in range(args.partitions)]
        warmup = [Target(TopicPartition(WARMUP_TOPIC, p), b.url) for p in range(args.partitions)]
        return await run_phases(
            targets, warmup, batches, total, args, broker_pids([b]), cluster.token
        )
    finally:
        rc = b.stop()
        if rc != 0:
            log(f"rf1 broker exited with {rc}:\n{b.tail()}")
        shutil.rmtree(cluster.base_dir, ignore_errors=True)


async def bench_rf3(
    base: str,
    batches: Sequence[bytes],
    total: int,
    args: argparse.Namespace,
    profile_out: str | None = None,
) -> tuple[PhaseResult, PhaseResult]:
    ctl = ControllerStub()
    await ctl.start()
    cluster = LocalCluster(
        os.path.join(base, "rf3"),
        size=3,
        num_dirs=args.log_dirs,
        controller_url=ctl.url,
        settings=args.settings,
    )
    ctl.cluster = cluster
    try:
        if profile_out:  # broker 0: leader of a third of the partitions, follower of the rest
            start_profiled(cluster[0], profile_out, wait=False)
            for b in cluster.brokers[1:]:
                b.start(wait=False)
            for b in cluster.brokers:
                b.wait_ready()
        else:
            cluster.start()
        tps = await ctl.create_topic(TOPIC, args.partitions, 3, min_isr=2)
        wtps = await ctl.create_topic(WARMUP_TOPIC, args.partitions, 3, min_isr=2)

        def target(tp: TopicPartition) -> Target:
            return Target(tp, cluster[ctl.leader_of(tp)].url)

        p, c = await run_phases(
            [target(tp) for tp in tps],
            [target(tp) for tp in wtps],
            batches,
            total,
            args,
            broker_pids(cluster.brokers),
            cluster.token,
        )
        shrinks = [r for r in ctl.alter_requests if r.partitions]
        if shrinks:
            log(f"rf3: {len(shrinks)} AlterPartition request(s) during the run (ISR changes)")
        return p, c
    finally:
        for b in cluster.brokers:
            rc = b.stop()
            if rc != 0:
                log(f"rf3 broker {b.broker_id} exited with {rc}:\n{b.tail()}")
        await ctl.stop()
        shutil.rmtree(cluster.base_dir, ignore_errors=True)


def profile_top(path: str, n: int = 20) -> list[dict[str, object]]:
    stats = pstats.Stats(path, stream=io.StringIO())
    rows = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            (tt, ct, nc, f"{os.path.relpath(file) if '/' in file else file}:{line}({func})")
        )
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    return [
        {
            "func": name,
            "tottime_s": round(tt, 3),
            "share": round(tt / total, 3),
            "cumtime_s": round(ct, 3),
            "calls": nc,
        }
        for tt, ct, nc, name in rows[:n]
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="128 MiB per configuration instead of 512 MiB"
    )
    ap.add_argument("--mib", type=int, default=None, help="MiB produced per configuration")
    ap.add_argument("--producers", type=int, default=8, help="produce requests in flight")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--log-dirs", type=int, default=3, help="log dirs per broker")
    ap.add_argument("--fetch-bytes", type=int, default=2 * MiB, help="max_bytes per fetch")
    ap.add_argument("--warmup-mib", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None, help="storage-engine rounds (best of)")
    ap.add_argument("--skip-rf3", action="store_true")
    ap.add_argument(
        "--max-secs",
        type=float,
        default=None,
        help="stop a produce phase after this long (quick: 12, full: 150); the JSON says so",
    )
    ap.add_argument(
        "--profile", metavar="DIR", default=None, help="also profile broker 0 (rf1, rf3)"
    )
    ap.add_argument("--dir", default=None, help="where brokers and logs live (default: temp)")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting for every broker (repeatable); the baseline uses none",
    )
    args = ap.parse_args()
    args.settings = dict(kv.split("=", 1) for kv in args.set)
    mib = args.mib or (128 if args.quick else 512)
    total = mib * MiB
    if args.warmup_mib is None:
        args.warmup_mib = 4 if args.quick else 16
    rounds = args.rounds or (2 if args.quick else 3)
    if args.max_secs is None:
        args.max_secs = 12.0 if args.quick else 150.0
    batches = make_batches(64)
    batch_bytes = len(batches[0])

    load_start = os.getloadavg()
    base = tempfile.mkdtemp(prefix="bench-broker-", dir=args.dir)
    result: dict[str, object] = {}
    try:
        storage = []
        for _ in range(rounds):
            storage.append(storage_append(base, batches, total))
        append_s, fsync_s, written, _ = min(storage)
        storage_mb_s = mb_s(written, append_s)
        storage_mb_cpu_s = max(mb_s(w, cpu) for _, _, w, cpu in storage)
        log(f"storage append {storage_mb_s:.1f} MB/s (fsync after: {fsync_s:.2f}s)")

        p1, c1 = asyncio.run(bench_rf1(base, batches, total, args))
        log(f"rf1 produce {p1.rate():.1f} MB/s, consume {c1.rate():.1f} MB/s")
        result.update(p1.summary("rf1", "produce"))
        result.update(c1.summary("rf1", "consume"))
        if not args.skip_rf3:
            p3, c3 = asyncio.run(bench_rf3(base, batches, total, args))
            log(f"rf3 produce {p3.rate():.1f} MB/s, consume {c3.rate():.1f} MB/s")
            result.update(p3.summary("rf3", "produce"))
            result.update(c3.summary("rf3", "consume"))
        if args.profile:
            os.makedirs(args.profile, exist_ok=True)
            profiles: dict[str, object] = {
                "note": "CPU time of broker 0's event-loop thread (cProfile, thread_time); the "
                "profiler slows it"
            }
            runs = [("rf1", bench_rf1)] + ([] if args.skip_rf3 else [("rf3", bench_rf3)])
            for name, fn in runs:
                out = os.path.join(args.profile, f"broker-{name}.pstats")
                pp, _pc = asyncio.run(fn(base, batches, total, args, profile_out=out))
                top = profile_top(out)
                log(f"profiled {name} broker 0: produce {pp.rate():.1f} MB/s; top (tottime):")
                for row in top:
                    log(f"  {row['tottime_s']:>8.3f}s {row['share']:>6.1%}  {row['func']}")
                profiles[name] = {
                    "pstats": out,
                    "produce_mb_s_profiled": round(pp.rate(), 2),
                    "top_tottime": top,
                }
            result["profile"] = profiles
    finally:
        shutil.rmtree(base, ignore_errors=True)

    summary = {
        "bench": "broker_throughput",
        "units": "mb = MiB (2**20 bytes); cpu = cores busy over the phase",
        "bytes_per_config": total,
        "record_bytes": RECORD_BYTES,
        "batch_records": BATCH_RECORDS,
        "batch_bytes": batch_bytes,
        "batches_per_request": 1,
        "partitions": args.partitions,
        "log_dirs_per_broker": args.log_dirs,
        "producer_concurrency": args.producers,
        "broker_settings": args.settings,
        "consumer_concurrency": args.partitions,
        "fetch_max_bytes": args.fetch_bytes,
        "acks_rf1": "all (-1); a one-replica ISR acknowledges after the append, as acks=1",
        "acks_rf3": "all (-1), min.insync.replicas=2, ISR of 3",
        "client": "one aiohttp session, keep-alive, same machine",
        "cpus": os.cpu_count(),
        "loadavg_1m_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "flush_policy": "broker: periodic flusher only; storage: no fsync while appending",
        "page_cache": "warm (consumers read right after producing)",
        "storage_append_mb_s": round(storage_mb_s, 2),
        "storage_append_mb_per_cpu_s": round(storage_mb_cpu_s, 2),
        "storage_append_records_s": round(written / batch_bytes * BATCH_RECORDS / append_s),
        "storage_fsync_s": round(fsync_s, 3),
        "storage_rounds": rounds,
        **result,
    }
    summary["api_to_storage_ratio"] = round(p1.rate() / storage_mb_s, 4)
    if p1.broker_cpu_s > 0:
        # The same ratio in CPU cost (MiB per CPU-second): 1.0 would mean the API costs nothing
        # beyond the storage engine's own work.
        summary["api_to_storage_cpu_ratio"] = round(
            p1.nbytes / MiB / p1.broker_cpu_s / storage_mb_cpu_s, 4
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
