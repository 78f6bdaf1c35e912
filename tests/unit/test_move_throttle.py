"""The shared move throttle: rate accuracy, sharing between workers, live rate changes."""

from __future__ import annotations

import threading
import time

import pytest

from jbod_broker.move.throttle import MAX_CHUNK, MIN_CHUNK, Throttle
from tests.waiting import wait_for


def _take(throttle: Throttle, total: int, chunk: int) -> None:
    left = total
    while left > 0:
        n = min(chunk, left)
        assert throttle.acquire(n)
        left -= n


def test_unlimited_never_waits() -> None:
    t = Throttle(None)
    start = time.monotonic()
    for _ in range(1000):
        assert t.acquire(MAX_CHUNK)
    assert time.monotonic() - start < 0.5
    assert t.total_bytes == 1000 * MAX_CHUNK
    assert t.chunk_size() == MAX_CHUNK


@pytest.mark.parametrize("rate", [5_000_000, 20_000_000])
def test_average_rate_is_accurate(rate: int) -> None:
    t = Throttle(rate)
    total = rate // 2  # half a second of bytes
    start = time.monotonic()
    _take(t, total, t.chunk_size())
    elapsed = time.monotonic() - start
    achieved = total / elapsed
    # Late wake-ups do not add up (the bucket pays for real time), so only the last one
    # counts; the margin is for a loaded machine.
    assert abs(achieved - rate) / rate < 0.05, f"{achieved:.0f} B/s for {rate}"


def test_workers_share_one_rate() -> None:
    rate = 10_000_000
    t = Throttle(rate)
    per_worker = rate // 10
    threads = [threading.Thread(target=_take, args=(t, per_worker, 100_000)) for _ in range(3)]
    start = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.monotonic() - start
    assert elapsed == pytest.approx(3 * per_worker / rate, rel=0.1)


def test_rate_change_wakes_waiters() -> None:
    t = Throttle(1000)  # 1 MB would take ~17 minutes
    done = threading.Event()

    def worker() -> None:
        t.acquire(1_000_000)
        done.set()

    th = threading.Thread(target=worker)
    th.start()
    wait_for(lambda: t.waiters == 1, "the worker blocked in acquire")
    assert not done.is_set()
    t.set_rate(None)
    assert done.wait(2)
    th.join()


def test_rate_raised_while_waiting_applies_to_the_wait() -> None:
    t = Throttle(100_000)
    t.acquire(0)
    start = time.monotonic()
    th = threading.Thread(target=t.acquire, args=(1_000_000,))  # 10 s at the first rate
    th.start()
    wait_for(lambda: t.waiters == 1, "the worker blocked in acquire")
    t.set_rate(100_000_000)
    th.join(2)
    assert not th.is_alive()
    assert time.monotonic() - start < 1


def test_stop_condition_releases_a_waiter() -> None:
    t = Throttle(1000)
    stop = threading.Event()
    result: list[bool] = []
    th = threading.Thread(target=lambda: result.append(t.acquire(10**6, stop.is_set)))
    th.start()
    wait_for(lambda: t.waiters == 1, "the worker blocked in acquire")
    stop.set()
    t.wake()
    th.join(2)
    assert result == [False]


def test_charge_is_paid_by_later_requests() -> None:
    rate = 10_000_000
    t = Throttle(rate)
    t.charge(rate // 10)  # 0.1 s worth, copied without waiting
    start = time.monotonic()
    t.acquire(1)
    waited = time.monotonic() - start
    assert 0.09 <= waited < 0.2


def test_chunk_size_follows_the_rate() -> None:
    assert Throttle(1000).chunk_size() == MIN_CHUNK
    assert Throttle(20_000_000).chunk_size() == 2_000_000 - 2_000_000 % 4096
    assert Throttle(10**10).chunk_size() == MAX_CHUNK


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_invalid_rates_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="throttle rate"):
        Throttle(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="throttle rate"):
        Throttle(None).set_rate(bad)  # type: ignore[arg-type]
