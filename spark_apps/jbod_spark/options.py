"""Planner options and modes (the anchors' modes: full, disks only, add/remove brokers, remove
disks, and a targeted mode that only relieves hot directories)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from jbod_operator.models.goals import GoalName, GoalThresholds, goal_order


class Mode(StrEnum):
    FULL = "full"
    DIRS_ONLY = "dirs-only"
    ADD_BROKERS = "add-brokers"
    REMOVE_BROKERS = "remove-brokers"
    REMOVE_DIRS = "remove-dirs"
    TARGETED = "targeted"


class DirRef(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )
    broker_id: Annotated[int, Field(ge=0)]
    log_dir: Annotated[str, Field(min_length=1)]
    """The dir's name or path."""


Fraction = Annotated[float, Field(gt=0.0, le=1.0)]


class PlanOptions(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    mode: Mode = Mode.FULL
    capacity_threshold: Fraction = 0.8
    """No directory may end above this fraction of its capacity (Cruise Control's 0.8)."""
    dir_balance_tolerance: Annotated[float, Field(ge=0.0, le=1.0)] = 0.04
    """Accepted spread (max - min utilisation) between the directories of one broker. A broker
    already within it is left alone: that is the "skip moves that gain too little" rule."""
    broker_balance_tolerance: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    """An absolute band for DiskUsageDistributionGoal: brokers' utilisations (bytes /
    capacity) within this spread around the average. None (the default): the relative
    threshold ``thresholds.disk`` (Cruise Control's ``disk.balance.threshold``)."""
    goals: list[GoalName] | None = None
    """The soft goals to work on, highest priority first (None: the default order)."""
    required_goals: list[GoalName] = Field(default_factory=list)
    """Soft goals the plan must meet to be feasible (the hard goals always must)."""
    thresholds: GoalThresholds = Field(default_factory=GoalThresholds)
    min_move_bytes: Annotated[int, Field(ge=0)] = 0
    """Optional moves of replicas smaller than this are skipped (drains always move)."""
    brokers: list[Annotated[int, Field(ge=0)]] = Field(default_factory=list)
    """add-brokers: the new brokers; remove-brokers: the brokers to empty."""
    log_dirs: list[DirRef] = Field(default_factory=list)
    """remove-dirs: the directories to drain."""
    target_utilisation: Fraction = 0.7
    """targeted: directories above this are relieved down to it, nothing else moves."""
    horizon_seconds: Annotated[float, Field(ge=0.0)] = 0.0
    """Plan for sizes grown by this long at each partition's estimated growth rate."""

    def goal_order(self) -> tuple[GoalName, ...]:
        """Every goal worked on, in priority order (the hard goals first)."""
        return goal_order(self.goals)
