"""The Kubeflow Spark Operator's ``SparkApplication`` (``sparkoperator.k8s.io/v1beta2``), as far
as the planning job uses it: the one source of the manifest the operator creates for a
Rebalance, the one ``python -m jbod_spark.k8s`` prints, and (through a test that compares
them) the chart's ``templates/sparkapplication.yaml``.

Field names and enums follow the Spark Operator's API types (``api/v1beta2/
sparkapplication_types.go``, release v2.5.2); ``tests/fixtures/`` carries its CRD, against which
the API server validates what :func:`build_spark_application` renders. The status is read
leniently (a newer Spark Operator may add fields or states): what the planning job needs is
``status.applicationState`` (state and error message) and the driver's pod name.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .common import CamelModel

SPARK_GROUP = "sparkoperator.k8s.io"
SPARK_API_VERSION = f"{SPARK_GROUP}/v1beta2"
SPARK_APPLICATIONS_CRD = f"sparkapplications.{SPARK_GROUP}"
"""The CRD whose presence (served) makes ``auto`` launch planning jobs as SparkApplications."""
SPARK_VERSION = "4.1.1"
"""Spark in the planning image (pyspark's version in the ``spark`` extra)."""
MAIN_FILE = "local:///opt/jbod/spark/main.py"
"""The job's entry file as the driver sees it (``spark_apps/k8s/main.py`` in the image)."""
DATA_MOUNT = "/data"
"""Where the planning data volume (snapshot in, plan out) is mounted in the driver."""
DATA_VOLUME = "data"
PLAN_LABELS = {"app.kubernetes.io/name": "jbod-plan", "app.kubernetes.io/part-of": "jbod-operator"}
"""Labels of every planning job and its pods (SparkApplication driver/executors, Job pod)."""
DEFAULT_SPARK_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "200000",
    "spark.ui.showConsoleProgress": "false",
}
"""Arrow between the JVM and the planner's grouped pandas functions; no progress bar in logs."""


class ApplicationState(StrEnum):
    """``status.applicationState.state`` (``ApplicationStateType``): the Spark Operator's
    states. Terminal for a ``restartPolicy: Never`` application: COMPLETED, FAILED,
    SUBMISSION_FAILED."""

    NEW = ""
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    SUBMISSION_FAILED = "SUBMISSION_FAILED"
    PENDING_RERUN = "PENDING_RERUN"
    INVALIDATING = "INVALIDATING"
    SUCCEEDING = "SUCCEEDING"
    FAILING = "FAILING"
    SUSPENDING = "SUSPENDING"
    SUSPENDED = "SUSPENDED"
    RESUMING = "RESUMING"
    UNKNOWN = "UNKNOWN"


ENDED_STATES = frozenset(
    {ApplicationState.COMPLETED, ApplicationState.FAILED, ApplicationState.SUBMISSION_FAILED}
)
"""The driver ended for good (no rerun: the planning job's restart policy is Never)."""


class VolumeMount(CamelModel):
    name: str
    mount_path: str
    sub_path: str | None = None
    read_only: bool | None = None


class ClaimSource(CamelModel):
    claim_name: str
    read_only: bool | None = None


class Volume(CamelModel):
    name: str
    persistent_volume_claim: ClaimSource


class RestartPolicy(CamelModel):
    type: Literal["Never", "Always", "OnFailure"] = "Never"
    on_failure_retries: Annotated[int, Field(ge=0)] | None = None


class SparkPod(CamelModel):
    """What the driver and the executors have in common (``SparkPodSpec``)."""

    cores: Annotated[int, Field(ge=1)] = 1
    memory: str
    labels: dict[str, str] = Field(default_factory=dict)
    volume_mounts: list[VolumeMount] = Field(default_factory=list)


class DriverSpec(SparkPod):
    service_account: str | None = None


class ExecutorSpec(SparkPod):
    instances: Annotated[int, Field(ge=1)] = 1


class SparkApplicationSpec(CamelModel):
    type: Literal["Python", "Java", "Scala", "R"] = "Python"
    python_version: Literal["2", "3"] = "3"
    mode: Literal["cluster", "client"] = "cluster"
    image: str
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    main_application_file: str = MAIN_FILE
    arguments: list[str] = Field(default_factory=list)
    spark_version: str = SPARK_VERSION
    spark_conf: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_SPARK_CONF))
    time_to_live_seconds: Annotated[int, Field(ge=1)] | None = None
    restart_policy: RestartPolicy = Field(default_factory=RestartPolicy)
    volumes: list[Volume] = Field(default_factory=list)
    driver: DriverSpec
    executor: ExecutorSpec


class ObjectMeta(CamelModel):
    name: str
    namespace: str
    labels: dict[str, str] = Field(default_factory=dict)
    owner_references: list[dict[str, Any]] | None = None


class SparkApplication(CamelModel):
    api_version: Literal["sparkoperator.k8s.io/v1beta2"] = "sparkoperator.k8s.io/v1beta2"
    kind: Literal["SparkApplication"] = "SparkApplication"
    metadata: ObjectMeta
    spec: SparkApplicationSpec


class _Lenient(BaseModel):
    """The Spark Operator's status as read: unknown fields ignored, any state string kept."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class AppState(_Lenient):
    state: str = ""
    error_message: str = ""


class DriverInfo(_Lenient):
    pod_name: str = ""


class SparkApplicationStatus(_Lenient):
    application_state: AppState = Field(default_factory=AppState)
    driver_info: DriverInfo = Field(default_factory=DriverInfo)
    execution_attempts: int = 0
    termination_time: str | None = None


def job_file(job_dir: str, name: str) -> str:
    """A file (or folder) of the job whose folder is ``job_dir`` (relative to the data
    volume), as the driver sees it."""
    return f"{DATA_MOUNT}/{job_dir}".rstrip("/") + f"/{name}"


def plan_paths(job_dir: str) -> tuple[str, str]:
    """The snapshot and the output folder of a job whose folder is ``job_dir``, as the driver
    sees them."""
    return job_file(job_dir, "snapshot.json"), job_file(job_dir, "out")


def build_spark_application(
    *,
    name: str,
    namespace: str,
    image: str,
    service_account: str,
    data_claim: str,
    snapshot: str,
    out: str,
    job_args: list[str],
    driver_memory: str,
    executor_memory: str,
    executors: int,
    labels: dict[str, str] | None = None,
    owner_references: list[dict[str, Any]] | None = None,
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent",
    main_application_file: str = MAIN_FILE,
    spark_version: str = SPARK_VERSION,
    spark_conf: dict[str, str] | None = None,
    time_to_live_seconds: int | None = None,
) -> SparkApplication:
    """The planning job as a SparkApplication: ``python -m jbod_spark.job --snapshot S --out O
    ARGS --master ""`` (the empty master keeps the one the Spark Operator's spark-submit set),
    with the data claim mounted at ``/data`` in the driver and the executors (a fleet's Parquet
    tables are read by executors; the operator's JSON snapshot only by the driver)."""
    mounts = [VolumeMount(name=DATA_VOLUME, mount_path=DATA_MOUNT)]
    pod_labels = {**PLAN_LABELS, **(labels or {})}
    return SparkApplication(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            labels=pod_labels,
            owner_references=owner_references,
        ),
        spec=SparkApplicationSpec(
            image=image,
            image_pull_policy=image_pull_policy,
            main_application_file=main_application_file,
            arguments=["--snapshot", snapshot, "--out", out, *job_args, "--master", ""],
            spark_version=spark_version,
            spark_conf=dict(DEFAULT_SPARK_CONF if spark_conf is None else spark_conf),
            time_to_live_seconds=time_to_live_seconds,
            volumes=[
                Volume(name=DATA_VOLUME, persistent_volume_claim=ClaimSource(claim_name=data_claim))
            ],
            driver=DriverSpec(
                memory=driver_memory,
                service_account=service_account,
                labels=pod_labels,
                volume_mounts=mounts,
            ),
            executor=ExecutorSpec(
                instances=executors,
                memory=executor_memory,
                labels=pod_labels,
                volume_mounts=mounts,
            ),
        ),
    )
