"""Log-dir moves (KIP-113) against ``cp -r``, with and without a producer, and throttle accuracy.

Three measurements in one run, between the same two directories on different filesystems
(a tmpfs the bench mounts under /tmp when it may, else /dev/shm; and the disk under /tmp), so
that neither side can be a reflink, which would flatter the copy:

(a) ``ratio_vs_cp``: an unthrottled move of 1 GiB (``--quick``: 256 MiB) of sealed segments,
    two partitions moved at once by the engine's default two workers (one per log dir), against
    ``cp -r`` of the same partition folders to the same destination filesystem. ``cp_time /
    move_time``: above 1 the move is faster. The move's time runs from the request to the end
    of the swap (future flushed, renamed, checkpointed); deleting the old folder is background
    work and not timed. Page cache is dropped before every timed copy (``drop_caches`` when
    writable, else ``posix_fadvise(DONTNEED)`` on every source file), so both read the source
    cold; the order alternates between repetitions and the medians are compared.
(b) ``ratio_vs_cp_under_load``: the same move while a producer appends to the moving
    partitions at a steady rate (through ``LogManager.get_log``, so it follows the swap),
    against the cp time of (a).
(c) ``throttle_error_pct``: moves throttled at 20 MB/s and 50 MB/s (MB = 10**6 bytes, as the
    setting is bytes/s); the achieved rate is the bytes that went through the throttle divided
    by the time from the request to the end of the swap; the figure is the worst relative error.

Targets: ``ratio_vs_cp`` >= 0.9, ``throttle_error_pct`` <= 5 (reported, not asserted).
Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

from jbod_broker.move import MoveState, ReplicaMoveEngine
from jbod_broker.storage.log import LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition, log_dir_name
from jbod_broker.storage.records import build_batch
from tests.move_helpers import fill

MiB = 1024 * 1024
SEGMENT_BYTES = 32 * MiB
PARTITIONS = 2
THROTTLE_RATES = (20_000_000, 50_000_000)


def log(msg: str) -> None:
    print(f"[logdir_move] {msg}", file=sys.stderr, flush=True)


def fs_type(path: str) -> str:
    """The filesystem type of the mount holding ``path`` (from /proc/self/mounts)."""
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1].replace("\\040", " ")
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, kind = mnt, parts[2]
    return kind


@contextlib.contextmanager
def tmpfs_dir(parent: str, size_bytes: int) -> Iterator[tuple[str, str]]:
    """A tmpfs for the bench: mounted under ``parent`` if allowed, else a folder in /dev/shm."""
    mnt = os.path.join(parent, "tmpfs")
    os.makedirs(mnt)
    mounted = False
    if os.geteuid() == 0:
        res = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", mnt],
            capture_output=True,
        )
        mounted = res.returncode == 0
    if mounted:
        try:
            yield mnt, "mounted under /tmp"
        finally:
            subprocess.run(["umount", mnt], check=False)
        return
    shm = tempfile.mkdtemp(prefix="jbod-move-bench-", dir="/dev/shm")
    try:
        yield shm, "/dev/shm"
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def drop_caches(paths: list[str]) -> str:
    """Make the next reads of ``paths`` come from the disk; returns how."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        pass
    for root in paths:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
    return "fadvise"


class Bench:
    def __init__(self, disk: str, tmpfs: str, size: int) -> None:
        self.disk = os.path.join(disk, "logs")
        self.tmpfs = os.path.join(tmpfs, "logs")
        self.cp_target = os.path.join(tmpfs, "cp")
        self.size = size
        self.lm = LogManager(
            [self.disk, self.tmpfs],
            broker_id=1,
            default_config=LogConfig(segment_bytes=SEGMENT_BYTES),
        )
        self.lm.startup()
        self.engine = ReplicaMoveEngine(self.lm, background_deletions=False)
        self.tps = [TopicPartition("bench", i) for i in range(PARTITIONS)]
        self.cache = "warm"

    def close(self) -> None:
        self.engine.shutdown()
        self.lm.shutdown()

    def create(self, tp: TopicPartition, where: str, nbytes: int) -> None:
        self.lm.set_preferred_dir(tp, where)
        lg = self.lm.get_or_create_log(tp, is_new=True)
        fill(lg, nbytes, batch_bytes=16 * 1024)
        lg.roll()  # every byte in sealed segments
        lg.update_high_watermark(lg.log_end_offset)
        lg.flush()

    def folders(self) -> list[str]:
        return [os.path.join(self.disk, log_dir_name(tp)) for tp in self.tps]

    def move_all(self, dest: str) -> float:
        start = time.monotonic()
        for tp in self.tps:
            self.engine.alter_replica_log_dir(tp, dest)
        for info in self.engine.wait_all(600):
            if info.state is not MoveState.DONE:
                raise RuntimeError(f"move failed: {info}")
        elapsed = time.monotonic() - start
        self.engine.run_deletions()
        return elapsed

    def cold(self) -> None:
        self.cache = drop_caches(self.folders())

    def time_cp(self) -> float:
        os.makedirs(self.cp_target, exist_ok=True)
        self.cold()
        start = time.monotonic()
        subprocess.run(["cp", "-r", *self.folders(), self.cp_target + "/"], check=True)
        elapsed = time.monotonic() - start
        shutil.rmtree(self.cp_target)
        return elapsed

    def time_move(self, load_rate: int = 0) -> tuple[float, int]:
        """Move both partitions disk -> tmpfs (timed), then back (untimed)."""
        self.cold()
        producer = Producer(self.lm, self.tps, load_rate) if load_rate else None
        if producer is not None:
            producer.start()
        try:
            elapsed = self.move_all(self.tmpfs)
        finally:
            appended = producer.stop() if producer is not None else 0
        self.move_all(self.disk)
        for tp in self.tps:
            lg = self.lm.get_log(tp)
            assert lg is not None
            lg.roll()
            lg.flush()
        return elapsed, appended


class Producer(threading.Thread):
    """Appends ~1 MiB batches round-robin over the partitions at a steady byte rate."""

    def __init__(self, lm: LogManager, tps: list[TopicPartition], rate: int) -> None:
        super().__init__(daemon=True)
        self.lm, self.tps, self.rate = lm, tps, rate
        batch = build_batch([(None, b"p" * (16 * 1024 - 100))])
        self.chunk = batch * (MiB // len(batch))
        self.appended = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        i = 0
        while not self._stop_event.is_set():
            due = start + self.appended / self.rate
            delay = due - time.monotonic()
            if delay > 0:
                self._stop_event.wait(delay)
                continue
            lg = self.lm.get_log(self.tps[i % len(self.tps)])
            if lg is not None:
                lg.append_as_leader(self.chunk, 2)
                self.appended += len(self.chunk)
            i += 1

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return self.appended


def measure_throttle(bench: Bench, rate: int, seconds: float) -> dict[str, float]:
    tp = TopicPartition("throttle", rate // 1_000_000)
    bench.create(tp, bench.disk, int(rate * seconds))
    bench.engine.set_throttle_rate(rate)
    before = bench.engine.throttle.total_bytes
    start = time.monotonic()
    bench.engine.alter_replica_log_dir(tp, bench.tmpfs)
    info = bench.engine.wait(tp, 600)
    elapsed = time.monotonic() - start
    moved = bench.engine.throttle.total_bytes - before
    bench.engine.set_throttle_rate(None)
    if info.state is not MoveState.DONE:
        raise RuntimeError(f"throttled move failed: {info}")
    bench.lm.delete_log(tp)
    bench.engine.run_deletions()
    achieved = moved / elapsed
    return {
        "rate_bytes_per_s": rate,
        "bytes": moved,
        "seconds": round(elapsed, 3),
        "achieved_bytes_per_s": round(achieved),
        "error_pct": round(abs(achieved - rate) / rate * 100, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="256 MiB, finishes in under a minute")
    ap.add_argument("--size-mib", type=int, default=None)
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions of (a)")
    ap.add_argument("--load-mb-per-s", type=float, default=None)
    args = ap.parse_args()
    size = (args.size_mib or (256 if args.quick else 1024)) * MiB
    reps = args.reps or (2 if args.quick else 3)
    load_rate = int((args.load_mb_per_s or (20 if args.quick else 40)) * 1_000_000)
    throttle_seconds = 3.0 if args.quick else 6.0
    loadavg_start = os.getloadavg()
    t0 = time.monotonic()
    disk_root = tempfile.mkdtemp(prefix="jbod-move-bench-", dir="/tmp")
    tmpfs_size = size * 2 + int(max(THROTTLE_RATES) * throttle_seconds) + 512 * MiB
    result: dict[str, object] = {}
    try:
        with tmpfs_dir(disk_root, tmpfs_size) as (tmpfs, tmpfs_kind):
            bench = Bench(disk_root, tmpfs, size)
            try:
                log(f"writing {size // MiB} MiB to {bench.disk}")
                for tp in bench.tps:
                    bench.create(tp, bench.disk, size // PARTITIONS)
                data_bytes = sum(lg.size for lg in bench.lm.current_logs().values())
                # One untimed round of each first: the first copy into a fresh tmpfs and the
                # first reads of freshly written files pay one-off costs.
                log(f"warm-up: cp {bench.time_cp():.3f}s, move {bench.time_move()[0]:.3f}s")
                cp_times: list[float] = []
                move_times: list[float] = []
                for rep in range(reps):
                    order = ("cp", "move") if rep % 2 == 0 else ("move", "cp")
                    for what in order:
                        if what == "cp":
                            took = bench.time_cp()
                            cp_times.append(took)
                        else:
                            took = bench.time_move()[0]
                            move_times.append(took)
                        log(f"rep {rep} {what}: {took:.3f}s")
                methods = dict(bench.engine.bytes_by_method)
                under_load, appended = bench.time_move(load_rate)
                log(f"under load ({load_rate / 1e6:.0f} MB/s): {under_load:.3f}s")
                throttle = {
                    str(rate): measure_throttle(bench, rate, throttle_seconds)
                    for rate in THROTTLE_RATES
                }
                for r in throttle.values():
                    log(f"throttle {r['rate_bytes_per_s'] / 1e6:.0f} MB/s: error {r['error_pct']}%")
            finally:
                bench.close()
            cp_med = statistics.median(cp_times)
            move_med = statistics.median(move_times)
            ratio = cp_med / move_med
            ratio_load = cp_med / under_load
            worst = max(float(r["error_pct"]) for r in throttle.values())
            result = {
                "bench": "logdir_move",
                "quick": args.quick,
                "size_bytes": data_bytes,
                "partitions": PARTITIONS,
                "segment_bytes": SEGMENT_BYTES,
                "move_threads": bench.engine.threads,
                "src_dir": bench.disk,
                "dst_dir": bench.tmpfs,
                "src_fs": fs_type(bench.disk),
                "dst_fs": fs_type(bench.tmpfs),
                "tmpfs": tmpfs_kind,
                "direction": "disk -> tmpfs",
                "cache": bench.cache,
                "cp_seconds": [round(t, 3) for t in cp_times],
                "move_seconds": [round(t, 3) for t in move_times],
                "cp_mib_per_s": round(data_bytes / MiB / cp_med, 1),
                "move_mib_per_s": round(data_bytes / MiB / move_med, 1),
                "ratio_vs_cp": round(ratio, 3),
                "copy_bytes_by_method": methods,
                "load_bytes_per_s": load_rate,
                "appended_during_move_bytes": appended,
                "move_under_load_seconds": round(under_load, 3),
                "ratio_vs_cp_under_load": round(ratio_load, 3),
                "throttle": throttle,
                "throttle_error_pct": worst,
                "targets": {"ratio_vs_cp": 0.9, "throttle_error_pct": 5.0},
                "meets_targets": ratio >= 0.9 and worst <= 5.0,
                "loadavg_start": [round(x, 2) for x in loadavg_start],
                "loadavg_end": [round(x, 2) for x in os.getloadavg()],
                "wall_seconds": round(time.monotonic() - t0, 1),
            }
    finally:
        shutil.rmtree(disk_root, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
