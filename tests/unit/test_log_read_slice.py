"""A follower's read as a file range (``Log.read_slice``, issue 18's zero-copy send): the range
holds whole batches, as ``Log.read`` would return them, and its descriptor reads them even after
the segment file is renamed or unlinked."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4 import response as fetch_v4
from kio.schema.fetch.v12 import response as fetch_v12

from jbod_broker.kafka.protocol import encode_response, encode_response_pieces, make
from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import OffsetOutOfRangeError
from jbod_broker.storage.log import FileSlice, Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, iter_batches

TP = TopicPartition("t", 0)


def make_log(tmp_path: Path, **cfg: int) -> Log:
    channel = LogDirFailureChannel()
    return Log.create(str(tmp_path / "t-0"), TP, LogConfig(**cfg), channel, log_dir=str(tmp_path))


def batch(i: int, n: int = 2, size: int = 500) -> bytes:
    return build_batch([(b"k%d-%d" % (i, j), bytes([i % 256]) * size) for j in range(n)])


def contents(s: FileSlice) -> bytes:
    try:
        return os.pread(s.fd, s.size, s.position) if s.size else b""
    finally:
        s.close()


def offsets(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


def test_a_slice_holds_whole_batches_as_read_returns_them(tmp_path: Path) -> None:
    log = make_log(tmp_path, index_interval_bytes=1)
    for i in range(20):
        log.append_as_leader(batch(i), 0)
    one = len(batch(0))
    for offset, max_bytes in [(0, one * 3 + 10), (5, one), (0, 10), (0, 1 << 20), (37, 1)]:
        got = contents(log.read_slice(offset, max_bytes).records)
        assert got == log.read(offset, max_bytes).data, (offset, max_bytes)
    assert offsets(contents(log.read_slice(5, one).records)) == [4]
    res = log.read_slice(40, 100)  # at the log end: nothing, no descriptor
    assert (res.records.size, res.records.fd, res.log_end_offset) == (0, -1, 40)
    with pytest.raises(OffsetOutOfRangeError):
        log.read_slice(41, 100)


def test_a_slice_ends_at_an_indexed_batch_within_max_bytes(tmp_path: Path) -> None:
    """With an index entry every 4 KiB (Kafka's default interval), the range stops at the last
    indexed batch start within ``max_bytes``: whole batches, never more than asked (but the
    first), never a byte read to find the end."""
    log = make_log(tmp_path, index_interval_bytes=4096)
    for i in range(40):
        log.append_as_leader(batch(i), 0)
    one = len(batch(0))
    for max_bytes in (one, 3 * one, 4096, 10_000, 20_000):
        data = contents(log.read_slice(0, max_bytes).records)
        assert len(data) <= max(max_bytes, one)
        assert len(data) > max_bytes - 4096 - one
        assert offsets(data) == list(range(0, 2 * len(offsets(data)), 2))
        assert sum(h.size_in_bytes for _, h in iter_batches(data)) == len(data)


def test_a_slice_spans_one_segment_and_the_next_read_goes_on(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=4 * len(batch(0)))
    for i in range(10):
        log.append_as_leader(batch(i), 0)
    assert len(log.segments) > 1
    offset, seen = 0, []
    while offset < log.log_end_offset:
        got = offsets(contents(log.read_slice(offset, 1 << 20).records))
        seen += got
        offset = got[-1] + 2
    assert seen == list(range(0, 20, 2))


def test_the_descriptor_reads_a_file_renamed_or_unlinked_after_the_slice(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for i in range(3):
        log.append_as_leader(batch(i), 0)
    want = log.read(0, 1 << 20).data
    s = log.read_slice(0, 1 << 20).records
    (seg,) = log.segments
    moved = seg.log_path + ".moved"
    os.rename(seg.log_path, moved)
    os.unlink(moved)
    assert contents(s) == want
    s.close()  # twice: nothing (the number may belong to another file by now)


@pytest.mark.parametrize("module", [fetch_v4, fetch_v12], ids=["v4", "v12"])
def test_a_response_with_file_ranges_frames_as_one_with_their_bytes(
    tmp_path: Path, module: object
) -> None:
    """The pieces the listener sends (bytes, then a range sent from its file, then bytes) make
    the frame that encoding the same response with the records as bytes makes: kio wrote each
    range's length prefix from its ``len()``."""
    m: object = module
    log = make_log(tmp_path)
    for i in range(3):
        log.append_as_leader(batch(i), 0)

    def response(records: object) -> object:
        part = make(
            m.PartitionData,  # type: ignore[attr-defined]
            partition_index=0,
            error_code=ErrorCode.none,
            high_watermark=6,
            last_stable_offset=6,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=records,
        )
        return make(
            m.FetchResponse,  # type: ignore[attr-defined]
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            session_id=0,
            responses=(
                make(m.FetchableTopicResponse, topic="t", partitions=(part, part)),  # type: ignore[attr-defined]
            ),
        )

    s = log.read_slice(2, 1 << 20).records
    pieces = encode_response_pieces(9, response(s))
    assert [p for p in pieces if isinstance(p, FileSlice)] == [s, s]
    assert all(isinstance(p, FileSlice | bytes) for p in pieces)
    data = contents(s)
    joined = b"".join(data if isinstance(p, FileSlice) else bytes(p) for p in pieces)
    assert joined == encode_response(9, response(data))
