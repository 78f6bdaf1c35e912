"""The counting producer and consumer live in :mod:`jbod_broker.counting` (one home: the tests
and ``make demo`` use the same rule); re-exported here for the tests that import them from
this module, with the wait tests make on a running producer."""

from __future__ import annotations

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
from jbod_broker.storage.names import TopicPartition
from tests.waiting import wait_async

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
    "wait_acked_more",
]


async def wait_acked_more(
    prod: CountingProducer,
    n: int,
    what: str = "writes",
    *,
    tp: TopicPartition | None = None,
    timeout: float = 60,
) -> int:
    """Wait until ``n`` more records (of ``tp``, or of every partition) than now have been
    acknowledged: "writes go on" as a count, not a window of time. Returns the count then."""

    def count() -> int:
        return prod.acked_count if tp is None else len(prod.acked.get(tp, []))

    want = count() + n
    await wait_async(
        lambda: count() >= want,
        lambda: f"{what}: {count()} of {want} records acknowledged (errors: {prod.errors})",
        timeout,
    )
    return count()
