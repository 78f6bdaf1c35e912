"""The root of the broker's errors, and the errors the storage engine raises.

Every error carries a Kafka error name (``kafka_error``) so the server can answer with the code a
Kafka user would recognise, and a message that names the thing at fault (topic, offset,
directory). The root, :class:`KafkaError`, is defined here rather than in ``jbod_broker.errors``
because the storage layer must import nothing above it; ``jbod_broker.errors`` re-exports it and
adds the errors of the layers above (the whole tree is drawn there).

Only errors about logs, disks and records are :class:`StorageError`; a caller that means "any
error a broker can answer with" catches :class:`KafkaError`. The part of the tree defined here::

    KafkaError                       any error with a Kafka error code (the neutral root)
    ├── InvalidTopicError            bad topic name or partition number
    ├── InvalidRequestError          a request that can never succeed as sent
    │   └── InvalidLogDirError       not an absolute path of a configured log dir
    ├── InconsistentTopicIdError     a replica's topic id differs from the one a request names
    └── StorageError                 about logs, disks or records
        ├── OffsetOutOfRangeError    offset below log start or above log end
        ├── CorruptRecordError       a batch whose framing or CRC is wrong
        ├── RecordTooLargeError      a batch larger than max.message.bytes
        ├── InvalidRecordError       a batch that is well formed but unacceptable here
        ├── TransactionalRecordsError a client's transactional batch (no transactions here)
        ├── DuplicateSequenceError   an idempotent producer's batch already in the log (not a
        │                            failure: the produce path answers its original offsets)
        ├── OutOfOrderSequenceError  an idempotent producer's batch after a sequence gap
        ├── InvalidProducerEpochError a batch of an idempotent producer's fenced (older) epoch
        ├── KafkaStorageError        the directory holding the replica is offline
        ├── InsufficientSpaceError   a directory has no room for a move or a new replica
        ├── ResourceShortageError    the process ran out of open files or memory (not the disk)
        ├── LogDirNotFoundError      no configured directory with that path
        ├── ReplicaNotAvailableError the replica has no log on this broker (yet)
        └── NoLiveLogDirError        every log directory is offline: the broker must stop

Thread-safety: plain exception classes; nothing shared.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base class of every broker error; ``kafka_error`` is the name of the Kafka error code.

    Neutral on purpose: authorisation, fencing and timeouts derive from it directly, so code
    that handles a disk failure (:class:`StorageError`) does not also swallow those.
    """

    kafka_error = "UNKNOWN_SERVER_ERROR"


class InvalidTopicError(KafkaError):
    kafka_error = "INVALID_TOPIC_EXCEPTION"


class InconsistentTopicIdError(KafkaError):
    """Kafka's INCONSISTENT_TOPIC_ID (KIP-516): the replica here belongs to another topic of the
    same name (deleted and created again), or the request does. Not a disk failure: the replica
    and its directory stay as they are, and the request is refused for that partition."""

    kafka_error = "INCONSISTENT_TOPIC_ID"


class InvalidRequestError(KafkaError):
    kafka_error = "INVALID_REQUEST"


class InvalidLogDirError(InvalidRequestError):
    kafka_error = "LOG_DIR_NOT_FOUND"


class StorageError(KafkaError):
    """An error about a log, a log directory or the records in it."""


class OffsetOutOfRangeError(StorageError):
    kafka_error = "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(StorageError):
    kafka_error = "CORRUPT_MESSAGE"


class RecordTooLargeError(StorageError):
    kafka_error = "RECORD_LIST_TOO_LARGE"


class InvalidRecordError(StorageError):
    kafka_error = "INVALID_RECORD"


class TransactionalRecordsError(StorageError):
    """A client's batch with the transactional flag. This broker has no transaction
    coordinator, so no producer can hold a transactional id here, and Kafka answers a produce
    of transactional records without one (``KafkaApis.handleProduceRequest``) with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Stored, such a batch would never be committed or
    aborted: a read_committed consumer would stop at it forever."""

    kafka_error = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class DuplicateSequenceError(StorageError):
    """The batch is one the log already holds (same producer, epoch and sequence range among
    the producer's last five): nothing is written, and the produce path answers success with
    the offsets the batch got the first time, as Kafka does. A storage error so that it takes
    the slot of its request in a group append like any refusal; the offsets ride on it.
    """

    kafka_error = "DUPLICATE_SEQUENCE_NUMBER"

    def __init__(self, message: str, *, first_offset: int, last_offset: int, log_start_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_start_offset = log_start_offset


class OutOfOrderSequenceError(StorageError):
    kafka_error = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StorageError):
    kafka_error = "INVALID_PRODUCER_EPOCH"


class KafkaStorageError(StorageError):
    kafka_error = "KAFKA_STORAGE_ERROR"


class InsufficientSpaceError(StorageError):
    """No room on a directory for a move or a new replica (storage.room's rule), refused
    before any byte lands. Kafka has no code for it; POLICY_VIOLATION says "your request
    breaks a rule this broker enforces" and the message names the dir and every figure.
    The directory stays online: this is not a disk failure.
    """

    kafka_error = "POLICY_VIOLATION"


class ResourceShortageError(StorageError):
    """The broker process (or the host) ran out of a resource a disk call needed: open files
    (EMFILE, ENFILE) or kernel memory (ENOMEM); see ``diskio.RESOURCE_SHORTAGE``.

    Issue 14: this is the process's shortage, never the disk's, so the directory stays online
    and the caller's one operation is refused: a LeaderAndIsr refuses the partition it could not
    create (nothing of it is left on disk), a produce can be retried. Kafka has no code for it;
    THROTTLING_QUOTA_EXCEEDED is its retriable "the broker refuses this now, for a budget it
    enforces" (CreateTopics answers it when partition creation goes past a quota), and unlike
    KAFKA_STORAGE_ERROR it does not make a controller take the replica for offline. The
    message names what ran out and the limit.
    """

    kafka_error = "THROTTLING_QUOTA_EXCEEDED"


class LogDirNotFoundError(StorageError):
    kafka_error = "LOG_DIR_NOT_FOUND"


class ReplicaNotAvailableError(StorageError):
    kafka_error = "REPLICA_NOT_AVAILABLE"


class NoLiveLogDirError(StorageError):
    kafka_error = "KAFKA_STORAGE_ERROR"
