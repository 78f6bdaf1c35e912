"""Kafka's Java producer and consumer (kafka-clients from Maven) against three broker
processes over Kafka's protocol (issue 18).

The producer runs with its defaults (idempotence on, so InitProducerId and sequence numbers;
acks=all) to a topic of replication factor 3 with min.insync.replicas=2, one producer per
codec of :data:`CODECS` in turn, with keys, headers and explicit timestamps; the consumer
reads every partition with assigned partitions (no group). Every record comes back at the
offset its producer was told, with its key, value, headers and timestamp, and offsets run on
without a gap from one codec to the next.
"""

from __future__ import annotations

import asyncio
import glob
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jbod_broker.storage.compression import CODEC_NAMES
from tests.integration.java_clients import (
    TS0,
    Env,
    JavaProducer,
    broker_cluster,
    check_exactly_once_in_order,
    consume,
)
from tests.kafka_jars import DUMP_LOG_SEGMENTS, run_class

pytestmark = pytest.mark.integration

CODECS = CODEC_NAMES
"""Every codec Kafka's producer offers: none, gzip, snappy, lz4, zstd."""
PARTITIONS = 3
RECORDS = 30
"""Per codec: ten to each partition."""
SETTINGS = {
    "replica.fetch.wait.max.ms": "100",
    "controller.retry.backoff.ms": "50",
    "broker.heartbeat.interval.ms": "200",
}


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with broker_cluster(tmp_path, SETTINGS) as e:
        await e.ctl.create_topic("t", PARTITIONS, 3, min_isr=2)
        yield e


async def test_java_producer_and_consumer_every_codec_keys_headers_timestamps(env: Env) -> None:
    producer = await JavaProducer.start(env.bootstrap, "t", PARTITIONS, RECORDS, CODECS)
    await producer.wait(180)
    assert producer.errors == []
    total = RECORDS * len(CODECS)
    assert sorted(a.n for a in producer.acks) == list(range(total))

    got = await consume(env.bootstrap, "t", PARTITIONS)
    assert len(got) == total
    check_exactly_once_in_order(producer.acks, got)
    for r in got:
        n = r.n
        assert r.partition == n % PARTITIONS
        assert r.offset == n // PARTITIONS  # the first record of each partition is offset 0
        assert r.key == f"k{n}"
        assert r.value == f"v{n}-" * (1 + n % 7)
        assert r.timestamp == TS0 + n
        assert r.headers == (("n", str(n)), ("codec", CODECS[n // RECORDS]))

    # Idempotence was on (the producer's default): Kafka's dump tool sees every batch carry a
    # producer id from InitProducerId (not -1) and sequences counting from 0.
    tp_dir = next(
        d
        for b in env.cluster.brokers
        for d in (os.path.join(ld, "t-0") for ld in b.log_dirs)
        if os.path.isdir(d)
    )
    files = ",".join(sorted(glob.glob(os.path.join(tp_dir, "*.log"))))
    out = (await asyncio.to_thread(run_class, DUMP_LOG_SEGMENTS, "--files", files)).stdout
    pids = re.findall(r"producerId: (-?\d+)", out)
    seqs = [int(s) for s in re.findall(r"baseSequence: (-?\d+)", out)]
    assert pids and all(int(p) >= 0 for p in pids), out[-2000:]
    assert len(set(pids)) == len(CODECS)  # one producer (one InitProducerId) per codec
    assert min(seqs) == 0 and all(s >= 0 for s in seqs), out[-2000:]
