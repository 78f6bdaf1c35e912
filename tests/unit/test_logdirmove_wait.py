"""The operator's long poll on running moves (handlers.logdirmoves.wait_for_a_move_to_end, over
our brokers' adapter: control.our_brokers).

Fake brokers stand in for the HTTP clients (unit tier); the real long poll is exercised
against broker processes in tests/integration/test_move_long_poll.py and by every e2e
LogDirMove scenario.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jbod_broker.client import BrokerUnavailableError
from jbod_operator.control.our_brokers import OurBrokersLogDirMoves
from jbod_operator.handlers.logdirmoves import wait_for_a_move_to_end


class FakeClient:
    def __init__(self, delay: float | None, fail: bool = False) -> None:
        self.delay, self.fail = delay, fail
        self.calls: list[tuple[list[tuple[str, int]], int]] = []
        self.cancelled = False

    async def describe_replica_log_dirs(
        self, replicas: list[tuple[str, int]], *, wait_ms: int = 0
    ) -> None:
        self.calls.append((replicas, wait_ms))
        if self.fail:
            raise BrokerUnavailableError("broker away")
        try:
            await asyncio.sleep(self.delay if self.delay is not None else 3600)
        except asyncio.CancelledError:
            self.cancelled = True
            raise


class FakePool:
    def __init__(self, clients: dict[int, FakeClient]) -> None:
        self.clients = clients

    async def client(self, ns: str, cluster: str, b: int) -> FakeClient:
        return self.clients[b]


def body(*entries: tuple[int, str, int, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "m"},
        "spec": {"clusterName": "c"},
        "status": {
            "replicas": [
                {"brokerId": b, "topic": t, "partition": p, "state": s} for b, t, p, s in entries
            ]
        },
    }


def run(pool: FakePool, b: dict[str, Any], wait_s: float) -> bool:
    ours = OurBrokersLogDirMoves(None, pool, "ns", "c")  # type: ignore[arg-type]
    return asyncio.run(wait_for_a_move_to_end(ours, b, wait_s))


def test_nothing_moving_returns_false_without_asking() -> None:
    c = FakeClient(0)
    assert not run(FakePool({0: c}), body((0, "t", 0, "Succeeded"), (0, "t", 1, "Pending")), 1)
    assert c.calls == []


def test_first_broker_to_answer_ends_the_wait_and_the_others_are_cancelled() -> None:
    fast, slow = FakeClient(0.01), FakeClient(None)
    b = body((0, "t", 0, "Moving"), (1, "t", 1, "Moving"), (1, "t", 2, "Moving"))
    assert run(FakePool({0: fast, 1: slow}), b, 0.5)
    assert fast.calls == [([("t", 0)], 500)]
    assert slow.calls == [([("t", 1), ("t", 2)], 500)]  # only its moving replicas
    assert slow.cancelled


def test_a_failing_broker_does_not_end_the_wait_for_the_others() -> None:
    away, slow = FakeClient(None, fail=True), FakeClient(0.05)
    b = body((0, "t", 0, "Moving"), (1, "t", 1, "Moving"))
    assert run(FakePool({0: away, 1: slow}), b, 0.5)
    assert slow.calls and not slow.cancelled


def test_every_broker_failing_returns_false() -> None:
    b = body((0, "t", 0, "Moving"), (1, "t", 1, "Moving"))
    pool = FakePool({0: FakeClient(None, fail=True), 1: FakeClient(None, fail=True)})
    assert not run(pool, b, 0.5)
