"""Time as the event loop saw it: wall time less the stretches the loop could not run.

A broker is live while its heartbeats arrive within the session timeout. The heartbeats are
answered on the operator's own event loop, so a long synchronous step (a pass over 100,000
partitions) that holds the loop past the timeout would make every live broker look dead, and
the next pass would elect no leader for all of them: the helper's 100,000-partition run saw
exactly that, as KRaft did when its controller was overloaded (KAFKA-15019). Measured on this
clock, the time the loop was held does not count against a broker: its heartbeats were
waiting in a socket, not missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

INTERVAL_S = 0.1
"""How often the watch wakes: a late wake-up is time the loop was held."""


class LoopClock:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.held = 0.0
        """Seconds the loop has been held, in all (the watch's lateness, summed)."""
        self.last = clock()
        """When the watch last ran."""
        self._task: asyncio.Task[None] | None = None

    def now(self) -> float:
        """Monotonic seconds that do not advance while the loop is held, including a hold
        that is ending now (the watch has not woken since it began)."""
        t = self.clock()
        pending = max(0.0, t - self.last - INTERVAL_S)
        return t - self.held - pending

    def woke(self) -> None:
        """The watch's wake-up: its lateness is time the loop was held."""
        t = self.clock()
        self.held += max(0.0, t - self.last - INTERVAL_S)
        self.last = t

    def start(self) -> None:
        self.last = self.clock()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            self.woke()
