"""Kafka's own dump tool reads the producer-state snapshots our broker processes write.

``DumpLogSegments`` from Apache Kafka 4.3's jars (``tests/kafka_jars.py``) decodes each
``<offset>.snapshot`` of a partition written by idempotent producers through the HTTP API:
the roll snapshots (small segments) and the one a clean shutdown writes. For every file the
tool must print, per producer, the epoch, sequences, last offset and offset delta of the
producer's last batch below the snapshot's offset, as our broker appended them.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster
from jbod_broker.storage.records import build_batch
from tests.kafka_jars import DUMP_LOG_SEGMENTS, KafkaJarsMissing, classpath, run_class

pytestmark = pytest.mark.integration

TOPIC = "snapped"
PRODUCERS = {5: 0, 1_000_123: 3}
"""producer id -> epoch."""
BATCHES = 12
PER_BATCH = 4

LINE = re.compile(
    r"^producerId: (\d+) producerEpoch: (\d+) coordinatorEpoch: (-?\d+) "
    r"currentTxnFirstOffset: OptionalLong.empty lastTimestamp: (-?\d+) "
    r"firstSequence: (\d+) lastSequence: (\d+) lastOffset: (\d+) offsetDelta: (\d+) "
    r"timestamp: (-?\d+)$"
)


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    try:
        classpath()
    except KafkaJarsMissing as e:
        pytest.fail(str(e), pytrace=False)


async def _produce(url: str, token: str) -> list[tuple[int, int, int, int]]:
    """Alternate the producers' batches; returns (producer, base seq, first offset, last)."""
    sent = []
    async with BrokerClient(url, token=token) as c:
        for b in range(BATCHES):
            for pid, epoch in PRODUCERS.items():
                seq = b * PER_BATCH
                data = build_batch(
                    [(None, b"v-%d-%d" % (pid, seq + i) + b"." * 150) for i in range(PER_BATCH)],
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=seq,
                )
                resp = await c.produce(TOPIC, 0, data)
                assert resp is not None
                sent.append((pid, seq, resp.base_offset, resp.last_offset))
    return sent


def test_dump_log_segments_reads_our_producer_snapshots(tmp_path: Path) -> None:
    cl = LocalCluster(str(tmp_path), size=1, num_dirs=1)
    cl.start()
    try:

        async def scenario() -> list[tuple[int, int, int, int]]:
            async with BrokerClient(cl[0].url, token=cl.token) as c:
                await c.leader_and_isr(
                    wire.LeaderAndIsrRequest(
                        controller_id=0,
                        controller_epoch=1,
                        partitions=[
                            wire.LeaderAndIsrPartition(
                                topic=TOPIC,
                                partition=0,
                                leader=0,
                                leader_epoch=0,
                                isr=[0],
                                replicas=[0],
                                is_new_replica=True,
                                configs={"segment.bytes": "2048"},  # rolls: roll snapshots
                            )
                        ],
                    )
                )
            return await _produce(cl[0].url, cl.token)

        sent = asyncio.run(scenario())
    finally:
        cl.stop()  # SIGTERM: a clean shutdown writes the snapshot at the log end
    folder = os.path.join(cl[0].log_dirs[0], f"{TOPIC}-0")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".snapshot"))
    end = sent[-1][3] + 1
    assert len(names) >= 3, names  # roll snapshots and the shutdown one
    assert names[-1] == f"{end:020d}.snapshot"
    proc = run_class(DUMP_LOG_SEGMENTS, "--files", ",".join(os.path.join(folder, n) for n in names))
    dumped: dict[int, dict[int, tuple[int, ...]]] = {}
    current = -1
    for line in proc.stdout.splitlines():
        if line.startswith("Dumping "):
            current = int(os.path.basename(line.split(" ", 1)[1])[:20])
            dumped[current] = {}
            continue
        m = LINE.match(line)
        assert m, f"unexpected line from the dump tool: {line!r}\n{proc.stdout[-3000:]}"
        pid, epoch, coord, _ts, first, last, last_off, delta, _t = map(int, m.groups())
        assert coord == -1
        dumped[current][pid] = (epoch, first, last, last_off, delta)
    assert "exception" not in (proc.stdout + proc.stderr).lower()
    assert sorted(dumped) == [int(n[:20]) for n in names]
    for offset, producers in dumped.items():
        expected = {}
        for pid, seq, first_off, last_off in sent:
            if last_off < offset:  # the producer's last batch below the snapshot's offset
                expected[pid] = (
                    PRODUCERS[pid],
                    seq,
                    seq + PER_BATCH - 1,
                    last_off,
                    last_off - first_off,
                )
        assert producers == expected, f"snapshot {offset}"
