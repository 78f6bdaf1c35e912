"""Idempotent producer state inside a log: de-duplication, refusals, snapshots beside the
segments, restart (clean and not), truncation, retention, replication and a KIP-113 move.

Real files in a temporary directory; the move runs the real engine between two directories.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker.move import AlterResult, MoveState, ReplicaMoveEngine
from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaStorageError,
    OutOfOrderSequenceError,
)
from jbod_broker.storage.log import AppendInfo, Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.producer_state import read_snapshot_file
from jbod_broker.storage.records import build_batch
from tests.move_helpers import read_values

TP = TopicPartition("t", 0)
PID = 1000


def pbatch(seq: int, n: int = 3, *, pid: int = PID, epoch: int = 0, tag: str = "v") -> bytes:
    """An idempotent producer's batch of ``n`` records from sequence ``seq``."""
    return build_batch(
        [(None, f"{tag}{pid}-{epoch}-{seq + i}".encode()) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def make_log(tmp_path: Path, **cfg: int) -> Log:
    return Log.create(
        str(tmp_path / "t-0"), TP, LogConfig(**cfg), LogDirFailureChannel(), log_dir=str(tmp_path)
    )


def reopen(lg: Log, *, clean: bool) -> Log:
    if clean:
        lg.close()
    else:
        lg.close_quietly()  # SIGKILL: nothing written at the end
    return Log.load(
        lg.dir_path,
        TP,
        lg.config,
        LogDirFailureChannel(),
        log_dir=lg.log_dir,
        recovery_point=lg.recovery_point if clean else 0,
        log_start_offset=lg.log_start_offset,
        high_watermark=lg.high_watermark,
        clean_shutdown=clean,
    )


def snapshots(lg: Log) -> list[str]:
    return sorted(n for n in os.listdir(lg.dir_path) if n.endswith(".snapshot"))


def dup_offsets(lg: Log, data: bytes) -> tuple[int, int]:
    with pytest.raises(DuplicateSequenceError) as e:
        lg.append_as_leader(data, 0)
    return e.value.first_offset, e.value.last_offset


def test_a_retried_batch_is_answered_with_its_offsets_and_not_written(tmp_path: Path) -> None:
    lg = make_log(tmp_path)
    first = lg.append_as_leader(pbatch(0), 0)
    lg.append_as_leader(pbatch(3), 0)
    end = lg.log_end_offset
    assert dup_offsets(lg, pbatch(0)) == (first.first_offset, first.last_offset) == (0, 2)
    assert dup_offsets(lg, pbatch(3)) == (3, 5)
    assert lg.log_end_offset == end
    assert len(read_values(lg)) == 6


def test_gap_and_fenced_epoch_are_refused_and_write_nothing(tmp_path: Path) -> None:
    lg = make_log(tmp_path)
    lg.append_as_leader(pbatch(0, epoch=1), 0)
    with pytest.raises(OutOfOrderSequenceError):
        lg.append_as_leader(pbatch(5, epoch=1), 0)
    with pytest.raises(InvalidProducerEpochError):
        lg.append_as_leader(pbatch(3, epoch=0), 0)
    with pytest.raises(InvalidRecordError, match="no sequence"):
        lg.append_as_leader(pbatch(-1, n=1, epoch=1), 0)
    assert lg.log_end_offset == 3
    lg.append_as_leader(pbatch(0, epoch=2), 0)  # a bump restarts at 0
    assert lg.log_end_offset == 6


def test_a_group_checks_its_requests_in_order_and_writes_only_the_accepted(
    tmp_path: Path,
) -> None:
    lg = make_log(tmp_path)
    lg.append_as_leader(pbatch(0), 0)
    results = lg.append_as_leader_group(
        [pbatch(3), pbatch(0), pbatch(9), pbatch(6), build_batch([(None, b"plain")])], 0
    )
    assert isinstance(results[0], AppendInfo) and results[0].first_offset == 3
    assert isinstance(results[1], DuplicateSequenceError) and results[1].first_offset == 0
    assert isinstance(results[2], OutOfOrderSequenceError)  # 9 after 5: a gap
    assert isinstance(results[3], AppendInfo) and results[3].first_offset == 6
    assert isinstance(results[4], AppendInfo) and results[4].first_offset == 9
    assert lg.log_end_offset == 10
    values = read_values(lg)
    assert len(values) == len(set(values)) == 10
    # the second request of the group saw the first one's batch as in order
    assert dup_offsets(lg, pbatch(6)) == (6, 8)


def test_state_survives_a_clean_restart_through_the_shutdown_snapshot(tmp_path: Path) -> None:
    lg = make_log(tmp_path)
    for seq in range(0, 15, 3):
        lg.append_as_leader(pbatch(seq), 0)
    lg2 = reopen(lg, clean=True)
    assert snapshots(lg2) == ["00000000000000000015.snapshot"]
    # a snapshot keeps each producer's last batch (Kafka's format)
    assert dup_offsets(lg2, pbatch(12)) == (12, 14)
    with pytest.raises(OutOfOrderSequenceError):
        lg2.append_as_leader(pbatch(20), 0)
    lg2.append_as_leader(pbatch(15), 0)
    lg2.close()


def test_an_unclean_restart_replays_the_log_after_the_roll_snapshot(tmp_path: Path) -> None:
    lg = make_log(tmp_path, segment_bytes=16 * 1024)
    seq = 0
    while len(lg.segments) < 3:
        lg.append_as_leader(pbatch(seq, n=20, tag="x" * 40), 0)
        seq += 20
    for _ in range(5):
        lg.append_as_leader(pbatch(seq, n=20, tag="x" * 40), 0)
        seq += 20
    assert len(lg.segments) == 3
    lg.append_as_leader(pbatch(seq, pid=PID + 1), 0)  # a second producer, after the last roll
    names = snapshots(lg)
    assert names == [f"{s.base_offset:020d}.snapshot" for s in lg.segments[1:]]
    lg2 = reopen(lg, clean=False)
    # every batch of the last five is recognised: they were replayed from the active segment
    for back in range(1, 6):
        s = seq - 20 * back
        assert dup_offsets(lg2, pbatch(s, n=20, tag="x" * 40)) == (s, s + 19)
    assert dup_offsets(lg2, pbatch(seq, pid=PID + 1)) == (seq, seq + 2)
    lg2.close()


def test_a_corrupt_snapshot_is_deleted_and_the_state_rebuilt(tmp_path: Path) -> None:
    lg = make_log(tmp_path)
    lg.append_as_leader(pbatch(0), 0)
    lg.close()
    path = os.path.join(lg.dir_path, "00000000000000000003.snapshot")
    with open(path, "r+b") as f:
        f.seek(-10, os.SEEK_END)  # inside the entry's timestamp
        byte = f.read(1)
        f.seek(-10, os.SEEK_END)
        f.write(bytes([byte[0] ^ 1]))
    lg2 = Log.load(
        lg.dir_path, TP, lg.config, LogDirFailureChannel(), log_dir=lg.log_dir, high_watermark=3
    )
    assert snapshots(lg2) == []
    assert dup_offsets(lg2, pbatch(0)) == (0, 2)
    lg2.close_quietly()


def test_truncation_drops_the_state_past_its_point(tmp_path: Path) -> None:
    lg = make_log(tmp_path, segment_bytes=16 * 1024)
    seq = 0
    while len(lg.segments) < 3:
        lg.append_as_leader(pbatch(seq, n=20, tag="x" * 40), 0)
        seq += 20
    cut = lg.segments[1].base_offset + 20  # inside the second segment, after a whole batch
    assert cut % 20 == 0
    lg.truncate_to(cut)
    assert all(int(n[:20]) <= cut for n in snapshots(lg))
    # the batch at the cut was removed: it is new again, and the one before is a duplicate
    assert dup_offsets(lg, pbatch(cut - 20, n=20, tag="x" * 40)) == (cut - 20, cut - 1)
    info = lg.append_as_leader(pbatch(cut, n=20, tag="x" * 40), 0)
    assert info.first_offset == cut
    lg.truncate_fully_and_start_at(500)
    assert snapshots(lg) == []
    lg.append_as_leader(pbatch(77), 0)  # no state left: any sequence is accepted


def test_retention_deletes_snapshots_with_their_segments(tmp_path: Path) -> None:
    lg = make_log(tmp_path, segment_bytes=16 * 1024, retention_bytes=16 * 1024)
    seq = 0
    while len(lg.segments) < 5:
        lg.append_as_leader(pbatch(seq, n=20, tag="x" * 40), 0)
        seq += 20
    lg.update_high_watermark(lg.log_end_offset)
    before = snapshots(lg)
    assert lg.delete_old_segments() > 0
    left = {s.base_offset for s in lg.segments}
    assert snapshots(lg) == [n for n in before if int(n[:20]) in left]
    assert len(snapshots(lg)) < len(before)


def test_a_follower_rebuilds_the_leaders_state(tmp_path: Path) -> None:
    leader = make_log(tmp_path / "a")
    follower = make_log(tmp_path / "b")
    for seq in range(0, 30, 3):
        leader.append_as_leader(pbatch(seq), 0)
    data = leader.read(0, 1 << 20).data
    follower.append_as_follower(data)
    # the follower, now leader (failover), answers the last five as the old leader would
    for seq in range(15, 30, 3):
        assert dup_offsets(follower, pbatch(seq)) == (seq, seq + 2)
    with pytest.raises(OutOfOrderSequenceError):
        follower.append_as_leader(pbatch(12), 0)  # older than the last five
    assert follower.log_end_offset == 30


def test_a_failed_snapshot_write_takes_the_dir_offline(tmp_path: Path) -> None:
    lg = make_log(tmp_path)
    lg.append_as_leader(pbatch(0), 0)
    os.mkdir(os.path.join(lg.dir_path, "00000000000000000003.snapshot"))  # cannot be replaced
    with pytest.raises(KafkaStorageError, match="roll"):
        lg.roll()
    assert lg.channel.is_offline(lg.log_dir)


def test_a_moves_future_copy_writes_no_snapshot_of_its_own(tmp_path: Path) -> None:
    """Its map is empty until the swap brings the source's: a snapshot of it, newer than the
    source's, would be loaded instead of theirs after the swap and a restart."""
    source = make_log(tmp_path / "a")
    source.append_as_leader(pbatch(0), 0)
    future = Log.create(
        str(tmp_path / "b" / "t-0.f-future"),
        TP,
        LogConfig(),
        LogDirFailureChannel(),
        log_dir=str(tmp_path / "b"),
        is_future=True,
    )
    future.append_as_follower(source.read(0, 1 << 20).data)
    future.roll()
    future.close()
    assert snapshots(future) == []


@pytest.fixture
def lm(tmp_path: Path) -> Iterator[LogManager]:
    m = LogManager(
        [str(tmp_path / f"disk{i}") for i in range(2)],
        broker_id=1,
        default_config=LogConfig(segment_bytes=16 * 1024),
    )
    m.startup()
    yield m
    m.shutdown()


def test_a_move_swap_carries_the_state_and_the_snapshots(lm: LogManager) -> None:
    lg = lm.get_or_create_log(TP, is_new=True)
    seq = 0
    while len(lg.segments) < 3:
        lg.append_as_leader(pbatch(seq, n=20, tag="x" * 40), 0)
        seq += 20
    lg.append_as_leader(pbatch(0, pid=PID + 1), 0)  # only in memory: after the last roll
    lg.update_high_watermark(lg.log_end_offset)
    names = snapshots(lg)
    dest = next(d for d in lm.dirs if d != lg.log_dir)
    engine = ReplicaMoveEngine(lm)
    try:
        assert engine.alter_replica_log_dir(TP, dest) is AlterResult.STARTED
        assert engine.wait(TP, 30).state is MoveState.DONE
    finally:
        engine.shutdown()
    new = lm.get_log(TP)
    assert new is not None and new.log_dir == dest
    assert snapshots(new) == names
    last = read_snapshot_file(new.dir_path, int(names[-1][:20]))
    assert [e.producer_id for e in last] == [PID]
    # a retry right after the swap, of either producer, is recognised; the old log forwards
    assert dup_offsets(new, pbatch(0, pid=PID + 1)) == (seq, seq + 2)
    assert dup_offsets(lg, pbatch(seq - 20, n=20, tag="x" * 40)) == (seq - 20, seq - 1)
    assert new.log_end_offset == seq + 3
