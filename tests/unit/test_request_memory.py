"""The request-memory pool (Kafka's ``queued.max.request.bytes``, issue 14): reservations wait
in arrival order, never exceed the capacity, and come back on every path (release, a waiter
cancelled in the queue, a waiter cancelled right after its grant).

No clock anywhere: a waiter's state is observed after letting the loop run its ready
callbacks (``settle``), which is deterministic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from jbod_broker.request_memory import RequestMemoryPool, Reservation


async def settle() -> None:
    """Let every ready task run until it blocks again."""
    for _ in range(5):
        await asyncio.sleep(0)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def test_reservations_within_the_capacity_are_immediate() -> None:
    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(60)
        await pool.acquire(40)
        assert (pool.used, pool.available, pool.waiting) == (100, 0, 0)
        pool.release(100)
        assert (pool.used, pool.available) == (0, 100)

    run(body)


def test_a_body_that_does_not_fit_waits_until_memory_is_released() -> None:
    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(70)
        second = asyncio.create_task(pool.acquire(50))
        await settle()
        assert not second.done() and pool.waiting == 1 and pool.used == 70
        pool.release(70)
        await settle()
        assert second.done() and pool.used == 50 and pool.waiting == 0

    run(body)


def test_waiters_are_served_in_arrival_order() -> None:
    """A small body that would fit does not overtake a large one waiting ahead of it."""

    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(60)
        large = asyncio.create_task(pool.acquire(95))
        await settle()
        small = asyncio.create_task(pool.acquire(10))
        await settle()
        assert not large.done() and not small.done() and pool.waiting == 2
        pool.release(60)
        await settle()
        assert large.done() and pool.used == 95
        assert not small.done()
        pool.release(95)
        await settle()
        assert small.done() and pool.used == 10

    run(body)


def test_a_release_wakes_every_waiter_that_fits() -> None:
    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(100)
        waiters = [asyncio.create_task(pool.acquire(30)) for _ in range(4)]
        await settle()
        pool.release(100)
        await settle()
        assert [w.done() for w in waiters] == [True, True, True, False]
        assert pool.used == 90

    run(body)


def test_more_than_the_capacity_can_never_be_reserved() -> None:
    async def body() -> None:
        pool = RequestMemoryPool(100)
        with pytest.raises(ValueError, match="more than the pool"):
            await pool.acquire(101)
        assert pool.used == 0 and pool.waiting == 0

    run(body)


def test_a_waiter_cancelled_in_the_queue_leaves_it_and_lets_the_next_in() -> None:
    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(50)
        large = asyncio.create_task(pool.acquire(80))
        await settle()
        small = asyncio.create_task(pool.acquire(40))
        await settle()
        assert not small.done(), "waits behind the large one"
        large.cancel()
        await settle()
        assert large.cancelled()
        assert small.done() and pool.used == 90 and pool.waiting == 0

    run(body)


def test_a_waiter_cancelled_right_after_its_grant_gives_the_memory_back() -> None:
    """The grant and the cancellation can meet in one loop turn (a timeout firing just as the
    memory came): the granted bytes must not stay reserved by a request that is gone."""

    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(100)
        waiter = asyncio.create_task(pool.acquire(60))
        await settle()
        pool.release(100)  # grants the waiter's future...
        waiter.cancel()  # ...which is cancelled before it resumes
        await settle()
        assert waiter.cancelled()
        assert pool.used == 0 and pool.waiting == 0

    run(body)


def test_a_reservation_grows_and_is_released_once() -> None:
    async def body() -> None:
        pool = RequestMemoryPool(100)
        r = Reservation(pool)
        await r.grow(30)
        await r.grow(20)
        assert r.bytes == 50 and pool.used == 50
        r.release()
        r.release()  # the middleware's finally may meet an already released one
        assert r.bytes == 0 and pool.used == 0

    run(body)


def test_taking_without_waiting_keeps_the_arrival_order() -> None:
    """The produce path's synchronous try (no coroutine when there is room) follows the same
    rule as ``acquire``: it takes only what fits and never overtakes a queued waiter."""

    async def body() -> None:
        pool = RequestMemoryPool(100)
        r = Reservation(pool)
        assert r.try_grow(60) and r.bytes == 60 and pool.used == 60
        assert not r.try_grow(50)  # does not fit: nothing taken
        assert r.bytes == 60 and pool.used == 60
        queued = asyncio.create_task(pool.acquire(50))
        await settle()
        assert pool.waiting == 1
        r.release()
        await settle()
        assert queued.done() and pool.used == 50
        big = asyncio.create_task(pool.acquire(60))
        await settle()
        assert pool.waiting == 1
        # 10 bytes would fit, but the 60 waiting ahead comes first.
        assert not pool.try_acquire(10) and pool.used == 50
        pool.release(50)
        await settle()
        assert big.done() and pool.used == 60 and pool.try_acquire(40) and pool.used == 100

    run(body)


def test_releasing_more_than_reserved_is_a_bug() -> None:
    pool = RequestMemoryPool(100)
    with pytest.raises(RuntimeError, match="only 0 are reserved"):
        pool.release(1)


def test_an_empty_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="holds nothing"):
        RequestMemoryPool(0)
