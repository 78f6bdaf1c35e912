"""Issue 36, item 4: what a client may not write, though it is well formed.

Kafka's LogValidator refuses control batches from clients, and a batch with a producer id but
no sequence; KafkaApis refuses transactional records without a transactional id (no
coordinator here grants one). Each case of ``tests/bad_batches.client_refused_batches`` passes
the record checks a consumer needs (a follower replicates such batches as the leader wrote
them), and the leader's append refuses it with the error Kafka names, appending nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import InvalidRecordError, StorageError, TransactionalRecordsError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import (
    any_transactional,
    build_batch,
    check_client_batches,
    parse_header,
    validate_batches,
)
from tests.bad_batches import BASE_TS, TRANSACTIONAL, client_refused_batches

REFUSED = client_refused_batches()
ERRORS: dict[str, type[StorageError]] = {
    "INVALID_RECORD": InvalidRecordError,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": TransactionalRecordsError,
}


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg = Log.create(
        str(tmp_path / "t-0"),
        TopicPartition("t", 0),
        LogConfig(),
        LogDirFailureChannel(),
        log_dir=str(tmp_path),
    )
    try:
        yield lg
    finally:
        lg.close()


@pytest.mark.parametrize("name", REFUSED)
def test_the_records_themselves_are_sound(name: str) -> None:
    """What makes each case this rule's and not the decoder's: every record check passes."""
    assert validate_batches(REFUSED[name].data)


@pytest.mark.parametrize("name", REFUSED)
def test_check_client_batches_names_kafkas_error(name: str) -> None:
    bad = REFUSED[name]
    with pytest.raises(StorageError) as exc:
        check_client_batches(validate_batches(bad.data))
    assert type(exc.value) is ERRORS[bad.error]
    assert exc.value.kafka_error == bad.error
    for w in bad.words:
        assert w in str(exc.value).lower(), (w, str(exc.value))


@pytest.mark.parametrize("name", REFUSED)
def test_the_leader_appends_none_of_it(log: Log, name: str) -> None:
    good = build_batch([(b"k", b"v")], base_timestamp=BASE_TS)
    log.append_as_leader(good, 0)
    leo, size = log.log_end_offset, log.size
    bad = REFUSED[name]
    with pytest.raises(ERRORS[bad.error]):
        log.append_as_leader(bad.data, 0)
    results = log.append_as_leader_group([good, bad.data], 0)
    assert isinstance(results[1], ERRORS[bad.error])
    assert (log.log_end_offset, log.size) == (leo + 1, size + len(good))


def test_a_follower_takes_a_control_batch_as_its_leader_wrote_it(log: Log) -> None:
    """Kafka's follower path does not run the client rules: a leader of a cluster with
    transactions writes markers, and its followers must copy them byte for byte."""
    control = REFUSED["control-flag"].data
    info = log.append_as_follower(control)
    assert info.last_offset == parse_header(control).last_offset


def test_any_transactional_finds_the_flag_in_any_whole_batch() -> None:
    plain = build_batch([(None, b"v")], base_timestamp=BASE_TS)
    txn = REFUSED["transactional-flag-without-producer-id"].data
    assert parse_header(txn).attributes & TRANSACTIONAL
    assert not any_transactional(plain)
    assert not any_transactional(plain * 3)
    assert any_transactional(txn)
    assert any_transactional(plain + plain + txn)
    # Only whole batches count: a transactional batch cut short, or framing that does not
    # parse, is left to the partition's own validation.
    assert not any_transactional(plain + txn[:-1])
    assert not any_transactional(b"\x00" * 70)
    assert not any_transactional(b"")
