"""Issue 14 (2): acknowledgement stays exact while partitions move between log dirs.

Partitions are moved back and forth between the two log dirs of a broker process (admin
alter-replica-log-dirs, the engine throttled low so that the copy, the catch-up and the swap
all overlap produce) while counting producers send acks=all batches, one request at a time per
partition, and retry every error answer as a careless client would. After every answer the test
reads the partition's high watermark and log end (one fetch: both come from one lock hold).

What must hold:

- every success answer is committed: the high watermark is past its last offset;
- no error answer for records that were appended (RF 1: appended is committed), so the
  retrying client never writes a value twice: the counting consumer reads every value exactly
  once, in order;
- the high watermark equals the log end after every answer (nothing else is in flight for
  that partition: a lag is a committed append the HW did not cover).

The old code answered REQUEST_TIMED_OUT after the full timeout for a request whose append
waited for the swap's lock: the append went on into the new log, but the high watermark was
computed from the log end of the retired one (see ``Log.advance_high_watermark``). With RF 1
nothing else recomputes the HW before the next append, so the RF 1 test fails there (8 to 10
timeouts per run, each a duplicate for the retrying client). With RF 2 the follower's next
fetch recomputed it on the current log, which is why the RF 2 test passes on the old code too:
it guards the follower side and the HW's dependence on the follower through the same moves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import DATA, BrokerClient
from jbod_broker.errors import KafkaError
from jbod_broker.local import LocalBroker, LocalCluster, lead_alone
from jbod_broker.storage.names import TopicPartition
from tests.integration.controller_stub import ControllerStub
from tests.integration.counting import FILLER, CountingProducer, consume_all, fill_bytes, verify

pytestmark = pytest.mark.integration

TOPIC = "acks"
THROTTLE = 1024 * 1024
"""Bytes per second for the moves of a broker: low enough that each copy, catch-up and swap
takes a good part of a second while produce goes on, high enough for 200 moves in the test."""
FILL_MIB = 0.05
PAUSE_S = 0.03
"""Between a producer's requests: keeps each partition small (a few hundred KiB at the end), so
moves stay short, while requests still meet the swaps (the old code failed on every run)."""
TIMEOUT_MS = 3000
"""The producers' request timeout: a request cut by a move on the old code hangs this long."""


@dataclass
class Offsets:
    """What the test sees after each produce answer, per partition."""

    answers: int = 0
    lagging_hw: list[str] = field(default_factory=list)
    uncommitted_success: list[str] = field(default_factory=list)
    error_for_appended: list[str] = field(default_factory=list)
    last_leo: dict[TopicPartition, int] = field(default_factory=dict)
    consumed: dict[TopicPartition, list[bytes]] = field(default_factory=dict)


async def hw_and_leo(c: BrokerClient, tp: TopicPartition, offset: int) -> tuple[int, int]:
    """The high watermark and log end offset of ``tp`` on the broker behind ``c``, read together
    (a consumer fetch answers both from one hold of the log's lock); ``offset`` is at most the
    log end, so that little is read."""
    headers = {"Authorization": f"Bearer {c.token}"} if c.token else {}
    params = {"topic": tp.topic, "partition": str(tp.partition), "offset": str(offset)}
    async with c.session.get(
        c.base_url + DATA + "/fetch", params={**params, "max_bytes": "0"}, headers=headers
    ) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()
        return int(resp.headers["X-High-Watermark"]), int(resp.headers["X-Log-End-Offset"])


def checker(
    leader: Callable[[TopicPartition], BrokerClient], seen: Offsets
) -> Callable[[TopicPartition, wire.ProduceResponse | KafkaError], Awaitable[None]]:
    async def check(tp: TopicPartition, answer: wire.ProduceResponse | KafkaError) -> None:
        hw, leo = await hw_and_leo(leader(tp), tp, seen.last_leo.get(tp, 0))
        seen.answers += 1
        before = seen.last_leo.get(tp, leo)
        seen.last_leo[tp] = leo
        if hw != leo:
            seen.lagging_hw.append(f"{tp}: HW {hw} < log end {leo} after {answer!r}")
        if isinstance(answer, KafkaError):
            if leo > before:
                seen.error_for_appended.append(
                    f"{tp}: {answer.kafka_error} for offsets {before}-{leo - 1}, in the log "
                    f"(HW {hw}): {answer}"
                )
        elif hw <= answer.last_offset:
            seen.uncommitted_success.append(f"{tp}: success for {answer.last_offset}, HW {hw}")

    return check


async def current_dir(c: BrokerClient, tp: TopicPartition) -> str:
    d = await c.describe_log_dirs([tp.topic])
    return next(
        x.path
        for x in d.log_dirs
        if any(r.topic == tp.topic and r.partition == tp.partition for r in x.partitions)
    )


async def move_back_and_forth(
    c: BrokerClient, broker: LocalBroker, tp: TopicPartition, moves: int
) -> None:
    """``moves`` moves of ``tp`` between the broker's two dirs, each waited for to its end."""
    src = await current_dir(c, tp)
    for _ in range(moves):
        dest = next(d for d in broker.log_dirs if d != src)
        res = await c.alter_replica_log_dirs([(tp.topic, tp.partition, dest)])
        assert res.partitions[0].error is None, res
        while True:
            r = await c.describe_replica_log_dirs([(tp.topic, tp.partition)], wait_ms=10_000)
            info = r.partitions[0]
            if info.state.finished:
                break
        assert info.state is wire.MoveState.DONE, info
        assert info.current_log_dir == dest, info
        src = dest


async def produce_during_moves(
    leader: Callable[[TopicPartition], BrokerClient],
    tps: list[TopicPartition],
    movers: Sequence[Awaitable[None]],
) -> tuple[list[CountingProducer], Offsets, float]:
    """Counting, retrying producers (one per partition) while ``movers`` run; then consume."""
    seen = Offsets()
    producers = [
        CountingProducer(
            leader,
            [tp],
            records_per_batch=4,
            timeout_ms=TIMEOUT_MS,
            retry_errors=True,
            on_answer=checker(leader, seen),
            pause_s=PAUSE_S,
        )
        for tp in tps
    ]
    t0 = time.monotonic()
    for p in producers:
        p.start()
    try:
        await asyncio.gather(*movers)
    finally:
        for p in producers:
            await p.stop()
    took = time.monotonic() - t0
    seen.consumed = {tp: await consume_all(leader, tp) for tp in tps}
    return producers, seen, took


def check_and_report(
    name: str, moves: int, producers: list[CountingProducer], seen: Offsets, took: float
) -> None:
    """Print the figures as one JSON line, then demand exactness."""
    errors: dict[str, int] = {}
    acked: dict[TopicPartition, list[bytes]] = {}
    for p in producers:
        for k, v in p.errors.items():
            errors[k] = errors.get(k, 0) + v
        for tp, vs in p.acked.items():
            acked.setdefault(tp, []).extend(vs)
    values = {tp: [v for v in vs if not v.startswith(FILLER)] for tp, vs in seen.consumed.items()}
    print(
        json.dumps(
            {
                "test": name,
                "moves": moves,
                "seconds": round(took, 1),
                "produce_answers": seen.answers,
                "acked_records": sum(len(v) for v in acked.values()),
                "consumed_records": sum(len(v) for v in values.values()),
                "duplicates": sum(len(v) - len(set(v)) for v in values.values()),
                "error_answers": errors,
                "error_for_appended": len(seen.error_for_appended),
                "hw_lagging_log_end": len(seen.lagging_hw),
            }
        )
    )
    verify(acked, seen.consumed)
    for tp, got in values.items():
        assert len(got) == len(acked.get(tp, [])), f"{tp}: {len(got)} values in the log"
    assert not seen.error_for_appended, seen.error_for_appended[:5]
    assert not seen.lagging_hw, seen.lagging_hw[:5]
    assert not seen.uncommitted_success, seen.uncommitted_success[:5]
    assert not errors, errors


MOVES = 200
PARTITIONS = 2
"""The moves run on two partitions at once (100 each), one move at a time per partition."""


def test_rf1_acks_all_exact_through_200_moves(tmp_path: Path) -> None:
    cl = LocalCluster(str(tmp_path), size=1, num_dirs=2)
    cl.start()
    try:

        async def scenario() -> None:
            async with BrokerClient(cl[0].url, token=cl.token, timeout_s=30) as c:
                await lead_alone(c, TOPIC, PARTITIONS)
                tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
                await fill_bytes(lambda tp: c, tps, FILL_MIB)
                await c.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=THROTTLE))
                per = MOVES // PARTITIONS
                producers, seen, took = await produce_during_moves(
                    lambda tp: c, tps, [move_back_and_forth(c, cl[0], tp, per) for tp in tps]
                )
                check_and_report("rf1", MOVES, producers, seen, took)

        asyncio.run(scenario())
    finally:
        cl.stop()


def test_rf2_acks_all_exact_through_moves_on_leader_and_follower(tmp_path: Path) -> None:
    """Two broker processes, RF 2, min.insync.replicas=2: the high watermark now waits for the
    follower. Each broker leads one partition and follows the other, and moves both of its
    replicas back and forth (50 moves each, 200 in all): the leader's swaps race produce and
    follower fetches, the follower's race its own appends of fetched data. Passes on the old
    code as well (see the module's docstring)."""

    async def scenario() -> None:
        ctl = ControllerStub()
        await ctl.start()
        cl = LocalCluster(str(tmp_path), size=2, num_dirs=2, controller_url=ctl.url)
        ctl.cluster = cl
        try:
            await asyncio.to_thread(cl.start)
            tps = await ctl.create_topic(TOPIC, PARTITIONS, rf=2, min_isr=2)

            def leader(tp: TopicPartition) -> BrokerClient:
                return ctl.client(ctl.leader_of(tp))

            await fill_bytes(leader, tps, FILL_MIB)
            for b in (0, 1):
                await ctl.client(b).set_configs(
                    wire.ThrottleConfig(intra_broker_throttled_rate=THROTTLE)
                )
            per = MOVES // (2 * PARTITIONS)
            movers = [
                move_back_and_forth(ctl.client(b), cl[b], tp, per) for b in (0, 1) for tp in tps
            ]
            producers, seen, took = await produce_during_moves(leader, tps, movers)
            check_and_report("rf2", MOVES, producers, seen, took)
        finally:
            await asyncio.to_thread(cl.stop)
            await ctl.stop()

    asyncio.run(scenario())
