"""Placement benchmark: the Spark planner on synthetic clusters against two baselines.

For each size (brokers x dirs per broker x replicas; Zipf-skewed partition sizes, 3 racks, some
directories far fuller than others, generated from --seed) it prints the wall time of the Spark
job on local[*] (DataFrames in, both grouped steps, plan built; the JVM start is reported apart),
the largest directory utilisation, the worst per-broker spread (max - min directory utilisation,
percentage points) and the standard deviation of directory utilisation before and after, the
bytes moved and a lower bound on the bytes any plan must move to reach the same balance (every
directory within its broker's achieved [min, max] band: max(bytes that must leave dirs above
it, bytes that must enter dirs below it)). The same figures are given for Kafka's default
placement (fewest partitions per directory) and a plain greedy single-process balancer.

The last line is one JSON object (keys include largest_wall_s, largest_spread_pp and
largest_bytes_ratio_to_bound). Usage: python bench/placement.py [--quick] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from jbod_spark.arrays import ClusterArrays
from jbod_spark.baselines import kafka_default, plain_greedy
from jbod_spark.metrics import (
    bytes_moved,
    counted_dirs,
    dir_used,
    figures,
    lower_bound_bytes,
)
from jbod_spark.options import PlanOptions
from jbod_spark.planner import plan_arrays
from jbod_spark.synthetic import synthetic_cluster

FULL_SIZES = [(30, 6, 30_000), (100, 10, 250_000), (250, 12, 1_000_000)]
QUICK_SIZES = [(12, 4, 6_000), (40, 8, 50_000), (100, 12, 250_000)]
TARGETS = {"spread_pp": 5.0, "bytes_ratio": 1.2, "wall_s": 180.0}


def evaluate(a: ClusterArrays, rb: Any, rd: Any, threshold: float) -> dict[str, Any]:
    drain = np.zeros(a.n_dirs, dtype=np.bool_)
    counted = counted_dirs(a, drain)
    ub = dir_used(a, a.rep_dir)
    ua = dir_used(a, rd)
    before = figures(a, ub, counted, threshold)
    after = figures(a, ua, counted, threshold)
    moved = bytes_moved(a, rb, rd)
    bound = lower_bound_bytes(a, ub, ua, counted, drain)
    changed = (rb != a.rep_broker) | (rd != a.rep_dir)
    return {
        "before": before.as_dict(),
        "after": after.as_dict(),
        "bytes_moved": moved,
        "lower_bound_bytes": bound,
        "bytes_ratio_to_bound": round(moved / bound, 4) if bound else (1.0 if not moved else None),
        "bytes_moved_fraction": round(moved / max(1, int(a.rep_size.sum())), 4),
        "replica_moves": int(changed.sum()),
        "inter_broker_moves": int((rb != a.rep_broker).sum()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (about a minute)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args()
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    opts = PlanOptions()

    from jbod_spark.spark_job import run_job, spark_session

    t0 = time.monotonic()
    spark = spark_session(master=args.master, driver_memory=args.driver_memory)
    startup = time.monotonic() - t0
    results = []
    try:
        for i, (nb, nd, nr) in enumerate(sizes):
            a = synthetic_cluster(args.seed + i, nb, nd, nr, cluster=f"bench-{i}")
            t = time.monotonic()
            res = run_job(spark, [a], opts)
            wall = time.monotonic() - t
            plan = res.plans[0]
            rb, rd, _ = res.placements[a.cluster]
            ours = evaluate(a, rb, rd, opts.capacity_threshold)
            ours["wall_s"] = round(wall, 2)
            ours["constraints_ok"] = plan.report.ok
            ours["leader_moves"] = plan.report.summary.leader_moves
            t = time.monotonic()
            kd = kafka_default(a)
            kafka = evaluate(a, a.rep_broker, kd, opts.capacity_threshold)
            kafka["wall_s"] = round(time.monotonic() - t, 2)
            t = time.monotonic()
            gd = plain_greedy(a, opts.dir_balance_tolerance)
            greedy = evaluate(a, a.rep_broker, gd, opts.capacity_threshold)
            greedy["wall_s"] = round(time.monotonic() - t, 2)
            t = time.monotonic()
            plan_arrays(a, opts)  # the same planner in this one process, for comparison
            ours["single_process_wall_s"] = round(time.monotonic() - t, 2)
            row: dict[str, Any] = {
                "brokers": nb,
                "dirs_per_broker": nd,
                "replicas": int(a.n_replicas),
                "spark": ours,
                "kafka_default": kafka,
                "plain_greedy": greedy,
            }
            results.append(row)
            print(
                f"{nb} brokers x {nd} dirs x {a.n_replicas} replicas: spark {wall:.1f} s; "
                f"spread {ours['before']['worst_spread_pp']:.1f} -> "
                f"{ours['after']['worst_spread_pp']:.1f} pp (kafka "
                f"{kafka['after']['worst_spread_pp']:.1f}, greedy "
                f"{greedy['after']['worst_spread_pp']:.1f}); largest "
                f"{ours['before']['largest_util']:.1%} -> {ours['after']['largest_util']:.1%}; "
                f"bytes/bound {ours['bytes_ratio_to_bound']} (greedy "
                f"{greedy['bytes_ratio_to_bound']}, kafka {kafka['bytes_ratio_to_bound']})",
                flush=True,
            )
    finally:
        spark.stop()
    big = results[-1]["spark"]
    out = {
        "bench": "placement",
        "quick": args.quick,
        "seed": args.seed,
        "spark_startup_s": round(startup, 2),
        "sizes": results,
        "largest_size": f"{sizes[-1][0]}x{sizes[-1][1]}x{sizes[-1][2]}",
        "largest_wall_s": big["wall_s"],
        "largest_spread_pp": round(big["after"]["worst_spread_pp"], 3),
        "largest_bytes_ratio_to_bound": big["bytes_ratio_to_bound"],
        "largest_util_after": round(big["after"]["largest_util"], 4),
        "targets": TARGETS,
        "targets_met": {
            "spread_pp": big["after"]["worst_spread_pp"] <= TARGETS["spread_pp"],
            "bytes_ratio": (big["bytes_ratio_to_bound"] or 0) <= TARGETS["bytes_ratio"],
            "wall_s": big["wall_s"] <= TARGETS["wall_s"],
        },
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
