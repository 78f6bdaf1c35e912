"""InitProducerId without a transactional id: a new idempotent producer's id and epoch.

The broker hands out ids from a block the controller gave it (Kafka's
``RPCProducerIdManager``): the controller (the operator, ``plan.producer_ids``) keeps the next
block's start in the API server and takes each block with a conditional write, so an id is
never given twice in a cluster, also across broker restarts and disk replacements. Ids of a
block a broker did not use before it stopped are lost, as in Kafka; that is what makes a
restart safe without writing anything on the broker.

An idempotent producer always starts at epoch 0 with a new id; the epoch bump of a producer
that keeps its id (KIP-360, transactional ids) is not needed without transactions.

Thread-safety: used from the event loop only; one block request at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from .storage.errors import KafkaError


class CoordinatorLoadInProgressError(KafkaError):
    """No producer id could be given now (no block from the controller): Kafka answers
    InitProducerId with this retriable code in that case, rather than REQUEST_TIMED_OUT, which
    older clients take as fatal."""

    kafka_error = "COORDINATOR_LOAD_IN_PROGRESS"


class ProducerIdAndEpoch(NamedTuple):
    producer_id: int
    producer_epoch: int


BlockSource = Callable[[], Awaitable[tuple[int, int]]]
"""Returns ``(first id, count)`` of a new block, or raises."""


class ProducerIdManager:
    def __init__(self, fetch_block: BlockSource) -> None:
        self._fetch_block = fetch_block
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def init_producer_id(self) -> ProducerIdAndEpoch:
        """A producer id no other producer of the cluster has had, at epoch 0."""
        async with self._lock:
            if self._next >= self._end:
                try:
                    first, count = await self._fetch_block()
                except Exception as e:
                    raise CoordinatorLoadInProgressError(
                        f"no producer id available: {e}; retry"
                    ) from e
                self._next, self._end = first, first + count
            pid = self._next
            self._next += 1
        return ProducerIdAndEpoch(pid, 0)
