"""A full disk never strands a directory at start-up (issue 13; KAFKA-13773).

On real small filesystems (tmpfs; skipped, saying why, where mounting is forbidden), a broker
restarts with a log directory that has no free block left:

* holding a half-copied ``-future`` folder (a move copied into it; the disk filled up): the
  directory comes online, the copy is gone (it could never be finished, and its source is
  intact on the other directory with every acknowledged record), and the replicas that live on
  the full disk are readable. At the log-manager level, and once with a real broker process;
* holding only current replicas: the directory comes online and serves every acknowledged
  record, after a clean shutdown and after a crash whose recovery has to cut a torn tail,
  rebuild indexes and forget a leader epoch, none of which may need new space.

The log-manager tests reuse the disk-failure tests' helpers (managers, placement, appends and
the acknowledged records they are checked against).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from jbod_broker.storage.errors import InsufficientSpaceError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager, StartupReport
from jbod_broker.storage.names import (
    LEADER_EPOCH_CHECKPOINT,
    DirKind,
    TopicPartition,
    parse_dir_name,
)
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches
from tests.integration.test_broker_image import (
    TOKEN,
    ImageLayout,
    Running,
    http,
    leader_and_isr,
    start,
    stop,
    wait_status,
)
from tests.integration.test_storage_disk_failure import (
    CONFIG,
    EPOCH,
    Acked,
    Recorder,
    append,
    new_manager,
    place,
    read_rows,
)
from tests.tmpfs import close_fds_under, fill_up, free_bytes, mounted_tmpfs, resize_tmpfs
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

SOURCE = TopicPartition("moving", 0)
"""The replica being moved: it lives on the big disk, its future copy on the small one."""
NEIGHBOURS = [TopicPartition("full", 0), TopicPartition("full", 1)]
"""Replicas that live on the small disk."""
OTHER = TopicPartition("other", 0)
"""A replica on the big disk, to show that it is not touched."""
MOVE_CONFIG = LogConfig(segment_bytes=64 * 1024, retention_ms=-1, retention_bytes=-1)
"""Segments of 64 KiB: a copy of a few hundred KiB is several whole segments and a tail."""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[str]:
    """A 2 MiB tmpfs; whatever this process still holds open on it is dropped at the end."""
    with mounted_tmpfs(str(tmp_path / "small-disk"), "2m") as mnt:
        try:
            yield mnt
        finally:
            close_fds_under(mnt)


def folders(d: str, kind: DirKind) -> list[str]:
    out = []
    for name in sorted(os.listdir(d)):
        parsed = parse_dir_name(name)
        if parsed is not None and parsed.kind is kind:
            out.append(name)
    return out


def crash(lm: LogManager, dirs: list[str]) -> None:
    """What a killed broker leaves: no clean-shutdown marker, nothing written on the way out
    (its descriptors are dropped; index entries still in memory are lost)."""
    for d in dirs:
        close_fds_under(d)
    lm.channel.drain()


def restart(
    dirs: list[str], config: LogConfig = CONFIG
) -> tuple[LogManager, StartupReport, Recorder]:
    lm = new_manager(dirs, config=config)
    rec = Recorder()
    lm.add_offline_listener(rec.listener)
    lm.on_no_live_dirs(rec.halt)
    report = lm.startup()
    lm.channel.drain()
    return lm, report, rec


def copy_half(lm: LogManager, source: Log, dest: str) -> Log:
    """What a move's copy does, simply: the source's batches appended to a future log on
    ``dest``, up to about half of the source (a move interrupted half-way)."""
    future = lm.create_future_log(SOURCE, dest)
    target = source.log_end_offset // 2
    while future.log_end_offset < target:
        future.append_as_follower(source.read(future.log_end_offset, 16 * 1024).data)
    return future


def copy_until_the_disk_is_full(lm: LogManager, source: Log, dest: str) -> Log:
    """The case of the issue: the copy runs into ENOSPC. That fails the copy only (a future
    log's shortage is its move's, not its directory's): ``dest`` stays online."""
    future = lm.create_future_log(SOURCE, dest)
    with pytest.raises(InsufficientSpaceError, match="No space left on device"):
        while future.log_end_offset < source.log_end_offset:
            future.append_as_follower(source.read(future.log_end_offset, 16 * 1024).data)
    lm.channel.drain()
    assert lm.offline_dirs() == {}
    return future


# --------------------------------------------------------------------------------------------
# A half-copied -future folder on a full disk (log manager)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stop_kind", ["crash", "clean", "copy-hit-enospc"])
def test_half_copied_future_on_a_full_disk_is_dropped_and_the_dir_comes_online(
    tmp_path: Path, small_disk: str, stop_kind: str
) -> None:
    big = str(tmp_path / "disk0")
    dirs = [big, small_disk]
    lm = new_manager(dirs, config=MOVE_CONFIG)
    lm.startup()
    logs = place(lm, {big: [SOURCE, OTHER], small_disk: NEIGHBOURS})
    acked = {tp: Acked() for tp in logs}
    for i in range(1600):  # about 2 MB: more than the small disk holds
        append(logs[SOURCE], SOURCE, acked[SOURCE])
        if i % 20 == 0:
            for tp in [OTHER, *NEIGHBOURS]:
                append(logs[tp], tp, acked[tp])
    logs[SOURCE].flush()
    if stop_kind == "copy-hit-enospc":
        copy_until_the_disk_is_full(lm, logs[SOURCE], small_disk)
        crash(lm, dirs)
    else:
        copy_half(lm, logs[SOURCE], small_disk)
        if stop_kind == "crash":
            crash(lm, dirs)
        else:
            lm.shutdown()
    fill_up(small_disk)
    assert len(folders(small_disk, DirKind.FUTURE)) == 1

    lm2, report, rec = restart(dirs, MOVE_CONFIG)
    try:
        # The directory is online and the copy is gone, its space given back.
        assert lm2.offline_dirs() == {}
        assert rec.offline == [] and rec.halts == []
        assert lm2.future_logs() == {} and report.resumable_moves == {}
        assert folders(small_disk, DirKind.FUTURE) == []
        assert folders(small_disk, DirKind.DELETE) == []
        assert any(f"{SOURCE}: dropped the future copy" in a for a in report.actions), report
        assert free_bytes(small_disk) > 256 * 1024
        # Nothing else is lost: the source has every acknowledged record, on its own disk,
        # and so have the replicas that live on the full disk and on the other one.
        for tp in logs:
            lg = lm2.log_or_error(tp)
            assert lg.log_dir == logs[tp].log_dir
            assert read_rows(lg) == acked[tp].rows, tp
        # The directory takes appends again; a later start finds everything.
        for tp in NEIGHBOURS:
            append(lm2.log_or_error(tp), tp, acked[tp])
    finally:
        lm2.shutdown()
    lm3, report3, _ = restart(dirs, MOVE_CONFIG)
    try:
        assert lm3.offline_dirs() == {} and report3.resumable_moves == {}
        for tp in logs:
            assert read_rows(lm3.log_or_error(tp)) == acked[tp].rows, tp
    finally:
        lm3.shutdown()


# --------------------------------------------------------------------------------------------
# A full disk holding only current replicas (log manager)
# --------------------------------------------------------------------------------------------


def _segments(lg: Log) -> list[str]:
    return sorted(f for f in os.listdir(lg.dir_path) if f.endswith(".log"))


def _damage_like_a_crash(logs: dict[TopicPartition, Log]) -> None:
    """What recovery will have to repair on the full disk, none of it with new space.

    * ``full-0``: a new leader epoch assigned (and checkpointed) whose first write never made
      it (the disk was full): recovery must drop the epoch from the cache;
    * ``full-1``: a torn write at the end of the active segment (cut by recovery), and an
      index that fails its check in a segment the recovery point vouches for (rebuilt).
    """
    first, second = (logs[tp] for tp in NEIGHBOURS)
    first.epochs.assign(EPOCH + 2, first.log_end_offset)
    with open(os.path.join(second.dir_path, _segments(second)[-1]), "ab") as f:
        f.write(b"\x00\x01torn" * 50)
    index = os.path.join(second.dir_path, _segments(second)[0].replace(".log", ".index"))
    with open(index, "r+b") as f:
        f.write(b"\xff" * 8)


@pytest.mark.parametrize("stop_kind", ["clean", "crash"])
def test_full_disk_of_current_replicas_comes_online_and_serves_them(
    tmp_path: Path, small_disk: str, stop_kind: str
) -> None:
    big = str(tmp_path / "disk0")
    dirs = [big, small_disk]
    lm = new_manager(dirs)
    lm.startup()
    logs = place(lm, {big: [OTHER], small_disk: NEIGHBOURS})
    acked = {tp: Acked() for tp in logs}
    for _ in range(60):
        for tp, lg in logs.items():
            append(lg, tp, acked[tp])
    lm.flush_all()
    lm.checkpoint()  # a recovery point inside the logs: older segments are trusted
    for _ in range(40):  # not flushed: their index entries are only in memory
        for tp, lg in logs.items():
            append(lg, tp, acked[tp])
    assert all(len(_segments(logs[tp])) > 3 for tp in NEIGHBOURS)
    if stop_kind == "crash":
        _damage_like_a_crash(logs)
        crash(lm, dirs)
    else:
        lm.shutdown()
    fill_up(small_disk)

    lm2, report, rec = restart(dirs)
    try:
        assert lm2.offline_dirs() == {}, report.actions
        assert rec.offline == [] and rec.halts == []
        for tp in logs:
            lg = lm2.log_or_error(tp)
            assert read_rows(lg) == acked[tp].rows, tp
            assert lg.epochs.entries() == [(EPOCH, 0)], tp
        if stop_kind == "crash":
            # The epoch file either says the same as the cache or is gone (no room to
            # rewrite it): never the forgotten epoch.
            path = os.path.join(lm2.log_or_error(NEIGHBOURS[0]).dir_path, LEADER_EPOCH_CHECKPOINT)
            if os.path.exists(path):
                assert f"{EPOCH + 2} " not in Path(path).read_text()
    finally:
        lm2.shutdown()  # still full: what cannot be written now is rebuilt at the next start
        close_fds_under(small_disk)

    # The operator grows the volume: the replicas take appends, and a clean restart (which
    # trusts the indexes written at this shutdown) serves everything.
    resize_tmpfs(small_disk, "8m")
    lm3, _, _ = restart(dirs)
    try:
        assert lm3.offline_dirs() == {}
        for tp in logs:
            append(lm3.log_or_error(tp), tp, acked[tp])
    finally:
        lm3.shutdown()
    lm4, _, _ = restart(dirs)
    try:
        for tp in logs:
            lg = lm4.log_or_error(tp)
            assert read_rows(lg) == acked[tp].rows, tp
            assert lg.epochs.entries() == [(EPOCH, 0)], tp
    finally:
        lm4.shutdown()


# --------------------------------------------------------------------------------------------
# A half-copied -future folder on a full disk (a real broker process)
# --------------------------------------------------------------------------------------------

MOVED = TopicPartition("moved", 0)
RESIDENT = TopicPartition("resident", 0)


def _admin(layout: ImageLayout, path: str, body: wire.Model) -> bytes:
    status, data = http(
        "POST", layout.url + path, body.model_dump_json().encode(), "application/json", TOKEN
    )
    assert status == 200, data
    return data


def _describe(layout: ImageLayout) -> dict[str, wire.LogDirDescription]:
    data = _admin(layout, "/v1/admin/describe-log-dirs", wire.DescribeLogDirsRequest())
    resp = wire.DescribeLogDirsResponse.model_validate_json(data)
    return {d.path: d for d in resp.log_dirs}


def _alter(layout: ImageLayout, tp: TopicPartition, d: str) -> wire.PartitionResult:
    req = wire.AlterReplicaLogDirsRequest(
        partitions=[wire.AlterReplicaLogDir(topic=tp.topic, partition=tp.partition, log_dir=d)]
    )
    data = _admin(layout, "/v1/admin/alter-replica-log-dirs", req)
    return wire.AlterReplicaLogDirsResponse.model_validate_json(data).partitions[0]


def _produce(layout: ImageLayout, tp: TopicPartition, n: int, sent: list[bytes]) -> None:
    url = f"{layout.url}/v1/data/produce?topic={tp.topic}&partition={tp.partition}&acks=-1"
    for _ in range(n):
        values = [b"%s:%06d:" % (str(tp).encode(), len(sent) + i) + b"v" * 1000 for i in range(10)]
        status, body = http("POST", url, build_batch([(None, v) for v in values]), "x", TOKEN)
        assert status == 200, body
        sent += values


def _fetch_all(layout: ImageLayout, tp: TopicPartition) -> list[bytes]:
    values: list[bytes] = []
    offset = 0
    while True:
        url = f"{layout.url}/v1/data/fetch?topic={tp.topic}&partition={tp.partition}"
        status, data = http("GET", f"{url}&offset={offset}&max_bytes=262144", token=TOKEN)
        assert status == 200, data
        if not data:
            return values
        for pos, hdr in iter_batches(data):
            _, recs = decode_batch(data, pos)
            values += [r.value or b"" for r in recs if r.offset >= offset]
            offset = hdr.next_offset


def checkpoint_stamp(d: str) -> tuple[int, int] | None:
    """Which write of ``d``'s high-watermark checkpoint is there (each is a new file)."""
    try:
        st = os.stat(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT))
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


def _kill_mid_copy(layout: ImageLayout, run: Running, dest: str) -> None:
    """SIGKILL the broker once the move has copied a good part of the replica to ``dest``."""

    def going() -> bool:
        futures = [p for p in _describe(layout)[dest].partitions if p.is_future]
        return bool(futures) and futures[0].size > 300_000

    wait_for(going, "the move to get going (300 kB copied)", 30)
    run.proc.send_signal(signal.SIGKILL)
    run.proc.wait(20)


def test_broker_restarts_with_a_half_copied_future_on_a_full_disk(
    tmp_path: Path, small_disk: str
) -> None:
    big = str(tmp_path / "disk0")
    os.mkdir(big)
    layout = ImageLayout(
        tmp_path / "container",
        extra={
            "log.dirs": f"{big},{small_disk}",
            "log.segment.bytes": str(64 * 1024),
            "intra.broker.throttled.rate": str(400 * 1024),
            "replica.high.watermark.checkpoint.interval.ms": "100",
            "log.flush.scheduler.interval.ms": "100",
        },
    )
    layout.write()
    moved: list[bytes] = []
    resident: list[bytes] = []
    run = start(layout)
    try:
        wait_status(run, layout.url + "/readyz")
        leader_and_isr(layout, MOVED, new=True)  # on the big disk: it has the most room
        assert _alter(layout, RESIDENT, small_disk).error == "REPLICA_NOT_AVAILABLE"
        leader_and_isr(layout, RESIDENT, new=True)  # created where it was asked for
        assert os.path.isdir(os.path.join(big, "moved-0"))
        assert os.path.isdir(os.path.join(small_disk, "resident-0"))
        _produce(layout, MOVED, 150, moved)  # about 1.5 MB
        _produce(layout, RESIDENT, 10, resident)
        assert _alter(layout, MOVED, small_disk).error is None
        _kill_mid_copy(layout, run, small_disk)
    finally:
        if run.proc.poll() is None:
            stop(run)
    assert len(folders(small_disk, DirKind.FUTURE)) == 1
    fill_up(small_disk)

    run = start(layout)
    try:
        wait_status(run, layout.url + "/readyz")
        # Two checkpoint rounds (every 100 ms) written on the full disk: the space is really there.
        for _ in range(2):
            seen = checkpoint_stamp(small_disk)
            wait_for(
                lambda seen=seen: checkpoint_stamp(small_disk) not in (None, seen),  # type: ignore[misc]
                f"a checkpoint written on {small_disk}",
                30,
            )
        status, body = http("GET", layout.url + "/readyz")
        assert status == 200 and json.loads(body)["offline_log_dirs"] == [], body
        desc = _describe(layout)
        assert desc[small_disk].is_live, desc[small_disk]
        assert not any(p.is_future for d in desc.values() for p in d.partitions)
        assert folders(small_disk, DirKind.FUTURE) == []
        out = run.output()
        assert "log_startup_action" in out and "dropped the future copy" in out
        leader_and_isr(layout, MOVED, new=False)
        leader_and_isr(layout, RESIDENT, new=False)
        assert _fetch_all(layout, MOVED) == moved
        assert _fetch_all(layout, RESIDENT) == resident
        _produce(layout, RESIDENT, 2, resident)  # the directory takes writes again
        assert _fetch_all(layout, RESIDENT) == resident
    finally:
        rc = stop(run)
    assert rc == 0, run.output()[-3000:]
    assert os.path.isdir(os.path.join(big, "moved-0"))
