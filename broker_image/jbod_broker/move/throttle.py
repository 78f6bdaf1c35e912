"""The one throttle every move worker shares (KIP-113's ``intra.broker.throttled.rate``).

A token bucket kept as two running totals: bytes *granted* to workers and bytes *paid for* by
the passing of time at the current rate. A worker asks for the bytes of its next chunk before
copying it and waits until time has paid for them, so N bytes take N / rate seconds however
many workers share the bucket (pay-before: the figure is never overshot by a first burst).
Idle time earns a little credit, at most ``burst_seconds`` worth, so a worker that was busy
elsewhere does not lose its share.

The rate can change while moves run: :meth:`Throttle.set_rate` settles what was paid at the
old rate and wakes every waiter, which re-computes its wait at the new rate; chunks are sized
from the rate (about a tenth of a second of bytes, see :meth:`Throttle.chunk_size`) so a change
takes effect within that time. ``None`` means unlimited (Kafka's default, ``Long.MAX_VALUE``).

Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

MIN_CHUNK = 16 * 1024
MAX_CHUNK = 8 * 1024 * 1024
_PAGE = 4096
_MAX_WAIT = 0.25  # seconds; waiters re-check their stop condition at least this often


class Throttle:
    def __init__(
        self,
        rate: int | None = None,
        *,
        burst_seconds: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_rate(rate)
        if burst_seconds < 0:
            raise ValueError("burst_seconds must not be negative")
        self._rate = rate
        self._burst_seconds = burst_seconds
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._granted = 0.0
        self._paid = 0.0
        self._last = clock()
        self._total = 0
        self._waiting = 0

    @property
    def rate(self) -> int | None:
        """Bytes per second shared by all workers; ``None`` when unlimited."""
        return self._rate

    @property
    def total_bytes(self) -> int:
        """Every byte granted or charged since creation (for metrics)."""
        return self._total

    @property
    def waiters(self) -> int:
        """Workers blocked in :meth:`acquire` right now: a test waits for one to be blocked
        before it changes the rate, so the wake-up path is the one exercised."""
        with self._cond:
            return self._waiting

    def set_rate(self, rate: int | None) -> None:
        """Change the rate now; waiting workers continue at the new one."""
        _check_rate(rate)
        with self._cond:
            self._settle()
            if rate is None or self._rate is None:
                self._paid = self._granted  # no debt carried across unlimited
            self._rate = rate
            self._cond.notify_all()

    def wake(self) -> None:
        """Make every waiter re-check its stop condition (cancellation, shutdown)."""
        with self._cond:
            self._cond.notify_all()

    def chunk_size(self) -> int:
        """How many bytes a worker should copy per request: ~0.1 s worth, 16 KiB to 8 MiB."""
        rate = self._rate
        if rate is None:
            return MAX_CHUNK
        size = min(MAX_CHUNK, max(MIN_CHUNK, rate // 10))
        return size - size % _PAGE

    def charge(self, nbytes: int) -> None:
        """Count bytes copied without waiting (the swap's last bytes, under the append lock):
        they are paid for by the next requests, so the average rate still holds."""
        with self._cond:
            self._settle()
            self._total += nbytes
            self._granted += nbytes
            if self._rate is None:
                self._paid = self._granted

    def acquire(self, nbytes: int, should_stop: Callable[[], bool] | None = None) -> bool:
        """Wait until ``nbytes`` may be copied; ``False`` if ``should_stop`` said so first."""
        if nbytes < 0:
            raise ValueError("nbytes must not be negative")
        with self._cond:
            self._settle()
            self._total += nbytes
            self._granted += nbytes
            ticket = self._granted
            if self._rate is None:
                self._paid = self._granted
                return True
            while True:
                if should_stop is not None and should_stop():
                    return False
                self._settle()
                rate = self._rate
                if rate is None or self._paid >= ticket:
                    return True
                self._waiting += 1
                try:
                    self._cond.wait(min(_MAX_WAIT, (ticket - self._paid) / rate))
                finally:
                    self._waiting -= 1

    def _settle(self) -> None:
        """Pay for the time elapsed since the last call, at the current rate (lock held)."""
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = now
        if self._rate is None:
            return
        credit = self._rate * self._burst_seconds
        self._paid = min(self._paid + elapsed * self._rate, self._granted + credit)


def _check_rate(rate: int | None) -> None:
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0):
        raise ValueError(
            f"throttle rate must be a positive number of bytes/s or None, got {rate!r}"
        )
