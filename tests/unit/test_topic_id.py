"""Topic ids (KIP-516): Kafka's string form, the ``partition.metadata`` codec, the broker's
check on LeaderAndIsr and at load, and the operator's assignment (once per Topic, kept)."""

from __future__ import annotations

import asyncio
import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from jbod_broker import wire
from jbod_broker.config import BrokerConfig
from jbod_broker.replica_manager import ReplicaManager
from jbod_broker.storage.checkpoints import (
    CheckpointError,
    format_partition_metadata,
    parse_partition_metadata,
)
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import (
    PARTITION_METADATA,
    TopicPartition,
    format_topic_id,
    new_topic_id,
    parse_topic_id,
)
from jbod_operator.handlers.topics import reconcile_topic

TP = TopicPartition("t", 0)
ID_A = format_topic_id(bytes(range(16)))
ID_B = format_topic_id(bytes(range(16, 32)))

# -- Kafka's string form and file format --------------------------------------------------


def test_topic_id_string_is_kafkas_base64url_without_padding() -> None:
    raw = bytes.fromhex("fb7f3e9c0a1b4c2d8e9fa0b1c2d3e4f5")
    assert format_topic_id(raw) == base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert parse_topic_id(format_topic_id(raw)) == raw
    for _ in range(200):
        tid = new_topic_id()
        assert len(tid) == 22 and not tid.startswith("-") and parse_topic_id(tid)


@pytest.mark.parametrize(
    "bad",
    [
        "AAAAAAAAAAAAAAAAAAAAAA",  # the zero id: "no id" in Kafka
        "AAAAAAAAAAAAAAAAAAAAAQ",  # the metadata topic's reserved id
        "AAECAwQFBgcICQoLDA0ODw==",  # padded: not Kafka's spelling
        "AAECAwQFBgcICQoLDA0ODw+",  # not base64url
        "AAECAwQFBgcICQoLDA0OD",  # too short
        "AAECAwQFBgcICQoLDA0ODx",  # stray bits past 128: a second spelling of another id
    ],
)
def test_topic_id_refuses_what_is_not_one_kafka_spelling(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_topic_id(bad)


def test_partition_metadata_codec_is_kafkas() -> None:
    # PartitionMetadata.encode: two lines, no trailing newline.
    assert format_partition_metadata(ID_A) == f"version: 0\ntopic_id: {ID_A}".encode()
    assert parse_partition_metadata(format_partition_metadata(ID_A), "f") == ID_A
    # Kafka's reader splits at ":" plus any whitespace and accepts a trailing newline.
    assert parse_partition_metadata(f"version:  0\ntopic_id:\t{ID_B}\n".encode(), "f") == ID_B
    for bad in (
        b"",
        b"version: 0\n",
        b"version: -1\ntopic_id: " + ID_A.encode(),
        b"version: x\ntopic_id: " + ID_A.encode(),
        b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
        b"version: 0\ntopic_id " + ID_A.encode(),
    ):
        with pytest.raises(CheckpointError):
            parse_partition_metadata(bad, "f")


# -- the broker ---------------------------------------------------------------------------


def make(tmp_path: Path) -> ReplicaManager:
    cfg = BrokerConfig.model_validate(
        {
            "broker.id": 1,
            "log.dirs": [str(tmp_path / "a"), str(tmp_path / "b")],
            "auth.disabled": True,
        }
    )
    lm = LogManager(cfg.log_dirs, broker_id=1, default_config=cfg.log_config())
    lm.startup()
    return ReplicaManager(cfg, lm)


def lai(topic_id: str | None, epoch: int = 0, configs: dict[str, str] | None = None) -> Any:
    return wire.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=1,
        partitions=[
            wire.LeaderAndIsrPartition(
                topic=TP.topic,
                partition=TP.partition,
                leader=1,
                leader_epoch=epoch,
                isr=[1],
                replicas=[1],
                is_new_replica=True,
                configs=configs or {},
                topic_id=topic_id,
            )
        ],
    )


def metadata_file(rm: ReplicaManager) -> Path:
    lg = rm.logs.get_log(TP)
    assert lg is not None
    return Path(lg.dir_path) / PARTITION_METADATA


def test_leader_and_isr_writes_partition_metadata_and_refuses_another_id(tmp_path: Path) -> None:
    rm = make(tmp_path)
    assert [r.error for r in rm.leader_and_isr(lai(ID_A)).partitions] == [None]
    assert metadata_file(rm).read_bytes() == format_partition_metadata(ID_A)
    assert rm.topic_by_id(ID_A) == "t"
    assert rm.metadata_response().partitions[0].topic_id == ID_A

    # Another id for the same name: INCONSISTENT_TOPIC_ID, and nothing changed (the epoch,
    # the config and the file stay as they were).
    (res,) = rm.leader_and_isr(lai(ID_B, epoch=1, configs={"retention.ms": "1000"})).partitions
    assert res.error == "INCONSISTENT_TOPIC_ID" and ID_A in (res.message or "")
    assert rm.partitions[TP].leader_epoch == 0
    lg = rm.logs.get_log(TP)
    assert lg is not None and lg.config.retention_ms != 1000
    assert metadata_file(rm).read_bytes() == format_partition_metadata(ID_A)
    # The same id again is accepted.
    assert [r.error for r in rm.leader_and_isr(lai(ID_A, epoch=1)).partitions] == [None]


def test_the_id_is_recorded_when_it_first_arrives_and_checked_after_a_restart(
    tmp_path: Path,
) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(None))
    assert not metadata_file(rm).exists()  # no id yet: nothing written, nothing checked
    rm.leader_and_isr(lai(ID_A, epoch=1))
    assert metadata_file(rm).read_bytes() == format_partition_metadata(ID_A)
    rm.logs.shutdown()

    again = make(tmp_path)  # the id is read from partition.metadata at load
    lg = again.logs.get_log(TP)
    assert lg is not None and lg.topic_id == ID_A
    (res,) = again.leader_and_isr(lai(ID_B, epoch=2)).partitions
    assert res.error == "INCONSISTENT_TOPIC_ID"
    assert TP not in again.partitions


def test_an_unreadable_file_leaves_the_id_unknown_until_the_controller_sends_it(
    tmp_path: Path,
) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(ID_A))
    rm.logs.shutdown()
    metadata_file(rm).write_bytes(b"version: 0\n")
    again = make(tmp_path)
    lg = again.logs.get_log(TP)
    assert lg is not None and lg.topic_id is None
    assert [r.error for r in again.leader_and_isr(lai(ID_B)).partitions] == [None]
    assert metadata_file(again).read_bytes() == format_partition_metadata(ID_B)


def test_a_move_copy_starts_with_the_id(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(ID_A))
    src = rm.logs.get_log(TP)
    assert src is not None
    dest = next(d for d in rm.logs.dirs if d != src.log_dir)
    future = rm.logs.create_future_log(TP, dest)
    assert future.topic_id == ID_A
    assert (Path(future.dir_path) / PARTITION_METADATA).read_bytes() == (
        format_partition_metadata(ID_A)
    )


# -- the operator -------------------------------------------------------------------------


class FakeKube:
    """The API server's side of a Topic pass: one Topic, one BrokerCluster, status writes."""

    def __init__(self, topic: dict[str, Any], cluster: dict[str, Any]) -> None:
        self.topic, self.cluster = topic, cluster
        self.shards: dict[str, dict[str, Any]] = {}

    async def list(self, res: Any, ns: str) -> list[dict[str, Any]]:
        if res.plural == "partitionshards":
            return copy.deepcopy(list(self.shards.values()))
        return [copy.deepcopy(self.topic)]

    async def create(self, res: Any, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        return await self.replace(res, ns, obj)

    async def replace(self, res: Any, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
        rv = str(len(self.shards) + int(obj["metadata"].get("resourceVersion") or 0) + 1)
        stored = {**copy.deepcopy(obj), "metadata": {**obj["metadata"], "resourceVersion": rv}}
        self.shards[obj["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    async def get(self, res: Any, ns: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.topic if name == self.topic["metadata"]["name"] else self.cluster)

    async def replace_status(self, res: Any, ns: str, obj: dict[str, Any]) -> None:
        self.topic["status"] = copy.deepcopy(obj["status"])

    async def write_status(
        self, res: Any, ns: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        partitions = self.topic.get("status", {}).get("partitions")
        legacy = {"partitions": partitions} if partitions else {}
        self.topic["status"] = {**copy.deepcopy(after), **legacy}


class FakeBroker:
    def __init__(self, sent: list[wire.LeaderAndIsrPartition]) -> None:
        self.sent = sent

    async def alter_replica_log_dirs(self, moves: Any) -> None:
        return None

    async def leader_and_isr(self, req: wire.LeaderAndIsrRequest) -> wire.LeaderAndIsrResponse:
        self.sent.extend(req.partitions)
        return wire.LeaderAndIsrResponse(partitions=[])

    async def update_metadata(self, req: wire.UpdateMetadataRequest) -> None:
        return None

    async def update_metadata_body(self, body: bytes) -> bool:
        return True


class FakePool:
    controller_epoch = 1

    def __init__(self) -> None:
        self.sent: list[wire.LeaderAndIsrPartition] = []

    async def describe(self, ns: str, cluster: str, ids: list[int]) -> dict[int, Any]:
        return {
            i: wire.DescribeLogDirsResponse(
                broker_id=i,
                log_dirs=[
                    wire.LogDirDescription(
                        path="/d/data-a",
                        is_live=True,
                        error=None,
                        total_bytes=1 << 30,
                        usable_bytes=1 << 30,
                        cordoned=False,
                        partitions=[],
                    )
                ],
            )
            for i in ids
        }

    def endpoints(self, ns: str, cluster: str, ids: list[int]) -> list[wire.BrokerEndpoint]:
        return [wire.BrokerEndpoint(broker_id=i, url=f"http://127.0.0.1:{9000 + i}") for i in ids]

    async def client(self, ns: str, cluster: str, broker_id: int) -> FakeBroker:
        return FakeBroker(self.sent)


def _resources(partitions: int) -> tuple[dict[str, Any], dict[str, Any]]:
    topic = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": "orders", "namespace": "ns", "generation": 1, "uid": "u1"},
        "spec": {"clusterName": "kip", "partitions": partitions, "replicationFactor": 1},
    }
    cluster = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": "kip", "namespace": "ns"},
        "spec": {"replicas": 2, "logDirs": [{"name": "a", "size": "1Gi"}]},
    }
    return topic, cluster


def _pass(kube: FakeKube, pool: FakePool) -> None:
    asyncio.run(reconcile_topic(kube, pool, copy.deepcopy(kube.topic)))  # type: ignore[arg-type]


def test_the_operator_assigns_a_topic_id_once_and_keeps_it() -> None:
    topic, cluster = _resources(2)
    kube, pool = FakeKube(topic, cluster), FakePool()
    _pass(kube, pool)
    tid = kube.topic["status"]["topicId"]
    parse_topic_id(tid)
    # Brokers heard of the partitions with the id, written before they were told.
    assert {p.topic_id for p in pool.sent} == {tid} and len(pool.sent) == 2

    _pass(kube, pool)  # a pass with nothing new
    assert kube.topic["status"]["topicId"] == tid
    kube.topic["spec"]["partitions"] = 3  # more partitions: the same id
    pool.sent.clear()
    _pass(kube, pool)
    assert kube.topic["status"]["topicId"] == tid
    assert 2 in {p.partition for p in pool.sent} and {p.topic_id for p in pool.sent} == {tid}


def test_a_topic_from_before_topic_ids_gets_one_and_keeps_it() -> None:
    topic, cluster = _resources(1)
    kube, pool = FakeKube(topic, cluster), FakePool()
    _pass(kube, pool)
    del kube.topic["status"]["topicId"]
    _pass(kube, pool)
    tid = kube.topic["status"]["topicId"]
    parse_topic_id(tid)
    _pass(kube, pool)
    assert kube.topic["status"]["topicId"] == tid
