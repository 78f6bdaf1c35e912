"""A LogDirMove driven to its end through the step-execution interface
(``plan.execution.LogDirMoveExecutor``) by the handler's own reconcile function, over an
in-memory adapter: the handler reaches the cluster only through the interface (issue 22, one
controller code path, two adapters).

The stand-in API server serves LogDirMoves alone and refuses every other resource, so a pass
that read a BrokerCluster or a Topic itself, or that reached a broker, fails here; our
brokers' adapter (``control.our_brokers``) is exercised against the same handler by
test_logdirmove_handler.py, the integration tests and e2e/test_logdirmove*.py.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from jbod_broker import wire
from jbod_operator.handlers.logdirmoves import (
    MoveOutcome,
    delete_log_dir_move,
    reconcile_log_dir_move,
)
from jbod_operator.plan.execution import ActionFailed, LogDirMoveExecutor
from jbod_operator.plan.port_types import (
    BrokerDirs,
    CancelMoves,
    Cordon,
    Dir,
    RecordInTopic,
    ReplicaKey,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
)

NS, CLUSTER, NAME = "kafka", "kip", "drain-a"
SIZE = 1000


def path(broker: int, name: str) -> str:
    return f"/data/{broker}/data-{name}"


class MovesInMemory:
    """Two brokers with dirs a and b whose moves run when the test says (``finish``), with
    every call the handler made through the interface."""

    def __init__(self) -> None:
        self.held: dict[int, dict[str, dict[tuple[str, int], int]]] = {
            b: {"a": {}, "b": {}} for b in (0, 1)
        }
        self.futures: dict[ReplicaKey, str] = {}
        """Moves in flight: replica → target dir name."""
        self.cordoned: set[tuple[int, str]] = set()
        self.rates: dict[int, int] = {}
        self.recorded: list[RecordInTopic] = []
        self.calls: list[str] = []

    def where(self, key: ReplicaKey) -> str | None:
        b, topic, partition = key
        return next((d for d, h in self.held[b].items() if (topic, partition) in h), None)

    def finish(self) -> None:
        """Every move in flight copied and swapped in."""
        for (b, topic, partition), target in self.futures.items():
            here = self.where((b, topic, partition))
            assert here is not None
            self.held[b][target][(topic, partition)] = self.held[b][here].pop((topic, partition))
        self.futures.clear()

    # -- LogDirMoveExecutor -------------------------------------------------------------------

    async def cluster_size(self) -> int | None:
        return len(self.held)

    async def describe_dirs(self, brokers: Sequence[int]) -> Mapping[int, BrokerDirs | None]:
        self.calls.append("describe_dirs")
        return {
            b: BrokerDirs(
                b,
                tuple(
                    Dir(
                        name,
                        path(b, name),
                        live=True,
                        cordoned=(b, name) in self.cordoned,
                        usable_bytes=1 << 29,
                        replicas=dict(held),
                        futures=frozenset(
                            (t, p)
                            for (fb, t, p), to in self.futures.items()
                            if fb == b and to == name
                        ),
                        total_bytes=1 << 30,
                    )
                    for name, held in self.held[b].items()
                ),
            )
            for b in brokers
        }

    async def describe_moves(
        self, broker: int, replicas: Sequence[tuple[str, int]]
    ) -> Sequence[wire.ReplicaLogDirInfo]:
        self.calls.append("describe_moves")
        out = []
        for topic, partition in replicas:
            to = self.futures.get((broker, topic, partition))
            if to is not None:
                here = self.where((broker, topic, partition))
                out.append(
                    wire.ReplicaLogDirInfo(
                        topic=topic,
                        partition=partition,
                        current_log_dir=path(broker, here or ""),
                        future_log_dir=path(broker, to),
                        future_offset_lag=0,
                        bytes_copied=SIZE // 2,
                        bytes_total=SIZE,
                        state=wire.MoveState.COPYING,
                    )
                )
        return out

    async def wait_for_a_move_to_end(
        self, by_broker: Mapping[int, Sequence[tuple[str, int]]], wait_s: float
    ) -> bool:
        return False  # no long poll here: the caller paces itself

    async def reassigning(self) -> Mapping[tuple[str, int], str]:
        self.calls.append("reassigning")
        return {}

    async def start(self, action: Start) -> StartResult:
        self.calls.append("start")
        if self.where(action.replica) is None:
            return StartResult(action.replica, StartAnswer.NOT_THERE_YET)
        self.futures[action.replica] = wire.log_dir_short_name(action.target)
        return StartResult(action.replica, StartAnswer.ACCEPTED)

    async def resend(self, action: Resend) -> None:
        self.calls.append("resend")
        self.futures[action.replica] = wire.log_dir_short_name(action.target)

    async def cancel(self, action: CancelMoves) -> None:
        self.calls.append("cancel")
        for r in action.replicas:
            self.futures.pop(r, None)

    async def set_throttle(self, action: SetThrottle) -> None:
        self.calls.append(f"set_throttle {action.rate}")
        for b in action.brokers:
            self.rates[b] = action.rate

    async def cordon(self, action: Cordon) -> None:
        self.calls.append(f"cordon {action.on}")
        key = (action.drain.broker_id, action.drain.log_dir)
        if action.on:
            self.cordoned.add(key)
        else:
            self.cordoned.discard(key)

    async def record_placement(self, action: RecordInTopic) -> None:
        self.calls.append("record_placement")
        self.recorded.append(action)


class OnlyLogDirMoves:
    """The API server as far as the handler may use it: its own resources, nothing else."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.status_writes = 0

    def _mine(self, res: Any) -> None:
        assert res.plural == "logdirmoves", f"the handler read {res.plural} itself"

    async def get(self, res: Any, ns: str | None, name: str) -> dict[str, Any] | None:
        self._mine(res)
        return copy.deepcopy(self.body)

    async def list(self, res: Any, ns: str | None = None, **_: Any) -> list[dict[str, Any]]:
        self._mine(res)
        return [copy.deepcopy(self.body)]

    async def write_status(
        self, res: Any, ns: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        self._mine(res)
        assert before != after
        self.status_writes += 1
        self.body["status"] = copy.deepcopy(after)


def drain_body() -> dict[str, Any]:
    return {
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "generation": 1,
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "uid": "u1",
        },
        "spec": {
            "clusterName": CLUSTER,
            "drain": {"brokerId": 0, "logDir": "a"},
            "throttleBytesPerSecond": 1_000_000,
            "maxConcurrentMovesPerBroker": 1,
        },
    }


def one_pass(kube: OnlyLogDirMoves, ex: LogDirMoveExecutor) -> MoveOutcome:
    return asyncio.run(reconcile_log_dir_move(kube, ex, copy.deepcopy(kube.body)))  # type: ignore[arg-type]


def test_a_drain_runs_to_its_end_through_the_interface_alone() -> None:
    cluster = MovesInMemory()
    for p in range(3):
        cluster.held[0]["a"][("clicks", p)] = SIZE * (p + 1)
    cluster.held[1]["a"][("clicks", 0)] = SIZE  # another broker's replica stays where it is
    kube = OnlyLogDirMoves(drain_body())

    phases = []
    for _ in range(10):
        out = one_pass(kube, cluster)
        phases.append(out.status["phase"])
        if out.status["phase"] == "Succeeded":
            break
        assert len(cluster.futures) <= 1  # maxConcurrentMovesPerBroker
        cluster.finish()

    assert phases[0] == "Moving" and phases[-1] == "Succeeded", phases
    assert kube.status_writes == len(phases)  # once per pass
    assert cluster.held[0]["a"] == {}  # drained, and it stays cordoned
    assert sorted(cluster.held[0]["b"]) == [("clicks", 0), ("clicks", 1), ("clicks", 2)]
    assert cluster.cordoned == {(0, "a")}
    assert cluster.rates == {0: 0}  # the throttle set while moving, lifted at the end
    assert "set_throttle 1000000" in cluster.calls
    assert sorted(r.replica for r in cluster.recorded) == [(0, "clicks", p) for p in range(3)]
    assert {r.path for r in cluster.recorded} == {path(0, "b")}
    # Each replica was started once: none was re-sent.
    assert cluster.calls.count("start") == 3 and "resend" not in cluster.calls


def test_deleting_a_running_drain_cancels_it_through_the_interface() -> None:
    cluster = MovesInMemory()
    cluster.held[0]["a"][("clicks", 0)] = SIZE
    kube = OnlyLogDirMoves(drain_body())
    one_pass(kube, cluster)
    assert cluster.futures and cluster.cordoned == {(0, "a")}

    asyncio.run(delete_log_dir_move(cluster, copy.deepcopy(kube.body)))

    assert cluster.futures == {} and cluster.cordoned == set() and cluster.rates == {0: 0}


class LiftFailsOnce(MovesInMemory):
    """Kafka refuses the first lift of the throttle (a timed-out IncrementalAlterConfigs)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    async def set_throttle(self, action: SetThrottle) -> None:
        if action.rate == 0 and not self.refused:
            self.refused += 1
            raise ActionFailed("throttle not set: broker 0: REQUEST_TIMED_OUT")
        await super().set_throttle(action)


def test_a_lift_that_did_not_take_is_not_recorded_and_the_next_pass_lifts_it() -> None:
    """Kafka keeps a throttle until it is lifted: when the last pass' lift failed and the
    pass still wrote Succeeded, nothing ever lifted it. Now the pass stops unrecorded (still
    active) and the next one decides the end, and the lift, again."""
    cluster = LiftFailsOnce()
    cluster.held[0]["a"][("clicks", 0)] = SIZE
    kube = OnlyLogDirMoves(drain_body())
    out = one_pass(kube, cluster)
    assert out.status["phase"] == "Moving"
    cluster.finish()
    writes = kube.status_writes

    stopped = one_pass(kube, cluster)

    assert cluster.refused == 1 and cluster.rates == {0: 1_000_000}
    assert stopped.active and kube.status_writes == writes  # nothing recorded
    assert kube.body["status"]["phase"] == "Moving"
    ended = one_pass(kube, cluster)
    assert ended.status["phase"] == "Succeeded" and cluster.rates == {0: 0}
