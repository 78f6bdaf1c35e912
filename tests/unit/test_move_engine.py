"""The move engine's API: requests and their answers, cancellation, describe, throttle, workers.

Everything here runs in one process on real directories under tmp_path; directory failures are
injected through the failure channel (the integration tier uses chmod 000).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker.config import load_config
from jbod_broker.move import (
    AlterResult,
    MoveHooks,
    MoveState,
    ReplicaMoveEngine,
    start_storage,
)
from jbod_broker.moves import MoveService
from jbod_broker.storage.errors import (
    InvalidLogDirError,
    KafkaStorageError,
    ReplicaNotAvailableError,
)
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from tests.move_helpers import Appender, check_sequence, fill, read_values
from tests.waiting import wait_for

TP = TopicPartition("moves", 0)
CONFIG = LogConfig(segment_bytes=64 * 1024)


def folders(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))


def all_folders(lm: LogManager) -> list[str]:
    return sorted(f"{os.path.basename(d)}/{n}" for d in lm.dirs for n in folders(d))


@pytest.fixture
def lm(tmp_path: Path) -> Iterator[LogManager]:
    m = LogManager(
        [str(tmp_path / f"disk{i}") for i in range(3)], broker_id=1, default_config=CONFIG
    )
    m.startup()
    yield m
    m.shutdown()


@pytest.fixture
def engine(lm: LogManager) -> Iterator[ReplicaMoveEngine]:
    e = ReplicaMoveEngine(lm)
    yield e
    e.shutdown()


def make_log(lm: LogManager, tp: TopicPartition = TP, nbytes: int = 400_000) -> Log:
    lg = lm.get_or_create_log(tp, is_new=True)
    fill(lg, nbytes, batch_bytes=2000)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def other_dir(lm: LogManager, lg: Log, n: int = 0) -> str:
    return [d for d in lm.dirs if d != lg.log_dir][n]


def test_move_copies_everything_and_swaps(lm: LogManager, engine: ReplicaMoveEngine) -> None:
    lg = make_log(lm)
    before = read_values(lg)
    src, dest = lg.log_dir, other_dir(lm, lg)
    assert engine.alter_replica_log_dir(TP, dest) is AlterResult.STARTED
    info = engine.wait(TP, 30)
    assert info.state is MoveState.DONE and info.error is None
    assert info.current_dir == dest and info.future_dir is None
    assert info.bytes_copied == info.bytes_total == lm.get_log(TP).size  # type: ignore[union-attr]
    new = lm.get_log(TP)
    assert new is not None and new is not lg and new.log_dir == dest and not new.is_future
    assert new.dir_path == os.path.join(dest, "moves-0")
    assert read_values(new) == before
    assert len(new.segments) == len(lg.segments)
    engine.run_deletions()
    assert all_folders(lm) == [f"{os.path.basename(dest)}/moves-0"]
    assert folders(src) == []


def test_same_directory_is_nothing_to_do(lm: LogManager, engine: ReplicaMoveEngine) -> None:
    lg = make_log(lm, nbytes=1000)
    assert engine.alter_replica_log_dir(TP, lg.log_dir) is AlterResult.NOTHING_TO_DO
    assert lm.get_future_log(TP) is None


@pytest.mark.parametrize(
    "bad",
    ["relative/disk0", "", "disk0", "/nowhere/else", "/tmp/../etc"],
)
def test_destination_must_be_a_configured_absolute_path(
    lm: LogManager, engine: ReplicaMoveEngine, bad: str
) -> None:
    make_log(lm, nbytes=1000)
    with pytest.raises(InvalidLogDirError):
        engine.alter_replica_log_dir(TP, bad)


def test_dot_dot_into_a_configured_dir_is_refused(
    lm: LogManager, engine: ReplicaMoveEngine
) -> None:
    lg = make_log(lm, nbytes=1000)
    d = other_dir(lm, lg)
    sneaky = os.path.join(d, "..", os.path.basename(d))
    with pytest.raises(InvalidLogDirError, match="canonical"):
        engine.alter_replica_log_dir(TP, sneaky)


def test_symlink_leading_elsewhere_is_refused(
    lm: LogManager, engine: ReplicaMoveEngine, tmp_path: Path
) -> None:
    lg = make_log(lm, nbytes=1000)
    d = other_dir(lm, lg)
    os.rename(d, str(tmp_path / "moved-away"))
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), d)
    try:
        with pytest.raises(InvalidLogDirError, match="leads elsewhere"):
            engine.alter_replica_log_dir(TP, d)
        assert os.listdir(tmp_path / "elsewhere") == []
    finally:
        os.unlink(d)
        os.rename(str(tmp_path / "moved-away"), d)


def test_two_names_for_one_directory_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(str(real), str(tmp_path / "alias"))
    m = LogManager([str(tmp_path / "a"), str(real), str(tmp_path / "alias")], broker_id=1)
    m.startup()
    e = ReplicaMoveEngine(m)
    try:
        m.get_or_create_log(TP, is_new=True)
        with pytest.raises(InvalidLogDirError, match="same directory"):
            e.alter_replica_log_dir(TP, str(tmp_path / "alias"))
    finally:
        e.shutdown()
        m.shutdown()


def test_offline_destination_is_refused(lm: LogManager, engine: ReplicaMoveEngine) -> None:
    lg = make_log(lm, nbytes=1000)
    d = other_dir(lm, lg)
    lm.channel.mark_offline(d, "injected")
    with pytest.raises(KafkaStorageError, match=f"{d} is offline"):
        engine.alter_replica_log_dir(TP, d)


def test_unknown_replica_is_remembered_for_creation(
    lm: LogManager, engine: ReplicaMoveEngine
) -> None:
    tp = TopicPartition("later", 3)
    dest = lm.dirs[2]
    with pytest.raises(ReplicaNotAvailableError):
        engine.alter_replica_log_dir(tp, dest)
    assert lm.preferred_dir(tp) == dest
    assert lm.get_or_create_log(tp, is_new=True).log_dir == dest
    assert lm.preferred_dir(tp) is None


def test_any_forgets_a_remembered_destination(lm: LogManager, engine: ReplicaMoveEngine) -> None:
    tp = TopicPartition("later", 0)
    with pytest.raises(ReplicaNotAvailableError):
        engine.alter_replica_log_dir(tp, lm.dirs[1])
    assert engine.alter_replica_log_dir(tp, "any") is AlterResult.NOTHING_TO_DO
    assert lm.preferred_dir(tp) is None


def test_offline_replica_is_a_storage_error(lm: LogManager, engine: ReplicaMoveEngine) -> None:
    lg = make_log(lm, nbytes=1000)
    lm.channel.mark_offline(lg.log_dir, "injected")
    with pytest.raises(KafkaStorageError, match="offline"):
        engine.alter_replica_log_dir(TP, other_dir(lm, lg))


def slow_engine(lm: LogManager, rate: int = 200_000, **kw: object) -> ReplicaMoveEngine:
    return ReplicaMoveEngine(lm, throttle_rate=rate, **kw)  # type: ignore[arg-type]


def test_any_cancels_and_removes_the_future_folder(lm: LogManager) -> None:
    lg = make_log(lm)
    before = read_values(lg)
    engine = slow_engine(lm)
    try:
        dest = other_dir(lm, lg)
        engine.alter_replica_log_dir(TP, dest)
        wait_for(lambda: engine.status(TP).bytes_copied > 20_000)
        assert folders(dest) and folders(dest)[0].endswith("-future")
        assert engine.alter_replica_log_dir(TP, "any") is AlterResult.CANCELLED
        info = engine.status(TP)
        assert info.state is MoveState.CANCELLED and info.future_dir is None
        assert folders(dest) == []  # removed, not just renamed
        assert lm.get_log(TP) is lg and read_values(lg) == before
        assert engine.alter_replica_log_dir(TP, "any") is AlterResult.NOTHING_TO_DO
    finally:
        engine.shutdown()


def test_cancel_of_a_queued_move(lm: LogManager) -> None:
    a, b = make_log(lm), make_log(lm, TopicPartition("moves", 1))
    engine = slow_engine(lm, threads=1)
    try:
        engine.alter_replica_log_dir(TP, other_dir(lm, a))
        engine.alter_replica_log_dir(b.tp, other_dir(lm, b))
        assert engine.status(b.tp).state is MoveState.QUEUED
        assert engine.status(b.tp).future_dir == other_dir(lm, b)
        assert engine.cancel(b.tp)
        assert engine.status(b.tp).state is MoveState.CANCELLED
        assert all(not n.endswith("-future") for n in folders(other_dir(lm, b)))
        # The first move goes on (its worker may not have taken it yet on a loaded machine).
        wait_for(lambda: engine.status(TP).state in (MoveState.COPYING, MoveState.CATCHING_UP))
    finally:
        engine.shutdown()


def test_new_destination_replaces_the_running_move(lm: LogManager) -> None:
    lg = make_log(lm)
    engine = slow_engine(lm)
    try:
        first, second = other_dir(lm, lg, 0), other_dir(lm, lg, 1)
        engine.alter_replica_log_dir(TP, first)
        wait_for(lambda: engine.status(TP).bytes_copied > 10_000)
        assert engine.alter_replica_log_dir(TP, second) is AlterResult.STARTED
        assert not any(n.endswith("-future") for n in folders(first))
        engine.set_throttle_rate(None)
        assert engine.wait(TP, 30).state is MoveState.DONE
        assert lm.get_log(TP).log_dir == second  # type: ignore[union-attr]
    finally:
        engine.shutdown()


def test_throttle_change_applies_to_running_moves(lm: LogManager) -> None:
    lg = make_log(lm, nbytes=2_000_000)
    engine = slow_engine(lm, rate=100_000)  # 20 s at this rate
    try:
        engine.alter_replica_log_dir(TP, other_dir(lm, lg))
        wait_for(lambda: engine.status(TP).bytes_copied > 0)
        info = engine.status(TP)
        assert info.state is MoveState.COPYING and info.eta_seconds is not None
        assert info.eta_seconds > 5 and 0 < info.bytes_copied < info.bytes_total
        start = time.monotonic()
        engine.set_throttle_rate(None)
        assert engine.throttle_rate is None
        assert engine.wait(TP, 30).state is MoveState.DONE
        assert time.monotonic() - start < 5
    finally:
        engine.shutdown()


def test_workers_default_to_one_per_log_dir_and_come_from_config(lm: LogManager) -> None:
    e = ReplicaMoveEngine(lm, start=False)
    assert e.threads == 3
    env = {
        "JBOD_BROKER_ID": "1",
        "JBOD_LOG_DIRS": ",".join(lm.dirs),
        "JBOD_AUTH_DISABLED": "true",
        "JBOD_NUM_REPLICA_ALTER_LOG_DIRS_THREADS": "2",
        "JBOD_REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND": "1000000",
    }
    e2 = MoveService(lm, load_config(None, env=env)).engine  # as the broker builds it
    assert e2.threads == 2 and e2.throttle_rate == 1_000_000


def test_moves_run_in_parallel_up_to_the_worker_count(lm: LogManager) -> None:
    logs = [make_log(lm, TopicPartition("par", i), 300_000) for i in range(4)]
    # 1.2 MB at 50 kB/s: no move can end before the throttle is lifted, so once both workers
    # have taken one, the other two stay queued (whenever the workers get to run).
    engine = slow_engine(lm, rate=50_000, threads=2)
    try:
        for lg in logs:
            engine.alter_replica_log_dir(lg.tp, other_dir(lm, lg))

        def states() -> list[MoveState | None]:
            return [engine.status(lg.tp).state for lg in logs]

        wait_for(
            lambda: states().count(MoveState.QUEUED) <= 2, lambda: f"two moves taken: {states()}"
        )
        assert states().count(MoveState.QUEUED) == 2
        assert all(s in (MoveState.QUEUED, MoveState.COPYING) for s in states()), states()
        engine.set_throttle_rate(None)
        for info in engine.wait_all(30):
            assert info.state is MoveState.DONE
    finally:
        engine.shutdown()


def test_describe_lists_current_and_future_dirs(lm: LogManager) -> None:
    lg = make_log(lm)
    engine = slow_engine(lm)
    try:
        dest = other_dir(lm, lg)
        engine.alter_replica_log_dir(TP, dest)
        wait_for(lambda: engine.status(TP).bytes_copied > 0)
        (info,) = engine.describe([TP])
        assert info.current_dir == lg.log_dir and info.future_dir == dest
        assert info.future_offset_lag > 0 and info.state in (MoveState.COPYING,)
        d = info.to_dict()
        assert d["state"] == "Copying" and d["futureDir"] == dest and d["bytesTotal"] > 0
        assert d["copyMethod"] in ("copy_file_range", "sendfile", "buffered")
        assert [i.partition for i in engine.describe()] == [0]
    finally:
        engine.shutdown()


def test_shutdown_interrupts_and_the_next_start_resumes(tmp_path: Path) -> None:
    lm = LogManager([str(tmp_path / f"d{i}") for i in range(3)], broker_id=1, default_config=CONFIG)
    lm.startup()
    lg = make_log(lm)
    before = read_values(lg)
    engine = slow_engine(lm)
    dest = other_dir(lm, lg)
    engine.alter_replica_log_dir(TP, dest)
    wait_for(lambda: engine.status(TP).bytes_copied > 10_000)
    engine.shutdown()
    assert engine.status(TP).state is MoveState.INTERRUPTED
    assert any(n.endswith("-future") for n in folders(dest))  # kept for the resume
    lm.shutdown()
    lm2 = LogManager(lm.dirs, broker_id=1, default_config=CONFIG)
    e2 = ReplicaMoveEngine(lm2)
    try:
        report = start_storage(lm2, e2)
        assert report.resumable_moves == {TP: dest}
        assert any("resuming the move" in a for a in report.actions)
        assert e2.wait(TP, 30).state is MoveState.DONE
        assert read_values(lm2.get_log(TP)) == before  # type: ignore[arg-type]
        e2.run_deletions()
        assert all_folders(lm2) == [f"{os.path.basename(dest)}/moves-0"]
    finally:
        e2.shutdown()
        lm2.shutdown()


def test_callers_holding_the_old_log_are_redirected(
    lm: LogManager, engine: ReplicaMoveEngine
) -> None:
    old = make_log(lm, nbytes=50_000)
    engine.alter_replica_log_dir(TP, other_dir(lm, old))
    engine.wait(TP, 30)
    new = lm.get_log(TP)
    assert new is not None and old.successor is new
    info = old.append_as_leader(fill_batch(), 5)
    assert info.first_offset == new.log_end_offset - 1
    assert old.read(info.first_offset, 1000).data == new.read(info.first_offset, 1000).data
    assert old.update_high_watermark(new.log_end_offset) == new.high_watermark
    old.roll()
    old.flush()
    assert new.epochs.latest_epoch == 5


def fill_batch() -> bytes:
    from jbod_broker.storage.records import build_batch

    return build_batch([(None, b"after the move")])


def test_appends_while_moving_are_all_kept(lm: LogManager) -> None:
    make_log(lm, nbytes=300_000)
    appenders = [
        Appender("live", lambda: lm.get_log(TP), records_per_batch=2, pause=0.001),
    ]
    engine = slow_engine(lm, rate=5_000_000)
    try:
        for a in appenders:
            a.start()
        for i in range(3):
            dest = lm.dirs[(lm.dirs.index(lm.get_log(TP).log_dir) + 1 + i) % 3]  # type: ignore[union-attr]
            engine.alter_replica_log_dir(TP, dest)
            assert engine.wait(TP, 30).state is MoveState.DONE
        appenders[0].stop()  # first: an append in flight when acked is read would count as extra
        acked = appenders[0].acked
        values = [v for v in read_values(lm.get_log(TP)) if v.startswith(b"live:")]  # type: ignore[arg-type]
        check_sequence(values, "live", acked)
    finally:
        engine.shutdown()


def test_retention_during_a_move_restarts_from_the_new_log_start(lm: LogManager) -> None:
    lg = make_log(lm, nbytes=600_000)
    hold = threading.Event()
    reached = threading.Event()

    def hook(point: str, tp: TopicPartition) -> None:
        if point == "mid_copy" and not hold.is_set():
            reached.set()
            hold.wait(5)

    engine = ReplicaMoveEngine(lm, hooks=MoveHooks(callback=hook))
    try:
        engine.alter_replica_log_dir(TP, other_dir(lm, lg))
        assert reached.wait(5)
        lg.config = LogConfig(segment_bytes=64 * 1024, retention_bytes=200_000)
        deleted = lg.delete_old_segments()
        assert deleted > 0
        expected = read_values(lg)
        hold.set()
        assert engine.wait(TP, 30).state is MoveState.DONE
        new = lm.get_log(TP)
        assert new is not None and new.log_start_offset == lg.log_start_offset
        assert read_values(new) == expected
        assert new.size <= lg.size + 70_000  # old segments were not carried over
    finally:
        hold.set()
        engine.shutdown()


def test_hooks_parse_from_the_environment() -> None:
    h = MoveHooks.from_env(
        {"JBOD_MOVE_CRASH_AT": "after_delete_rename@2", "JBOD_MOVE_PAUSE_AT": "after_lock:0.01"}
    )
    assert h.active
    start = time.monotonic()
    h.reach("after_lock", TP)
    assert time.monotonic() - start >= 0.01
    h.reach("between_renames", TP)  # first time: no crash (crash at the second)
    with pytest.raises(ValueError, match="unknown move hook"):
        MoveHooks.from_env({"JBOD_MOVE_CRASH_AT": "sometime"})
    assert not MoveHooks.from_env({}).active


def test_copied_segments_keep_their_indexes_and_timestamps(
    lm: LogManager, engine: ReplicaMoveEngine
) -> None:
    from jbod_broker.storage.records import build_batch

    lg = lm.get_or_create_log(TP, is_new=True)
    base_ts = 1_700_000_000_000
    for i in range(400):
        batch = build_batch([(None, b"t" * 700)] * 3, base_timestamp=base_ts + i * 1000)
        lg.append_as_leader(batch, 1)
    lg.roll()
    old = [
        (
            s.base_offset,
            s.next_offset,
            s.size,
            s.max_timestamp,
            s.index.entries,
            s.time_index.entries,
        )
        for s in lg.segments
    ]
    probes = [lg.segments[1].base_offset + k for k in (0, 7, 40)]
    positions = [lg.segments[1].index.lookup(p) for p in probes]
    engine.alter_replica_log_dir(TP, other_dir(lm, lg))
    assert engine.wait(TP, 30).state is MoveState.DONE
    new = lm.get_log(TP)
    assert new is not None
    got = [
        (
            s.base_offset,
            s.next_offset,
            s.size,
            s.max_timestamp,
            s.index.entries,
            s.time_index.entries,
        )
        for s in new.segments
    ]
    assert got == old  # whole indexes: time-based retention sees the same timestamps
    assert [new.segments[1].index.lookup(p) for p in probes] == positions


def test_deleting_the_replica_cancels_its_move(lm: LogManager) -> None:
    """StopReplica(delete) during a move: the move ends Cancelled, no directory is blamed,
    nothing is left on disk."""
    lg = make_log(lm)
    engine = slow_engine(lm, rate=400_000)
    try:
        engine.alter_replica_log_dir(TP, other_dir(lm, lg))
        wait_for(lambda: engine.status(TP).bytes_copied > 30_000)
        lm.delete_log(TP)
        info = engine.wait(TP, 30)
        assert info.state is MoveState.CANCELLED, info
        assert info.error is not None and "during the move" in info.error
        assert lm.offline_dirs() == {}
        engine.run_deletions()
        assert all_folders(lm) == []
    finally:
        engine.shutdown()
