"""ListOffsets by timestamp and max timestamp on a real log (issue 18): the time index names
where to start, the batch is decoded to find the record, the high watermark bounds the answer.

Real files in a temporary directory, as the rest of the storage unit tier.
"""

from __future__ import annotations

from pathlib import Path

from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import GZIP, build_batch

TP = TopicPartition("t", 0)


def make_log(tmp_path: Path, **cfg: int) -> Log:
    return Log.create(
        str(tmp_path / "t-0"), TP, LogConfig(**cfg), LogDirFailureChannel(), log_dir=str(tmp_path)
    )


def append(log: Log, stamps: list[int], compression: int = 0) -> None:
    records = [(b"k", b"v%d" % ts) for ts in stamps]
    log.append_as_leader(build_batch(records, timestamps=stamps, compression=compression), 0)


def test_first_record_at_or_after_the_timestamp_inside_a_batch(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    append(log, [100, 110, 120])  # offsets 0-2
    append(log, [130, 140, 150], compression=GZIP)  # offsets 3-5
    end = log.log_end_offset
    assert log.offset_for_timestamp(0, end) == (100, 0)
    assert log.offset_for_timestamp(110, end) == (110, 1)
    assert log.offset_for_timestamp(111, end) == (120, 2)
    assert log.offset_for_timestamp(121, end) == (130, 3)
    assert log.offset_for_timestamp(141, end) == (150, 5)
    assert log.offset_for_timestamp(151, end) is None


def test_records_at_or_past_the_high_watermark_are_not_found(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    append(log, [100, 110])
    append(log, [200])
    assert log.offset_for_timestamp(150, 2) is None
    assert log.offset_for_timestamp(105, 1) is None
    assert log.max_timestamp_offset(2) == (110, 1)
    assert log.max_timestamp_offset(0) is None


def test_timestamps_across_segments_use_each_segment_time_index(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024, index_interval_bytes=1)
    stamps = list(range(1000, 1400, 10))
    for ts in stamps:
        append(log, [ts, ts + 1])  # ~80 bytes a batch: several segments
    assert len(log.segments) > 2
    end = log.log_end_offset
    for i, ts in enumerate(stamps):
        assert log.offset_for_timestamp(ts + 1, end) == (ts + 1, 2 * i + 1)
        assert log.offset_for_timestamp(ts - 5, end) == (ts, 2 * i)


def test_max_timestamp_is_the_first_record_carrying_it(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=1024)
    for _ in range(10):
        append(log, [10, 20])
    append(log, [500, 90, 500])  # offsets 20-22: the max, twice, out of order
    for _ in range(10):
        append(log, [30])
    assert len(log.segments) > 1
    assert log.max_timestamp_offset(log.log_end_offset) == (500, 20)


def test_records_below_the_log_start_offset_are_not_answered(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    append(log, [100, 900, 120])
    log.update_high_watermark(3)
    log.advance_log_start_offset(2)
    assert log.offset_for_timestamp(0, 3) == (120, 2)
    assert log.max_timestamp_offset(3) == (120, 2)
