"""The LogDirMove daemon's waits give way to kopf's stop flag (handlers.context.unless_stopped).

kopf holds a deletion until the object's timers have exited, so a long poll that ignored the
flag would hold every deletion for kopf's cancellation poll (60 s by default).
"""

from __future__ import annotations

import asyncio
import gc
import warnings

from jbod_operator.handlers.context import unless_stopped as _unless_stopped


class Flag:
    """Stands in for kopf.DaemonStopped: truthy once set, ``await wait()`` until then."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def __bool__(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


def test_result_when_not_stopped() -> None:
    async def main() -> int | None:
        return await _unless_stopped(asyncio.sleep(0.01, 7), Flag())  # type: ignore[arg-type]

    assert asyncio.run(main()) == 7


def test_stop_cancels_the_wait_at_once() -> None:
    async def main() -> tuple[int | None, float, bool]:
        flag = Flag()
        cancelled = False

        async def long_poll() -> int:
            nonlocal cancelled
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled = True
                raise
            return 1

        loop = asyncio.get_running_loop()
        loop.call_later(0.05, flag.event.set)
        t0 = loop.time()
        got = await _unless_stopped(long_poll(), flag)  # type: ignore[arg-type]
        return got, loop.time() - t0, cancelled

    got, took, cancelled = asyncio.run(main())
    assert got is None and cancelled and took < 5


def test_already_stopped_never_starts_the_coroutine() -> None:
    started = False

    async def work() -> int:
        nonlocal started
        started = True
        return 1

    async def main() -> int | None:
        flag = Flag()
        flag.event.set()
        return await _unless_stopped(work(), flag)  # type: ignore[arg-type]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would fail here
        assert asyncio.run(main()) is None
        gc.collect()
    assert not started


def test_errors_propagate() -> None:
    async def boom() -> int:
        raise ValueError("no")

    async def main() -> int | None:
        return await _unless_stopped(boom(), Flag())  # type: ignore[arg-type]

    try:
        asyncio.run(main())
    except ValueError as e:
        assert str(e) == "no"
    else:
        raise AssertionError("the error was swallowed")
