"""The one way tests wait: for a condition, never for a fixed time.

A test that sleeps and then asserts is a race (the machine was slower than the sleep) or a
waste (it was faster). Every test polls a condition with :func:`wait_for` (plain code) or
:func:`wait_async` (on an event loop; the check may be a coroutine function, or a plain one
run off the loop with ``in_thread=True`` when it blocks, kubectl say). Both return the check's
first truthy result, and on timeout fail with :class:`WaitTimeout` naming what was awaited and
the last result or error seen, so the failure says what did not happen.

The poll interval is the only sleep: it bounds how late a condition is noticed, not whether
the test passes. It starts short (a condition a thread meets in a millisecond is seen at
once) and grows to ``interval`` (a condition that takes seconds, read from a broker or the API
server, is not asked for a hundred times a second).

What to wait on when nothing observable changes (an absence: "is not retried") is a condition
that proves the code had its chance, such as a later request having been served; never a
quiet period.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
"""Long enough for a loaded 2-core machine; a condition that comes at all comes well within."""
FIRST_INTERVAL_S = 0.01
INTERVAL_S = 0.25
"""The longest pause between two polls; each pause is half as long again as the last."""

Errors = type[BaseException] | tuple[type[BaseException], ...]
What = str | Callable[[], str] | None


class WaitTimeout(AssertionError, TimeoutError):
    """The condition did not come in time: a test failure, and a TimeoutError for callers
    that catch one (the helpers this module replaced raised either)."""


def wait_for(
    check: Callable[[], T | None],
    what: What = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    interval: float = INTERVAL_S,
    retry: Errors = (),
    fail_fast: Errors = (),
) -> T:
    """Call ``check`` until it returns something truthy, and return that.

    ``retry``: exceptions that mean "not yet" (a read while a broker restarts); any other
    exception, or one of ``fail_fast`` (the condition can no longer come), is raised at once.
    ``what`` (a text, or a function giving one at failure time with the state then) names the
    condition; without it the message names the check's source line.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    pause = min(FIRST_INTERVAL_S, interval)
    while True:
        try:
            last = check()
            if last:
                return last
        except fail_fast:
            raise
        except retry as e:
            last = e
        if time.monotonic() >= deadline:
            raise WaitTimeout(_message(check, what, timeout, last))
        time.sleep(pause)
        pause = min(pause * 1.5, interval)


@overload
async def wait_async(
    check: Callable[[], Awaitable[T | None]],
    what: What = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    interval: float = INTERVAL_S,
    retry: Errors = (),
    fail_fast: Errors = (),
    in_thread: bool = False,
) -> T: ...


@overload
async def wait_async(
    check: Callable[[], T | None],
    what: What = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    interval: float = INTERVAL_S,
    retry: Errors = (),
    fail_fast: Errors = (),
    in_thread: bool = False,
) -> T: ...


async def wait_async(
    check: Callable[[], Any],
    what: What = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    *,
    interval: float = INTERVAL_S,
    retry: Errors = (),
    fail_fast: Errors = (),
    in_thread: bool = False,
) -> Any:
    """:func:`wait_for` on an event loop, which keeps running between polls.

    ``check`` may return an awaitable (a coroutine function), which is awaited; with
    ``in_thread`` a plain ``check`` that blocks runs in a worker thread instead of on the loop.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    pause = min(FIRST_INTERVAL_S, interval)
    while True:
        try:
            got = await asyncio.to_thread(check) if in_thread else check()
            if isinstance(got, Awaitable):
                got = await got
            last = got
            if got:
                return got
        except fail_fast:
            raise
        except retry as e:
            last = e
        if time.monotonic() >= deadline:
            raise WaitTimeout(_message(check, what, timeout, last))
        await asyncio.sleep(pause)
        pause = min(pause * 1.5, interval)


def _message(check: Callable[..., object], what: What, timeout: float, last: object) -> str:
    if callable(what):
        what = what()
    if what is None:
        what = _where(check)
    return f"timed out after {timeout}s waiting for {what}; last: {last!r}"


def _where(check: Callable[..., object]) -> str:
    """The check's name and source line: a lambda's line says what it waited for."""
    code = getattr(check, "__code__", None)
    name = getattr(check, "__qualname__", repr(check))
    if code is None:
        return name
    return f"{name} at {code.co_filename}:{code.co_firstlineno}"
