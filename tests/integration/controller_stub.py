"""The test acting as Kafka's controller, for broker-level tests (issue 4).

The real controller is the operator (later issues). This one keeps partition state in memory,
answers the brokers' AlterPartition and log dir events over HTTP (validating epochs like the
real one must), and drives LeaderAndIsr / UpdateMetadata / StopReplica from test code.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster, free_port
from jbod_broker.storage.names import TopicPartition
from jbod_operator.plan.producer_ids import BLOCK_SIZE, take_block
from tests.waiting import wait_for

T = TypeVar("T")


@dataclass
class PState:
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0
    min_isr: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    created: set[int] = field(default_factory=set)
    offline: set[int] = field(default_factory=set)


class ControllerStub:
    def __init__(self, cluster: LocalCluster | None = None, controller_epoch: int = 1) -> None:
        self.cluster = cluster
        self.port = free_port()
        self.epoch = controller_epoch
        self.state: dict[TopicPartition, PState] = {}
        self.log_dir_events: list[wire.LogDirEvent] = []
        self.alter_requests: list[wire.AlterPartitionRequest] = []
        self.dead: set[int] = set()
        self.next_producer_id = 0
        self.heartbeats: dict[int, int] = {}
        self.heartbeat_times: dict[int, list[float]] = {}
        """When each broker's heartbeats arrived (``time.monotonic()``): a broker whose loop
        is held misses them (issue 36)."""
        self.kafka_endpoints: dict[int, str] = {}
        """Each broker's advertised Kafka listener, from its heartbeats (as the operator)."""
        self._runner: web.AppRunner | None = None
        self._clients: dict[int, BrokerClient] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/controller/alter-partition", self._alter_partition)
        app.router.add_post("/v1/controller/log-dir-event", self._log_dir_event)
        app.router.add_post("/v1/controller/heartbeat", self._heartbeat)
        app.router.add_post("/v1/controller/allocate-producer-ids", self._allocate_producer_ids)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        for c in self._clients.values():
            await c.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def client(self, broker_id: int) -> BrokerClient:
        assert self.cluster is not None
        c = self._clients.get(broker_id)
        if c is None:
            c = BrokerClient(self.cluster[broker_id].url, token=self.cluster.token, timeout_s=15)
            self._clients[broker_id] = c
        return c

    # -- HTTP side ------------------------------------------------------------------------

    async def _alter_partition(self, request: web.Request) -> web.Response:
        req = wire.AlterPartitionRequest.model_validate_json(await request.read())
        self.alter_requests.append(req)
        out = []
        for item in req.partitions:
            tp = TopicPartition(item.topic, item.partition)
            st = self.state.get(tp)
            if st is None:
                out.append(
                    wire.AlterPartitionResult(
                        topic=item.topic,
                        partition=item.partition,
                        error="UNKNOWN_TOPIC_OR_PARTITION",
                    )
                )
                continue
            if item.leader_epoch != st.leader_epoch or req.broker_id != st.leader:
                err = "FENCED_LEADER_EPOCH"
            elif item.partition_epoch != st.partition_epoch:
                err = "INVALID_UPDATE_VERSION"
            elif not set(item.new_isr) <= set(st.replicas) or st.leader not in item.new_isr:
                err = "INVALID_REQUEST"
            else:
                err = None
                st.isr = list(item.new_isr)
                st.partition_epoch += 1
            out.append(
                wire.AlterPartitionResult(
                    topic=item.topic,
                    partition=item.partition,
                    error=err,
                    leader=st.leader,
                    leader_epoch=st.leader_epoch,
                    isr=list(st.isr),
                    partition_epoch=st.partition_epoch,
                )
            )
        return web.Response(
            body=wire.AlterPartitionResponse(partitions=out).model_dump_json(),
            content_type="application/json",
        )

    async def _heartbeat(self, request: web.Request) -> web.Response:
        hb = wire.BrokerHeartbeat.model_validate_json(await request.read())
        self.heartbeats[hb.broker_id] = self.heartbeats.get(hb.broker_id, 0) + 1
        self.heartbeat_times.setdefault(hb.broker_id, []).append(time.monotonic())
        if hb.kafka_endpoint is not None:
            self.kafka_endpoints[hb.broker_id] = hb.kafka_endpoint
        return web.json_response({"ok": True})

    async def _allocate_producer_ids(self, request: web.Request) -> web.Response:
        """The operator's rule (``plan.producer_ids``) with the counter in memory."""
        wire.AllocateProducerIdsRequest.model_validate_json(await request.read())
        first, self.next_producer_id = take_block(self.next_producer_id)
        resp = wire.AllocateProducerIdsResponse(first_producer_id=first, count=BLOCK_SIZE)
        return web.Response(body=resp.model_dump_json(), content_type="application/json")

    async def _log_dir_event(self, request: web.Request) -> web.Response:
        ev = wire.LogDirEvent.model_validate_json(await request.read())
        self.log_dir_events.append(ev)
        for r in ev.offline_replicas:
            st = self.state.get(TopicPartition(r.topic, r.partition))
            if st is not None:
                st.offline.add(ev.broker)
        return web.json_response({"ok": True})

    # -- driving brokers ------------------------------------------------------------------

    def live(self) -> list[int]:
        assert self.cluster is not None
        return [b.broker_id for b in self.cluster.brokers if b.broker_id not in self.dead]

    def endpoints(self) -> list[wire.BrokerEndpoint]:
        """The live brokers, each with its Kafka listener as its heartbeats said or, before
        its first heartbeat arrived, as the stub configured it: followers replicate from
        their leader's Kafka listener (issue 18), so a topic created in the instant between
        a broker's start and its first heartbeat must still name it."""
        assert self.cluster is not None
        return [
            wire.BrokerEndpoint(
                broker_id=b,
                url=self.cluster[b].url,
                kafka_endpoint=self.kafka_endpoints.get(b, self.cluster[b].kafka_endpoint),
            )
            for b in self.live()
        ]

    def partition_state(self, tp: TopicPartition, broker: int) -> wire.LeaderAndIsrPartition:
        st = self.state[tp]
        return wire.LeaderAndIsrPartition(
            topic=tp.topic,
            partition=tp.partition,
            leader=st.leader,
            leader_epoch=st.leader_epoch,
            isr=list(st.isr),
            partition_epoch=st.partition_epoch,
            replicas=list(st.replicas),
            is_new_replica=broker not in st.created,
            min_insync_replicas=st.min_isr,
            configs=dict(st.configs),
        )

    async def send_leader_and_isr(self, tps: list[TopicPartition], brokers: list[int]) -> None:
        for b in brokers:
            if b in self.dead:
                continue
            parts = [self.partition_state(tp, b) for tp in tps if b in self.state[tp].replicas]
            if not parts:
                continue
            resp = await self.client(b).leader_and_isr(
                wire.LeaderAndIsrRequest(
                    controller_id=0,
                    controller_epoch=self.epoch,
                    partitions=parts,
                    live_leaders=self.endpoints(),
                )
            )
            for r in resp.partitions:
                tp = TopicPartition(r.topic, r.partition)
                if r.error is None:
                    self.state[tp].created.add(b)
                    self.state[tp].offline.discard(b)
                elif r.error == "KAFKA_STORAGE_ERROR":
                    self.state[tp].offline.add(b)

    async def update_metadata(self) -> None:
        parts = [
            wire.PartitionMetadata(
                topic=tp.topic,
                partition=tp.partition,
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                isr=list(st.isr),
                replicas=list(st.replicas),
                offline_replicas=sorted(st.offline | (set(st.replicas) & self.dead)),
            )
            for tp, st in self.state.items()
        ]
        req = wire.UpdateMetadataRequest(
            controller_id=0,
            controller_epoch=self.epoch,
            live_brokers=self.endpoints(),
            partitions=parts,
        )
        await asyncio.gather(*(self.client(b).update_metadata(req) for b in self.live()))

    async def create_topic(
        self,
        topic: str,
        partitions: int,
        rf: int,
        *,
        min_isr: int = 1,
        configs: dict[str, str] | None = None,
        first_leader: int = 0,
    ) -> list[TopicPartition]:
        live = self.live()
        tps = []
        for p in range(partitions):
            replicas = [live[(first_leader + p + i) % len(live)] for i in range(rf)]
            tp = TopicPartition(topic, p)
            self.state[tp] = PState(
                replicas=replicas,
                leader=replicas[0],
                isr=list(replicas),
                min_isr=min_isr,
                configs=dict(configs or {}),
            )
            tps.append(tp)
        await self.send_leader_and_isr(tps, live)
        await self.update_metadata()
        return tps

    async def elect(
        self,
        tp: TopicPartition,
        *,
        exclude: set[int] | None = None,
        preferred: int | None = None,
    ) -> int:
        """A new leader from the live ISR (no unclean election), new epoch, broadcast.

        ``preferred`` is taken when it is a live ISR member (a preferred-leader election)."""
        st = self.state[tp]
        gone = (exclude or set()) | self.dead | st.offline
        candidates = [r for r in st.isr if r not in gone]
        if not candidates:
            raise RuntimeError(f"{tp}: no live ISR member to elect (ISR {st.isr})")
        st.leader = preferred if preferred in candidates else candidates[0]
        st.isr = candidates
        st.leader_epoch += 1
        st.partition_epoch += 1
        await self.send_leader_and_isr([tp], st.replicas)
        await self.update_metadata()
        return st.leader

    async def broker_died(self, broker_id: int) -> None:
        self.dead.add(broker_id)
        for tp, st in self.state.items():
            if st.leader == broker_id:
                await self.elect(tp)
            elif broker_id in st.isr:
                st.isr = [r for r in st.isr if r != broker_id]
                st.partition_epoch += 1
                await self.send_leader_and_isr([tp], [st.leader])
        await self.update_metadata()

    async def broker_back(self, broker_id: int) -> None:
        self.dead.discard(broker_id)
        tps = [tp for tp, st in self.state.items() if broker_id in st.replicas]
        await self.send_leader_and_isr(tps, [broker_id])
        await self.update_metadata()

    def leader_of(self, tp: TopicPartition) -> int:
        return self.state[tp].leader


class LoopThread:
    """An event loop in a thread of its own: the controller stub keeps answering the brokers
    while synchronous code (a Hypothesis test, a bench driving Kafka's tools) runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@dataclass
class StubCluster:
    cluster: LocalCluster
    ctl: ControllerStub
    loop: LoopThread


@contextlib.contextmanager
def stub_cluster(
    base: str, size: int, *, num_dirs: int, settings: dict[str, str], endpoints_within_s: float = 30
) -> Iterator[StubCluster]:
    """``size`` broker processes under the controller stub on a :class:`LoopThread`, once
    every broker's Kafka endpoint has been heard (its heartbeats carry it); everything stopped
    at the end, a broker that exits badly said on stderr with its log's tail."""
    loop = LoopThread()
    ctl = ControllerStub()
    loop.run(ctl.start())
    cluster = LocalCluster(
        base, size=size, num_dirs=num_dirs, controller_url=ctl.url, settings=settings
    )
    ctl.cluster = cluster
    try:
        cluster.start()
        wait_for(
            lambda: len(ctl.kafka_endpoints) >= size,
            f"the Kafka endpoints of {size} brokers",
            endpoints_within_s,
        )
        yield StubCluster(cluster, ctl, loop)
    finally:
        for b in cluster.brokers:
            rc = b.stop()
            if rc not in (0, None):
                print(f"broker {b.broker_id} exited with {rc}:\n{b.tail()}", file=sys.stderr)
        loop.run(ctl.stop())
        loop.close()


@contextlib.asynccontextmanager
async def running_cluster(
    base: str, size: int, *, num_dirs: int, settings: dict[str, str]
) -> AsyncIterator[tuple[ControllerStub, LocalCluster]]:
    """``size`` broker processes under a controller stub on the caller's loop (an async
    test's), both stopped at the end."""
    ctl = ControllerStub()
    await ctl.start()
    cluster = LocalCluster(
        base, size=size, num_dirs=num_dirs, controller_url=ctl.url, settings=settings
    )
    ctl.cluster = cluster
    try:
        await asyncio.to_thread(cluster.start)
        yield ctl, cluster
    finally:
        await asyncio.to_thread(cluster.stop)
        await ctl.stop()
