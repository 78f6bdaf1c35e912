"""``python -m jbod_spark.job --snapshot X --out Y [--mode ...]``: the Spark job.

Reads a snapshot (JSON for one cluster, a folder of Parquet tables for a fleet), optionally a
metric history (Parquet), plans on ``local[*]`` by default (``--master ""`` keeps the master that
spark-submit or the Spark Operator gave), and writes per cluster: ``manifests.json`` (LogDirMove
and PartitionReassignment, a v1 List for ``kubectl apply -f``), ``reassignment.json``
(kafka-reassign-partitions with ``log_dirs``), ``report.json``, ``report.txt`` and ``plot.png``
(every disk's utilisation before and after).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from jbod_operator.models.goals import GoalName, GoalThresholds

from .options import DirRef, Mode, PlanOptions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jbod_spark.job", description=__doc__)
    p.add_argument("--snapshot", required=True, help="snapshot .json, or a Parquet tables folder")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.FULL.value)
    p.add_argument("--brokers", default="", help="add-/remove-brokers: comma-separated ids")
    p.add_argument(
        "--log-dirs", default="", help="remove-dirs: comma-separated BROKER:DIR (name or path)"
    )
    p.add_argument("--capacity-threshold", type=float, default=0.8)
    p.add_argument("--dir-tolerance", type=float, default=0.04)
    p.add_argument(
        "--broker-tolerance",
        type=float,
        default=None,
        help="an absolute band for brokers (default: the relative DiskUsageDistributionGoal)",
    )
    p.add_argument("--target-utilisation", type=float, default=0.7)
    p.add_argument("--min-move-bytes", type=int, default=0)
    p.add_argument(
        "--metrics",
        default="",
        help="metric history (Parquet, or JSON lines ending in .jsonl as the operator keeps it), "
        "optional",
    )
    p.add_argument("--horizon-hours", type=float, default=24.0, help="with --metrics")
    p.add_argument("--throttle", type=int, default=None, help="bytes/s for the manifests")
    p.add_argument("--name-prefix", default=None)
    p.add_argument("--goals", default=None, help="soft goals in priority order, comma-separated")
    p.add_argument("--required-goals", default="", help="soft goals the plan must meet")
    p.add_argument("--goal-thresholds", default=None, help="GoalThresholds as JSON")
    p.add_argument("--master", default="local[*]")
    p.add_argument("--driver-memory", default="6g")
    return p.parse_args(argv)


def options_from_args(ns: argparse.Namespace) -> PlanOptions:
    brokers = [int(x) for x in ns.brokers.split(",") if x.strip()]
    dirs = []
    for item in (x for x in ns.log_dirs.split(",") if x.strip()):
        b, _, d = item.partition(":")
        dirs.append(DirRef(broker_id=int(b), log_dir=d))
    goals = None if ns.goals is None else [GoalName(g) for g in ns.goals.split(",") if g]
    thresholds = (
        GoalThresholds()
        if ns.goal_thresholds is None
        else GoalThresholds.model_validate_json(ns.goal_thresholds)
    )
    return PlanOptions(
        goals=goals,
        required_goals=[GoalName(g) for g in ns.required_goals.split(",") if g],
        thresholds=thresholds,
        mode=Mode(ns.mode),
        brokers=brokers,
        log_dirs=dirs,
        capacity_threshold=ns.capacity_threshold,
        dir_balance_tolerance=ns.dir_tolerance,
        broker_balance_tolerance=ns.broker_tolerance,
        target_utilisation=ns.target_utilisation,
        min_move_bytes=ns.min_move_bytes,
        horizon_seconds=ns.horizon_hours * 3600.0 if ns.metrics else 0.0,
    )


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    opts = options_from_args(ns)
    from pyspark.sql import SparkSession

    from .spark_job import (
        aggregate_metrics,
        apply_loads,
        iter_outputs,
        load_fleet,
        run_job,
        spark_session,
        write_plan,
    )

    t0 = time.monotonic()
    phases: dict[str, float] = {}
    owned = SparkSession.getActiveSession() is None  # a caller's session is left running
    spark = spark_session(master=ns.master, driver_memory=ns.driver_memory)
    phases["session_s"] = time.monotonic() - t0
    try:
        t = time.monotonic()
        clusters = load_fleet(spark, ns.snapshot)
        if ns.metrics:
            loads = aggregate_metrics(spark, ns.metrics).toPandas()
            clusters = [apply_loads(a, loads) for a in clusters]
        phases["read_s"] = time.monotonic() - t
        t = time.monotonic()
        result = run_job(spark, clusters, opts)
        phases["plan_s"] = time.monotonic() - t
    finally:
        t = time.monotonic()
        if owned:
            spark.stop()
        phases["stop_s"] = time.monotonic() - t
    t = time.monotonic()
    ok = True
    for plan, out in iter_outputs(result, Path(ns.out)):
        files = write_plan(
            plan, out, name_prefix=ns.name_prefix, throttle_bytes_per_second=ns.throttle
        )
        print(plan.report.text(tables=False))
        print(json.dumps({"cluster": plan.cluster_name, "files": files}))
        ok &= plan.report.ok
    phases["outputs_s"] = time.monotonic() - t
    # The phases let a caller (the operator's log, bench/rebalance.py) see where the time went;
    # what the process spent before main() (interpreter, imports) is its wall time minus these.
    print(
        json.dumps(
            {
                "wall_s": round(time.monotonic() - t0, 2),
                "constraints_ok": ok,
                "phases": {k: round(v, 3) for k, v in phases.items()},
            }
        )
    )
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
