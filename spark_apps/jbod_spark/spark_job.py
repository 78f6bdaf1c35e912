"""The Spark driver: a thin layer around the pure planner.

* per-cluster planning (step 1: drains, cross-broker balance, leaders) runs as a grouped
  pandas function over the fleet (``cogroup(...).applyInPandas``, one group per cluster);
* per-broker directory balancing (step 2) runs as another grouped function, one group per
  (cluster, broker), in parallel;
* the metric history (Parquet: time, topic, partition, size, bytes_in [, cluster]) is
  aggregated by Spark SQL into a load estimate per partition (p95 growth rate, p95 bytes in).

Data crosses between the JVM and Python as Arrow batches. Plans are built and written by the
driver from the final placement (the same :func:`~jbod_spark.outputs.build_plan` the pure path
uses), so a Spark plan is identical to the one :func:`jbod_spark.planner.plan` computes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import DataFrame, SparkSession

from jbod_operator.models.snapshot import ClusterSnapshot

from .arrays import ClusterArrays, from_snapshot
from .frames import (
    NOTES_BROKER,
    PACKED_SCHEMA,
    TOPO_SCHEMA,
    arrays_from_coded,
    arrays_from_tables,
    coded_frames,
    packed_rows,
    step1_packed,
    step2_packed,
    unpacked,
)
from .goals import split_notes
from .interbroker import drain_mask, plan_inter_broker, projected_sizes, resolve_dir_refs
from .options import Mode, PlanOptions
from .outputs import Plan, build_plan
from .plot import write_plot

METRICS_SQL = """
WITH m AS (
  SELECT {cluster_col} AS cluster, topic, CAST(partition AS BIGINT) AS partition,
         {time_expr} AS t, CAST(size AS DOUBLE) AS size,
         CAST(bytes_in AS DOUBLE) AS bytes_in
  FROM metric_history
),
d AS (
  SELECT cluster, topic, partition, bytes_in,
         (size - LAG(size) OVER w) / (t - LAG(t) OVER w) AS growth
  FROM m
  WINDOW w AS (PARTITION BY cluster, topic, partition ORDER BY t)
)
SELECT cluster, topic, partition,
       COALESCE(percentile_approx(growth, {q}), 0D) AS growth_bytes_per_second,
       COALESCE(percentile_approx(bytes_in, {q}), 0D) AS bytes_in_per_second
FROM d
GROUP BY cluster, topic, partition
"""


DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -XX:ParallelGCThreads=2"
"""The planner's JVM lives for one job of a minute or less and mostly moves a few hundred
packed rows: the optimising JIT compiler (C2) would cost more than it saves, and G1's
concurrent threads compete with the Python workers on a small machine. With the quick
compiler alone and a parallel collector of two threads the job took a third less CPU on 2 cores
(bench/rebalance.py: 31 -> 21 CPU-s at 50 x 8 x 100,000 replicas)."""


def spark_session(
    master: str = "local[*]",
    driver_memory: str = "6g",
    app_name: str = "jbod-placement",
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """A session for the planner: Arrow on, few shuffle partitions, no UI. On Kubernetes the
    SparkApplication sets the master and memory; ``master=""`` keeps what spark-submit gave."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    b = SparkSession.builder.appName(app_name)
    if master:
        b = b.master(master)
    conf = {
        "spark.driver.memory": driver_memory,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
        "spark.sql.shuffle.partitions": str(max(2, (os.cpu_count() or 2) * 2)),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "false",
        "spark.python.worker.reuse": "true",
        "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
    }
    conf.update(extra or {})
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _pandas(df: DataFrame) -> Any:
    return df.toPandas()


# -- inputs ----------------------------------------------------------------------------------


def load_fleet(spark: SparkSession, path: str) -> list[ClusterArrays]:
    """A JSON snapshot (one cluster) or a folder of Parquet tables (a fleet)."""
    if path.endswith(".json"):
        snap = ClusterSnapshot.model_validate_json(Path(path).read_text())
        return [from_snapshot(snap)]
    base = path.rstrip("/")
    tables = {
        name: _pandas(spark.read.parquet(f"{base}/{name}"))
        for name in ("brokers", "log_dirs", "replicas")
    }
    loads = None
    if Path(f"{base}/partition_loads").exists():
        loads = _pandas(spark.read.parquet(f"{base}/partition_loads"))
    out = []
    for cluster in sorted(set(tables["brokers"]["cluster"])):
        sel = {k: v[v["cluster"] == cluster] for k, v in tables.items()}
        cl = None if loads is None else loads[loads["cluster"] == cluster]
        out.append(
            arrays_from_tables(cluster, sel["brokers"], sel["log_dirs"], sel["replicas"], cl)
        )
    return out


METRICS_JSON_SCHEMA = (
    "cluster STRING, time DOUBLE, topic STRING, partition BIGINT, size BIGINT, bytes_in DOUBLE"
)
"""The metric history as JSON lines (``.jsonl``): what the operator's continuous detection
keeps (``jbod_operator.plan.balance_trigger.metric_history_rows``; time in epoch seconds)."""


def aggregate_metrics(spark: SparkSession, path: str, quantile: float = 0.95) -> DataFrame:
    """Per-partition load estimate from the metric history (Parquet, or JSON lines when the
    path ends in ``.jsonl``), in Spark SQL."""
    if path.endswith(".jsonl"):
        df = spark.read.schema(METRICS_JSON_SCHEMA).json(path)
    else:
        df = spark.read.parquet(path)
    df.createOrReplaceTempView("metric_history")
    cluster_col = "cluster" if "cluster" in df.columns else "CAST(NULL AS STRING)"
    time_type = dict(df.dtypes)["time"]
    if time_type.startswith("timestamp") or time_type == "date":
        time_expr = "unix_micros(CAST(time AS TIMESTAMP)) / 1000000D"
    else:  # seconds since the epoch
        time_expr = "CAST(time AS DOUBLE)"
    return spark.sql(METRICS_SQL.format(cluster_col=cluster_col, q=quantile, time_expr=time_expr))


def apply_loads(a: ClusterArrays, loads: Any) -> ClusterArrays:
    """The arrays with growth and bytes-in rates from an aggregated metrics frame."""
    if "cluster" in loads.columns:
        loads = loads[loads["cluster"].isna() | (loads["cluster"] == a.cluster)]
    parts = pd.DataFrame({"topic": list(a.part_topic), "partition": a.part_num})
    m = parts.merge(
        loads[["topic", "partition", "growth_bytes_per_second", "bytes_in_per_second"]],
        on=["topic", "partition"],
        how="left",
    )
    return replace(
        a,
        part_growth=m["growth_bytes_per_second"].fillna(0.0).to_numpy(np.float64),
        part_bytes_in=m["bytes_in_per_second"].fillna(0.0).to_numpy(np.float64),
        _cache={},
    )


# -- the job ---------------------------------------------------------------------------------


@dataclass
class JobResult:
    plans: list[Plan]
    placements: dict[str, tuple[Any, Any, Any]]
    """cluster -> (broker, dir, leader) index arrays after the plan."""


def _step1(opts: PlanOptions) -> Any:
    def step1(topo: Any, reps: Any) -> Any:
        if len(topo) == 0 or len(reps) == 0:
            return pd.DataFrame(columns=[c.split()[0] for c in PACKED_SCHEMA.split(", ")])
        cluster = str(topo["cluster"].iloc[0])
        a = arrays_from_coded(cluster, topo, unpacked(reps))
        sizes = projected_sizes(a, opts)
        inter = plan_inter_broker(a, opts, sizes)
        return step1_packed(a, inter, sizes)

    return step1


def _step2(opts: PlanOptions) -> Any:
    def step2(pdf: Any) -> Any:
        return step2_packed(pdf, opts)

    return step2


def _for_workers(a: ClusterArrays, opts: PlanOptions) -> ClusterArrays:
    """The arrays the workers get: the coded frames carry no dir names (``d0``, ``d1``...), so
    the dirs a remove-dirs plan names are resolved here, on the driver, and sent as cordoned
    (drained, never a destination: the same mask, ``interbroker.drain_mask``); the workers get
    options without the names (:func:`_worker_options`)."""
    if opts.mode is not Mode.REMOVE_DIRS or not opts.log_dirs:
        return a
    return dataclasses.replace(a, dir_cordoned=a.dir_cordoned | resolve_dir_refs(a, opts))


def _worker_options(opts: PlanOptions) -> PlanOptions:
    if opts.mode is not Mode.REMOVE_DIRS:
        return opts
    return opts.model_copy(update={"log_dirs": []})


def run_job(spark: SparkSession, clusters: list[ClusterArrays], opts: PlanOptions) -> JobResult:
    """Plan every cluster of the fleet; step 1 per cluster, step 2 per broker, in parallel.

    Replica-level frames cross Spark packed (see :mod:`jbod_spark.frames`)."""
    frames = [coded_frames(_for_workers(a, opts)) for a in clusters]
    worker_opts = _worker_options(opts)
    topo_pdf = pd.concat([f[0] for f in frames], ignore_index=True)
    reps_pdf = pd.concat(
        [packed_rows(f[1], a.cluster) for a, f in zip(clusters, frames, strict=True)],
        ignore_index=True,
    )
    topo = spark.createDataFrame(topo_pdf, TOPO_SCHEMA)
    reps = spark.createDataFrame(reps_pdf, PACKED_SCHEMA)
    step1 = (
        topo.groupBy("cluster")
        .cogroup(reps.groupBy("cluster"))
        .applyInPandas(_step1(worker_opts), PACKED_SCHEMA)
        .persist()
    )
    try:
        notes_rows: Any = step1.filter(f"broker = {NOTES_BROKER}").toPandas()
        step2 = (
            step1.filter(f"broker <> {NOTES_BROKER}")
            .groupBy("cluster", "broker")
            .applyInPandas(_step2(worker_opts), PACKED_SCHEMA)
        )
        final_rows: Any = step2.toPandas()
    finally:
        step1.unpersist()
    final = pd.concat(
        [unpacked(g) for _, g in final_rows.groupby(["cluster", "broker"], sort=True)],
        ignore_index=True,
    )
    notes_pdf = pd.concat(
        [unpacked(g) for _, g in notes_rows.groupby("cluster", sort=True)]
        or [pd.DataFrame({"cluster": [], "idx": [], "note": []})],
        ignore_index=True,
    )
    plans: list[Plan] = []
    placements: dict[str, tuple[Any, Any, Any]] = {}
    for a in clusters:
        f = final[final["cluster"] == a.cluster].sort_values("idx", kind="stable")
        if len(f) != a.n_replicas:
            raise RuntimeError(f"{a.cluster}: {len(f)} replicas came back of {a.n_replicas}")
        rb = f["broker"].to_numpy(np.int64)
        rd = f["dir"].to_numpy(np.int64)
        leader = f["leader"].to_numpy(np.bool_)
        nts = notes_pdf[notes_pdf["cluster"] == a.cluster].sort_values("idx")
        drain, removed = drain_mask(a, opts)
        notes, reasons = split_notes([str(n) for n in nts["note"]])
        plans.append(
            build_plan(
                a,
                rb,
                rd,
                leader,
                drain_dir=drain,
                removed=removed,
                opts=opts,
                notes=notes,
                goal_reasons=reasons,
            )
        )
        placements[a.cluster] = (rb, rd, leader)
    return JobResult(plans=plans, placements=placements)


# -- outputs ---------------------------------------------------------------------------------


def write_plan(plan: Plan, out: Path, **manifest_kw: Any) -> dict[str, str]:
    """Write manifests (a v1 List for ``kubectl apply -f``), Kafka JSON, the report and the
    before/after plot of every disk.

    Without matplotlib (an install without the ``spark`` extra's plotting) the plan is still
    written, with no ``plot.png``, and stderr says so: the plan is the product, the picture
    a view of its report."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "manifests": out / "manifests.json",
        "kafka": out / "reassignment.json",
        "report": out / "report.json",
        "summary": out / "report.txt",
    }
    items = plan.manifests(**manifest_kw)
    files["manifests"].write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1) + "\n"
    )
    files["kafka"].write_text(json.dumps(plan.kafka_reassignment(), indent=1) + "\n")
    files["report"].write_text(plan.report.model_dump_json(by_alias=True, indent=1) + "\n")
    files["summary"].write_text(plan.report.text() + "\n")
    try:
        files["plot"] = write_plot(plan.report, out / "plot.png")
    except ImportError as e:
        print(f"plot.png not written: {e} (install the spark extra)", file=sys.stderr)
    return {k: str(v) for k, v in files.items()}


def iter_outputs(result: JobResult, out: Path) -> Iterator[tuple[Plan, Path]]:
    if len(result.plans) == 1:
        yield result.plans[0], out
        return
    for p in result.plans:
        yield p, out / p.cluster_name
