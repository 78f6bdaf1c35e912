"""Kafka's Java clients (kafka-clients from Maven) against our broker processes (issue 18).

The two programs in ``tests/kafka_java`` run as single-file sources on the Kafka classpath
(:func:`tests.kafka_jars.java_command`): ``CountingProducer`` sends numbered records with the
producer's defaults (idempotence on, acks=all) and prints each acknowledgement as a JSON line
the moment it arrives; ``AssignedConsumer`` reads every partition from its beginning to its end
offset with assigned partitions and prints each record. This module starts them from the event
loop (the controller stub answers the brokers on the same loop, so nothing here blocks it),
collects their lines, and holds the checks both Java tests make: every acknowledged record
exactly once at its acknowledged offset, records in the order they were numbered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jbod_broker.local import LocalCluster
from tests.integration.controller_stub import ControllerStub
from tests.kafka_jars import JAVA_SOURCES, QUICK_START_JVM, java_command
from tests.waiting import wait_async

TS0 = 1_700_000_000_000
"""``CountingProducer.TS0``: record n carries timestamp TS0 + n."""

KEEP_COUNTED_RECORDS = {"retention.ms": "-1"}
"""The topic config a topic counted with ``CountingProducer`` needs on Apache Kafka: its
records carry 2023 times (TS0 + n), which Kafka's 7-day time retention deletes at its next
check, active segment included, and the consumer would then start past them."""


@dataclass
class Env:
    ctl: ControllerStub
    cluster: LocalCluster

    @property
    def bootstrap(self) -> str:
        """Every broker, so a client still bootstraps when one of them was killed."""
        return ",".join(b.kafka_endpoint for b in self.cluster.brokers)

    def tails(self) -> str:
        return "\n".join(f"--- broker {b.broker_id}:\n{b.tail(8)}" for b in self.cluster.brokers)


async def wait_for(pred: Callable[[], bool], timeout_s: float, what: str, env: Env) -> None:
    """:func:`tests.waiting.wait_async`, the brokers' last log lines in the failure."""
    await wait_async(pred, lambda: f"{what}\n{env.tails()}", timeout_s)


@asynccontextmanager
async def broker_cluster(tmp_path: Path, settings: Mapping[str, str]) -> AsyncIterator[Env]:
    """Three broker processes (two log dirs each) under the controller stub, every Kafka
    endpoint known to it (as the operator learns them from heartbeats)."""
    ctl = ControllerStub()
    await ctl.start()
    cluster = LocalCluster(
        str(tmp_path / "cluster"),
        size=3,
        num_dirs=2,
        controller_url=ctl.url,
        settings=dict(settings),
    )
    ctl.cluster = cluster
    env = Env(ctl, cluster)
    try:
        await asyncio.to_thread(cluster.start)
        await wait_for(
            lambda: len(ctl.kafka_endpoints) == 3, 20, "every broker's Kafka endpoint", env
        )
        yield env
    finally:
        await asyncio.to_thread(cluster.stop)
        await ctl.stop()


@dataclass(frozen=True)
class Ack:
    n: int
    partition: int
    offset: int


@dataclass
class JavaProducer:
    """A running ``CountingProducer``: its acknowledgements as they arrive."""

    proc: asyncio.subprocess.Process
    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    done: bool = False
    _stderr: bytes = b""
    _reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        bootstrap: str,
        topic: str,
        partitions: int,
        count: int,
        codecs: Sequence[str],
        *,
        pace_ms: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> JavaProducer:
        args = [bootstrap, topic, str(partitions), str(count), ",".join(codecs), str(pace_ms)]
        args += [f"{k}={v}" for k, v in (settings or {}).items()]
        proc = await asyncio.create_subprocess_exec(
            *java_command(
                str(JAVA_SOURCES / "CountingProducer.java"), args, jvm_options=QUICK_START_JVM
            ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        p = cls(proc)
        p._reader = asyncio.create_task(p._read())
        return p

    async def _read(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        err = asyncio.create_task(self.proc.stderr.read())
        async for raw in self.proc.stdout:
            line = json.loads(raw)
            if line.get("done"):
                self.done = True
            elif "error" in line:
                self.errors.append(f"record {line['n']}: {line['error']}")
            else:
                self.acks.append(Ack(line["n"], line["p"], line["o"]))
        self._stderr = await err

    async def wait(self, timeout_s: float) -> None:
        """Until the program ends; fails with its stderr unless it sent everything."""
        assert self._reader is not None
        try:
            await asyncio.wait_for(self._reader, timeout_s)
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            pytest.fail(f"the Java producer did not finish in {timeout_s}s ({len(self.acks)} acks)")
        assert self.proc.returncode == 0 and self.done, self._stderr.decode()[-4000:]


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: str
    value: str
    timestamp: int
    headers: tuple[tuple[str, str], ...]

    @property
    def n(self) -> int:
        return int(dict(self.headers)["n"])


async def consume(bootstrap: str, topic: str, partitions: int) -> list[Consumed]:
    """Every record of the topic, read by ``AssignedConsumer`` from the beginning to the end
    offsets it saw at its start."""
    proc = await asyncio.create_subprocess_exec(
        *java_command(
            str(JAVA_SOURCES / "AssignedConsumer.java"),
            [bootstrap, topic, str(partitions)],
            jvm_options=QUICK_START_JVM,
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-4000:]
    got = []
    for raw in out.splitlines():
        r: dict[str, Any] = json.loads(raw)
        got.append(
            Consumed(r["p"], r["o"], r["key"], r["value"], r["ts"], tuple(map(tuple, r["headers"])))
        )
    return got


def check_exactly_once_in_order(acks: Sequence[Ack], got: Sequence[Consumed]) -> None:
    """Every acknowledged record at its acknowledged offset, none twice, and per partition the
    records in the order they were numbered (the producer sent them so); offsets consecutive."""
    at = {(r.partition, r.offset): r for r in got}
    assert len(at) == len(got), "an offset read twice"
    ns = [r.n for r in got]
    assert len(set(ns)) == len(ns), f"{len(ns) - len(set(ns))} records duplicated"
    for a in acks:
        r = at.get((a.partition, a.offset))
        assert r is not None, f"acknowledged record {a} lost"
        assert r.n == a.n, f"acknowledged record {a} is record {r.n} in the log"
    for p in {r.partition for r in got}:
        part = sorted((r for r in got if r.partition == p), key=lambda r: r.offset)
        offs = [r.offset for r in part]
        assert offs == list(range(offs[0], offs[0] + len(offs)))
        pn = [r.n for r in part]
        assert pn == sorted(pn), f"partition {p}: records out of order"
