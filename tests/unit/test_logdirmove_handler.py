"""The LogDirMove handler's I/O edge (``handlers.logdirmoves`` through our brokers' adapter,
``control.our_brokers``) over in-memory stand-ins for
the API server and the brokers: what a pass sends, and that it writes status once.

Found by a reader: recording a moved replica's dir in its Topic matched Topics by
``status.topicName or metadata.name``, so a Topic whose Kafka name comes from
``spec.topicName`` (Kafka allows names a Kubernetes object cannot have) kept pointing at the
old dir when its status had no ``topicName`` yet. Every component now uses one rule,
``models.kafka_topic_name``.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerUnavailableError
from jbod_broker.errors import InvalidRequestError
from jbod_operator.control.our_brokers import OurBrokersLogDirMoves
from jbod_operator.handlers.logdirmoves import reconcile_log_dir_move
from jbod_operator.plan.execution import ActionFailed
from jbod_operator.plan.port_types import SetThrottle

NS, CLUSTER = "kafka", "kip"
ROOT = "/var/lib/jbod"


def path(name: str) -> str:
    return f"{ROOT}/data-{name}"


class FakeKube:
    """The calls the handler makes, on dicts kept in memory."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.status_writes: list[tuple[str, str, dict[str, Any]]] = []

    async def get(self, res: Any, ns: str | None, name: str) -> dict[str, Any] | None:
        return next(
            (copy.deepcopy(o) for o in self.objects[res.plural] if o["metadata"]["name"] == name),
            None,
        )

    async def list(self, res: Any, ns: str | None = None, **_: Any) -> list[dict[str, Any]]:
        return copy.deepcopy(self.objects.get(res.plural, []))

    async def create(self, res: Any, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.status_writes.append((res.plural, obj["metadata"]["name"], obj["spec"]))
        stored = {**copy.deepcopy(obj), "metadata": {**obj["metadata"], "resourceVersion": "1"}}
        self.objects.setdefault(res.plural, []).append(stored)
        return copy.deepcopy(stored)

    async def patch_status(self, res: Any, ns: str, name: str, status: dict[str, Any]) -> None:
        self.status_writes.append((res.plural, name, status))

    async def write_status(
        self, res: Any, ns: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        if after != before:
            self.status_writes.append((res.plural, name, after))

    async def replace_status(self, res: Any, ns: str, obj: dict[str, Any]) -> None:
        self.status_writes.append((res.plural, obj["metadata"]["name"], obj["status"]))
        for i, o in enumerate(self.objects[res.plural]):
            if o["metadata"]["name"] == obj["metadata"]["name"]:
                self.objects[res.plural][i] = copy.deepcopy(obj)


class FakeBroker:
    """Broker 0 with dirs a and b; the topic's replica already sits in b (the move ended)."""

    def __init__(self, topic: str, refuse_configs: bool = False) -> None:
        self.topic = topic
        self.calls: list[str] = []
        self.refuse_configs = refuse_configs

    def describe(self) -> wire.DescribeLogDirsResponse:
        def dir_(name: str, parts: list[wire.ReplicaDescription]) -> wire.LogDirDescription:
            return wire.LogDirDescription(
                path=path(name),
                is_live=True,
                error=None,
                total_bytes=1 << 30,
                usable_bytes=1 << 29,
                cordoned=False,
                partitions=parts,
            )

        moved = wire.ReplicaDescription(
            topic=self.topic, partition=0, size=100, offset_lag=0, is_future=False, log_end_offset=9
        )
        return wire.DescribeLogDirsResponse(
            broker_id=0, log_dirs=[dir_("a", []), dir_("b", [moved])]
        )

    async def describe_log_dirs(self) -> wire.DescribeLogDirsResponse:
        return self.describe()

    async def describe_replica_log_dirs(
        self, replicas: list[tuple[str, int]], wait_ms: int = 0
    ) -> wire.DescribeReplicaLogDirsResponse:
        self.calls.append("describe-replica-log-dirs")
        return wire.DescribeReplicaLogDirsResponse(partitions=[])

    async def alter_replica_log_dirs(
        self, moves: list[tuple[str, int, str]]
    ) -> wire.AlterReplicaLogDirsResponse:
        self.calls.append(f"alter {moves}")
        return wire.AlterReplicaLogDirsResponse(
            partitions=[wire.PartitionResult(topic=t, partition=p) for t, p, _ in moves]
        )

    async def set_configs(self, cfg: Any) -> None:
        if self.refuse_configs:
            raise InvalidRequestError("config refused")
        self.calls.append(f"set-configs {cfg.intra_broker_throttled_rate}")


class FakePool:
    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker

    async def describe(
        self, ns: str, cluster: str, ids: list[int]
    ) -> dict[int, wire.DescribeLogDirsResponse | None]:
        return {b: self.broker.describe() if b == 0 else None for b in ids}

    async def client(self, ns: str, cluster: str, broker_id: int) -> FakeBroker:
        return self.broker


def topic(kafka_name: str) -> dict[str, Any]:
    """A Topic named ``clicks-v2`` whose Kafka name comes from ``spec.topicName``; its status
    holds the partition state of record but no ``topicName`` (as written before the topic
    handler's first full pass, or by an older operator)."""
    return {
        "metadata": {"name": "clicks-v2", "namespace": NS, "uid": "u-clicks"},
        "spec": {
            "clusterName": CLUSTER,
            "partitions": 1,
            "replicationFactor": 1,
            "topicName": kafka_name,
        },
        "status": {
            "partitions": [
                {
                    "partition": 0,
                    "leader": 0,
                    "leaderEpoch": 0,
                    "partitionEpoch": 0,
                    "isr": [0],
                    "replicas": [{"brokerId": 0, "logDir": path("a")}],
                }
            ]
        },
    }


def moving(kafka_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "to-b",
            "namespace": NS,
            "generation": 1,
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "uid": "u1",
        },
        "spec": {
            "clusterName": CLUSTER,
            "moves": [{"brokerId": 0, "topic": kafka_name, "partition": 0, "logDir": "b"}],
            **spec,
        },
        "status": {
            "phase": "Moving",
            "startTime": "2099-01-01T00:00:00Z",
            "replicas": [
                {
                    "brokerId": 0,
                    "topic": kafka_name,
                    "partition": 0,
                    "sourceLogDir": path("a"),
                    "targetLogDir": path("b"),
                    "bytesTotal": 100,
                    "state": "Moving",
                }
            ],
        },
    }


def run_pass(
    kafka_name: str, broker: FakeBroker | None = None, spec: dict[str, Any] | None = None
) -> tuple[FakeKube, FakeBroker, Any]:
    spec = spec or {}
    kube = FakeKube(
        {
            "brokerclusters": [{"metadata": {"name": CLUSTER}, "spec": {"replicas": 1}}],
            "topics": [topic(kafka_name)],
            "logdirmoves": [moving(kafka_name, **spec)],
        }
    )
    broker = broker or FakeBroker(kafka_name)
    ours = OurBrokersLogDirMoves(kube, FakePool(broker), NS, CLUSTER)  # type: ignore[arg-type]
    outcome = asyncio.run(reconcile_log_dir_move(kube, ours, moving(kafka_name, **spec)))  # type: ignore[arg-type]
    return kube, broker, outcome


def test_a_verified_move_is_recorded_in_a_topic_named_by_spec_topic_name() -> None:
    kube, _, outcome = run_pass("clicks.v2")
    assert outcome.status["phase"] == "Succeeded"
    (shard,) = kube.objects["partitionshards"]  # the state of record moved into its shard
    assert shard["metadata"]["name"] == "clicks-v2-0"
    assert shard["spec"]["partitions"][0]["replicas"] == [{"brokerId": 0, "logDir": path("b")}]


def test_a_pass_writes_the_moves_status_once() -> None:
    kube, broker, outcome = run_pass("clicks")
    writes = [(res, name) for res, name, _ in kube.status_writes]
    assert writes == [("partitionshards", "clicks-v2-0"), ("logdirmoves", "to-b")]
    assert kube.status_writes[-1][2] == outcome.status
    # Verified from describe-log-dirs: nothing was sent to the broker's move engine.
    assert broker.calls == ["describe-replica-log-dirs"]


def test_a_lift_the_broker_did_not_take_is_not_recorded_and_the_next_pass_lifts_it() -> None:
    """The move ended, and its copy throttle is lifted. A live broker that refused the lift
    would keep throttling its later copies until a restart, under a status saying the move
    is over: the pass stops unrecorded, still active, and the next one lifts it."""
    throttled = {"throttleBytesPerSecond": 1 << 20}
    refusing = FakeBroker("clicks", refuse_configs=True)
    kube, _, outcome = run_pass("clicks", refusing, throttled)
    assert outcome.active and outcome.status["phase"] == "Moving"
    assert [res for res, _, _ in kube.status_writes if res == "logdirmoves"] == []
    kube, broker, outcome = run_pass("clicks", spec=throttled)
    assert outcome.status["phase"] == "Succeeded"
    assert broker.calls[-1] == "set-configs 0"


class ThrottleClient:
    def __init__(self, answer: Exception | None) -> None:
        self.answer = answer
        self.rates: list[int] = []

    async def set_configs(self, cfg: wire.ThrottleConfig) -> None:
        if self.answer is not None:
            raise self.answer
        self.rates.append(cfg.intra_broker_throttled_rate or 0)


class ThrottlePool:
    """Broker 1 answers but refuses, broker 2 is down, broker 3 takes the write."""

    def __init__(self) -> None:
        self.clients = {
            1: ThrottleClient(InvalidRequestError("config refused")),
            2: ThrottleClient(BrokerUnavailableError("connection refused")),
            3: ThrottleClient(None),
        }

    async def client(self, ns: str, cluster: str, b: int) -> ThrottleClient:
        return self.clients[b]

    async def describe(self, ns: str, cluster: str, ids: list[int]) -> dict[int, object | None]:
        return {b: None if b == 2 else object() for b in ids}


def test_a_copy_throttle_a_live_broker_did_not_take_raises_once_the_others_have_it() -> None:
    """A broker that is down forgets the throttle when it restarts: passed over. A live one
    that did not take it keeps what it had: named in :class:`ActionFailed`, raised after the
    other brokers were written."""
    pool = ThrottlePool()
    ours = OurBrokersLogDirMoves(None, pool, NS, CLUSTER)  # type: ignore[arg-type]
    with pytest.raises(ActionFailed, match="broker 1") as failed:
        asyncio.run(ours.set_throttle(SetThrottle((1, 2, 3), 0)))
    assert "broker 2" not in str(failed.value)
    assert pool.clients[3].rates == [0]
    pool.clients[1].answer = None
    asyncio.run(ours.set_throttle(SetThrottle((1, 2, 3), 0)))  # the next pass lifts it
    assert pool.clients[1].rates == [0]
