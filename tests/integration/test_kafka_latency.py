"""RateProducer (issue 22's latency probe) against broker processes over Kafka's protocol: it
sends at the rate it was given, open loop, and every record it sent is accounted for."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.java_clients import Env, broker_cluster, wait_for
from tests.kafka_latency import RateProducer, read_samples, window_stats

pytestmark = pytest.mark.integration

RATE = 500


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with broker_cluster(tmp_path, {"replica.fetch.wait.max.ms": "100"}) as e:
        await e.ctl.create_topic("t", 2, 3, min_isr=2)
        yield e


async def test_rate_producer_sends_on_schedule_and_accounts_for_every_record(
    env: Env, tmp_path: Path
) -> None:
    out = tmp_path / "latency.txt"
    p = await asyncio.to_thread(
        RateProducer.start, env.bootstrap, "t", rate=RATE, record_bytes=1024, out=out
    )
    try:
        # A condition, not a sleep: a thousand acknowledgements written (two seconds' worth).
        await wait_for(
            lambda: out.exists() and out.read_bytes().count(b"\n") >= 2 * RATE,
            60,
            "1,000 acknowledgements",
            env,
        )
    finally:
        totals = await asyncio.to_thread(p.stop)
    samples = read_samples(out)
    assert totals.errors == 0 and samples.failed == []
    assert totals.acked == totals.sent == len(samples.acked) >= 2 * RATE
    dues = sorted(s.due_s for s in samples.acked)
    gaps = {round((b - a) * 1e6) for a, b in itertools.pairwise(dues)}
    assert gaps <= {1999, 2000, 2001}, gaps  # open loop: one record every 1/RATE s
    assert all(s.latency_ms >= 0 for s in samples.acked)
    w = window_stats(samples, dues[0], dues[-1] + 1)
    assert w["count"] == totals.acked and w["failed"] == 0
    assert 0 <= w["p50_ms"] <= w["p99_ms"] <= w["max_ms"]
