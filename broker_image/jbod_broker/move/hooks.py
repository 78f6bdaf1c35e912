"""Named points in a move where tests stop the broker dead or hold it still.

Crash tests must hit windows a few microseconds wide (between the swap's two renames), which
a random ``SIGKILL`` from outside almost never does. The engine calls :meth:`MoveHooks.reach`
at each point; from the environment a process can be made to kill itself there or sleep:

``JBOD_MOVE_CRASH_AT=between_renames``
    ``SIGKILL`` this process the first time any move reaches the point (``point@N``: the N-th
    time; several points separated by commas).
``JBOD_MOVE_PAUSE_AT=after_lock:0.5``
    sleep that many seconds at the point, every time.

In-process tests pass a callback instead (for instance one that waits on an event).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping

from ..storage.names import TopicPartition

CRASH_ENV = "JBOD_MOVE_CRASH_AT"
PAUSE_ENV = "JBOD_MOVE_PAUSE_AT"

MID_COPY = "mid_copy"
"""After each chunk of a copy (outside the swap)."""
AFTER_LOCK = "after_lock"
"""The swap holds the manager's, the source's (append) and the future's locks."""
BEFORE_RENAMES = "before_renames"
"""Caught up, state carried over, future flushed; nothing renamed yet."""
BETWEEN_RENAMES = "between_renames"
"""The source is ``-delete``; the future still has its ``-future`` name."""
AFTER_RENAMES = "after_renames"
"""Both renamed; the partition still points at the source log object."""
AFTER_SWAP = "after_swap"
"""Swapped; the ``-delete`` folder has not been deleted yet."""

POINTS = (MID_COPY, AFTER_LOCK, BEFORE_RENAMES, BETWEEN_RENAMES, AFTER_RENAMES, AFTER_SWAP)
ALIASES = {"after_delete_rename": BETWEEN_RENAMES, "after_source_delete_rename": BETWEEN_RENAMES}

HookCallback = Callable[[str, TopicPartition], None]


def _point(name: str) -> str:
    name = ALIASES.get(name.strip(), name.strip())
    if name not in POINTS:
        raise ValueError(f"unknown move hook point {name!r} (known: {', '.join(POINTS)})")
    return name


class MoveHooks:
    def __init__(
        self,
        *,
        crash_at: Mapping[str, int] | None = None,
        pause_at: Mapping[str, float] | None = None,
        callback: HookCallback | None = None,
    ) -> None:
        self._crash = {_point(k): v for k, v in (crash_at or {}).items()}
        self._pause = {_point(k): v for k, v in (pause_at or {}).items()}
        self._callback = callback
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MoveHooks:
        env = os.environ if environ is None else environ
        crash: dict[str, int] = {}
        for item in filter(None, (s.strip() for s in env.get(CRASH_ENV, "").split(","))):
            name, _, nth = item.partition("@")
            crash[name] = int(nth) if nth else 1
        pause: dict[str, float] = {}
        for item in filter(None, (s.strip() for s in env.get(PAUSE_ENV, "").split(","))):
            name, _, secs = item.partition(":")
            pause[name] = float(secs) if secs else 1.0
        return cls(crash_at=crash, pause_at=pause)

    @property
    def active(self) -> bool:
        return bool(self._crash or self._pause or self._callback)

    def reach(self, point: str, tp: TopicPartition) -> None:
        if not (self._crash or self._pause or self._callback):
            return
        if self._callback is not None:
            self._callback(point, tp)
        delay = self._pause.get(point)
        if delay:
            time.sleep(delay)
        nth = self._crash.get(point)
        if nth is not None:
            with self._lock:
                seen = self._seen[point] = self._seen.get(point, 0) + 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)
