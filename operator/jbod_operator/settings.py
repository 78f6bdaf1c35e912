"""Operator settings: one typed class fed from ``JBOD_OPERATOR_*`` environment variables.

Validated once at start-up; a bad value stops the operator with a message naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PREFIX = "JBOD_OPERATOR_"


class SettingsError(ValueError):
    pass


SparkMemory = Annotated[str, Field(pattern=r"^[0-9]+[kmgt]?$")]
"""Spark's memory syntax (``spark.driver.memory``): a number and an optional k, m, g or t."""


class RebalanceLauncher(StrEnum):
    """How a Rebalance's planning job (the Spark driver) is launched: the one thing that
    differs between where the operator runs; the snapshot in and the plan out travel the same
    way through every launcher (``clients.planning_jobs.JobLauncher``)."""

    LOCAL = "local"
    """A local process on ``local[*]`` (tests, the demo, a machine without a kubelet)."""
    JOB = "job"
    """A batch/v1 Job running the planning image on ``local[*]`` (Kubernetes without the Spark
    Operator)."""
    SPARK_APPLICATION = "sparkapplication"
    """A SparkApplication (Kubeflow Spark Operator, ``sparkoperator.k8s.io/v1beta2``)."""
    AUTO = "auto"
    """SparkApplication when the API server serves the Spark Operator's CRD
    (``sparkapplications.sparkoperator.k8s.io``), else a Job; decided on first use."""


IN_CLUSTER_LAUNCHERS = frozenset(
    {RebalanceLauncher.JOB, RebalanceLauncher.SPARK_APPLICATION, RebalanceLauncher.AUTO}
)
"""Launchers whose driver runs in a pod: the snapshot and the plan travel through a
PersistentVolumeClaim the operator mounts at ``rebalance_work_dir``."""


class OperatorSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str | None = None
    """Watch only this namespace (``None``: all namespaces)."""
    controller_listen_host: str = "0.0.0.0"
    controller_listen_port: Annotated[int, Field(ge=0, le=65535)] = 8080
    """Where the brokers-to-controller endpoint listens (AlterPartition, log dir events)."""
    controller_url: str = "http://jbod-operator.jbod-system.svc:8080"
    """The endpoint's address as brokers reach it; the cluster's path is appended."""
    broker_url_template: str = "http://{sts}-{id}.{service}.{namespace}.svc:9092"
    """How the operator reaches broker ``id`` of a cluster: fields {name} {namespace} {id}
    {sts} {service}. In-cluster DNS by default; local processes use loopback URLs."""
    broker_endpoints_file: str | None = None
    """JSON ``{"<namespace>/<cluster>": {"<id>": "<url>"}}``, consulted before the template
    (local brokers on free ports)."""
    broker_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 5.0
    reconcile_interval_seconds: Annotated[float, Field(gt=0, le=3600)] = 10.0
    """The periodic pass that compares what brokers report with status (kopf #641)."""
    lease_namespace: str | None = None
    """Where the leadership Lease lives (default: ``namespace``, else "default")."""
    lease_name: str = "jbod-operator-leader"
    lease_seconds: Annotated[float, Field(ge=2, le=300)] = 15.0
    """A standby takes over this long after the active operator stopped renewing."""
    lease_renew_seconds: Annotated[float, Field(gt=0, le=60)] = 3.0
    session_timeout_seconds: Annotated[float, Field(gt=0, le=300)] = 6.0
    """A broker whose heartbeats stop for this long is dead: its partitions get new leaders."""
    move_poll_seconds: Annotated[float, Field(gt=0, le=60)] = 1.0
    """How often running LogDirMoves are polled for progress."""
    reassignment_poll_seconds: Annotated[float, Field(gt=0, le=60)] = 0.5
    """How often a running PartitionReassignment looks again (ISR joins, deletions, batches)."""
    rebalance_poll_seconds: Annotated[float, Field(gt=0, le=60)] = 1.0
    """How often a Rebalance looks again at its planning job and its children."""
    rebalance_launcher: RebalanceLauncher = RebalanceLauncher.LOCAL
    rebalance_work_dir: str | None = None
    """Where each job's folder is (``<namespace>/<job>/``: ``snapshot.json`` in, ``out/``
    out). Local: default a ``jbod-rebalance`` folder in the system's temporary directory. In
    a pod (job, sparkapplication, auto): required, the mount of ``rebalance_data_claim``."""
    rebalance_driver_memory: SparkMemory = "1g"
    """The Spark driver's memory (spark.driver.memory) for the planning job."""
    rebalance_data_claim: str | None = None
    """The PersistentVolumeClaim the driver pod mounts at ``/data`` (the same volume as
    ``rebalance_work_dir``), in the Rebalance's namespace."""
    rebalance_image: str | None = None
    """The planning image (Spark and ``jbod_spark``) of the Job or the SparkApplication."""
    rebalance_image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    rebalance_service_account: str | None = None
    """The SparkApplication driver's ServiceAccount (it creates its executor pods)."""
    rebalance_executor_memory: SparkMemory = "1g"
    rebalance_executors: Annotated[int, Field(ge=1, le=1000)] = 1
    log_level_name: str = "INFO"
    preferred_leader_election: bool = True
    """Return leadership to the preferred replica once it is back in the ISR (Kafka's
    auto.leader.rebalance.enable, on by default)."""

    @model_validator(mode="after")
    def _launcher_needs(self) -> OperatorSettings:
        """A driver in a pod needs the image, the claim and where the operator mounts it;
        a SparkApplication also the driver's ServiceAccount: said at start, not at the first
        Rebalance."""
        if self.rebalance_launcher not in IN_CLUSTER_LAUNCHERS:
            return self
        need = ["rebalance_image", "rebalance_data_claim", "rebalance_work_dir"]
        if self.rebalance_launcher != RebalanceLauncher.JOB:
            need.append("rebalance_service_account")
        missing = [PREFIX + n.upper() for n in need if not getattr(self, n)]
        if missing:
            raise ValueError(
                f"the {self.rebalance_launcher.value} launcher needs {', '.join(missing)}"
            )
        return self


def load_settings(env: Mapping[str, str] | None = None) -> OperatorSettings:
    environ = os.environ if env is None else env
    fields = OperatorSettings.model_fields
    values: dict[str, str] = {}
    for key, value in environ.items():
        if key.startswith(PREFIX):
            name = key[len(PREFIX) :].lower()
            if name not in fields:
                raise SettingsError(f"unknown setting {key}")
            values[name] = value
    try:
        return OperatorSettings.model_validate(values)
    except ValidationError as e:
        first = e.errors()[0]
        name = PREFIX + str(first["loc"][0]).upper() if first["loc"] else "(settings)"
        raise SettingsError(f"{name}: {first['msg']}") from e
