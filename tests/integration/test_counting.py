"""The counting consumer that tails all along (``make demo`` runs it through a Rebalance): on a
real broker, while a counting producer writes, it ends with every acknowledged value once, and
after a broker restart (the demo's rolling restart) it goes on from where it stood."""

from __future__ import annotations

from pathlib import Path

import pytest

from jbod_broker.client import BrokerClient, BrokerUnavailableError
from jbod_broker.counting import CountingConsumer, CountingProducer, verify
from jbod_broker.local import LocalBroker, lead_alone, write_token
from jbod_broker.storage.names import TopicPartition
from tests.waiting import wait_async

pytestmark = pytest.mark.integration


async def acked_at_least(producer: CountingProducer, n: int, timeout_s: float = 60) -> None:
    """Until the producer's own loop has ``n`` values acknowledged (a condition: its pace
    depends on the machine). The test never sends beside that loop: two senders of one
    producer could reorder its values, which ``verify`` rightly calls a failure."""
    await wait_async(
        lambda: producer.acked_count >= n,
        lambda: f"{producer.acked_count} of {n} values acknowledged",
        timeout_s,
    )


async def test_a_tailing_consumer_reads_every_acknowledged_value_once(tmp_path: Path) -> None:
    token_file = str(tmp_path / "token")
    token = write_token(token_file)
    b = LocalBroker(broker_id=0, base_dir=str(tmp_path), token_file=token_file, num_dirs=2)
    b.start()
    client = BrokerClient(b.url, token=token, timeout_s=10)
    try:
        await lead_alone(client, "t", 2)
        tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
        producer = CountingProducer(lambda tp: client, tps, acks=1, pause_s=0.01)
        consumer = CountingConsumer(lambda tp: client, tps)
        producer.start()
        consumer.start()
        await acked_at_least(producer, 200)
        # a restart under the consumer: its fetches fail (waited for, not assumed: a quick
        # restart can fall between two fetches), then it goes on from its offsets
        b.stop()
        await wait_async(lambda: consumer.errors > 0, "the consumer to see the broker stopped")
        b.start()
        try:
            await lead_alone(client, "t", 2)
        except BrokerUnavailableError:  # the pooled connection to the stopped process
            await lead_alone(client, "t", 2)
        await acked_at_least(producer, producer.acked_count + 200)
        await producer.stop()
        await consumer.stop()
    finally:
        await client.close()
        b.stop()
    assert producer.acked_count > 200 and producer.acked_count == consumer.count
    assert consumer.errors > 0  # the restart was seen, and read through
    verify(producer.acked, consumer.consumed)
