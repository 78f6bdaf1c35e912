"""The controller's incremental pass (issue 39): each broker is sent what changed past the
offset it acknowledged, not the whole state each pass; a takeover and a restarted broker get
their whole state once. Driven from observed states over an in-memory API server and brokers
that record what they are sent."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from jbod_broker import wire
from jbod_broker.client import BrokerUnavailableError
from jbod_operator.control.cluster_controller import ClusterController, held_by
from tests.fake_api import FakeApi, state, topic

BROKERS = (0, 1, 2, 3)


class Broker:
    def __init__(self, b: int) -> None:
        self.b = b
        self.lai: list[tuple[int, int]] = []  # (partition, leader epoch) per LeaderAndIsr entry
        self.meta: list[int] = []  # partitions per UpdateMetadata entry
        self.down = False

    async def leader_and_isr(self, req: wire.LeaderAndIsrRequest) -> wire.LeaderAndIsrResponse:
        if self.down:
            raise BrokerUnavailableError(f"broker {self.b} is down")
        self.lai += [(p.partition, p.leader_epoch) for p in req.partitions]
        # Every partition answered clean, as a broker does (the probe reads each answer).
        return wire.LeaderAndIsrResponse(
            partitions=[
                wire.PartitionResult(topic=p.topic, partition=p.partition) for p in req.partitions
            ]
        )

    async def update_metadata_body(self, body: bytes) -> bool:
        if self.down:
            raise BrokerUnavailableError(f"broker {self.b} is down")
        self.meta += [
            p.partition for p in wire.UpdateMetadataRequest.model_validate_json(body).partitions
        ]
        return True

    def clear(self) -> None:
        self.lai, self.meta = [], []


class Pool:
    controller_epoch = 2

    def __init__(self) -> None:
        self.brokers = {b: Broker(b) for b in BROKERS}

    async def client(self, ns: str, cluster: str, b: int) -> Broker:
        return self.brokers[b]

    def endpoints(self, ns: str, cluster: str, ids: list[int]) -> list[wire.BrokerEndpoint]:
        return [wire.BrokerEndpoint(broker_id=i, url=f"http://127.0.0.1:{9000 + i}") for i in ids]

    async def describe(self, ns: str, cluster: str, ids: list[int]) -> dict[int, Any]:
        return {b: None for b in ids}  # strays are not what this tests


def setup(n: int = 300) -> tuple[FakeApi, Pool, ClusterController]:
    api = FakeApi(random.Random(0), topic())
    api.objs = {}
    pool = Pool()
    ctrl = ClusterController("ns", "c", api, pool)  # type: ignore[arg-type]
    states = {p: state(p, brokers=(p % 4, (p + 1) % 4, (p + 2) % 4)) for p in range(n)}
    asyncio.run(ctrl.store.put(api.topic, states))
    return api, pool, ctrl


def live_pass(ctrl: ClusterController, live: tuple[int, ...] = BROKERS) -> None:
    """One tick with ``live`` heartbeating, past the grace period that follows taking over."""
    for b in live:
        ctrl.heartbeat(b, f"inc-{b}")
    ctrl.started = time.monotonic() - 2 * ctrl.session_timeout_s
    asyncio.run(ctrl.tick())


def test_a_new_term_sends_every_broker_its_whole_state_once() -> None:
    _, pool, ctrl = setup()
    live_pass(ctrl)
    for b, broker in pool.brokers.items():
        assert sorted(p for p, _ in broker.lai) == [
            p for p in range(300) if b in {p % 4, (p + 1) % 4, (p + 2) % 4}
        ]
        assert sorted(broker.meta) == list(range(300))
        broker.clear()
    live_pass(ctrl)  # nothing changed: nothing is sent
    ctrl.last_full = 0.0
    live_pass(ctrl)  # the periodic full pass too (before issue 39 it re-sent everything)
    assert all(not b.lai and not b.meta for b in pool.brokers.values())


def test_a_change_goes_to_its_replicas_and_its_metadata_to_everybody() -> None:
    _api, pool, ctrl = setup()
    live_pass(ctrl)
    for broker in pool.brokers.values():
        broker.clear()
    t = asyncio.run(ctrl.store.topic("ns", "orders"))
    assert t is not None
    s = next(x for x in t["status"]["partitions"] if x["partition"] == 5)  # replicas 1, 2, 3
    asyncio.run(ctrl.store.put(t, {5: {**s, "leaderEpoch": 9}}))
    live_pass(ctrl)
    assert {b: broker.lai for b, broker in pool.brokers.items()} == {
        0: [],
        1: [(5, 9)],
        2: [(5, 9)],
        3: [(5, 9)],
    }
    assert {b: broker.meta for b, broker in pool.brokers.items()} == {b: [5] for b in BROKERS}


def test_a_broker_that_missed_a_change_gets_it_on_the_next_pass() -> None:
    _, pool, ctrl = setup()
    live_pass(ctrl)
    t = asyncio.run(ctrl.store.topic("ns", "orders"))
    assert t is not None
    s = next(x for x in t["status"]["partitions"] if x["partition"] == 4)  # replicas 0, 1, 2
    pool.brokers[1].down = True
    asyncio.run(ctrl.store.put(t, {4: {**s, "leaderEpoch": 7}}))
    for broker in pool.brokers.values():
        broker.clear()
    live_pass(ctrl)
    assert pool.brokers[0].lai == [(4, 7)] and pool.brokers[1].lai == []
    pool.brokers[1].down = False
    pool.brokers[0].clear()
    live_pass(ctrl)
    assert pool.brokers[1].lai == [(4, 7)] and pool.brokers[1].meta == [4]
    assert pool.brokers[0].lai == [] and pool.brokers[0].meta == []  # it had it


def test_a_broker_that_restarted_within_its_session_gets_its_whole_state_alone() -> None:
    _, pool, ctrl = setup()
    live_pass(ctrl)
    for broker in pool.brokers.values():
        broker.clear()
    ctrl.heartbeat(2, "inc-2-again")  # a new process: a new incarnation
    live_pass(ctrl, (0, 1, 3))
    assert len(pool.brokers[2].lai) == 225 and sorted(pool.brokers[2].meta) == list(range(300))
    assert all(not pool.brokers[b].lai and not pool.brokers[b].meta for b in (0, 1, 3))


def dead_broker_record(n: int = 40) -> tuple[FakeApi, Pool, ClusterController]:
    """A record after broker 3 died: its replicas offline, out of every ISR, leading none."""
    api = FakeApi(random.Random(0), topic())
    api.objs = {}
    pool = Pool()
    ctrl = ClusterController("ns", "c", api, pool)  # type: ignore[arg-type]
    states = {}
    for p in range(n):
        brokers = (p % 4, (p + 1) % 4, (p + 2) % 4)
        s = state(p, brokers=brokers)
        isr = [b for b in brokers if b != 3]
        s.update(leader=isr[0], isr=isr, offlineReplicas=[3] if 3 in brokers else [])
        states[p] = s
    asyncio.run(ctrl.store.put(api.topic, states))
    return api, pool, ctrl


def test_a_takeover_in_its_grace_period_keeps_a_dead_brokers_replicas_offline() -> None:
    """Broker 3 is dead in the record; a standby takes over and 0-2 register during its
    grace period: no shard is rewritten (before, every shard holding a replica of 3 lost
    it from offlineReplicas, and got it back once the grace period ended)."""
    _api, pool, ctrl = dead_broker_record()
    before = asyncio.run(ctrl.store.topic("ns", "orders"))
    writes = ctrl.store.stats.writes
    for b in (0, 1, 2):
        ctrl.heartbeat(b, f"inc-{b}")
    ctrl.started = time.monotonic()  # in the grace period
    asyncio.run(ctrl.tick())
    assert all(pool.brokers[b].lai for b in (0, 1, 2))  # the pass ran: they were probed
    assert ctrl.store.stats.writes == writes
    live_pass(ctrl, (0, 1, 2))  # past the grace period, 3 is known dead: still nothing
    assert ctrl.store.stats.writes == writes
    assert asyncio.run(ctrl.store.topic("ns", "orders")) == before


def test_a_dead_broker_registering_in_the_grace_period_comes_back_online() -> None:
    """The other way: broker 3 registers during the grace period, so its replicas are
    no longer offline (and rejoin the ISR as followers catch up, not here)."""
    _api, _pool, ctrl = dead_broker_record()
    for b in BROKERS:
        ctrl.heartbeat(b, f"inc-{b}")
    ctrl.started = time.monotonic()
    asyncio.run(ctrl.tick())
    t = asyncio.run(ctrl.store.topic("ns", "orders"))
    assert t is not None
    assert all(not s.get("offlineReplicas") for s in t["status"]["partitions"])


def test_a_takeover_over_partitions_as_created_writes_no_shard() -> None:
    """A partition as created has no diskOfflineReplicas; a takeover probes every broker,
    and filling in the empty list is no change (it used to rewrite every shard)."""
    _api, _pool, ctrl = setup()
    writes = ctrl.store.stats.writes
    live_pass(ctrl)
    assert ctrl.store.stats.writes == writes


def test_held_by_walks_the_record_once_for_every_probed_broker() -> None:
    """Each probed broker's replicas, in the record's order; a replica a reassignment is
    adding is the reassignment's to create, and a broker not probed gets no list."""
    t = {"status": {"partitions": [state(0, brokers=(0, 1, 2)), state(1, brokers=(1, 2, 3))]}}
    t["status"]["partitions"][1]["addingReplicas"] = [3]
    held = asyncio.run(held_by([t], {1, 3}))
    assert {b: [s["partition"] for _, s in pairs] for b, pairs in held.items()} == {
        1: [0, 1],
        3: [],
    }
