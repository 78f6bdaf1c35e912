"""The one sender of controller commands (``control.broker_commands``, issue 38).

Each of the three commands re-raises a stale controller epoch, whatever broker answers it,
and passes over any other refusal (a later pass re-sends); the cluster controller's partition
creation is fenced by the brokers before it writes the state of record. The real path (a
deposed operator, the API server, broker processes) is
tests/integration/test_deposed_controller.py.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerUnavailableError
from jbod_broker.errors import KafkaError, StaleControllerEpochError
from jbod_operator.control.broker_commands import BrokerCommands
from jbod_operator.control.cluster_controller import ClusterController
from jbod_operator.plan.topic_partitions import PartitionCreation

STATE = wire.LeaderAndIsrPartition(
    topic="t", partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1], partition_epoch=0
)
META = wire.PartitionMetadata(
    topic="t", partition=0, leader=1, leader_epoch=0, isr=[1], replicas=[1], offline_replicas=[]
)
STOP = wire.StopReplicaPartition(topic="t", partition=0, delete=True)


class Broker:
    """A broker that answers every command with ``error`` (None: it takes it)."""

    def __init__(self, broker_id: int, error: KafkaError | None) -> None:
        self.broker_id, self.error = broker_id, error
        self.got: list[Any] = []

    def _answer(self, req: Any) -> None:
        self.got.append(req)
        if self.error is not None:
            raise self.error

    async def leader_and_isr(self, req: wire.LeaderAndIsrRequest) -> wire.LeaderAndIsrResponse:
        self._answer(req)
        return wire.LeaderAndIsrResponse(partitions=[])

    async def update_metadata(self, req: wire.UpdateMetadataRequest) -> None:
        self._answer(req)

    async def update_metadata_body(self, body: bytes) -> bool:
        self._answer(wire.UpdateMetadataRequest.model_validate_json(body))
        return True

    async def stop_replica(self, req: wire.StopReplicaRequest) -> wire.StopReplicaResponse:
        self._answer(req)
        return wire.StopReplicaResponse(partitions=[])


class Pool:
    controller_epoch = 3

    def __init__(self, errors: dict[int, KafkaError | None]) -> None:
        self.brokers = {b: Broker(b, e) for b, e in errors.items()}

    async def client(self, ns: str, cluster: str, broker_id: int) -> Broker:
        return self.brokers[broker_id]

    def endpoints(self, ns: str, cluster: str, ids: list[int]) -> list[wire.BrokerEndpoint]:
        return [wire.BrokerEndpoint(broker_id=i, url=f"http://127.0.0.1:{9000 + i}") for i in ids]


Command = Callable[[BrokerCommands], Coroutine[Any, Any, object]]
COMMANDS: dict[str, Command] = {
    "LeaderAndIsr": lambda c: c.leader_and_isr(2, [STATE], [1, 2]),
    "UpdateMetadata": lambda c: c.update_metadata([META], [1, 2]),
    "StopReplica": lambda c: c.stop_replica(2, [STOP]),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_stale_controller_epoch_is_re_raised_by_each_command(command: str) -> None:
    pool = Pool({1: None, 2: StaleControllerEpochError("epoch 3 is older than 4")})
    commands = BrokerCommands(pool, "ns", "c")  # type: ignore[arg-type]
    with pytest.raises(StaleControllerEpochError):
        asyncio.run(COMMANDS[command](commands))


@pytest.mark.parametrize("command", COMMANDS)
def test_another_refusal_is_passed_over_and_the_epoch_is_ours(command: str) -> None:
    """A broker that is down does not stop the command (a later pass re-sends it); every
    request carries the pool's epoch (the Lease's, read at each send)."""
    pool = Pool({1: None, 2: BrokerUnavailableError("broker 2 timed out")})
    commands = BrokerCommands(pool, "ns", "c")  # type: ignore[arg-type]
    assert asyncio.run(COMMANDS[command](commands)) is None
    sent = [r for b in pool.brokers.values() for r in b.got]
    assert sent and {r.controller_epoch for r in sent} == {3}
    if command == "UpdateMetadata":  # to every live broker, the one down included
        assert [len(b.got) for b in pool.brokers.values()] == [1, 1]


def test_confirm_epoch_names_no_partition_and_raises_for_a_newer_controller() -> None:
    pool = Pool({1: None, 2: StaleControllerEpochError("older")})
    commands = BrokerCommands(pool, "ns", "c")  # type: ignore[arg-type]
    with pytest.raises(StaleControllerEpochError):
        asyncio.run(commands.confirm_epoch([1, 2]))
    assert [r.partitions for r in pool.brokers[1].got] == [[]]


class Kube:
    """One Topic and no PartitionShards; counts the writes (statuses and shards)."""

    def __init__(self) -> None:
        self.topic: dict[str, Any] = {
            "metadata": {"name": "t", "namespace": "ns", "uid": "u1"},
            "spec": {"clusterName": "c", "partitions": 1, "replicationFactor": 1},
            "status": {},
        }
        self.writes = 0

    async def get(self, res: Any, ns: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.topic)

    async def list(self, res: Any, ns: str, **_: Any) -> list[dict[str, Any]]:
        return []

    async def replace_status(self, res: Any, ns: str, obj: dict[str, Any]) -> None:
        self.writes += 1
        self.topic["status"] = copy.deepcopy(obj["status"])

    async def create(self, res: Any, ns: str, obj: dict[str, Any]) -> None:
        self.writes += 1


def test_partition_creation_is_fenced_before_the_state_of_record_is_written() -> None:
    pool = Pool({1: StaleControllerEpochError("older")})
    kube = Kube()
    fenced: list[bool] = []

    async def on_fenced() -> None:
        fenced.append(True)

    ctrl = ClusterController("ns", "c", kube, pool, on_fenced=on_fenced)  # type: ignore[arg-type]
    record = {
        "partitions": [
            {
                "partition": 0,
                "replicas": [{"brokerId": 1, "logDir": "/d/data-a"}],
                "leader": 1,
                "leaderEpoch": 0,
                "isr": [1],
            }
        ]
    }

    async def decide(fresh: dict[str, Any]) -> PartitionCreation:
        return PartitionCreation(record, frozenset({0}), live=(1,), topic="t")

    with pytest.raises(StaleControllerEpochError):
        asyncio.run(ctrl.create_partitions("t", decide))
    assert fenced == [True] and kube.writes == 0 and kube.topic["status"] == {}
