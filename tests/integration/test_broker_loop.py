"""Issue 14 (4): one big request must not freeze a broker's event loop.

Readiness, produce, fetch and the controller's heartbeats all run on the loop; a request that
holds it for seconds gets the broker declared dead. A maximal alter-replica-log-dirs request
(``wire.MAX_ALTER_LOG_DIRS`` entries) is served in slices while /readyz keeps answering within
100 ms; a longer list is refused naming the limit (the client splits it instead); the log dirs
remembered for replicas not here yet are bounded (see the log manager's unit tests).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import InvalidRequestError
from jbod_broker.local import LocalBroker, write_token
from tests.tiers import SERIAL

pytestmark = [pytest.mark.integration, SERIAL]

READY_WITHIN_S = 0.1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[LocalBroker, str]]:
    token_file = str(tmp_path / "token")
    token = write_token(token_file)
    b = LocalBroker(broker_id=0, base_dir=str(tmp_path), token_file=token_file, num_dirs=2)
    b.start()
    try:
        yield b, token
    finally:
        b.stop()


PROBE = """
import http.client, os, sys, time, urllib.parse
url, stop = urllib.parse.urlsplit(sys.argv[1]), sys.argv[2]
conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
while not os.path.exists(stop):
    t = time.monotonic()
    conn.request("GET", "/readyz")
    r = conn.getresponse()
    r.read()
    assert r.status == 200, r.status
    print(time.monotonic() - t, flush=True)
"""


class ReadyzProbe:
    """Asks /readyz back to back from its own process (so this process's work on the client
    side cannot delay it), on one kept-alive connection (so what is timed is the broker's
    answer, not the probe's own connection set-up), and keeps how long each answer took."""

    def __init__(self, url: str, workdir: Path) -> None:
        self.stop_file = workdir / "probe.stop"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PROBE, url, str(self.stop_file)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.first = float(self.proc.stdout.readline())  # running before the request goes

    def finish(self) -> list[float]:
        self.stop_file.touch()
        out, _ = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0, self.proc.returncode
        return [float(x) for x in out.split()]


def test_readiness_answers_while_a_maximal_alter_request_is_served(
    broker: tuple[LocalBroker, str], tmp_path: Path
) -> None:
    b, token = broker
    n = wire.MAX_ALTER_LOG_DIRS
    moves = [("ghost", p, b.log_dirs[1]) for p in range(n)]

    async def run() -> tuple[wire.AlterReplicaLogDirsResponse, float, list[float]]:
        async with BrokerClient(b.url, token=token, timeout_s=120) as c:
            await c.alter_replica_log_dirs(moves[:1])  # connection and code paths warm
            probe = ReadyzProbe(b.url, tmp_path)
            try:
                t = time.monotonic()
                resp = await c.alter_replica_log_dirs(moves)
                took = time.monotonic() - t
            finally:
                latencies = probe.finish()
            return resp, took, latencies

    resp, took, latencies = asyncio.run(run())
    assert len(resp.partitions) == n
    assert all(r.error == "REPLICA_NOT_AVAILABLE" for r in resp.partitions)
    worst = max(latencies)
    print(
        f"alter of {n} entries: {took:.2f}s; "
        f"readyz answered {len(latencies)} times, worst {worst:.3f}s"
    )
    assert len(latencies) >= 2, "the probe never ran beside the request"
    assert worst < READY_WITHIN_S, f"readyz took {worst:.3f}s while the request was served"


def test_a_longer_list_is_refused_naming_the_limit_and_the_client_splits_it(
    broker: tuple[LocalBroker, str],
) -> None:
    b, token = broker
    n = wire.MAX_ALTER_LOG_DIRS + 1
    body = wire.AlterReplicaLogDirsRequest.model_construct(
        partitions=[
            wire.AlterReplicaLogDir(topic="ghost", partition=p, log_dir=b.log_dirs[0])
            for p in range(n)
        ]
    ).model_dump_json()

    async def run() -> wire.AlterReplicaLogDirsResponse:
        async with BrokerClient(b.url, token=token, timeout_s=120) as c:
            with pytest.raises(InvalidRequestError, match=str(wire.MAX_ALTER_LOG_DIRS)):
                await c._request(  # the raw request, as another client might send it
                    "POST",
                    "/v1/admin/alter-replica-log-dirs",
                    body=body.encode(),
                    content_type="application/json",
                )
            # Through the client's method the same list goes in two requests.
            moves = [("ghost", p, b.log_dirs[0]) for p in range(n)]
            return await c.alter_replica_log_dirs(moves)

    resp = asyncio.run(run())
    assert [(r.topic, r.partition) for r in resp.partitions] == [("ghost", p) for p in range(n)]
    assert {r.error for r in resp.partitions} == {"REPLICA_NOT_AVAILABLE"}
