"""The LogDirMove state machine (``jbod_operator.plan.logdirmove``): the transition tables,
an edge outside them refused, and each allowed transition produced by the pure pass
(``advance`` then ``settle``) from an observation, with the actions it decides."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from jbod_broker import wire
from jbod_operator.models import LogDirMove
from jbod_operator.models.log_dir_move import MovePhase as P
from jbod_operator.models.log_dir_move import ReplicaMoveStatus
from jbod_operator.models.log_dir_move import ReplicaState as R
from jbod_operator.plan.conditions import iso
from jbod_operator.plan.logdirmove import (
    PHASE_TRANSITIONS,
    REPLICA_TRANSITIONS,
    Decision,
    Observed,
    advance,
    settle,
    transition,
)
from jbod_operator.plan.machine import IllegalTransitionError
from jbod_operator.plan.port_types import (
    BrokerDirs,
    CancelMoves,
    Cordon,
    Dir,
    RecordInTopic,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
)

ROOT = "/var/lib/broker"
NOW = 1_700_000_000.0
STARTED = iso(NOW - 5)


def path(name: str) -> str:
    return f"{ROOT}/data-{name}"


# -- the tables ---------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), sorted(REPLICA_TRANSITIONS))
def test_each_allowed_replica_transition(a: R, b: R) -> None:
    assert transition(REPLICA_TRANSITIONS, a, b) is b


REFUSED_REPLICA = [
    (a, b) for a, b in itertools.permutations(R, 2) if (a, b) not in REPLICA_TRANSITIONS
]


@pytest.mark.parametrize(("a", "b"), REFUSED_REPLICA)
def test_each_refused_replica_transition(a: R, b: R) -> None:
    with pytest.raises(IllegalTransitionError, match=f"{a} -> {b}"):
        transition(REPLICA_TRANSITIONS, a, b)


@pytest.mark.parametrize(("a", "b"), sorted(PHASE_TRANSITIONS, key=str))
def test_each_allowed_phase_transition(a: P | None, b: P) -> None:
    assert transition(PHASE_TRANSITIONS, a, b) is b


REFUSED_PHASE = [
    (a, b)
    for a, b in itertools.product([None, *P], P)
    if a != b and (a, b) not in PHASE_TRANSITIONS
]


@pytest.mark.parametrize(("a", "b"), REFUSED_PHASE, ids=str)
def test_each_refused_phase_transition(a: P | None, b: P) -> None:
    with pytest.raises(IllegalTransitionError):
        transition(PHASE_TRANSITIONS, a, b)


def test_final_states_have_no_way_out() -> None:
    for final in (R.SUCCEEDED, R.FAILED, R.CANCELLED):
        assert not [k for k in REPLICA_TRANSITIONS if k[0] == final]
    for phase in (P.SUCCEEDED, P.FAILED, P.CANCELLED):
        assert not [k for k in PHASE_TRANSITIONS if k[0] == phase]


def _edges(doc: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s+\(?(\w+)\)?\s+->\s+(\w+)", doc, re.MULTILINE))


def test_the_enums_docstrings_draw_the_same_tables() -> None:
    assert _edges(R.__doc__ or "") == {(a.value, b.value) for a, b in REPLICA_TRANSITIONS}
    phases = {("new" if a is None else a.value, b.value) for a, b in PHASE_TRANSITIONS}
    assert _edges(P.__doc__ or "") == phases


# -- observations -------------------------------------------------------------------------


def ldm(
    *,
    phase: P | None = None,
    replicas: list[dict[str, Any]] | None = None,
    start: str | None = STARTED,
    **spec: Any,
) -> LogDirMove:
    status: dict[str, Any] = {}
    if phase is not None:
        status = {"phase": phase, "startTime": start, "replicas": replicas or []}
    return LogDirMove.model_validate(
        {
            "metadata": {
                "name": "m",
                "namespace": "kafka",
                "generation": 1,
                "creationTimestamp": "2024-05-01T10:00:00Z",
            },
            "spec": {"clusterName": "kip", **spec},
            "status": status or None,
        }
    )


def rep(p: int, state: R = R.PENDING, target: str = "b", **kw: Any) -> dict[str, Any]:
    return {
        "brokerId": 0,
        "topic": "t",
        "partition": p,
        "sourceLogDir": path("a"),
        "targetLogDir": path(target),
        "bytesTotal": 100,
        "state": state,
        **kw,
    }


def broker(
    a: dict[tuple[str, int], int] | None = None,
    b: dict[tuple[str, int], int] | None = None,
    *,
    futures_b: frozenset[tuple[str, int]] = frozenset(),
) -> BrokerDirs:
    return BrokerDirs(
        0,
        (
            Dir("a", path("a"), True, False, 10_000, dict(a or {})),
            Dir("b", path("b"), True, False, 10_000, dict(b or {}), futures_b),
        ),
    )


def info(p: int, state: str, **kw: Any) -> wire.ReplicaLogDirInfo:
    fields: dict[str, Any] = {
        "topic": "t",
        "partition": p,
        "current_log_dir": path("a"),
        "future_log_dir": path("b"),
        "future_offset_lag": 3,
        "bytes_copied": 40,
        "bytes_total": 100,
        "state": wire.MoveState(state),
        "rate_bytes_per_sec": 20.0,
        **kw,
    }
    return wire.ReplicaLogDirInfo(**fields)


def observe(
    move: LogDirMove,
    b0: BrokerDirs | None,
    moves: dict[int, wire.ReplicaLogDirInfo] | None = None,
    *,
    now: float = NOW,
    others: list[LogDirMove] | None = None,
) -> Observed:
    return Observed(
        move,
        now,
        cluster_size=1,
        brokers={0: b0},
        moves={(0, "t", p): i for p, i in (moves or {}).items()},
        others=others or [],
    )


def run(obs: Observed, *answers: StartAnswer) -> Decision:
    d = advance(obs)
    results = [
        StartResult(s.replica, a, "refused: x") for s, a in zip(d.starts, answers, strict=False)
    ]
    return settle(obs, d, results)


def replica(d: Decision) -> ReplicaMoveStatus:
    """The first replica of the decided status."""
    assert d.status.replicas
    return d.status.replicas[0]


def states(d: Decision) -> list[R]:
    return [e.state for e in d.status.replicas or []]


def condition(d: Decision, type_: str) -> tuple[str, str]:
    c = next(c for c in d.status.conditions if c.type == type_)
    return c.status, c.reason


# -- replica transitions, as a pass decides them ------------------------------------------


def test_pending_to_moving_when_the_broker_accepts() -> None:
    obs = observe(ldm(phase=P.PENDING, replicas=[rep(0)]), broker(a={("t", 0): 100}))
    d = advance(obs)
    assert d.starts == (Start((0, "t", 0), path("b")),) and not d.settled
    d = settle(obs, d, [StartResult((0, "t", 0), StartAnswer.ACCEPTED)])
    assert states(d) == [R.MOVING] and d.status.phase == P.MOVING and d.active


def test_a_broker_away_leaves_the_replica_pending() -> None:
    obs = observe(ldm(phase=P.PENDING, replicas=[rep(0)]), broker(a={("t", 0): 100}))
    d = run(obs, StartAnswer.BROKER_AWAY)
    assert states(d) == [R.PENDING] and d.status.phase == P.PENDING and d.active


def test_pending_to_succeeded_when_already_in_its_target() -> None:
    obs = observe(ldm(phase=P.PENDING, replicas=[rep(0)]), broker(b={("t", 0): 100}))
    d = run(obs)
    assert states(d) == [R.SUCCEEDED] and d.status.phase == P.SUCCEEDED
    assert replica(d).message == "already in its target log dir"


def test_pending_to_failed_when_not_there_after_replica_wait() -> None:
    move = ldm(phase=P.PENDING, replicas=[rep(0)], replicaWaitSeconds=10)
    # Started 5 s ago (to the second, so counted as 4): KIP-113 says keep asking.
    waiting = run(observe(move, broker(), now=NOW), StartAnswer.NOT_THERE_YET)
    assert states(waiting) == [R.PENDING] and waiting.active
    late = run(observe(move, broker(), now=NOW + 10), StartAnswer.NOT_THERE_YET)
    assert states(late) == [R.FAILED]
    assert replica(late).message == "t-0 is not on broker 0 (waited 10 s)"
    assert ("Warning", "ReplicaNotFound", "t-0 is not on broker 0 (waited 10 s)") in late.events


def test_pending_to_failed_when_the_broker_refuses() -> None:
    d = run(observe(ldm(phase=P.PENDING, replicas=[rep(0)]), broker()), StartAnswer.REFUSED)
    assert states(d) == [R.FAILED] and d.status.phase == P.FAILED
    assert condition(d, "Failed") == ("True", "ReplicaMovesFailed")


@pytest.mark.parametrize("state", [R.PENDING, R.MOVING])
def test_cancel_moves_pending_and_moving_replicas_to_cancelled(state: R) -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, state), rep(1, R.SUCCEEDED)], cancel=True)
    d = run(observe(move, broker(a={("t", 0): 100}, b={("t", 1): 100})))
    assert states(d) == [R.CANCELLED, R.SUCCEEDED] and d.status.phase == P.CANCELLED
    assert d.actions == (
        CancelMoves(((0, "t", 0),)),
        SetThrottle((0,), 0),
    )
    assert condition(d, "Cancelled") == ("True", "Cancelled") and not d.active


def test_moving_to_succeeded_when_verified_in_its_target() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    d = run(observe(move, broker(b={("t", 0): 100}), {0: info(0, "Done")}))
    assert states(d) == [R.SUCCEEDED] and d.status.phase == P.SUCCEEDED
    assert RecordInTopic((0, "t", 0), path("b")) in d.actions
    assert d.status.progress_percent == 100 and d.status.completion_time == iso(NOW)


def test_a_future_copy_left_means_not_verified_yet() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    b0 = broker(b={("t", 0): 100}, futures_b=frozenset({("t", 0)}))
    d = run(observe(move, b0, {0: info(0, "Copying")}))
    assert states(d) == [R.MOVING]


def test_moving_to_failed_when_the_brokers_move_fails() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    d = run(observe(move, broker(a={("t", 0): 100}), {0: info(0, "Failed", error="disk")}))
    assert states(d) == [R.FAILED] and replica(d).message == "broker 0: disk"
    assert ("Warning", "ReplicaMoveFailed", "broker 0: disk") in d.events


def test_timeout_fails_what_still_runs() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING), rep(1)], timeoutSeconds=60)
    d = run(observe(move, broker(a={("t", 0): 100, ("t", 1): 100}), now=NOW + 120))
    assert states(d) == [R.FAILED, R.FAILED] and d.status.phase == P.FAILED
    assert condition(d, "Failed") == ("True", "Timeout")
    assert CancelMoves(((0, "t", 0), (0, "t", 1))) in d.actions


@pytest.mark.parametrize("state", ["None", "Cancelled", "Interrupted"])
def test_a_move_the_broker_forgot_is_asked_again(state: str) -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    d = run(observe(move, broker(a={("t", 0): 100}), {0: info(0, state)}))
    assert states(d) == [R.MOVING] and Resend((0, "t", 0), path("b")) in d.actions


def test_a_broker_that_did_not_describe_its_moves_is_asked_again() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    d = run(observe(move, broker(a={("t", 0): 100}), {}))
    assert Resend((0, "t", 0), path("b")) in d.actions


def test_a_broker_away_is_waited_for() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    d = run(observe(move, None))
    assert states(d) == [R.MOVING] and d.starts == () and d.active
    assert not [a for a in d.actions if isinstance(a, Resend)]


def test_progress_rate_and_eta_of_a_running_move() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)], throttleBytesPerSecond=1000)
    d = run(observe(move, broker(a={("t", 0): 100}), {0: info(0, "Copying")}))
    e = replica(d)
    assert (e.bytes_copied, e.bytes_total, e.offset_lag) == (40, 100, 3)
    assert (d.status.progress_percent, d.status.rate_bytes_per_second) == (40, 20)
    assert d.status.eta_seconds == 3
    assert d.actions[0] == SetThrottle((0,), 1000)  # re-sent: brokers forget it on restart


# -- phase transitions --------------------------------------------------------------------


def test_new_to_pending_planned_then_started_in_the_same_pass() -> None:
    move = ldm(moves=[{"brokerId": 0, "topic": "t", "partition": 0, "logDir": "b"}])
    obs = observe(move, broker(a={("t", 0): 100}))
    d = advance(obs)
    assert d.status.phase == P.PENDING and d.status.start_time == iso(NOW)
    assert ("Normal", "Planned", "1 replicas to move") in d.events
    d = settle(obs, d, [StartResult((0, "t", 0), StartAnswer.ACCEPTED)])
    assert d.status.phase == P.MOVING and states(d) == [R.MOVING]


def test_new_to_failed_on_an_invalid_spec() -> None:
    move = ldm(moves=[{"brokerId": 0, "topic": "t", "partition": 0, "logDir": "zz"}])
    d = run(observe(move, broker(a={("t", 0): 100})))
    assert d.status.phase == P.FAILED and d.actions == ()
    assert condition(d, "Failed") == ("True", "InvalidSpec")
    assert d.status.replicas is None


def test_new_to_failed_on_a_conflict_with_an_older_move() -> None:
    older = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    older = older.model_copy(
        update={"metadata": older.metadata.model_copy(update={"name": "first"})}
    )
    mine = ldm(moves=[{"brokerId": 0, "topic": "t", "partition": 0, "logDir": "b"}])
    mine = mine.model_copy(
        update={
            "metadata": mine.metadata.model_copy(
                update={"creation_timestamp": "2024-05-01T10:00:09Z"}
            )
        }
    )
    d = run(observe(mine, broker(a={("t", 0): 100}), others=[older]))
    assert d.status.phase == P.FAILED and condition(d, "Failed") == ("True", "Conflict")
    assert "first (it already moves t-0 on broker 0)" in (d.status.conditions[2].message or "")


def test_new_to_pending_while_the_cluster_is_missing() -> None:
    move = ldm(moves=[{"brokerId": 0, "topic": "t", "partition": 0, "logDir": "b"}])
    d = advance(Observed(move, NOW, cluster_size=None))
    assert d.status.phase == P.PENDING and condition(d, "Progressing")[1] == "ClusterNotFound"
    assert d.active and d.settled


def test_moving_to_pending_when_the_moved_replicas_failed_and_the_rest_wait() -> None:
    move = ldm(
        phase=P.MOVING,
        replicas=[rep(0, R.MOVING), rep(1)],
        maxConcurrentMovesPerBroker=1,
    )
    d = run(
        observe(move, broker(a={("t", 0): 100, ("t", 1): 100}), {0: info(0, "Failed")}),
        StartAnswer.BROKER_AWAY,
    )
    assert states(d) == [R.FAILED, R.PENDING] and d.status.phase == P.PENDING


def test_moving_to_pending_when_the_cluster_is_gone() -> None:
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    d = advance(Observed(move, NOW, cluster_size=None))
    assert d.status.phase == P.PENDING and states(d) == [R.MOVING]


def test_pending_to_cancelled() -> None:
    d = run(observe(ldm(phase=P.PENDING, replicas=[rep(0)], cancel=True), broker()))
    assert d.status.phase == P.CANCELLED and states(d) == [R.CANCELLED]


def test_a_drain_succeeds_only_when_its_dir_is_verified_empty() -> None:
    drain = {"brokerId": 0, "logDir": "a"}
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)], drain=drain)
    done = run(observe(move, broker(b={("t", 0): 100}), {0: info(0, "Done")}))
    assert done.status.phase == P.SUCCEEDED
    assert condition(done, "Succeeded") == ("True", "Drained")
    left = run(observe(move, broker(a={("u", 9): 5}, b={("t", 0): 100}), {0: info(0, "Done")}))
    assert left.status.phase == P.FAILED
    assert condition(left, "Failed") == ("True", "DrainNotEmpty")


def test_a_plan_that_drains_cordons_before_starting() -> None:
    move = ldm(drain={"brokerId": 0, "logDir": "a"})
    d = advance(observe(move, broker(a={("t", 0): 100})))
    kinds = [type(a) for a in d.actions]
    assert kinds == [Cordon, Start]


@pytest.mark.parametrize("phase", [P.SUCCEEDED, P.FAILED, P.CANCELLED])
def test_a_final_move_changes_nothing(phase: P) -> None:
    move = ldm(phase=phase, replicas=[rep(0, R.SUCCEEDED)])
    d = run(observe(move, broker(a={("t", 0): 100})))
    assert d.status == move.status and d.actions == () and not d.active


def test_a_finished_drain_keeps_its_dir_cordoned() -> None:
    drain = {"brokerId": 0, "logDir": "a"}
    move = ldm(phase=P.SUCCEEDED, replicas=[rep(0, R.SUCCEEDED)], drain=drain)
    d = advance(Observed(move, NOW, cluster_size=None))
    assert d.status == move.status and len(d.actions) == 1
    assert isinstance(d.actions[0], Cordon) and d.actions[0].on


def test_a_second_pass_over_its_own_result_changes_nothing() -> None:
    """Idempotence: a pass over an unchanged world writes the same status again."""
    move = ldm(phase=P.MOVING, replicas=[rep(0, R.MOVING)])
    obs = observe(move, broker(a={("t", 0): 100}), {0: info(0, "Copying")})
    first = run(obs)
    again = run(
        observe(
            move.model_copy(update={"status": first.status}),
            obs.brokers[0],
            {0: info(0, "Copying")},
        )
    )
    assert again.status.dump() == first.status.dump() and again.events == ()


def test_new_to_failed_when_a_target_has_no_room_and_nothing_is_sent() -> None:
    move = ldm(moves=[{"brokerId": 0, "topic": "t", "partition": 0, "logDir": "b"}])
    small = BrokerDirs(
        0,
        (
            Dir("a", path("a"), True, False, 10_000, {("t", 0): 5000}),
            Dir("b", path("b"), True, False, 4000, {}),
        ),
    )
    d = run(observe(move, small))
    assert d.status.phase == P.FAILED and d.actions == () and d.status.replicas is None
    status, reason = condition(d, "Failed")
    assert (status, reason) == ("True", "InsufficientSpace")
    message = next(c.message for c in d.status.conditions if c.type == "Failed")
    assert "no room for 5000 bytes: 4000 bytes free" in message
