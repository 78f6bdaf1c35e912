"""The SparkApplication (Kubeflow Spark Operator, ``sparkoperator.k8s.io/v1beta2``) that runs
the planner on Kubernetes. :func:`render_spark_application` is the source of truth;
``spark_apps/k8s/sparkapplication.yaml`` is the same manifest with ``${VARIABLE}`` placeholders
(for ``envsubst``), kept equal by a test.

The snapshot and plan locations are paths on a PersistentVolumeClaim mounted at ``/data`` in
the driver (and executors): the collector writes the snapshot there, the job writes the plan.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

SPARK_VERSION = "4.1.1"
MAIN_FILE = "local:///opt/jbod/spark/main.py"
DATA_MOUNT = "/data"

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
    volume_mounts = [{"name": "data", "mountPath": DATA_MOUNT}]
    labels = {"app.kubernetes.io/name": "jbod-plan", "app.kubernetes.io/part-of": "jbod-operator"}
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "mainApplicationFile": main_application_file,
            # --master "": keep the master the operator's spark-submit set
            "arguments": [
                "--snapshot",
                snapshot,
                "--out",
                out,
                "--mode",
                mode,
                "--master",
                "",
                *(extra_args or []),
            ],
            "sparkVersion": SPARK_VERSION,
            "sparkConf": {
                "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
                "spark.ui.showConsoleProgress": "false",
            },
            "restartPolicy": {"type": "Never"},
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": data_claim}}],
            "driver": {
                "cores": 1,
                "memory": driver_memory,
                "serviceAccount": service_account,
                "labels": labels,
                "volumeMounts": volume_mounts,
            },
            "executor": {
                "cores": 1,
                "instances": int(executors),
                "memory": executor_memory,
                "labels": labels,
                "volumeMounts": volume_mounts,
            },
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jbod_spark.k8s", description=__doc__)
    for var, (param, default) in TEMPLATE_VARS.items():
        ap.add_argument("--" + param.replace("_", "-"), dest=param, default=default, help=var)
    ns = ap.parse_args(argv)
    print(json.dumps(render_spark_application(**vars(ns)), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
