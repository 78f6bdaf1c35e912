"""The history continuous detection keeps is the Spark job's metric history: written as JSON
lines by the operator (``handlers.balance.metric_history``), read by ``aggregate_metrics`` (what
``python -m jbod_spark.job --metrics FILE.jsonl`` runs) into per-partition growth rates."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from jbod_operator.handlers.balance import Detector, metric_history
from jbod_operator.handlers.context import Ctx
from jbod_operator.plan.balance_trigger import History, PartitionSize, Sample
from jbod_spark.spark_job import aggregate_metrics, spark_session

# py4j leaves its sockets to the garbage collector (as in test_spark_job.py).
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    s = spark_session(driver_memory="1g", extra={"spark.sql.shuffle.partitions": "2"})
    try:
        yield s
    finally:
        s.stop()


def test_the_operator_s_history_is_the_job_s_metric_history(spark: Any, tmp_path: Path) -> None:
    history = History(10)
    for k in range(5):
        history.add(
            Sample(
                1_000.0 + 60 * k,
                frozenset({0}),
                frozenset({0}),
                (),
                (
                    PartitionSize("clicks", 0, 10**9 + k * 60 * 10**6),  # grows 1 MB/s
                    PartitionSize("clicks", 1, 5 * 10**8),  # steady
                ),
            )
        )
    ctx = cast(Ctx, SimpleNamespace(detectors={("kafka", "demo"): Detector(history)}))
    path = tmp_path / "history.jsonl"
    path.write_text(metric_history(ctx, "kafka", "demo"))
    assert metric_history(ctx, "kafka", "other") == ""

    loads: Any = aggregate_metrics(spark, str(path)).toPandas()
    loads = loads.sort_values(["topic", "partition"]).reset_index(drop=True)
    assert loads["cluster"].tolist() == ["demo", "demo"]
    assert loads["growth_bytes_per_second"].tolist() == pytest.approx([1.0e6, 0.0])
    assert loads["bytes_in_per_second"].tolist() == pytest.approx([1.0e6, 0.0])
