"""The broker's errors as Kafka protocol error codes: the one table (issue 18).

Every broker error names its Kafka error (``KafkaError.kafka_error``) for the HTTP API; the
Kafka protocol needs the numeric code clients act on, and in a few places the code Kafka
itself answers differs from the name the HTTP API has always used: a batch larger than
``max.message.bytes`` is MESSAGE_TOO_LARGE on Kafka's wire (its RecordTooLargeException),
and the HTTP-only errors (a bad token, a slow body) have no place in Kafka's protocol at all.
The table lists each class once, most specific first; :func:`error_code` takes the first
match, and a unit test checks that every error the broker defines is listed.

Thread-safety: constant tables.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..errors import (
    AuthError,
    CorruptRecordError,
    FencedLeaderEpochError,
    InconsistentTopicIdError,
    InsufficientSpaceError,
    InvalidConfigError,
    InvalidLogDirError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    LogDirNotFoundError,
    NoLiveLogDirError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    PayloadTooLargeError,
    RecordTooLargeError,
    ReplicaNotAvailableError,
    RequestBodyTimeoutError,
    RequestTimedOutError,
    ResourceShortageError,
    StaleControllerEpochError,
    TransactionalRecordsError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from ..producer_ids import CoordinatorLoadInProgressError
from ..storage.errors import DuplicateSequenceError

PROTOCOL_ERRORS: list[tuple[type[KafkaError], ErrorCode]] = [
    (NotLeaderOrFollowerError, ErrorCode.not_leader_or_follower),
    (UnknownTopicOrPartitionError, ErrorCode.unknown_topic_or_partition),
    (FencedLeaderEpochError, ErrorCode.fenced_leader_epoch),
    (UnknownLeaderEpochError, ErrorCode.unknown_leader_epoch),
    (NotEnoughReplicasError, ErrorCode.not_enough_replicas),
    (NotEnoughReplicasAfterAppendError, ErrorCode.not_enough_replicas_after_append),
    (RequestBodyTimeoutError, ErrorCode.request_timed_out),
    (RequestTimedOutError, ErrorCode.request_timed_out),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (OffsetNotAvailableError, ErrorCode.offset_not_available),
    (CorruptRecordError, ErrorCode.corrupt_message),
    # Kafka answers a batch over max.message.bytes with RecordTooLargeException's code.
    (RecordTooLargeError, ErrorCode.message_too_large),
    (PayloadTooLargeError, ErrorCode.message_too_large),
    (InvalidRecordError, ErrorCode.invalid_record),
    (TransactionalRecordsError, ErrorCode.transactional_id_authorization_failed),
    (OutOfOrderSequenceError, ErrorCode.out_of_order_sequence_number),
    (DuplicateSequenceError, ErrorCode.duplicate_sequence_number),
    (InvalidProducerEpochError, ErrorCode.invalid_producer_epoch),
    (InconsistentTopicIdError, ErrorCode.inconsistent_topic_id),
    (CoordinatorLoadInProgressError, ErrorCode.coordinator_load_in_progress),
    (KafkaStorageError, ErrorCode.kafka_storage_error),
    (NoLiveLogDirError, ErrorCode.kafka_storage_error),
    (ReplicaNotAvailableError, ErrorCode.replica_not_available),
    (ResourceShortageError, ErrorCode.throttling_quota_exceeded),
    (InsufficientSpaceError, ErrorCode.policy_violation),
    (LogDirNotFoundError, ErrorCode.log_dir_not_found),
    (InvalidLogDirError, ErrorCode.log_dir_not_found),
    (InvalidTopicError, ErrorCode.invalid_topic_exception),
    (InvalidConfigError, ErrorCode.invalid_config),
    (InvalidRequestError, ErrorCode.invalid_request),
    (StaleControllerEpochError, ErrorCode.stale_controller_epoch),
    (AuthError, ErrorCode.cluster_authorization_failed),
]


def error_code(err: BaseException) -> ErrorCode:
    """Kafka's code for ``err``; anything unlisted (a bug) is UNKNOWN_SERVER_ERROR, as Kafka
    answers an unexpected exception."""
    for cls, code in PROTOCOL_ERRORS:
        if isinstance(err, cls):
            return code
    return ErrorCode.unknown_server_error
