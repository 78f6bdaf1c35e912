"""Before pytest-timeout ends a test, print where its asyncio tasks wait.

pytest-timeout dumps each thread's stack; for an async test the main thread's only says that
the event loop is in ``select``, not which ``await`` the test is stuck on. A timer thread,
started for each test, prints every task of each running loop with its stack a few seconds
before the timeout, so a test that hangs says where (a wait for a phase, a producer that does
not stop, a read that never answers).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Iterator

import pytest

LEAD_S = 20.0
"""How long before the test's timeout the tasks are printed."""


def _timeout_of(item: pytest.Item) -> float | None:
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    raw = item.config.getini("timeout")
    return float(raw) if raw else None


def dump_tasks() -> None:
    """Every task of every running event loop, with the chain of awaits it is in (stderr)."""
    stream = sys.stderr
    loops = [
        o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()
    ]
    for loop in loops:
        try:
            tasks = asyncio.all_tasks(loop)
        except RuntimeError:  # the loop's task set changed under us: one more try
            tasks = asyncio.all_tasks(loop)
        print(f"~~~ {len(tasks)} asyncio tasks of loop {id(loop):#x} ~~~", file=stream)
        for t in tasks:
            print(f"{t!r}, awaiting:", file=stream)
            for line in _await_chain(t.get_coro()):
                print(f"  {line}", file=stream)


def _await_chain(coro: object) -> Iterator[str]:
    """The coroutine's frame and each one it awaits, outermost first (``Task.print_stack``
    shows only the outermost)."""
    seen = 0
    while coro is not None and seen < 50:
        seen += 1
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            code = frame.f_code
            yield f"{code.co_filename}:{frame.f_lineno} in {code.co_name}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)


@pytest.fixture(autouse=True)
def _dump_tasks_before_timeout(request: pytest.FixtureRequest) -> Iterator[None]:
    timeout = _timeout_of(request.node)
    if not timeout or timeout <= LEAD_S:
        yield
        return
    timer = threading.Timer(timeout - LEAD_S, dump_tasks)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
