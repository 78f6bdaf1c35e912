"""A controller request's answer is waited for as long as its size needs (issue 36).

The broker serves a LeaderAndIsr or StopReplica of thousands of partitions in slices beside
its other work, so its answer comes seconds later; a client timeout fixed for small requests
gave up on it (and on the per-partition errors in it) while the broker went on applying it.
A broker on loopback here answers after a delay longer than the client's base timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from jbod_broker import wire
from jbod_broker.client import CONTROLLER_S_PER_PARTITION, BrokerClient, BrokerUnavailableError

BASE_TIMEOUT_S = 0.1
ANSWER_AFTER_S = 0.5
PARTITIONS = 300
"""Allowance 0.1 + 300 x 0.01 = 3.1 s: the answer after 0.5 s comes well inside it."""


@pytest.fixture
async def slow_broker() -> AsyncIterator[str]:
    async def answer(request: web.Request) -> web.Response:
        req = await request.json()
        await asyncio.sleep(ANSWER_AFTER_S)
        results = [{"topic": p["topic"], "partition": p["partition"]} for p in req["partitions"]]
        return web.json_response({"partitions": results})

    app = web.Application()
    app.router.add_post("/v1/controller/leader-and-isr", answer)
    app.router.add_post("/v1/controller/stop-replica", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def leader_and_isr(n: int) -> wire.LeaderAndIsrRequest:
    return wire.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=1,
        partitions=[
            wire.LeaderAndIsrPartition(
                topic="t", partition=p, leader=0, leader_epoch=0, isr=[0], replicas=[0]
            )
            for p in range(n)
        ],
    )


async def test_a_large_controller_request_is_waited_for_by_its_size(slow_broker: str) -> None:
    async with BrokerClient(slow_broker, timeout_s=BASE_TIMEOUT_S) as c:
        assert c.controller_timeout_s(PARTITIONS) == pytest.approx(
            BASE_TIMEOUT_S + PARTITIONS * CONTROLLER_S_PER_PARTITION
        )
        resp = await c.leader_and_isr(leader_and_isr(PARTITIONS))
        assert len(resp.partitions) == PARTITIONS
        stop = wire.StopReplicaRequest(
            controller_id=0,
            controller_epoch=1,
            partitions=[wire.StopReplicaPartition(topic="t", partition=p) for p in range(300)],
        )
        assert len((await c.stop_replica(stop)).partitions) == PARTITIONS


async def test_a_small_one_still_times_out_at_the_clients_timeout(slow_broker: str) -> None:
    async with BrokerClient(slow_broker, timeout_s=BASE_TIMEOUT_S) as c:
        with pytest.raises(BrokerUnavailableError, match="Timeout"):
            await c.leader_and_isr(leader_and_isr(1))
