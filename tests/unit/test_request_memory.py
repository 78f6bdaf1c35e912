"""The request-memory pool (Kafka's ``queued.max.request.bytes``, issue 14): reservations never
exceed the capacity, one that fits is not queued behind one that does not, the oldest waiter
is overtaken by at most a pool's worth (issue 36), a stall is measured, and memory comes back
on every path (release, a waiter cancelled in the queue, a waiter cancelled right after its
grant); the body clock both listeners close slow bodies by.

No clock anywhere: a waiter's state is observed after letting the loop run its ready
callbacks (``settle``), which is deterministic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from jbod_broker import request_memory
from jbod_broker.request_memory import BodyClock, RequestMemoryPool, Reservation


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


def test_a_request_that_fits_is_not_queued_behind_one_that_does_not() -> None:
    """Issue 36: a 100 MiB body waiting for memory others hold must not stall a small request
    that fits in what is free (no head-of-line blocking), neither when it arrives nor when
    memory comes back."""

    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(60)
        large = asyncio.create_task(pool.acquire(95))
        await settle()
        small = asyncio.create_task(pool.acquire(10))
        await settle()
        assert not large.done() and small.done() and pool.used == 70 and pool.waiting == 1
        middle = asyncio.create_task(pool.acquire(40))
        await settle()
        assert not middle.done() and pool.waiting == 2
        pool.release(10)  # 40 free: the middle one fits, the large one still does not
        await settle()
        assert middle.done() and not large.done() and pool.used == 100
        pool.release(60 + 40)
        await settle()
        assert large.done() and pool.used == 95 and pool.waiting == 0

    run(body)


def test_the_oldest_waiter_is_overtaken_by_at_most_the_pools_capacity() -> None:
    """Against starvation: a stream of small requests that always fit would keep a large one
    waiting forever; once they have taken a pool's worth of bytes past it, the large one is
    next, and later requests wait behind it."""

    async def body() -> None:
        pool = RequestMemoryPool(100)
        await pool.acquire(50)
        large = asyncio.create_task(pool.acquire(60))
        await settle()
        for _ in range(10):  # 10 x 10 bytes overtake it, each answered and given back
            assert pool.try_acquire(10)
            pool.release(10)
        assert not large.done() and pool.used == 50
        assert not pool.try_acquire(10), "a pool's worth went past the oldest: it is next"
        late = asyncio.create_task(pool.acquire(10))
        await settle()
        assert not late.done() and pool.waiting == 2
        pool.release(50)
        await settle()
        assert large.done() and late.done() and pool.used == 70 and pool.waiting == 0
        # A new oldest waiter starts with no overtaking counted against it.
        big = asyncio.create_task(pool.acquire(40))
        await settle()
        assert not big.done() and pool.try_acquire(30) and pool.used == 100
        pool.release(100)
        await settle()
        assert big.done() and pool.used == 40

    run(body)


def test_a_stall_is_measured_from_the_oldest_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """/readyz and /metrics read how long the oldest waiter has waited and the total time
    some request waited (Kafka's MemoryPoolDepletedTimeTotal); the clock is the test's."""
    now = [1000.0]
    monkeypatch.setattr("jbod_broker.request_memory.time.monotonic", lambda: now[0])

    async def body() -> None:
        pool = RequestMemoryPool(100)
        assert (pool.oldest_wait_s, pool.depleted_s, pool.stalled) == (0.0, 0.0, False)
        await pool.acquire(100)
        first = asyncio.create_task(pool.acquire(10))
        await settle()
        now[0] += 0.5
        assert pool.oldest_wait_s == 0.5 and not pool.stalled
        now[0] += request_memory.STALLED_AFTER_S
        assert pool.stalled and pool.depleted_s == 0.5 + request_memory.STALLED_AFTER_S
        pool.release(100)
        await settle()
        assert first.done() and not pool.stalled and pool.oldest_wait_s == 0.0
        now[0] += 10  # nobody waits: the depleted time stands still
        assert pool.depleted_s == 0.5 + request_memory.STALLED_AFTER_S

    run(body)


def test_a_body_clock_wants_bytes_within_the_grace_and_at_the_rate() -> None:
    """The minimum-rate rule both listeners close slow bodies by, with explicit times."""
    grace = request_memory.BODY_GRACE_S
    clock = BodyClock(100.0, timeout_s=30.0, min_rate=1000)
    assert clock.due == 100.0 + grace, "the first bytes within the grace"
    clock.moved(100.5, 500)
    # By the rate, 500 bytes buy half a second after the grace; a pause is at most the grace.
    assert clock.due == min(100.0 + grace + 0.5, 100.5 + grace)
    clock.moved(101.0, 100_000)  # far ahead of the rate: the pause bound rules
    assert clock.due == 101.0 + grace
    assert not clock.timed_out(clock.due)
    clock.paused(5.0)  # waiting for the pool is not the client's time
    assert clock.due == 106.0 + grace and clock.timeout_at == 135.0
    clock.moved(134.0, 10**9)
    assert clock.due == 135.0 and clock.timed_out(135.0), "all of it within the timeout"
    chunked = BodyClock(0.0, timeout_s=30.0, min_rate=1000)
    chunked.paused(5.0, timeout_too=False)
    assert chunked.timeout_at == 30.0 and chunked.due == 5.0 + grace


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
        small = asyncio.create_task(pool.acquire(60))
        await settle()
        assert not small.done() and pool.waiting == 2
        large.cancel()
        await settle()
        assert large.cancelled() and not small.done() and pool.waiting == 1
        pool.release(50)
        await settle()
        assert small.done() and pool.used == 60 and pool.waiting == 0

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


def test_taking_without_waiting_follows_the_same_rule() -> None:
    """The produce path's synchronous try (no coroutine when there is room) follows the same
    rule as ``acquire``: it takes only what fits, and overtakes a queued waiter as a waiter
    would."""

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
        # 10 bytes fit: they go past the 60 waiting for memory that is not free.
        assert pool.try_acquire(10) and pool.used == 60
        pool.release(60)
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
