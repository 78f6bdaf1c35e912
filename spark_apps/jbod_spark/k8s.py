"""The SparkApplication (Kubeflow Spark Operator, ``sparkoperator.k8s.io/v1beta2``) that runs
the planner on Kubernetes, for a run by hand. The manifest is the operator's typed model
(``jbod_operator.models.spark_application.build_spark_application``, which a Rebalance's
planning job is built with too): one source for the operator, this command, the chart's
template and ``spark_apps/k8s/sparkapplication.yaml`` (the same manifest with ``${VARIABLE}``
placeholders, for ``envsubst``), the last two kept equal to it by tests.

The snapshot and plan locations are paths on a PersistentVolumeClaim mounted at ``/data`` in
the driver (and executors): the collector writes the snapshot there, the job writes the plan.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from jbod_operator.models.spark_application import (
    DATA_MOUNT,
    MAIN_FILE,
    SPARK_VERSION,
    build_spark_application,
)

__all__ = ["DATA_MOUNT", "MAIN_FILE", "SPARK_VERSION", "TEMPLATE_VARS", "render_spark_application"]

# placeholder name -> (render_spark_application parameter, default)
TEMPLATE_VARS: dict[str, tuple[str, str]] = {
    "NAME": ("name", "jbod-plan"),
    "NAMESPACE": ("namespace", "default"),
    "IMAGE": ("image", "ghcr.io/jbod-operator/spark:0.1.0"),
    "SERVICE_ACCOUNT": ("service_account", "jbod-spark"),
    "DATA_CLAIM": ("data_claim", "jbod-plans"),
    "SNAPSHOT": ("snapshot", "/data/snapshot.json"),
    "PLAN_OUT": ("out", "/data/plan"),
    "MODE": ("mode", "full"),
    "DRIVER_MEMORY": ("driver_memory", "6g"),
    "EXECUTOR_MEMORY": ("executor_memory", "4g"),
    "EXECUTORS": ("executors", "2"),
}


def render_spark_application(
    *,
    name: str = "jbod-plan",
    namespace: str = "default",
    image: str = "ghcr.io/jbod-operator/spark:0.1.0",
    service_account: str = "jbod-spark",
    data_claim: str = "jbod-plans",
    snapshot: str = "/data/snapshot.json",
    out: str = "/data/plan",
    mode: str = "full",
    driver_memory: str = "6g",
    executor_memory: str = "4g",
    executors: int | str = 2,
    extra_args: list[str] | None = None,
    main_application_file: str = MAIN_FILE,
) -> dict[str, Any]:
    """The manifest :func:`build_spark_application` (the operator's model, which a Rebalance's
    SparkApplication is built with too) renders for a run by hand: ``--mode`` and
    ``extra_args`` are the job's arguments."""
    return build_spark_application(
        name=name,
        namespace=namespace,
        image=image,
        service_account=service_account,
        data_claim=data_claim,
        snapshot=snapshot,
        out=out,
        job_args=["--mode", mode, *(extra_args or [])],
        driver_memory=driver_memory,
        executor_memory=executor_memory,
        executors=int(executors),
        main_application_file=main_application_file,
    ).dump()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jbod_spark.k8s", description=__doc__)
    for var, (param, default) in TEMPLATE_VARS.items():
        ap.add_argument("--" + param.replace("_", "-"), dest=param, default=default, help=var)
    ns = ap.parse_args(argv)
    print(json.dumps(render_spark_application(**vars(ns)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
