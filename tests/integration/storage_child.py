"""Child process for the storage crash test (tests/integration/test_storage_crash.py).

Opens a :class:`LogManager` on the given directories (running crash recovery), then appends
batches to a few partitions for as long as it lives. After each append it calls ``log.flush()``
and only then prints an acknowledgement line and flushes stdout::

    RECOVERING                                  once, just before the log manager opens
    READY <partition>:<log end offset> ...      once, after start-up
    ACK <partition> <first offset> <last offset> <seed>
    SHUTDOWN                                    after a clean lm.shutdown() (--shutdown-after)

Every record is derived from its batch's ``seed`` (``<run>.<n>``) by :func:`payload_records`,
and every key carries the seed, so the parent can check any batch it finds in the log, whether
or not it was acknowledged. The batch's partition leader epoch is the run number.

The parent kills this process with SIGKILL at a random moment; it never exits on its own except
after ``--max-seconds`` (a safety net, exit code 3).

Run as ``python -m tests.integration.storage_child`` from the repository root, or by path.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time

from jbod_broker.storage.log import LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch

TOPIC = "crash"
SEGMENT_BYTES = 128 * 1024
BROKER_ID = 7


def log_config() -> LogConfig:
    """Small segments so rolls are frequent; retention off so nothing is ever deleted."""
    return LogConfig(
        segment_bytes=SEGMENT_BYTES,
        retention_ms=-1,
        retention_bytes=-1,
        index_interval_bytes=1024,
    )


def partitions(count: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, p) for p in range(count)]


def payload_records(partition: int, seed: str) -> list[tuple[bytes, bytes]]:
    """The (key, value) records of the batch named ``seed``: 1-6 records of 8-300 bytes."""
    h = hashlib.sha256(f"{partition}/{seed}".encode()).digest()
    count = 1 + h[0] % 6
    out = []
    for i in range(count):
        key = f"{partition}:{seed}:{i}".encode()
        size = 8 + int.from_bytes(h[1 + 2 * i : 3 + 2 * i], "big") % 293
        out.append((key, hashlib.shake_128(key).digest(size)))
    return out


def seed_of_key(key: bytes) -> tuple[int, str, int]:
    """(partition, seed, record index) named by a record key."""
    partition, seed, index = key.decode().split(":")
    return int(partition), seed, int(index)


def run_of_seed(seed: str) -> int:
    return int(seed.split(".")[0])


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dirs", required=True, help="comma-separated absolute log dirs")
    parser.add_argument("--run", type=int, required=True, help="run number (leader epoch)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--checkpoint-every", type=int, default=29)
    parser.add_argument("--shutdown-after", type=int, default=0, help="0: never")
    parser.add_argument("--max-seconds", type=float, default=20.0)
    args = parser.parse_args(argv)

    deadline = time.monotonic() + args.max_seconds
    dirs = args.dirs.split(",")
    _emit("RECOVERING")
    lm = LogManager(dirs, broker_id=BROKER_ID, default_config=log_config())
    lm.startup()
    tps = partitions(args.partitions)
    logs = {}
    for i, tp in enumerate(tps):
        if lm.get_log(tp) is None:
            lm.set_preferred_dir(tp, dirs[i % len(dirs)])
        # Only run 0 creates replicas; later runs must find every one of them on disk.
        logs[tp] = lm.get_or_create_log(tp, is_new=args.run == 0)
    _emit("READY " + " ".join(f"{tp.partition}:{logs[tp].log_end_offset}" for tp in tps))

    rng = random.Random(f"child-{args.run}")
    n = 0
    while time.monotonic() < deadline:
        tp = rng.choice(tps)
        seed = f"{args.run}.{n}"
        batch = build_batch(payload_records(tp.partition, seed))
        lg = logs[tp]
        info = lg.append_as_leader(batch, leader_epoch=args.run)
        lg.flush()
        _emit(f"ACK {tp.partition} {info.first_offset} {info.last_offset} {seed}")
        n += 1
        if args.checkpoint_every and n % args.checkpoint_every == 0:
            lm.checkpoint()
        if args.shutdown_after and n >= args.shutdown_after:
            lm.shutdown()
            _emit("SHUTDOWN")
            while time.monotonic() < deadline:
                time.sleep(0.01)
            break
    os._exit(3)


if __name__ == "__main__":
    sys.exit(main())
