"""Group commit on a real broker: concurrent produce requests share writes, lose nothing.

Thirty-two producers hammer one partition of a broker process while a thirty-third sends
corrupt requests among them. Every good request is acknowledged with its own offsets, the
acknowledged ranges tile the log exactly, a consumer reads every record once, each corrupt
request is refused on its own (and leaves nothing behind), and the broker's counters show
that requests did share writes.
"""

from __future__ import annotations

import asyncio
import itertools
import urllib.request
from pathlib import Path

import pytest

from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError
from jbod_broker.local import LocalCluster, lead_alone
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches

pytestmark = pytest.mark.integration

PRODUCERS = 32
REQUESTS = 30


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


def test_concurrent_produce_shares_writes_and_loses_nothing(tmp_path: Path) -> None:
    cl = LocalCluster(str(tmp_path), size=1, num_dirs=2)
    cl.start()
    try:
        acks: list[tuple[int, int, bytes]] = []
        refused: list[str] = []

        async def scenario() -> list[bytes]:
            async with BrokerClient(cl[0].url, token=cl.token) as c:
                await lead_alone(c, "g", 1)

                async def producer(n: int) -> None:
                    for i in range(REQUESTS):
                        key = b"p%d-%d" % (n, i)
                        recs = [(key + b"-%d" % j, b"v" * 200) for j in range(1 + i % 3)]
                        r = await c.produce("g", 0, build_batch(recs), acks=1)
                        assert r is not None
                        acks.append((r.base_offset, r.last_offset, key))

                async def vandal() -> None:
                    for i in range(8):
                        bad = bytearray(build_batch([(b"bad-%d" % i, b"x" * 200)]))
                        bad[-1] ^= 0xFF
                        try:
                            await c.produce("g", 0, bytes(bad), acks=1)
                        except KafkaError as e:
                            refused.append(str(e))
                        await asyncio.sleep(0.005)

                await asyncio.gather(*(producer(n) for n in range(PRODUCERS)), vandal())
                keys: list[bytes] = []
                offset = 0
                while True:
                    data, hw = await c.fetch("g", 0, offset)
                    for pos, hdr in iter_batches(data):
                        keys += [r.key or b"" for r in decode_batch(data, pos)[1]]
                        offset = hdr.next_offset
                    if offset >= hw:
                        return keys

        keys = asyncio.run(scenario())
        assert len(refused) == 8 and all("CRC" in m or "crc" in m for m in refused), refused
        assert not any(k.startswith(b"bad-") for k in keys)
        want = {
            b"p%d-%d-%d" % (n, i, j)
            for n in range(PRODUCERS)
            for i in range(REQUESTS)
            for j in range(1 + i % 3)
        }
        assert len(keys) == len(want) and set(keys) == want  # each record exactly once
        spans = sorted(acks)
        assert spans[0][0] == 0
        for (_, last, _), (first, _, _) in itertools.pairwise(spans):
            assert first == last + 1  # acknowledged ranges tile the log
        assert spans[-1][1] == len(keys) - 1
        for first, last, key in spans:  # each acknowledgement names its own records
            assert keys[first].startswith(key + b"-") and keys[last].startswith(key + b"-")
        writes = metric(cl[0].url, "jbod_produce_writes_total")
        appended = metric(cl[0].url, "jbod_produce_requests_appended_total")
        assert appended == PRODUCERS * REQUESTS
        print(f"{appended:.0f} requests in {writes:.0f} writes")
        assert writes < appended, (writes, appended)
    finally:
        cl.stop()
