"""Placement planners for JBOD brokers: broker- and disk-aware rebalance plans.

Pure planning (no Spark, no I/O): :func:`plan` (every mode) and :func:`plan_directory_balance`
(directories only, what the demo uses). The Spark driver is ``python -m jbod_spark.job``;
the snapshot collector ``python -m jbod_spark.collect``. The snapshot and report models live in
the operator's pure models (:mod:`jbod_operator.models.snapshot`,
:mod:`jbod_operator.models.plan_report`), which the operator reads without Spark; they are
named here too because they are this package's inputs and outputs.
"""

from jbod_operator.models.plan_report import PlanReport
from jbod_operator.models.snapshot import (
    BrokerInfo,
    ClusterSnapshot,
    LogDirInfo,
    PartitionLoad,
    ReplicaInfo,
)

from .options import DirRef, Mode, PlanOptions
from .outputs import Plan
from .planner import plan, plan_directory_balance

__all__ = [
    "BrokerInfo",
    "ClusterSnapshot",
    "DirRef",
    "LogDirInfo",
    "Mode",
    "PartitionLoad",
    "Plan",
    "PlanOptions",
    "PlanReport",
    "ReplicaInfo",
    "plan",
    "plan_directory_balance",
]
