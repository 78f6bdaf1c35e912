"""The Rebalance state machine (``jbod_operator.plan.rebalance``): the transition table equal to
``RebalancePhase``'s docstring, every edge outside it refused, and every allowed edge taken by
the pure pass (``decide``) from a constructed observation, with the actions it decides.

Each scenario records the edges ``decide`` takes (``transition`` wrapped), so "this pass takes
this edge" is checked, not inferred from the resulting phase.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from typing import Any

import pytest

from jbod_operator.models.plan_report import ConstraintCheck, DirReport, PlanReport, Summary
from jbod_operator.models.rebalance import (
    COMMAND_ANNOTATION,
    DiskMeasure,
    Rebalance,
    RebalanceStatus,
)
from jbod_operator.models.rebalance import RebalancePhase as P
from jbod_operator.plan import rebalance as plan
from jbod_operator.plan.machine import IllegalTransitionError, transition
from jbod_operator.plan.rebalance import (
    PHASE_TRANSITIONS,
    CancelChildren,
    CancelJob,
    ChildPlan,
    ChildView,
    CleanupJob,
    ClusterView,
    CreateChildren,
    Decision,
    DiskUse,
    JobState,
    JobView,
    Observation,
    RemoveCommand,
    StartPlanning,
    WriteProposal,
    decide,
)
from tests.machine_edges import edges_taken_by, recorder

NOW = 1_700_000_000.0
Edge = tuple[Any, Any]
CLUSTER = ClusterView(
    size=3, dirs={b: (("a", f"/d/{b}/data-a"), ("b", f"/d/{b}/data-b")) for b in range(3)}
)
PRINT = {"BrokerCluster/kip": "c1", "Topic/orders": "t1"}


# -- the table ----------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), sorted(PHASE_TRANSITIONS, key=str), ids=str)
def test_each_allowed_transition(a: P | None, b: P) -> None:
    assert transition(PHASE_TRANSITIONS, a, b) is b


REFUSED = [
    (a, b)
    for a, b in itertools.product([None, *P], P)
    if a != b and (a, b) not in PHASE_TRANSITIONS
]


@pytest.mark.parametrize(("a", "b"), REFUSED, ids=str)
def test_each_refused_transition(a: P | None, b: P) -> None:
    with pytest.raises(IllegalTransitionError, match=f"{a} -> {b}"):
        transition(PHASE_TRANSITIONS, a, b)


def test_the_docstring_draws_the_table_with_its_causes() -> None:
    drawn = {
        (a, b): cause.strip()
        for a, b, cause in re.findall(
            r"^\s+\(?(\w+)\)?\s+->\s+(\w+)\s+(.+)$", P.__doc__ or "", re.MULTILINE
        )
    }
    table = {
        ("new" if a is None else a.value, b.value): c for (a, b), c in PHASE_TRANSITIONS.items()
    }
    assert drawn == table


def test_only_refresh_leaves_an_ended_phase() -> None:
    for phase in (P.READY, P.NOT_READY, P.STOPPED):
        assert {b for a, b in PHASE_TRANSITIONS if a == phase} == {P.PENDING_PROPOSAL}


# -- building observations ----------------------------------------------------------------


@pytest.fixture
def edges(monkeypatch: pytest.MonkeyPatch) -> list[Edge]:
    taken: list[Edge] = []
    monkeypatch.setattr(plan, "transition", recorder(taken))
    return taken


def rb(
    *,
    status: dict[str, Any] | None = None,
    command: str | None = None,
    **spec: Any,
) -> Rebalance:
    meta: dict[str, Any] = {"name": "even", "namespace": "kafka", "generation": 1}
    if command is not None:
        meta["annotations"] = {COMMAND_ANNOTATION: command}
    body: dict[str, Any] = {
        "metadata": meta,
        "spec": {"clusterName": "kip", "mode": "dirs-only", **spec},
    }
    if status is not None:
        body["status"] = status
    return Rebalance.model_validate(body)


def report(
    *, feasible: bool = True, best: float = 1.5, reasons: list[str] | None = None
) -> PlanReport:
    return PlanReport(
        cluster_name="kip",
        mode="dirs-only",
        plan_id="abc",
        options={},
        summary=Summary(
            largest_util_before=0.40,
            largest_util_after=0.22,
            worst_spread_pp_before=40.0,
            worst_spread_pp_after=best,
            std_pp_before=10.0,
            std_pp_after=1.0,
            dirs_above_threshold_before=0,
            dirs_above_threshold_after=0,
            bytes_moved=3000,
            bytes_moved_inter_broker=0,
            bytes_moved_intra_broker=3000,
            lower_bound_bytes=2900,
            replica_moves_inter_broker=0,
            replica_moves_intra_broker=3,
            leader_moves=0,
            partitions_changed=3,
            balance_band_pp=4.0,
            feasible=feasible,
            best_spread_pp=best,
            infeasible_reasons=reasons or [],
        ),
        constraints=[ConstraintCheck(name="capacity_threshold", ok=True)],
        brokers=[],
        dirs=[
            DirReport(
                broker_id=0,
                name="a",
                path="/d/0/data-a",
                capacity_bytes=100,
                used_before=40,
                used_after=21,
                util_before=0.4,
                util_after=0.21,
                live=True,
                cordoned=False,
                drained=False,
            )
        ],
    )


def status_in(phase: P, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "phase": phase.value,
        "plans": 1,
        "job": "even-1",
        "snapshotFingerprint": dict(PRINT),
    }
    return {**base, **kw}


def obs(r: Rebalance, **kw: Any) -> Observation:
    base: dict[str, Any] = {"cluster": CLUSTER, "fingerprint": dict(PRINT)}
    return Observation(rb=r, now=NOW, **{**base, **kw})


TWO_WAVES = (
    ChildPlan("PartitionReassignment", "even-1-brokers-0", 1, 1000),
    ChildPlan("LogDirMove", "even-1-dirs-0", 2, 2000),
)


def kinds(d: Decision) -> list[type]:
    return [type(a) for a in d.actions]


def cond(d: Decision) -> tuple[str, str]:
    (c,) = d.status.conditions
    assert c.type == d.status.phase and c.status == "True"
    return c.reason, c.message


# -- (new) --------------------------------------------------------------------------------


def test_new_to_pending_proposal_snapshots_and_starts_the_job(edges: list[Edge]) -> None:
    d = decide(obs(rb()))
    assert edges == [(None, P.PENDING_PROPOSAL)]
    assert d.actions == (StartPlanning("even-1"),)
    assert d.status.job == "even-1" and d.status.plans == 1
    assert d.status.snapshot_fingerprint == PRINT
    assert d.active and cond(d)[0] == "Planning"
    assert [e[1] for e in d.events] == ["Planning"]


def test_new_approved_by_annotation_remembers_the_approval() -> None:
    d = decide(obs(rb(command="approve")))
    assert d.status.approved and RemoveCommand() in d.actions


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"mode": "add-brokers", "brokers": [7]}, "broker 7 does not exist (brokers 0-2)"),
        (
            {"mode": "remove-disks", "logDirs": [{"brokerId": 1, "logDir": "zz"}]},
            "broker 1 has no log dir 'zz' (it has a, b)",
        ),
        (
            {
                "mode": "remove-disks",
                "logDirs": [{"brokerId": 1, "logDir": "a"}, {"brokerId": 1, "logDir": "data-b"}],
            },
            "remove-disks would empty every disk of broker 1",
        ),
        (
            {"mode": "remove-brokers", "brokers": [0, 1, 2]},
            "remove-brokers would remove every broker",
        ),
    ],
)
def test_new_to_not_ready_when_the_spec_names_what_the_cluster_lacks(
    spec: dict[str, Any], message: str, edges: list[Edge]
) -> None:
    d = decide(obs(rb(**spec)))
    assert edges == [(None, P.NOT_READY)]
    reason, msg = cond(d)
    assert reason == "InvalidSpec" and message in msg, msg
    assert d.actions == () and not d.active


def test_new_to_not_ready_without_the_cluster(edges: list[Edge]) -> None:
    d = decide(obs(rb(), cluster=None))
    assert edges == [(None, P.NOT_READY)]
    assert cond(d) == (
        "ClusterNotFound",
        "BrokerCluster kip not found (nor a KafkaCluster of that name): nothing planned",
    )
    assert d.actions == ()


def test_a_mode_that_names_brokers_needs_them() -> None:
    with pytest.raises(ValueError, match="need brokers"):
        rb(mode="add-brokers")


def test_the_job_gets_the_planner_s_mode_and_targets() -> None:
    r = rb(
        mode="remove-disks",
        logDirs=[{"brokerId": 1, "logDir": "a"}],
        balanceBandPercent=2.5,
        capacityThresholdPercent=75,
        throttleBytesPerSecond=1000,
    )
    assert plan.job_args(r, "even-2") == [
        "--mode",
        "remove-dirs",
        "--capacity-threshold",
        "0.75",
        "--dir-tolerance",
        "0.025",
        "--name-prefix",
        "even-2",
        "--log-dirs",
        "1:a",
        "--throttle",
        "1000",
    ]


# -- PendingProposal ------------------------------------------------------------------------


def pending(**kw: Any) -> Rebalance:
    return rb(status=status_in(P.PENDING_PROPOSAL), **kw)


def test_pending_stays_while_the_job_runs(edges: list[Edge]) -> None:
    d = decide(obs(pending(), job=JobView("even-1", JobState.RUNNING)))
    assert edges == [] and d.actions == () and d.active


def test_pending_to_proposal_ready_writes_the_proposal(edges: list[Edge]) -> None:
    d = decide(obs(pending(), job=JobView("even-1", JobState.SUCCEEDED), report=report(), waves=1))
    assert edges == [(P.PENDING_PROPOSAL, P.PROPOSAL_READY)]
    assert d.actions == (WriteProposal("even-1", "even-proposal"), CleanupJob("even-1"))
    p = d.status.proposal
    assert p is not None and p.feasible and p.moves == 3 and p.moves_between_disks == 3
    assert p.worst_spread_after == 1.5 and p.disks[0].utilisation_after == 21.0
    assert d.status.proposal_config_map == "even-proposal"
    assert "approve with kubectl annotate rebalance even jbod.io/rebalance=approve" in cond(d)[1]


def test_pending_to_not_ready_when_the_job_failed(edges: list[Edge]) -> None:
    d = decide(obs(pending(), job=JobView("even-1", JobState.FAILED, "exit 1: java not found")))
    assert edges == [(P.PENDING_PROPOSAL, P.NOT_READY)]
    assert cond(d) == ("JobFailed", "the planning job failed: exit 1: java not found")
    assert d.actions == (CleanupJob("even-1"),)


def test_pending_to_not_ready_infeasible_reports_the_best_spread_reached(
    edges: list[Edge],
) -> None:
    why = "orders-0 (600 B) is larger than half of disk a of broker 0"
    d = decide(
        obs(
            pending(),
            job=JobView("even-1", JobState.SUCCEEDED),
            report=report(feasible=False, best=31.0, reasons=[why]),
        )
    )
    assert edges == [(P.PENDING_PROPOSAL, P.NOT_READY)]
    reason, msg = cond(d)
    assert reason == "Infeasible"
    assert "best achievable worst disk spread is 31.0 pp (band 4 pp)" in msg and why in msg
    assert d.status.proposal is not None and not d.status.proposal.feasible
    assert d.status.proposal.worst_spread_after == 31.0  # what it reaches, never the band
    assert WriteProposal("even-1", "even-proposal") in d.actions  # to be looked at


def test_pending_to_stopped_cancels_the_job(edges: list[Edge]) -> None:
    d = decide(obs(pending(command="stop"), job=JobView("even-1", JobState.RUNNING)))
    assert edges == [(P.PENDING_PROPOSAL, P.STOPPED)]
    assert d.actions == (RemoveCommand(), CancelJob("even-1"))


def test_a_refresh_while_planning_restarts_the_job(edges: list[Edge]) -> None:
    d = decide(obs(pending(command="refresh"), job=JobView("even-1", JobState.RUNNING)))
    assert edges == []
    assert d.actions == (RemoveCommand(), CancelJob("even-1"), StartPlanning("even-2"))


def test_a_job_lost_with_the_operator_is_started_again() -> None:
    d = decide(obs(pending(), job=JobView("even-1", JobState.UNKNOWN)))
    assert d.actions == (StartPlanning("even-2"),)
    assert "lost" in (d.status.replanned_because or "")


# -- ProposalReady --------------------------------------------------------------------------


def ready(**kw: Any) -> Rebalance:
    st = status_in(P.PROPOSAL_READY, proposalConfigMap="even-proposal")
    return rb(status=st, **kw)


def test_proposal_ready_waits_for_approval(edges: list[Edge]) -> None:
    d = decide(obs(ready(), planned=TWO_WAVES, waves=2))
    assert edges == [] and d.actions == ()


def test_proposal_ready_to_rebalancing_on_approval_creates_the_first_wave(
    edges: list[Edge],
) -> None:
    d = decide(obs(ready(command="approve"), planned=TWO_WAVES, waves=2))
    assert edges == [(P.PROPOSAL_READY, P.REBALANCING)]
    assert d.actions == (RemoveCommand(), CreateChildren(("even-1-brokers-0",)))
    assert d.status.wave == 1 and d.status.approved and d.status.start_time
    assert [c.name for c in d.status.children] == ["even-1-brokers-0"]
    assert "WaveStarted" in [e[1] for e in d.events]


def test_auto_approve_runs_without_the_annotation(edges: list[Edge]) -> None:
    decide(obs(ready(autoApprove=True), planned=TWO_WAVES, waves=2))
    assert edges == [(P.PROPOSAL_READY, P.REBALANCING)]


def test_proposal_ready_to_pending_when_approved_on_a_stale_snapshot(edges: list[Edge]) -> None:
    now = {**PRINT, "Topic/orders": "t2", "Topic/clicks": "x"}
    d = decide(obs(ready(command="approve"), fingerprint=now, planned=TWO_WAVES, waves=2))
    assert edges == [(P.PROPOSAL_READY, P.PENDING_PROPOSAL)]
    assert d.actions == (RemoveCommand(), StartPlanning("even-2"))
    because = d.status.replanned_because or ""
    assert "Topic/clicks created" in because and "Topic/orders changed" in because
    assert because in cond(d)[1] and cond(d)[0] == "Replanning"
    assert d.status.approved  # runs once the new proposal is ready
    assert d.status.snapshot_fingerprint == now


def test_an_approved_proposal_whose_config_map_is_gone_is_planned_again(
    edges: list[Edge],
) -> None:
    d = decide(obs(ready(command="approve"), proposal_found=False))
    assert edges == [(P.PROPOSAL_READY, P.PENDING_PROPOSAL)]
    assert "the proposal ConfigMap even-proposal is gone" in (d.status.replanned_because or "")


def test_a_proposal_deleted_while_rebalancing_ends_it_and_cancels_the_children(
    edges: list[Edge],
) -> None:
    kids = {TWO_WAVES[0].name: child(TWO_WAVES[0], "Running")}
    st = rb(status={**status_in(P.REBALANCING, wave=1), "proposalConfigMap": "even-proposal"})
    d = decide(obs(st, children=kids, proposal_found=False))
    assert edges == [(P.REBALANCING, P.NOT_READY)]
    assert d.actions == (CancelChildren((("PartitionReassignment", "even-1-brokers-0"),)),)
    assert cond(d)[0] == "ProposalGone"


def test_proposal_ready_to_pending_on_refresh(edges: list[Edge]) -> None:
    d = decide(obs(ready(command="refresh")))
    assert edges == [(P.PROPOSAL_READY, P.PENDING_PROPOSAL)]
    assert StartPlanning("even-2") in d.actions and not d.status.approved


def test_stop_with_nothing_running_changes_nothing_but_says_so(edges: list[Edge]) -> None:
    d = decide(obs(ready(command="stop")))
    assert edges == [] and d.actions == (RemoveCommand(),)
    assert d.events[0][1] == "CommandIgnored"


def test_an_unknown_command_is_removed_and_reported() -> None:
    d = decide(obs(ready(command="go")))
    assert d.actions == (RemoveCommand(),) and d.events[0][1] == "UnknownCommand"


# -- Rebalancing ----------------------------------------------------------------------------


def running(wave: int = 1, **kw: Any) -> Rebalance:
    children = [
        {"kind": c.kind, "name": c.name, "wave": c.wave, "phase": "Running"}
        for c in TWO_WAVES
        if c.wave <= wave
    ]
    st = status_in(P.REBALANCING, wave=wave, approved=True, children=children)
    return rb(status=st, **kw)


def child(c: ChildPlan, phase: str, moved: int = 0, rate: int = 0) -> ChildView:
    return ChildView(c.kind, c.name, phase, c.bytes_planned, moved, rate)


def test_rebalancing_aggregates_progress_rate_and_eta(edges: list[Edge]) -> None:
    kids = {TWO_WAVES[0].name: child(TWO_WAVES[0], "Running", moved=500, rate=100)}
    d = decide(obs(running(), planned=TWO_WAVES, waves=2, children=kids))
    assert edges == [] and d.actions == ()
    st = d.status
    assert (st.bytes_to_move, st.bytes_moved, st.progress_percent) == (3000, 500, 16)
    assert st.rate_bytes_per_second == 100 and st.eta_seconds == 25
    assert "wave 1/2: 0/1 children succeeded" in cond(d)[1]


def test_the_next_wave_starts_when_the_last_one_succeeded(edges: list[Edge]) -> None:
    kids = {TWO_WAVES[0].name: child(TWO_WAVES[0], "Succeeded", moved=1000)}
    d = decide(obs(running(), planned=TWO_WAVES, waves=2, children=kids))
    assert edges == [] and d.actions == (CreateChildren(("even-1-dirs-0",)),)
    assert d.status.wave == 2


def test_rebalancing_to_ready_when_every_child_succeeded_and_the_disks_measure_in_band(
    edges: list[Edge],
) -> None:
    kids = {c.name: child(c, "Succeeded", moved=c.bytes_planned) for c in TWO_WAVES}
    measured = (DiskMeasure(broker_id=0, spread=1.2, largest_utilisation=30.0),)
    base = obs(running(wave=2), planned=TWO_WAVES, waves=2, children=kids)
    d0 = decide(base)
    assert edges == [] and d0.status.phase == P.REBALANCING  # measured on the next pass
    d = decide(replace(base, measured=measured))
    assert edges == [(P.REBALANCING, P.READY)]
    assert d.status.progress_percent == 100 and d.status.measured == list(measured)
    assert "worst disk spread 1.2 pp (band 4 pp)" in cond(d)[1]
    assert not d.active


def test_rebalancing_to_not_ready_when_the_disks_measure_outside_the_band(
    edges: list[Edge],
) -> None:
    kids = {c.name: child(c, "Succeeded") for c in TWO_WAVES}
    measured = (
        DiskMeasure(broker_id=0, spread=1.0, largest_utilisation=30.0),
        DiskMeasure(broker_id=2, spread=9.5, largest_utilisation=85.0),
    )
    d = decide(obs(running(wave=2), planned=TWO_WAVES, waves=2, children=kids, measured=measured))
    assert edges == [(P.REBALANCING, P.NOT_READY)]
    reason, msg = cond(d)
    assert reason == "OutsideBand"
    assert "broker 2: disks spread 9.5 pp (band 4 pp)" in msg
    assert "broker 2: a disk at 85.0% (threshold 80%)" in msg


def test_the_end_state_is_held_to_the_proposal_s_scope(edges: list[Edge]) -> None:
    """The end state is held to the proposal's bandScope, whatever the mode: under a scope of
    none (the planner's, for a mode that only relieves) the disks are measured and reported,
    and only the capacity threshold holds for them, not the band."""
    r = rb(
        mode="remove-brokers",
        brokers=[2],
        status=status_in(
            P.REBALANCING,
            wave=2,
            approved=True,
            proposal={**plan.summarise(report(), 2).dump(), "bandScope": "none"},
        ),
    )
    kids = {c.name: child(c, "Succeeded") for c in TWO_WAVES}
    measured = (
        DiskMeasure(broker_id=0, spread=9.0, largest_utilisation=30.0),
        DiskMeasure(broker_id=1, spread=2.0, largest_utilisation=20.0),
    )
    d = decide(obs(r, planned=TWO_WAVES, waves=2, children=kids, measured=measured))
    assert edges == [(P.REBALANCING, P.READY)]
    assert "worst disk spread 0.0 pp over brokers none (the mode's scope)" in cond(d)[1]
    hot = (DiskMeasure(broker_id=0, spread=9.0, largest_utilisation=81.0), measured[1])
    d = decide(obs(r, planned=TWO_WAVES, waves=2, children=kids, measured=hot))
    assert d.status.phase == P.NOT_READY and "broker 0: a disk at 81.0%" in cond(d)[1]
    # The same measures under a proposal whose band covers every broker: outside the band.
    full = rb(
        mode="full",
        status=status_in(
            P.REBALANCING,
            wave=2,
            approved=True,
            proposal={**plan.summarise(report(), 2).dump(), "bandScope": "all"},
        ),
    )
    d = decide(obs(full, planned=TWO_WAVES, waves=2, children=kids, measured=measured))
    assert d.status.phase == P.NOT_READY and cond(d)[0] == "OutsideBand"


def test_a_remove_mode_ends_ready_only_once_what_it_empties_is_empty(edges: list[Edge]) -> None:
    """remove-brokers: every child succeeded and the disks measure fine, but a Topic status
    still names the broker (a partition created meanwhile): NotReady NotEmptied, never Ready;
    with nothing left the Ready message says what was emptied."""
    r = rb(
        mode="remove-brokers",
        brokers=[2],
        status=status_in(
            P.REBALANCING,
            wave=2,
            approved=True,
            proposal={**plan.summarise(report(), 2).dump(), "bandScope": "none"},
        ),
    )
    kids = {c.name: child(c, "Succeeded") for c in TWO_WAVES}
    measured = (DiskMeasure(broker_id=0, spread=1.0, largest_utilisation=30.0),)
    base = obs(r, planned=TWO_WAVES, waves=2, children=kids, measured=measured)
    d = decide(replace(base, left_behind=("broker 2 still holds 1 replica",)))
    assert edges == [(P.REBALANCING, P.NOT_READY)]
    assert cond(d) == (
        "NotEmptied",
        "every child succeeded but what the mode empties still holds replicas: "
        "broker 2 still holds 1 replica",
    )
    assert not d.active
    d = decide(base)
    assert d.status.phase == P.READY and cond(d)[1].endswith("; no replica left on broker 2")
    disks = rb(
        mode="remove-disks",
        logDirs=[{"brokerId": 0, "logDir": "b"}, {"brokerId": 1, "logDir": "b"}],
        status=r.status.dump() if r.status else None,
    )
    d = decide(replace(base, rb=disks))
    assert cond(d)[1].endswith("; emptied: log dirs b of broker 0, b of broker 1")


def test_rebalancing_to_not_ready_when_a_child_failed_cancels_the_rest(edges: list[Edge]) -> None:
    kids = {
        TWO_WAVES[0].name: ChildView(
            TWO_WAVES[0].kind, TWO_WAVES[0].name, "Failed", message="broker 3 has no log dir"
        )
    }
    st = running(wave=2)
    kids[TWO_WAVES[1].name] = child(TWO_WAVES[1], "Moving")
    d = decide(obs(st, planned=TWO_WAVES, waves=2, children=kids))
    assert edges == [(P.REBALANCING, P.NOT_READY)]
    assert d.actions == (CancelChildren((("LogDirMove", "even-1-dirs-0"),)),)
    assert (
        "PartitionReassignment even-1-brokers-0 ended Failed: broker 3 has no log dir" in cond(d)[1]
    )


def test_a_child_deleted_by_someone_ends_it_not_ready(edges: list[Edge]) -> None:
    d = decide(obs(running(), planned=TWO_WAVES, waves=2, children={}))
    assert edges == [(P.REBALANCING, P.NOT_READY)]
    assert "PartitionReassignment even-1-brokers-0 was deleted" in cond(d)[1]


def test_rebalancing_to_stopped_cancels_the_running_children(edges: list[Edge]) -> None:
    kids = {TWO_WAVES[0].name: child(TWO_WAVES[0], "Running")}
    d = decide(obs(running(command="stop"), planned=TWO_WAVES, waves=2, children=kids))
    assert edges == [(P.REBALANCING, P.STOPPED)]
    assert d.actions == (
        RemoveCommand(),
        CancelChildren((("PartitionReassignment", "even-1-brokers-0"),)),
    )
    assert "cancel sent to 1 running children" in cond(d)[1]


def test_refresh_while_rebalancing_is_refused(edges: list[Edge]) -> None:
    kids = {TWO_WAVES[0].name: child(TWO_WAVES[0], "Running")}
    d = decide(obs(running(command="refresh"), planned=TWO_WAVES, waves=2, children=kids))
    assert edges == [] and d.status.phase == P.REBALANCING
    assert d.events[0][:2] == ("Warning", "CommandIgnored")


# -- ended phases ---------------------------------------------------------------------------


@pytest.mark.parametrize("phase", [P.READY, P.NOT_READY, P.STOPPED])
def test_ended_to_pending_on_refresh(phase: P, edges: list[Edge]) -> None:
    d = decide(obs(rb(status=status_in(phase), command="refresh")))
    assert edges == [(phase, P.PENDING_PROPOSAL)]
    assert d.actions == (RemoveCommand(), StartPlanning("even-2"))
    assert d.status.children == [] and d.status.proposal is None


@pytest.mark.parametrize("phase", [P.READY, P.NOT_READY, P.STOPPED])
def test_an_ended_rebalance_changes_nothing_by_itself(phase: P, edges: list[Edge]) -> None:
    r = rb(status=status_in(phase))
    d = decide(obs(r, fingerprint={"Topic/new": "x"}))
    assert edges == [] and d.actions == () and d.status == r.status


# -- measuring ------------------------------------------------------------------------------


def test_measure_counts_only_live_disks_that_stay() -> None:
    out = plan.measure(
        [
            DiskUse(0, "a", 100, 30),
            DiskUse(0, "b", 100, 28),
            DiskUse(0, "c", 100, 0, counted=False),  # being emptied: not in the band
            DiskUse(1, "a", 100, 50, live=False),
            DiskUse(1, "b", 200, 20),
        ]
    )
    assert out == (
        DiskMeasure(broker_id=0, spread=2.0, largest_utilisation=30.0),
        DiskMeasure(broker_id=1, spread=0.0, largest_utilisation=10.0),
    )


def test_stale_names_what_changed() -> None:
    assert plan.stale(PRINT, PRINT) == []
    assert plan.stale(PRINT, {"Topic/orders": "t1"}) == ["BrokerCluster/kip deleted"]


# -- every edge is taken by a named pass --------------------------------------------------

TAKEN_BY = {
    (None, P.PENDING_PROPOSAL): "test_new_to_pending_proposal_snapshots_and_starts_the_job",
    (None, P.NOT_READY): "test_new_to_not_ready_without_the_cluster",
    (P.PENDING_PROPOSAL, P.PROPOSAL_READY): "test_pending_to_proposal_ready_writes_the_proposal",
    (P.PENDING_PROPOSAL, P.NOT_READY): "test_pending_to_not_ready_when_the_job_failed",
    (P.PENDING_PROPOSAL, P.STOPPED): "test_pending_to_stopped_cancels_the_job",
    (P.PROPOSAL_READY, P.PENDING_PROPOSAL): "test_proposal_ready_to_pending_on_refresh",
    (
        P.PROPOSAL_READY,
        P.REBALANCING,
    ): "test_proposal_ready_to_rebalancing_on_approval_creates_the_first_wave",
    (
        P.REBALANCING,
        P.READY,
    ): "test_rebalancing_to_ready_when_every_child_succeeded_and_the_disks_measure_in_band",
    (
        P.REBALANCING,
        P.NOT_READY,
    ): "test_rebalancing_to_not_ready_when_a_child_failed_cancels_the_rest",
    (P.REBALANCING, P.STOPPED): "test_rebalancing_to_stopped_cancels_the_running_children",
    (P.READY, P.PENDING_PROPOSAL): "test_ended_to_pending_on_refresh",
    (P.NOT_READY, P.PENDING_PROPOSAL): "test_ended_to_pending_on_refresh",
    (P.STOPPED, P.PENDING_PROPOSAL): "test_ended_to_pending_on_refresh",
}


def test_every_allowed_edge_is_taken_by_a_named_pass() -> None:
    assert set(TAKEN_BY) == set(PHASE_TRANSITIONS)
    for name in set(TAKEN_BY.values()):
        assert callable(globals().get(name)), name


@pytest.mark.parametrize(("a", "b"), sorted(TAKEN_BY, key=str), ids=str)
def test_each_allowed_edge_is_taken_by_the_pass_its_test_drives(a: Any, b: Any) -> None:
    """The named test, run again with ``transition`` recorded, takes the edge through the
    pass (not merely ends in its state): an edge no pass takes fails here."""
    test = globals()[TAKEN_BY[(a, b)]]
    assert (a, b) in edges_taken_by(test, plan), f"{test.__name__} does not take {a} -> {b}"


def test_a_status_round_trips() -> None:
    st = RebalanceStatus.model_validate(status_in(P.PROPOSAL_READY))
    assert RebalanceStatus.model_validate(st.dump()) == st
