"""Liveness on the loop's clock (issue 39): a pass that holds the event loop longer than the
session timeout must not make the brokers whose heartbeats wait in a socket look dead."""

from __future__ import annotations

from jbod_operator.control.cluster_controller import ClusterController
from jbod_operator.control.loop_clock import INTERVAL_S, LoopClock


class Time:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def controller(t: Time) -> ClusterController:
    ctrl = ClusterController("ns", "c", None, None, session_timeout_s=6.0)  # type: ignore[arg-type]
    ctrl.clock = LoopClock(t)
    return ctrl


def test_a_held_loop_kills_nobody_while_it_is_held_or_just_after() -> None:
    t = Time()
    ctrl = controller(t)
    ctrl.heartbeat(1)
    t.t += 30.0  # a 30 s synchronous step: the watch could not wake
    assert ctrl.live() == {1}  # checked before the watch woke
    ctrl.clock.woke()
    assert ctrl.live() == {1}  # and after


def test_silence_while_the_loop_runs_is_death() -> None:
    t = Time()
    ctrl = controller(t)
    ctrl.heartbeat(1)
    ctrl.heartbeat(2)
    for _ in range(70):  # 7 s of a loop that runs: the watch wakes on time
        t.t += INTERVAL_S
        ctrl.clock.woke()
        ctrl.heartbeat(2)
    assert ctrl.live() == {2}


def test_a_hold_counts_once_and_time_goes_on_after_it() -> None:
    t = Time()
    clock = LoopClock(t)
    start = clock.now()
    t.t += 10.0  # held
    clock.woke()
    for _ in range(50):  # 5 s of a loop that runs
        t.t += INTERVAL_S
        clock.woke()
    assert abs(clock.now() - start - 5.0) < 0.5
