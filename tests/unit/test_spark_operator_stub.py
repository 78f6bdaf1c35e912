"""The Spark operator stand-in the e2e and integration tiers use (tests/spark_operator_stub.py)
keeps watching through the API server's transient refusals, as a real operator's informer
does; anything else still ends it, so a bug in the stub is not hidden."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jbod_operator.clients.kube import ApiError
from tests.spark_operator_stub import SparkOperatorStub
from tests.waiting import wait_async


class FlakyKube:
    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.lists = 0

    async def list(self, res: Any, ns: str) -> list[dict[str, Any]]:
        self.lists += 1
        if self.statuses:
            status = self.statuses.pop(0)
            raise ApiError(status, "Reason", "storage is (re)initializing", "GET", "/apis/x")
        return []


async def watch_until(kube: FlakyKube, stub: SparkOperatorStub, lists: int) -> None:
    await wait_async(
        lambda: kube.lists >= lists or (stub._task is not None and stub._task.done()),
        f"{lists} lists, or the stub ended",
    )


async def test_a_429_or_a_5xx_is_retried_on_the_next_look(tmp_path: Path) -> None:
    kube = FlakyKube(429, 503)
    stub = SparkOperatorStub(kube, "ns", tmp_path, poll_seconds=0.001).start()  # type: ignore[arg-type]
    await asyncio.wait_for(watch_until(kube, stub, 3), 10)
    assert stub._task is not None and not stub._task.done()
    assert len(stub.api_errors) == 2
    await stub.aclose()


async def test_any_other_refusal_ends_the_stub(tmp_path: Path) -> None:
    kube = FlakyKube(403)
    stub = SparkOperatorStub(kube, "ns", tmp_path, poll_seconds=0.001).start()  # type: ignore[arg-type]
    await asyncio.wait_for(watch_until(kube, stub, 2), 10)
    assert stub._task is not None
    with pytest.raises(ApiError):
        await stub._task
