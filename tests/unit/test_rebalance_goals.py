"""The Rebalance's goals (issue 40): the spec names soft goals only, the job gets them, and
the proposal's status and condition name every soft goal the plan leaves unmet."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jbod_operator.models.goals import GoalName, GoalThresholds
from jbod_operator.models.plan_report import GoalReport
from jbod_operator.models.rebalance import RebalancePhase as P
from jbod_operator.plan.rebalance import JobState, JobView, decide, job_args
from jbod_spark.job import options_from_args, parse_args
from tests.unit.test_rebalance_machine import cond, obs, pending, report
from tests.unit.test_rebalance_plan import rebalance

UNMET = GoalReport(
    name="ReplicaDistributionGoal",
    hard=False,
    priority=6,
    metric="replicas per broker",
    lower=12,
    upper=15,
    min_after=9,
    max_after=15,
    violations_before=1,
    violations_after=1,
    met_before=False,
    met_after=False,
    reason="DiskUsageDistributionGoal (higher priority) refused (40x)",
)


def test_the_spec_refuses_a_hard_goal_among_its_goals() -> None:
    with pytest.raises(ValidationError, match="soft goals only"):
        rebalance(goals=["RackAwareGoal"])
    with pytest.raises(ValidationError, match="soft goals only"):
        rebalance(requiredGoals=["DiskCapacityGoal"])


def test_the_job_gets_the_goals_their_order_and_thresholds() -> None:
    rb = rebalance(
        goals=["ReplicaDistributionGoal", "DiskUsageDistributionGoal"],
        requiredGoals=["ReplicaDistributionGoal"],
        goalThresholds={"replicaCount": 1.05},
    )
    args = job_args(rb, "even-1")
    opts = options_from_args(parse_args(["--snapshot", "s", "--out", "o", *args]))
    assert opts.goals == [GoalName.REPLICA_DISTRIBUTION, GoalName.DISK_USAGE]
    assert opts.required_goals == [GoalName.REPLICA_DISTRIBUTION]
    assert opts.thresholds == GoalThresholds(replica_count=1.05)
    default = options_from_args(
        parse_args(["--snapshot", "s", "--out", "o", *job_args(rebalance(), "x")])
    )
    assert default.goals is None and default.required_goals == []


def test_a_proposal_ready_names_the_soft_goals_it_leaves_unmet() -> None:
    r = report().model_copy(update={"goals": [UNMET]})
    d = decide(obs(pending(), job=JobView("even-1", JobState.SUCCEEDED), report=r, waves=1))
    assert d.status.phase is P.PROPOSAL_READY
    p = d.status.proposal
    assert p is not None and [g.name for g in p.unmet_soft_goals()] == [UNMET.name]
    assert p.goals[0].reason == UNMET.reason and p.goals[0].lower == 12
    reason, message = cond(d)
    assert reason == "ProposalReady"
    assert "soft goals not met: ReplicaDistributionGoal (DiskUsageDistributionGoal" in message
