"""The error tree: one neutral root, storage errors only for logs, disks and records, and the
Kafka-name and HTTP-status mappings working from that root on both sides of the wire."""

from __future__ import annotations

import pytest

from jbod_broker import errors
from jbod_broker.client import BrokerUnavailableError
from jbod_broker.errors import (
    HTTP_STATUS,
    AuthError,
    FencedLeaderEpochError,
    InvalidLogDirError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    PayloadTooLargeError,
    RequestTimedOutError,
    StaleControllerEpochError,
    StorageError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    error_by_name,
    http_status,
)
from jbod_broker.move import MoveEngineStoppedError
from jbod_broker.storage import errors as storage_errors

NOT_STORAGE = [
    AuthError,
    StaleControllerEpochError,
    NotEnoughReplicasError,
    NotEnoughReplicasAfterAppendError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
    UnknownLeaderEpochError,
    NotLeaderOrFollowerError,
    FencedLeaderEpochError,
    PayloadTooLargeError,
    InvalidRequestError,
    InvalidLogDirError,
    InvalidTopicError,
    BrokerUnavailableError,
    MoveEngineStoppedError,
]


def test_the_root_is_reexported_from_the_broker_errors() -> None:
    assert errors.KafkaError is storage_errors.KafkaError
    assert errors.StorageError is storage_errors.StorageError
    assert issubclass(StorageError, KafkaError)


@pytest.mark.parametrize("cls", NOT_STORAGE, ids=lambda c: c.__name__)
def test_errors_that_are_not_about_storage_are_kafka_errors_only(cls: type[KafkaError]) -> None:
    assert issubclass(cls, KafkaError)
    assert not issubclass(cls, StorageError)


def test_every_error_the_storage_module_defines_derives_from_the_root() -> None:
    classes = [
        v
        for v in vars(storage_errors).values()
        if isinstance(v, type)
        and issubclass(v, Exception)
        and v.__module__ == storage_errors.__name__
    ]
    assert len(classes) > 5
    assert all(issubclass(c, KafkaError) for c in classes)
    on_disk = {c.__name__ for c in classes if issubclass(c, StorageError) and c is not StorageError}
    assert on_disk == {
        "OffsetOutOfRangeError",
        "CorruptRecordError",
        "RecordTooLargeError",
        "InvalidRecordError",
        "TransactionalRecordsError",
        "InsufficientSpaceError",
        "ResourceShortageError",
        "KafkaStorageError",
        "LogDirNotFoundError",
        "ReplicaNotAvailableError",
        "NoLiveLogDirError",
        "DuplicateSequenceError",
        "OutOfOrderSequenceError",
        "InvalidProducerEpochError",
    }


@pytest.mark.parametrize(("cls", "status"), HTTP_STATUS, ids=lambda x: getattr(x, "__name__", x))
def test_http_status_and_name_round_trip(cls: type[KafkaError], status: int) -> None:
    assert http_status(cls("x")) == status
    rebuilt = error_by_name(cls.kafka_error, "why")
    assert isinstance(rebuilt, KafkaError) and rebuilt.kafka_error == cls.kafka_error
    # Two classes share LOG_DIR_NOT_FOUND; the client rebuilds the first one listed. A 408
    # RequestBodyTimeoutError is a REQUEST_TIMED_OUT: the client rebuilds its base class.
    first = next(
        s
        for c, s in HTTP_STATUS
        if c.kafka_error == cls.kafka_error and c is not errors.RequestBodyTimeoutError
    )
    assert str(rebuilt) == "why" and http_status(rebuilt) == first


def test_a_body_timeout_is_a_408_request_timed_out_rebuilt_as_its_base() -> None:
    err = errors.RequestBodyTimeoutError("slow body")
    assert isinstance(err, RequestTimedOutError)
    assert http_status(err) == 408 and http_status(RequestTimedOutError("acks")) == 504
    assert type(error_by_name("REQUEST_TIMED_OUT", "m")) is RequestTimedOutError


def test_unknown_names_and_the_root_itself() -> None:
    assert http_status(KafkaError("x")) == 500
    err = error_by_name("SOMETHING_NEW", "m")
    assert type(err) is KafkaError and err.kafka_error == "SOMETHING_NEW"
    assert type(error_by_name("UNKNOWN_SERVER_ERROR", "m")) is KafkaError
