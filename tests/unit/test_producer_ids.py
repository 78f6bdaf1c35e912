"""Producer-id blocks: the controller's pure rule and the broker's InitProducerId handout."""

from __future__ import annotations

import asyncio

import pytest

from jbod_broker.producer_ids import CoordinatorLoadInProgressError, ProducerIdManager
from jbod_operator.plan import producer_ids as blocks


def test_the_first_block_starts_at_zero_and_each_takes_kafkas_block_size() -> None:
    assert blocks.next_block_start(None) == 0
    assert blocks.take_block(0) == (0, blocks.BLOCK_SIZE)
    cm = blocks.config_map_body("ns", "c", 5000)
    assert cm["metadata"]["name"] == "c-producer-ids"
    assert blocks.next_block_start(cm) == 5000
    assert blocks.take_block(5000) == (5000, 5000 + blocks.BLOCK_SIZE)


@pytest.mark.parametrize("bad", [None, "", "-5", "12x", "1e3", 7])
def test_a_damaged_counter_is_refused_not_guessed(bad: object) -> None:
    with pytest.raises(ValueError):
        blocks.next_block_start({"data": {blocks.NEXT_BLOCK_KEY: bad}})


def test_no_block_past_the_int64_range() -> None:
    last = blocks.MAX_PRODUCER_ID - blocks.BLOCK_SIZE
    assert blocks.take_block(last) == (last, blocks.MAX_PRODUCER_ID)
    with pytest.raises(blocks.ProducerIdsExhausted):
        blocks.take_block(last + 1)


def test_ids_come_from_blocks_in_order_and_a_new_block_when_one_is_used_up() -> None:
    given = [(0, 3), (1000, 3)]
    asked: list[int] = []

    async def fetch() -> tuple[int, int]:
        asked.append(1)
        return given.pop(0)

    async def scenario() -> list[tuple[int, int]]:
        m = ProducerIdManager(fetch)
        return list(await asyncio.gather(*(m.init_producer_id() for _ in range(5))))

    got = asyncio.run(scenario())
    assert got == [(0, 0), (1, 0), (2, 0), (1000, 0), (1001, 0)]
    assert len(asked) == 2


def test_no_block_is_a_retriable_error_and_the_next_call_asks_again() -> None:
    calls = 0

    async def fetch() -> tuple[int, int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("controller unreachable")
        return 42_000, 1000

    async def scenario() -> int:
        m = ProducerIdManager(fetch)
        with pytest.raises(CoordinatorLoadInProgressError, match="controller unreachable"):
            await m.init_producer_id()
        return (await m.init_producer_id()).producer_id

    assert asyncio.run(scenario()) == 42_000
    assert CoordinatorLoadInProgressError.kafka_error == "COORDINATOR_LOAD_IN_PROGRESS"
