"""Append and sequential-read throughput of the storage engine against the raw disk.

Both sides run in the same process, on the same directory, with the same amount of data:
- raw: ``os.write`` of 1 MiB blocks to one file, fsync at the end; ``os.read`` of 1 MiB blocks.
- log: ~16 KiB RecordBatch v2 batches (16 records of 1 KiB), each one produce request, through
  the broker's group commit (``Log.append_as_leader_group``): with ``--queue-depth`` requests
  queued for the partition (default 16: a few producers, each with Kafka's default of five
  requests in flight), one call validates each request's CRC-32C, assigns offsets and writes
  them all with one write. The broker's counters (jbod_produce_requests_appended_total over
  jbod_produce_writes_total) show the depth a real load reaches. Depths 1, 4, 16 and 64 are
  all reported (``append_mb_s_by_queue_depth``); depth 1 is ``append_single_request_mb_s``
  (one producer, one request in flight). A write call costs about as much as copying 16 KiB
  here, so one write per request is bounded by ``raw_write_batch_size_mb_s`` (raw writes of the
  batch size, about half the 1 MiB figure), not by the disk.
  One ``flush()`` (fsync) at the end. Reads: ``Log.read`` of 1 MiB from offset 0 to the end.
Batches are built before the clock starts: building them is the producer's work.

Flush policy: no fsync per append (Kafka's default: durability comes from replication, the
OS writes back), one fsync at the end of the write phase on both sides. Page cache is dropped
before each read phase when the machine allows (root with /proc/sys/vm/drop_caches writable),
otherwise both reads run warm; the JSON says which.

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.log import AppendInfo, Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch

MiB = 1024 * 1024


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def settle() -> None:
    """Let the disk finish what the previous phase left (write-back, discards of deleted files)."""
    os.sync()
    time.sleep(0.2)


def raw_write(path: str, total: int) -> float:
    block = os.urandom(MiB)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    while written < total:
        written += os.write(fd, block)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - t0


def raw_write_batches(path: str, total: int, batches: list[bytes]) -> float:
    """The same disk written with the log's own write size (one pwrite per ~16 KiB batch).

    Not the target's yardstick (that is the 1 MiB raw writer): it shows how much of the gap is
    the engine and how much the write size the producer's batches impose.
    """
    n = len(batches)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pos = 0
    i = 0
    while pos < total:
        pos += os.pwrite(fd, batches[i % n], pos)
        i += 1
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - t0


def raw_read(path: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    n = 0
    while True:
        b = os.read(fd, MiB)
        if not b:
            break
        n += len(b)
    os.close(fd)
    return time.perf_counter() - t0, n


def make_batches(count: int, records: int, record_size: int) -> list[bytes]:
    out = []
    for i in range(count):
        payload = os.urandom(record_size)
        out.append(build_batch([(b"key-%d-%d" % (i, j), payload) for j in range(records)]))
    return out


def log_append(dir_path: str, total: int, batches: list[bytes], depth: int) -> tuple[float, Log]:
    """Append ``total`` bytes, ``depth`` produce requests (one batch each) per write."""
    channel = LogDirFailureChannel()
    cfg = LogConfig(segment_bytes=256 * MiB)
    log = Log.create(
        os.path.join(dir_path, "bench-0"),
        TopicPartition("bench", 0),
        cfg,
        channel,
        log_dir=dir_path,
    )
    groups = [batches[i : i + depth] for i in range(0, len(batches), depth)]
    n = len(groups)
    written = 0
    i = 0
    t0 = time.perf_counter()
    while written < total:
        for info in log.append_as_leader_group(groups[i % n], 1):
            assert isinstance(info, AppendInfo), info
            written += info.size_in_bytes
        i += 1
    log.flush()
    return time.perf_counter() - t0, log


def log_read(log: Log) -> tuple[float, int]:
    t0 = time.perf_counter()
    offset = 0
    n = 0
    leo = log.log_end_offset
    from jbod_broker.storage.records import iter_batches

    while offset < leo:
        r = log.read(offset, MiB)
        last = None
        for _pos, hdr in iter_batches(r.data):
            last = hdr
        assert last is not None
        offset = last.next_offset
        n += len(r.data)
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="256 MiB instead of 1 GiB")
    ap.add_argument("--dir", default=None, help="directory to measure (default: a temp dir)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument(
        "--queue-depth",
        type=int,
        default=16,
        help="produce requests per write (group commit); must divide 64",
    )
    args = ap.parse_args()
    total = (256 if args.quick else 1024) * MiB
    rounds = args.rounds or 5
    base = tempfile.mkdtemp(prefix="bench-log-", dir=args.dir)
    batches = make_batches(64, 16, 1024)
    depth = args.queue_depth
    if depth < 1 or 64 % depth:
        ap.error("--queue-depth must divide 64")
    depths = sorted({1, 4, 16, 64, depth})
    samples: dict[str, list[float]] = {}
    dropped = False
    try:
        for rnd in range(rounds):
            # Same dir, size and flush on both sides; which side goes first alternates, and each
            # timed phase starts from a settled disk (the previous phase's deletions and
            # write-back done), so neither side pays for the other's leftovers.
            raw_path = os.path.join(base, "raw.bin")
            for side in ("raw", "log") if rnd % 2 == 0 else ("log", "raw"):
                if side == "raw":
                    settle()
                    w16 = raw_write_batches(raw_path, total, batches)
                    os.unlink(raw_path)
                    settle()
                    w = raw_write(raw_path, total)
                    dropped = drop_caches()
                    r, rn = raw_read(raw_path)
                    os.unlink(raw_path)
                    continue
                for d in depths:
                    settle()
                    secs, log = log_append(base, total, batches, d)
                    key = f"append_mb_s_depth_{d}"
                    samples.setdefault(key, []).append(log.size / MiB / secs)
                    if d == depth:
                        size = log.size
                        dropped = drop_caches() and dropped
                        lr, ln = log_read(log)
                        assert ln == size, (ln, size)
                    log.close()
                    shutil.rmtree(log.dir_path)
            for key, secs, nbytes in (
                ("raw_write_mb_s", w, total),
                ("raw_write_batch_size_mb_s", w16, total),
                ("raw_read_mb_s", r, rn),
                ("read_mb_s", lr, ln),
            ):
                samples.setdefault(key, []).append(nbytes / MiB / secs)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    # The median round of each figure: robust to a round disturbed on either side.
    median = {k: statistics.median(v) for k, v in samples.items()}
    result = {
        "bench": "log_append",
        "bytes": total,
        "record_bytes": 1024,
        "batch_records": 16,
        "queue_depth": depth,
        "rounds": rounds,
        "statistic": "median of rounds",
        "flush_policy": "no fsync per append; one fsync after each write phase, both sides",
        "page_cache": "dropped before reads" if dropped else "warm (could not drop caches)",
        **{k: round(v, 1) for k, v in median.items() if not k.startswith("append_")},
        "append_mb_s": round(median[f"append_mb_s_depth_{depth}"], 1),
        "append_single_request_mb_s": round(median["append_mb_s_depth_1"], 1),
        "append_mb_s_by_queue_depth": {
            d: round(median[f"append_mb_s_depth_{d}"], 1) for d in depths
        },
        "append_ratio": round(median[f"append_mb_s_depth_{depth}"] / median["raw_write_mb_s"], 3),
        "append_ratio_single_request": round(
            median["append_mb_s_depth_1"] / median["raw_write_mb_s"], 3
        ),
        "append_ratio_single_request_same_write_size": round(
            median["append_mb_s_depth_1"] / median["raw_write_batch_size_mb_s"], 3
        ),
        "read_ratio": round(median["read_mb_s"] / median["raw_read_mb_s"], 3),
        "targets": {"append_ratio": 0.5, "read_ratio": 0.7},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
