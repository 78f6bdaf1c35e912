"""A producer and a consumer that count: the proof that no acknowledged record is lost or
duplicated through failures.

The producer sends each value once (never retries a value whose outcome it does not know: a
retry could legitimately duplicate it, which would blur the check); values carry a sequence
number. The consumer reads every partition from offset 0 up to the high watermark, following
leadership. ``verify`` then demands: every acknowledged value read exactly once, no value read
twice, values in send order within each partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches

LeaderLookup = Callable[[TopicPartition], BrokerClient]
FILLER = b"fill:"
"""Values that only add bulk (to make moves take time); ``verify`` does not count them."""


async def fill_bytes(
    leader: LeaderLookup, tps: list[TopicPartition], mib_per_partition: float
) -> None:
    """Bulk data: 16 records of 4 KiB per batch, acks=all."""
    payload = FILLER + b"x" * 4091
    batch = build_batch([(None, payload)] * 16)
    n = max(1, int(mib_per_partition * 1024 * 1024 / len(batch)))
    for tp in tps:
        for _ in range(n):
            await leader(tp).produce(tp.topic, tp.partition, batch, acks=-1)


@dataclass
class CountingProducer:
    leader: LeaderLookup
    tps: list[TopicPartition]
    records_per_batch: int = 5
    acks: int = -1
    timeout_ms: int = 10_000
    acked: dict[TopicPartition, list[bytes]] = field(default_factory=dict)
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    """Distinguishes this producer's values from another's (each counts from 1)."""
    sent: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    _seq: int = 0
    _task: asyncio.Task[None] | None = None
    _stop: bool = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stop = True
        if self._task is not None:
            await self._task

    async def produce_one_round(self) -> None:
        for tp in self.tps:
            values = []
            for _ in range(self.records_per_batch):
                self._seq += 1
                values.append(
                    b"%s-%d-%s-%08d"
                    % (tp.topic.encode(), tp.partition, self.tag.encode(), self._seq)
                )
            batch = build_batch([(None, v) for v in values])
            self.sent += len(values)
            try:
                await self.leader(tp).produce(
                    tp.topic, tp.partition, batch, acks=self.acks, timeout_ms=self.timeout_ms
                )
            except KafkaError as e:
                self.errors[e.kafka_error] = self.errors.get(e.kafka_error, 0) + 1
                await asyncio.sleep(0.05)
                continue
            self.acked.setdefault(tp, []).extend(values)

    async def _run(self) -> None:
        while not self._stop:
            await self.produce_one_round()
            await asyncio.sleep(0.005)

    @property
    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())


async def consume_all(
    leader: LeaderLookup, tp: TopicPartition, *, until: int | None = None, timeout_s: float = 60
) -> list[bytes]:
    """Every value of ``tp`` from offset 0 up to the high watermark (and at least ``until``)."""
    out: list[bytes] = []
    offset = 0
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            data, hw = await leader(tp).fetch(tp.topic, tp.partition, offset, max_wait_ms=200)
        except KafkaError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)
            continue
        for pos, hdr in iter_batches(data):
            _, recs = decode_batch(data, pos)
            out += [r.value or b"" for r in recs if r.offset >= offset]
            offset = hdr.next_offset
        if not data and offset >= hw and (until is None or offset >= until):
            return out
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"{tp}: consumed up to {offset}, high watermark {hw}")


def verify(
    acked: dict[TopicPartition, list[bytes]], consumed: dict[TopicPartition, list[bytes]]
) -> None:
    for tp, all_values in consumed.items():
        values = [v for v in all_values if not v.startswith(FILLER)]
        dupes = len(values) - len(set(values))
        assert dupes == 0, f"{tp}: {dupes} duplicated values"
        by_producer: dict[bytes, list[int]] = {}
        for v in values:
            head, seq = v.rsplit(b"-", 1)
            by_producer.setdefault(head.rsplit(b"-", 1)[1], []).append(int(seq))
        for tag, seqs in by_producer.items():
            assert seqs == sorted(seqs), f"{tp}: values of producer {tag!r} out of order"
    for tp, values in acked.items():
        got = set(consumed.get(tp, []))
        lost = [v for v in values if v not in got]
        assert not lost, f"{tp}: {len(lost)} acknowledged values lost, e.g. {lost[:3]}"


@contextlib.asynccontextmanager
async def running(producer: CountingProducer) -> AsyncIterator[CountingProducer]:
    producer.start()
    try:
        yield producer
    finally:
        await producer.stop()
