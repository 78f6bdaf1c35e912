"""A PartitionReassignment naming a broker its cluster does not have: one rule whatever the
id's value, refused at once (as Kafka's controller refuses an id no broker registered), with
a message naming the brokers that exist.

On Kafka broker ids are not dense from 0: a KafkaCluster of brokers 1-4 took broker 0 (below
its highest id) and waited for ever "for target broker(s) 0 to be live", while it refused
broker 9, and the refusal said "brokers 0-4", naming one it does not have."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace

import pytest

from jbod_operator.control.kafka_reassignments import KafkaReassignments
from jbod_operator.models.reassignment import PartitionReassignment
from jbod_operator.models.reassignment import ReassignmentPhase as P
from jbod_operator.plan.kafka_dirs import cluster_size_of
from jbod_operator.plan.kafka_types import BrokerLogDirs, ClusterDescription, KafkaBroker, LogDir
from jbod_operator.plan.port_types import PartView, TopicView, id_ranges
from jbod_operator.plan.reassignment import Observed, advance

NOW = 1_700_000_000.0


def _pr(replicas: list[int]) -> PartitionReassignment:
    return PartitionReassignment.model_validate(
        {
            "metadata": {"name": "r", "namespace": "kafka", "generation": 1},
            "spec": {
                "clusterName": "kip",
                "partitions": [{"topic": "t", "partition": 0, "replicas": replicas}],
            },
        }
    )


def _observe(pr: PartitionReassignment, ids: Iterable[int] | None, size: int) -> Observed:
    """Topic t, partition 0 on brokers 1, 2, 3; every broker live."""
    known = None if ids is None else frozenset(ids)
    pv = PartView("t", 0, (1, 2, 3), (None,) * 3, 1, 3, (1, 2, 3), 7)
    return Observed(
        pr,
        NOW,
        cluster_size=size,
        broker_ids=known,
        live=known if known is not None else frozenset(range(size)),
        topics={"t": TopicView("t-res", "t", 1, {0: pv})},
        cluster_dirs=("a",),
    )


@pytest.mark.parametrize("missing", [0, 9])
def test_a_kafka_cluster_refuses_an_id_it_does_not_have_whatever_its_value(missing: int) -> None:
    """Brokers 1-4 (the plans' size 5: the highest id plus one): 0 is refused as 9 is."""
    pr = _pr([missing, 2, 3])
    d = advance(_observe(pr, {1, 2, 3, 4}, cluster_size_of([1, 2, 3, 4])))
    assert d.status.phase == P.FAILED and not d.actions and not d.active
    (failed,) = [c for c in d.status.conditions if c.type == "Failed"]
    assert failed.reason == "InvalidSpec"
    assert failed.message == (
        f"1 partition(s) refused: t-0: broker {missing} does not exist (brokers 1-4)"
    )


def test_a_broker_cluster_refuses_an_id_past_its_replicas() -> None:
    """A BrokerCluster's ids are 0 .. replicas - 1: the same rule, the same words."""
    d = advance(_observe(_pr([4, 2, 3]), None, 4))
    assert d.status.phase == P.FAILED
    (failed,) = [c for c in d.status.conditions if c.type == "Failed"]
    assert failed.message.endswith("t-0: broker 4 does not exist (brokers 0-3)")


def test_a_registered_broker_that_is_down_is_not_refused() -> None:
    """Broker 4 listed (fenced, down) but not live: accepted, its step waits for it."""
    pr = _pr([4, 2, 3])
    obs = _observe(pr, {1, 2, 3, 4}, 5)
    d = advance(replace(obs, live=frozenset({1, 2, 3})))
    assert d.status.phase != P.FAILED


class _Admin:
    """DescribeCluster lists brokers 1-4, broker 4 fenced (KIP-1073: a registered broker that
    is down is listed with ``IsFenced``)."""

    async def describe_cluster(self) -> ClusterDescription:
        brokers = tuple(KafkaBroker(b, "h", 9092, fenced=b == 4) for b in (1, 2, 3, 4))
        return ClusterDescription("c", 1, brokers)

    async def describe_log_dirs(self, brokers: Iterable[int]) -> list[BrokerLogDirs]:
        return [
            BrokerLogDirs(b, (LogDir(f"/k{b}/data-0", None, 100, 50, False, ()),)) for b in brokers
        ]

    async def close(self) -> None:
        return None


def test_the_kafka_adapter_names_every_listed_broker_fenced_or_not() -> None:
    ex = KafkaReassignments(_Admin(), asyncio.Lock(), "k")  # type: ignore[arg-type]
    seen = asyncio.run(ex.cluster())
    assert seen is not None
    assert seen.broker_ids == frozenset({1, 2, 3, 4}) and ex.live == frozenset({1, 2, 3})


def test_id_ranges() -> None:
    assert id_ranges(range(6)) == "0-5"
    assert id_ranges([4, 1, 2, 3]) == "1-4"
    assert id_ranges([1, 2, 4, 7, 8]) == "1-2, 4, 7-8"
    assert id_ranges([]) == "none"
