"""Every error of the broker, with its Kafka name and HTTP status.

The HTTP status is what a client's retry logic keys on; the Kafka name in the body is what a
Kafka user recognises. The root, :class:`KafkaError`, lives in ``jbod_broker.storage.errors``
(the storage layer imports nothing above it) and is re-exported here with the storage errors,
so code outside the broker imports every error from this module. The whole tree::

    KafkaError                                  any error with a Kafka error code
    ├── InvalidTopicError                       bad topic name or partition number
    ├── InvalidRequestError                     a request that can never succeed as sent
    │   └── InvalidLogDirError                  not an absolute path of a configured log dir
    ├── InconsistentTopicIdError                a replica's topic id is not the request's (KIP-516)
    ├── InvalidConfigError                      a topic config unknown here or out of Kafka's range
    ├── StorageError                            about logs, disks or records (storage.errors)
    │   ├── OffsetOutOfRangeError, CorruptRecordError, RecordTooLargeError,
    │   │   InvalidRecordError, TransactionalRecordsError, KafkaStorageError,
    │   │   InsufficientSpaceError,
    │   │   DuplicateSequenceError, OutOfOrderSequenceError, InvalidProducerEpochError,
    │   │   ResourceShortageError, LogDirNotFoundError, ReplicaNotAvailableError,
    │   │   NoLiveLogDirError
    ├── NotLeaderOrFollowerError                the broker does not host the partition in that role
    ├── FencedLeaderEpochError                  a request carries a leader epoch older than ours
    ├── UnknownLeaderEpochError                 ... or newer than ours
    ├── UnknownTopicOrPartitionError            the broker has no such partition
    ├── StaleControllerEpochError               a controller older than the one we follow
    ├── NotEnoughReplicasError                  fewer in-sync replicas than min.insync.replicas
    ├── NotEnoughReplicasAfterAppendError       ... noticed after the append
    ├── RequestTimedOutError                    acks=-1 not reached within the timeout
    │   └── RequestBodyTimeoutError             a request body slower than request.body.timeout.ms
    ├── AuthError                               missing or wrong bearer token
    ├── PayloadTooLargeError                    request body over socket.request.max.bytes,
    │                                           or over the whole queued.max.request.bytes pool
    ├── BrokerUnavailableError                  (jbod_broker.client) the broker could not be reached
    └── MoveEngineStoppedError                  (jbod_broker.move) the move engine is shut down

Thread-safety: plain exception classes and constant tables.
"""

from __future__ import annotations

from .storage.errors import (
    CorruptRecordError,
    InconsistentTopicIdError,
    InsufficientSpaceError,
    InvalidLogDirError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    LogDirNotFoundError,
    NoLiveLogDirError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    ReplicaNotAvailableError,
    ResourceShortageError,
    StorageError,
    TransactionalRecordsError,
)

__all__ = [
    "HTTP_STATUS",
    "AuthError",
    "CorruptRecordError",
    "FencedLeaderEpochError",
    "InconsistentTopicIdError",
    "InsufficientSpaceError",
    "InvalidConfigError",
    "InvalidLogDirError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidRequestError",
    "InvalidTopicError",
    "KafkaError",
    "KafkaStorageError",
    "LogDirNotFoundError",
    "NoLiveLogDirError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PayloadTooLargeError",
    "RecordTooLargeError",
    "ReplicaNotAvailableError",
    "RequestBodyTimeoutError",
    "RequestTimedOutError",
    "ResourceShortageError",
    "StaleControllerEpochError",
    "StorageError",
    "TransactionalRecordsError",
    "UnknownLeaderEpochError",
    "UnknownTopicOrPartitionError",
    "error_by_name",
    "http_status",
]


class InvalidConfigError(KafkaError):
    """Kafka's INVALID_CONFIG: a topic config this broker does not know or implement, or a
    value outside Kafka's range (``storage.topic_configs``). Refused, never ignored."""

    kafka_error = "INVALID_CONFIG"


class NotLeaderOrFollowerError(KafkaError):
    kafka_error = "NOT_LEADER_OR_FOLLOWER"


class OffsetNotAvailableError(KafkaError):
    """Kafka's OFFSET_NOT_AVAILABLE (retriable): a new leader whose high watermark has not yet
    reached the start of its own epoch cannot name its log end to a client: its HW may still
    lie below offsets the previous leader acknowledged, and a consumer reading "to the end"
    would stop short of acknowledged records."""

    kafka_error = "OFFSET_NOT_AVAILABLE"


class FencedLeaderEpochError(KafkaError):
    kafka_error = "FENCED_LEADER_EPOCH"


class UnknownTopicOrPartitionError(KafkaError):
    kafka_error = "UNKNOWN_TOPIC_OR_PARTITION"


class UnknownLeaderEpochError(KafkaError):
    kafka_error = "UNKNOWN_LEADER_EPOCH"


class StaleControllerEpochError(KafkaError):
    kafka_error = "STALE_CONTROLLER_EPOCH"


class NotEnoughReplicasError(KafkaError):
    kafka_error = "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(KafkaError):
    kafka_error = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class RequestTimedOutError(KafkaError):
    kafka_error = "REQUEST_TIMED_OUT"


class RequestBodyTimeoutError(RequestTimedOutError):
    """The body did not arrive in time; answered 408 and the connection closed (Kafka has no
    such error of its own: the request is what timed out)."""


class AuthError(KafkaError):
    kafka_error = "CLUSTER_AUTHORIZATION_FAILED"


class PayloadTooLargeError(KafkaError):
    kafka_error = "MESSAGE_TOO_LARGE"


HTTP_STATUS: list[tuple[type[KafkaError], int]] = [
    (AuthError, 401),
    (PayloadTooLargeError, 413),
    (RecordTooLargeError, 413),
    (OffsetOutOfRangeError, 416),
    (UnknownTopicOrPartitionError, 404),
    (ReplicaNotAvailableError, 404),
    (LogDirNotFoundError, 404),
    (InvalidLogDirError, 400),
    (InvalidTopicError, 400),
    (InvalidConfigError, 400),
    (CorruptRecordError, 400),
    (InvalidRecordError, 400),
    (TransactionalRecordsError, 400),
    (OutOfOrderSequenceError, 409),
    (InvalidProducerEpochError, 409),
    (InvalidRequestError, 400),
    (StaleControllerEpochError, 409),
    (InconsistentTopicIdError, 409),
    (FencedLeaderEpochError, 409),
    (UnknownLeaderEpochError, 409),
    (NotLeaderOrFollowerError, 409),
    (OffsetNotAvailableError, 503),
    (NotEnoughReplicasError, 503),
    (NotEnoughReplicasAfterAppendError, 503),
    (InsufficientSpaceError, 507),
    (ResourceShortageError, 503),
    (KafkaStorageError, 503),
    (NoLiveLogDirError, 503),
    (RequestBodyTimeoutError, 408),
    (RequestTimedOutError, 504),
]


def http_status(err: KafkaError) -> int:
    for cls, status in HTTP_STATUS:
        if isinstance(err, cls):
            return status
    return 500


def error_by_name(name: str, message: str) -> KafkaError:
    """Rebuild an error from its Kafka name (the client side of the mapping). Where several
    classes share the name, the first listed that is not a subclass of another one: a subclass
    is listed before its base only so that ``http_status`` finds its own status first."""
    named = [cls for cls, _ in HTTP_STATUS if cls.kafka_error == name]
    for cls in named:
        if not any(other is not cls and issubclass(cls, other) for other in named):
            return cls(message)
    for cls in (ReplicaNotAvailableError, InvalidRequestError):
        if cls.kafka_error == name:
            return cls(message)
    err = KafkaError(message)
    err.kafka_error = name
    return err
