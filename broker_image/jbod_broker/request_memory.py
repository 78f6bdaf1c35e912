"""The request-memory pool: Kafka's ``queued.max.request.bytes`` for request bodies.

Without it, memory grows with the number of bodies arriving at once: ten 99 MiB produce
bodies took a broker from 258 to 1,331 MiB (issue 14), and under a pod memory limit that is an
OOM kill. With it, the bodies a broker holds add up to at most the pool's capacity. A request
reserves its body's size once the body's first bytes have arrived (the whole size, in one
grant; chunk by chunk when the size is not known up front) and gives it back when it is
answered. A frame's size alone reserves nothing (issue 36: three connections each sending a
4-byte size of 100 MiB and nothing else used to hold 200 MiB of the pool and queue every
later request behind the third). A request that does not fit waits, without reading, so its
bytes stay in the client and the kernel; a body larger than the whole pool can never fit and
is refused by the caller.

Why the whole size in one grant, not chunk by chunk as bytes arrive: bodies that each hold
part of the pool and wait for more can wait for each other forever (64 concurrent 99 MiB bodies
under a 128 MiB pool would each hold 2 MiB and none finish). A single grant per body cannot
deadlock. What stops a body from holding its grant without filling it is :class:`BodyClock`:
after a grace it must keep ``request.body.min.bytes.per.second`` on average and never pause
for the grace, or its connection is closed.

The granting rule (no head-of-line blocking, bounded starvation):

- a request that fits in what is free is granted at once, ahead of older waiters that do
  not fit: a 1 KiB produce never waits behind a 100 MiB body waiting for memory held by
  others;
- against starvation of a large request by a stream of smaller ones, the oldest waiter may
  be overtaken by at most the pool's capacity in bytes; after that, nothing is granted
  before it until it is (it waits only for memory already held, which comes back when its
  holders are answered or closed by their :class:`BodyClock`).

Every path gives memory back: :meth:`Reservation.release` in a ``finally``, and a waiter
cancelled (a timeout, a closed connection) leaves the queue, or returns what it had just been
granted. A stall is visible: :attr:`RequestMemoryPool.oldest_wait_s` and
:attr:`RequestMemoryPool.depleted_s` (after Kafka's MemoryPoolDepletedTimeTotal), read by
/readyz and /metrics.

Thread-safety: none; one event loop owns a pool (the broker's).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

STALLED_AFTER_S = 1.0
"""A pool whose oldest waiter has waited this long is reported stalled (/readyz, /metrics):
a produce answered within a millisecond or two never waits this long for memory unless the
pool is held by bodies that are slow to arrive or to be answered."""

BODY_GRACE_S = 2.0
""":class:`BodyClock`'s grace: how long a body may go without a byte, and how long before its
average rate counts. Longer than a loaded machine's scheduling hiccup, well inside
``request.body.timeout.ms`` (30 s)."""


@dataclass(eq=False)
class _Waiter:
    n: int
    fut: asyncio.Future[None]
    since: float


class RequestMemoryPool:
    """Bytes of request bodies the broker may hold at once; see the module for the rule."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a pool of {capacity} bytes holds nothing")
        self.capacity = capacity
        self.used = 0
        self._waiters: list[_Waiter] = []
        self._overtaken = 0
        """Bytes granted to later requests while the oldest waiter waits."""
        self._depleted_since: float | None = None
        self._depleted_total = 0.0

    @property
    def available(self) -> int:
        return self.capacity - self.used

    @property
    def waiting(self) -> int:
        """Requests waiting for memory."""
        return sum(1 for w in self._waiters if not w.fut.done())

    @property
    def oldest_wait_s(self) -> float:
        """How long the oldest waiter has waited (0: nobody waits)."""
        for w in self._waiters:
            if not w.fut.done():
                return time.monotonic() - w.since
        return 0.0

    @property
    def stalled(self) -> bool:
        return self.oldest_wait_s >= STALLED_AFTER_S

    @property
    def depleted_s(self) -> float:
        """Seconds, in total, during which some request waited for memory."""
        if self._depleted_since is None:
            return self._depleted_total
        return self._depleted_total + time.monotonic() - self._depleted_since

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes now if they are free and the oldest waiter may be overtaken;
        ``False`` otherwise. The granting rule in one place (:meth:`_grant` applies it to the
        waiters), and what a caller on the hot path (a produce body) tries without the cost
        of a coroutine."""
        if self.used + n > self.capacity:
            return False
        if self._waiters:
            if self._overtaken >= self.capacity:
                return False
            self._overtaken += n
        self.used += n
        return True

    async def acquire(self, n: int) -> None:
        """Wait until ``n`` bytes are free and take them; ValueError if they never can be."""
        if n > self.capacity:
            raise ValueError(f"{n} bytes are more than the pool's {self.capacity}")
        if n <= 0 or self.try_acquire(n):
            return
        w = _Waiter(n, asyncio.get_running_loop().create_future(), time.monotonic())
        if not self._waiters:
            self._overtaken = 0
            self._depleted_since = w.since
        self._waiters.append(w)
        try:
            await w.fut
        except asyncio.CancelledError:
            if w.fut.done() and not w.fut.cancelled():
                self.release(n)  # granted, then cancelled before it could resume
            else:
                self._leave(w)
                self._grant()  # the ones behind it may fit now
            raise

    def release(self, n: int) -> None:
        if n <= 0:
            return
        if n > self.used:
            raise RuntimeError(f"releasing {n} bytes, but only {self.used} are reserved")
        self.used -= n
        if self._waiters:
            self._grant()

    def _leave(self, w: _Waiter) -> None:
        """``w`` leaves the queue (granted or cancelled); a new oldest waiter starts with no
        overtaking counted against it."""
        if w not in self._waiters:
            return  # a cancelled waiter that _grant cleared already
        first = self._waiters[0] is w
        self._waiters.remove(w)
        if first:
            self._overtaken = 0
        if not self._waiters and self._depleted_since is not None:
            self._depleted_total += time.monotonic() - self._depleted_since
            self._depleted_since = None

    def _grant(self) -> None:
        for w in list(self._waiters):
            if w.fut.done():  # cancelled while waiting
                self._leave(w)
                continue
            if self.used + w.n > self.capacity:
                if self._overtaken >= self.capacity:
                    return  # the oldest has been overtaken enough: it is next
                continue
            if w is not self._waiters[0]:
                self._overtaken += w.n
            self._leave(w)
            self.used += w.n
            w.fut.set_result(None)
            if self.used >= self.capacity:
                return


class Reservation:
    """What one request holds in the pool: grows while its body is read, released once."""

    def __init__(self, pool: RequestMemoryPool) -> None:
        self.pool = pool
        self.bytes = 0

    async def grow(self, n: int) -> None:
        await self.pool.acquire(n)
        self.bytes += n

    def try_grow(self, n: int) -> bool:
        """:meth:`grow` without waiting: ``False`` (nothing taken) if the pool cannot give
        ``n`` bytes now; ``n`` must be within the pool's capacity."""
        if self.pool.try_acquire(n):
            self.bytes += n
            return True
        return False

    def release(self) -> None:
        held = self.bytes
        if held:
            self.bytes = 0
            self.pool.release(held)


class BodyClock:
    """When a request body's next bytes are due: the minimum-rate rule of both listeners.

    From its first byte, a body must never go :data:`BODY_GRACE_S` without a byte, and after
    that grace must have arrived at ``min_rate`` bytes/s on average; all of it within
    ``timeout_s`` (``request.body.timeout.ms``). Time spent waiting for the pool is not the
    client's: :meth:`paused` moves the clock on by it. So a body holds its reservation only
    while it fills it: a client that sends a size and one byte, then nothing, is closed
    after the grace, long before ``request.body.timeout.ms``; one trickling below the rate
    soon after.
    """

    __slots__ = ("_last", "_min_rate", "_start", "_timeout_s", "received")

    def __init__(self, now: float, *, timeout_s: float, min_rate: int) -> None:
        self._start = self._last = now
        self._timeout_s = timeout_s
        self._min_rate = min_rate
        self.received = 0

    def moved(self, now: float, received: int) -> None:
        """``received`` bytes of the body have arrived, the last of them at ``now``."""
        self._last = now
        self.received = received

    def paused(self, seconds: float, *, timeout_too: bool = True) -> None:
        """The body waited ``seconds`` for the pool. ``timeout_too=False``: the wait counts
        against ``request.body.timeout.ms`` still (a body of unknown size, reserving chunk by
        chunk, must not wait forever for memory other such bodies hold)."""
        self._start += seconds
        self._last += seconds
        if not timeout_too:
            self._timeout_s -= seconds

    @property
    def timeout_at(self) -> float:
        return self._start + self._timeout_s

    @property
    def due(self) -> float:
        """The time by which more bytes must have come (or the body be whole)."""
        by_rate = self._start + BODY_GRACE_S + self.received / self._min_rate
        return min(self.timeout_at, by_rate, self._last + BODY_GRACE_S)

    def timed_out(self, now: float) -> bool:
        """Whether a body overdue at ``now`` broke the overall timeout (else the rate)."""
        return now >= self.timeout_at
