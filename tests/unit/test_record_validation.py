"""Issue 14, item 3: batches the broker's own decoder rejects are never stored.

Every batch of tests/bad_batches.py has sound framing and a recomputed CRC (a follower's check,
``check_records=False``, passes it, which is all today's leader checked); the leader's check
refuses it with CORRUPT_MESSAGE or INVALID_RECORD naming the problem, and the log is unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import CorruptRecordError, InvalidRecordError, StorageError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, decode_batch, validate_batches
from tests.bad_batches import BASE_TS, BadBatch, bad_batches

BAD = bad_batches()
ERRORS: dict[str, type[StorageError]] = {
    "CORRUPT_MESSAGE": CorruptRecordError,
    "INVALID_RECORD": InvalidRecordError,
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
