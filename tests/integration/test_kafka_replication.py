"""Follower replication over Kafka's protocol (issue 18), on three broker processes.

Followers fetch from their leader's Kafka listener (Fetch with their broker id, after
OffsetForLeaderEpoch); the HTTP replication routes are gone, so what replicates here can only
have come over the Kafka listener. The leader throttle of a reassignment applies to a new
replica fetching that way as it did before: while the rate is exceeded the new replica gets no
data, and the in-sync follower of the same partition keeps replicating.

The test is the controller (``ControllerStub``); topic ``t`` is led by broker 0.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from jbod_broker import wire
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from tests.broker_metrics import scrape
from tests.integration.controller_stub import ControllerStub
from tests.waiting import wait_async

pytestmark = pytest.mark.integration

FETCH_MAX_BYTES = 64 << 10
SETTINGS = {
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.max.bytes": str(FETCH_MAX_BYTES),
    "replica.lag.time.max.ms": "30000",
    "broker.heartbeat.interval.ms": "200",
}
BATCH = build_batch([(None, b"r" * 1000)] * 16)
"""About 16 KiB: four batches fill one fetch of ``replica.fetch.max.bytes``."""


@dataclass
class Env:
    ctl: ControllerStub
    cluster: LocalCluster

    async def log_end(self, broker: int, tp: TopicPartition) -> int:
        resp = await self.ctl.client(broker).describe_log_dirs(topics=[tp.topic])
        ends = [
            r.log_end_offset
            for d in resp.log_dirs
            for r in d.partitions
            if r.partition == tp.partition and not r.is_future
        ]
        return ends[0] if ends else -1

    def tails(self) -> str:
        return "\n".join(f"--- broker {b.broker_id}:\n{b.tail(8)}" for b in self.cluster.brokers)

    async def until(
        self, pred: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 30
    ) -> None:
        await wait_async(pred, lambda: f"{what}\n{self.tails()}", timeout_s)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    ctl = ControllerStub()
    await ctl.start()
    cluster = LocalCluster(
        str(tmp_path / "cluster"), size=3, num_dirs=1, controller_url=ctl.url, settings=SETTINGS
    )
    ctl.cluster = cluster
    try:
        await asyncio.to_thread(cluster.start)
        yield Env(ctl, cluster)
    finally:
        await asyncio.to_thread(cluster.stop)
        await ctl.stop()


async def test_followers_replicate_over_the_kafka_listener(env: Env) -> None:
    """acks=all with min.insync.replicas=3 completes only once both followers hold the
    records, and the leader's HTTP port has no replication route left to carry them: they
    came over the leader's Kafka listener, whose request count grows with the fetches."""
    async with aiohttp.ClientSession() as s:
        for path in ("/v1/replica/fetch", "/v1/replica/epoch-end-offsets"):
            async with s.post(
                env.cluster[0].url + path,
                data=b"{}",
                headers={
                    "Authorization": f"Bearer {env.cluster.token}",
                    "Content-Type": "application/json",
                },
            ) as r:
                assert r.status == 404, path
    (tp,) = await env.ctl.create_topic("t", 1, 3, min_isr=3)
    before = scrape(env.cluster[0].url)["jbod_kafka_requests_total"]
    leader = env.ctl.client(0)
    for i in range(5):
        resp = await leader.produce("t", 0, BATCH, acks=-1, timeout_ms=20_000)
        assert resp is not None and resp.base_offset == 16 * i
    for b in (1, 2):
        assert await env.log_end(b, tp) == 80, b
    assert scrape(env.cluster[0].url)["jbod_kafka_requests_total"] > before
    # The records went out from the segment files (zero-copy), each range on a descriptor of
    # its own: every one is closed once sent (forty more rounds leave no more open).
    pid = env.cluster[0].proc.pid  # type: ignore[union-attr]
    open_fds = len(os.listdir(f"/proc/{pid}/fd"))
    for i in range(5, 25):
        resp = await leader.produce("t", 0, BATCH, acks=-1, timeout_ms=20_000)
        assert resp is not None and resp.base_offset == 16 * i
    assert len(os.listdir(f"/proc/{pid}/fd")) <= open_fds + 4


async def test_the_leader_throttle_holds_back_a_reassignment_follower_fetching_over_kafka(
    env: Env,
) -> None:
    """A partition gains a replica on broker 2 (outside the ISR) with its leader throttled:
    the leader answers the new replica's first fetch (the bucket starts with one second of
    its rate) and then, with the rate spent, no data, however often it fetches; the in-sync
    follower on broker 1 keeps replicating. Lifting the rate lets the new replica catch up and
    join the ISR."""
    (tp,) = await env.ctl.create_topic("t", 1, 2, min_isr=2)  # replicas [0, 1]
    leader = env.ctl.client(0)
    for _ in range(12):
        await leader.produce("t", 0, BATCH, acks=-1)
    written = 12 * 16
    ref = [wire.ReplicaRef(topic="t", partition=0)]
    await leader.set_configs(
        wire.ThrottleConfig(
            leader_replication_throttled_rate=1, leader_replication_throttled_replicas=ref
        )
    )
    st = env.ctl.state[tp]
    st.replicas = [0, 1, 2]
    await env.ctl.send_leader_and_isr([tp], [0, 1, 2])
    await env.ctl.update_metadata()

    async def first_fetch_landed() -> bool:
        return await env.log_end(2, tp) > 0

    await env.until(first_fetch_landed, "the new replica's first (unthrottled) fetch")
    held = await env.log_end(2, tp)
    assert 0 < held < written
    # Many more fetches from broker 2 (and broker 1) reach the leader's Kafka listener...
    seen = scrape(env.cluster[0].url)["jbod_kafka_requests_total"]

    async def fetched_on() -> bool:
        return scrape(env.cluster[0].url)["jbod_kafka_requests_total"] >= seen + 10

    await leader.produce("t", 0, BATCH, acks=-1)  # the in-sync follower still replicates
    written += 16
    await env.until(fetched_on, "ten more fetches at the leader")
    # ... and none of them carried data to the new replica.
    assert await env.log_end(2, tp) == held
    assert await env.log_end(1, tp) == written
    assert env.ctl.state[tp].isr == [0, 1]
    out = scrape(env.cluster[0].url)["jbod_reassignment_bytes_out_total"]
    assert 0 < out <= FETCH_MAX_BYTES + len(BATCH)

    await leader.set_configs(wire.ThrottleConfig(leader_replication_throttled_rate=0))

    async def joined() -> bool:
        return env.ctl.state[tp].isr == [0, 1, 2]

    await env.until(joined, "broker 2 caught up and joined the ISR")
    assert await env.log_end(2, tp) == written
