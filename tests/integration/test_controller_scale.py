"""The controller at Kafka's scale on the real API server (issue 39), phase by phase.

A Topic of 100,000 partitions RF 3 on three simulated brokers (``tests.stub_brokers``: the
controller's side is what is measured), beside one real broker process (id 0) holding a
small Topic of its own; two operator processes behind the counting API proxy. The big Topic
is created while the real broker is not running yet, so every one of its partitions is on
stubs 1-3 and each of them leads a third. Phases, each printing one JSON line with its time:

1. created: Ready, every stub told its replicas, every PartitionShard there (joined: 100,000);
2. the real broker started and a Topic of 4 partitions RF 3 created: it holds its replicas;
3. stub 1 killed: every partition it led (a third) has a new leader at the stubs;
4. the standby started (it is not before: see ``ScaleEnv.late_standby``), the active
   operator SIGKILLed: the standby is active, a new controller epoch, and it has
   sent every live stub the LeaderAndIsr of all its replicas;
5. stub 2 killed: the standby elects new leaders for its partitions too.

Timed (SERIAL): a second worker's load would measure the machine. Conditions only, no sleeps.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from jbod_broker.client import BrokerClient
from jbod_operator.plan import partition_shards
from tests.kube_cluster import KubeCluster
from tests.scale_env import ScaleEnv, leaders_of
from tests.tiers import SERIAL
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow, SERIAL]

PARTITIONS = 100_000
BIG_TIMEOUT_S = 900.0


def phase(name: str, **figures: Any) -> None:
    print(json.dumps({"phase": name, **figures}), flush=True)


def detail(name: str, figures: dict[str, Any]) -> None:
    """The phase's whole record (timelines at the stubs and the proxy) on stderr."""
    print(json.dumps({"phase": name, **figures}), file=sys.stderr, flush=True)


@pytest.fixture(scope="module")
def env(kube_cluster: KubeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScaleEnv]:
    work = tmp_path_factory.mktemp("scale")
    with ScaleEnv(
        kube_cluster, work, "scale-it", brokers=4, real_brokers=1, late_standby=True
    ) as e:
        yield e
        for op in e.ops:
            print(op.tail(20))


def test_100k_partitions_failover_and_standby(env: ScaleEnv) -> None:
    made = env.create_topic("big", PARTITIONS, timeout=BIG_TIMEOUT_S)
    detail("created", made)
    phase(
        "created",
        seconds=made["ready_and_told_s"],
        ready_s=made["ready_s"],
        api_bytes_written=made["api"]["bytes_written"],
        largest_object=made["api"]["largest_write"],
        operator_vm_hwm_mib=env.operator_hwm_mib(),
    )
    t0 = time.monotonic()
    env.settled(BIG_TIMEOUT_S)
    phase("every partition led after creation", seconds=round(time.monotonic() - t0, 2))
    big = env.topic("big")
    states = big["status"]["partitions"]
    assert sorted(int(s["partition"]) for s in states) == list(range(PARTITIONS))
    assert all(0 not in {int(r["brokerId"]) for r in s["replicas"]} for s in states)
    shards = env.shards(big["metadata"]["uid"])
    assert len(shards) == partition_shards.shard_count(PARTITIONS)
    assert made["api"]["largest_write"] <= 1 << 20

    env.start_real()
    real = env.create_topic("real", 4, timeout=BIG_TIMEOUT_S)
    held = _real_replicas_held(env)
    placed = sum(
        1 for s in env.kube.partitions("real") for r in s["replicas"] if r["brokerId"] == 0
    )
    assert placed >= 1
    wait_for(lambda: _real_replicas_held(env) >= placed, what="the real broker's replicas")
    phase("real broker slice", seconds=real["ready_and_told_s"], replicas=max(held, placed))

    fo = env.broker_failover(1, timeout=BIG_TIMEOUT_S)
    assert fo["partitions_led"] >= PARTITIONS // 3 - 1
    phase(
        "broker failover",
        seconds=fo["elected_s"],
        partitions_led=fo["partitions_led"],
        api_bytes_written=fo["api"]["bytes_written"],
    )

    tk = env.takeover(timeout=BIG_TIMEOUT_S)
    phase(
        "standby takeover",
        active_s=tk["active_s"],
        seconds=tk["resumed_s"],
        replicas_resent=tk["replicas_resent"],
        standby_vm_hwm_mib=tk["standby_vm_hwm_mib"],
    )

    fo2 = env.broker_failover(2, timeout=BIG_TIMEOUT_S)
    phase(
        "standby's broker failover", seconds=fo2["elected_s"], partitions_led=fo2["partitions_led"]
    )
    assert leaders_of(env.state(), 3) >= PARTITIONS - 1


def _real_replicas_held(env: ScaleEnv) -> int:
    """Replicas of Topic ``real`` in the real broker's log dirs."""
    local = env.local
    assert local is not None

    async def held() -> int:
        async with BrokerClient(local.brokers[0].url, token=local.token) as c:
            dirs = await c.describe_log_dirs(topics=["real"])
        return sum(1 for d in dirs.log_dirs for p in d.partitions if p.topic == "real")

    return asyncio.run(held())
