"""An AlterPartition the controller applied but whose answer the leader never got (issue 38).

Two broker processes under the controller stub, a topic with replicas [0, 1]: broker 0 leads,
broker 1 follows. The follower is stopped (SIGSTOP), so after ``replica.lag.time.max.ms`` the
leader asks the controller to shrink the ISR to [0]. The stub applies the change (partition
epoch +1) and then drops the connection instead of answering, once. The leader retries with
the partition epoch it knew, which the controller now refuses as INVALID_UPDATE_VERSION; the
refusal carries the partition's committed state, which is the leader's own change.

Broker bug: the leader dropped its proposal on the refusal and kept the old ISR and partition
epoch, so its next ISR pass proposed the same shrink at the same stale epoch, refused again,
over and over (13 times in a run against the operator), and it never applied the ISR the
controller held. As Kafka's ``Partition`` does on an AlterPartition answer, the leader must
adopt the committed state the controller returns (the latest it knows), see its change applied
and stop; the follower, resumed, must rejoin through an AlterPartition at the new epoch.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from jbod_broker import wire
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from tests.integration.controller_stub import ControllerStub
from tests.waiting import wait_async

pytestmark = pytest.mark.integration

SETTINGS = {
    "replica.lag.time.max.ms": "1000",
    "replica.fetch.wait.max.ms": "200",
    "controller.retry.backoff.ms": "50",
    "controller.retry.backoff.max.ms": "200",
}


class LosingAnswerStub(ControllerStub):
    """The controller stub, except that it loses the answer to the first AlterPartition it
    applies: the change is made, then the connection is dropped with no response."""

    def __init__(self) -> None:
        super().__init__()
        self.answers_to_lose = 1
        self.applied_then_lost: list[wire.AlterPartitionItem] = []

    async def _alter_partition(self, request: web.Request) -> web.Response:
        before = {tp: st.partition_epoch for tp, st in self.state.items()}
        resp = await super()._alter_partition(request)
        changed = any(st.partition_epoch != before.get(tp) for tp, st in self.state.items())
        if changed and self.answers_to_lose > 0:
            self.answers_to_lose -= 1
            self.applied_then_lost.extend(self.alter_requests[-1].partitions)
            assert request.transport is not None
            request.transport.close()
        return resp


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[LosingAnswerStub, LocalCluster]]:
    ctl = LosingAnswerStub()
    await ctl.start()
    cluster = LocalCluster(
        str(tmp_path / "cluster"),
        size=2,
        num_dirs=1,
        controller_url=ctl.url,
        settings=dict(SETTINGS),
    )
    ctl.cluster = cluster
    try:
        await asyncio.to_thread(cluster.start)
        yield ctl, cluster
    finally:
        for b in cluster.brokers:
            if b.alive and b.proc is not None:
                os.kill(b.proc.pid, signal.SIGCONT)
        await asyncio.to_thread(cluster.stop)
        await ctl.stop()


async def wait_for(
    pred: Callable[[], Awaitable[bool]], timeout_s: float, what: str | Callable[[], str]
) -> None:
    """The shared wait (tests/waiting.py), with this module's argument order."""
    await wait_async(pred, what, timeout_s)


def alters_for(ctl: ControllerStub, tp: TopicPartition) -> list[wire.AlterPartitionItem]:
    return [
        item
        for req in ctl.alter_requests
        for item in req.partitions
        if (item.topic, item.partition) == (tp.topic, tp.partition)
    ]


async def test_a_retried_alter_partition_sees_its_change_applied_and_stops(
    env: tuple[LosingAnswerStub, LocalCluster],
) -> None:
    ctl, cluster = env
    (tp,) = await ctl.create_topic("t", 1, 2, min_isr=1)
    assert ctl.leader_of(tp) == 0 and ctl.state[tp].isr == [0, 1]
    leader = ctl.client(0)
    follower = cluster[1].proc
    assert follower is not None

    os.kill(follower.pid, signal.SIGSTOP)
    try:

        async def shrink_applied() -> bool:
            return ctl.state[tp].isr == [0]

        await wait_for(shrink_applied, 15, "the controller applies the leader's shrink to [0]")
        assert ctl.applied_then_lost, "the stub lost the answer to the shrink it applied"
        epoch = ctl.state[tp].partition_epoch

        async def leader_sees_it() -> bool:
            md = await leader.metadata()
            return any(
                (pm.topic, pm.partition) == (tp.topic, tp.partition) and pm.isr == [0]
                for pm in md.partitions
            )

        await wait_for(
            leader_sees_it,
            10,
            lambda: (
                f"the leader applies the ISR [0] the controller committed (after "
                f"{len(alters_for(ctl, tp))} AlterPartition requests: "
                f"{[(i.partition_epoch, i.new_isr) for i in alters_for(ctl, tp)]})"
            ),
        )
    finally:
        os.kill(follower.pid, signal.SIGCONT)

    async def rejoined() -> bool:
        return ctl.state[tp].isr == [0, 1]

    await wait_for(rejoined, 15, "the resumed follower rejoins the ISR")
    items = alters_for(ctl, tp)
    shrinks = [i for i in items if i.new_isr == [0]]
    # The shrink was sent once and retried once (its answer was lost); the retry's answer,
    # showing the change applied, ended it. The expansion went at the epoch the shrink made.
    assert len(shrinks) == 2, [(i.partition_epoch, i.new_isr) for i in items]
    grows = [i for i in items if i.new_isr == [0, 1]]
    assert grows and grows[0].partition_epoch == epoch, [
        (i.partition_epoch, i.new_isr) for i in items
    ]
