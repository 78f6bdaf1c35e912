"""When the PartitionReassignment daemon looks again (handlers.reassignments.follow).

A pass that moved a partition on is followed by another at once, and the wait after any other
ends as soon as the pass' executor sees what a step waits for (``wait_for_change``): on our
brokers an ISR change recorded by the cluster's controller, on Kafka a change in what
ListPartitionReassignments lists. Each of those used to wait a poll interval, which made an RF 1
move spend 2.2 s after its new replica was in sync (bench/reassignment.py). The interval here is
an hour, so a test that waited for it would not finish; none measures time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jbod_operator.clients.kafka_admin import KafkaAdminError
from jbod_operator.control import kafka_reassignments
from jbod_operator.control.cluster_controller import ClusterController
from jbod_operator.control.kafka_reassignments import KafkaReassignments
from jbod_operator.control.our_brokers import OurBrokersReassignments
from jbod_operator.handlers import reassignments
from jbod_operator.handlers.reassignments import MAX_PASSES_AT_ONCE, Outcome
from jbod_operator.plan.kafka_types import OngoingReassignment

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


def executor(ctrl: ClusterController) -> OurBrokersReassignments:
    """Our brokers' executor as ``run_pass`` makes it for a pass (before the pass runs)."""
    return OurBrokersReassignments(None, None, ctrl, "ns", "c")  # type: ignore[arg-type]


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

        ctrl = controller()

        async def run_pass(ctx: Any, body: Any) -> Outcome:
            nonlocal passes
            ex = executor(ctrl)
            passes += 1
            if passes == 2:
                stopped.event.set()
            # A step still catching up: nothing written.
            return Outcome({}, active=True, wait_for_change=ex.wait_for_change)

        monkeypatch.setattr(reassignments, "run_pass", run_pass)
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
            ex = executor(ctrl)
            passes += 1
            if passes == 1:
                ctrl._signal_isr_change()  # the new replica joins while the pass runs
            else:
                stopped.event.set()
            return Outcome({}, active=True, wait_for_change=ex.wait_for_change)

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


class InFlightAdmin:
    """ListPartitionReassignments answering from ``answers`` in turn (the last one again once
    they run out); a ``None`` answer fails."""

    def __init__(self, answers: list[list[OngoingReassignment] | None]) -> None:
        self.answers = answers
        self.calls = 0

    async def list_partition_reassignments(self) -> list[OngoingReassignment]:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if answer is None:
            raise KafkaAdminError("ListPartitionReassignments", "KafkaTimeoutError")
        return answer


STEP = OngoingReassignment("t", 0, (3, 1, 2), (3,), (1,))


@pytest.mark.parametrize(
    "answers",
    [
        [[STEP], [STEP], [STEP], []],  # the step ended
        [[], [], [STEP]],  # someone's step started
        [[STEP], [OngoingReassignment("t", 0, (4, 1, 2), (4,), (1,))]],  # another target
    ],
)
def test_on_kafka_a_change_in_what_is_in_flight_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch, answers: list[list[OngoingReassignment] | None]
) -> None:
    monkeypatch.setattr(kafka_reassignments, "IN_FLIGHT_POLL_S", 0.0)
    admin = InFlightAdmin(answers)
    ex = KafkaReassignments(admin, asyncio.Lock(), "k")  # type: ignore[arg-type]
    asyncio.run(asyncio.wait_for(ex.wait_for_change(HOUR), 60))
    assert admin.calls == len(answers)


@pytest.mark.parametrize("answers", [[[STEP]], [[STEP], None]])
def test_on_kafka_nothing_changing_or_a_failed_call_waits_the_whole_timeout(
    monkeypatch: pytest.MonkeyPatch, answers: list[list[OngoingReassignment] | None]
) -> None:
    monkeypatch.setattr(kafka_reassignments, "IN_FLIGHT_POLL_S", 0.0)
    admin = InFlightAdmin(answers)
    ex = KafkaReassignments(admin, asyncio.Lock(), "k")  # type: ignore[arg-type]

    async def main() -> bool:
        task = asyncio.ensure_future(ex.wait_for_change(HOUR))
        await settle()
        return task.done()

    assert asyncio.run(main()) is False
    assert admin.calls >= len(answers)
