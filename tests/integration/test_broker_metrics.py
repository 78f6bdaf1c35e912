"""A running broker exposes Kafka's operational figures in Prometheus format and logs JSON."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster, lead_alone
from jbod_broker.storage.records import build_batch
from tests.broker_metrics import scrape
from tests.integration.controller_stub import ControllerStub
from tests.waiting import wait_async

pytestmark = pytest.mark.integration

EXPECTED = [
    "jbod_offline_log_directory_count",
    "jbod_offline_replica_count",
    "jbod_under_replicated_partitions",
    "jbod_bytes_in_total",
    "jbod_bytes_out_total",
    "jbod_isr_shrinks_total",
    "jbod_isr_expands_total",
    "jbod_log_dir_move_bytes_total",
    "jbod_log_dir_move_rate_bytes",
    "jbod_request_seconds_bucket",
]


def test_metrics_and_json_logs(tmp_path: Path) -> None:
    cl = LocalCluster(str(tmp_path), size=1, num_dirs=2)
    cl.start()
    try:

        async def traffic() -> None:
            async with BrokerClient(cl[0].url, token=cl.token) as c:
                await lead_alone(c, "m", 1)
                for _ in range(5):
                    await c.produce("m", 0, build_batch([(None, b"x" * 1000)] * 4), acks=1)
                await c.fetch("m", 0, 0)

        asyncio.run(traffic())
        with urllib.request.urlopen(cl[0].url + "/metrics", timeout=5) as r:
            assert r.status == 200
            text = r.read().decode()
        for name in EXPECTED:
            assert name in text, name
        values = {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line and not line.startswith("#") and "{" not in line.split()[0]
        }
        assert values["jbod_bytes_in_total"] > 20_000
        assert values["jbod_offline_log_directory_count"] == 0
        assert 'route="/v1/data/produce"' in text
    finally:
        cl.stop()
    lines = [ln for ln in Path(cl[0].log_path).read_text().splitlines() if ln.strip()]
    events = [json.loads(ln) for ln in lines]  # every line is one JSON object
    assert {"ts", "level", "logger", "msg"} <= set(events[0])
    assert any(e.get("event") == "broker_started" for e in events)
    assert any(e.get("event") == "broker_stopped" for e in events)


REASSIGNMENT_METRICS = (
    "jbod_reassignment_bytes_in_total",
    "jbod_reassignment_bytes_out_total",
    "jbod_leader_replication_throttled_bytes_total",
    "jbod_follower_replication_throttled_bytes_total",
)


def test_reassignment_traffic_is_counted_apart(tmp_path: Path) -> None:
    """Kafka's ReassignmentBytesIn/OutPerSec and the throttled byte counts, on two broker
    processes: a partition gaining a replica on broker 1 with the throttled-replica lists set as
    the operator sets them (leader side on its leader, follower side on the new replica's
    broker) counts every byte the new replica copies, on both sides, while a partition
    replicated as usual to the same broker counts in none of them."""
    ctl = ControllerStub()
    cl = LocalCluster(
        str(tmp_path),
        size=2,
        num_dirs=1,
        controller_url=ctl.url,
        settings={"replica.fetch.wait.max.ms": "100"},
    )
    ctl.cluster = cl
    batch = build_batch([(None, b"r" * 1000)] * 20)

    async def scenario() -> None:
        await ctl.start()
        try:
            await asyncio.to_thread(cl.start)
            (moving,) = await ctl.create_topic("moving", 1, rf=1)
            await ctl.create_topic("steady", 1, rf=2)
            leader = ctl.client(0)
            for _ in range(6):
                await leader.produce("moving", 0, batch, acks=1)
                await leader.produce("steady", 0, batch, acks=-1)
            before = [scrape(b.url) for b in cl.brokers]
            for m in before:
                for name in REASSIGNMENT_METRICS:
                    assert m[name] == 0, name  # ordinary replication of "steady" is not counted
            ref = [wire.ReplicaRef(topic="moving", partition=0)]
            rate = 64 << 20  # a throttle that does not slow this small copy down
            await leader.set_configs(
                wire.ThrottleConfig(
                    leader_replication_throttled_rate=rate,
                    leader_replication_throttled_replicas=ref,
                )
            )
            await ctl.client(1).set_configs(
                wire.ThrottleConfig(
                    follower_replication_throttled_rate=rate,
                    follower_replication_throttled_replicas=ref,
                )
            )
            # The reassignment's step: broker 1 added as a new replica, outside the ISR.
            st = ctl.state[moving]
            st.replicas = [0, 1]
            await ctl.send_leader_and_isr([moving], [0, 1])
            await ctl.update_metadata()

            async def joined() -> bool:
                return ctl.state[moving].isr == [0, 1]

            await wait_async(joined, "broker 1's new replica of moving-0 joined the ISR")
            after = [scrape(b.url) for b in cl.brokers]
            copied = 6 * len(batch)
            assert after[0]["jbod_reassignment_bytes_out_total"] == copied
            assert after[0]["jbod_leader_replication_throttled_bytes_total"] == copied
            assert after[1]["jbod_reassignment_bytes_in_total"] == copied
            assert after[1]["jbod_follower_replication_throttled_bytes_total"] == copied
            # Each side counts only its own direction.
            assert after[0]["jbod_reassignment_bytes_in_total"] == 0
            assert after[1]["jbod_reassignment_bytes_out_total"] == 0
            assert after[0]["jbod_leader_replication_throttled_rate_bytes"] == rate
            assert after[1]["jbod_follower_replication_throttled_rate_bytes"] == rate
            # The broker's total still holds both partitions' replication.
            assert after[0]["jbod_bytes_out_total"] >= copied + 6 * len(batch)

            # An in-sync follower of a throttled partition is ordinary replication: the leader
            # counts its bytes against the throttle (as Kafka does) but not as reassignment.
            await leader.produce("moving", 0, batch, acks=-1)
            last = scrape(cl[0].url)
            assert last["jbod_reassignment_bytes_out_total"] == copied
            assert last["jbod_leader_replication_throttled_bytes_total"] == copied + len(batch)
        finally:
            await asyncio.to_thread(cl.stop)
            await ctl.stop()

    asyncio.run(scenario())
