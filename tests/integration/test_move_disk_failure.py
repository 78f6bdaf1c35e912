"""A real directory failure in the middle of a move: chmod 000 on the destination, then on the
source, while the move is throttled to be mid-copy and appends continue.

Run through ``scripts/run-tests``: as root without it, chmod 000 would not stop anything.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker.move import MoveState, ReplicaMoveEngine
from jbod_broker.storage.errors import KafkaStorageError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from tests.move_helpers import Appender, fill, iter_records, parse_payload, read_values
from tests.permissions import require_permissions
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

MOVING = TopicPartition("fail", 0)
NEIGHBOUR = TopicPartition("fail", 1)
CONFIG = LogConfig(segment_bytes=256 * 1024)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[LogManager, list[str]]]:
    require_permissions(tmp_path)
    dirs = [str(tmp_path / f"disk{i}") for i in range(2)]
    lm = LogManager(dirs, broker_id=1, default_config=CONFIG)
    lm.startup()
    yield lm, dirs
    for d in dirs:
        os.chmod(d, 0o755)
    lm.shutdown()
    shutil.rmtree(tmp_path, ignore_errors=True)


def _make(lm: LogManager, tp: TopicPartition, d: str, nbytes: int) -> Log:
    lm.set_preferred_dir(tp, d)
    lg = lm.get_or_create_log(tp, is_new=True)
    fill(lg, nbytes, batch_bytes=4000)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def _appended(lg: Log, tag: str) -> list[int]:
    return [parse_payload(v)[1] for _, v in iter_records(lg) if v.startswith(tag.encode() + b":")]


def test_destination_fails_mid_move(setup: tuple[LogManager, list[str]]) -> None:
    lm, (src, dest) = setup
    lg = _make(lm, MOVING, src, 3_000_000)
    before = read_values(lg)
    other = _make(lm, NEIGHBOUR, src, 200_000)
    other_before = read_values(other)
    engine = ReplicaMoveEngine(lm, throttle_rate=1_500_000)  # two seconds of copying
    appender = Appender("live", lambda: lm.get_log(MOVING), pause=0.002)
    try:
        appender.start()
        engine.alter_replica_log_dir(MOVING, dest)
        wait_for(lambda: engine.status(MOVING).bytes_copied > 500_000)
        assert engine.status(MOVING).state in (MoveState.COPYING, MoveState.CATCHING_UP)
        os.chmod(dest, 0)
        info = engine.wait(MOVING, 20)
        assert info.state is MoveState.FAILED
        assert info.error is not None and f"destination log dir {dest} failed" in info.error
        assert "Permission denied" in info.error
        assert dest in lm.offline_dirs() and src not in lm.offline_dirs()
        going = appender.acked  # appends go on in the surviving directory
        wait_for(lambda: appender.acked >= going + 20, "appends after the failure")
        appender.stop()  # first: an append in flight when acked is read would count as extra
        acked = appender.acked
        assert lm.get_log(MOVING) is lg and lg.log_dir == src
        values = read_values(lg)
        assert values[: len(before)] == before  # the surviving directory lost nothing
        assert _appended(lg, "live") == list(range(acked)) and acked > 0
        assert read_values(other) == other_before
    finally:
        if appender.is_alive():
            appender.stop()
        engine.shutdown()


def test_source_fails_mid_move(setup: tuple[LogManager, list[str]]) -> None:
    lm, (src, dest) = setup
    lg = _make(lm, MOVING, src, 3_000_000)
    neighbour = _make(lm, NEIGHBOUR, dest, 300_000)  # lives on the destination
    neighbour_before = read_values(neighbour)
    engine = ReplicaMoveEngine(lm, throttle_rate=1_500_000)
    appender = Appender("n", lambda: lm.get_log(NEIGHBOUR), pause=0.002)
    try:
        appender.start()
        engine.alter_replica_log_dir(MOVING, dest)
        wait_for(lambda: engine.status(MOVING).bytes_copied > 500_000)
        os.chmod(src, 0)
        info = engine.wait(MOVING, 20)
        assert info.state is MoveState.FAILED
        assert info.error is not None and f"source log dir {src} failed" in info.error
        assert src in lm.offline_dirs() and dest not in lm.offline_dirs()
        assert MOVING in lm.offline_replicas()
        with pytest.raises(KafkaStorageError, match=src):
            lm.log_or_error(MOVING)
        with pytest.raises(KafkaStorageError):
            lg.append_as_leader(build_batch([(None, b"x")]), 1)
        # KAFKA-14824: the copy on the live destination is removed, and not retried.
        engine.run_deletions()
        assert [n for n in os.listdir(dest) if n.startswith("fail-")] == ["fail-1"]
        time.sleep(0.3)
        assert engine.status(MOVING).state is MoveState.FAILED
        assert [n for n in os.listdir(dest) if n.startswith("fail-")] == ["fail-1"]
        appender.stop()  # first: an append in flight when acked is read would count as extra
        acked = appender.acked
        # The surviving directory lost nothing: its replica kept all it had and all appends.
        values = read_values(neighbour)
        assert values[: len(neighbour_before)] == neighbour_before
        assert _appended(neighbour, "n") == list(range(acked)) and acked > 0
    finally:
        if appender.is_alive():
            appender.stop()
        engine.shutdown()
