"""Kafka's Java idempotent producer at acks=all through a leader failover and a KIP-113 move
(issue 18): every acknowledged record exactly once, in order, counted by a Java consumer.

``CountingProducer`` runs with its defaults (idempotence on, acks=all, retries until
``delivery.timeout.ms``), paced so that records are in flight when the test acts:

* the leader of partition 0 is SIGKILLed mid-stream and the controller elects another from
  the ISR; the producer's batches that reached the followers but were never acknowledged are
  sent again to the new leader, which must recognise them by their sequence numbers (the
  producer state the followers built while replicating) and answer with their offsets;
* the leader's replica of partition 0 is moved to its other log dir mid-stream
  (alter-replica-log-dirs): the swap carries the producer state, so the batches that follow,
  and any retry across the swap, are checked against it.

Then ``AssignedConsumer`` reads every partition from the beginning: each acknowledged record
at its acknowledged offset, no record twice, each partition's records in the order sent. A
JSON line reports the counts (``pytest -s`` shows it). No API server is needed: the test plays
the controller (tests.integration.controller_stub).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.storage.names import TopicPartition
from tests.integration.java_clients import (
    Env,
    JavaProducer,
    broker_cluster,
    check_exactly_once_in_order,
    consume,
    wait_for,
)

pytestmark = pytest.mark.integration

TOPIC = "idem"
PARTITIONS = 3
RECORDS = 3000
PACE_MS = 2
"""At least six seconds of sending: long enough to act mid-stream."""
ACT_AFTER = 300
"""Acknowledgements seen before the test kills or moves the leader."""
SETTINGS = {
    "replica.lag.time.max.ms": "1500",
    "replica.fetch.wait.max.ms": "100",
    "controller.retry.backoff.ms": "50",
    "controller.retry.backoff.max.ms": "500",
    "broker.heartbeat.interval.ms": "200",
}
CONFIGS = {"segment.bytes": str(64 * 1024)}
"""Small segments: the logs roll during the stream, so producer-state snapshots are written."""


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with broker_cluster(tmp_path, SETTINGS) as e:
        await e.ctl.create_topic(TOPIC, PARTITIONS, 3, min_isr=2, configs=CONFIGS)
        yield e


async def start_producer(env: Env) -> JavaProducer:
    p = await JavaProducer.start(
        env.bootstrap, TOPIC, PARTITIONS, RECORDS, ["none"], pace_ms=PACE_MS
    )
    await wait_for(lambda: len(p.acks) >= ACT_AFTER, 60, f"{ACT_AFTER} acks", env)
    return p


async def finish_and_count(env: Env, p: JavaProducer, event: str, acked_before: int) -> None:
    await p.wait(180)
    assert p.errors == []
    assert sorted(a.n for a in p.acks) == list(range(RECORDS))
    got = await consume(env.bootstrap, TOPIC, PARTITIONS)
    check_exactly_once_in_order(p.acks, got)
    assert len(got) == RECORDS
    after = sum(1 for a in p.acks[acked_before:] if a.partition == 0)
    assert after > 0, "partition 0 acknowledged nothing after the event"
    print(
        json.dumps(
            {
                "test": f"java_idempotent_{event}",
                "sent": RECORDS,
                "acked": len(p.acks),
                "acked_before_event": acked_before,
                "acked_p0_after_event": after,
                "consumed": len(got),
                "distinct": len({r.n for r in got}),
                "errors": len(p.errors),
            }
        )
    )


async def test_a_leader_sigkilled_mid_stream_loses_and_duplicates_nothing(env: Env) -> None:
    tp = TopicPartition(TOPIC, 0)
    old = env.ctl.leader_of(tp)
    p = await start_producer(env)

    acked_before = len(p.acks)
    env.cluster[old].kill()
    await env.ctl.broker_died(old)
    assert env.ctl.leader_of(tp) != old
    assert not p.done, "the stream ended before the leader was killed"

    await finish_and_count(env, p, "leader_sigkill", acked_before)


async def test_a_move_swapping_the_leaders_replica_mid_stream_loses_and_duplicates_nothing(
    env: Env,
) -> None:
    tp = TopicPartition(TOPIC, 0)
    leader = env.ctl.leader_of(tp)
    broker = env.cluster[leader]
    src = next(d for d in broker.log_dirs if (Path(d) / f"{TOPIC}-0").is_dir())
    dest = next(d for d in broker.log_dirs if d != src)
    c = env.ctl.client(leader)
    p = await start_producer(env)

    acked_before = len(p.acks)
    res = await c.alter_replica_log_dirs([(tp.topic, tp.partition, dest)])
    assert res.partitions[0].error is None, res
    while True:  # long polls: each waits up to 10 s for the move to finish
        r = await c.describe_replica_log_dirs([(tp.topic, tp.partition)], wait_ms=10_000)
        info = r.partitions[0]
        if info.state.finished:
            break
    assert info.state is wire.MoveState.DONE and info.current_log_dir == dest, info
    assert not p.done, "the stream ended before the swap"
    assert env.ctl.leader_of(tp) == leader

    await finish_and_count(env, p, "move_swap", acked_before)
