"""Start-up recovery of interrupted moves, exactly as KIP-113 lists the cases.

Each "crash" is a copy of the directories taken while a move is held at a named point with
every lock it needs, i.e. what a SIGKILL there leaves on disk (the integration tier kills real
processes). Directories are then opened by a new log manager through ``start_storage``.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from jbod_broker.move import MoveHooks, MoveState, ReplicaMoveEngine, start_storage
from jbod_broker.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from jbod_broker.storage.log import LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from tests.move_helpers import fill, read_values

TP = TopicPartition("rec", 1)
CONFIG = LogConfig(segment_bytes=32 * 1024)


def folders(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))


def crash_at(tmp_path: Path, point: str) -> tuple[list[str], list[bytes], str, str, int, int]:
    """Move TP from disk0 to disk1 and copy the directories when the move reaches ``point``."""
    dirs = [str(tmp_path / "live" / f"disk{i}") for i in range(3)]
    lm = LogManager(dirs, broker_id=1, default_config=CONFIG)
    lm.startup()
    lm.set_preferred_dir(TP, dirs[0])
    lg = lm.get_or_create_log(TP, is_new=True)
    fill(lg, 150_000, batch_bytes=1200)
    lg.update_high_watermark(lg.log_end_offset - 5)
    lg.advance_log_start_offset(40)
    lm.checkpoint()
    values, lso, hw = read_values(lg), lg.log_start_offset, lg.high_watermark
    reached, release = threading.Event(), threading.Event()

    def hold(p: str, tp: TopicPartition) -> None:
        if p == point and not reached.is_set():
            reached.set()
            release.wait(20)

    engine = ReplicaMoveEngine(lm, hooks=MoveHooks(callback=hold))
    crashed = [str(tmp_path / "crash" / f"disk{i}") for i in range(3)]
    try:
        engine.alter_replica_log_dir(TP, dirs[1])
        assert reached.wait(10)
        for d, c in zip(dirs, crashed, strict=True):
            shutil.copytree(d, c)
    finally:
        release.set()
        engine.shutdown()
        lm.shutdown()
    return crashed, values, crashed[0], crashed[1], lso, hw


def restart(dirs: list[str]) -> tuple[LogManager, ReplicaMoveEngine]:
    lm = LogManager(dirs, broker_id=1, default_config=CONFIG)
    return lm, ReplicaMoveEngine(lm)


@pytest.mark.parametrize("point", ["mid_copy", "after_lock", "before_renames"])
def test_source_and_future_present_resume_the_copy(tmp_path: Path, point: str) -> None:
    dirs, values, src, dest, lso, hw = crash_at(tmp_path, point)
    assert folders(src) == ["rec-1"] and folders(dest)[0].endswith("-future")
    lm, engine = restart(dirs)
    try:
        report = start_storage(lm, engine)
        assert report.resumable_moves == {TP: dest}
        assert engine.wait(TP, 30).state is MoveState.DONE
        lg = lm.get_log(TP)
        assert lg is not None and lg.log_dir == dest
        assert read_values(lg) == values and (lg.log_start_offset, lg.high_watermark) == (lso, hw)
        engine.run_deletions()
        assert folders(src) == [] and folders(dest) == ["rec-1"]
    finally:
        engine.shutdown()
        lm.shutdown()


@pytest.mark.parametrize("point", ["between_renames", "after_renames", "after_swap"])
def test_only_the_future_and_no_bad_dir_is_renamed_into_place(tmp_path: Path, point: str) -> None:
    dirs, values, src, dest, lso, hw = crash_at(tmp_path, point)
    assert len(folders(src)) == 1 and folders(src)[0].endswith("-delete")
    lm, engine = restart(dirs)
    try:
        report = start_storage(lm, engine)
        assert report.resumable_moves == {}
        if point == "between_renames":
            assert any("renamed the finished future copy into place" in a for a in report.actions)
        lg = lm.get_log(TP)
        assert lg is not None and lg.log_dir == dest and not lg.is_future
        assert read_values(lg) == values
        # The destination's checkpoints were written before the renames (KAFKA-9263).
        assert (lg.log_start_offset, lg.high_watermark) == (lso, hw)
        assert folders(src) == [] and folders(dest) == ["rec-1"]  # -delete went at start-up
    finally:
        engine.shutdown()
        lm.shutdown()


def test_only_the_future_with_a_bad_dir_is_left_alone(tmp_path: Path) -> None:
    dirs, _values, src, dest, _lso, _hw = crash_at(tmp_path, "between_renames")
    third = dirs[2]
    shutil.rmtree(third)
    Path(third).write_text("a dead disk")
    future = folders(dest)
    lm, engine = restart(dirs)
    try:
        report = start_storage(lm, engine)
        assert third in lm.offline_dirs() and TP in lm.offline_replicas()
        assert lm.get_log(TP) is None and folders(dest) == future
        assert any("replica offline, future left in place" in a for a in report.actions)
        assert folders(src) == []  # the source was already -delete: deleted as KIP-113 says
    finally:
        engine.shutdown()
        lm.shutdown()


def test_delete_folders_are_deleted_at_start(tmp_path: Path) -> None:
    dirs = [str(tmp_path / f"disk{i}") for i in range(2)]
    lm = LogManager(dirs, broker_id=1)
    lm.startup()
    lg = lm.get_or_create_log(TP, is_new=True)
    fill(lg, 10_000)
    lm.delete_log(TP)
    lm.shutdown()
    assert any(n.endswith("-delete") for d in dirs for n in folders(d))
    lm2, engine = restart(dirs)
    try:
        start_storage(lm2, engine)
        assert [n for d in dirs for n in folders(d)] == []
    finally:
        engine.shutdown()
        lm2.shutdown()


def _two_current_copies(tmp_path: Path, *, vouch: bool) -> tuple[list[str], list[bytes]]:
    """disk0 holds the replica and its checkpoints; disk1 holds a longer stray copy of it."""
    dirs = [str(tmp_path / f"disk{i}") for i in range(2)]
    lm = LogManager(dirs, broker_id=1, default_config=CONFIG)
    lm.startup()
    lm.set_preferred_dir(TP, dirs[0])
    lg = lm.get_or_create_log(TP, is_new=True)
    fill(lg, 40_000, batch_bytes=1000)
    kept = read_values(lg)
    lm.shutdown()
    shutil.copytree(os.path.join(dirs[0], "rec-1"), os.path.join(dirs[1], "rec-1"))
    other = LogManager([dirs[1]], broker_id=1, default_config=CONFIG)
    other.startup()
    longer = other.get_log(TP)
    assert longer is not None
    fill(longer, 20_000, batch_bytes=1000)
    other.shutdown()
    # Only disk0's checkpoints name the replica (as after a crash mid-way through a manual
    # copy); disk1's do not.
    for name in (
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
    ):
        os.unlink(os.path.join(dirs[1], name))
        if not vouch:
            os.unlink(os.path.join(dirs[0], name))
    return dirs, kept


def test_two_current_copies_keep_the_one_the_checkpoints_vouch_for(tmp_path: Path) -> None:
    dirs, kept = _two_current_copies(tmp_path, vouch=True)
    lm, engine = restart(dirs)
    try:
        report = start_storage(lm, engine)
        lg = lm.get_log(TP)
        assert lg is not None and lg.log_dir == dirs[0] and read_values(lg) == kept
        (stray,) = folders(dirs[1])
        assert stray.endswith("-stray")  # quarantined, not deleted
        assert any(
            "quarantined rec-1" in a and "named by its recovery checkpoint" in a
            for a in report.actions
        )
    finally:
        engine.shutdown()
        lm.shutdown()


def test_two_current_copies_without_checkpoints_keep_the_longer(tmp_path: Path) -> None:
    dirs, kept = _two_current_copies(tmp_path, vouch=False)
    lm, engine = restart(dirs)
    try:
        report = start_storage(lm, engine)
        lg = lm.get_log(TP)
        assert lg is not None and lg.log_dir == dirs[1] and len(read_values(lg)) > len(kept)
        assert folders(dirs[0])[0].endswith("-stray")
        assert any("kept: the longer log" in a for a in report.actions)
    finally:
        engine.shutdown()
        lm.shutdown()
