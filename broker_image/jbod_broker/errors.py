"""Errors of the broker above the storage layer, with their Kafka names and HTTP statuses.

The HTTP status is what a client's retry logic keys on; the Kafka name in the body is what a
Kafka user recognises. Storage errors (``jbod_broker.storage.errors``) map the same way.
"""

from __future__ import annotations

from .storage.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidLogDirError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirNotFoundError,
    NoLiveLogDirError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    ReplicaNotAvailableError,
    StorageError,
)


class UnknownTopicOrPartitionError(StorageError):
    kafka_error = "UNKNOWN_TOPIC_OR_PARTITION"


class UnknownLeaderEpochError(StorageError):
    kafka_error = "UNKNOWN_LEADER_EPOCH"


class StaleControllerEpochError(StorageError):
    kafka_error = "STALE_CONTROLLER_EPOCH"


class NotEnoughReplicasError(StorageError):
    kafka_error = "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(StorageError):
    kafka_error = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class RequestTimedOutError(StorageError):
    kafka_error = "REQUEST_TIMED_OUT"


class AuthError(StorageError):
    kafka_error = "CLUSTER_AUTHORIZATION_FAILED"


class PayloadTooLargeError(StorageError):
    kafka_error = "MESSAGE_TOO_LARGE"


HTTP_STATUS: list[tuple[type[StorageError], int]] = [
    (AuthError, 401),
    (PayloadTooLargeError, 413),
    (RecordTooLargeError, 413),
    (OffsetOutOfRangeError, 416),
    (UnknownTopicOrPartitionError, 404),
    (ReplicaNotAvailableError, 404),
    (LogDirNotFoundError, 404),
    (InvalidLogDirError, 400),
    (InvalidTopicError, 400),
    (CorruptRecordError, 400),
    (InvalidRecordError, 400),
    (InvalidRequestError, 400),
    (StaleControllerEpochError, 409),
    (FencedLeaderEpochError, 409),
    (UnknownLeaderEpochError, 409),
    (NotLeaderOrFollowerError, 409),
    (NotEnoughReplicasError, 503),
    (NotEnoughReplicasAfterAppendError, 503),
    (KafkaStorageError, 503),
    (NoLiveLogDirError, 503),
    (RequestTimedOutError, 504),
]


def http_status(err: StorageError) -> int:
    for cls, status in HTTP_STATUS:
        if isinstance(err, cls):
            return status
    return 500


def error_by_name(name: str, message: str) -> StorageError:
    """Rebuild an error from its Kafka name (the client side of the mapping)."""
    for cls, _ in HTTP_STATUS:
        if cls.kafka_error == name:
            return cls(message)
    for cls in (ReplicaNotAvailableError, InvalidRequestError):
        if cls.kafka_error == name:
            return cls(message)
    err = StorageError(message)
    err.kafka_error = name
    return err
