"""Issue 14 (1): running out of file descriptors is the process's shortage, never a disk failure.

Before the fix, one LeaderAndIsr creating 7,000 partitions on a broker with two log dirs hit
EMFILE (three descriptors held open per replica), took both dirs offline as failed disks and
stopped the broker; every restart hit EMFILE again while loading and stopped again.

Each test runs a real broker process whose open-file limit is set low (soft = hard =
``OPEN_FILE_LIMIT``, in the child before exec, so the broker cannot raise it), which makes the
shortage cheap to reach:

- a LeaderAndIsr of 10,000 new partitions: no dir goes offline, the broker stays ready, every
  partition is either held (its folder complete on disk and described) or refused with a
  reason (and nothing of it left on disk); after a SIGKILL the broker starts again under the
  same limit, ready, holding the same replicas;
- a broker that finds 10,000 replicas on its disks at start-up (written beforehand with the
  storage engine) loads them all and becomes ready;
- a broker that halts because every log dir failed exits 3, not 0 (the restarts of the issue
  ended "with exit code 0").

Each log dir is a tmpfs of its own where mounting is allowed (two real filesystems, two disks):
making 40,000 files on a shared, busy disk takes minutes, on tmpfs seconds, and descriptors
are the same on both. Where mounting is forbidden the dirs are plain folders (slower).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalBroker, write_token
from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import ResourceShortageError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import LOG_SUFFIX, TopicPartition, log_dir_name, segment_file_name
from jbod_broker.storage.records import build_batch
from tests.tmpfs import tmpfs_if_possible

pytestmark = pytest.mark.integration

OPEN_FILE_LIMIT = 512
PARTITIONS = 10_000
TOPIC = "many"
READY_S = 120
"""How long a start that loads 10,000 replicas may take on a busy 2-core machine."""
DISK_SIZE = "256m"
"""Each log dir's tmpfs: 5,000 small replicas take about 60 MiB there."""
SETTINGS = {
    # Nothing on a timer competes with the request or the start being measured.
    "log.flush.scheduler.interval.ms": "3600000",
    "log.retention.check.interval.ms": "3600000",
}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[tuple[LocalBroker, str]]:
    token_file = str(tmp_path / "token")
    token = write_token(token_file)
    b = LocalBroker(
        broker_id=0,
        base_dir=str(tmp_path),
        token_file=token_file,
        num_dirs=2,
        open_file_limit=OPEN_FILE_LIMIT,
        settings=dict(SETTINGS),
    )
    with contextlib.ExitStack() as disks:
        for d in b.log_dirs:
            disks.enter_context(tmpfs_if_possible(d, DISK_SIZE))
        try:
            yield b, token
        finally:
            b.stop()


def _leader_and_isr(n: int) -> wire.LeaderAndIsrRequest:
    return wire.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=1,
        partitions=[
            wire.LeaderAndIsrPartition(
                topic=TOPIC,
                partition=p,
                leader=0,
                leader_epoch=0,
                isr=[0],
                replicas=[0],
                is_new_replica=True,
            )
            for p in range(n)
        ],
    )


async def _send(
    b: LocalBroker, token: str, req: wire.LeaderAndIsrRequest
) -> wire.LeaderAndIsrResponse:
    async with BrokerClient(b.url, token=token, timeout_s=300) as c:
        return await c.leader_and_isr(req)


async def _describe(b: LocalBroker, token: str) -> wire.DescribeLogDirsResponse:
    async with BrokerClient(b.url, token=token, timeout_s=120) as c:
        return await c.describe_log_dirs()


def _get_json(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200, r.status
        body: dict[str, object] = json.loads(r.read())
        return body


def _metric(b: LocalBroker, name: str) -> float:
    with urllib.request.urlopen(b.url + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} is not in /metrics")


def _replica_folders(b: LocalBroker) -> dict[str, set[int]]:
    """Replica folders of ``TOPIC`` on each log dir, by partition (whatever their state)."""
    out: dict[str, set[int]] = {}
    for d in b.log_dirs:
        out[d] = {
            int(name.rsplit("-", 1)[1])
            for name in os.listdir(d)
            if name.startswith(TOPIC + "-") and name.rsplit("-", 1)[1].isdigit()
        }
    return out


def _described(resp: wire.DescribeLogDirsResponse) -> dict[str, set[int]]:
    assert all(d.is_live and d.error is None for d in resp.log_dirs), [
        (d.path, d.error) for d in resp.log_dirs
    ]
    return {
        d.path: {r.partition for r in d.partitions if r.topic == TOPIC and not r.is_future}
        for d in resp.log_dirs
    }


def _check_ready_with_budget(b: LocalBroker) -> None:
    ready = _get_json(b.url + "/readyz")
    assert ready["status"] == "ready"
    assert ready["offline_log_dirs"] == []
    budget = ready["open_files"]
    assert isinstance(budget, dict)
    assert budget["limit"] == OPEN_FILE_LIMIT, budget
    assert 0 < budget["log_handles_max"] < OPEN_FILE_LIMIT, budget
    assert _metric(b, "jbod_open_file_limit") == OPEN_FILE_LIMIT
    assert _metric(b, "jbod_offline_log_directory_count") == 0
    assert _metric(b, "jbod_log_file_handles_open") <= budget["log_handles_max"]


def test_leader_and_isr_of_10000_partitions_under_a_low_open_file_limit(
    broker: tuple[LocalBroker, str],
) -> None:
    b, token = broker
    b.start(timeout_s=READY_S)

    resp = asyncio.run(_send(b, token, _leader_and_isr(PARTITIONS)))

    assert len(resp.partitions) == PARTITIONS
    refused = {r.partition: r for r in resp.partitions if r.error is not None}
    for r in refused.values():
        # The process's shortage, said so, per partition: never a storage (disk) error,
        # which the controller would take as the replica being offline.
        assert r.error == ResourceShortageError.kafka_error, (r.error, r.message)
        assert r.message and "open files" in r.message, r.message
    held = set(range(PARTITIONS)) - set(refused)
    print(f"\nLeaderAndIsr of {PARTITIONS}: {len(held)} held, {len(refused)} refused")
    assert b.alive
    _check_ready_with_budget(b)
    described = _described(asyncio.run(_describe(b, token)))
    assert set().union(*described.values()) == held
    # Nothing half-created: a refused partition left no folder, a held one is whole.
    on_disk = _replica_folders(b)
    assert on_disk == described
    for d, parts in on_disk.items():
        for p in parts:
            folder = os.path.join(d, log_dir_name(TopicPartition(TOPIC, p)))
            assert os.path.isfile(os.path.join(folder, segment_file_name(0, LOG_SUFFIX)))

    # A crash, then a start under the same limit: it loads every replica and is ready.
    b.kill()
    b.start(timeout_s=READY_S)
    _check_ready_with_budget(b)
    assert _described(asyncio.run(_describe(b, token))) == described


def _write_replicas(dirs: list[str], n: int) -> None:
    """``n`` replicas of ``TOPIC`` spread over ``dirs``, each with one batch, written with the
    storage engine in this process and closed one by one (no clean-shutdown marker, no
    checkpoints: the broker recovers every one of them at start-up)."""
    channel = LogDirFailureChannel()
    batch = build_batch([(None, b"v" * 100)], base_offset=0)
    for p in range(n):
        d = dirs[p % len(dirs)]
        os.makedirs(d, exist_ok=True)
        tp = TopicPartition(TOPIC, p)
        lg = Log.create(os.path.join(d, log_dir_name(tp)), tp, LogConfig(), channel, log_dir=d)
        lg.append_as_leader(batch, 0)
        lg.close_quietly()


def test_start_up_loads_10000_replicas_under_a_low_open_file_limit(
    broker: tuple[LocalBroker, str],
) -> None:
    b, token = broker
    _write_replicas(b.log_dirs, PARTITIONS)

    b.start(timeout_s=READY_S)

    _check_ready_with_budget(b)
    described = _described(asyncio.run(_describe(b, token)))
    assert set().union(*described.values()) == set(range(PARTITIONS))
    assert described == _replica_folders(b)


def test_a_broker_that_halts_exits_with_3_not_0(tmp_path: Path) -> None:
    """A broker whose every log dir failed stops (KIP-112), and says so in its exit code: it
    used to exit 0, as after a graceful shutdown, so a supervisor saw nothing wrong."""
    token_file = str(tmp_path / "token")
    token = write_token(token_file)
    b = LocalBroker(broker_id=0, base_dir=str(tmp_path), token_file=token_file, num_dirs=1)
    b.start()
    (d,) = b.log_dirs
    os.chmod(d, 0)  # the disk fails: the next file made there gets EACCES
    try:
        with contextlib.suppress(Exception):  # the answer races the broker's stop
            asyncio.run(_send(b, token, _leader_and_isr(1)))
        assert b.proc is not None
        assert b.proc.wait(timeout=60) == 3, b.tail()
    finally:
        os.chmod(d, 0o755)
        b.stop()
    assert "every log directory is offline" in b.tail()
