"""Kafka's own dump tool reads the files our broker processes write.

The broker's claim (``storage/records.py``) is that its segments are Kafka's bytes: here
``DumpLogSegments`` from Apache Kafka 4.3's jars (``tests/kafka_jars.py``) reads the ``.log``,
``.index`` and ``.timeindex`` files of a partition produced through the HTTP API (several
batches over several segments, keys, null keys, headers, plain and gzip), with
``--deep-iteration --print-data-log``. Every batch and record it prints must be what was
produced, every batch valid, every index entry must point where the tool finds it, and the
tool must finish without an error.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster, lead_alone
from jbod_broker.storage.records import GZIP, NONE, Header, build_batch
from tests.kafka_jars import DUMP_LOG_SEGMENTS, KafkaJarsMissing, classpath, run_class

TOPIC = "dumped"
BATCHES = 24
PER_BATCH = 7
T0 = 1_700_000_000_000

# What the tool prints for a problem it finds instead of failing outright.
PROBLEMS = re.compile(
    r"mismatch|not found|out of order|corrupt|isvalid: false|exception|error", re.IGNORECASE
)
BATCH_LINE = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* CreateTime: (\d+) size: \d+ "
    r"magic: 2 compresscodec: (\w+) crc: \d+ isvalid: (\w+)$"
)
RECORD_LINE = re.compile(
    r"^\| offset: (\d+) CreateTime: (\d+) keySize: (-?\d+) valueSize: \d+ sequence: -1 "
    r"headerKeys: \[([^\]]*)\](?: key: (.*))? payload: (.*)$"
)


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    try:
        classpath()
    except KafkaJarsMissing as e:
        pytest.fail(str(e), pytrace=False)


def _records(b: int) -> list[tuple[bytes | None, bytes, list[Header]]]:
    """Batch ``b``'s records: every fifth one without a key, headers on odd batches."""
    out: list[tuple[bytes | None, bytes, list[Header]]] = []
    for i in range(PER_BATCH):
        key = None if i % 5 == 4 else f"k{b}-{i}".encode()
        headers = [Header("trace", f"{b}".encode()), Header("empty", None)] if b % 2 else []
        out.append((key, f"value-{b}-{i}-".encode() + b"x" * (40 + 10 * i), headers))
    return out


async def _produce(url: str, token: str) -> None:
    async with BrokerClient(url, token=token) as c:
        await lead_alone(c, TOPIC, 1)
        for b in range(BATCHES):
            batch = build_batch(
                _records(b),
                timestamps=[T0 + 1000 * b + i for i in range(PER_BATCH)],
                compression=GZIP if b % 3 == 1 else NONE,
            )
            resp = await c.produce(TOPIC, 0, batch, acks=-1)
            assert resp is not None and resp.base_offset == b * PER_BATCH


def test_dump_log_segments_reads_our_segments_and_indexes(tmp_path: Path) -> None:
    cluster = LocalCluster(
        str(tmp_path / "cluster"),
        size=1,
        num_dirs=1,
        # Small segments and a dense index: several segments, several entries in each index.
        settings={"log.segment.bytes": "4096", "log.index.interval.bytes": "512"},
    )
    cluster.start()
    try:
        asyncio.run(_produce(cluster[0].url, cluster.token))
    finally:
        assert cluster[0].stop() == 0  # graceful: the indexes are written out
    replica = Path(cluster[0].log_dirs[0]) / f"{TOPIC}-0"
    logs = sorted(replica.glob("*.log"))
    indexes = sorted(replica.glob("*.index")) + sorted(replica.glob("*.timeindex"))
    assert len(logs) >= 3, "expected several segments"
    assert len(indexes) == 2 * len(logs)

    files = ",".join(str(p) for p in [*logs, *indexes])
    out = run_class(DUMP_LOG_SEGMENTS, "--deep-iteration", "--print-data-log", "--files", files)
    assert not PROBLEMS.search(out.stdout + out.stderr), out.stdout[-3000:] + out.stderr

    batches = [m.groups() for line in out.stdout.splitlines() if (m := BATCH_LINE.match(line))]
    assert [(int(b), int(last), int(n)) for b, last, n, *_ in batches] == [
        (b * PER_BATCH, b * PER_BATCH + PER_BATCH - 1, PER_BATCH) for b in range(BATCHES)
    ]
    assert [codec for *_, codec, _valid in batches] == [
        "gzip" if b % 3 == 1 else "none" for b in range(BATCHES)
    ]
    assert {valid for *_, valid in batches} == {"true"}
    # A batch's CreateTime is its max timestamp: the last record's here.
    assert [int(ts) for _, _, _, ts, _, _ in batches] == [
        T0 + 1000 * b + PER_BATCH - 1 for b in range(BATCHES)
    ]

    dumped = [m.groups() for line in out.stdout.splitlines() if (m := RECORD_LINE.match(line))]
    expected = [
        (
            str(b * PER_BATCH + i),
            str(T0 + 1000 * b + i),
            str(len(key)) if key is not None else "-1",
            ",".join(h.key for h in headers),
            key.decode() if key is not None else None,  # no "key:" is printed
            value.decode(),
        )
        for b in range(BATCHES)
        for i, (key, value, headers) in enumerate(_records(b))
    ]
    assert dumped == expected

    # Every index entry the tool lists points at a batch it found (it reports mismatches
    # otherwise, checked above); and the entries are there to check.
    index_entries = re.findall(r"^offset: (\d+) position: (\d+)$", out.stdout, re.M)
    time_entries = re.findall(r"^timestamp: (\d+) offset: (\d+)$", out.stdout, re.M)
    assert len(index_entries) >= len(logs) and len(time_entries) >= len(logs)
    last_offsets = {int(last) for _, last, *_ in batches}
    assert {int(o) for o, _ in index_entries} <= last_offsets
    assert {int(o) for _, o in time_entries} <= last_offsets
