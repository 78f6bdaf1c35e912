"""tests/waiting.py: the first truthy result is returned, errors are raised unless retried,
and a timeout names what was awaited and the last thing seen."""

from __future__ import annotations

import asyncio
import itertools
import threading

import pytest

from tests.waiting import WaitTimeout, wait_async, wait_for


def test_the_first_truthy_result_is_returned() -> None:
    calls = itertools.count()
    assert wait_for(lambda: next(calls) >= 3 and "there") == "there"


def test_a_timeout_names_what_was_awaited_and_the_last_result() -> None:
    with pytest.raises(WaitTimeout, match=r"waiting for the moon; last: 0") as e:
        wait_for(lambda: 0, "the moon", timeout=0.05)
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, AssertionError)


def test_without_a_name_the_timeout_points_at_the_check() -> None:
    with pytest.raises(WaitTimeout, match=r"<lambda> at .*test_waiting.py:\d+"):
        wait_for(lambda: None, timeout=0.05)


def test_a_name_given_as_a_function_is_asked_at_failure_time() -> None:
    state = {"n": 0}

    def check() -> bool:
        state["n"] += 1
        return False

    with pytest.raises(WaitTimeout, match=r"polled \d+ times"):
        wait_for(check, lambda: f"polled {state['n']} times", timeout=0.05)


def test_errors_are_raised_at_once_unless_retried() -> None:
    def boom() -> bool:
        raise KeyError("gone")

    with pytest.raises(KeyError):
        wait_for(boom, timeout=60)
    with pytest.raises(WaitTimeout, match="KeyError"):
        wait_for(boom, timeout=0.05, retry=KeyError)


def test_fail_fast_wins_over_retry() -> None:
    def boom() -> bool:
        raise ValueError("can no longer come")

    with pytest.raises(ValueError):
        wait_for(boom, timeout=60, retry=Exception, fail_fast=ValueError)


def test_another_thread_s_condition_is_seen() -> None:
    done = threading.Event()
    threading.Thread(target=done.set).start()
    assert wait_for(done.is_set, "the thread")


def test_async_checks_may_be_coroutines_plain_or_run_in_a_thread() -> None:
    async def go() -> None:
        flag = asyncio.Event()
        asyncio.get_running_loop().call_soon(flag.set)

        async def is_set() -> bool:
            return flag.is_set()

        assert await wait_async(is_set, "the flag")
        assert await wait_async(flag.is_set, "the flag, plain")
        assert await wait_async(threading.current_thread, "a thread", in_thread=True) is not (
            threading.main_thread()
        )
        with pytest.raises(WaitTimeout, match="never"):
            await wait_async(lambda: False, "never", 0.05)

    asyncio.run(go())
