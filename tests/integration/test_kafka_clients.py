"""Real Kafka clients against three broker processes over Kafka's protocol (issue 18).

kafka-python, aiokafka and confluent-kafka (librdkafka), from PyPI, each produce to a topic of
replication factor 3 with min.insync.replicas=2 at acks=all (keys, headers, explicit
timestamps, every codec of :data:`CODECS`) and consume with assigned partitions: every
record comes back at the offset its producer was told, with its key, value, headers and
timestamp. The test plays the controller (tests.integration.controller_stub); it learns each
broker's Kafka endpoint from the heartbeats, as the operator does, and passes them on in
UpdateMetadata, so the clients bootstrap from one broker and find the leaders on the others.

The synchronous clients run in threads: the controller stub answers the brokers on this loop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition

from jbod_broker.storage.names import TopicPartition
from tests.integration import java_clients

with warnings.catch_warnings():
    # kafka-python 3.0 loads its message schemas with importlib.resources.read_text, which
    # Python 3.11 deprecates (and this suite makes every warning an error).
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.codec
    import kafka.errors

# kafka-python compresses snappy, lz4 and zstd only with python-snappy, lz4 and zstandard
# installed (the dev extra pins them): without them its producer refuses those codecs, and the
# codec test would prove less than it says, so their absence fails here rather than skipping.
assert kafka.codec.has_snappy() and kafka.codec.has_lz4() and kafka.codec.has_zstd(), (
    "kafka-python's optional codecs are missing: run make setup"
)


pytestmark = pytest.mark.integration

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
"""Compression codecs every client produces with: the one list."""
RECORDS = 20
SETTINGS = {
    "replica.fetch.wait.max.ms": "100",
    "controller.retry.backoff.ms": "50",
    "broker.heartbeat.interval.ms": "200",
}


@dataclass(frozen=True)
class Sent:
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


class Env(java_clients.Env):
    @property
    def bootstrap(self) -> str:
        return self.cluster[0].kafka_endpoint  # one broker: the others come from Metadata


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with java_clients.broker_cluster(tmp_path, SETTINGS) as started:
        e = Env(started.ctl, started.cluster)
        ctl, cluster = e.ctl, e.cluster
        try:
            assert ctl.kafka_endpoints == {b.broker_id: b.kafka_endpoint for b in cluster.brokers}
            await ctl.create_topic("t", 3, 3, min_isr=2)
            yield e
        finally:
            for b in cluster.brokers:  # a test may leave a broker stopped (SIGSTOP)
                if b.alive:
                    assert b.proc is not None
                    os.kill(b.proc.pid, signal.SIGCONT)


def records_for(
    codec: str, partition: int
) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], int]]:
    base = 1_700_000_000_000 + partition * 100_000 + CODECS.index(codec) * 10_000
    return [
        (
            f"{codec}-k{i}".encode(),
            f"{codec}-v{i}-".encode() * (1 + i % 7),
            [("codec", codec.encode()), ("i", str(i).encode())],
            base + i * 3,
        )
        for i in range(RECORDS)
    ]


def check(sent: list[Sent], got: list[Sent]) -> None:
    """Every record at its acknowledged offset, whole; offsets consecutive per partition."""
    assert sorted(got, key=lambda s: (s.partition, s.offset)) == sorted(
        sent, key=lambda s: (s.partition, s.offset)
    )
    for p in {s.partition for s in sent}:
        offs = sorted(s.offset for s in sent if s.partition == p)
        assert offs == list(range(offs[0], offs[0] + len(offs)))


def consume_kafka_python(bootstrap: str, wanted: dict[int, tuple[int, int]]) -> list[Sent]:
    """Records of each partition from offset ``lo`` up to ``hi`` (exclusive), assigned."""
    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = {p: kafka.TopicPartition("t", p) for p in wanted}
        c.assign(list(tps.values()))
        for p, (lo, _) in wanted.items():
            c.seek(tps[p], lo)
        out: list[Sent] = []
        deadline = time.monotonic() + 30
        while any(c.position(tps[p]) < hi for p, (_, hi) in wanted.items()):
            assert time.monotonic() < deadline, "kafka-python did not read every record"
            for tp, msgs in c.poll(timeout_ms=500).items():
                out += [
                    Sent(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp)
                    for m in msgs
                    if m.offset < wanted[tp.partition][1]
                ]
        return out
    finally:
        c.close()


async def test_kafka_python_produces_and_consumes_every_codec(env: Env) -> None:
    def run() -> list[Sent]:
        sent: list[Sent] = []
        for codec in CODECS:
            p = kafka.KafkaProducer(
                bootstrap_servers=env.bootstrap,
                acks="all",
                compression_type=None if codec == "none" else codec,
                # kafka-python's default: idempotence on (InitProducerId, sequence numbers).
                linger_ms=5,
            )
            try:
                for part in range(3):
                    futs = [
                        (
                            p.send("t", key=k, value=v, headers=h, timestamp_ms=ts, partition=part),
                            (k, v, h, ts),
                        )
                        for k, v, h, ts in records_for(codec, part)
                    ]
                    p.flush()
                    for f, (k, v, h, ts) in futs:
                        md = f.get(timeout=10)
                        sent.append(Sent(part, md.offset, k, v, tuple(h), ts))
            finally:
                p.close()
        return sent

    sent = await asyncio.to_thread(run)
    assert len(sent) == 3 * RECORDS * len(CODECS)
    wanted = {p: (0, RECORDS * len(CODECS)) for p in range(3)}
    got = await asyncio.to_thread(consume_kafka_python, env.bootstrap, wanted)
    check(sent, got)


async def test_aiokafka_produces_and_consumes_every_codec(env: Env) -> None:
    sent: list[Sent] = []
    for codec in CODECS:
        p = AIOKafkaProducer(
            bootstrap_servers=env.bootstrap,
            acks="all",
            enable_idempotence=True,  # aiokafka's default is off
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
        )
        await p.start()
        try:
            for part in range(3):
                recs = records_for(codec, part)
                futs = [
                    await p.send("t", key=k, value=v, headers=h, timestamp_ms=ts, partition=part)
                    for k, v, h, ts in recs
                ]
                for f, (k, v, h, ts) in zip(futs, recs, strict=True):
                    md = await f
                    sent.append(Sent(part, md.offset, k, v, tuple(h), ts))
        finally:
            await p.stop()
    c = AIOKafkaConsumer(bootstrap_servers=env.bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        tps = [AioTopicPartition("t", p) for p in range(3)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)
        assert ends == {tp: RECORDS * len(CODECS) for tp in tps}
        got: list[Sent] = []
        deadline = time.monotonic() + 30
        while len(got) < len(sent):
            assert time.monotonic() < deadline, "aiokafka did not read every record"
            batch = await c.getmany(timeout_ms=500)
            got += [
                Sent(tp.partition, m.offset, m.key, m.value, tuple(m.headers), m.timestamp)
                for tp, msgs in batch.items()
                for m in msgs
            ]
        # By timestamp, through the time index: the first record stamped at or after it.
        first_of_gzip = next(s for s in sent if s.partition == 1 and s.value.startswith(b"gzip"))
        found = await c.offsets_for_times({tps[1]: first_of_gzip.timestamp})
        assert found[tps[1]] is not None
        assert (found[tps[1]].offset, found[tps[1]].timestamp) == (
            first_of_gzip.offset,
            first_of_gzip.timestamp,
        )
    finally:
        await c.stop()
    check(sent, got)


def consumed(m: Any) -> Sent:
    """A librdkafka message as :class:`Sent`."""
    return Sent(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers()), m.timestamp()[1])


async def test_confluent_kafka_produces_and_consumes_every_codec(env: Env) -> None:
    def run() -> tuple[list[Sent], list[Sent]]:
        sent: list[Sent] = []
        for codec in CODECS:
            p = confluent_kafka.Producer(
                {
                    "bootstrap.servers": env.bootstrap,
                    "acks": "all",
                    "compression.type": codec,
                    "linger.ms": 5,
                    "enable.idempotence": True,  # librdkafka's default is off
                }
            )
            errors: list[Any] = []

            def reporter(headers: list[tuple[str, bytes]], errors: list[Any] = errors) -> Any:
                def report(err: Any, msg: Any) -> None:
                    # A delivery report carries no headers: the ones sent are checked on consume.
                    if err is not None:
                        errors.append(err)
                        return
                    sent.append(
                        Sent(
                            msg.partition(),
                            msg.offset(),
                            msg.key(),
                            msg.value(),
                            tuple(headers),
                            msg.timestamp()[1],
                        )
                    )

                return report

            for part in range(3):
                for k, v, h, ts in records_for(codec, part):
                    p.produce(
                        "t",
                        key=k,
                        value=v,
                        headers=list(h),
                        timestamp=ts,
                        partition=part,
                        on_delivery=reporter(h),
                    )
            assert p.flush(30) == 0
            assert not errors
        c = confluent_kafka.Consumer(
            {
                "bootstrap.servers": env.bootstrap,
                "group.id": "unused",  # librdkafka wants one; nothing is committed
                "enable.auto.commit": False,
            }
        )
        try:
            c.assign(
                [
                    confluent_kafka.TopicPartition("t", part, confluent_kafka.OFFSET_BEGINNING)
                    for part in range(3)
                ]
            )
            got: list[Sent] = []
            deadline = time.monotonic() + 30
            while len(got) < len(sent):
                assert time.monotonic() < deadline, "librdkafka did not read every record"
                for m in c.consume(100, timeout=0.5):
                    assert m.error() is None, m.error()
                    got.append(consumed(m))
            for part in range(3):
                tp = confluent_kafka.TopicPartition("t", part)
                lo, hi = c.get_watermark_offsets(tp, timeout=10)
                assert (lo, hi) == (0, RECORDS * len(CODECS))
        finally:
            c.close()
        return sent, got

    sent, got = await asyncio.to_thread(run)
    assert len(sent) == 3 * RECORDS * len(CODECS)
    check(sent, got)


async def test_metadata_names_every_broker_leader_replicas_and_isr(env: Env) -> None:
    def run() -> Any:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": env.bootstrap})
        return admin.list_topics(timeout=10)

    md = await asyncio.to_thread(run)
    assert {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()} == {
        b.broker_id: b.kafka_endpoint for b in env.cluster.brokers
    }
    assert md.cluster_id == env.cluster.cluster_id  # each broker's cluster.id
    t = md.topics["t"]
    assert t.error is None
    for p, pm in t.partitions.items():
        st = env.ctl.state[TopicPartition("t", p)]
        assert (pm.leader, list(pm.replicas), sorted(pm.isrs)) == (
            st.leader,
            st.replicas,
            sorted(st.isr),
        )

    def unknown() -> Any:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": env.bootstrap})
        return admin.list_topics(topic="nope", timeout=10).topics["nope"].error

    err = await asyncio.to_thread(unknown)
    assert err is not None and err.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


async def test_acks_all_below_min_isr_is_refused_and_writes_nothing(env: Env) -> None:
    """A topic of two replicas with min.insync.replicas=3 (Kafka allows it): acks=all is
    refused with NOT_ENOUGH_REPLICAS before the append, acks=1 is written at the offset the
    refused record did not take. The rule is the replica manager's; the listener maps it."""
    (tp,) = await env.ctl.create_topic("few", 1, 2, min_isr=3)
    leader = env.cluster[env.ctl.leader_of(tp)].kafka_endpoint

    def produce(acks: Any) -> Any:
        p = kafka.KafkaProducer(
            bootstrap_servers=leader, acks=acks, retries=0, enable_idempotence=False
        )
        try:
            return p.send("few", value=b"x", partition=0).get(timeout=10)
        finally:
            p.close()

    with pytest.raises(kafka.errors.NotEnoughReplicasError):
        await asyncio.to_thread(produce, "all")
    md = await asyncio.to_thread(produce, 1)
    assert md.offset == 0  # the refused record took no offset
