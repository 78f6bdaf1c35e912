"""Which brokers a pass of the Kafka reassignment adapter counts as live: unfenced and
answering DescribeLogDirs, where one unanswered read is retried before the broker is planned
around (a single timeout on a busy machine made a pass treat two live brokers as down); and a
throttle call Kafka did not take stopping the pass (Kafka keeps a throttle until it is lifted)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from jbod_operator.clients.kafka_admin import KafkaAdminError
from jbod_operator.control import kafka_reads
from jbod_operator.control.kafka_reassignments import KafkaReassignments
from jbod_operator.plan.execution import ActionFailed
from jbod_operator.plan.kafka_types import BrokerLogDirs, ClusterDescription, KafkaBroker, LogDir
from jbod_operator.plan.port_types import Throttle


class FlakyAdmin:
    """DescribeCluster names brokers 1-3 (3 fenced); DescribeLogDirs of a broker fails as many
    times as ``fails`` says, then answers."""

    def __init__(self, fails: dict[int, int]) -> None:
        self.fails = dict(fails)
        self.asked: list[int] = []

    async def describe_cluster(self) -> ClusterDescription:
        brokers = tuple(KafkaBroker(b, "h", 9092, fenced=b == 3) for b in (1, 2, 3))
        return ClusterDescription("c", 1, brokers)

    async def describe_log_dirs(self, brokers: Iterable[int]) -> list[BrokerLogDirs]:
        (b,) = list(brokers)
        self.asked.append(b)
        if self.fails.get(b, 0) > 0:
            self.fails[b] -= 1
            raise KafkaAdminError("DescribeLogDirs", "KafkaTimeoutError")
        return [BrokerLogDirs(b, (LogDir(f"/k{b}/data-0", None, 100, 50, False, ()),))]

    async def close(self) -> None:
        return None


@pytest.mark.parametrize(
    ("fails", "live"),
    [
        ({}, {1, 2}),
        ({2: 1}, {1, 2}),  # one timeout: asked again, answered, live
        ({2: 2}, {1}),  # twice: not answering, planned around
    ],
)
def test_a_broker_is_live_when_unfenced_and_answering_on_a_second_try(
    monkeypatch: pytest.MonkeyPatch, fails: dict[int, int], live: set[int]
) -> None:
    monkeypatch.setattr(kafka_reads, "DIRS_RETRY_PAUSE_S", 0.0)
    admin = FlakyAdmin(fails)
    ex = KafkaReassignments(admin, asyncio.Lock(), "k")  # type: ignore[arg-type]
    seen = asyncio.run(ex.cluster())
    assert ex.live == frozenset(live)
    assert seen is not None and seen.size == 4
    assert (seen.brokers[2] is None) == (2 not in live)
    assert seen.brokers[3] is None and 3 not in admin.asked  # fenced: not asked


class RefusingConfigs:
    """IncrementalAlterConfigs fails for broker 2; every call is recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def incremental_alter_configs(self, kind: object, name: str, changes: object) -> None:
        self.calls.append((str(kind), name))
        if name == "2":
            raise KafkaAdminError("IncrementalAlterConfigs", "KafkaTimeoutError")

    ensure_configs = incremental_alter_configs  # no memory here: KafkaAdmin's is tested alone


def test_a_throttle_kafka_did_not_take_stops_the_pass_after_the_other_calls() -> None:
    """Kafka keeps a throttle until it is lifted: a failed set or lift raises ActionFailed
    (the pass is not recorded and the next one tries again) once the topic's call was made."""
    admin = RefusingConfigs()
    ex = KafkaReassignments(admin, asyncio.Lock(), "k")  # type: ignore[arg-type]
    ex.topics = ("t",)
    with pytest.raises(ActionFailed, match="broker 2"):
        asyncio.run(ex.throttle([Throttle(2, 0, frozenset(), frozenset({("t", 0)}))]))
    assert [name for _, name in admin.calls] == ["2", "t"]
    asyncio.run(ex.throttle([Throttle(1, 0, frozenset({("t", 0)}), frozenset())]))  # no raise


class RecordingConfigs:
    """IncrementalAlterConfigs recorded with its changes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str | None]]] = []

    async def incremental_alter_configs(
        self, kind: object, name: str, changes: dict[str, str | None]
    ) -> None:
        self.calls.append((name, dict(changes)))

    ensure_configs = incremental_alter_configs  # no memory here: KafkaAdmin's is tested alone


def test_a_topic_s_throttled_replicas_are_written_once_from_all_of_the_pass_throttles() -> None:
    """Written one broker's throttle at a time, the topic's lists first dropped the new
    followers the last pass had listed (the leader's throttle came first) and put them back
    a call later: every pass let the followers fetch unthrottled for a moment, and a step
    meant to copy at 16 KiB/s caught up in seconds (e2e (d) saw its cancel come too late).
    Now each broker's rates, then each topic once, from the whole set, and nothing when the
    topic already has those lists."""
    admin = RecordingConfigs()
    ex = KafkaReassignments(admin, asyncio.Lock(), "k")  # type: ignore[arg-type]
    ex.topics = ("t",)
    pass_throttles = [
        Throttle(1, 16384, frozenset({("t", 0)}), frozenset()),
        Throttle(2, 16384, frozenset({("t", 1)}), frozenset()),
        Throttle(3, 16384, frozenset(), frozenset({("t", 0)})),
        Throttle(4, 16384, frozenset(), frozenset({("t", 1)})),
    ]
    asyncio.run(ex.throttle(pass_throttles))
    assert [name for name, _ in admin.calls] == ["1", "2", "3", "4", "t"]
    assert admin.calls[-1][1] == {
        "leader.replication.throttled.replicas": "0:1,1:2",
        "follower.replication.throttled.replicas": "0:3,1:4",
    }
    admin.calls.clear()
    asyncio.run(ex.throttle(pass_throttles))  # the next pass: the same lists, not rewritten
    assert [name for name, _ in admin.calls] == ["1", "2", "3", "4"]
