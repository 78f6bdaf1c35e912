"""What a planning job's launcher reports, decided from what it sees (pure).

Every launcher (``clients.planning_jobs``) sees two things: how its driver is doing (a local
process, a batch/v1 Job, or a SparkApplication's ``status.applicationState``), read into a
:class:`DriverView`; and whether the driver wrote its report into the job's folder. The
job's state is decided the same way for all three (:func:`job_view`): **the outputs decide,
not the exit code**. The job exits 2 when its plan misses a constraint (a plan all the same,
which the Rebalance reports as infeasible from the report), and Kubernetes reports any
non-zero exit as a failure (a Job's ``Failed`` condition, a SparkApplication's ``FAILED``), so
an ended driver that left ``report.json`` succeeded, and one that did not failed, with why.

Also the batch/v1 Job that runs the driver in local mode (:func:`batch_job`): the same image
and arguments as the SparkApplication's driver, ``--master local[*]``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..models.spark_application import (
    DATA_MOUNT,
    DATA_VOLUME,
    ENDED_STATES,
    PLAN_LABELS,
    ApplicationState,
    SparkApplicationStatus,
)
from .rebalance import JobState, JobView

JOB_COMMAND = ("python3", "-m", "jbod_spark.job")
"""The driver's command in the planning image (the SparkApplication's entry file runs the
same ``jbod_spark.job.main``)."""
MEMORY_OVERHEAD = 0.4
"""Share of the driver's heap added for the Job pod's memory: Spark's default overhead for a
non-JVM (PySpark) driver (``spark.kubernetes.memoryOverheadFactor`` 0.4), which also covers
the Python workers of ``local[*]``."""


MAX_OBJECT_NAME = 63
"""A Job's name becomes a label value of its pods (``job-name``), and Spark names the driver's
Service after the application: both at most 63 characters."""


def object_name(job: str) -> str:
    """The Job's or SparkApplication's name for planning job ``job`` (``<rebalance>-<plan>``):
    the job's name when it fits in 63 characters, else its start and a digest of the whole
    (a Rebalance name may take up to 63 characters before ``-<plan>`` is added)."""
    if len(job) <= MAX_OBJECT_NAME:
        return job
    digest = hashlib.sha256(job.encode()).hexdigest()[:8]
    return f"{job[: MAX_OBJECT_NAME - 9].rstrip('-.')}-{digest}"


@dataclass(frozen=True)
class DriverView:
    """How the driver is doing, whatever runs it."""

    ended: bool
    """It will not write anything more (the process exited; a terminal state)."""
    message: str = ""
    """Why it ended, when it ended badly (the launcher's words: exit code and log, the
    Spark Operator's error message, the Job's failure reason), or what it waits for."""


def job_view(name: str, driver: DriverView | None, report_written: bool) -> JobView:
    """The launcher's state of job ``name``: Unknown when no driver is known by that name,
    Running until the driver ended, then Succeeded if it wrote its report, else Failed with
    the driver's message."""
    if driver is None:
        return JobView(name, JobState.UNKNOWN)
    if not driver.ended:
        return JobView(name, JobState.RUNNING, driver.message)
    if report_written:
        return JobView(name, JobState.SUCCEEDED)
    return JobView(name, JobState.FAILED, driver.message or "the driver ended without a report")


def spark_application_driver(obj: Mapping[str, Any]) -> DriverView:
    """A SparkApplication's driver from its status (``status.applicationState``): ended in
    COMPLETED, FAILED and SUBMISSION_FAILED (the planning job's restart policy is Never, so
    none is retried); every other state, known or not, is on the way (SUBMITTED, RUNNING,
    PENDING_RERUN, SUCCEEDING, FAILING, ...), and no state yet means the Spark Operator has
    not picked it up."""
    status = SparkApplicationStatus.model_validate(obj.get("status") or {})
    raw = status.application_state.state
    pod = status.driver_info.pod_name
    where = f" (driver pod {pod})" if pod else ""
    try:
        state = ApplicationState(raw)
    except ValueError:
        return DriverView(False, f"SparkApplication in state {raw}{where}")
    if state == ApplicationState.NEW:
        return DriverView(False, "SparkApplication waiting for the Spark Operator to submit it")
    if state not in ENDED_STATES:
        return DriverView(False, f"SparkApplication {state.value}{where}")
    error = status.application_state.error_message.strip()
    if state == ApplicationState.COMPLETED:  # the message is only read when no report is there
        return DriverView(True, f"SparkApplication COMPLETED{where} but wrote no report")
    return DriverView(True, f"SparkApplication {state.value}{where}: {error or 'no error message'}")


def batch_job_driver(obj: Mapping[str, Any]) -> DriverView:
    """A batch/v1 Job's driver from its conditions: ended once ``Complete`` or ``Failed`` is
    True (not at ``SuccessCriteriaMet``/``FailureTarget``, which come while the pod may still
    be terminating); the failure's reason and message are the Job controller's."""
    status = obj.get("status") or {}
    conditions = {
        str(c.get("type")): c for c in status.get("conditions") or [] if c.get("status") == "True"
    }
    if "Complete" in conditions:
        return DriverView(True, "Job complete but the driver wrote no report")
    failed = conditions.get("Failed")
    if failed is not None:
        reason = str(failed.get("reason") or "Failed")
        text = str(failed.get("message") or "").strip()
        return DriverView(True, f"Job failed: {reason}" + (f": {text}" if text else ""))
    if status.get("active"):
        return DriverView(False, "Job running")
    return DriverView(False, "Job waiting for its pod")


_SPARK_MEMORY = re.compile(r"^([0-9]+)([kmgt]?)$")
_MIB = {"": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def pod_memory(spark_memory: str, overhead: float = MEMORY_OVERHEAD) -> str:
    """The Kubernetes quantity for a driver with Spark memory ``spark_memory`` (``1g``,
    ``512m``; Spark's units are binary) plus its overhead, in whole MiB."""
    m = _SPARK_MEMORY.match(spark_memory.strip().lower())
    if m is None:
        raise ValueError(f"not a Spark memory size: {spark_memory!r}")
    mib = int(m.group(1)) * _MIB[m.group(2)]
    return f"{max(1, round(mib * (1 + overhead)))}Mi"


def batch_job(
    *,
    name: str,
    namespace: str,
    image: str,
    data_claim: str,
    snapshot: str,
    out: str,
    job_args: list[str],
    driver_memory: str,
    owner_references: list[dict[str, Any]] | None = None,
    image_pull_policy: str = "IfNotPresent",
) -> dict[str, Any]:
    """The planning job as a batch/v1 Job: one pod running the driver on ``local[*]`` in the
    planning image, the data claim at ``/data``; never retried (``backoffLimit: 0``: a plan
    that failed once fails again, and the Rebalance says why), no API access."""
    labels = dict(PLAN_LABELS)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner_references:
        meta["ownerReferences"] = owner_references
    memory = pod_memory(driver_memory)
    args = ["--snapshot", snapshot, "--out", out, *job_args]
    args += ["--master", "local[*]", "--driver-memory", driver_memory]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "driver",
                            "image": image,
                            "imagePullPolicy": image_pull_policy,
                            "command": [*JOB_COMMAND],
                            "args": args,
                            "resources": {
                                "requests": {"cpu": "1", "memory": memory},
                                "limits": {"memory": memory},
                            },
                            "volumeMounts": [{"name": DATA_VOLUME, "mountPath": DATA_MOUNT}],
                        }
                    ],
                    "volumes": [
                        {"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": data_claim}}
                    ],
                },
            },
        },
    }
