"""Errors raised by the storage engine.

Each carries a Kafka error name (``kafka_error``) so the server can answer with the code a Kafka
user would recognise, and a message that names the thing at fault (topic, offset, directory).

    StorageError
    ├── InvalidTopicError            bad topic name or partition number
    ├── InvalidRequestError          a request that can never succeed as sent
    │   └── InvalidLogDirError       not an absolute path of a configured log dir
    ├── OffsetOutOfRangeError        offset below log start or above log end
    ├── CorruptRecordError           a batch whose framing or CRC is wrong
    ├── RecordTooLargeError          a batch larger than max.message.bytes
    ├── InvalidRecordError           a batch that is well formed but unacceptable here
    ├── KafkaStorageError            the directory holding the replica is offline
    ├── LogDirNotFoundError          no configured directory with that path
    ├── ReplicaNotAvailableError     the replica is not on this broker (yet)
    ├── NotLeaderOrFollowerError     the broker does not host the partition in that role
    ├── FencedLeaderEpochError       a request carries an epoch older than ours
    └── NoLiveLogDirError            every log directory is offline: the broker must stop
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class; ``kafka_error`` is the name of the matching Kafka error code."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class InvalidTopicError(StorageError):
    kafka_error = "INVALID_TOPIC_EXCEPTION"


class InvalidRequestError(StorageError):
    kafka_error = "INVALID_REQUEST"


class InvalidLogDirError(InvalidRequestError):
    kafka_error = "LOG_DIR_NOT_FOUND"


class OffsetOutOfRangeError(StorageError):
    kafka_error = "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(StorageError):
    kafka_error = "CORRUPT_MESSAGE"


class RecordTooLargeError(StorageError):
    kafka_error = "RECORD_LIST_TOO_LARGE"


class InvalidRecordError(StorageError):
    kafka_error = "INVALID_RECORD"


class KafkaStorageError(StorageError):
    kafka_error = "KAFKA_STORAGE_ERROR"


class LogDirNotFoundError(StorageError):
    kafka_error = "LOG_DIR_NOT_FOUND"


class ReplicaNotAvailableError(StorageError):
    kafka_error = "REPLICA_NOT_AVAILABLE"


class NotLeaderOrFollowerError(StorageError):
    kafka_error = "NOT_LEADER_OR_FOLLOWER"


class FencedLeaderEpochError(StorageError):
    kafka_error = "FENCED_LEADER_EPOCH"


class NoLiveLogDirError(StorageError):
    kafka_error = "KAFKA_STORAGE_ERROR"
