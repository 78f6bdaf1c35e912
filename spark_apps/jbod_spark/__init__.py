"""Placement planners for JBOD brokers: broker- and disk-aware rebalance plans.

Pure planning (no Spark, no I/O): :func:`plan` (every mode) and :func:`plan_directory_balance`
(directories only, what the demo uses). The Spark driver is ``python -m jbod_spark.job``;
the snapshot collector ``python -m jbod_spark.collect``.
"""

from .options import DirRef, Mode, PlanOptions
from .outputs import Plan, PlanReport
from .planner import plan, plan_directory_balance
from .snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, PartitionLoad, ReplicaInfo

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
