"""The counting producer and consumer live in :mod:`jbod_broker.counting` (one home: the tests
and ``make demo`` use the same rule); re-exported here for the tests that import them from
this module."""

from jbod_broker.counting import (
    FILLER,
    MAX_ATTEMPTS,
    AnswerHook,
    CountingConsumer,
    CountingProducer,
    LeaderLookup,
    consume_all,
    fill_bytes,
    running,
    verify,
)

__all__ = [
    "FILLER",
    "MAX_ATTEMPTS",
    "AnswerHook",
    "CountingConsumer",
    "CountingProducer",
    "LeaderLookup",
    "consume_all",
    "fill_bytes",
    "running",
    "verify",
]
