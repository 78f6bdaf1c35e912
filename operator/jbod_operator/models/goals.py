"""The goals a Rebalance plans for, named as Cruise Control's users know them, and their order.

One home for the names, the hard/soft split, the default priority order and the default
thresholds: the Rebalance's spec (``spec.goals``, ``spec.requiredGoals``), the planner
(``jbod_spark.goals``, ``jbod_spark.goal_moves``) and the report (``plan_report.GoalReport``)
all take them from here.

Hard goals are never broken by a plan: a plan that cannot keep one is infeasible. Soft goals
are worked on in priority order, and a move made for a lower goal must not take a higher goal
further from its bounds (Cruise Control's rule: each goal optimises without undoing the goals
before it). A soft goal not met is reported with its reason; it fails the proposal only when
the Rebalance names it in ``requiredGoals``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from .common import CamelModel


class GoalName(StrEnum):
    """Cruise Control's goal names (``OneReplicaPerBrokerGoal`` is ours: CC's model assumes
    it; here it is checked like the others)."""

    RACK_AWARE = "RackAwareGoal"
    REPLICA_CAPACITY = "ReplicaCapacityGoal"
    DISK_CAPACITY = "DiskCapacityGoal"
    ONE_REPLICA_PER_BROKER = "OneReplicaPerBrokerGoal"
    INTRA_BROKER_DISK_USAGE = "IntraBrokerDiskUsageDistributionGoal"
    DISK_USAGE = "DiskUsageDistributionGoal"
    REPLICA_DISTRIBUTION = "ReplicaDistributionGoal"
    LEADER_REPLICA_DISTRIBUTION = "LeaderReplicaDistributionGoal"
    TOPIC_REPLICA_DISTRIBUTION = "TopicReplicaDistributionGoal"
    LEADER_BYTES_IN = "LeaderBytesInDistributionGoal"
    POTENTIAL_NW_OUT = "PotentialNwOutGoal"


HARD_GOALS: tuple[GoalName, ...] = (
    GoalName.RACK_AWARE,
    GoalName.REPLICA_CAPACITY,
    GoalName.DISK_CAPACITY,
    GoalName.ONE_REPLICA_PER_BROKER,
)
"""Always first, in this order, and never reordered or dropped."""

DEFAULT_SOFT_GOALS: tuple[GoalName, ...] = (
    GoalName.INTRA_BROKER_DISK_USAGE,
    GoalName.DISK_USAGE,
    GoalName.REPLICA_DISTRIBUTION,
    GoalName.LEADER_REPLICA_DISTRIBUTION,
    GoalName.TOPIC_REPLICA_DISTRIBUTION,
    GoalName.LEADER_BYTES_IN,
    GoalName.POTENTIAL_NW_OUT,
)
"""The soft goals in their default priority order (highest first)."""

SOFT_GOALS = frozenset(DEFAULT_SOFT_GOALS)

DEFAULT_BALANCE_THRESHOLD = 1.10
"""Cruise Control's ``*.balance.threshold``: every broker within ±10 % of the average."""
DEFAULT_TOPIC_BALANCE_THRESHOLD = 3.0
"""Cruise Control's ``topic.replica.count.balance.threshold``."""
TOPIC_MIN_GAP = 2
TOPIC_MAX_GAP = 40
"""Cruise Control's ``topic.replica.count.balance.{min,max}.gap``: a topic's replicas on one
broker may differ from the topic's average by at least 2 and at most 40, whatever the
threshold says (a topic of 6 replicas over 4 brokers is not held to ±10 %)."""
DEFAULT_MAX_REPLICAS_PER_BROKER = 10_000
"""Cruise Control's ``max.replicas.per.broker``."""

Threshold = Annotated[float, Field(ge=1.0, le=10.0)]
LowUtilisation = Annotated[float, Field(ge=0.0, le=1.0)]


class GoalThresholds(CamelModel):
    """The balance thresholds of the distribution goals, relative to the average (Cruise
    Control's ``*.balance.threshold`` and ``*.low.utilization.threshold``): a broker whose
    value is within ``[avg * (2 - t), avg * t]`` is balanced; counts round the bounds outward
    (floor and ceiling), as Cruise Control's do."""

    disk: Threshold = DEFAULT_BALANCE_THRESHOLD
    """DiskUsageDistributionGoal: each broker's disk utilisation against the average."""
    replica_count: Threshold = DEFAULT_BALANCE_THRESHOLD
    leader_replica_count: Threshold = DEFAULT_BALANCE_THRESHOLD
    topic_replica_count: Threshold = DEFAULT_TOPIC_BALANCE_THRESHOLD
    network: Threshold = DEFAULT_BALANCE_THRESHOLD
    """LeaderBytesInDistributionGoal and PotentialNwOutGoal."""
    disk_low_utilisation: LowUtilisation = 0.0
    """Below this average disk utilisation DiskUsageDistributionGoal is met whatever the spread
    (a cluster whose disks are nearly empty has nothing worth moving)."""
    network_low_utilisation_bytes_per_second: Annotated[float, Field(ge=0.0)] = 0.0
    """Below this average rate per broker the network goals are met."""
    max_replicas_per_broker: Annotated[int, Field(ge=1)] = DEFAULT_MAX_REPLICAS_PER_BROKER


def goal_order(soft: list[GoalName] | None) -> tuple[GoalName, ...]:
    """Every goal in priority order: the hard goals, then ``soft`` (the default order when
    none is given). A soft goal left out of ``soft`` is not worked on but still reported."""
    chosen = list(DEFAULT_SOFT_GOALS) if soft is None else list(dict.fromkeys(soft))
    bad = [g for g in chosen if g not in SOFT_GOALS]
    if bad:
        raise ValueError(f"not soft goals (the hard goals always come first): {bad}")
    return (*HARD_GOALS, *chosen)
