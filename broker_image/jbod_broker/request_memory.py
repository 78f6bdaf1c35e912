"""The request-memory pool: Kafka's ``queued.max.request.bytes`` for request bodies.

Without it, memory grows with the number of bodies arriving at once: ten 99 MiB produce
bodies took a broker from 258 to 1,331 MiB (issue 14), and under a pod memory limit that is an
OOM kill. With it, the bodies a broker holds add up to at most the pool's capacity. A request
reserves its body's size before the body is read (the whole Content-Length; chunk by chunk
when the size is not known up front) and gives it back when it is answered. A request that
does not fit waits, without reading, so its bytes stay in the client and the kernel; a body
larger than the whole pool can never fit and is refused by the caller.

Waiters are served in arrival order: a large body is not starved by a stream of small ones.
Every path gives memory back: :meth:`Reservation.release` in a ``finally``, and a waiter
cancelled (a timeout, a closed connection) leaves the queue, or returns what it had just been
granted.

Thread-safety: none; one event loop owns a pool (the broker's).
"""

from __future__ import annotations

import asyncio
import collections


class RequestMemoryPool:
    """Bytes of request bodies the broker may hold at once, reserved first come, first served."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a pool of {capacity} bytes holds nothing")
        self.capacity = capacity
        self.used = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @property
    def available(self) -> int:
        return self.capacity - self.used

    @property
    def waiting(self) -> int:
        """Requests waiting for memory."""
        return sum(1 for _, f in self._waiters if not f.done())

    def try_acquire(self, n: int) -> bool:
        """Take ``n`` bytes now if they are free and nobody waits before; ``False`` otherwise.

        The first-come-first-served rule in one place: :meth:`acquire` starts with it, and a
        caller on the hot path (a produce body) tries it without the cost of a coroutine."""
        if not self._waiters and self.used + n <= self.capacity:
            self.used += n
            return True
        return False

    async def acquire(self, n: int) -> None:
        """Wait until ``n`` bytes are free and take them; ValueError if they never can be."""
        if n > self.capacity:
            raise ValueError(f"{n} bytes are more than the pool's {self.capacity}")
        if n <= 0 or self.try_acquire(n):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(n)  # granted, then cancelled before it could resume
            else:
                if entry in self._waiters:
                    self._waiters.remove(entry)
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

    def _grant(self) -> None:
        while self._waiters:
            n, fut = self._waiters[0]
            if fut.done():  # cancelled while waiting
                self._waiters.popleft()
                continue
            if self.used + n > self.capacity:
                return
            self._waiters.popleft()
            self.used += n
            fut.set_result(None)


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
