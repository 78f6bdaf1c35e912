"""Issue 14, item 3: batches the broker's own decoder rejects are never stored.

Every batch of tests/bad_batches.py has sound framing and a recomputed CRC (a follower's check,
``check_records=False``, passes it, which is all today's leader checked); the leader's check
refuses it with CORRUPT_MESSAGE or INVALID_RECORD naming the problem (RECORD_LIST_TOO_LARGE for
a decompression bomb, issue 18), and the log is unchanged.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
    StorageError,
)
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, decode_batch, validate_batches
from tests.bad_batches import BASE_TS, BadBatch, bad_batches

BAD = bad_batches()
ERRORS: dict[str, type[StorageError]] = {
    "CORRUPT_MESSAGE": CorruptRecordError,
    "INVALID_RECORD": InvalidRecordError,
    "RECORD_LIST_TOO_LARGE": RecordTooLargeError,
}


def _expect(exc: pytest.ExceptionInfo[StorageError], bad: BadBatch) -> None:
    assert type(exc.value) is ERRORS[bad.error], exc.value
    assert exc.value.kafka_error == bad.error
    for w in bad.words:
        assert w.lower() in str(exc.value).lower(), (w, str(exc.value))


@pytest.mark.parametrize("name", BAD)
def test_framing_and_crc_alone_pass_it(name: str) -> None:
    """What makes each case a regression: nothing but the records themselves is wrong."""
    assert validate_batches(BAD[name].data, check_records=False)


@pytest.mark.parametrize("name", BAD)
def test_validate_batches_refuses_it(name: str) -> None:
    bad = BAD[name]
    with pytest.raises(StorageError) as exc:
        validate_batches(bad.data)
    _expect(exc, bad)
    # The decoder a consumer would use refuses it too (that is the point).
    with pytest.raises(StorageError):
        decode_batch(bad.data)


@pytest.mark.parametrize("name", BAD)
def test_validate_batches_refuses_it_after_a_good_batch(name: str) -> None:
    good = build_batch([(b"k", b"v")], base_timestamp=BASE_TS)
    with pytest.raises(StorageError) as exc:
        validate_batches(memoryview(good + BAD[name].data))
    _expect(exc, BAD[name])
    assert f"position {len(good)}" in str(exc.value)


@pytest.mark.parametrize("name", BAD)
def test_append_as_leader_refuses_it_and_appends_nothing(tmp_path: Path, name: str) -> None:
    bad = BAD[name]
    log = Log.create(
        str(tmp_path / "t-0"),
        TopicPartition("t", 0),
        LogConfig(),
        LogDirFailureChannel(),
        log_dir=str(tmp_path),
    )
    try:
        log.append_as_leader(build_batch([(b"k", b"v")] * 2, base_timestamp=BASE_TS), 3)
        leo, size = log.log_end_offset, log.size
        with pytest.raises(StorageError) as exc:
            log.append_as_leader(bad.data, 3)
        _expect(exc, bad)
        # In a group, the bad request gets its error and the good ones are appended.
        good = build_batch([(b"k", b"w")], base_timestamp=BASE_TS)
        results = log.append_as_leader_group([good, bad.data, good], 3)
        assert isinstance(results[1], ERRORS[bad.error])
        assert log.log_end_offset == leo + 2
        assert log.size == size + 2 * len(good)
        # Every stored batch decodes.
        data = log.read(0, 1 << 20).data
        pos = 0
        while pos < len(data):
            header, records = decode_batch(data, pos)
            assert records
            pos += header.size_in_bytes
        assert pos == len(data)
    finally:
        log.close()


@pytest.mark.parametrize("kind", ["bytearray", "memoryview slice"])
def test_a_body_of_many_batches_is_never_copied_whole(kind: str) -> None:
    """A produce body is a bytearray (read against the request-memory pool). The record walk
    takes bytes: it may copy one batch at a time, never the body, which would hold a large
    body twice outside the pool (a 99 MiB body took the broker 99 MiB over its pool)."""
    one = build_batch([(None, b"v" * 1024)] * 16)
    body = bytearray(one * 256)  # 4 MiB of valid batches
    # A slice of bytes (a segment read) cannot be walked in place either.
    buf: bytearray | memoryview = (
        body if kind == "bytearray" else memoryview(bytes(body))[: len(body) - len(one)]
    )
    tracemalloc.start()
    try:
        headers = validate_batches(buf)
        decode_batch(buf, len(one))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(headers) == len(buf) // len(one)
    assert peak < 8 * len(one) + 256 * 1024, peak  # a few batches' worth, not the body
