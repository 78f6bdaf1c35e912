"""A producer and a consumer that count: the proof that no acknowledged record is lost or
duplicated through failures, moves and restarts.

One home for the counting rule, used by the tests and by ``make demo`` (which is why it sits
next to :mod:`jbod_broker.local`, in the package, rather than under ``tests/``).

The producer sends each value once (never retries a value whose outcome it does not know: a
retry could legitimately duplicate it, which would blur the check); values carry a sequence
number. With ``retry_errors`` it is the other client instead, the one that retries on every
error answer until the values are acknowledged: with exact acknowledgement (an error answer
only for records that were not appended, issue 14) even that client never duplicates a value.
The consumer reads every partition from offset 0 up to the high watermark, following
leadership: after the fact (:func:`consume_all`) or all along (:class:`CountingConsumer`, which
tails every partition while the producer runs and catches up to the high watermark when
stopped). ``verify`` then demands: every acknowledged value read exactly once, no value read
twice, values in send order within each partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from . import wire
from .client import BrokerClient
from .errors import KafkaError
from .storage.names import TopicPartition
from .storage.records import build_batch, decode_batch, iter_batches

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
        """One batch to each partition, in turn. Not while :meth:`start`'s loop runs: two
        senders of one producer would race, and values that reach a partition out of their
        send order fail :func:`verify` without any broker at fault."""
        if self._task is not None and not self._task.done():
            raise RuntimeError("produce_one_round while the producer's own loop runs")
        await self._round()

    async def _round(self) -> None:
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
            await self._round()
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


class CountingConsumer:
    """Tails every partition from offset 0 while it runs, following leadership (an error
    answer, e.g. while leadership moves, is retried after a short pause); :meth:`stop` reads on
    to the high watermark, so ``consumed`` then holds everything committed."""

    def __init__(self, leader: LeaderLookup, tps: list[TopicPartition]) -> None:
        self.leader = leader
        self.tps = list(tps)
        self.consumed: dict[TopicPartition, list[bytes]] = {tp: [] for tp in self.tps}
        self.offsets: dict[TopicPartition, int] = dict.fromkeys(self.tps, 0)
        self.errors = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._tail(tp)) for tp in self.tps]

    async def _read(self, tp: TopicPartition) -> tuple[bool, int]:
        """One fetch from where ``tp`` stands: (whether it returned records, the high
        watermark)."""
        offset = self.offsets[tp]
        data, hw = await self.leader(tp).fetch(tp.topic, tp.partition, offset, max_wait_ms=200)
        for pos, hdr in iter_batches(data):
            _, recs = decode_batch(data, pos)
            self.consumed[tp] += [r.value or b"" for r in recs if r.offset >= offset]
            offset = hdr.next_offset
        self.offsets[tp] = offset
        return bool(data), hw

    async def _tail(self, tp: TopicPartition, *, to_end: bool = False) -> None:
        while not self._stop or to_end:
            try:
                got, hw = await self._read(tp)
            except KafkaError:
                self.errors += 1
                await asyncio.sleep(0.1)
                continue
            if to_end and not got and self.offsets[tp] >= hw:
                return

    async def stop(self, timeout_s: float = 60) -> None:
        """Stop tailing, then read every partition up to its high watermark."""
        self._stop = True
        for t in self._tasks:
            await t
        await asyncio.wait_for(
            asyncio.gather(*(self._tail(tp, to_end=True) for tp in self.tps)), timeout_s
        )

    @property
    def count(self) -> int:
        """Counted values read (the filler is not counted)."""
        return sum(1 for vs in self.consumed.values() for v in vs if not v.startswith(FILLER))


def verify(
    acked: dict[TopicPartition, list[bytes]], consumed: dict[TopicPartition, list[bytes]]
) -> None:
    """Every acknowledged value read, none read twice, each producer's values in order within
    a partition; AssertionError saying which rule broke and where (explicit raises: the demo
    runs it too, and must not lose it to ``python -O``)."""
    for tp, all_values in consumed.items():
        values = [v for v in all_values if not v.startswith(FILLER)]
        dupes = len(values) - len(set(values))
        if dupes:
            raise AssertionError(f"{tp}: {dupes} duplicated values")
        by_producer: dict[bytes, list[int]] = {}
        for v in values:
            head, seq = v.rsplit(b"-", 1)
            by_producer.setdefault(head.rsplit(b"-", 1)[1], []).append(int(seq))
        for tag, seqs in by_producer.items():
            if seqs != sorted(seqs):
                raise AssertionError(f"{tp}: values of producer {tag!r} out of order")
    for tp, values in acked.items():
        got = set(consumed.get(tp, []))
        lost = [v for v in values if v not in got]
        if lost:
            raise AssertionError(f"{tp}: {len(lost)} acknowledged values lost, e.g. {lost[:3]}")


@contextlib.asynccontextmanager
async def running(producer: CountingProducer) -> AsyncIterator[CountingProducer]:
    producer.start()
    try:
        yield producer
    finally:
        await producer.stop()
