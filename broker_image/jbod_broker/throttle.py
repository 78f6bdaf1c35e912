"""Replication throttles for the event loop (the leader and follower rates of Kafka's
``--throttle``). A token bucket holding at most one second of the rate; 0 means unlimited.
The rate can change at any time and takes effect on the next call.
"""

from __future__ import annotations

import asyncio
import time


class AsyncThrottle:
    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._tokens = float(rate)
        self._stamp = time.monotonic()

    def set_rate(self, rate: int) -> None:
        self._refill()
        self.rate = rate
        self._tokens = min(self._tokens, float(rate))

    def _refill(self) -> None:
        now = time.monotonic()
        if self.rate > 0:
            self._tokens = min(float(self.rate), self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def exceeded(self) -> bool:
        """Leader side: Kafka returns no data for throttled replicas while over quota."""
        if self.rate <= 0:
            return False
        self._refill()
        return self._tokens <= 0

    def record(self, nbytes: int) -> None:
        if self.rate > 0:
            self._refill()
            self._tokens -= nbytes

    async def acquire(self, nbytes: int) -> None:
        """Follower side: account for bytes already fetched and wait off any debt."""
        if self.rate <= 0:
            return
        self.record(nbytes)
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)
