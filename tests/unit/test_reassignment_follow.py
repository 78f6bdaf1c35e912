"""When the PartitionReassignment daemon looks again (handlers.reassignments.follow).

A pass that moved a partition on is followed by another at once, and an ISR change recorded
by the cluster's controller ends the wait: each of those used to wait a poll interval, which
made an RF 1 move spend 2.2 s after its new replica was in sync (bench/reassignment.py). The
interval here is an hour, so a test that waited for it would not finish; none measures time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jbod_operator.control.cluster_controller import ClusterController
from jbod_operator.handlers import reassignments
from jbod_operator.handlers.reassignments import MAX_PASSES_AT_ONCE, Outcome

HOUR = 3600.0
BODY = {"metadata": {"namespace": "ns", "name": "r", "uid": "u"}, "spec": {"clusterName": "c"}}


class Flag:
    """Stands in for kopf.DaemonStopped."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


class Elector:
    is_leader = True


class Ctx:
    def __init__(self, ctrl: ClusterController) -> None:
        self.elector = Elector()
        self.ctrl = ctrl

    def controller_for(self, ns: str, name: str) -> ClusterController | None:
        assert (ns, name) == ("ns", "c")
        return self.ctrl


def controller() -> ClusterController:
    return ClusterController("ns", "c", None, None)  # type: ignore[arg-type]


async def settle() -> None:
    """Let every ready task run until it blocks (no clock involved)."""
    for _ in range(50):
        await asyncio.sleep(0)


def test_a_pass_that_moved_a_partition_on_is_followed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> int:
        stopped = Flag()
        passes = 0

        async def run_pass(ctx: Any, body: Any) -> Outcome:
            nonlocal passes
            passes += 1
            if passes == 3:
                stopped.event.set()
            return Outcome({}, active=True, progressed=True)

        monkeypatch.setattr(reassignments, "run_pass", run_pass)
        ctx = Ctx(controller())
        await asyncio.wait_for(reassignments.follow(ctx, BODY, stopped, HOUR), 60)  # type: ignore[arg-type]
        return passes

    assert asyncio.run(main()) == 3


def test_an_isr_change_ends_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> tuple[int, int]:
        stopped = Flag()
        passes = 0

        async def run_pass(ctx: Any, body: Any) -> Outcome:
            nonlocal passes
            passes += 1
            if passes == 2:
                stopped.event.set()
            return Outcome({}, active=True)  # a step still catching up: nothing written

        monkeypatch.setattr(reassignments, "run_pass", run_pass)
        ctrl = controller()
        task = asyncio.ensure_future(reassignments.follow(Ctx(ctrl), BODY, stopped, HOUR))  # type: ignore[arg-type]
        await settle()
        before = passes  # one pass, then the wait
        ctrl._signal_isr_change()  # what alter_partition does once the ISR is written
        await asyncio.wait_for(task, 60)
        return before, passes

    assert asyncio.run(main()) == (1, 2)


def test_an_isr_change_during_a_pass_is_not_missed(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> int:
        stopped = Flag()
        ctrl = controller()
        passes = 0

        async def run_pass(ctx: Any, body: Any) -> Outcome:
            nonlocal passes
            passes += 1
            if passes == 1:
                ctrl._signal_isr_change()  # the new replica joins while the pass runs
            else:
                stopped.event.set()
            return Outcome({}, active=True)

        monkeypatch.setattr(reassignments, "run_pass", run_pass)
        await asyncio.wait_for(reassignments.follow(Ctx(ctrl), BODY, stopped, HOUR), 60)  # type: ignore[arg-type]
        return passes

    assert asyncio.run(main()) == 2


def test_passes_at_once_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transition that repeated itself forever would not spin the operator."""

    async def main() -> tuple[int, int]:
        stopped = Flag()
        passes = 0

        async def run_pass(ctx: Any, body: Any) -> Outcome:
            nonlocal passes
            passes += 1
            return Outcome({}, active=True, progressed=True)

        monkeypatch.setattr(reassignments, "run_pass", run_pass)
        ctrl = controller()
        task = asyncio.ensure_future(reassignments.follow(Ctx(ctrl), BODY, stopped, HOUR))  # type: ignore[arg-type]
        await settle()
        first = passes
        stopped.event.set()
        ctrl._signal_isr_change()
        await asyncio.wait_for(task, 60)
        return first, passes

    first, total = asyncio.run(main())
    assert first == MAX_PASSES_AT_ONCE + 1
    assert total == first
