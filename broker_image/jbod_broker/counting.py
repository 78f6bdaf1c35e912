"""A producer and a consumer that count: the proof that no acknowledged record is lost or
duplicated through failures.

The producer sends each value once (never retries a value whose outcome it does not know: a
retry could legitimately duplicate it, which would blur the check); values carry a sequence
number. With ``retry_errors`` it is the other client instead, the one that retries on every
error answer until the values are acknowledged: with exact acknowledgement (an error answer
only for records that were not appended, issue 14) even that client never duplicates a value.
The consumer reads every partition from offset 0 up to the high watermark, following
leadership. ``verify`` then demands: every acknowledged value read exactly once, no value read
twice, values in send order within each partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches

LeaderLookup = Callable[[TopicPartition], BrokerClient]
AnswerHook = Callable[[TopicPartition, "wire.ProduceResponse | KafkaError"], Awaitable[None]]
"""Told each produce answer (before the next request of that producer is sent)."""
MAX_ATTEMPTS = 20
"""A retrying producer gives a batch up after this many error answers (a broken broker must
fail the test, not hang it)."""
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
    retry_errors: bool = False
    """Send the same values again after an error answer, until they are acknowledged."""
    on_answer: AnswerHook | None = None
    pause_s: float = 0.005
    """Between rounds: the pace, and so how fast the partitions grow."""
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
            attempts = 0
            while True:
                answer: wire.ProduceResponse | KafkaError | None
                try:
                    answer = await self.leader(tp).produce(
                        tp.topic, tp.partition, batch, acks=self.acks, timeout_ms=self.timeout_ms
                    )
                except KafkaError as e:
                    answer = e
                    self.errors[e.kafka_error] = self.errors.get(e.kafka_error, 0) + 1
                if self.on_answer is not None and answer is not None:
                    await self.on_answer(tp, answer)
                if not isinstance(answer, KafkaError):
                    self.acked.setdefault(tp, []).extend(values)
                    break
                await asyncio.sleep(0.05)
                attempts += 1
                if not self.retry_errors or attempts >= MAX_ATTEMPTS:
                    break

    async def _run(self) -> None:
        while not self._stop:
            await self.produce_one_round()
            await asyncio.sleep(self.pause_s)

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
