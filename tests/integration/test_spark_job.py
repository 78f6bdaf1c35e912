"""The Spark job on local[*]: grouped pandas functions per cluster and per broker give the same
plans as the pure planner; the CLI writes manifests that validate; metrics are aggregated by
Spark SQL; the SparkApplication manifest renders. One SparkSession for the whole module."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pytest

pyspark = pytest.importorskip("pyspark")

from jbod_operator.models import LogDirMove, PartitionReassignment  # noqa: E402
from jbod_spark import PlanOptions, plan  # noqa: E402
from jbod_spark.frames import tables_from_arrays  # noqa: E402
from jbod_spark.job import main as plan_main  # noqa: E402
from jbod_spark.k8s import TEMPLATE_VARS, render_spark_application  # noqa: E402
from jbod_spark.options import DirRef, Mode  # noqa: E402
from jbod_spark.spark_job import (  # noqa: E402
    aggregate_metrics,
    apply_loads,
    load_fleet,
    run_job,
    spark_session,
)
from jbod_spark.synthetic import synthetic_cluster, to_snapshot  # noqa: E402

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    s = spark_session(driver_memory="2g", extra={"spark.sql.shuffle.partitions": "2"})
    try:
        yield s
    finally:
        s.stop()


def test_fleet_plans_equal_the_pure_planner(spark: Any) -> None:
    clusters = [
        synthetic_cluster(3, 12, 4, 6000, cluster="east"),
        synthetic_cluster(4, 9, 3, 3000, cluster="west"),
    ]
    opts = PlanOptions()
    res = run_job(spark, clusters, opts)
    assert [p.cluster_name for p in res.plans] == ["east", "west"]
    for a, p in zip(clusters, res.plans, strict=True):
        assert p == plan(a, opts)
        assert p.report.ok
        assert p.report.summary.worst_spread_pp_after <= 5.0
        assert p.report.summary.bytes_moved <= 1.2 * p.report.summary.lower_bound_bytes


def test_remove_dirs_on_spark_equals_the_pure_planner(spark: Any) -> None:
    """The dirs a remove-dirs plan names reach the workers (their coded frames carry no dir
    names): the Spark plan is the pure planner's, and the named dirs end empty."""
    a = synthetic_cluster(5, 4, 3, 600, cluster="east")
    opts = PlanOptions(
        mode=Mode.REMOVE_DIRS,
        log_dirs=[DirRef(broker_id=0, log_dir="d01"), DirRef(broker_id=2, log_dir="d00")],
    )
    (p,) = run_job(spark, [a], opts).plans
    assert p == plan(a, opts)
    checks = {c.name: c.ok for c in p.report.constraints}
    assert checks["drained_dirs_empty"] and checks["destinations_valid"], p.report.constraints
    drained = {(d.broker_id, d.name) for d in p.report.dirs if d.drained}
    assert drained == {(0, "d01"), (2, "d00")}
    assert all(d.used_after == 0 for d in p.report.dirs if d.drained)


def test_cli_writes_manifests_kafka_json_and_report(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = synthetic_cluster(9, 6, 3, 900, cluster="demo")
    snap = tmp_path / "snapshot.json"
    snap.write_text(to_snapshot(a).dump_json())
    out = tmp_path / "plan"
    assert plan_main(["--snapshot", str(snap), "--out", str(out), "--mode", "dirs-only"]) == 0
    # the last line says where the time went (bench/rebalance.py and the operator's log read it)
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["constraints_ok"] is True
    assert set(last["phases"]) == {"session_s", "read_s", "plan_s", "stop_s", "outputs_s"}
    assert all(v >= 0 for v in last["phases"].values())
    items = json.loads((out / "manifests.json").read_text())["items"]
    kinds = {i["kind"] for i in items}
    assert kinds == {"LogDirMove"}
    for i in items:
        LogDirMove.model_validate(i)
    kafka = json.loads((out / "reassignment.json").read_text())
    assert kafka["version"] == 1 and kafka["partitions"]
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["worstSpreadPpAfter"] <= 5.0
    assert all(c["ok"] for c in report["constraints"])
    assert "lower bound" in (out / "report.txt").read_text()
    assert report["summary"]["feasible"] is (report["summary"]["infeasibleReasons"] == [])
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the caller's session is still usable
    assert spark.range(3).count() == 3


def test_parquet_fleet_with_metric_history(spark: Any, tmp_path: Path) -> None:
    a = synthetic_cluster(11, 6, 2, 600, cluster="fleet-a")
    b = synthetic_cluster(12, 4, 2, 300, cluster="fleet-b")
    base = tmp_path / "fleet"
    for name in ("brokers", "log_dirs", "replicas"):
        (base / name).mkdir(parents=True)
        pd.concat([tables_from_arrays(x)[name] for x in (a, b)]).to_parquet(
            base / name / "part-0.parquet", index=False
        )
    # metric history: topic t00000 partition 0 of fleet-a grows 1 MB/s, others do not
    t0 = pd.Timestamp("2026-01-01T00:00:00")
    rows = []
    for k in range(5):
        rows.append(
            ("fleet-a", t0 + pd.Timedelta(minutes=k), "t00000", 0, 10**9 + k * 60 * 10**6, 2.0e6)
        )
        rows.append(("fleet-a", t0 + pd.Timedelta(minutes=k), "t00000", 1, 10**9, 1.0e3))
    hist = pd.DataFrame(rows, columns=["cluster", "time", "topic", "partition", "size", "bytes_in"])
    # Spark reads micro-second timestamps (pandas writes nanoseconds by default)
    hist.to_parquet(tmp_path / "history.parquet", index=False, coerce_timestamps="us")
    loads: Any = aggregate_metrics(spark, str(tmp_path / "history.parquet")).toPandas()
    loads = loads.sort_values(["topic", "partition"]).reset_index(drop=True)
    assert loads["growth_bytes_per_second"].tolist() == pytest.approx([1.0e6, 0.0])
    assert loads["bytes_in_per_second"].tolist() == pytest.approx([2.0e6, 1.0e3])

    clusters = load_fleet(spark, str(base))
    assert [c.cluster for c in clusters] == ["fleet-a", "fleet-b"]
    assert np.array_equal(clusters[0].rep_dir, a.rep_dir)
    with_loads = apply_loads(clusters[0], loads)
    assert with_loads.part_growth[0] == pytest.approx(1.0e6)
    opts = PlanOptions(mode=Mode.FULL, horizon_seconds=3600)
    res = run_job(spark, [with_loads, clusters[1]], opts)
    assert res.plans[0] == plan(with_loads, opts)
    assert res.plans[1] == plan(clusters[1], opts)


def test_spark_application_template_matches_the_renderer() -> None:
    m = render_spark_application(
        image="registry.example/jbod-spark:1",
        service_account="planner",
        snapshot="/data/s.json",
        out="/data/out",
        mode="dirs-only",
    )
    assert m["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and m["kind"] == "SparkApplication"
    spec = m["spec"]
    assert spec["type"] == "Python" and spec["image"] == "registry.example/jbod-spark:1"
    assert spec["driver"]["serviceAccount"] == "planner"
    args = spec["arguments"]
    assert args[args.index("--snapshot") + 1] == "/data/s.json"
    assert args[args.index("--out") + 1] == "/data/out"
    assert args[args.index("--master") + 1] == ""
    yaml = pytest.importorskip("yaml")
    text = (ROOT / "spark_apps" / "k8s" / "sparkapplication.yaml").read_text()
    defaults = {var: default for var, (_, default) in TEMPLATE_VARS.items()}
    rendered = re.sub(r"\$\{([A-Z_]+)\}", lambda mt: defaults[mt.group(1)], text)
    from_template = yaml.safe_load(rendered)
    from_code = render_spark_application()
    assert from_template == from_code


def test_partition_reassignments_validate_for_a_full_plan(spark: Any) -> None:
    a = synthetic_cluster(21, 9, 3, 1800, cluster="full")
    res = run_job(spark, [a], PlanOptions())
    p = res.plans[0]
    prs = [PartitionReassignment.model_validate(m) for m in p.partition_reassignments()]
    ldms = [LogDirMove.model_validate(m) for m in p.log_dir_moves()]
    assert prs and ldms
    for pr in prs:
        for t in pr.spec.partitions:
            assert t.log_dirs is not None and len(t.log_dirs) == len(t.replicas)
