"""One rule for request work that must not hold the event loop (issues 14 and 36).

Readiness, produce, fetch, replication and the controller's heartbeats all run on one loop: a
request naming many entries (log dirs to alter, partitions to fetch, topics to describe) does
its per-entry work in slices of :data:`LOOP_SLICE_S` and lets the loop serve the others
between them, so a broker answers its probes and heartbeats while it serves the request.
"""

from __future__ import annotations

import asyncio
import time

LOOP_SLICE_S = 0.005
"""The longest a request handler runs per-entry work before it lets the loop serve others."""


class LoopSlice:
    """A handler's clock for its per-entry work: :meth:`due` is cheap enough to ask once per
    entry (a small request never reaches the end of its first slice, so it never yields),
    :meth:`pause` gives the loop a turn and starts the next slice.

    Use as ``if sl.due(): await sl.pause()``: the test is a plain call, so the common small
    request pays no coroutine per entry."""

    __slots__ = ("_end",)

    def __init__(self) -> None:
        self._end = time.monotonic() + LOOP_SLICE_S

    def due(self) -> bool:
        return time.monotonic() >= self._end

    async def pause(self) -> None:
        await asyncio.sleep(0)
        self._end = time.monotonic() + LOOP_SLICE_S
