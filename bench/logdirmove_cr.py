"""A LogDirMove through the resource against the broker's own move engine (issue 7).

What the operator adds to a move: the same data moved between two log dirs in one run by

(a) ``cr_seconds``: Kubernetes. The real API server (tests.kube_cluster, binaries from
    ``make kube-bins``), the operator process and one local broker with log dirs a and b
    (e2e.scenario.Scenario). A Topic of ``--partitions`` partitions (rf 1) is filled over HTTP
    with ~1 MiB batches (16 records of 64 KiB less a little: the broker's default
    message.max.bytes is 1 MiB + 12 B); then one LogDirMove, unthrottled, moves every partition
    to the broker's other dir. Timed from the start of the apply (a server-side apply, the one
    PATCH that ``kubectl apply --server-side`` sends, made straight to the API server so that the
    figure holds the operator and not the start-up of a kubectl process; a kubectl apply is
    timed beside it as ``kubectl_apply_dry_run``) to the moment a watch
    on the API server (opened before the apply) sees phase Succeeded, which the operator writes
    only after describe-log-dirs shows every replica in its target dir (KIP-113 "verify").
(b) ``engine_seconds``: the broker's engine alone. An in-process jbod_broker.storage LogManager
    and jbod_broker.move ReplicaMoveEngine built as the broker builds them (one worker per log
    dir, the broker's log config) over two dirs under the same work directory (the same
    filesystem as the broker's dirs), holding the same batches in the same layout (the same
    partitions in the same source dirs, the same segment size). Timed from the alter requests
    to every move Done.

``cr_to_engine_ratio`` = engine_seconds / cr_seconds (target >= 0.9: the operator adds little).
The operator long-polls the brokers (describe-replica-log-dirs ``wait_ms``, at most
JBOD_OPERATOR_MOVE_POLL_SECONDS, ``poll_seconds``, 0.2 by default here), so it verifies a move
when the broker's engine finishes it, not on its next poll. maxConcurrentMovesPerBroker
is the partition count, so that the broker's engine gets every move at once, as in (b).
``cr_breakdown_median_seconds`` splits (a) with the broker's log: apply to the first move
queued on the broker, the broker's own move (first queued to last done), last done to
Succeeded seen. ``operator_overhead_seconds`` (cr seconds less the broker's own move window, in
the same run) and ``broker_move_to_cr_ratio`` are the same comparison paired within each run,
so free of the disk's run-to-run noise, which at these sizes is larger than the overhead.

Both sides read warm page cache by default (the data was just written; ``sync`` before each
timed move); ``--cold`` drops it first (``drop_caches``, else ``posix_fadvise(DONTNEED)``).
Repetitions move the data back and forth and alternate which side goes first; medians compared.
Prints one JSON object as its last line (progress goes to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Collection
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.logdir_move import drop_caches
from e2e.scenario import Scenario
from jbod_broker.move import MoveState, ReplicaMoveEngine
from jbod_broker.storage.log import LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from jbod_broker.wire import log_dir_folder, log_dir_short_name
from jbod_operator.models.log_dir_move import ENDED_PHASES as FINAL
from tests.kube_cluster import KubeCluster

REPO = Path(__file__).resolve().parents[1]

MiB = 1024 * 1024
MESSAGE_MAX_BYTES = 1048588  # the broker's default message.max.bytes (Kafka's)
SEGMENT_BYTES = 64 * MiB
TOPIC = "bench"
NS = "ldm-bench"


def log(msg: str) -> None:
    print(f"[logdirmove_cr] {msg}", file=sys.stderr, flush=True)


def big_batch() -> bytes:
    """16 records of ~64 KiB: the largest such batch the broker's message.max.bytes allows."""
    batch = build_batch([(None, b"m" * (64 * 1024 - 128))] * 16)
    assert len(batch) <= MESSAGE_MAX_BYTES, len(batch)
    return batch


def other(d: str) -> str:
    return "b" if d == "a" else "a"


def wall(ts: str) -> float:
    """A broker log timestamp (``2024-05-01T10:00:00.123Z``) as epoch seconds."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


# -- what the benches that time a resource share (bench/reassignment.py too): the apply made
# straight to the API server and a watch opened before it, so that a figure holds the operator
# and not the start-up of a kubectl process or the period of a poller.

GROUP = "/apis/jbod.io/v1alpha1"


def _open(kc: KubeCluster, req: urllib.request.Request | str, timeout: float) -> Any:
    if isinstance(req, str):
        req = urllib.request.Request(kc.server + req)
    req.add_header("Authorization", f"Bearer {kc.token}")
    ctx = ssl.create_default_context(cafile=str(kc.ca_file))
    return urllib.request.urlopen(req, timeout=timeout, context=ctx)


class PhaseWatch(threading.Thread):
    """Watches one kind in one namespace on the API server, opened before the apply, so that a
    final phase is seen when it is written (not when a poller or a kubectl process gets to
    it). ``at`` is the monotonic time it was seen."""

    def __init__(
        self, kc: KubeCluster, ns: str, plural: str, name: str, final: Collection[str]
    ) -> None:
        super().__init__(daemon=True)
        self.kc, self.base, self.name = kc, f"{GROUP}/namespaces/{ns}/{plural}", name
        self.final = frozenset(str(p) for p in final)
        self.ready = threading.Event()
        self.done = threading.Event()
        self.phase: str | None = None
        self.at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with _open(self.kc, self.base, 10) as resp:
                rv = json.loads(resp.read())["metadata"]["resourceVersion"]
            with _open(self.kc, f"{self.base}?watch=1&resourceVersion={rv}", 900) as resp:
                self.ready.set()
                for line in resp:
                    obj = json.loads(line)["object"]
                    phase = (obj.get("status") or {}).get("phase")
                    if obj["metadata"]["name"] == self.name and phase in self.final:
                        self.at = time.monotonic()
                        self.phase = phase
                        return
        except BaseException as e:  # reported by wait()
            self.error = e
        finally:
            self.ready.set()
            self.done.set()

    def wait(self, timeout: float) -> tuple[str | None, float]:
        if not self.done.wait(timeout):
            raise TimeoutError(f"{self.name}: no final phase after {timeout}s")
        if self.error is not None:
            raise RuntimeError(f"watching {self.name} failed: {self.error!r}")
        return self.phase, self.at


def server_side_apply(kc: KubeCluster, ns: str, plural: str, obj: dict[str, Any]) -> None:
    """What ``kubectl apply --server-side`` sends, straight to the API server: one PATCH."""
    name = obj["metadata"]["name"]
    req = urllib.request.Request(
        f"{kc.server}{GROUP}/namespaces/{ns}/{plural}/{name}?fieldManager=bench&force=true",
        data=json.dumps(obj).encode(),  # JSON is YAML
        method="PATCH",
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    with _open(kc, req, 30) as resp:
        if resp.status not in (200, 201):
            raise RuntimeError(f"apply {name}: HTTP {resp.status}")


def kubectl_apply_seconds(kc: KubeCluster, obj: dict[str, Any]) -> float:
    """Context only: a kubectl apply (server dry run, so nothing is created) from start to exit."""
    start = time.monotonic()
    kc.kubectl("apply", "--dry-run=server", "-n", NS, "-f", "-", input=json.dumps(obj), check=True)
    return time.monotonic() - start


# -- (b) the engine alone ---------------------------------------------------------------------


class EngineSide:
    def __init__(self, root: str, layout: dict[int, str], batches: int, batch: bytes) -> None:
        self.dirs = {n: os.path.join(root, log_dir_folder(n)) for n in ("a", "b")}
        self.layout = dict(layout)  # partition -> the dir it is in now
        self.lm = LogManager(
            list(self.dirs.values()),
            broker_id=0,
            default_config=LogConfig(
                segment_bytes=SEGMENT_BYTES, max_message_bytes=MESSAGE_MAX_BYTES
            ),
        )
        self.lm.startup()
        self.engine = ReplicaMoveEngine(self.lm)  # one worker per log dir, as in the broker
        for p, d in self.layout.items():
            tp = TopicPartition(TOPIC, p)
            self.lm.set_preferred_dir(tp, self.dirs[d])
            lg = self.lm.get_or_create_log(tp, is_new=True)
            for _ in range(batches):
                lg.append_as_leader(batch, 1)
            lg.update_high_watermark(lg.log_end_offset)
            lg.flush()

    @property
    def size(self) -> int:
        return sum(lg.size for lg in self.lm.current_logs().values())

    def move(self, cold: bool) -> float:
        """Every partition to its other dir; seconds from the alters to all Done."""
        os.sync()
        if cold:
            drop_caches(list(self.dirs.values()))
        start = time.monotonic()
        for p, d in self.layout.items():
            self.engine.alter_replica_log_dir(TopicPartition(TOPIC, p), self.dirs[other(d)])
        infos = self.engine.wait_all(600)
        elapsed = time.monotonic() - start
        bad = [i for i in infos if i.state is not MoveState.DONE]
        if bad:
            raise RuntimeError(f"engine move failed: {bad}")
        self.layout = {p: other(d) for p, d in self.layout.items()}
        self.engine.run_deletions()
        return elapsed

    def close(self) -> None:
        self.engine.shutdown()
        self.lm.shutdown()


# -- (a) through the resource -----------------------------------------------------------------


class CrSide:
    def __init__(
        self, kc: KubeCluster, work: Path, partitions: int, poll: float, max_concurrent: int
    ) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.kc = kc
        self.partitions = partitions
        self.max_concurrent = max_concurrent
        self.sc = Scenario(
            kc,
            work,
            NS,
            brokers=1,
            dirs=("a", "b"),
            operator_env={"JBOD_OPERATOR_MOVE_POLL_SECONDS": str(poll)},
            broker_settings={
                "log.segment.bytes": str(SEGMENT_BYTES),
                # The broker's defaults, not the e2e scenario's fast test values: a flush of
                # every log each second (future copies included) is not what a broker does.
                "log.flush.scheduler.interval.ms": "5000",
                "replica.high.watermark.checkpoint.interval.ms": "5000",
            },
        )
        self.tps: list[TopicPartition] = []
        self.runs = 0

    def start(self) -> None:
        self.sc.start()
        self.tps = self.sc.create_topic(TOPIC, partitions=self.partitions, rf=1, min_isr=1)

    def layout(self) -> dict[int, str]:
        """partition -> the dir it is in, from the Topic status."""
        return {tp.partition: log_dir_short_name(self.sc.replica_dir(tp, 0)) for tp in self.tps}

    async def fill(self, batches: int, batch: bytes) -> None:
        client = self.sc.client(0)

        async def one(tp: TopicPartition) -> None:
            for _ in range(batches):
                await client.produce(tp.topic, tp.partition, batch, acks=-1)

        await asyncio.gather(*(one(tp) for tp in self.tps))
        await self.sc.close_clients()

    def size(self) -> int:
        """Bytes of the topic's segments on the broker's disks."""
        assert self.sc.brokers is not None
        total = 0
        for d in self.sc.brokers[0].log_dirs:
            for root, _, files in os.walk(d):
                if os.path.basename(root).startswith(TOPIC + "-"):
                    total += sum(
                        os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".log")
                    )
        return total

    def move(self, cold: bool) -> dict[str, float]:
        """Every partition to its other dir through a LogDirMove. ``seconds``: the start of
        apply to Succeeded seen; ``apply``: the server-side apply alone; ``to_first_alter``:
        apply to the broker queueing the first move; ``broker_move``: first move queued to last
        done (broker log); ``to_succeeded``: last move done to Succeeded seen."""
        assert self.sc.brokers is not None
        self.runs += 1
        name = f"move-{self.runs}"
        moves = [
            {"brokerId": 0, "topic": TOPIC, "partition": p, "logDir": other(d)}
            for p, d in self.layout().items()
        ]
        obj = {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "LogDirMove",
            "metadata": {"name": name},
            "spec": {
                "clusterName": "kip",
                "moves": moves,
                "maxConcurrentMovesPerBroker": self.max_concurrent,
            },
        }
        os.sync()
        if cold:
            drop_caches(self.sc.brokers[0].log_dirs)
        watch = PhaseWatch(self.kc, NS, "logdirmoves", name, FINAL)
        watch.start()
        watch.ready.wait(30)
        wall_start, start = time.time(), time.monotonic()
        server_side_apply(self.kc, NS, "logdirmoves", obj)
        applied = time.monotonic() - start
        phase, at = watch.wait(600)
        elapsed = at - start
        if phase != "Succeeded":
            st = (self.sc.kube.get("logdirmove", name) or {}).get("status") or {}
            raise RuntimeError(f"{name} ended {phase}: {json.dumps(st)[:2000]}")
        queued, finished = self.broker_window(wall_start)
        # The Topic status follows the move (the operator records it); the next run moves back.
        want = {m["partition"]: m["logDir"] for m in moves}
        deadline = time.monotonic() + 30
        while self.layout() != want and time.monotonic() < deadline:
            time.sleep(0.1)
        return {
            "seconds": elapsed,
            "apply": applied,
            "kubectl_apply_dry_run": kubectl_apply_seconds(self.kc, obj),
            "to_first_alter": queued - wall_start,
            "broker_move": finished - queued,
            "to_succeeded": wall_start + elapsed - finished,
        }

    def direct_move(self) -> float:
        """The same moves asked of the broker directly, as Kafka's tools would: one
        alter-replica-log-dirs, then describe-replica-log-dirs long-polls until every move is
        Done. Seconds from the alter to the answer showing the last one Done. The data is then
        moved back the same way (not timed), so the resource side finds it where its Topic
        status says."""
        assert self.sc.brokers is not None
        dirs = self.sc.brokers[0].log_dirs
        start_layout = self.layout()

        def path(name: str) -> str:
            return next(d for d in dirs if log_dir_short_name(d) == name)

        async def move(targets: dict[int, str]) -> float:
            client = self.sc.client(0)
            start = time.monotonic()
            resp = await client.alter_replica_log_dirs(
                [(TOPIC, p, path(d)) for p, d in targets.items()]
            )
            if any(r.error for r in resp.partitions):
                raise RuntimeError(f"direct alter refused: {resp}")
            running = [(TOPIC, p) for p in targets]
            while running:
                r = await client.describe_replica_log_dirs(running, wait_ms=10_000)
                bad = [i for i in r.partitions if i.state in ("Failed", "Cancelled", "None")]
                if bad:
                    raise RuntimeError(f"direct move ended badly: {bad}")
                running = [(TOPIC, i.partition) for i in r.partitions if i.state != "Done"]
            elapsed = time.monotonic() - start
            await self.sc.close_clients()
            return elapsed

        os.sync()
        took = asyncio.run(move({p: other(d) for p, d in start_layout.items()}))
        asyncio.run(move(start_layout))
        return took

    def broker_window(self, since: float) -> tuple[float, float]:
        """(first move queued, last move done) after ``since``, from the broker's JSON log."""
        assert self.sc.brokers is not None
        queued: list[float] = []
        done: list[float] = []
        with open(self.sc.brokers[0].log_path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"replica_move_' not in line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if not str(rec.get("partition", "")).startswith(TOPIC + "-"):
                    continue
                t = wall(rec["ts"])
                if t < since - 0.01:
                    continue
                if rec.get("event") == "replica_move_queued":
                    queued.append(t)
                elif rec.get("event") == "replica_move_finished" and rec.get("state") == "Done":
                    done.append(t)
        if len(queued) != self.partitions or len(done) != self.partitions:
            raise RuntimeError(f"broker log: {len(queued)} moves queued, {len(done)} done")
        return min(queued), max(done)

    def stop(self) -> None:
        self.sc.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="256 MiB, well under a minute")
    ap.add_argument("--size-mib", type=int, default=None, help="default 1024 (quick: 256)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument(
        "--reps", type=int, default=None, help="timed moves per side (default 7, quick 5)"
    )
    ap.add_argument("--poll-seconds", type=float, default=0.2)
    ap.add_argument("--max-concurrent", type=int, default=None, help="default: --partitions")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before each move")
    args = ap.parse_args()
    size = (args.size_mib or (256 if args.quick else 1024)) * MiB
    reps = args.reps or (5 if args.quick else 7)
    partitions = args.partitions
    max_concurrent = args.max_concurrent or partitions
    batch = big_batch()
    batches = max(1, size // partitions // len(batch))
    t0 = time.monotonic()
    loadavg_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="jbod-ldm-cr-bench-", dir="/tmp"))
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", str(work)], capture_output=True, text=True
    ).stdout.strip()
    kc = KubeCluster()
    cr_runs: list[dict[str, float]] = []
    engine_times: list[float] = []
    direct_times: list[float] = []
    # Keep stdout for the JSON line: the harness and the scenario print their logs.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            kc.require_kubectl()
            log("starting the API server, the operator and a broker")
            kc.start()
            cr = CrSide(kc, work / "cr", partitions, args.poll_seconds, max_concurrent)
            engine: EngineSide | None = None
            try:
                cr.start()
                log(f"filling {partitions} partitions with {batches} batches of {len(batch)} B")
                f0 = time.monotonic()
                asyncio.run(cr.fill(batches, batch))
                fill_s = time.monotonic() - f0
                layout = cr.layout()
                engine = EngineSide(str(work / "engine"), layout, batches, batch)
                cr_bytes, engine_bytes = cr.size(), engine.size
                log(f"{cr_bytes} B through the broker in {fill_s:.1f}s; dirs {layout}")
                sides = ("engine", "cr", "direct")
                for rep in range(reps):
                    order = sides[rep % 3 :] + sides[: rep % 3]
                    for side in order:
                        if side == "direct":
                            took = cr.direct_move()
                            direct_times.append(took)
                            log(f"rep {rep} broker direct: {took:.3f}s")
                        elif side == "engine":
                            took = engine.move(args.cold)
                            engine_times.append(took)
                            log(f"rep {rep} engine: {took:.3f}s")
                        else:
                            run = cr.move(args.cold)
                            cr_runs.append(run)
                            parts = ", ".join(f"{k} {v:.3f}s" for k, v in run.items())
                            log(f"rep {rep} cr: {parts}")
                methods = dict(engine.engine.bytes_by_method)
            finally:
                if engine is not None:
                    engine.close()
                cr.stop()
        finally:
            kc.stop()
            shutil.rmtree(work, ignore_errors=True)

    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in cr_runs), 3)

    cr_times = [r["seconds"] for r in cr_runs]
    cr_med = statistics.median(cr_times)
    engine_med = statistics.median(engine_times)
    ratio = engine_med / cr_med
    result = {
        "bench": "logdirmove_cr",
        "quick": args.quick,
        "bytes": cr_bytes,
        "engine_bytes": engine_bytes,
        "partitions": partitions,
        "batch_bytes": len(batch),
        "segment_bytes": SEGMENT_BYTES,
        "brokers": 1,
        "max_concurrent_moves_per_broker": max_concurrent,
        "poll_seconds": args.poll_seconds,
        "reps": reps,
        "cr_seconds": round(cr_med, 3),
        "engine_seconds": round(engine_med, 3),
        "cr_to_engine_ratio": round(ratio, 3),
        "overhead_seconds": round(cr_med - engine_med, 3),
        # The broker process asked directly (what Kafka's tools do): what the resource adds to
        # the same broker's own move, and what the broker process adds to its bare engine.
        "broker_direct_seconds": round(statistics.median(direct_times), 3),
        "cr_to_broker_direct_ratio": round(statistics.median(direct_times) / cr_med, 3),
        "broker_direct_to_engine_ratio": round(engine_med / statistics.median(direct_times), 3),
        # Paired within each run (the broker's own move window from its log): what the operator
        # adds, free of the run-to-run noise of the disk.
        "operator_overhead_seconds": round(
            statistics.median(r["seconds"] - r["broker_move"] for r in cr_runs), 3
        ),
        "broker_move_to_cr_ratio": round(
            statistics.median(r["broker_move"] / r["seconds"] for r in cr_runs), 3
        ),
        "cr_breakdown_median_seconds": {
            "server_side_apply": med("apply"),
            "kubectl_apply_dry_run_not_counted": med("kubectl_apply_dry_run"),
            "apply_to_first_alter": med("to_first_alter"),
            "broker_move": med("broker_move"),
            "last_done_to_succeeded": med("to_succeeded"),
        },
        "cr_seconds_all": [round(t, 3) for t in cr_times],
        "engine_seconds_all": [round(t, 3) for t in engine_times],
        "broker_direct_seconds_all": [round(t, 3) for t in direct_times],
        "cr_mib_per_s": round(cr_bytes / MiB / cr_med, 1),
        "engine_mib_per_s": round(engine_bytes / MiB / engine_med, 1),
        "engine_copy_bytes_by_method": methods,
        "fill_seconds": round(fill_s, 1),
        "cache": "cold (dropped before each timed move)"
        if args.cold
        else "warm (just written; sync before each timed move)",
        "fs": fs or "unknown",
        "target": {"cr_to_engine_ratio": 0.9},
        "meets_target": ratio >= 0.9,
        "loadavg_start": [round(x, 2) for x in loadavg_start],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
