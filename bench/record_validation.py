"""What the leader's record walk costs: ``validate_batches`` with and without it, same batches.

Issue 14 (3) made a leader walk every record of a produced batch (Kafka's ``LogValidator``)
before storing it; a follower checks framing, header fields and the CRC only. The yardstick is
that follower check (``check_records=False``) of the same batches in the same run, so
``walk_us_per_batch`` = leader check - follower check is the walk's own cost, and
``leader_to_follower_ratio`` says how much dearer a leader's check is (1.0: the walk is free).

Batch shapes: the one bench/broker_throughput.py produces (16 records of 1 KiB, ~16 KiB), small
records (160 of 100 bytes), 16 records of 1 KiB with two headers each, and 16 compressible
records of 1 KiB compressed with each of Kafka's codecs, gzip, snappy, lz4 and zstd, in Kafka's
framings (decompressing is most of those walks; issue 18 added all but gzip). Timings are the best
of ``--repeat`` rounds of ``--number`` calls, the two sides alternating round by round, as a busy
machine only ever slows a round. MB means MiB, as in the other benchmarks. ``reader`` says
whether ``jbod_broker.storage.record_reader`` ran compiled (mypyc, built by ``make setup``) or
as plain Python.

Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from collections.abc import Callable
from functools import partial

from jbod_broker.storage import record_reader
from jbod_broker.storage.compression import CODEC_NAMES, GZIP, LZ4, SNAPPY, ZSTD
from jbod_broker.storage.records import Header, RecordInput, build_batch, validate_batches

BASE_TS = 1_700_000_000_000
MiB = 1024 * 1024


def shapes() -> dict[str, bytes]:
    value = os.urandom(1024)
    bench = [(b"key-%d" % i, value) for i in range(16)]
    small = os.urandom(100)
    headers = [Header("trace-id", os.urandom(16)), Header("source", b"bench")]
    with_headers: list[RecordInput] = [(b"key-%d" % i, value, headers) for i in range(16)]
    compressible: list[RecordInput] = [(b"key-%d" % i, os.urandom(64) * 16) for i in range(16)]
    return {
        "16x1KiB": build_batch(bench, base_timestamp=BASE_TS),
        "160x100B": build_batch(
            [(b"key-%d" % i, small) for i in range(160)], base_timestamp=BASE_TS
        ),
        "16x1KiB_2_headers": build_batch(with_headers, base_timestamp=BASE_TS),
        **{
            f"16x1KiB_{CODEC_NAMES[codec]}": build_batch(
                compressible, base_timestamp=BASE_TS, compression=codec
            )
            for codec in (GZIP, SNAPPY, LZ4, ZSTD)
        },
    }


def best_us(call: Callable[[], object], number: int, repeat: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls per round")
    ap.add_argument("--number", type=int, default=None, help="calls per round")
    ap.add_argument("--repeat", type=int, default=7, help="rounds (best of)")
    args = ap.parse_args()
    number = args.number or (500 if args.quick else 3000)

    result: dict[str, object] = {}
    for name, batch in shapes().items():
        count = validate_batches(batch)[0].records_count
        # Alternate the two sides round by round, so a burst of other work hits both.
        leader: list[float] = []
        follower: list[float] = []
        for _ in range(args.repeat):
            leader.append(best_us(partial(validate_batches, batch), number, 1))
            follower.append(
                best_us(partial(validate_batches, batch, check_records=False), number, 1)
            )
        lead, follow = min(leader), min(follower)
        result[name] = {
            "records": count,
            "batch_bytes": len(batch),
            "leader_us_per_batch": round(lead, 2),
            "follower_us_per_batch": round(follow, 2),
            "walk_us_per_batch": round(lead - follow, 2),
            "walk_ns_per_record": round((lead - follow) * 1000 / count),
            "leader_to_follower_ratio": round(lead / follow, 2),
            "leader_mb_s": round(len(batch) / MiB / lead * 1e6, 1),
        }
        print(f"[record_validation] {name}: {result[name]}", file=sys.stderr)

    print(
        json.dumps(
            {
                "bench": "record_validation",
                "reader": "interpreted" if record_reader.__file__.endswith(".py") else "compiled",
                "yardstick": "validate_batches(check_records=False): framing, header, CRC",
                "calls_per_round": number,
                "rounds": args.repeat,
                "loadavg_1m": round(os.getloadavg()[0], 2),
                **result,
            }
        )
    )


if __name__ == "__main__":
    main()
