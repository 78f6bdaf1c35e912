"""The Kafka LogDirMove adapter's pure mapping (``plan.kafka_log_dir_move``): DescribeLogDirs
results to the plan's observed models (dirs, move progress), AlterReplicaLogDirs answers to
start results, the cordon's config change; and the plan's condition for a cluster that cannot
be worked on."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from jbod_broker import wire
from jbod_operator.clients.kafka_admin import KafkaAdmin, KafkaAdminError
from jbod_operator.control.kafka_log_dir_moves import KafkaLogDirMoves
from jbod_operator.control.kafka_reassignments import KafkaReassignments
from jbod_operator.control.our_brokers import OurBrokersLogDirMoves, OurBrokersReassignments
from jbod_operator.handlers.executors import log_dir_moves_on, reassignments_on
from jbod_operator.models import LogDirMove
from jbod_operator.models.log_dir_move import MovePhase, ReplicaState
from jbod_operator.plan.execution import ActionFailed, ClusterUnusable
from jbod_operator.plan.kafka_dirs import kafka_broker_dirs, kafka_dir
from jbod_operator.plan.kafka_log_dir_move import (
    cordon_change,
    futures_of,
    move_progress,
    start_answer,
)
from jbod_operator.plan.kafka_types import BrokerLogDirs, LogDir, LogDirReplica
from jbod_operator.plan.logdirmove import Observed, advance, settle
from jbod_operator.plan.port_types import BrokerDirs, SetThrottle, StartAnswer

A = "/disks/a/data-0"
B = "/disks/b/kafka-logs"


def rep(topic: str, part: int, size: int, *, future: bool = False, lag: int = 0) -> LogDirReplica:
    return LogDirReplica(topic, part, size, lag, future)


def logdir(path: str, *replicas: LogDirReplica, **kw: object) -> LogDir:
    fields: dict[str, object] = {
        "error": None,
        "total_bytes": 1000,
        "usable_bytes": 600,
        "cordoned": False,
    }
    fields.update(kw)
    return LogDir(path=path, replicas=tuple(replicas), **fields)  # type: ignore[arg-type]


def test_a_kafka_dir_is_named_by_its_path_and_its_last_component() -> None:
    bd = kafka_broker_dirs(
        BrokerLogDirs(
            3,
            (
                logdir(A, rep("t", 0, 100), rep("t", 1, 50, future=True)),
                logdir(B, rep("t", 1, 70)),
            ),
        )
    )
    a, b = bd.dirs
    assert (a.name, b.name) == ("0", "kafka-logs")
    for ref in (A, "data-0", "0"):
        assert bd.find(ref) is a
    for ref in (B, "kafka-logs"):
        assert bd.find(ref) is b
    assert bd.find("a") is None
    assert a.replicas == {("t", 0): 100} and a.futures == frozenset({("t", 1)})
    assert b.replicas == {("t", 1): 70}
    assert bd.locate("t", 1) is b and bd.has_future(("t", 1))
    assert (a.live, a.cordoned, a.usable_bytes, a.total_bytes) == (True, False, 600, 1000)
    assert (a.reserved_bytes, a.headroom_bytes) == (0, 0)


def test_an_offline_dir_is_not_live_and_unknown_figures_are_zero() -> None:
    d = kafka_dir(
        logdir(A, error="KAFKA_STORAGE_ERROR", total_bytes=None, usable_bytes=None, cordoned=None)
    )
    assert (d.live, d.cordoned, d.usable_bytes, d.total_bytes) == (False, False, 0, 0)


def test_a_cordoned_dir_is_cordoned() -> None:
    assert kafka_dir(logdir(A, cordoned=True)).cordoned is True


def read(*dirs: LogDir) -> BrokerLogDirs:
    return BrokerLogDirs(1, dirs)


def test_progress_is_the_future_copy_s_size_against_the_current_one_s() -> None:
    r = read(logdir(A, rep("t", 0, 1000)), logdir(B, rep("t", 0, 400, future=True, lag=9)))
    (info,) = move_progress(r, [("t", 0)], {("t", 0): (10.0, 100)}, 12.0)
    assert info == wire.ReplicaLogDirInfo(
        topic="t",
        partition=0,
        current_log_dir=A,
        future_log_dir=B,
        future_offset_lag=9,
        bytes_copied=400,
        bytes_total=1000,
        state=wire.MoveState.COPYING,
        rate_bytes_per_sec=150.0,
        eta_seconds=4.0,
    )


def test_without_an_earlier_sample_there_is_no_rate_nor_eta() -> None:
    r = read(logdir(A, rep("t", 0, 1000)), logdir(B, rep("t", 0, 400, future=True)))
    (info,) = move_progress(r, [("t", 0)], {}, 12.0)
    assert (info.rate_bytes_per_sec, info.eta_seconds) == (0.0, None)


def test_a_future_as_large_as_the_current_copy_is_catching_up() -> None:
    r = read(logdir(A, rep("t", 0, 1000)), logdir(B, rep("t", 0, 1200, future=True)))
    (info,) = move_progress(r, [("t", 0)], {}, 0.0)
    assert info.state == wire.MoveState.CATCHING_UP
    assert (info.bytes_copied, info.bytes_total) == (1200, 1200)


def test_a_future_copy_in_an_offline_dir_failed() -> None:
    r = read(
        logdir(A, rep("t", 0, 1000)),
        logdir(B, rep("t", 0, 10, future=True), error="KAFKA_STORAGE_ERROR"),
    )
    (info,) = move_progress(r, [("t", 0)], {}, 0.0)
    assert info.state == wire.MoveState.FAILED
    assert info.error == f"log dir {B}: KAFKA_STORAGE_ERROR"


def test_no_future_copy_is_no_move() -> None:
    r = read(logdir(A, rep("t", 0, 1000)), logdir(B))
    here, absent = move_progress(r, [("t", 0), ("t", 5)], {}, 0.0)
    assert (here.state, here.current_log_dir, here.future_log_dir) == (
        wire.MoveState.NONE,
        A,
        None,
    )
    assert (absent.state, absent.current_log_dir, absent.bytes_total) == (
        wire.MoveState.NONE,
        None,
        0,
    )


def test_futures_of_lists_the_future_copies_and_their_sizes() -> None:
    r = read(logdir(A, rep("t", 0, 1000), rep("u", 2, 7, future=True)), logdir(B))
    assert futures_of(r) == {("u", 2): 7}


def test_alter_replica_log_dirs_answers_as_start_results() -> None:
    key = (1, "t", 0)
    assert start_answer(key, None).answer == StartAnswer.ACCEPTED
    assert start_answer(key, "REPLICA_NOT_AVAILABLE").answer == StartAnswer.NOT_THERE_YET
    refused = start_answer(key, "LOG_DIR_NOT_FOUND")
    assert (refused.answer, refused.message) == (StartAnswer.REFUSED, "LOG_DIR_NOT_FOUND")


def test_the_cordon_changes_only_what_differs_and_only_where_kafka_has_it() -> None:
    assert cordon_change(logdir(A, cordoned=False), True) == (A,)
    assert cordon_change(logdir(A, cordoned=True), True) is None
    assert cordon_change(logdir(A, cordoned=True), False) == (A,)
    assert cordon_change(logdir(A, cordoned=None), True) is None  # before Kafka 4.3


def test_a_cluster_that_cannot_be_worked_on_is_pending_with_its_reason() -> None:
    move = LogDirMove.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ns", "generation": 1},
            "spec": {"clusterName": "k", "drain": {"brokerId": 1, "logDir": "a"}},
        }
    )
    d = advance(
        Observed(move, 0.0, cluster_size=None, cluster_problem=("ClusterAmbiguous", "both"))
    )
    assert d.status.phase == MovePhase.PENDING and not d.actions
    (progressing,) = [c for c in d.status.conditions if c.type == "Progressing"]
    assert (progressing.reason, progressing.message) == ("ClusterAmbiguous", "both")


def drain_move(**status: object) -> LogDirMove:
    return LogDirMove.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ns", "generation": 1},
            "spec": {"clusterName": "k", "drain": {"brokerId": 1, "logDir": A}},
            **({"status": status} if status else {}),
        }
    )


def old_kafka(
    a: tuple[LogDirReplica, ...], b: tuple[LogDirReplica, ...] = ()
) -> dict[int, BrokerDirs | None]:
    """Broker 1 of a Kafka before 4.3: DescribeLogDirs has no cordon flag."""
    dirs = (logdir(A, *a, cordoned=None), logdir(B, *b, cordoned=None))
    return {1: kafka_broker_dirs(BrokerLogDirs(1, dirs))}


def test_a_drain_where_kafka_cannot_cordon_says_so_when_planned_and_when_drained() -> None:
    planned = advance(Observed(drain_move(), 0.0, 2, old_kafka((rep("t", 0, 100),))))
    kind, reason, message = planned.events[0]
    assert (kind, reason) == ("Normal", "Planned")
    assert message == (
        "1 replicas to move; broker 1 cannot cordon a log dir (Kafka's cordoned.log.dirs "
        "needs 4.3+): not cordoned, new replicas may still be placed there"
    )
    entries = [
        e.model_copy(update={"state": ReplicaState.MOVING}).model_dump(by_alias=True)
        for e in planned.status.replicas or []
    ]
    moving = drain_move(phase="Moving", startTime=planned.status.start_time, replicas=entries)
    obs = Observed(moving, 1.0, 2, old_kafka((), (rep("t", 0, 100),)))  # moved: A is empty
    drained = settle(obs, advance(obs), [])
    assert drained.status.phase == MovePhase.SUCCEEDED
    (ok,) = [c for c in drained.status.conditions if c.type == "Succeeded"]
    assert (ok.reason, ok.message) == (
        "Drained",
        f"log dir {A} of broker 1 is verified empty; broker 1 cannot cordon a log dir "
        "(Kafka's cordoned.log.dirs needs 4.3+): not cordoned, new replicas may still be "
        "placed there",
    )


def test_a_drain_where_kafka_can_cordon_says_nothing_of_it() -> None:
    brokers: dict[int, BrokerDirs | None] = {
        1: kafka_broker_dirs(BrokerLogDirs(1, (logdir(A, rep("t", 0, 100)), logdir(B))))
    }
    planned = advance(Observed(drain_move(), 0.0, 2, brokers))
    assert planned.events[0] == ("Normal", "Planned", "1 replicas to move")


# -- which executor: handlers.executors.log_dir_moves_on --------------------------------------


class FakeKube:
    """The API server's objects by (plural, namespace, name)."""

    def __init__(self, *objects: tuple[str, dict[str, Any]]) -> None:
        self.objects = {(plural, "ns", o["metadata"]["name"]): o for plural, o in objects}

    async def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource.plural, namespace, name))


class FakeCtx:
    def __init__(self, kube: FakeKube) -> None:
        self.kube, self.pool = kube, object()
        self.kafka_admins: dict[tuple[str, str], KafkaAdmin] = {}
        self.controllers: list[tuple[str, str]] = []
        self.locks: dict[str, asyncio.Lock] = {}

    def ensure_controller(self, ns: str, name: str) -> Any:
        self.controllers.append((ns, name))
        return SimpleNamespace(lock=asyncio.Lock())


def kafka_cluster_obj(**spec: Any) -> tuple[str, dict[str, Any]]:
    return (
        "kafkaclusters",
        {
            "metadata": {"name": "k", "namespace": "ns"},
            "spec": {"bootstrapServers": ["h:9092"], **spec},
        },
    )


BROKER_CLUSTER = ("brokerclusters", {"metadata": {"name": "k", "namespace": "ns"}, "spec": {}})


async def test_a_kafka_cluster_s_moves_go_through_its_admin_client() -> None:
    ctx = FakeCtx(FakeKube(kafka_cluster_obj()))
    ex = await log_dir_moves_on(ctx, "ns", "k")  # type: ignore[arg-type]
    assert isinstance(ex, KafkaLogDirMoves)
    assert ex.admin is ctx.kafka_admins[("ns", "k")]
    assert ex.admin.connection.bootstrap_servers == ("h:9092",)
    assert ctx.controllers == []  # no controller for a cluster the operator does not run


async def test_a_broker_cluster_s_moves_go_through_our_brokers() -> None:
    ctx = FakeCtx(FakeKube(BROKER_CLUSTER))
    ex = await log_dir_moves_on(ctx, "ns", "k")  # type: ignore[arg-type]
    assert isinstance(ex, OurBrokersLogDirMoves)
    assert ctx.controllers == [("ns", "k")]


async def test_a_kafka_cluster_s_reassignments_go_through_its_admin_client() -> None:
    ctx = FakeCtx(FakeKube(kafka_cluster_obj()))
    ex = await reassignments_on(ctx, "ns", "k")  # type: ignore[arg-type]
    assert isinstance(ex, KafkaReassignments)
    assert ex.admin is ctx.kafka_admins[("ns", "k")]
    assert ctx.controllers == []
    again = await reassignments_on(ctx, "ns", "k")  # type: ignore[arg-type]
    assert isinstance(again, KafkaReassignments) and again.lock is ex.lock  # one per cluster


async def test_a_broker_cluster_s_reassignments_go_through_our_brokers() -> None:
    ctx = FakeCtx(FakeKube(BROKER_CLUSTER))
    ex = await reassignments_on(ctx, "ns", "k")  # type: ignore[arg-type]
    assert isinstance(ex, OurBrokersReassignments)
    assert ctx.controllers == [("ns", "k")]


async def observe_cluster(ex: Any) -> None:
    """The first observing call of either executor kind."""
    await (ex.cluster_size() if hasattr(ex, "cluster_size") else ex.cluster())


EXECUTORS = [log_dir_moves_on, reassignments_on]


@pytest.mark.parametrize("choose", EXECUTORS)
async def test_two_clusters_of_one_name_do_nothing_and_say_why(choose: Any) -> None:
    ctx = FakeCtx(FakeKube(BROKER_CLUSTER, kafka_cluster_obj()))
    ex = await choose(ctx, "ns", "k")
    with pytest.raises(ClusterUnusable) as why:
        await observe_cluster(ex)
    assert why.value.reason == "ClusterAmbiguous"
    assert "both a BrokerCluster and a KafkaCluster are named ns/k" in why.value.message
    assert ctx.kafka_admins == {} and ctx.controllers == []


@pytest.mark.parametrize("choose", EXECUTORS)
async def test_a_kafka_cluster_whose_secret_is_missing_says_which(choose: Any) -> None:
    ref = {"secretKeyRef": {"name": "creds", "key": "password"}}
    sasl = {"mechanism": "PLAIN", "username": ref, "password": ref}
    ctx = FakeCtx(FakeKube(kafka_cluster_obj(securityProtocol="SASL_PLAINTEXT", sasl=sasl)))
    ex = await choose(ctx, "ns", "k")
    with pytest.raises(ClusterUnusable) as why:
        await observe_cluster(ex)
    assert (why.value.reason, why.value.message) == (
        "CredentialsMissing",
        "KafkaCluster ns/k: Secret ns/creds not found",
    )


class ConfigsRefusedOn2:
    """Brokers 1-3 unfenced; writing a config to broker 2 fails."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def describe_cluster(self) -> Any:
        brokers = [SimpleNamespace(broker_id=b, fenced=False) for b in (1, 2, 3)]
        return SimpleNamespace(brokers=brokers)

    async def ensure_configs(self, kind: Any, name: str, changes: Any) -> None:
        self.sent.append(name)
        if name == "2":
            raise KafkaAdminError("IncrementalAlterConfigs", "REQUEST_TIMED_OUT")


def test_a_copy_throttle_kafka_did_not_take_raises_once_every_broker_was_tried() -> None:
    """Kafka keeps the copy throttle until it is lifted: a failed set or lift is not a
    warning to move past (the end would leave it on the broker) but ActionFailed, after
    the other brokers got theirs; a broker that is not live is skipped (KAFKA-13392)."""
    admin = ConfigsRefusedOn2()
    ex = KafkaLogDirMoves(admin)  # type: ignore[arg-type]
    with pytest.raises(ActionFailed, match="broker 2"):
        asyncio.run(ex.set_throttle(SetThrottle((1, 2, 3, 4), 0)))
    assert admin.sent == ["1", "2", "3"]
