"""The one table from the broker's errors to Kafka's error codes (issue 18)."""

from __future__ import annotations

import inspect

from kio.schema.errors import ErrorCode

from jbod_broker import errors
from jbod_broker.kafka.errors import PROTOCOL_ERRORS, error_code
from jbod_broker.producer_ids import CoordinatorLoadInProgressError

DIFFERENT_ON_THE_WIRE: dict[type[errors.KafkaError], ErrorCode] = {
    # Kafka answers a batch over max.message.bytes with RecordTooLargeException's code; the
    # HTTP API has always named it RECORD_LIST_TOO_LARGE.
    errors.RecordTooLargeError: ErrorCode.message_too_large,
}


def broker_errors() -> list[type[errors.KafkaError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        # The roots are never raised themselves (they answer UNKNOWN_SERVER_ERROR).
        if issubclass(cls, errors.KafkaError)
        and cls not in (errors.KafkaError, errors.StorageError)
    ]


def test_every_broker_error_is_in_the_table() -> None:
    listed = {cls for cls, _ in PROTOCOL_ERRORS}
    missing = [cls.__name__ for cls in broker_errors() if cls not in listed]
    assert not missing


def test_codes_are_the_errors_own_kafka_names_but_for_the_listed_differences() -> None:
    for cls in broker_errors():
        want = DIFFERENT_ON_THE_WIRE.get(cls) or ErrorCode[cls.kafka_error.lower()]
        assert error_code(cls("x")) == want, cls.__name__


def test_a_subclass_is_listed_before_its_base() -> None:
    for i, (cls, _) in enumerate(PROTOCOL_ERRORS):
        for base, _ in PROTOCOL_ERRORS[:i]:
            assert not issubclass(cls, base) or cls is base, (cls.__name__, base.__name__)


def test_init_producer_id_without_a_block_is_retriable() -> None:
    assert (
        error_code(CoordinatorLoadInProgressError("no block"))
        == ErrorCode.coordinator_load_in_progress
    )


def test_an_unexpected_exception_is_unknown_server_error() -> None:
    assert error_code(RuntimeError("bug")) == ErrorCode.unknown_server_error
    assert error_code(errors.KafkaError("root")) == ErrorCode.unknown_server_error
