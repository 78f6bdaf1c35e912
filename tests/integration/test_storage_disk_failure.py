"""Disk failures on real directories (KIP-112): chmod 000, a full filesystem, every disk gone.

Run through ``scripts/run-tests``: as root, the process ignores file permissions unless the
DAC capabilities are dropped, and then ``chmod 000`` cannot fail a directory. Each test that
relies on chmod checks first that permissions are enforced and skips (saying so) if not.

An append to a segment whose file is already open still succeeds after ``chmod 000`` (the
descriptor was opened before); the failure shows at the next operation that resolves a path:
a segment roll opening a new file, a checkpoint write, a directory listing. The tests force
those with small segments or ``lm.checkpoint()``.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jbod_broker.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import KafkaStorageError, NoLiveLogDirError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition, log_dir_name
from jbod_broker.storage.records import build_batch, decode_batch, validate_batches
from tests.permissions import require_permissions
from tests.tmpfs import close_fds_under, fill_up, mounted_tmpfs, resize_tmpfs
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

BROKER = 1
EPOCH = 3
# Small segments: a partition rolls (opens new files) every few appends.
CONFIG = LogConfig(segment_bytes=8 * 1024, retention_ms=-1, retention_bytes=-1)

Row = tuple[int, bytes | None, bytes | None]
"""(offset, key, value) of one record."""


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def payload(tp: TopicPartition, n: int) -> list[tuple[bytes, bytes]]:
    """Records of the ``n``-th batch of ``tp``: deterministic, 1-4 records of 100-900 bytes."""
    h = hashlib.sha256(f"{tp}/{n}".encode()).digest()
    out = []
    for i in range(1 + h[0] % 4):
        key = f"{tp}:{n}:{i}".encode()
        out.append((key, hashlib.shake_128(key).digest(100 + h[1 + i] * 3)))
    return out


@dataclass
class Acked:
    """What the log acknowledged for one partition, in order."""

    rows: list[Row] = field(default_factory=list)
    batches: int = 0

    def add(self, first: int, last: int, recs: list[tuple[bytes, bytes]]) -> None:
        assert last - first + 1 == len(recs)
        assert not self.rows or first == self.rows[-1][0] + 1, "offsets must be contiguous"
        self.rows += [(first + i, k, v) for i, (k, v) in enumerate(recs)]
        self.batches += 1


def append(lg: Log, tp: TopicPartition, acked: Acked) -> None:
    recs = payload(tp, acked.batches)
    info = lg.append_as_leader(build_batch(recs), leader_epoch=EPOCH)
    acked.add(info.first_offset, info.last_offset, recs)


def read_rows(lg: Log) -> list[Row]:
    """Every record of the log, read through ``Log.read`` in chunks; every batch CRC-checked."""
    rows: list[Row] = []
    offset = lg.log_start_offset
    end = lg.log_end_offset
    while offset < end:
        data = lg.read(offset, 32 * 1024).data
        assert data, f"{lg.tp}: nothing readable at {offset} below the log end {end}"
        headers = validate_batches(data, max_batch_bytes=lg.config.max_message_bytes)
        pos = 0
        for h in headers:
            assert h.base_offset == offset, f"{lg.tp}: gap or overlap at {offset}"
            _, recs = decode_batch(data, pos)
            rows += [(r.offset, r.key, r.value) for r in recs]
            pos += h.size_in_bytes
            offset = h.next_offset
    return rows


def new_manager(
    dirs: list[str], *, config: LogConfig = CONFIG, channel: LogDirFailureChannel | None = None
) -> LogManager:
    return LogManager(dirs, broker_id=BROKER, default_config=config, channel=channel)


def place(lm: LogManager, tps_by_dir: dict[str, list[TopicPartition]]) -> dict[TopicPartition, Log]:
    logs = {}
    for d, tps in tps_by_dir.items():
        for tp in tps:
            lm.set_preferred_dir(tp, d)
            logs[tp] = lm.get_or_create_log(tp, is_new=True)
            assert logs[tp].log_dir == d
    return logs


def replica_folders(dirs: list[str], tp: TopicPartition) -> list[str]:
    return [d for d in dirs if os.path.isdir(os.path.join(d, log_dir_name(tp)))]


def open_fds_under(path: str) -> list[str]:
    """Files under ``path`` this process holds open."""
    out = []
    prefix = os.path.realpath(path) + os.sep
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target)
    return out


class Recorder:
    """Offline-replica listener and halt callback that remember their calls."""

    def __init__(self) -> None:
        self.offline: list[tuple[str, str, list[TopicPartition]]] = []
        self.halts: list[str] = []
        self.went_offline = threading.Event()

    def listener(self, d: str, reason: str, replicas: list[TopicPartition]) -> None:
        self.offline.append((d, reason, sorted(replicas)))
        self.went_offline.set()

    def halt(self, reason: str) -> None:
        self.halts.append(reason)


@pytest.fixture
def chmod(tmp_path: Path) -> Iterator[Callable[[str, int], None]]:
    """``chmod(path, mode)``, after checking that permissions bind; restores 0o755 at the end."""
    require_permissions(tmp_path)
    touched: list[str] = []

    def do(path: str, mode: int) -> None:
        touched.append(path)
        os.chmod(path, mode)

    yield do
    for path in touched:
        os.chmod(path, 0o755)


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[list[str]]:
    out = [str(tmp_path / f"disk{i}") for i in range(3)]
    for d in out:
        os.mkdir(d)
    yield out
    for d in out:
        close_fds_under(d)  # what offline logs keep open (see the descriptors test below)


def tps_for(dirs: list[str], per_dir: int = 2) -> dict[str, list[TopicPartition]]:
    """Partitions spread over every directory: topic ``t``, ``per_dir`` partitions each."""
    return {
        d: [TopicPartition("t", i * per_dir + j) for j in range(per_dir)]
        for i, d in enumerate(dirs)
    }


# --------------------------------------------------------------------------------------------
# chmod 000
# --------------------------------------------------------------------------------------------


def test_open_segment_keeps_appending_after_chmod_until_a_roll_needs_a_new_file(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    lm = new_manager(dirs)
    lm.startup()
    rec = Recorder()
    lm.add_offline_listener(rec.listener)
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, dirs[1])
    lg = lm.get_or_create_log(tp, is_new=True)
    acked = Acked()
    append(lg, tp, acked)

    chmod(dirs[1], 0)
    append(lg, tp, acked)  # the active segment's descriptor is already open
    lm.channel.drain()
    assert lm.offline_dirs() == {}

    with pytest.raises(KafkaStorageError, match=dirs[1]):
        lg.roll()  # needs a new .log file in the directory
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {dirs[1]}
    assert "Permission denied" in lm.offline_dirs()[dirs[1]]
    assert rec.offline == [(dirs[1], lm.offline_dirs()[dirs[1]], [tp])]
    with pytest.raises(KafkaStorageError, match=dirs[1]):
        append(lg, tp, Acked())

    chmod(dirs[1], 0o755)
    lm.shutdown()
    lm2 = new_manager(dirs)
    lm2.startup()
    assert read_rows(lm2.log_or_error(tp)) == acked.rows
    lm2.shutdown()


def test_chmod_000_while_appending_isolates_that_directory(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    lm = new_manager(dirs)
    lm.startup()
    rec = Recorder()
    lm.add_offline_listener(rec.listener)
    lm.on_no_live_dirs(rec.halt)
    layout = tps_for(dirs)
    place(lm, layout)
    bad = dirs[1]
    bad_tps = layout[bad]
    good_tps = [tp for d in dirs if d != bad for tp in layout[d]]
    all_tps = bad_tps + good_tps
    acked = {tp: Acked() for tp in all_tps}
    errors: dict[TopicPartition, list[Exception]] = {tp: [] for tp in all_tps}
    unexpected: list[BaseException] = []
    appends_after_failure = {tp: 0 for tp in all_tps}
    stop = threading.Event()

    def writer() -> None:
        try:
            while not stop.is_set():
                for tp in all_tps:
                    offline_before = rec.went_offline.is_set()
                    try:
                        # Look the replica up per request, as the produce path does.
                        append(lm.log_or_error(tp), tp, acked[tp])
                    except KafkaStorageError as e:
                        errors[tp].append(e)
                        continue
                    if offline_before:
                        appends_after_failure[tp] += 1
        except BaseException as e:
            unexpected.append(e)

    t = threading.Thread(target=writer, name="writer")
    t.start()
    try:
        wait_for(
            lambda: min(a.batches for a in acked.values()) >= 40 or unexpected,
            "40 batches appended to each partition",
            30,
        )
        assert not unexpected
        chmod(bad, 0)
        assert rec.went_offline.wait(20), "the directory never went offline"
        wait_for(
            lambda: min(appends_after_failure[tp] for tp in good_tps) >= 50 or unexpected,
            "50 appends to each live partition after the failure",
            30,
        )
    finally:
        stop.set()
        t.join(30)
    assert not t.is_alive()
    assert not unexpected, unexpected

    # Exactly that directory is offline, with its replicas, and the listener heard of it once.
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {bad}
    reason = lm.offline_dirs()[bad]
    assert reason.startswith("append t-"), reason  # found by the writer, at a segment roll
    assert "Permission denied" in reason
    lm.channel.drain()
    assert lm.offline_log_dir_count == 1
    lm.channel.drain()
    assert lm.offline_replica_count == len(bad_tps)
    lm.channel.drain()
    assert lm.offline_replicas() == {tp: bad for tp in bad_tps}
    assert rec.offline == [(bad, reason, sorted(bad_tps))]
    assert rec.halts == []
    assert lm.live_dirs() == [d for d in dirs if d != bad]
    info = {i.path: i for i in lm.describe_log_dirs()}
    assert not info[bad].is_live and info[bad].error == reason
    assert all(info[d].is_live for d in dirs if d != bad)

    # Only the bad directory's replicas failed, and every failure names the directory.
    for tp in good_tps:
        assert errors[tp] == [], f"{tp} on a good directory failed: {errors[tp]}"
        assert appends_after_failure[tp] >= 50
    for tp in bad_tps:
        assert errors[tp], f"{tp} never failed"
        assert all(bad in str(e) for e in errors[tp])
        with pytest.raises(KafkaStorageError, match=bad):
            lm.log_or_error(tp)
        with pytest.raises(KafkaStorageError, match=bad):
            lm.delete_log(tp)

    # While the directory is still unreadable, the others serve reads of everything acked.
    for tp in good_tps:
        assert read_rows(lm.log_or_error(tp)) == acked[tp].rows

    # Restoring the permissions does not bring the directory back by itself.
    chmod(bad, 0o755)
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {bad}
    for tp in bad_tps:
        with pytest.raises(KafkaStorageError, match=bad):
            lm.log_or_error(tp)

    # The other directories still serve, and every acknowledged record reads back exactly.
    for tp in good_tps:
        lg = lm.log_or_error(tp)
        append(lg, tp, acked[tp])
        assert read_rows(lg) == acked[tp].rows

    # A clean shutdown and a new broker process: nothing acknowledged is lost, on any dir.
    lm.shutdown()
    lm2 = new_manager(dirs)
    rec2 = Recorder()
    lm2.add_offline_listener(rec2.listener)
    lm2.startup()
    lm2.channel.drain()
    assert lm2.offline_dirs() == {}
    assert rec2.offline == []
    for tp in good_tps:
        assert read_rows(lm2.log_or_error(tp)) == acked[tp].rows
    for tp in bad_tps:
        # Written to the page cache before the chmod, so still there once the disk is back.
        lg = lm2.log_or_error(tp)
        assert lg.log_dir == bad
        assert read_rows(lg) == acked[tp].rows
    lm2.shutdown()


def test_replica_on_failed_dir_is_not_recreated_elsewhere(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    """KIP-112 / KAFKA-16234: only a replica the controller calls new may be created while a
    directory is offline, and never one known to live on the offline directory."""
    lm = new_manager(dirs)
    lm.startup()
    layout = tps_for(dirs, per_dir=1)
    logs = place(lm, layout)
    acked = {tp: Acked() for tp in logs}
    for tp, lg in logs.items():
        append(lg, tp, acked[tp])
    bad = dirs[2]
    (bad_tp,) = layout[bad]
    (good_tp,) = layout[dirs[0]]

    chmod(bad, 0)
    lm.checkpoint()  # writes a file in each directory: the bad one fails
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {bad}
    lm.channel.drain()
    assert lm.offline_replicas() == {bad_tp: bad}

    # Known to be on the offline directory: refused whether or not it is new.
    for is_new in (False, True):
        with pytest.raises(KafkaStorageError, match=bad):
            lm.get_or_create_log(bad_tp, is_new=is_new)
    assert replica_folders(dirs[:2], bad_tp) == []

    # Unknown replica, not new: it may exist on the offline directory, so it is refused.
    unknown = TopicPartition("u", 0)
    lm.set_preferred_dir(unknown, bad)
    with pytest.raises(KafkaStorageError, match="not new"):
        lm.get_or_create_log(unknown, is_new=False)
    assert replica_folders(dirs[:2], unknown) == []
    assert lm.get_log(unknown) is None

    # Unknown and new: created, on a live directory even though the bad one was preferred.
    lg = lm.get_or_create_log(unknown, is_new=True)
    assert lg.log_dir in dirs[:2]
    assert replica_folders(dirs[:2], unknown) == [lg.log_dir]
    ua = Acked()
    append(lg, unknown, ua)
    assert read_rows(lg) == ua.rows

    # A replica already online is returned as it is.
    assert lm.get_or_create_log(good_tp, is_new=False) is logs[good_tp]
    assert read_rows(logs[good_tp]) == acked[good_tp].rows
    lm.shutdown()


def test_dir_unreadable_at_startup_is_offline_and_its_replicas_are_not_recreated(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    lm = new_manager(dirs)
    lm.startup()
    layout = tps_for(dirs, per_dir=1)
    logs = place(lm, layout)
    acked = {tp: Acked() for tp in logs}
    for _ in range(5):
        for tp, lg in logs.items():
            append(lg, tp, acked[tp])
    lm.shutdown()

    bad = dirs[1]
    (bad_tp,) = layout[bad]
    chmod(bad, 0)
    lm2 = new_manager(dirs)
    rec = Recorder()
    lm2.add_offline_listener(rec.listener)
    lm2.on_no_live_dirs(rec.halt)
    report = lm2.startup()

    lm2.channel.drain()
    assert set(lm2.offline_dirs()) == {bad}
    assert "Permission denied" in lm2.offline_dirs()[bad]
    lm2.channel.drain()
    assert lm2.offline_log_dir_count == 1
    # Which replicas the unreadable directory holds cannot be known.
    lm2.channel.drain()
    assert lm2.offline_replica_count == 0
    assert rec.offline == [(bad, lm2.offline_dirs()[bad], [])]
    assert rec.halts == []
    assert any(bad in a for a in report.actions)
    assert lm2.get_log(bad_tp) is None

    # Replicas on the good directories are served with their data.
    for d in dirs:
        if d == bad:
            continue
        (tp,) = layout[d]
        lg = lm2.get_or_create_log(tp, is_new=False)
        assert lg.log_dir == d
        assert read_rows(lg) == acked[tp].rows

    # The missing replica is not re-created (empty!) on a good directory unless it is new.
    with pytest.raises(KafkaStorageError, match="not new"):
        lm2.get_or_create_log(bad_tp, is_new=False)
    assert replica_folders([d for d in dirs if d != bad], bad_tp) == []
    assert lm2.get_log(bad_tp) is None
    lg = lm2.get_or_create_log(bad_tp, is_new=True)
    assert lg.log_dir != bad
    assert lg.log_end_offset == 0
    lm2.shutdown()


# --------------------------------------------------------------------------------------------
# A full filesystem
# --------------------------------------------------------------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[str]:
    """A 2 MiB tmpfs mounted on a fresh directory; unmounted at the end."""
    with mounted_tmpfs(str(tmp_path / "small-disk"), "2m") as mnt:
        yield mnt


def test_full_filesystem_takes_only_that_directory_offline(
    tmp_path: Path, small_tmpfs: str
) -> None:
    dirs = [str(tmp_path / "disk0"), small_tmpfs, str(tmp_path / "disk2")]
    config = LogConfig(segment_bytes=256 * 1024, retention_ms=-1)
    lm = new_manager(dirs, config=config)
    lm.startup()
    rec = Recorder()
    lm.add_offline_listener(rec.listener)
    lm.on_no_live_dirs(rec.halt)
    layout = tps_for(dirs)
    logs = place(lm, layout)
    acked = {tp: Acked() for tp in logs}
    full_tps = layout[small_tmpfs]
    other_tps = [tp for tp in logs if tp not in full_tps]
    failures: list[KafkaStorageError] = []
    for _ in range(20_000):
        for tp in full_tps + other_tps:
            try:
                append(lm.log_or_error(tp), tp, acked[tp])
            except KafkaStorageError as e:
                assert tp in full_tps, f"{tp} failed on a healthy directory: {e}"
                failures.append(e)
        if len(failures) >= 4:
            break
    assert failures, "the 2 MiB filesystem never filled up"
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {small_tmpfs}
    reason = lm.offline_dirs()[small_tmpfs]
    assert "No space left on device" in reason
    assert all(small_tmpfs in str(e) for e in failures)
    lm.channel.drain()
    assert lm.offline_log_dir_count == 1
    lm.channel.drain()
    assert lm.offline_replica_count == len(full_tps)
    assert rec.offline == [(small_tmpfs, reason, sorted(full_tps))]
    assert rec.halts == []
    assert sum(a.batches for tp, a in acked.items() if tp in full_tps) > 100

    # The healthy directories keep taking appends and lose nothing.
    for _ in range(50):
        for tp in other_tps:
            append(lm.log_or_error(tp), tp, acked[tp])
    for tp in other_tps:
        assert read_rows(lm.log_or_error(tp)) == acked[tp].rows
    lm.shutdown()
    # Offline logs keep their descriptors (test_offline_directory_descriptors_are_closed):
    # drop them without writing, as a dead process would.
    close_fds_under(small_tmpfs)

    # The operator grows the volume and restarts the broker: recovery cuts the torn tail
    # the failed write left, and every acknowledged record is there, on every directory.
    resize_tmpfs(small_tmpfs, "8m")
    lm2 = new_manager(dirs, config=config)
    lm2.startup()
    lm2.channel.drain()
    assert lm2.offline_dirs() == {}
    for tp in logs:
        assert read_rows(lm2.log_or_error(tp)) == acked[tp].rows
        append(lm2.log_or_error(tp), tp, acked[tp])
    lm2.shutdown()
    lm3 = new_manager(dirs, config=config)
    lm3.startup()
    for tp in logs:
        assert read_rows(lm3.log_or_error(tp)) == acked[tp].rows
    lm3.shutdown()


# --------------------------------------------------------------------------------------------
# Every directory offline
# --------------------------------------------------------------------------------------------


def test_losing_every_directory_halts_the_broker(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    lm = new_manager(dirs)
    lm.startup()
    rec = Recorder()
    lm.add_offline_listener(rec.listener)
    lm.on_no_live_dirs(rec.halt)
    layout = tps_for(dirs, per_dir=1)
    logs = place(lm, layout)
    for tp, lg in logs.items():
        append(lg, tp, Acked())

    for i, d in enumerate(dirs):
        chmod(d, 0)
        lm.checkpoint()
        lm.channel.drain()
        assert len(lm.offline_dirs()) == i + 1
        if i < len(dirs) - 1:
            assert rec.halts == []
    assert lm.live_dirs() == []
    lm.channel.drain()
    assert lm.offline_log_dir_count == 3
    lm.channel.drain()
    assert lm.offline_replica_count == 3
    assert [r[0] for r in rec.offline] == dirs
    assert len(rec.halts) == 1
    assert "every log directory is offline" in rec.halts[0]
    assert dirs[-1] in rec.halts[0]
    with pytest.raises(KafkaStorageError):
        lm.get_or_create_log(TopicPartition("new", 0), is_new=True)
    lm.shutdown()


def test_startup_with_every_directory_unreadable_raises(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    lm = new_manager(dirs)
    lm.startup()
    place(lm, tps_for(dirs, per_dir=1))
    lm.shutdown()
    for d in dirs:
        chmod(d, 0)

    lm2 = new_manager(dirs)
    rec = Recorder()
    lm2.on_no_live_dirs(rec.halt)
    with pytest.raises(NoLiveLogDirError) as ei:
        lm2.startup()
    assert rec.halts, "the halt callback was not called"
    # The last call carries the start-up verdict (test_halt_is_called_once_at_startup).
    for d in dirs:
        assert d in rec.halts[-1]
        assert d in str(ei.value)
    assert "Permission denied" in rec.halts[-1]
    lm2.channel.drain()
    assert lm2.offline_log_dir_count == 3
    assert lm2.current_logs() == {}


# --------------------------------------------------------------------------------------------
# Regressions: engine bugs this file found (all fixed)
# --------------------------------------------------------------------------------------------


def test_offline_directory_descriptors_are_closed(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    lm = new_manager(dirs)
    lm.startup()
    logs = place(lm, tps_for(dirs, per_dir=1))
    for tp, lg in logs.items():
        append(lg, tp, Acked())
    bad = dirs[0]
    chmod(bad, 0)
    lm.checkpoint()
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {bad}
    lm.shutdown()
    try:
        # After the failure (and certainly after shutdown) nothing on the bad disk is open:
        # otherwise it cannot be unmounted and replaced (umount: target is busy).
        assert open_fds_under(bad) == []
    finally:
        for lg in logs.values():
            lg.close_quietly()


def test_directory_failure_during_delete_log_does_not_deadlock(
    dirs: list[str], chmod: Callable[[str, int], None]
) -> None:
    channel = LogDirFailureChannel()
    in_failure = threading.Event()

    def slow_first_listener(d: str, reason: str) -> None:
        # Registered before the log manager's own listener: widens the window in which the
        # failing append holds the log's lock, so the interleaving is deterministic.
        in_failure.set()
        time.sleep(0.3)

    channel.add_listener(slow_first_listener)
    lm = new_manager(dirs, channel=channel)
    lm.startup()
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, dirs[0])
    lg = lm.get_or_create_log(tp, is_new=True)
    append(lg, tp, Acked())
    chmod(dirs[0], 0)
    outcome: dict[str, object] = {}

    def failing_append() -> None:
        try:
            lg.roll()  # holds lg.lock while the directory failure is handled
        except Exception as e:
            outcome["append"] = e

    def stop_replica_delete() -> None:
        in_failure.wait(5)
        try:
            lm.delete_log(tp)
        except Exception as e:
            outcome["delete"] = e

    threads = [
        threading.Thread(target=failing_append, daemon=True),
        threading.Thread(target=stop_replica_delete, daemon=True),
    ]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 3
    for th in threads:
        th.join(max(0.0, deadline - time.monotonic()))
    stuck = [th.name for th in threads if th.is_alive()]
    assert stuck == [], f"deadlocked threads: {stuck}"
    assert isinstance(outcome.get("append"), KafkaStorageError)


def test_shutdown_with_a_full_disk_still_shuts_down_the_other_directories(
    tmp_path: Path, small_tmpfs: str
) -> None:
    good = str(tmp_path / "disk0")
    dirs = [good, small_tmpfs]
    lm = new_manager(dirs, config=LogConfig(retention_ms=-1))
    lm.startup()
    logs = place(lm, {good: [TopicPartition("t", 0)], small_tmpfs: [TopicPartition("t", 1)]})
    extra = TopicPartition("t", 2)
    lm.set_preferred_dir(extra, small_tmpfs)
    logs[extra] = lm.get_or_create_log(extra, is_new=True)
    for tp, lg in logs.items():
        append(lg, tp, Acked())  # index entries stay pending in memory until a flush
    try:
        fill_up(small_tmpfs)
        lm.shutdown()
        assert os.path.exists(os.path.join(good, CLEAN_SHUTDOWN_FILE))
    finally:
        close_fds_under(small_tmpfs)


def test_halt_is_called_once_at_startup(dirs: list[str], chmod: Callable[[str, int], None]) -> None:
    for d in dirs:
        chmod(d, 0)
    lm = new_manager(dirs)
    rec = Recorder()
    lm.on_no_live_dirs(rec.halt)
    with pytest.raises(NoLiveLogDirError):
        lm.startup()
    assert len(rec.halts) == 1, rec.halts


def test_kafka_13773_disk_full_while_loading_logs(tmp_path: Path, small_tmpfs: str) -> None:
    """A full disk while loading logs (Kafka shut the broker down): the directory comes online.

    Loading needs no new space for what a directory holds: cutting a torn tail only shortens a
    file, and indexes are rebuilt in memory and written at the next flush. So the full
    directory loads and serves every acknowledged record, and the good one is not harmed.
    (tests/integration/test_storage_full_disk.py covers more of it: a half-copied ``-future``
    folder, an epoch to forget, a clean shutdown, a real broker process.)
    """
    good = str(tmp_path / "disk0")
    dirs = [good, small_tmpfs]
    config = LogConfig(segment_bytes=16 * 1024, retention_ms=-1)
    lm = new_manager(dirs, config=config)
    lm.startup()
    tps = {good: [TopicPartition("t", 0)], small_tmpfs: [TopicPartition("t", 1)]}
    logs = place(lm, tps)
    acked = {tp: Acked() for tp in logs}
    for _ in range(10):
        for tp, lg in logs.items():
            append(lg, tp, acked[tp])
    for lg in logs.values():
        lg.flush()
    for _ in range(10):  # not flushed, in a new segment: its index entries are only in memory
        for tp, lg in logs.items():
            append(lg, tp, acked[tp])
    # A torn tail on the small disk (recovery must cut it and rebuild indexes), then a crash:
    # no clean-shutdown marker, descriptors dropped without writing anything.
    seg = os.path.join(small_tmpfs, log_dir_name(TopicPartition("t", 1)))
    last = sorted(f for f in os.listdir(seg) if f.endswith(".log"))[-1]
    with open(os.path.join(seg, last), "ab") as f:
        f.write(b"\x00\x01torn" * 50)
    close_fds_under(small_tmpfs)
    close_fds_under(good)
    fill_up(small_tmpfs)

    lm2 = new_manager(dirs, config=config)
    rec = Recorder()
    lm2.add_offline_listener(rec.listener)
    lm2.on_no_live_dirs(rec.halt)
    try:
        report = lm2.startup()
        lm2.channel.drain()
        assert lm2.offline_dirs() == {}, report.actions
        assert rec.offline == [] and rec.halts == []
        for tp in logs:
            assert read_rows(lm2.log_or_error(tp)) == acked[tp].rows, tp
        good_log = lm2.log_or_error(TopicPartition("t", 0))
        append(good_log, TopicPartition("t", 0), acked[TopicPartition("t", 0)])
        assert read_rows(good_log) == acked[TopicPartition("t", 0)].rows
    finally:
        lm2.shutdown()
        close_fds_under(small_tmpfs)
