"""describe-replica-log-dirs ``wait_ms`` on a real broker: the answer comes when a move ends.

The operator long-polls with it so that it verifies a finished move at once instead of on its
next poll. A throttled move is slow enough to wait on; lifting the throttle lets it end while
the request is open, and the answer must come then, well before ``wait_ms``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster, lead_alone
from jbod_broker.storage.records import build_batch
from tests.tiers import SERIAL

pytestmark = [pytest.mark.integration, SERIAL]

TOPIC = "lp"


async def setup(c: BrokerClient, partitions: int) -> None:
    await lead_alone(c, TOPIC, partitions)
    for p in range(partitions):
        for i in range(8):
            await c.produce(TOPIC, p, build_batch([(b"k%d" % i, b"v" * 30_000)] * 2), acks=1)


async def dir_of(c: BrokerClient, p: int) -> str:
    d = await c.describe_log_dirs([TOPIC])
    return next(x.path for x in d.log_dirs if any(r.partition == p for r in x.partitions))


def test_long_poll_answers_when_a_move_ends(tmp_path: Path) -> None:
    cl = LocalCluster(str(tmp_path), size=1, num_dirs=2)
    cl.start()
    try:

        async def scenario() -> None:
            async with BrokerClient(cl[0].url, token=cl.token) as c:
                await setup(c, 2)
                # Nothing moves: a replica not moving ends the wait at once.
                t0 = time.monotonic()
                r = await c.describe_replica_log_dirs([(TOPIC, 0)], wait_ms=20_000)
                assert time.monotonic() - t0 < 5 and r.partitions[0].state == "None"

                await c.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=1024))
                for p in (0, 1):
                    src = await dir_of(c, p)
                    dest = next(d for d in cl[0].log_dirs if d != src)
                    res = await c.alter_replica_log_dirs([(TOPIC, p, dest)])
                    assert res.partitions[0].error is None

                # Both throttled to a crawl: the wait runs to its end, then answers as-is.
                t0 = time.monotonic()
                r = await c.describe_replica_log_dirs([(TOPIC, 0), (TOPIC, 1)], wait_ms=700)
                waited = time.monotonic() - t0
                assert 0.6 < waited < 10, waited
                assert all(i.state not in ("Done", "None") for i in r.partitions), r

                # Lift the throttle while a 30 s wait is open: it answers when a move ends.
                async def lift() -> None:
                    await asyncio.sleep(0.5)
                    await c.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=0))

                t0 = time.monotonic()
                lifted = asyncio.create_task(lift())
                r = await c.describe_replica_log_dirs([(TOPIC, 1)], wait_ms=30_000)
                waited = time.monotonic() - t0
                await lifted
                assert 0.4 < waited < 15, waited
                assert r.partitions[0].state == "Done", r

        asyncio.run(scenario())
    finally:
        cl.stop()
