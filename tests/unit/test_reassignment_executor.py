"""A PartitionReassignment driven to its end through the step-execution interface
(``plan.execution.ReassignmentExecutor``) by the handler's own reconcile function, over an
in-memory adapter: the handler reaches the cluster only through the interface (issue 22, one
controller code path, two adapters).

The stand-in API server serves the operator's own resources (PartitionReassignments,
LogDirMoves) and refuses every other, so a pass that read a BrokerCluster or a Topic itself,
or reached a broker, fails here. Our brokers' adapter (``control.our_brokers``) runs under the
same handler in the integration tests and e2e/test_reassignment*.py, test_rebalance*.py.

Also here: the table in ``plan.execution``'s docstring, which maps each interface method to the
Kafka Admin API calls an adapter over Kafka's controller would make, names every method of both
interfaces and only the Admin API calls issue 22 lists. Whether each such adapter method can
really be written with those calls is checked by review only: no test can show it before that
adapter exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerUnavailableError
from jbod_operator.control.our_brokers import OurBrokersReassignments, merged_throttle
from jbod_operator.handlers.reassignments import Outcome, reconcile_reassignment, run_actions
from jbod_operator.models import PartitionReassignment
from jbod_operator.plan import execution
from jbod_operator.plan.execution import ActionFailed, LogDirMoveExecutor, ReassignmentExecutor
from jbod_operator.plan.port_types import (
    TP,
    BrokerDirs,
    ClusterSeen,
    Delete,
    Dir,
    PartitionsSeen,
    PartView,
    PreferDir,
    RecordDirs,
    Tell,
    Throttle,
    ThrottleSeen,
    TopicView,
    WritePartition,
)

NS, CLUSTER, NAME = "kafka", "kip", "to-2-3"
SIZE = 1000


def path(broker: int, name: str) -> str:
    return f"/data/{broker}/data-{name}"


class StepsInMemory:
    """Four brokers with dirs a and b and the partition state of record, changed by the
    actions as a controller and its brokers would carry them out; every call recorded."""

    def __init__(self) -> None:
        self.n = 4
        self.dir_names = ("a", "b")
        self.live = set(range(self.n))
        self.topics: dict[str, TopicView] = {}
        self.held: dict[int, dict[str, dict[TP, int]]] = {
            b: {d: {} for d in self.dir_names} for b in range(self.n)
        }
        self.preferred: dict[tuple[int, TP], str] = {}
        self.throttled: dict[int, Throttle] = {}
        """The last throttle each broker was given."""
        self.rates_set: set[int] = set()
        self.calls: list[str] = []
        self.most_in_step = 0

    def add_topic(self, name: str, assignment: dict[int, tuple[int, ...]]) -> None:
        parts = {}
        for p, reps in assignment.items():
            parts[p] = PartView(
                topic=name,
                partition=p,
                replicas=reps,
                dirs=tuple(path(b, "a") for b in reps),
                leader=reps[0],
                leader_epoch=3,
                isr=reps,
                partition_epoch=7,
            )
            for b in reps:
                self.held[b]["a"][(name, p)] = SIZE
        self.topics[name] = TopicView(f"{name}-res", name, 1, parts)

    def set_part(self, view: PartView) -> None:
        tv = self.topics[view.topic]
        self.topics[view.topic] = replace(tv, partitions={**tv.partitions, view.partition: view})

    def where(self, broker: int, key: TP) -> str | None:
        return next((d for d, held in self.held[broker].items() if key in held), None)

    def catch_up(self) -> None:
        """The new replicas of the steps in flight copied everything and joined the ISR."""
        for tv in list(self.topics.values()):
            for pv in tv.partitions.values():
                if not pv.adding:
                    continue
                for b in pv.adding:
                    d = self.where(b, pv.key)
                    if d is not None:
                        self.held[b][d][pv.key] = SIZE
                isr = pv.isr + tuple(b for b in pv.adding if b not in pv.isr)
                self.set_part(replace(pv, isr=isr, partition_epoch=pv.partition_epoch + 1))

    # -- ReassignmentExecutor -----------------------------------------------------------------

    async def cluster(self) -> ClusterSeen | None:
        self.calls.append("cluster")
        brokers: dict[int, BrokerDirs | None] = {
            b: BrokerDirs(
                b,
                tuple(
                    Dir(d, path(b, d), True, False, 10**9, dict(self.held[b][d]))
                    for d in self.dir_names
                ),
            )
            for b in range(self.n)
        }
        return ClusterSeen(self.n, self.dir_names, brokers)

    def serialized(self) -> contextlib.AbstractAsyncContextManager[object]:
        return contextlib.nullcontext()

    async def liveness(self) -> tuple[frozenset[int], bool]:
        return frozenset(self.live), True

    async def partitions(self, pr: PartitionReassignment) -> PartitionsSeen:
        self.calls.append("partitions")
        topics = {t.topic for t in pr.spec.partitions}
        return PartitionsSeen({n: tv for n, tv in self.topics.items() if n in topics})

    async def write_partitions(self, writes: Sequence[WritePartition]) -> None:
        self.calls.append("write_partitions")
        for w in writes:
            assert self.topics[w.view.topic].resource == w.topic_resource
            self.set_part(w.view)
        in_step = sum(pv.in_step for tv in self.topics.values() for pv in tv.partitions.values())
        self.most_in_step = max(self.most_in_step, in_step)

    async def throttles(self, brokers: Sequence[int]) -> Mapping[int, ThrottleSeen]:
        return {
            b: ThrottleSeen(t.rate, t.leader_replicas | t.follower_replicas)
            for b, t in self.throttled.items()
            if b in brokers
        }

    async def record_dirs(self, records: Sequence[RecordDirs]) -> None:
        self.calls.append("record_dirs")
        for r in records:
            pv = self.topics[r.topic].partitions[r.partition]
            fixed = dict(r.dirs)
            dirs = tuple(fixed.get(b, d) for b, d in zip(pv.replicas, pv.dirs, strict=True))
            self.set_part(replace(pv, dirs=dirs))

    async def prefer_dirs(self, prefer: Sequence[PreferDir]) -> None:
        self.calls.append("prefer_dirs")
        for a in prefer:
            key, name = (a.topic, a.partition), a.log_dir.rsplit("data-", 1)[1]
            self.preferred[(a.broker, key)] = name
            here = self.where(a.broker, key)
            if here is not None and here != name:
                self.held[a.broker][name][key] = self.held[a.broker][here].pop(key)

    async def tell(self, tells: Sequence[Tell]) -> None:
        self.calls.append("tell")
        for a in tells:
            key = (a.topic, a.partition)
            for b in a.new:
                if self.where(b, key) is None:
                    self.held[b][self.preferred.get((b, key), "a")][key] = 0

    async def delete(self, deletes: Sequence[Delete]) -> None:
        self.calls.append("delete")
        for a in deletes:
            for held in self.held[a.broker].values():
                held.pop((a.topic, a.partition), None)

    async def throttle(self, actions: Sequence[Throttle]) -> None:
        self.calls.append("throttle")
        for action in actions:
            self.throttled[action.broker] = action
            self.rates_set.add(action.rate)

    async def announce(self) -> None:
        self.calls.append("announce")


class OnlyOwnResources:
    """The API server as far as the handler may use it: PartitionReassignments and
    LogDirMoves (whose claims every adapter shares), nothing else."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.status_writes = 0

    def _mine(self, res: Any) -> None:
        assert res.plural in ("partitionreassignments", "logdirmoves"), (
            f"the handler read {res.plural} itself"
        )

    async def get(self, res: Any, ns: str | None, name: str) -> dict[str, Any] | None:
        self._mine(res)
        return copy.deepcopy(self.body) if res.plural == "partitionreassignments" else None

    async def list(self, res: Any, ns: str | None = None, **_: Any) -> list[dict[str, Any]]:
        self._mine(res)
        return [copy.deepcopy(self.body)] if res.plural == "partitionreassignments" else []

    async def write_status(
        self, res: Any, ns: str, name: str, before: dict[str, Any], after: dict[str, Any]
    ) -> None:
        assert res.plural == "partitionreassignments"
        if after != before:
            self.status_writes += 1
            self.body["status"] = copy.deepcopy(after)


def reassignment() -> dict[str, Any]:
    return {
        "metadata": {"name": NAME, "namespace": NS, "generation": 1, "uid": "u1"},
        "spec": {
            "clusterName": CLUSTER,
            "partitions": [
                {"topic": "t", "partition": p, "replicas": [2, 3], "logDirs": ["b", "b"]}
                for p in (0, 1)
            ],
            "maxConcurrentPartitionMovements": 1,
            "throttleBytesPerSecond": 1_000_000,
        },
    }


def one_pass(kube: OnlyOwnResources, ex: ReassignmentExecutor) -> Outcome:
    return asyncio.run(reconcile_reassignment(kube, ex, copy.deepcopy(kube.body)))  # type: ignore[arg-type]


ORDER = ["throttle", "write_partitions", "prefer_dirs", "tell", "delete", "announce"]
"""The act-side methods in the order the handler calls them (``plan.reassignment``); in a
pass that starts no step the throttles come right after the writes (:data:`ORDER_NO_START`)."""
ORDER_NO_START = ["write_partitions", "throttle", "prefer_dirs", "tell", "delete", "announce"]


def test_a_reassignment_runs_to_its_end_through_the_interface_alone() -> None:
    cluster = StepsInMemory()
    cluster.add_topic("t", {0: (0, 1), 1: (0, 1)})
    kube = OnlyOwnResources(reassignment())

    phases = []
    for _ in range(40):
        cluster.calls.clear()
        out = one_pass(kube, cluster)
        phases.append(out.status["phase"])
        acts = [c for c in cluster.calls if c in ORDER]
        order = ORDER if "throttle" not in acts or acts[0] == "throttle" else ORDER_NO_START
        assert acts == sorted(acts, key=order.index), acts
        if out.status["phase"] == "Succeeded":
            break
        cluster.catch_up()

    assert phases[0] == "Running" and phases[-1] == "Succeeded", phases
    assert cluster.most_in_step == 1  # maxConcurrentPartitionMovements
    for p in (0, 1):
        pv = cluster.topics["t"].partitions[p]
        assert (pv.replicas, pv.leader, pv.adding, pv.removing) == ((2, 3), 2, (), ())
        assert pv.dirs == (path(2, "b"), path(3, "b"))
        assert pv.reassigned_by is None
    for b in (0, 1):
        assert cluster.where(b, ("t", 0)) is None and cluster.where(b, ("t", 1)) is None
    for b in (2, 3):
        assert cluster.where(b, ("t", 0)) == "b" and cluster.where(b, ("t", 1)) == "b"
    # The throttle was set while moving (on the leader and the new replicas' brokers) and
    # every one is lifted at the end.
    assert cluster.rates_set == {1_000_000, 0} and {2, 3} <= set(cluster.throttled)
    assert all(
        (t.rate, t.leader_replicas, t.follower_replicas) == (0, frozenset(), frozenset())
        for t in cluster.throttled.values()
    )


class LiftFailsOnce(StepsInMemory):
    """The first lift of a throttle (rate 0, nothing listed) fails, as a Kafka adapter's
    IncrementalAlterConfigs that timed out does."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def throttle(self, actions: Sequence[Throttle]) -> None:
        for action in actions:
            if action.rate == 0 and not action.leader_replicas and not self.failed:
                self.failed = True
                raise execution.ActionFailed(f"throttle not set: broker {action.broker}")
        await super().throttle(actions)


def test_a_throttle_lift_that_failed_at_the_end_is_tried_again_before_the_end_is_recorded() -> None:
    """The end's lift failed: the pass stops without writing its status (the resource stays
    active, not Succeeded with a throttle left), and the next pass lifts it and ends."""
    cluster = LiftFailsOnce()
    cluster.add_topic("t", {0: (0, 1), 1: (0, 1)})
    kube = OnlyOwnResources(reassignment())
    outs = []
    for _ in range(40):
        outs.append(one_pass(kube, cluster))
        if outs[-1].status.get("phase") == "Succeeded":
            break
        cluster.catch_up()
    assert cluster.failed
    stopped = [i for i, o in enumerate(outs) if o.active and not o.events and i > 0]
    assert stopped, "no pass stopped on the failed lift"
    assert outs[-1].status["phase"] == "Succeeded"
    assert all(
        (t.rate, t.leader_replicas, t.follower_replicas) == (0, frozenset(), frozenset())
        for t in cluster.throttled.values()
    )
    assert outs[-1].status.get("throttledBrokers", []) == []


class Killed(BaseException):
    """The operator's SIGKILL, as far as one pass can see it: nothing after it runs."""


class KilledAfterSubmitting(StepsInMemory):
    """The first steps submitted (on Kafka, their targets sent), then the process gone."""

    async def write_partitions(self, writes: Sequence[WritePartition]) -> None:
        await super().write_partitions(writes)
        if any(w.view.adding for w in writes):
            raise Killed


def test_the_acceptance_is_recorded_before_the_first_steps_are_submitted() -> None:
    """Killed right after submitting the first batch, the pass that accepted the resource has
    already written the originals: on Kafka the status is what tells the next operator's
    pass that the steps in flight are this resource's (and the originals cannot be read
    back mid-step)."""
    cluster = KilledAfterSubmitting()
    cluster.add_topic("t", {0: (0, 1), 1: (1, 0)})
    kube = OnlyOwnResources(reassignment())
    with pytest.raises(Killed):
        one_pass(kube, cluster)
    assert cluster.most_in_step == 1  # the step was submitted
    st = kube.body.get("status") or {}
    assert st.get("phase") == "Pending", st
    assert [(o["partition"], o["replicas"]) for o in st["original"]] == [(0, [0, 1]), (1, [1, 0])]
    assert st.get("batch", 0) == 0 and not st.get("currentBatch"), st
    # The next pass adopts the step as batch 1 and the move runs to its end.
    in_step = [p for p, pv in cluster.topics["t"].partitions.items() if pv.in_step]
    out = one_pass(kube, _resumed(cluster))
    assert out.status["phase"] == "Running" and out.status["batch"] == 1, out.status
    assert [e["partition"] for e in out.status["currentBatch"]] == in_step


def _resumed(killed: StepsInMemory) -> StepsInMemory:
    """The same cluster, reached by an operator that is not killed."""
    live = StepsInMemory()
    live.__dict__.update(killed.__dict__)
    return live


# -- the interfaces against the Admin API table ---------------------------------------------

ADMIN_API = {
    "DescribeCluster",
    "Metadata",
    "DescribeLogDirs",
    "AlterReplicaLogDirs",
    "AlterPartitionReassignments",
    "ListPartitionReassignments",
    "DescribeConfigs",
    "IncrementalAlterConfigs",
    "ElectLeaders",
}
"""The Kafka Admin API calls issue 22 lists (DescribeConfigs reads a topic's min ISR)."""


def _table(protocol: type) -> dict[str, str]:
    """The rows of the docstring table for ``protocol``: method → Kafka column."""
    doc = execution.__doc__ or ""
    section = doc.split(f"(:class:`{protocol.__name__}`):", 1)[1]
    block = section.split("\n\n", 2)[1]
    rows: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        if line.startswith("=") or not line.strip():
            continue
        names, kafka = line[:27].strip(), line[63:].strip()
        if names and names != "method":
            current = names
            rows[current] = ""
        if current:
            rows[current] += " " + kafka
    return rows


@pytest.mark.parametrize("protocol", [LogDirMoveExecutor, ReassignmentExecutor])
def test_the_admin_api_table_names_every_method_and_only_the_listed_calls(
    protocol: type,
) -> None:
    rows = _table(protocol)
    methods = {
        name
        for name, _ in inspect.getmembers(protocol, inspect.isfunction)
        if not name.startswith("_")
    }
    named = {m.strip() for row in rows for m in row.split("/")}
    assert named == methods
    for row, kafka in rows.items():
        calls = set(re.findall(r"\b(?:[A-Z][a-z]+){2,}\b|\bMetadata\b", kafka))
        assert calls <= ADMIN_API, (row, calls - ADMIN_API)
        assert calls or "none" in kafka or "no long poll" in kafka or "lock" in kafka, row


class OrderOfCalls:
    """An executor that only records which of its methods a pass called, in order (with
    ``throttle_fails``, its throttle does not take)."""

    def __init__(self, *, throttle_fails: bool = False) -> None:
        self.calls: list[str] = []
        self.throttle_fails = throttle_fails

    async def throttle(self, actions: Sequence[Throttle]) -> None:
        self.calls.append("throttle")
        if self.throttle_fails:
            raise ActionFailed("throttle not set: broker 1: timed out")

    async def write_partitions(self, writes: Sequence[Any]) -> None:
        self.calls.append("write_partitions")

    async def throttles(self, brokers: Sequence[int]) -> Mapping[int, ThrottleSeen]:
        return {}

    async def record_dirs(self, records: Sequence[Any]) -> None:
        self.calls.append("record_dirs")

    async def prefer_dirs(self, prefer: Sequence[Any]) -> None:
        self.calls.append("prefer_dirs")

    async def tell(self, tells: Sequence[Any]) -> None:
        self.calls.append("tell")

    async def delete(self, deletes: Sequence[Any]) -> None:
        self.calls.append("delete")

    async def announce(self) -> None:
        self.calls.append("announce")


AFTER_THE_WRITES = ["prefer_dirs", "tell", "delete", "announce"]


def _entry(**changes: Any) -> WritePartition:
    view = PartView("t", 0, (1, 2), ("/a", "/a"), 1, 3, (1, 2), 7)
    return WritePartition("t-res", replace(view, **changes))


STARTS = _entry(replicas=(1, 2, 3), adding=(3,), target=(3, 1), reassigned_by="r")


@pytest.mark.parametrize(
    ("write", "rate", "order"),
    [
        # A step starts under a throttle: throttled from its first byte.
        (STARTS, 1000, ["throttle", "write_partitions", *AFTER_THE_WRITES]),
        # A step starts without one: nothing to hold back, the lists follow the step.
        (STARTS, 0, ["write_partitions", "throttle", *AFTER_THE_WRITES]),
        # A cancel reverts a step: its throttle is lifted only once the revert is sent.
        (_entry(removing=(3,)), 0, ["write_partitions", "throttle", *AFTER_THE_WRITES]),
        (_entry(removing=(3,)), 1000, ["write_partitions", "throttle", *AFTER_THE_WRITES]),
    ],
)
def test_throttles_are_set_before_a_throttled_step_starts_and_lifted_after_a_cancel(
    write: WritePartition, rate: int, order: list[str]
) -> None:
    """Lifted before the null target reached Kafka, a cancelled step's new replicas fetched
    unthrottled for that moment: enough to finish a step the user had stopped."""
    ex = OrderOfCalls()
    throttles = [Throttle(1, rate, frozenset({("t", 0)}), frozenset())]
    asyncio.run(run_actions(ex, [write, *throttles]))  # type: ignore[arg-type]
    assert ex.calls == order


def test_a_throttle_that_fails_before_a_step_stops_the_pass_before_anything_is_written() -> None:
    ex = OrderOfCalls(throttle_fails=True)
    start = _entry(replicas=(1, 2, 3), adding=(3,), target=(3, 1), reassigned_by="r")
    throttle = Throttle(1, 1000, frozenset(), frozenset({("t", 0)}))
    with pytest.raises(ActionFailed):
        asyncio.run(run_actions(ex, [start, throttle]))  # type: ignore[arg-type]
    assert ex.calls == ["throttle"]


def test_a_throttle_that_fails_after_the_writes_is_raised_once_the_brokers_were_told() -> None:
    """The step that ends is already in the record: on our brokers it must still reach them
    (told, its dropped replica deleted, the metadata announced) before the pass stops
    unrecorded; stopping at the throttle left it in the record only."""
    ex = OrderOfCalls(throttle_fails=True)
    end = _entry(replicas=(1, 2), removing=(), adding=())
    actions = [
        end,
        Throttle(1, 0, frozenset(), frozenset()),
        Tell("t", 0, frozenset({1, 2}), frozenset()),
        Delete(3, "t", 0),
    ]
    with pytest.raises(ActionFailed):
        asyncio.run(run_actions(ex, actions))  # type: ignore[arg-type]
    assert ex.calls == ["write_partitions", "throttle", *AFTER_THE_WRITES]


class ConfigsClient:
    def __init__(self, broker: int, fail: bool) -> None:
        self.broker, self.fail = broker, fail
        self.sent: list[Any] = []

    async def get_configs(self) -> Any:
        if self.fail:
            raise BrokerUnavailableError(f"broker {self.broker} timed out")
        return self.sent[-1] if self.sent else wire.ThrottleConfig()

    async def set_configs(self, cfg: Any) -> Any:
        if self.fail:
            raise BrokerUnavailableError(f"broker {self.broker} timed out")
        self.sent.append(cfg)
        return cfg


class ConfigsPool:
    def __init__(self, clients: dict[int, ConfigsClient]) -> None:
        self.clients = clients

    async def client(self, ns: str, cluster: str, b: int) -> ConfigsClient:
        return self.clients[b]


def test_our_brokers_raise_a_throttle_a_live_broker_did_not_take_once_the_others_have_it() -> None:
    """A lift that failed and went unnoticed left a live broker throttled until its restart,
    under a status saying no broker was throttled."""
    pool = ConfigsPool({1: ConfigsClient(1, fail=True), 2: ConfigsClient(2, fail=False)})
    ours = OurBrokersReassignments(None, pool, None, NS, CLUSTER)  # type: ignore[arg-type]
    lifts = [Throttle(1, 0, frozenset(), frozenset()), Throttle(2, 0, frozenset(), frozenset())]
    with pytest.raises(ActionFailed, match="broker 1"):
        asyncio.run(ours.throttle(lifts))
    assert len(pool.clients[2].sent) == 1  # the other broker was lifted all the same
    pool.clients[1].fail = False
    asyncio.run(ours.throttle(lifts))  # the next pass lifts it
    assert pool.clients[1].sent[0].leader_replication_throttled_rate == 0


def test_a_throttle_replaces_only_its_own_resource_s_replicas_on_our_brokers() -> None:
    """Our brokers keep one throttle config each: a pass of one reassignment sets and lifts
    the replicas of its own partitions (its scope) and keeps another's, with their rate."""
    mine, other = ("t", 0), ("u", 0)
    was = wire.ThrottleConfig(
        leader_replication_throttled_rate=500,
        follower_replication_throttled_rate=500,
        leader_replication_throttled_replicas=[wire.ReplicaRef(topic="u", partition=0)],
        follower_replication_throttled_replicas=[],
    )
    scope = frozenset({mine})
    on = merged_throttle(was, Throttle(1, 1000, frozenset({mine}), frozenset(), scope))
    assert on.leader_replication_throttled_rate == 1000
    assert [(r.topic, r.partition) for r in on.leader_replication_throttled_replicas or []] == [
        mine,
        other,
    ]
    off = merged_throttle(on, Throttle(1, 0, frozenset(), frozenset(), scope))
    assert [(r.topic, r.partition) for r in off.leader_replication_throttled_replicas or []] == [
        other
    ]
    assert off.leader_replication_throttled_rate == 1000  # the other's throttle stays on
    last = merged_throttle(was, Throttle(1, 0, frozenset(), frozenset(), frozenset({other})))
    assert last.leader_replication_throttled_replicas == []
    assert (last.leader_replication_throttled_rate, last.follower_replication_throttled_rate) == (
        0,
        0,
    )
