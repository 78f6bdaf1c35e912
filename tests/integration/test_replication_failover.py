"""Replication through failures: three broker processes, RF 3, min.insync.replicas=2, acks=all.

Each scenario runs a counting producer (acks=all, never retries a value) in the background while
a broker or a disk fails, and then demands that every acknowledged record is consumed exactly
once and in order, and that the producer kept being acknowledged after the failure:

- a follower dies (SIGKILL): the leaders shrink the ISR, producing goes on with two replicas;
  the follower restarts, the controller sends LeaderAndIsr (not a new replica), it catches up
  and the leaders add it back through AlterPartition;
- the leader dies (SIGKILL) holding a record no follower has: the test, as controller, elects a
  new leader from the ISR; producing resumes there; the old leader restarts, truncates its
  divergent tail to the new leader's log (KIP-101), rejoins the ISR, and serves the partition
  again after a preferred-leader election;
- a follower's log dir fails (chmod 000): the follower reports a LogDirEvent, its replica goes
  offline while its other disks keep replicating, the leader drops it from the ISR after
  replica.lag.time.max.ms and producing goes on; a restart with the disk still bad leaves that
  replica offline (not re-created elsewhere, KIP-112); once the disk is back and the broker
  restarted, it rejoins;
- controller requests carrying an older controller epoch are refused with 409
  STALE_CONTROLLER_EPOCH, and a LeaderAndIsr/StopReplica with an older leader epoch is answered
  with a per-partition FENCED_LEADER_EPOCH; neither changes anything.

The last tests pin down broker bugs found on the way (each docstring names the cause; those
fixed meanwhile stay as regression tests).

The topic ``t`` has partitions 0 and 1 with replicas [0, 1, 2] and [1, 2, 0] (the stub's round
robin): broker 0 leads partition 0, broker 1 leads partition 1, broker 2 follows both.

Run through ``scripts/run-tests`` (it drops root's DAC capabilities so chmod 000 binds).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError, NotLeaderOrFollowerError
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from tests.integration.controller_stub import ControllerStub
from tests.integration.counting import CountingProducer, consume_all, running, verify
from tests.permissions import require_permissions
from tests.waiting import wait_async

pytestmark = pytest.mark.integration

LAG_MS = 1500
FETCH_WAIT_S = 0.3
SETTINGS = {
    "replica.lag.time.max.ms": str(LAG_MS),
    "replica.fetch.wait.max.ms": str(int(FETCH_WAIT_S * 1000)),
    "replica.high.watermark.checkpoint.interval.ms": "200",
    "controller.retry.backoff.ms": "50",
    "controller.retry.backoff.max.ms": "500",
}
AFTER = 100
"""Records the producer must get acknowledged after each failure (20 batches of 5)."""

TIMINGS: dict[str, float] = {}


# --------------------------------------------------------------------------------------------
# Fixture and helpers
# --------------------------------------------------------------------------------------------


@dataclass
class Env:
    ctl: ControllerStub
    cluster: LocalCluster
    chmodded: list[str] = field(default_factory=list)

    def leader(self, tp: TopicPartition) -> BrokerClient:
        return self.ctl.client(self.ctl.leader_of(tp))

    def tails(self) -> str:
        return "\n".join(f"--- broker {b.broker_id}:\n{b.tail(8)}" for b in self.cluster.brokers)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    ctl = ControllerStub()
    await ctl.start()
    cluster = LocalCluster(
        str(tmp_path / "cluster"),
        size=3,
        num_dirs=3,
        controller_url=ctl.url,
        settings=dict(SETTINGS),
    )
    ctl.cluster = cluster
    e = Env(ctl, cluster)
    try:
        await asyncio.to_thread(cluster.start)
        yield e
    finally:
        for d in e.chmodded:
            os.chmod(d, 0o755)
        for b in cluster.brokers:
            if b.alive:
                assert b.proc is not None
                os.kill(b.proc.pid, signal.SIGCONT)  # in case a test failed while it was stopped
        await asyncio.to_thread(cluster.stop)  # SIGTERM, then SIGKILL after 20 s
        await ctl.stop()


Pred = Callable[[], bool | Awaitable[bool]]


async def wait_until(
    env: Env, pred: Pred, timeout_s: float, what: str | Callable[[], str]
) -> float:
    """:func:`tests.waiting.wait_async` (the brokers' last log lines in the failure); returns
    the seconds it took."""
    start = time.monotonic()

    def why() -> str:
        return f"{what if isinstance(what, str) else what()}\n{env.tails()}"

    await wait_async(pred, why, timeout_s, interval=0.05)
    return time.monotonic() - start


async def wait_acked(
    env: Env, prod: CountingProducer, n: int, what: str, tp: TopicPartition | None = None
) -> float:
    def count() -> int:
        return prod.acked_count if tp is None else len(prod.acked.get(tp, []))

    return await wait_until(
        env,
        lambda: count() >= n,
        30,
        lambda: f"{what}: {count()} of {n} records acknowledged (errors: {prod.errors})",
    )


async def leo(env: Env, broker: int, tp: TopicPartition) -> int | None:
    """The log end offset of ``tp``'s current replica on ``broker`` (None: not in a live dir)."""
    resp = await env.ctl.client(broker).describe_log_dirs(topics=[tp.topic])
    for d in resp.log_dirs:
        for r in d.partitions:
            if d.is_live and not r.is_future and (r.topic, r.partition) == (tp.topic, tp.partition):
                return r.log_end_offset
    return None


async def leo_above(env: Env, broker: int, tp: TopicPartition, offset: int | None) -> bool:
    now = await leo(env, broker, tp)
    return now is not None and offset is not None and now > offset


async def dir_of(env: Env, broker: int, tp: TopicPartition) -> str:
    resp = await env.ctl.client(broker).describe_log_dirs(topics=[tp.topic])
    found = [
        d.path
        for d in resp.log_dirs
        for r in d.partitions
        if (r.topic, r.partition) == (tp.topic, tp.partition) and not r.is_future
    ]
    assert len(found) == 1, f"{tp} on broker {broker}: {found}"
    return found[0]


async def settle(env: Env, tps: list[TopicPartition], timeout_s: float = 20) -> None:
    """Wait until every live replica of each partition has the leader's log end offset and the
    leader's high watermark has reached it (nothing left in flight)."""
    state: dict[str, object] = {}

    async def done() -> bool:
        for tp in tps:
            st = env.ctl.state[tp]
            hw = (await env.leader(tp).list_offsets(tp.topic, tp.partition, "latest")).offset
            leos = {
                b: await leo(env, b, tp)
                for b in st.replicas
                if b not in env.ctl.dead and b not in st.offline
            }
            state[str(tp)] = {"hw": hw, "leos": leos}
            if len(set(leos.values())) != 1 or leos[st.leader] != hw:
                return False
        return True

    await wait_until(env, done, timeout_s, lambda: f"replicas converge: {state}")


async def consume_and_verify(env: Env, prod: CountingProducer) -> dict[TopicPartition, list[bytes]]:
    consumed = {tp: await consume_all(env.leader, tp) for tp in prod.tps}
    verify(prod.acked, consumed)
    for tp in prod.tps:
        assert len(consumed[tp]) >= len(prod.acked.get(tp, []))
    return consumed


def stop_process(env: Env, broker: int) -> None:
    proc = env.cluster[broker].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)


def continue_process(env: Env, broker: int) -> None:
    proc = env.cluster[broker].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGCONT)


def log_events(env: Env, broker: int, event: str) -> list[dict[str, Any]]:
    out = []
    with open(env.cluster[broker].log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("event") == event:
                out.append(rec)
    return out


def value(tp: TopicPartition, seq: int) -> bytes:
    """A value in the counting producer's format (``verify`` parses the sequence number)."""
    return b"%s-%d-%08d" % (tp.topic.encode(), tp.partition, seq)


async def post_raw(env: Env, broker: int, path: str, body: wire.Model) -> tuple[int, Any]:
    """POST a controller request and return the HTTP status and the JSON body as sent back."""
    headers = {"Authorization": f"Bearer {env.cluster.token}", "Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as s,
        s.post(env.cluster[broker].url + path, data=body.model_dump_json(), headers=headers) as r,
    ):
        return r.status, await r.json()


def isr_has(env: Env, tps: list[TopicPartition], broker: int, present: bool) -> Callable[[], bool]:
    return lambda: all((broker in env.ctl.state[tp].isr) == present for tp in tps)


# --------------------------------------------------------------------------------------------
# (a) a follower is killed and restarted
# --------------------------------------------------------------------------------------------


async def test_follower_killed_and_restarted_catches_up_and_rejoins_isr(env: Env) -> None:
    ctl, cl = env.ctl, env.cluster
    tps = await ctl.create_topic("t", 2, 3, min_isr=2)
    victim = 2
    assert all(ctl.leader_of(tp) != victim and victim in ctl.state[tp].isr for tp in tps)

    prod = CountingProducer(env.leader, tps)
    async with running(prod):
        await wait_acked(env, prod, AFTER, "before the kill")
        cl[victim].kill()
        at_kill = prod.acked_count
        TIMINGS["a.isr_shrink_s"] = await wait_until(
            env,
            isr_has(env, tps, victim, False),
            LAG_MS / 1000 + 10,
            "the leaders drop the killed follower from the ISR",
        )
        # min.insync.replicas=2 of 3: acks=all goes on with the two left.
        await wait_acked(env, prod, prod.acked_count + AFTER, "producing with the follower down")
        acked_while_down = prod.acked_count - at_kill

        n_alters = len(ctl.alter_requests)
        started = time.monotonic()
        await asyncio.to_thread(cl[victim].start)
        assert all(not ctl.partition_state(tp, victim).is_new_replica for tp in tps)
        await ctl.broker_back(victim)
        TIMINGS["a.rejoin_s"] = await wait_until(
            env,
            isr_has(env, tps, victim, True),
            20,
            "the restarted follower is back in the ISR of every partition",
        )
        TIMINGS["a.restart_to_rejoin_s"] = time.monotonic() - started
        # ...because each leader asked for it (AlterPartition), not because the test said so.
        expanded = {
            (item.topic, item.partition)
            for req in ctl.alter_requests[n_alters:]
            for item in req.partitions
            if victim in item.new_isr
            and req.broker_id == ctl.leader_of(TopicPartition(item.topic, item.partition))
        }
        assert expanded == {(tp.topic, tp.partition) for tp in tps}
        await wait_acked(env, prod, prod.acked_count + AFTER, "producing with the ISR full again")

    assert acked_while_down >= AFTER
    await settle(env, tps)
    await consume_and_verify(env, prod)
    TIMINGS["a.acked"] = prod.acked_count
    print(f"\n(a) acked {prod.acked_count}, {acked_while_down} while down, errors {prod.errors}")


# --------------------------------------------------------------------------------------------
# (b) the leader is killed; a new leader is elected from the ISR; the old one comes back
# --------------------------------------------------------------------------------------------


async def test_leader_killed_new_leader_elected_old_leader_truncates_and_rejoins(env: Env) -> None:
    ctl, cl = env.ctl, env.cluster
    tps = await ctl.create_topic("t", 2, 3, min_isr=2)
    tp0 = tps[0]
    old = ctl.leader_of(tp0)
    assert old == 0 and ctl.state[tp0].isr == [0, 1, 2]
    followers = [1, 2]

    prod = CountingProducer(env.leader, tps)
    async with running(prod):
        await wait_acked(env, prod, AFTER, "before the kill")

        # Freeze the followers so that the leader holds a record none of them has, then kill
        # the leader: its log now diverges from whatever the next leader writes there.
        marker = value(tp0, 99_999_999)
        for b in followers:
            stop_process(env, b)
        try:
            # Let their last long-poll fetches end first: a fetch still waiting at the leader
            # would carry the record into the stopped follower's socket buffer.
            await asyncio.sleep(FETCH_WAIT_S + 0.15)
            resp = await ctl.client(old).produce(
                tp0.topic, tp0.partition, build_batch([(None, marker)]), acks=1
            )
            assert resp is not None
            marker_offset = resp.base_offset
            cl[old].kill()
        finally:
            for b in followers:
                continue_process(env, b)
        killed = time.monotonic()
        at_kill, at_kill_tp0 = prod.acked_count, len(prod.acked.get(tp0, []))

        await ctl.broker_died(old)
        new = ctl.leader_of(tp0)
        assert new in followers and ctl.state[tp0].isr == followers
        TIMINGS["b.election_s"] = time.monotonic() - killed
        TIMINGS["b.resume_on_new_leader_s"] = await wait_acked(
            env, prod, at_kill_tp0 + AFTER // 2, "producing to the new leader", tp=tp0
        )
        await wait_acked(env, prod, at_kill + AFTER, "producing after the election")
        acked_after_kill = prod.acked_count - at_kill

        started = time.monotonic()
        await asyncio.to_thread(cl[old].start)
        await ctl.broker_back(old)
        TIMINGS["b.rejoin_s"] = await wait_until(
            env,
            isr_has(env, tps, old, True),
            20,
            "the old leader is back in the ISR of every partition",
        )
        TIMINGS["b.restart_to_rejoin_s"] = time.monotonic() - started

        # KIP-101: it cut its log at the end of its last epoch on the new leader, removing the
        # record that only it had.
        cuts = [
            (r["from"], r["to"])
            for r in log_events(env, old, "follower_truncate")
            if r.get("partition") == str(tp0)
        ]
        assert any(to <= marker_offset < frm for frm, to in cuts), (
            f"the old leader did not truncate below offset {marker_offset}: {cuts}; "
            f"LEOs {[await leo(env, b, tp0) for b in range(3)]}; its log:\n" + cl[old].tail(60)
        )

        # Hand leadership back: the restarted broker's log must now serve exactly the
        # committed records (a stale tail would show as the marker or a lost record).
        at_back = len(prod.acked.get(tp0, []))
        assert await ctl.elect(tp0, preferred=old) == old
        await wait_acked(env, prod, at_back + AFTER // 2, "producing to the old leader", tp=tp0)

    assert acked_after_kill >= AFTER
    await settle(env, tps)
    consumed = await consume_and_verify(env, prod)
    assert marker not in consumed[tp0], "a record only the dead leader had survived"
    TIMINGS["b.acked"] = prod.acked_count
    print(f"\n(b) acked {prod.acked_count}, {acked_after_kill} after the kill, {prod.errors}")


# --------------------------------------------------------------------------------------------
# (c) a follower's log dir fails
# --------------------------------------------------------------------------------------------


@pytest.fixture
def permissions_enforced(tmp_path: Path) -> None:
    """Skip (saying why) when chmod 000 would not deny access to this process."""
    require_permissions(tmp_path)


async def test_follower_log_dir_failure_takes_replica_offline_and_out_of_isr(
    permissions_enforced: None, env: Env
) -> None:
    ctl, cl = env.ctl, env.cluster
    # Small segments: the follower soon rolls (opens a new file) and fails on the bad disk,
    # if the 200 ms checkpoint has not failed it first.
    tps = await ctl.create_topic("t", 2, 3, min_isr=2, configs={"segment.bytes": "65536"})
    tp0 = tps[0]
    victim = 2
    assert ctl.leader_of(tp0) != victim

    prod = CountingProducer(env.leader, tps, records_per_batch=20)
    async with running(prod):
        await wait_acked(env, prod, AFTER, "before the disk failure")
        bad = await dir_of(env, victim, tp0)
        on_bad = [tp for tp in tps if await dir_of(env, victim, tp) == bad]
        elsewhere = [tp for tp in tps if tp not in on_bad]
        n_events = len(ctl.log_dir_events)

        env.chmodded.append(bad)
        os.chmod(bad, 0)
        failed = time.monotonic()
        try:
            TIMINGS["c.log_dir_event_s"] = await wait_until(
                env,
                lambda: any(
                    ev.broker == victim and ev.log_dir == bad
                    for ev in ctl.log_dir_events[n_events:]
                ),
                15,
                f"broker {victim} reports log dir {bad} offline",
            )
            ev = next(ev for ev in ctl.log_dir_events[n_events:] if ev.log_dir == bad)
            assert {(r.topic, r.partition) for r in ev.offline_replicas} == {
                (tp.topic, tp.partition) for tp in on_bad
            }
            assert all(victim in ctl.state[tp].offline for tp in on_bad)
            desc = await ctl.client(victim).describe_log_dirs()
            assert {d.path: d.is_live for d in desc.log_dirs}[bad] is False
            assert sum(d.is_live for d in desc.log_dirs) == 2  # the broker lives on

            TIMINGS["c.isr_shrink_s"] = await wait_until(
                env,
                isr_has(env, on_bad, victim, False),
                LAG_MS / 1000 + 10,
                "the leader drops the offline replica from the ISR",
            )
            TIMINGS["c.failure_to_shrink_s"] = time.monotonic() - failed
            at_shrink = prod.acked_count
            await wait_acked(env, prod, at_shrink + AFTER, "producing with two in-sync replicas")
            acked_after = prod.acked_count - at_shrink
            # Its replicas on the other disks keep replicating and stay in sync.
            assert all(victim in ctl.state[tp].isr for tp in elsewhere)

            # A restart with the disk still bad: the directory is offline from the start
            # (reported again), and the replicas it held are neither served nor re-created on
            # another disk although the controller asks for them (not new: KIP-112).
            n_events = len(ctl.log_dir_events)
            await asyncio.to_thread(cl[victim].stop)
            await asyncio.to_thread(cl[victim].start)
            await ctl.broker_back(victim)
            assert any(
                ev.broker == victim and ev.log_dir == bad for ev in ctl.log_dir_events[n_events:]
            )
            assert all(victim in ctl.state[tp].offline for tp in on_bad)  # LeaderAndIsr refused
            for tp in on_bad:
                assert await leo(env, victim, tp) is None, f"{tp} was re-created elsewhere"
            await wait_until(
                env,
                isr_has(env, elsewhere, victim, True),
                20,
                "the replicas on the good disks are in the ISR after the restart",
            )
        finally:
            os.chmod(bad, 0o755)

        # The disk is repaired; a restart brings the directory and its replica back (KIP-112).
        started = time.monotonic()
        await asyncio.to_thread(cl[victim].stop)
        await asyncio.to_thread(cl[victim].start)
        await ctl.broker_back(victim)
        await wait_until(
            env,
            isr_has(env, tps, victim, True),
            20,
            "the replica on the repaired disk rejoins the ISR",
        )
        TIMINGS["c.restart_to_rejoin_s"] = time.monotonic() - started
        await wait_acked(env, prod, prod.acked_count + AFTER, "producing after the repair")

    assert acked_after >= AFTER
    await settle(env, tps)
    await consume_and_verify(env, prod)
    TIMINGS["c.acked"] = prod.acked_count
    print(f"\n(c) acked {prod.acked_count}, {acked_after} after the shrink, {prod.errors}")


# --------------------------------------------------------------------------------------------
# (d) requests from a replaced controller, or for an older leader epoch, change nothing
# --------------------------------------------------------------------------------------------


async def test_stale_controller_epoch_and_fenced_leader_epoch_change_nothing(env: Env) -> None:
    ctl = env.ctl
    tps = await ctl.create_topic("t", 2, 3, min_isr=2)
    tp0, tp1 = tps
    # A controller failover (epoch 2), then a leader election in it (partition 0: epoch 1).
    ctl.epoch = 2
    assert await ctl.elect(tp0, preferred=0) == 0
    assert ctl.state[tp0].leader_epoch == 1

    prod = CountingProducer(env.leader, tps)
    for _ in range(5):
        await prod.produce_one_round()
    assert prod.acked_count == 50, prod.errors
    await settle(env, tps)

    async def snapshot() -> dict[int, Any]:
        out: dict[int, Any] = {}
        for b in range(3):
            md = await ctl.client(b).metadata()
            dirs = await ctl.client(b).describe_log_dirs(topics=["t"])
            replicas = [(d.path, r) for d in dirs.log_dirs for r in d.partitions]
            out[b] = (md, sorted(replicas, key=lambda x: (x[0], x[1].topic, x[1].partition)))
        return out

    before = await snapshot()
    assert all(md.controller_epoch == 2 for md, _ in before.values())

    # What the old controller (epoch 1) still believes it must send: 0 loses partition 0 to 2,
    # 1 deletes its replicas, everyone hears that only broker 2 is alive.
    hijack = wire.LeaderAndIsrPartition(
        topic=tp0.topic,
        partition=tp0.partition,
        leader=2,
        leader_epoch=7,
        isr=[2],
        partition_epoch=50,
        replicas=[0, 1, 2],
        min_insync_replicas=1,
    )
    stale: list[tuple[int, str, wire.Model]] = [
        (
            0,
            "/v1/controller/leader-and-isr",
            wire.LeaderAndIsrRequest(
                controller_id=1, controller_epoch=1, partitions=[hijack], live_leaders=[]
            ),
        ),
        (
            2,
            "/v1/controller/leader-and-isr",
            wire.LeaderAndIsrRequest(
                controller_id=1, controller_epoch=1, partitions=[hijack], live_leaders=[]
            ),
        ),
        (
            1,
            "/v1/controller/stop-replica",
            wire.StopReplicaRequest(
                controller_id=1,
                controller_epoch=1,
                partitions=[
                    wire.StopReplicaPartition(topic=tp.topic, partition=tp.partition, delete=True)
                    for tp in tps
                ],
            ),
        ),
    ]
    for b in range(3):
        stale.append(
            (
                b,
                "/v1/controller/update-metadata",
                wire.UpdateMetadataRequest(
                    controller_id=1,
                    controller_epoch=1,
                    live_brokers=[wire.BrokerEndpoint(broker_id=2, url=env.cluster[2].url)],
                    partitions=[
                        wire.PartitionMetadata(
                            topic=tp0.topic,
                            partition=tp0.partition,
                            leader=2,
                            leader_epoch=7,
                            isr=[2],
                            replicas=[0, 1, 2],
                        )
                    ],
                ),
            )
        )
    for b, path, body in stale:
        status, out = await post_raw(env, b, path, body)
        assert (status, out.get("error")) == (409, "STALE_CONTROLLER_EPOCH"), (b, path, out)

    # The current controller, with an older leader epoch for partition 0 (and partition 1 as
    # it is): partition 0 is fenced, partition 1 is accepted as a no-op.
    old_epoch = wire.LeaderAndIsrPartition(
        topic=tp0.topic,
        partition=tp0.partition,
        leader=2,
        leader_epoch=0,
        isr=[1, 2],
        partition_epoch=ctl.state[tp0].partition_epoch + 1,
        replicas=[0, 1, 2],
        min_insync_replicas=2,
    )
    for b in range(3):
        status, out = await post_raw(
            env,
            b,
            "/v1/controller/leader-and-isr",
            wire.LeaderAndIsrRequest(
                controller_id=0,
                controller_epoch=2,
                partitions=[old_epoch, ctl.partition_state(tp1, b)],
                live_leaders=ctl.endpoints(),
            ),
        )
        assert status == 200, out
        errors = {(r["topic"], r["partition"]): r["error"] for r in out["partitions"]}
        assert errors == {(tp0.topic, 0): "FENCED_LEADER_EPOCH", (tp1.topic, 1): None}, (b, out)
    status, out = await post_raw(
        env,
        1,
        "/v1/controller/stop-replica",
        wire.StopReplicaRequest(
            controller_id=0,
            controller_epoch=2,
            partitions=[
                wire.StopReplicaPartition(
                    topic=tp0.topic, partition=tp0.partition, leader_epoch=0, delete=True
                )
            ],
        ),
    )
    assert status == 200, out
    assert [r["error"] for r in out["partitions"]] == ["FENCED_LEADER_EPOCH"], out

    # Nothing changed: same metadata, same replicas in the same places, same leaders.
    after = await snapshot()
    for b in range(3):
        assert after[b] == before[b], f"broker {b} changed"
    with pytest.raises(NotLeaderOrFollowerError):
        await ctl.client(2).produce(tp0.topic, tp0.partition, build_batch([(None, b"x")]))

    # And replication still works as before: acks=all needs the followers fetching.
    for _ in range(5):
        await prod.produce_one_round()
    assert prod.acked_count == 100, prod.errors
    await settle(env, tps)
    await consume_and_verify(env, prod)
    assert {
        tp: (await env.leader(tp).list_offsets(tp.topic, tp.partition, "latest")).leader_epoch
        for tp in tps
    } == {tp0: 1, tp1: 0}


# --------------------------------------------------------------------------------------------
# (e) broker bugs found while writing the scenarios above (see the docstrings)
# --------------------------------------------------------------------------------------------


async def test_isr_shrunk_by_controller_to_leader_alone_commits_pending_produce(env: Env) -> None:
    """When the controller's LeaderAndIsr shrinks the ISR to the leader alone, a record the
    leader already has is committed (it is on every ISR member): the pending acks=all produce
    must complete and the high watermark reach the log end.

    Broker bug: ``ReplicaManager._apply_partition_state`` applies the new ISR but never
    recomputes the high watermark (only produce, a follower fetch and ``alter_partition_done``
    call ``Partition.maybe_increment_leader_hw``). With both followers dead nothing else does,
    so the producer waits for its whole timeout and gets REQUEST_TIMED_OUT for a committed
    record, and consumers cannot read it until some later produce moves the high watermark. Kafka's
    ``Partition.makeLeader`` calls ``maybeIncrementLeaderHW`` for this reason ("the ISR could be
    down to 1"). The same gap leaves a leader elected with an ISR of one serving a stale high
    watermark (with min.insync.replicas=2 no produce can fix it: acknowledged records stay
    invisible to consumers). Fix: at the end of ``_apply_partition_state``, when this broker
    leads the partition, run ``p.maybe_increment_leader_hw(log)`` before ``p.notify()``, as
    ``alter_partition_done`` does.
    """
    ctl, cl = env.ctl, env.cluster
    (tp,) = await ctl.create_topic("t", 1, 3, min_isr=1)
    leader = ctl.client(ctl.leader_of(tp))
    for i in range(3):
        await leader.produce(tp.topic, tp.partition, build_batch([(None, value(tp, i))]))
    leo_before = await leo(env, 0, tp)

    for b in (1, 2):
        cl[b].kill()
        ctl.dead.add(b)
    pending = asyncio.create_task(
        leader.produce(tp.topic, tp.partition, build_batch([(None, value(tp, 3))]), timeout_ms=4000)
    )
    try:
        await wait_until(
            env,
            lambda: leo_above(env, 0, tp, leo_before),
            5,
            "the leader appends the record",
        )
        # The controller notices both deaths well before replica.lag.time.max.ms.
        await ctl.broker_died(1)
        await ctl.broker_died(2)
        assert ctl.state[tp].isr == [0]
        done, _ = await asyncio.wait({pending}, timeout=2.5)
        hw = (await leader.list_offsets(tp.topic, tp.partition, "latest")).offset
        end = await leo(env, 0, tp)
    finally:
        outcome = await asyncio.gather(pending, return_exceptions=True)
    assert done and hw == end, (
        f"ISR is now [0] and the leader holds offsets up to {end}, yet its high watermark is "
        f"{hw} and the acks=all produce is still waiting (it ended with {outcome[0]!r})"
    )


async def test_leader_elected_as_sole_isr_member_serves_every_acknowledged_record(
    env: Env,
) -> None:
    """The leader and one follower die together; the controller elects the last ISR member.
    Every record acknowledged with acks=all is in its log, and it is the whole ISR, so all of
    them are committed and a consumer must read them.

    Broker bug (the same as in the test above): the new leader keeps the high watermark it
    last heard of as a follower (up to one fetch behind the old leader's), and nothing
    recomputes it: with min.insync.replicas=2 every produce is refused before the append, so the
    last acknowledged records stay invisible to consumers for as long as the ISR is one.
    """
    ctl, cl = env.ctl, env.cluster
    (tp,) = await ctl.create_topic("t", 1, 3, min_isr=2)
    prod = CountingProducer(env.leader, [tp], records_per_batch=1)
    for _ in range(20):
        await prod.produce_one_round()
    assert prod.acked_count == 20, prod.errors

    for b in (0, 2):  # at once, e.g. a rack
        cl[b].kill()
        ctl.dead.add(b)
    assert await ctl.elect(tp) == 1
    assert ctl.state[tp].isr == [1]
    consumed = {tp: await consume_all(env.leader, tp)}
    hw = (await env.leader(tp).list_offsets(tp.topic, tp.partition, "latest")).offset
    assert len(consumed[tp]) == 20, (
        f"the new leader (ISR [1]) has the log up to {await leo(env, 1, tp)}, but its high "
        f"watermark is {hw}: consumers read {len(consumed[tp])} of 20 acknowledged records"
    )
    verify(prod.acked, consumed)


async def test_leader_and_isr_with_older_partition_epoch_changes_nothing(env: Env) -> None:
    """A LeaderAndIsr with the current leader epoch but an *older* partition epoch (a delayed or
    retried request) must not replace a newer ISR, as Kafka's ``Partition.makeLeader`` skips a
    state whose partition epoch is older than the one it has.

    Otherwise the leader believes in an ISR smaller than the controller's and acknowledges
    acks=all records that a member of the controller's ISR never received: a clean election of
    that member loses them. The test sets exactly that up with broker 2 frozen (SIGSTOP).
    (Found failing while this file was written: ``ReplicaManager._apply_partition_state``
    fenced only on the leader epoch; it now skips such a state.)
    """
    ctl = env.ctl
    (tp,) = await ctl.create_topic("t", 1, 3, min_isr=2)
    leader = ctl.client(0)
    await leader.produce(tp.topic, tp.partition, build_batch([(None, value(tp, 0))]))

    # The controller shrinks the ISR (it thought broker 2 had gone: partition epoch 1)...
    # (The request it sends, as the leader receives it; the leader may re-expand at once.)
    shrink = ctl.partition_state(tp, 0).model_copy(update={"isr": [0, 1], "partition_epoch": 1})
    await ctl.broker_died(2)
    ctl.dead.discard(2)
    # ...broker 2 is fine, so the leader adds it back (AlterPartition: partition epoch 2).
    await wait_until(env, isr_has(env, [tp], 2, True), 10, "broker 2 back in the ISR")
    current = ctl.state[tp].partition_epoch
    assert current == 2

    # Broker 2 freezes (a long GC pause, say): once its last long-poll fetch has ended it can
    # neither fetch nor be re-added; it stays in the ISR until replica.lag.time.max.ms.
    stop_process(env, 2)
    try:
        await asyncio.sleep(FETCH_WAIT_S + 0.15)
        # The shrink is delivered again, late.
        status, out = await post_raw(
            env,
            0,
            "/v1/controller/leader-and-isr",
            wire.LeaderAndIsrRequest(
                controller_id=0,
                controller_epoch=ctl.epoch,
                partitions=[shrink],
                live_leaders=ctl.endpoints(),
            ),
        )
        assert status == 200, out
        md = await leader.metadata()
        isr_at_leader = next(
            p.isr for p in md.partitions if (p.topic, p.partition) == (tp.topic, tp.partition)
        )
        isr_at_controller = list(ctl.state[tp].isr)
        # acks=all may be acknowledged only once the record is on every member of the
        # controller's ISR, i.e. here only after the leader had broker 2 removed (AlterPartition).
        try:
            await leader.produce(
                tp.topic, tp.partition, build_batch([(None, value(tp, 1))]), timeout_ms=500
            )
            acked_with_isr: list[int] | None = list(ctl.state[tp].isr)
        except KafkaError:
            acked_with_isr = None
    finally:
        continue_process(env, 2)
    assert set(isr_at_controller) <= set(isr_at_leader), (
        f"after a stale LeaderAndIsr (partition epoch 1 < {current}) the leader's ISR is "
        f"{isr_at_leader}, the controller's {isr_at_controller} (partition epoch {current})"
    )
    assert acked_with_isr is None or 2 not in acked_with_isr, (
        f"an acks=all record was acknowledged while broker 2, which never received it, was in "
        f"the controller's ISR {acked_with_isr}: a clean election of broker 2 loses it"
    )


async def test_fenced_stop_replica_does_not_cancel_a_log_dir_move(env: Env) -> None:
    """A StopReplica(delete=true) with an older leader epoch is answered FENCED_LEADER_EPOCH and
    must change nothing, including an intra-broker move (KIP-113) of that replica in progress.

    (Found failing while this file was written: ``server.stop_replica`` cancelled the move, and
    deleted its future copy, for every ``delete`` partition before ``ReplicaManager`` checked
    the leader epoch; it now skips fenced partitions.)
    """
    ctl = env.ctl
    tps = await ctl.create_topic("t", 2, 3, min_isr=2)
    tp0 = tps[0]
    assert await ctl.elect(tp0, preferred=0) == 0  # leader epoch 1
    prod = CountingProducer(env.leader, [tp0], records_per_batch=50)
    for _ in range(10):
        await prod.produce_one_round()
    assert prod.acked_count == 500, prod.errors
    await settle(env, [tp0])

    follower = ctl.client(1)
    # 1 KiB/s: the copy of tens of KiB stays in progress for the rest of the test.
    await follower.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=1024))
    src = await dir_of(env, 1, tp0)
    dest = next(d for d in env.cluster[1].log_dirs if d != src)
    res = await follower.alter_replica_log_dirs([(tp0.topic, tp0.partition, dest)])
    assert [r.error for r in res.partitions] == [None], res

    async def moving() -> bool:
        (info,) = (
            await follower.describe_replica_log_dirs([(tp0.topic, tp0.partition)])
        ).partitions
        return info.future_log_dir == dest and info.state in ("Copying", "CatchingUp")

    await wait_until(env, moving, 10, f"the move of {tp0} to {dest} runs")

    status, out = await post_raw(
        env,
        1,
        "/v1/controller/stop-replica",
        wire.StopReplicaRequest(
            controller_id=0,
            controller_epoch=ctl.epoch,
            partitions=[
                wire.StopReplicaPartition(
                    topic=tp0.topic, partition=tp0.partition, leader_epoch=0, delete=True
                )
            ],
        ),
    )
    assert status == 200, out
    assert [r["error"] for r in out["partitions"]] == ["FENCED_LEADER_EPOCH"], out
    (info,) = (await follower.describe_replica_log_dirs([(tp0.topic, tp0.partition)])).partitions
    assert await moving(), f"the fenced StopReplica cancelled the move: {info}"


def teardown_module() -> None:
    if TIMINGS:
        print("\ntimings:", json.dumps(TIMINGS, indent=1))
