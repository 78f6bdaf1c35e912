"""The log of one replica: append, read, roll, retention, truncation, recovery, bad input.

Real files in a temporary directory (no processes): the unit tier of the storage engine.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from jbod_broker.storage.checkpoints import parse_epochs
from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import (
    CorruptRecordError,
    InsufficientSpaceError,
    InvalidRecordError,
    InvalidRequestError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches
from jbod_broker.storage.segment import LogSegment

TP = TopicPartition("t", 0)


def make_log(tmp_path: Path, **cfg: int) -> Log:
    channel = LogDirFailureChannel()
    return Log.create(str(tmp_path / "t-0"), TP, LogConfig(**cfg), channel, log_dir=str(tmp_path))


def reopen(log: Log, *, clean: bool) -> Log:
    if clean:
        log.close()
    else:
        log.close_quietly()
    return Log.load(
        log.dir_path,
        TP,
        log.config,
        LogDirFailureChannel(),
        log_dir=log.log_dir,
        recovery_point=log.recovery_point if clean else 0,
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
        clean_shutdown=clean,
    )


def batch(i: int, n: int = 2, size: int = 100, ts: int | None = None) -> bytes:
    stamps = [ts] * n if ts is not None else None
    return build_batch(
        [(b"k%d-%d" % (i, j), bytes([i % 256]) * size) for j in range(n)], timestamps=stamps
    )


def all_values(log: Log) -> list[bytes]:
    out: list[bytes] = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20).data
        for pos, hdr in iter_batches(data):
            _, recs = decode_batch(data, pos)
            out += [r.value or b"" for r in recs if r.offset >= off]
            off = hdr.next_offset
    return out


def state(log: Log) -> tuple[int, int, int, list[tuple[str, int]]]:
    files = sorted(
        (f, os.path.getsize(os.path.join(log.dir_path, f))) for f in os.listdir(log.dir_path)
    )
    return log.log_start_offset, log.log_end_offset, log.size, files


def test_append_assigns_offsets_and_epochs(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    a = log.append_as_leader(batch(0, 3), leader_epoch=5)
    b = log.append_as_leader(batch(1, 2) + batch(2, 4), leader_epoch=5)
    assert (a.first_offset, a.last_offset) == (0, 2)
    assert (b.first_offset, b.last_offset, b.batch_count) == (3, 8, 2)
    data = log.read(0, 1 << 20).data
    hdrs = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset) for h in hdrs] == [(0, 2), (3, 4), (5, 8)]
    assert {h.partition_leader_epoch for h in hdrs} == {5}
    decode_batch(data, 0)  # CRC still valid after offsets were assigned in place
    assert log.epochs.entries() == [(5, 0)]
    log.append_as_leader(batch(3), leader_epoch=7)
    assert log.epochs.entries() == [(5, 0), (7, 9)]


def test_read_limits_and_whole_batches(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for i in range(20):
        log.append_as_leader(batch(i, 2, 500), 0)
    one = len(batch(0, 2, 500))
    r = log.read(0, one * 3 + 10)
    assert len(r.data) == one * 3
    # Reading from the middle of a batch returns the whole batch holding that offset.
    r = log.read(5, one)
    assert [h.base_offset for _, h in iter_batches(r.data)] == [4]
    # A limit smaller than a batch still returns one batch (progress for consumers) ...
    assert len(log.read(0, 10).data) == one
    # ... unless min_one is off.
    assert log.read(0, 10, min_one=False).data == b""
    # The high watermark hides what is above it.
    r = log.read(0, 1 << 20, max_offset=6)
    assert [h.last_offset for _, h in iter_batches(r.data)] == [1, 3, 5]
    assert log.read(6, 1 << 20, max_offset=6).data == b""
    assert log.read(40, 100).data == b""  # at the log end: empty, not an error


def test_out_of_range_offsets_are_refused(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(batch(0), 0)
    for bad in (-1, 3, 2**63 - 1):
        with pytest.raises(OffsetOutOfRangeError, match=r"outside \[0, 2\]"):
            log.read(bad, 100)
    with pytest.raises(InvalidRequestError):
        log.read(0, -5)
    with pytest.raises(InvalidRequestError):
        log.truncate_to(-1)


def test_segment_roll_by_size(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024)
    for i in range(30):
        log.append_as_leader(batch(i, 2, 200), 0)
    assert len(log.segments) > 5
    for seg in log.segments[:-1]:
        assert seg.size <= 1024 or seg.size == len(batch(0, 2, 200))
    # Segment files are named by base offset and bases follow the data.
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    logs = sorted(f for f in os.listdir(log.dir_path) if f.endswith(".log"))
    assert logs == [f"{b:020d}.log" for b in bases]
    assert len(all_values(log)) == 60


def test_segment_roll_by_time(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_ms=1000)
    log.append_as_leader(batch(0), 0)
    log.active.created_ms -= 5000  # the segment is now older than segment.ms
    log.append_as_leader(batch(1), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_retention_by_size_keeps_active_segment_and_moves_start(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024, retention_bytes=2048)
    for i in range(30):
        log.append_as_leader(batch(i, 2, 200), 0)
    log.update_high_watermark(log.log_end_offset)
    before = log.size
    deleted = log.delete_old_segments()
    assert deleted > 0 and log.size == before - deleted
    assert log.size - log.segments[0].size < 2048
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert all_values(log)  # what remains is readable


def test_retention_never_passes_the_high_watermark(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024, retention_bytes=0)
    for i in range(10):
        log.append_as_leader(batch(i, 2, 200), 0)
    assert log.high_watermark == 0
    assert log.delete_old_segments() == 0  # followers may still need all of it
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() > 0


def test_retention_by_time(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024, retention_ms=60_000)
    now = 10_000_000
    for i in range(8):
        log.append_as_leader(batch(i, 2, 200, ts=now - 120_000), 0)
    for i in range(8, 16):
        log.append_as_leader(batch(i, 2, 200, ts=now), 0)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments(now)
    values = all_values(log)
    assert bytes([8]) * 200 in values and bytes([0]) * 200 not in values
    # An expired active segment is rolled and deleted too once everything is replicated.
    log.delete_old_segments(now + 10**9)
    assert log.size == 0 and log.log_start_offset == log.log_end_offset == 32


def test_truncation(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024)
    for i in range(20):
        log.append_as_leader(batch(i, 2, 200), i // 5)
    log.update_high_watermark(40)
    assert log.truncate_to(21)  # mid-batch: the whole batch [20, 21] goes
    assert log.log_end_offset == 20
    assert log.high_watermark == 20
    assert log.epochs.entries() == [(0, 0), (1, 10)]  # epoch 2 started at 20: forgotten
    assert log.truncate_to(10)
    assert log.log_end_offset == 10 and log.epochs.entries() == [(0, 0)]
    assert not log.truncate_to(50)  # nothing above the log end
    a = log.append_as_leader(batch(99), 9)
    assert a.first_offset == 10
    assert all_values(log)[-1] == bytes([99]) * 100
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.size) == (1000, 1000, 0)
    assert log.append_as_leader(batch(1), 10).first_offset == 1000


def test_follower_append_keeps_offsets_and_learns_epochs(tmp_path: Path) -> None:
    leader = make_log(tmp_path / "l")
    follower = make_log(tmp_path / "f")
    leader.append_as_leader(batch(0, 3), 1)
    leader.append_as_leader(batch(1, 3), 4)
    data = leader.read(0, 1 << 20).data
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 5)
    assert follower.epochs.entries() == [(1, 0), (4, 3)]
    with pytest.raises(InvalidRecordError, match="below the log end"):
        follower.append_as_follower(data)  # a duplicate fetch is refused, not appended twice
    assert follower.log_end_offset == 6


@pytest.mark.parametrize("damage", ["crc", "truncated", "magic", "oversized", "empty"])
def test_bad_batches_leave_the_log_as_it_was(tmp_path: Path, damage: str) -> None:
    log = make_log(tmp_path, max_message_bytes=4096)
    log.append_as_leader(batch(0), 0)
    before = state(log)
    good = bytearray(batch(1))
    err: type[Exception]
    if damage == "crc":
        good[-1] ^= 0xFF
        bad, err = bytes(good), CorruptRecordError
    elif damage == "truncated":
        bad, err = bytes(good[:-3]), CorruptRecordError
    elif damage == "magic":
        good[16] = 1
        bad, err = bytes(good), InvalidRecordError
    elif damage == "oversized":
        bad, err = batch(2, 3, 2000), RecordTooLargeError
    else:
        bad, err = b"", InvalidRecordError
    # A bad batch after a good one in the same request: nothing of the request is appended.
    with pytest.raises(err):
        log.append_as_leader(bad if damage == "empty" else batch(5) + bad, 0)
    with pytest.raises(err):
        log.append_as_follower(bad)
    assert state(log) == before


def test_clean_reopen_trusts_indexes(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=2048)
    for i in range(40):
        log.append_as_leader(batch(i, 2, 100), 3)
    values = all_values(log)
    log.update_high_watermark(50)
    log2 = reopen(log, clean=True)
    assert log2.log_end_offset == 80 and log2.high_watermark == 50
    assert all_values(log2) == values
    assert log2.epochs.entries() == [(3, 0)]


def test_recovery_drops_torn_tail_and_rebuilds_indexes(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=4096, index_interval_bytes=100)
    for i in range(30):
        log.append_as_leader(batch(i, 2, 100), 0)
    log.flush()
    values = all_values(log)
    active = log.active.log_path
    index = log.active.index.path
    log.close()
    with open(active, "ab") as f:  # a torn write: half a batch
        f.write(batch(99)[:40])
    with open(index, "r+b") as f:  # and a corrupt index
        f.write(b"\xff" * 8)
    log2 = Log.load(
        log.dir_path,
        TP,
        log.config,
        LogDirFailureChannel(),
        log_dir=log.log_dir,
        recovery_point=0,
        clean_shutdown=False,
    )
    assert log2.log_end_offset == 60
    assert all_values(log2) == values
    for off in range(0, 60, 7):  # the rebuilt index finds every offset
        data = log2.read(off, 1).data
        hdr = next(iter_batches(data))[1]
        assert hdr.base_offset <= off <= hdr.last_offset


def test_recovery_cuts_at_corruption_in_the_middle(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for i in range(10):
        log.append_as_leader(batch(i, 2, 100), 0)
    one = len(batch(0, 2, 100))
    path = log.active.log_path
    log.close()
    with open(path, "r+b") as f:
        f.seek(one * 4 + 70)  # inside the records of the fifth batch
        f.write(b"\x00\x01\x02")
    log2 = Log.load(log.dir_path, TP, log.config, LogDirFailureChannel(), log_dir=log.log_dir)
    assert log2.log_end_offset == 8  # four good batches of two records
    assert os.path.getsize(path) == one * 4


def test_recovery_rejects_offsets_going_backwards(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(batch(0), 0)
    log.append_as_leader(batch(1), 0)
    path = log.active.log_path
    log.close()
    one = len(batch(0))
    with open(path, "r+b") as f:
        f.seek(one)
        f.write(struct.pack(">q", 0))  # second batch claims offset 0 again (not CRC-covered)
    log2 = Log.load(log.dir_path, TP, log.config, LogDirFailureChannel(), log_dir=log.log_dir)
    assert log2.log_end_offset == 2


def test_index_files_use_kafka_format(tmp_path: Path) -> None:
    log = make_log(tmp_path, index_interval_bytes=0)
    for i in range(5):
        log.append_as_leader(batch(i, 2, 50, ts=1000 + i), 0)
    log.flush()
    with open(log.active.index.path, "rb") as f:
        entries = list(struct.iter_unpack(">ii", f.read()))
    one = len(batch(0, 2, 50))
    assert entries == [(2 * i + 1, one * i) for i in range(5)]
    with open(log.active.time_index.path, "rb") as f:
        tentries = list(struct.iter_unpack(">qi", f.read()))
    assert tentries == [(1000 + i, 2 * i + 1) for i in range(5)]


def test_successor_receives_appends_after_a_swap(tmp_path: Path) -> None:
    old = make_log(tmp_path / "a")
    new = make_log(tmp_path / "b")
    old.append_as_leader(batch(0), 0)
    new.append_as_follower(old.read(0, 1 << 20).data)
    with old.lock:
        old.successor = new
    info = old.append_as_leader(batch(1), 0)  # a caller still holding the old log
    assert info.first_offset == 2
    assert new.log_end_offset == 4 and old.log_end_offset == 2
    assert len(old.read(0, 1 << 20).data) == len(new.read(0, 1 << 20).data)


def test_delete_records_moves_log_start(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024)
    for i in range(20):
        log.append_as_leader(batch(i, 2, 200), 0)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark"):
        log.advance_log_start_offset(10)
    log.update_high_watermark(40)
    assert log.advance_log_start_offset(11) == 11
    with pytest.raises(OffsetOutOfRangeError):
        log.read(10, 100)
    # The batch holding offset 11 is still served whole; the consumer skips offset 10.
    hdr = next(iter_batches(log.read(11, 100).data))[1]
    assert hdr.base_offset == 10
    assert log.delete_old_segments() > 0
    assert log.segments[0].base_offset <= 11


# -- loading needs no new space (KAFKA-13773) -----------------------------------------------


def _no_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every write of new bytes fail as on a full disk; returns what was attempted."""
    tried: list[str] = []

    def full(name: str) -> Callable[..., int]:
        def fail(*_args: object) -> int:
            tried.append(name)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        return fail

    monkeypatch.setattr(os, "write", full("write"))
    monkeypatch.setattr(os, "pwrite", full("pwrite"))
    return tried


def _crashed_log(tmp_path: Path) -> tuple[Log, list[bytes]]:
    """A log of several segments whose last appends never reached a flush, then a torn
    write, a checkpointed epoch whose first batch never came, and a process that died."""
    log = make_log(tmp_path, segment_bytes=2048, index_interval_bytes=100)
    for i in range(30):
        log.append_as_leader(batch(i, 2, 100), 3)
    log.flush()
    for i in range(30, 40):
        log.append_as_leader(batch(i, 2, 100), 3)
    values = all_values(log)
    log.epochs.assign(5, log.log_end_offset)
    with open(log.active.log_path, "ab") as f:
        f.write(batch(99)[:40])
    log.close_quietly()
    return log, values


def test_recovery_on_a_full_disk_writes_nothing_and_loads_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, values = _crashed_log(tmp_path)
    channel = LogDirFailureChannel()
    with monkeypatch.context() as m:
        tried = _no_writes(m)
        log2 = Log.load(
            log.dir_path, TP, log.config, channel, log_dir=log.log_dir, recovery_point=0
        )
    assert tried == ["write"]  # only the epoch file was tried, and it is gone instead
    assert channel.offline_dirs() == {}
    assert not os.path.exists(os.path.join(log.dir_path, "leader-epoch-checkpoint"))
    assert log2.log_end_offset == 80 and all_values(log2) == values
    assert log2.epochs.entries() == [(3, 0)]
    for off in range(0, 80, 7):  # the indexes rebuilt in memory find every offset
        hdr = next(iter_batches(log2.read(off, 1).data))[1]
        assert hdr.base_offset <= off <= hdr.last_offset
    # The files hold nothing the rebuild has not confirmed; a flush writes the rest.
    assert all(os.path.getsize(s.index.path) == 0 for s in log2.segments)
    log2.flush()
    for seg in log2.segments:
        with open(seg.index.path, "rb") as f:
            entries = list(struct.iter_unpack(">ii", f.read()))
        assert len(entries) == seg.index.entries > 0
    log3 = reopen(log2, clean=True)
    assert all_values(log3) == values and log3.epochs.entries() == [(3, 0)]


def test_an_index_rebuilt_but_never_written_is_rebuilt_again_not_trusted_empty(
    tmp_path: Path,
) -> None:
    log, values = _crashed_log(tmp_path)
    log2 = Log.load(log.dir_path, TP, log.config, LogDirFailureChannel(), log_dir=log.log_dir)
    log2.close_quietly()  # died again before any flush: the index files are empty
    assert all(os.path.getsize(s.index.path) == 0 for s in log2.segments)
    log3 = Log.load(
        log.dir_path,
        TP,
        log.config,
        LogDirFailureChannel(),
        log_dir=log.log_dir,
        recovery_point=80,  # every segment trusted as it is
        clean_shutdown=True,
    )
    assert all_values(log3) == values and log3.log_end_offset == 80
    assert all(s.index.entries > 0 and s.index_pending for s in log3.segments)


def test_a_flush_writes_indexes_rebuilt_below_the_recovery_point(tmp_path: Path) -> None:
    log, _ = _crashed_log(tmp_path)
    log2 = Log.load(
        log.dir_path,
        TP,
        log.config,
        LogDirFailureChannel(),
        log_dir=log.log_dir,
        recovery_point=80,
        clean_shutdown=True,  # trusted, but every index is empty: rebuilt in memory
    )
    log2.roll()
    log2.append_as_leader(batch(50), 3)
    log2.flush()  # the recovery point was already past the rebuilt segments
    assert not any(s.index_pending for s in log2.segments)
    assert all(os.path.getsize(s.index.path) > 0 for s in log2.segments)


def test_loading_rewrites_the_epoch_file_when_there_is_room(tmp_path: Path) -> None:
    log, _ = _crashed_log(tmp_path)
    log2 = Log.load(log.dir_path, TP, log.config, LogDirFailureChannel(), log_dir=log.log_dir)
    with open(os.path.join(log.dir_path, "leader-epoch-checkpoint"), "rb") as f:
        assert parse_epochs(f.read(), "test") == [(3, 0)]
    assert log2.epochs.entries() == [(3, 0)]


def test_a_failed_load_closes_what_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = _crashed_log(tmp_path)
    channel = LogDirFailureChannel()
    with monkeypatch.context() as m:
        m.setattr(LogSegment, "recover", lambda *_a, **_k: enospc_error())
        with pytest.raises(InsufficientSpaceError):
            Log.load(log.dir_path, TP, log.config, channel, log_dir=log.log_dir, no_space_ok=True)
        assert channel.offline_dirs() == {}  # the caller decides what a full disk means
        assert open_fds_under(log.dir_path) == []
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            Log.load(log.dir_path, TP, log.config, channel, log_dir=log.log_dir)
        channel.drain()
        assert set(channel.offline_dirs()) == {log.log_dir}  # the default: KIP-112
        assert open_fds_under(log.dir_path) == []


def enospc_error() -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def open_fds_under(path: str) -> list[str]:
    prefix = os.path.realpath(path) + os.sep
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target)
    return out
