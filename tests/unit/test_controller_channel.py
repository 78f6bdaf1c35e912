"""The controller channel's AlterPartition retry (issue 38), against a controller on loopback.

A retry re-reads its partition first (``still_pending``): a proposal the partition no longer
waits on (a LeaderAndIsr overtook it) is dropped, one it still waits on is sent again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web

from jbod_broker import wire
from jbod_broker.controller_channel import ALTER_PARTITION, ControllerChannel
from jbod_broker.local import free_port
from tests.waiting import wait_async

ITEM = wire.AlterPartitionItem(
    topic="t", partition=0, leader_epoch=3, partition_epoch=5, new_isr=[0]
)


class Controller:
    """Loses the answer to the first AlterPartition (the connection is dropped), answers the
    next ones as applied."""

    def __init__(self) -> None:
        self.requests: list[wire.AlterPartitionRequest] = []
        self.on_first: Callable[[], None] = lambda: None

    async def alter(self, request: web.Request) -> web.Response:
        req = wire.AlterPartitionRequest.model_validate_json(await request.read())
        self.requests.append(req)
        if len(self.requests) == 1:
            self.on_first()
            assert request.transport is not None
            request.transport.close()
        out = [
            wire.AlterPartitionResult(
                topic=i.topic,
                partition=i.partition,
                leader=0,
                leader_epoch=i.leader_epoch,
                isr=i.new_isr,
                partition_epoch=i.partition_epoch + 1,
            )
            for i in req.partitions
        ]
        return web.json_response(
            wire.AlterPartitionResponse(partitions=out).model_dump(mode="json")
        )

    async def heartbeat(self, request: web.Request) -> web.Response:
        return web.json_response({})


@pytest.fixture
async def controller() -> AsyncIterator[tuple[Controller, str]]:
    ctl = Controller()
    app = web.Application()
    app.router.add_post(ALTER_PARTITION, ctl.alter)
    app.router.add_post("/v1/controller/heartbeat", ctl.heartbeat)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield ctl, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def until(pred: Callable[[], bool], what: str) -> None:
    await wait_async(pred, what, 10)


async def channel(
    url: str, pending: dict[str, bool], answers: list[wire.AlterPartitionResult]
) -> ControllerChannel:
    ch = ControllerChannel(
        url,
        broker_id=0,
        token=None,
        on_alter_partition=answers.append,
        backoff_ms=10,
        backoff_max_ms=20,
        heartbeat_interval_ms=60_000,
        still_pending=lambda item: pending["yes"],
    )
    ch.start()
    return ch


async def test_a_retry_whose_partition_moved_on_is_dropped(
    controller: tuple[Controller, str],
) -> None:
    ctl, url = controller
    pending = {"yes": True}
    ctl.on_first = lambda: pending.update(yes=False)  # a LeaderAndIsr cleared the proposal
    answers: list[wire.AlterPartitionResult] = []
    ch = await channel(url, pending, answers)
    try:
        ch.alter_partition(ITEM)
        await until(lambda: ch.pending == 0, "the overtaken proposal leaves the queue")
        assert len(ctl.requests) == 1 and answers == []
    finally:
        await ch.close()


async def test_a_retry_still_pending_is_sent_again(controller: tuple[Controller, str]) -> None:
    ctl, url = controller
    answers: list[wire.AlterPartitionResult] = []
    ch = await channel(url, {"yes": True}, answers)
    try:
        ch.alter_partition(ITEM)
        await until(lambda: len(answers) == 1, "the retry is answered")
        assert len(ctl.requests) == 2 and ch.pending == 0
        assert ctl.requests[1].partitions == [ITEM]
    finally:
        await ch.close()
