"""The counting rule (``jbod_broker.counting.verify``) refuses each way a log can be wrong:
an acknowledged value missing, a value read twice, a producer's values out of order; and it
raises even under ``python -O`` (explicit raises: the demo relies on it)."""

from __future__ import annotations

import asyncio

import pytest

from jbod_broker import wire
from jbod_broker.counting import FILLER, CountingProducer, verify
from jbod_broker.storage.names import TopicPartition

TP = TopicPartition("t", 0)


def values(tag: str, *seqs: int) -> list[bytes]:
    return [b"t-0-%s-%08d" % (tag.encode(), s) for s in seqs]


def test_every_acknowledged_value_read_once_in_order_passes() -> None:
    verify({TP: values("p", 1, 2)}, {TP: [FILLER + b"x", *values("p", 1, 2, 3)]})


@pytest.mark.parametrize(
    ("acked", "consumed", "says"),
    [
        (values("p", 1, 2), values("p", 1), "1 acknowledged values lost"),
        (values("p", 1), values("p", 1, 1), "1 duplicated values"),
        (values("p", 1, 2), values("p", 2, 1), "values of producer b'p' out of order"),
    ],
)
def test_each_broken_rule_is_named(acked: list[bytes], consumed: list[bytes], says: str) -> None:
    with pytest.raises(AssertionError, match=says):
        verify({TP: acked}, {TP: consumed})


class _SlowLeader:
    """A stand-in for a broker client whose produce answers after a pause: enough for the
    producer's own loop to be mid-round when the test sends."""

    async def produce(self, *args: object, **kwargs: object) -> wire.ProduceResponse:
        await asyncio.sleep(0.01)
        return wire.ProduceResponse(
            topic="t", partition=0, base_offset=0, last_offset=0, log_start_offset=0
        )


async def test_a_round_beside_the_producer_s_own_loop_is_refused() -> None:
    """Two senders of one producer race, and values reaching a partition out of their send
    order would fail ``verify`` with no broker at fault (seen under load): refused outright."""
    leader = _SlowLeader()
    p = CountingProducer(lambda tp: leader, [TP], pause_s=0)  # type: ignore[arg-type, return-value]
    await p.produce_one_round()  # before start(): the caller is the only sender
    p.start()
    try:
        with pytest.raises(RuntimeError, match="own loop"):
            await p.produce_one_round()
    finally:
        await p.stop()
    await p.produce_one_round()  # stopped: allowed again
    assert p.acked[TP] == sorted(p.acked[TP])
