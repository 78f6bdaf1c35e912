"""Regression tests named after the log-dir move bugs Kafka shipped (docs: known-bugs.md).

A move is held at a named point with a hook callback where a test needs to act in a window;
"crash" states are taken by copying the directories while the move is held there (every lock
is held, so the copy is what a SIGKILL would leave; the integration tier kills for real).
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker.move import AlterResult, MoveHooks, MoveState, ReplicaMoveEngine, start_storage
from jbod_broker.storage.checkpoints import parse_epochs
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import LEADER_EPOCH_CHECKPOINT, TopicPartition
from jbod_broker.storage.records import build_batch
from tests.move_helpers import fill, read_values
from tests.waiting import wait_for

TP = TopicPartition("bugs", 0)
SMALL = LogConfig(segment_bytes=32 * 1024)


def new_lm(dirs: list[str], config: LogConfig = SMALL) -> LogManager:
    lm = LogManager(dirs, broker_id=1, default_config=config)
    lm.startup()
    return lm


@pytest.fixture
def dirs(tmp_path: Path) -> list[str]:
    return [str(tmp_path / f"disk{i}") for i in range(3)]


@pytest.fixture
def lm(dirs: list[str]) -> Iterator[LogManager]:
    m = new_lm(dirs)
    yield m
    m.shutdown()


class Gate:
    """A hook callback that holds a move at one point until released."""

    def __init__(self, point: str, *, times: int = 1) -> None:
        self.point = point
        self.reached = threading.Event()
        self.release = threading.Event()
        self._left = times

    def __call__(self, point: str, tp: TopicPartition) -> None:
        if point == self.point and self._left > 0:
            self._left -= 1
            self.reached.set()
            assert self.release.wait(20), "gate never released"

    def hooks(self) -> MoveHooks:
        return MoveHooks(callback=self)


def records(n: int, start: int = 0, size: int = 300) -> bytes:
    return build_batch([(None, f"r{start + i}:".encode() + b"p" * size) for i in range(n)])


def make_log(lm: LogManager, nbytes: int = 200_000, epoch: int = 1) -> Log:
    lg = lm.get_or_create_log(TP, is_new=True)
    fill(lg, nbytes, batch_bytes=1500, epoch=epoch)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def dest_of(lm: LogManager, lg: Log) -> str:
    return next(d for d in lm.dirs if d != lg.log_dir)


def snapshot(dirs: list[str], into: Path) -> list[str]:
    out = []
    for d in dirs:
        target = into / os.path.basename(d)
        shutil.copytree(d, target, symlinks=True)
        out.append(str(target))
    return out


def names(d: str) -> list[str]:
    return sorted(os.listdir(d))


def replica_folders(d: str) -> list[str]:
    return [n for n in names(d) if os.path.isdir(os.path.join(d, n))]


# -- KAFKA-8002: compare offsets, not segment layouts -------------------------------------------


def test_kafka_8002_future_with_other_segment_bases_still_completes(lm: LogManager) -> None:
    lg = make_log(lm, 300_000)
    dest = dest_of(lm, lg)
    # A future copy (say from before a restart) whose segments roll at other offsets than the
    # source's: one big segment holding what the source keeps in several.
    future = lm.create_future_log(TP, dest)
    future.config = LogConfig(segment_bytes=1024 * 1024)
    half = lg.log_end_offset // 2
    offset = 0
    while offset < half:
        data = lg.read(offset, 64 * 1024).data
        future.append_as_follower(data)
        offset = future.log_end_offset
    assert {s.base_offset for s in future.segments} != {s.base_offset for s in lg.segments}
    engine = ReplicaMoveEngine(lm)
    try:
        assert engine.alter_replica_log_dir(TP, dest) is AlterResult.RESUMED
        assert engine.wait(TP, 30).state is MoveState.DONE
        new = lm.get_log(TP)
        assert new is not None and read_values(new) == read_values(lg)
        assert [s.base_offset for s in new.segments] != [s.base_offset for s in lg.segments]
    finally:
        engine.shutdown()


def test_kafka_8002_source_rolling_during_the_move(lm: LogManager) -> None:
    lg = make_log(lm, 200_000)
    gate = Gate("mid_copy", times=3)
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks())
    try:
        engine.alter_replica_log_dir(TP, dest_of(lm, lg))
        rolls = 0
        for i in range(3):
            # The copy may finish before a third pause (the tail is copied in the swap).
            if not gate.reached.wait(10):
                break
            gate.reached.clear()
            lg.append_as_leader(records(3, i * 3), 1)
            lg.roll()  # segments at bases the copy did not plan for
            rolls += 1
            gate.release.set()
        assert rolls >= 1, engine.status(TP)
        assert engine.wait(TP, 30).state is MoveState.DONE
        assert read_values(lm.get_log(TP)) == read_values(lg)  # type: ignore[arg-type]
    finally:
        gate.release.set()
        engine.shutdown()


# -- KAFKA-9087: re-sending the same request while the move runs changes nothing ----------------


def test_kafka_9087_resending_the_same_move_changes_nothing(lm: LogManager) -> None:
    lg = make_log(lm, 300_000)
    dest = dest_of(lm, lg)
    engine = ReplicaMoveEngine(lm, throttle_rate=300_000)
    try:
        assert engine.alter_replica_log_dir(TP, dest) is AlterResult.STARTED
        wait_for(lambda: engine.status(TP).bytes_copied > 40_000)
        future = lm.get_future_log(TP)
        assert future is not None
        path, copied = future.dir_path, engine.status(TP).bytes_copied
        for _ in range(5):
            assert engine.alter_replica_log_dir(TP, dest) is AlterResult.IN_PROGRESS
        assert lm.get_future_log(TP) is future and future.dir_path == path
        assert engine.status(TP).bytes_copied >= copied  # never reset ("offset mismatch")
        engine.set_throttle_rate(None)
        assert engine.wait(TP, 30).state is MoveState.DONE
        assert read_values(lm.get_log(TP)) == read_values(lg)  # type: ignore[arg-type]
    finally:
        engine.shutdown()


# -- KAFKA-9654: leader epoch changes and truncation adjust the copy ----------------------------


@pytest.mark.parametrize("where", ["sealed", "tail"])
def test_kafka_9654_truncation_and_new_epoch_during_the_move(lm: LogManager, where: str) -> None:
    """A new leader truncates the source and writes other, longer data with a new epoch while
    the copy runs: in the sealed part (the future has not reached it yet) or in the active
    segment the future has partly copied (the future holds batches the source replaced)."""
    big = LogConfig(segment_bytes=(32 if where == "sealed" else 1024) * 1024)
    lg = lm.get_or_create_log(TP, is_new=True, config=big)
    fill(lg, 150_000, batch_bytes=1500, epoch=3)
    lg.update_high_watermark(lg.log_end_offset)
    leo_before = lg.log_end_offset
    gate = Gate("mid_copy", times=1000)
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks(), throttle_rate=400_000)
    try:
        engine.alter_replica_log_dir(TP, dest_of(lm, lg))
        while True:
            assert gate.reached.wait(10), engine.status(TP)
            gate.reached.clear()
            future = lm.get_future_log(TP)
            assert future is not None
            if where == "sealed" or future.log_end_offset > leo_before // 2:
                break
            gate.release.set()
            gate.release.clear()
        cut = leo_before - 20 if where == "sealed" else future.log_end_offset - 10
        assert where == "sealed" or cut < future.log_end_offset
        lg.truncate_to(cut)
        for i in range(60):
            lg.append_as_leader(records(2, 10_000 + i * 2), 4)
        lg.update_high_watermark(lg.log_end_offset)
        assert lg.log_end_offset > leo_before
        gate._left = 0
        gate.release.set()
        info = engine.wait(TP, 30)
        assert info.state is MoveState.DONE, info.error
        new = lm.get_log(TP)
        assert new is not None
        assert read_values(new) == read_values(lg)
        assert new.epochs.entries() == lg.epochs.entries() == [(3, 0), (4, cut)]
    finally:
        gate.release.set()
        engine.shutdown()


# -- KAFKA-15608 / KAFKA-9263: every per-replica checkpoint moves with the data ------------------


def test_kafka_15608_leader_epoch_checkpoint_moves_with_the_data(dirs: list[str]) -> None:
    lm = new_lm(dirs)
    lg = make_log(lm, 60_000, epoch=1)
    for epoch in (3, 7):
        lg.append_as_leader(records(4), epoch)
    expected = lg.epochs.entries()
    assert [e for e, _ in expected] == [1, 3, 7]
    engine = ReplicaMoveEngine(lm)
    try:
        engine.alter_replica_log_dir(TP, dest_of(lm, lg))
        assert engine.wait(TP, 30).state is MoveState.DONE
    finally:
        engine.shutdown()
    new = lm.get_log(TP)
    assert new is not None and new.epochs.entries() == expected
    with open(os.path.join(new.dir_path, LEADER_EPOCH_CHECKPOINT), "rb") as f:
        assert parse_epochs(f.read(), "checkpoint") == expected
    for epoch in (0, 1, 3, 5, 7):
        leo = new.log_end_offset
        assert new.epochs.end_offset_for(epoch, leo) == lg.epochs.end_offset_for(epoch, leo)
    lm.shutdown()
    again = new_lm(dirs)
    try:
        assert again.get_log(TP).epochs.entries() == expected  # type: ignore[union-attr]
    finally:
        again.shutdown()


def test_kafka_9263_offsets_move_with_the_data_even_across_a_crash(
    lm: LogManager, tmp_path: Path
) -> None:
    lg = make_log(lm, 120_000)
    lg.advance_log_start_offset(lg.log_end_offset // 3)
    lg.update_high_watermark(lg.log_end_offset - 7)
    lso, hw = lg.log_start_offset, lg.high_watermark
    gate = Gate("after_swap")
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks())
    try:
        engine.alter_replica_log_dir(TP, dest_of(lm, lg))
        assert gate.reached.wait(10)
        crashed = snapshot(lm.dirs, tmp_path / "crash")  # no clean shutdown, no periodic checkpoint
        gate.release.set()
        assert engine.wait(TP, 30).state is MoveState.DONE
        new = lm.get_log(TP)
        assert new is not None and (new.log_start_offset, new.high_watermark) == (lso, hw)
        assert new.recovery_point == new.log_end_offset
        # A caller still holding the old log updates the high watermark of the new one.
        assert lg.update_high_watermark(hw + 3) == hw + 3 and new.high_watermark == hw + 3
    finally:
        gate.release.set()
        engine.shutdown()
    after = new_lm(crashed)
    try:
        got = after.get_log(TP)
        assert got is not None and (got.log_start_offset, got.high_watermark) == (lso, hw)
    finally:
        after.shutdown()


# -- KAFKA-16082: a crash during the swap plus an offline directory ------------------------------


def _crash_at(lm: LogManager, point: str, into: Path) -> tuple[list[str], list[bytes], str, str]:
    lg = make_log(lm, 150_000)
    values = read_values(lg)
    src, dest = lg.log_dir, dest_of(lm, lg)
    gate = Gate(point)
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks())
    try:
        engine.alter_replica_log_dir(TP, dest)
        assert gate.reached.wait(10)
        crashed = snapshot(lm.dirs, into)
    finally:
        gate.release.set()
        engine.shutdown()
    return crashed, values, crashed[lm.dirs.index(src)], crashed[lm.dirs.index(dest)]


def _break(d: str) -> str:
    """Make a log dir unusable at start-up (a file where the directory should be)."""
    aside = d + ".aside"
    os.rename(d, aside)
    Path(d).write_text("not a directory")
    return aside


def _repair(d: str, aside: str) -> None:
    os.unlink(d)
    os.rename(aside, d)


def test_kafka_16082_waiting_for_the_last_catch_up_and_an_offline_dir_resumes(
    lm: LogManager, tmp_path: Path
) -> None:
    crashed, values, src, dest = _crash_at(lm, "after_lock", tmp_path / "crash")
    third = next(d for d in crashed if d not in (src, dest))
    aside = _break(third)
    m = LogManager(crashed, broker_id=1, default_config=SMALL)
    e = ReplicaMoveEngine(m)
    try:
        report = start_storage(m, e)
        assert third in m.offline_dirs() and src not in m.offline_dirs()
        assert dest not in m.offline_dirs()  # a healthy directory stays healthy
        assert report.resumable_moves == {TP: dest}  # resumed, never renamed over the source
        assert e.wait(TP, 30).state is MoveState.DONE
        assert read_values(m.get_log(TP)) == values  # type: ignore[arg-type]
    finally:
        e.shutdown()
        m.shutdown()
        _repair(third, aside)


def test_kafka_16082_only_the_future_while_a_dir_is_bad_is_left_alone(
    lm: LogManager, tmp_path: Path
) -> None:
    crashed, values, src, dest = _crash_at(lm, "after_lock", tmp_path / "crash")
    aside = _break(src)  # the source's disk is the bad one: only the future can be seen
    m = LogManager(crashed, broker_id=1, default_config=SMALL)
    e = ReplicaMoveEngine(m)
    future_names = [n for n in replica_folders(dest) if n.endswith("-future")]
    try:
        report = start_storage(m, e)
        assert src in m.offline_dirs() and dest not in m.offline_dirs()
        assert TP in m.offline_replicas() and m.get_log(TP) is None
        assert replica_folders(dest) == future_names  # not renamed, not deleted
        assert any("future left in place" in a for a in report.actions)
    finally:
        e.shutdown()
        m.shutdown()
    _repair(src, aside)
    m2 = LogManager(crashed, broker_id=1, default_config=SMALL)
    e2 = ReplicaMoveEngine(m2)
    try:
        assert start_storage(m2, e2).resumable_moves == {TP: dest}
        assert e2.wait(TP, 30).state is MoveState.DONE
        assert read_values(m2.get_log(TP)) == values  # type: ignore[arg-type]
    finally:
        e2.shutdown()
        m2.shutdown()


# -- KAFKA-14824: a failed move drops its copy and is not retried -------------------------------


def test_kafka_14824_source_failure_drops_the_future_and_is_not_retried(
    lm: LogManager,
) -> None:
    lg = make_log(lm, 200_000)
    src, dest = lg.log_dir, dest_of(lm, lg)
    third = next(d for d in lm.dirs if d not in (src, dest))
    other_tp = TopicPartition("bugs", 1)
    lm.set_preferred_dir(other_tp, dest)
    other = lm.get_or_create_log(other_tp, is_new=True)
    fill(other, 200_000, batch_bytes=1500)
    other_values = read_values(other)
    gate = Gate("mid_copy")
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks(), threads=2)
    ends: list[tuple[TopicPartition, MoveState]] = []
    engine.add_end_listener(lambda tp, state: ends.append((tp, state)))
    try:
        engine.alter_replica_log_dir(TP, dest)
        assert gate.reached.wait(10)
        engine.alter_replica_log_dir(other_tp, third)  # a move that does not involve src
        lm.channel.mark_offline(src, "injected I/O error")
        gate.release.set()
        info = engine.wait(TP, 30)
        assert engine.wait(other_tp, 30).state is MoveState.DONE  # other moves go on
        moved = lm.get_log(other_tp)
        assert moved is not None and moved.log_dir == third
        assert read_values(moved) == other_values
        assert info.state is MoveState.FAILED
        assert info.error is not None and f"source log dir {src}" in info.error
        assert "injected I/O error" in info.error
        engine.run_deletions()
        assert replica_folders(dest) == []  # no copy left behind on the live destination
        # Not retried: a move asked for after the failure has been served (the workers take
        # the queue in order), and the failed one ended once and left nothing.
        engine.alter_replica_log_dir(other_tp, dest)
        assert engine.wait(other_tp, 30).state is MoveState.DONE
        assert [s for tp, s in ends if tp == TP] == [MoveState.FAILED]
        assert engine.status(TP).state is MoveState.FAILED
        probe = lm.get_log(other_tp)
        assert probe is not None and replica_folders(dest) == [os.path.basename(probe.dir_path)]
        assert all(n.endswith("-future") is False for n in replica_folders(third))
        assert lm.get_future_log(TP) is None
    finally:
        gate.release.set()
        engine.shutdown()


def test_kafka_14824_destination_failure_keeps_the_source_whole(lm: LogManager) -> None:
    lg = make_log(lm, 200_000)
    values = read_values(lg)
    dest = dest_of(lm, lg)
    gate = Gate("mid_copy")
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks())
    try:
        engine.alter_replica_log_dir(TP, dest)
        assert gate.reached.wait(10)
        lm.channel.mark_offline(dest, "injected I/O error")
        gate.release.set()
        info = engine.wait(TP, 30)
        assert info.state is MoveState.FAILED
        assert info.error is not None and f"destination log dir {dest}" in info.error
        assert lm.get_log(TP) is lg and read_values(lg) == values
        lg.append_as_leader(records(2), 1)  # the partition still takes appends
    finally:
        gate.release.set()
        engine.shutdown()


# -- others from the list ------------------------------------------------------------------------


def test_kafka_6975_log_start_offset_inside_a_batch(lm: LogManager) -> None:
    lg = lm.get_or_create_log(TP, is_new=True)
    for i in range(200):
        lg.append_as_leader(records(5, i * 5), 1)
    lg.update_high_watermark(lg.log_end_offset)
    lg.advance_log_start_offset(502)  # inside the batch holding 500..504
    engine = ReplicaMoveEngine(lm)
    try:
        engine.alter_replica_log_dir(TP, dest_of(lm, lg))
        assert engine.wait(TP, 30).state is MoveState.DONE
    finally:
        engine.shutdown()
    new = lm.get_log(TP)
    assert new is not None and new.log_start_offset == 502
    assert read_values(new) == read_values(lg)
    assert read_values(new)[0].startswith(b"r502:")


def test_kafka_9594_appends_during_the_swap_wait_for_it(lm: LogManager) -> None:
    lg = make_log(lm, 80_000)
    gate = Gate("after_lock")
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks())
    try:
        engine.alter_replica_log_dir(TP, dest_of(lm, lg))
        assert gate.reached.wait(10)
        done = threading.Event()

        def append() -> None:
            lg.append_as_leader(records(1, 424242), 1)
            done.set()

        t = threading.Thread(target=append)
        t.start()
        assert not done.wait(0.2)  # the append lock is the swap's
        gate.release.set()
        t.join(10)
        assert done.is_set() and engine.wait(TP, 30).state is MoveState.DONE
        new = lm.get_log(TP)
        assert new is not None and read_values(new)[-1].startswith(b"r424242:")
    finally:
        gate.release.set()
        engine.shutdown()


def test_kafka_6949_describe_during_the_swap_sees_a_consistent_state(lm: LogManager) -> None:
    lg = make_log(lm, 80_000)
    dest = dest_of(lm, lg)
    gate = Gate("between_renames")
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks())
    try:
        engine.alter_replica_log_dir(TP, dest)
        assert gate.reached.wait(10)
        seen: list[object] = []
        t = threading.Thread(target=lambda: seen.append(engine.describe([TP])[0]))
        t.start()
        time.sleep(0.1)
        gate.release.set()
        t.join(10)
        (info,) = seen
        assert info.current_dir == dest and info.future_dir is None  # type: ignore[attr-defined]
        assert lm.describe_log_dirs()  # the manager's describe works too
    finally:
        gate.release.set()
        engine.shutdown()


def test_kafka_16424_retention_through_the_old_log_after_the_swap(lm: LogManager) -> None:
    lg = make_log(lm, 200_000)
    engine = ReplicaMoveEngine(lm)
    try:
        engine.alter_replica_log_dir(TP, dest_of(lm, lg))
        assert engine.wait(TP, 30).state is MoveState.DONE
    finally:
        engine.shutdown()
    new = lm.get_log(TP)
    assert new is not None
    lg.config = new.config = LogConfig(segment_bytes=32 * 1024, retention_bytes=60_000)
    assert lg.delete_old_segments() > 0  # redirected to the new log, in the new folder
    assert new.log_start_offset > 0 and all(
        os.path.dirname(s.log_path) == new.dir_path for s in new.segments
    )


def test_cruise_control_2371_shutdown_stops_moves_in_progress(lm: LogManager) -> None:
    lg = make_log(lm, 300_000)
    engine = ReplicaMoveEngine(lm, throttle_rate=100_000)
    engine.alter_replica_log_dir(TP, dest_of(lm, lg))
    wait_for(lambda: engine.status(TP).bytes_copied > 0)
    start = time.monotonic()
    engine.shutdown()
    assert time.monotonic() - start < 2
    assert engine.status(TP).state is MoveState.INTERRUPTED
    assert lm.get_log(TP) is lg


# -- KAFKA-15391: a flush in flight while the swap renames the folder ---------------------------


def test_kafka_15391_flush_racing_the_swap_renames(
    lm: LogManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush whose fsyncs are still running when the move renames the replica's folder.

    Kafka's flush looked files up by path after the rename and took the whole directory
    offline. Ours fsyncs descriptors it duplicated under the lock, so the rename cannot break
    it: the flush ends without an error, no directory goes offline, nothing is lost.
    """
    lg = make_log(lm, 120_000)
    lg.append_as_leader(records(5, 777), 1)  # not yet flushed
    dest = dest_of(lm, lg)
    in_fsync = threading.Event()
    swapped = threading.Event()
    real_fsync = os.fsync
    flusher: list[threading.Thread] = []

    def held_fsync(fd: int) -> None:
        if flusher and threading.current_thread() is flusher[0]:
            in_fsync.set()
            assert swapped.wait(20), "the swap never happened"
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", held_fsync)
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            lg.flush()
        except BaseException as e:  # reported below
            errors.append(e)

    flusher.append(threading.Thread(target=flush))
    flusher[0].start()
    assert in_fsync.wait(10), "the flush never reached its fsyncs"
    engine = ReplicaMoveEngine(lm)
    try:
        engine.alter_replica_log_dir(TP, dest)
        assert engine.wait(TP, 30).state is MoveState.DONE
        swapped.set()
        flusher[0].join(20)
    finally:
        swapped.set()
        engine.shutdown()
    assert not errors, errors
    assert lm.offline_dirs() == {}
    new = lm.get_log(TP)
    assert new is not None and new.log_dir == dest
    assert read_values(new)[-1].startswith(b"r781:")


# -- KAFKA-9750: a leadership change racing the move's completion -------------------------------


@pytest.mark.parametrize("point", ["after_lock", "between_renames", "after_swap"])
def test_kafka_9750_leader_change_racing_the_swap(lm: LogManager, point: str) -> None:
    """What LeaderAndIsr does to a replica (truncate to the new leader's epoch end, then take
    its batches with the new epoch) arrives while the swap runs, through a reference to the
    log taken before the swap. It waits for the swap or lands on the new log; either way the
    moved replica holds exactly the new leader's history."""
    lg = make_log(lm, 80_000, epoch=2)
    leo = lg.log_end_offset
    dest = dest_of(lm, lg)
    gate = Gate(point)
    engine = ReplicaMoveEngine(lm, hooks=gate.hooks())
    done = threading.Event()
    errors: list[BaseException] = []

    def become_follower() -> None:
        try:
            lg.truncate_to(leo - 7)
            for i in range(5):
                batch = bytearray(records(1, 50_000 + i))
                # A follower appends the leader's batches as they are: offsets and epoch set.
                struct.pack_into(">qii", batch, 0, leo - 7 + i, len(batch) - 12, 5)
                lg.append_as_follower(bytes(batch))
        except BaseException as e:  # reported below
            errors.append(e)
        finally:
            done.set()

    try:
        engine.alter_replica_log_dir(TP, dest)
        assert gate.reached.wait(10)
        t = threading.Thread(target=become_follower)
        t.start()
        time.sleep(0.05)
        gate.release.set()
        t.join(20)
        assert done.is_set() and not errors, errors
        assert engine.wait(TP, 30).state is MoveState.DONE
    finally:
        gate.release.set()
        engine.shutdown()
    new = lm.get_log(TP)
    assert new is not None and new.log_dir == dest
    assert new.log_end_offset == leo - 2
    values = read_values(new)
    assert [v.split(b":")[0] for v in values[-5:]] == [b"r%d" % (50_000 + i) for i in range(5)]
    assert new.epochs.entries() == [(2, 0), (5, leo - 7)]
    assert lm.offline_dirs() == {}
