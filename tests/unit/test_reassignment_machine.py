"""The PartitionReassignment state machine (``jbod_operator.plan.reassignment``): the transition
tables equal to the enums' docstrings, every edge outside them refused, and every allowed edge
taken by the pure pass (``advance``) from a constructed observation, with the actions it
decides in the order the handler carries them out.

Each scenario test records the edges the pass takes (``transition`` wrapped), so "this edge is
produced by a pass" is checked, not inferred from the resulting state. A small in-memory world
plays the handler and the brokers (Topic statuses written, replicas created where KIP-113 says,
dropped ones deleted), so multi-pass stories (a whole reassignment, a rollback) run through
the same ``advance`` the operator calls.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from jbod_operator.models.reassignment import (
    MAX_DETAIL,
    PartitionReassignment,
    PartitionStatus,
)
from jbod_operator.models.reassignment import PartitionPhase as S
from jbod_operator.models.reassignment import ReassignmentPhase as P
from jbod_operator.plan import kafka_reassignment as kr
from jbod_operator.plan import reassignment as plan
from jbod_operator.plan.conditions import iso
from jbod_operator.plan.machine import IllegalTransitionError, transition
from jbod_operator.plan.port_types import (
    TP,
    BrokerDirs,
    Delete,
    Dir,
    PartView,
    PreferDir,
    RecordDirs,
    Tell,
    Throttle,
    ThrottleSeen,
    TopicView,
    WritePartition,
)
from jbod_operator.plan.reassignment import (
    PARTITION_TRANSITIONS,
    PHASE_TRANSITIONS,
    Action,
    Decision,
    Observed,
    advance,
)
from tests.machine_edges import edges_taken_by, recorder

NOW = 1_700_000_000.0
SIZE = 1000
"""Bytes of every partition (what its leader holds)."""

Edge = tuple[Any, Any]


def path(broker: int, name: str) -> str:
    return f"/data/{broker}/data-{name}"


# -- the tables ---------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), sorted(PARTITION_TRANSITIONS))
def test_each_allowed_partition_transition(a: S, b: S) -> None:
    assert transition(PARTITION_TRANSITIONS, a, b) is b


REFUSED_PARTITION = [
    (a, b) for a, b in itertools.permutations(S, 2) if (a, b) not in PARTITION_TRANSITIONS
]


@pytest.mark.parametrize(("a", "b"), REFUSED_PARTITION)
def test_each_refused_partition_transition(a: S, b: S) -> None:
    with pytest.raises(IllegalTransitionError, match=f"{a} -> {b}"):
        transition(PARTITION_TRANSITIONS, a, b)


@pytest.mark.parametrize(("a", "b"), sorted(PHASE_TRANSITIONS, key=str))
def test_each_allowed_phase_transition(a: P | None, b: P) -> None:
    assert transition(PHASE_TRANSITIONS, a, b) is b


REFUSED_PHASE = [
    (a, b)
    for a, b in itertools.product([None, *P], P)
    if a != b and (a, b) not in PHASE_TRANSITIONS
]


@pytest.mark.parametrize(("a", "b"), REFUSED_PHASE, ids=str)
def test_each_refused_phase_transition(a: P | None, b: P) -> None:
    with pytest.raises(IllegalTransitionError, match=f"{a} -> {b}"):
        transition(PHASE_TRANSITIONS, a, b)


def test_final_states_have_no_way_out() -> None:
    assert not [k for k in PARTITION_TRANSITIONS if k[0] == S.GONE]
    for phase in (P.FAILED, P.ROLLED_BACK):
        assert not [k for k in PHASE_TRANSITIONS if k[0] == phase]
    # Succeeded and Cancelled only to a rollback; Done only back to Pending (a rollback).
    for phase in (P.SUCCEEDED, P.CANCELLED):
        assert {b for a, b in PHASE_TRANSITIONS if a == phase} == {P.ROLLING_BACK}
    assert {b for a, b in PARTITION_TRANSITIONS if a == S.DONE} == {S.PENDING}


def _edges(doc: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s+\(?(\w+)\)?\s+->\s+(\w+)", doc, re.MULTILINE))


def test_the_enums_docstrings_draw_the_same_tables() -> None:
    partitions = {(a.value, b.value) for a, b in PARTITION_TRANSITIONS}
    assert _edges(S.__doc__ or "") == partitions
    phases = {("new" if a is None else a.value, b.value) for a, b in PHASE_TRANSITIONS}
    assert _edges(P.__doc__ or "") == phases


def test_the_docstrings_give_each_edge_the_tables_cause() -> None:
    """The cause written next to each edge is the table's, word for word (wrapped lines of the
    table joined)."""
    for enum, table in ((S, PARTITION_TRANSITIONS), (P, PHASE_TRANSITIONS)):
        drawn = {
            (a, b): cause.strip()
            for a, b, cause in re.findall(
                r"^\s+\(?(\w+)\)?\s+->\s+(\w+)\s+(.+)$", enum.__doc__ or "", re.MULTILINE
            )
        }
        for (a, b), cause in table.items():
            assert drawn[("new" if a is None else a.value, b.value)] == cause


# -- a world the passes run against -------------------------------------------------------


@pytest.fixture
def edges(monkeypatch: pytest.MonkeyPatch) -> list[Edge]:
    """Every state change the passes of one test take, in order (phase and partition edges
    alike): ``plan.reassignment`` calls ``transition`` for each."""
    taken: list[Edge] = []
    monkeypatch.setattr(plan, "transition", recorder(taken))
    return taken


def reassign(
    targets: Iterable[Sequence[Any]],
    *,
    name: str = "r",
    **spec: Any,
) -> PartitionReassignment:
    partitions = []
    for t in targets:  # (topic, partition, replicas[, logDirs])
        entry: dict[str, Any] = {"topic": t[0], "partition": t[1], "replicas": list(t[2])}
        if len(t) > 3:
            entry["logDirs"] = list(t[3])
        partitions.append(entry)
    return PartitionReassignment.model_validate(
        {
            "metadata": {"name": name, "namespace": "kafka", "generation": 1},
            "spec": {"clusterName": "kip", "partitions": partitions, **spec},
        }
    )


def with_spec(pr: PartitionReassignment, **spec: Any) -> PartitionReassignment:
    """``pr`` with spec fields changed (camelCase, as a user edits them)."""
    raw = pr.spec.dump()
    raw.update(spec)
    return pr.model_copy(update={"spec": type(pr.spec).model_validate(raw)})


@dataclass
class World:
    """The Topics' partition state of record and the brokers' disks, changed by the actions a
    decision carries as the handler and the brokers would carry them out."""

    n: int = 6
    live: set[int] = field(default_factory=set)
    topics: dict[str, TopicView] = field(default_factory=dict)
    held: dict[int, dict[str, dict[TP, int]]] = field(default_factory=dict)
    """broker -> dir name -> (topic, partition) -> bytes."""
    dir_names: tuple[str, ...] = ("a", "b")
    offline: set[tuple[int, str]] = field(default_factory=set)
    cordoned: set[tuple[int, str]] = field(default_factory=set)
    silent: set[int] = field(default_factory=set)
    """Brokers whose describe-log-dirs did not answer."""
    busy: dict[int, int] = field(default_factory=dict)
    claims: dict[TP, str] = field(default_factory=dict)
    now: float = NOW
    throttled: dict[int, ThrottleSeen] = field(default_factory=dict)
    """Each broker's replication throttle as the Throttle actions left it (a broker that
    restarts forgets it: ``del``)."""

    def __post_init__(self) -> None:
        self.live = self.live or set(range(self.n))
        for b in range(self.n):
            self.held.setdefault(b, {d: {} for d in self.dir_names})

    def add_topic(
        self,
        name: str,
        assignment: Mapping[int, Sequence[int]],
        *,
        min_isr: int = 1,
        dir_name: str = "a",
    ) -> None:
        parts = {}
        for p, reps in assignment.items():
            parts[p] = PartView(
                topic=name,
                partition=p,
                replicas=tuple(reps),
                dirs=tuple(path(b, dir_name) for b in reps),
                leader=reps[0],
                leader_epoch=3,
                isr=tuple(reps),
                partition_epoch=7,
            )
            for b in reps:
                self.held[b][dir_name][(name, p)] = SIZE
        self.topics[name] = TopicView(f"{name}-res", name, min_isr, parts)

    def part(self, key: TP) -> PartView:
        return self.topics[key[0]].partitions[key[1]]

    def set_part(self, view: PartView) -> None:
        tv = self.topics[view.topic]
        self.topics[view.topic] = replace(tv, partitions={**tv.partitions, view.partition: view})

    def drop_topic(self, name: str) -> None:
        del self.topics[name]

    def where(self, broker: int, key: TP) -> str | None:
        return next((d for d, held in self.held[broker].items() if key in held), None)

    def describe(self) -> dict[int, BrokerDirs | None]:
        out: dict[int, BrokerDirs | None] = {}
        for b in range(self.n):
            if b in self.silent:
                out[b] = None
                continue
            out[b] = BrokerDirs(
                b,
                tuple(
                    Dir(
                        d,
                        path(b, d),
                        (b, d) not in self.offline,
                        (b, d) in self.cordoned,
                        10**9,
                        dict(self.held[b][d]),
                    )
                    for d in self.dir_names
                ),
            )
        return out

    def observe(self, pr: PartitionReassignment) -> Observed:
        return Observed(
            pr,
            self.now,
            cluster_size=self.n,
            live=frozenset(self.live),
            topics=dict(self.topics),
            brokers=self.describe(),
            busy=dict(self.busy),
            claims=dict(self.claims),
            cluster_dirs=self.dir_names,
            throttles={b: t for b, t in self.throttled.items() if b in self.live},
        )

    def apply(self, d: Decision) -> None:
        """The actions, as the handler and the brokers carry them out: Topic statuses
        written; a new replica created in the dir KIP-113 named (else the first); a replica
        named another dir moved there; a dropped one deleted. Throttles change no state."""
        preferred: dict[tuple[int, TP], str] = {}
        for a in d.actions:
            if isinstance(a, WritePartition):
                assert self.topics[a.view.topic].resource == a.topic_resource
                self.set_part(a.view)
            elif isinstance(a, PreferDir):
                key = (a.topic, a.partition)
                name = a.log_dir.rsplit("data-", 1)[1]
                preferred[(a.broker, key)] = name
                here = self.where(a.broker, key)
                if here is not None and here != name and a.broker in self.live:
                    self.held[a.broker][name][key] = self.held[a.broker][here].pop(key)
            elif isinstance(a, Tell):
                key = (a.topic, a.partition)
                for b in a.new:
                    assert b in a.brokers
                    if self.where(b, key) is None:
                        self.held[b][preferred.get((b, key), "a")][key] = 0
            elif isinstance(a, Delete):
                key = (a.topic, a.partition)
                assert a.broker in self.live
                for held in self.held[a.broker].values():
                    held.pop(key, None)
            elif isinstance(a, Throttle):
                # As our brokers' adapter merges it: this resource's replicas replaced.
                was = self.throttled.get(a.broker, ThrottleSeen(0, frozenset()))
                kept = (was.replicas - a.scope) | a.leader_replicas | a.follower_replicas
                mine = a.leader_replicas | a.follower_replicas
                rate = a.rate if mine else (was.rate if kept else 0)
                self.throttled[a.broker] = ThrottleSeen(rate, kept)
            elif isinstance(a, RecordDirs):
                assert self.topics[a.topic].resource == a.topic_resource
                pv = self.part((a.topic, a.partition))
                fixed = dict(a.dirs)
                dirs = tuple(fixed.get(b, d) for b, d in zip(pv.replicas, pv.dirs, strict=True))
                self.set_part(replace(pv, dirs=dirs))

    def catch_up(self, *keys: TP) -> None:
        """The new replicas of the steps in flight copied everything and joined the ISR (the
        leader's AlterPartition through the cluster controller)."""
        for tv in list(self.topics.values()):
            for pv in tv.partitions.values():
                if (keys and pv.key not in keys) or not pv.adding:
                    continue
                for b in pv.adding:
                    d = self.where(b, pv.key)
                    if d is not None:
                        self.held[b][d][pv.key] = SIZE
                isr = pv.isr + tuple(b for b in pv.adding if b not in pv.isr and b in self.live)
                self.set_part(replace(pv, isr=isr, partition_epoch=pv.partition_epoch + 1))

    def step(self, pr: PartitionReassignment) -> tuple[PartitionReassignment, Decision]:
        """One pass: observe, decide, act; the resource with the status the pass wrote."""
        d = advance(self.observe(pr))
        self.apply(d)
        return pr.model_copy(update={"status": d.status}), d

    def run(
        self, pr: PartitionReassignment, *, until: Iterable[P], passes: int = 60
    ) -> tuple[PartitionReassignment, list[Decision]]:
        """Passes until the phase is one of ``until``, every new replica catching up between
        two passes; the decisions taken."""
        stop = set(until)
        out = []
        for _ in range(passes):
            pr, d = self.step(pr)
            out.append(d)
            if d.status.phase in stop:
                return pr, out
            self.catch_up()
            self.now += 1
        raise AssertionError(f"still {pr.status.phase if pr.status else None}")


def state_of(d: Decision, key: TP) -> S | None:
    return next((e.state for e in d.status.partitions if (e.topic, e.partition) == key), None)


def detail(d: Decision, key: TP) -> PartitionStatus:
    return next(e for e in d.status.partitions if (e.topic, e.partition) == key)


def condition(d: Decision, type_: str) -> tuple[str, str, str]:
    c = next(c for c in d.status.conditions if c.type == type_)
    return c.status, c.reason, c.message


def writes(d: Decision) -> list[PartView]:
    return [a.view for a in d.actions if isinstance(a, WritePartition)]


def kinds(d: Decision) -> list[str]:
    return [type(a).__name__ for a in d.actions if not isinstance(a, Throttle)]


def changes(d: Decision) -> tuple[Action, ...]:
    """The actions that change state: Throttles only (re)state the throttled replicas."""
    return tuple(a for a in d.actions if not isinstance(a, Throttle))


T0: TP = ("t", 0)
T1: TP = ("t", 1)
SCOPE_T0 = frozenset({T0})
"""A throttle's scope when the reassignment names t-0 alone."""


def world(**kw: Any) -> World:
    """Six brokers, topic ``t`` of two partitions on brokers 0-2 (min ISR 2), dirs a and b."""
    w = World(**kw)
    w.add_topic("t", {0: (0, 1, 2), 1: (1, 2, 0)}, min_isr=2)
    return w


def started(w: World, pr: PartitionReassignment) -> PartitionReassignment:
    """``pr`` after its first pass (accepted, first batch written)."""
    pr, _ = w.step(pr)
    return pr


# -- phase: the first pass ----------------------------------------------------------------


def test_new_to_pending_to_running_when_the_first_batch_starts(edges: list[Edge]) -> None:
    w = world()
    pr = reassign([("t", 0, [3, 1, 2], ["b", "a", "a"])])
    d = advance(w.observe(pr))
    assert edges == [(None, P.PENDING), (S.PENDING, S.ADDING), (P.PENDING, P.RUNNING)]
    assert d.status.phase == P.RUNNING and d.active
    assert d.status.start_time == iso(NOW) and d.status.batch == 1
    # Only the partitions named are recorded, with their dirs by name.
    assert [o.model_dump() for o in d.status.original or []] == [
        {"topic": "t", "partition": 0, "replicas": [0, 1, 2], "log_dirs": ["a", "a", "a"]}
    ]
    # The state of record first, then the new replica's dir, then LeaderAndIsr to every
    # replica with the new one as a new replica.
    step = w.part(T0)  # not applied yet: the view as read
    assert d.actions[:3] == (
        WritePartition(
            "t-res",
            replace(
                step,
                replicas=(0, 1, 2, 3),
                dirs=(*step.dirs, path(3, "b")),
                adding=(3,),
                removing=(),
                target=(3, 1, 2, 0),
                reassigned_by="r",
                partition_epoch=step.partition_epoch + 1,
            ),
        ),
        PreferDir(3, "t", 0, path(3, "b")),
        Tell("t", 0, frozenset({0, 1, 2, 3}), frozenset({3})),
    )
    # No throttle asked for: the lists are set at rate 0 (no limit), so the leader and the
    # new follower count the move's bytes as reassignment traffic.
    assert d.actions[3:] == (
        Throttle(0, 0, frozenset({T0}), frozenset(), SCOPE_T0),
        Throttle(3, 0, frozenset(), frozenset({T0}), SCOPE_T0),
    )
    (entry,) = d.status.current_batch
    assert (entry.current_brokers, entry.target_brokers) == ([0, 1, 2], [3, 1, 2, 0])
    assert [e[1] for e in d.events] == ["Accepted", "BatchStarted"]
    assert d.events[1][2] == "batch 1: t-0 [0, 1, 2]->[3, 1, 2, 0]"
    e = detail(d, T0)
    assert (e.state, e.adding_replicas, e.target_replicas) == (S.ADDING, [3], [3, 1, 2])
    assert d.status.counts == {"Adding": 1}
    assert condition(d, "Progressing")[:2] == ("True", "Running")


def test_pending_to_succeeded_when_every_partition_is_already_at_its_target(
    edges: list[Edge],
) -> None:
    w = world()
    d = advance(w.observe(reassign([("t", 0, [0, 1, 2]), ("t", 1, [1, 2, 0])])))
    assert edges == [
        (None, P.PENDING),
        (S.PENDING, S.DONE),
        (S.PENDING, S.DONE),
        (P.PENDING, P.SUCCEEDED),
    ]
    assert d.actions == () and not d.active and d.status.batch == 0
    assert d.status.completion_time == iso(NOW) and d.status.progress_percent == 100
    assert condition(d, "Succeeded")[:2] == ("True", "Succeeded")
    assert condition(d, "Progressing")[0] == "False"


def test_pending_to_paused_when_created_paused(edges: list[Edge]) -> None:
    w = world()
    d = advance(w.observe(reassign([("t", 0, [3, 1, 2])], pause=True)))
    assert edges == [(None, P.PENDING), (P.PENDING, P.PAUSED)]
    assert d.actions == () and d.active and d.status.batch == 0
    assert condition(d, "Paused")[0] == "True" and condition(d, "Progressing")[0] == "True"


def test_pending_to_cancelled_when_cancelled_before_anything_moved(edges: list[Edge]) -> None:
    w = world()
    w.live.discard(3)
    pr, d = w.step(reassign([("t", 0, [3, 4, 5])]))  # waits for broker 3
    assert d.status.phase == P.PENDING
    edges.clear()
    _, d = w.step(with_spec(pr, cancel=True))
    # The waiting partition is where a cancel leads it (its original replicas): done.
    assert edges == [(S.WAITING, S.PENDING), (S.PENDING, S.DONE), (P.PENDING, P.CANCELLED)]
    assert d.actions == () and not d.active
    assert condition(d, "Cancelled")[:2] == ("True", "Cancelled")
    assert ("Normal", "Cancelled") in [e[:2] for e in d.events]


# -- a step: Adding, the shrink, the deletion ----------------------------------------------


def test_adding_stays_adding_while_a_new_replica_catches_up(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    edges.clear()
    pr, d = w.step(pr)
    assert edges == [] and d.status.phase == P.RUNNING
    # The replica exists: nothing written, no dir preferred; the broker is told again (a
    # restarted broker lost its LeaderAndIsr, and the controller's probe skips adding replicas).
    assert writes(d) == [] and kinds(d) == ["Tell"]
    assert detail(d, T0).message == "new replicas on brokers [3] catching up"


def test_adding_to_removing_when_every_new_replica_is_in_the_isr(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    during = w.part(T0)
    assert (during.replicas, during.adding, during.removing) == ((0, 1, 2, 3), (3,), (0,))
    w.catch_up()
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(S.ADDING, S.REMOVING)]
    [out] = writes(d)
    assert out.replicas == (1, 2, 3)  # the step's target, in order
    assert out.leader == 1  # the target's first replica, in sync: elected now
    assert out.leader_epoch == during.leader_epoch + 1  # fences the dropped replica
    assert out.isr == (1, 2, 3)  # without the dropped one
    assert (out.adding, out.removing, out.target) == ((), (0,), ())
    # The new replica, named no dir ("any"), is recorded in the dir its broker shows it in.
    assert out.dirs == (path(1, "a"), path(2, "a"), path(3, "a"))
    assert out.reassigned_by == "r"
    assert changes(d)[1:] == (Tell("t", 0, frozenset({1, 2, 3})), Delete(0, "t", 0))
    assert detail(d, T0).message == "deleting the replicas on brokers [0]"


def test_pending_to_removing_a_step_that_only_drops_replicas_shrinks_at_once(
    edges: list[Edge],
) -> None:
    w = world()
    w.add_topic("u", {0: (0, 1, 2, 3)}, min_isr=1)
    w.set_part(replace(w.part(("u", 0)), isr=(0, 2, 3)))  # 1 lags
    pr = reassign([("u", 0, [1, 2, 0])], allowReplicationFactorChange=True)
    _, d = w.step(pr)
    assert edges == [(None, P.PENDING), (S.PENDING, S.REMOVING), (P.PENDING, P.RUNNING)]
    [out] = writes(d)  # nothing to catch up: the shrink is the step's first write
    assert (out.replicas, out.removing, out.adding, out.reassigned_by) == (
        (1, 2, 0),
        (3,),
        (),
        "r",
    )
    # The target's first replica lags: the leader stays (never elect outside the ISR).
    assert (out.leader, out.isr) == (0, (0, 2))
    assert d.actions[1:] == (Tell("u", 0, frozenset({0, 1, 2})), Delete(3, "u", 0))
    assert d.status.current_batch[0].target_brokers == [1, 2, 0]


def test_no_delete_is_sent_to_a_dropped_replica_on_a_dead_broker(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    w.catch_up()
    w.live.discard(0)
    pr, d = w.step(pr)
    assert [a for a in d.actions if isinstance(a, Delete)] == []
    # The next pass moves on: the copy stays on the dead broker's disk (an Event says so).
    edges.clear()
    _, d = w.step(pr)
    assert ("Warning", "ReplicaLeftOnDeadBroker") in [e[:2] for e in d.events]
    assert edges == [(S.REMOVING, S.DONE)]
    assert writes(d)[0].removing == ()
    # ... and in the status, until the cluster controller deletes it (``plan.strays``).
    left = [(s.broker_id, s.topic, s.partition, s.since) for s in d.status.stray_replicas]
    assert left == [(0, "t", 0, iso(w.now))]


def test_removing_stays_removing_until_the_describes_show_the_dropped_replica_gone(
    edges: list[Edge],
) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    w.catch_up()
    pr, _ = w.step(pr)
    w.held[0]["a"][T0] = SIZE  # the delete was lost: the broker still holds it
    edges.clear()
    pr, d = w.step(pr)
    assert edges == [] and writes(d) == [] and kinds(d) == ["Delete"]
    w.silent.add(0)  # no answer: not known to be gone
    pr, d = w.step(pr)
    assert edges == [] and writes(d) == [] and kinds(d) == ["Delete"]


def test_removing_to_done_once_the_describes_show_the_dropped_replicas_gone(
    edges: list[Edge],
) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    w.catch_up()
    pr, _ = w.step(pr)
    assert w.where(0, T0) is None
    edges.clear()
    pr, d = w.step(pr)
    assert edges == [(S.REMOVING, S.DONE)]
    [out] = writes(d)  # the claim released with the last write
    assert (out.removing, out.reassigned_by) == ((), None)
    assert d.status.phase == P.RUNNING  # something was written: one more pass to settle
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(P.RUNNING, P.SUCCEEDED)] and not d.active
    assert [e[1] for e in d.events] == ["BatchFinished", "Succeeded"]
    assert d.status.current_batch == [] and d.status.completion_time == iso(w.now)


def test_removing_to_pending_when_more_steps_are_to_go(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 3, 4])]))  # R=1: two steps
    w.catch_up()
    pr, _ = w.step(pr)
    edges.clear()
    pr, d = w.step(pr)
    assert edges == [(S.REMOVING, S.PENDING)]
    [out] = writes(d)
    assert (out.replicas, out.removing, out.reassigned_by) == ((0, 3, 2), (), "r")
    edges.clear()
    _, d = w.step(pr)  # the next batch: the second step
    assert edges == [(S.PENDING, S.ADDING)] and d.status.batch == 2
    assert [e[1] for e in d.events] == ["BatchFinished", "BatchStarted"]


def test_removing_to_placing_then_done_when_a_kept_replica_is_named_a_new_dir(
    edges: list[Edge],
) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3], ["b", "a", "b"])]))
    assert w.where(3, T0) == "b"  # created in its named dir
    w.catch_up()
    pr, _ = w.step(pr)
    edges.clear()
    pr, d = w.step(pr)
    assert edges == [(S.REMOVING, S.PLACING)]
    assert PreferDir(0, "t", 0, path(0, "b")) in d.actions  # KIP-113 on broker 0
    assert detail(d, T0).message == "moving to the named dirs on brokers [0]"
    assert w.where(0, T0) == "b"
    edges.clear()
    pr, d = w.step(pr)
    # Placed: the record is told where broker 0 now holds it; the next pass confirms it.
    assert edges == [(S.PLACING, S.DONE)]
    assert RecordDirs("t-res", "t", 0, ((0, path(0, "b")),)) in d.actions
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(P.RUNNING, P.SUCCEEDED)] and changes(d) == ()


def test_pending_to_placing_when_only_the_dir_changes(edges: list[Edge]) -> None:
    w = world()
    w.held[0]["b"][T0] = w.held[0]["a"].pop(T0)
    pr = reassign([("t", 0, [0, 1, 2], ["a", "b", "a"])])
    pr, d = w.step(pr)
    assert edges == [(None, P.PENDING), (S.PENDING, S.PLACING)]
    assert d.actions == (
        PreferDir(0, "t", 0, path(0, "a")),
        PreferDir(1, "t", 0, path(1, "b")),
        # The record said dir a for broker 0's replica, which its broker holds in b.
        RecordDirs("t-res", "t", 0, ((0, path(0, "b")),)),
    )
    assert d.status.phase == P.PENDING and d.active
    edges.clear()
    pr, d = w.step(pr)
    assert edges == [(S.PLACING, S.DONE)]
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(S.PENDING, S.DONE), (P.PENDING, P.SUCCEEDED)]


def test_a_dir_record_the_api_server_refused_holds_the_end_until_the_record_is_right() -> None:
    """The torture e2e's finding: a dir record refused on a conflict (someone wrote the
    Topic meanwhile) is retried, and the reassignment does not end on a pass that still
    corrects its record, so Succeeded never comes with the record naming the wrong dir."""
    w = world()
    pr = reassign([("t", 0, [0, 1, 3], ["b", "a", "a"])])
    refused = 0
    for _ in range(20):
        d = advance(w.observe(pr))
        records = [a for a in d.actions if isinstance(a, RecordDirs)]
        if records and refused < 2:
            refused += 1  # the API server answered 409: nothing recorded
            d = replace(d, actions=tuple(a for a in d.actions if a not in records))
        w.apply(d)
        pr = pr.model_copy(update={"status": d.status})
        assert d.status.phase != P.SUCCEEDED or w.part(T0).dirs[0] == path(0, "b"), d.status
        if d.status.phase == P.SUCCEEDED:
            break
        w.catch_up()
    assert refused == 2 and d.status.phase == P.SUCCEEDED
    assert w.part(T0).dirs == (path(0, "b"), path(1, "a"), path(3, "a"))


def test_a_replica_whose_broker_does_not_answer_is_not_counted_as_placed() -> None:
    """Issue 37 item 2: the new replica on broker 3 was created in dir a (its move to the
    named dir b never reached it) and broker 3 went down as the step ended. The partition
    stays Placing, saying whom it waits for, instead of Succeeded with a replica outside its
    named dir; once broker 3 answers it gets the move, and is Done when it shows it done."""
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3], ["a", "a", "b"])]))
    w.held[3]["a"][T0] = w.held[3]["b"].pop(T0)  # the dir named never reached broker 3
    w.catch_up()
    w.live.discard(3)
    w.silent.add(3)
    for _ in range(4):
        pr, d = w.step(pr)
    assert d.status.phase == P.RUNNING and state_of(d, T0) == S.PLACING
    assert detail(d, T0).message == "brokers [3] did not answer describe-log-dirs"
    w.live.add(3)
    w.silent.discard(3)
    pr, d = w.step(pr)
    assert PreferDir(3, "t", 0, path(3, "b")) in d.actions and w.where(3, T0) == "b"
    pr, d = w.step(pr)  # placed; the record told where broker 3 holds it
    _, d = w.step(pr)
    assert d.status.phase == P.SUCCEEDED


def test_the_state_of_record_follows_every_replica_s_dir() -> None:
    """Issue 37 item 6: a replica moved in place to its named dir, and one created with
    "any", are recorded in the dirs their brokers show them in, not left at the old dir or
    none."""
    w = world()
    pr = reassign([("t", 0, [0, 1, 3], ["b", "a", "any"])])
    w.run(pr, until=[P.SUCCEEDED])
    assert [w.where(b, T0) for b in (0, 1, 3)] == ["b", "a", "a"]
    assert w.part(T0).dirs == (path(0, "b"), path(1, "a"), path(3, "a"))


def test_a_rollback_puts_replicas_back_in_the_dirs_they_were_in() -> None:
    """Issue 37 item 5: the record said dir a for broker 0's replica, which broker 0 held in
    b (moved in place before, the record never told). The originals are taken from what the
    brokers hold, so the rollback re-creates it in b, where it was, not in a."""
    w = world()
    w.held[0]["b"][T0] = w.held[0]["a"].pop(T0)
    pr, _ = w.run(reassign([("t", 0, [3, 1, 2])]), until=[P.SUCCEEDED])
    assert pr.status is not None and pr.status.original is not None
    assert pr.status.original[0].log_dirs == ["b", "a", "a"]
    assert w.where(0, T0) is None
    w.run(with_spec(pr, rollback=True), until=[P.ROLLED_BACK])
    assert w.part(T0).replicas == (0, 1, 2)
    assert [w.where(b, T0) for b in (0, 1, 2)] == ["b", "a", "a"]
    assert w.part(T0).dirs == (path(0, "b"), path(1, "a"), path(2, "a"))


def test_placing_waits_for_a_future_copy_to_finish() -> None:
    w = world()
    pr, _ = w.step(reassign([("t", 0, [0, 1, 2], ["b", "a", "a"])]))
    w.held[0]["a"][T0] = SIZE
    w.held[0]["b"].pop(T0)
    desc = w.describe()
    b0 = desc[0]
    assert b0 is not None
    # broker 0 copies into b: the current replica is in a, a future one in b.
    moving = BrokerDirs(0, (b0.dirs[0], replace(b0.dirs[1], futures=frozenset({T0}))))
    obs = replace(w.observe(pr), brokers={**desc, 0: moving})
    d = advance(obs)
    assert state_of(d, T0) == S.PLACING and d.actions == ()  # asked already, not again


# -- pause, limits, waiting ----------------------------------------------------------------


def test_running_to_paused_steps_in_flight_finish_and_no_new_batch_starts(
    edges: list[Edge],
) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 3, 4]), ("t", 1, [1, 3, 4])]))
    assert writes(advance(w.observe(pr))) == []
    pr = with_spec(pr, pause=True)
    w.catch_up()
    edges.clear()
    pr, d = w.step(pr)  # the shrinks of the steps in flight are written
    assert edges == [(S.ADDING, S.REMOVING), (S.ADDING, S.REMOVING), (P.RUNNING, P.PAUSED)]
    assert condition(d, "Paused")[0] == "True"
    for _ in range(3):
        pr, d = w.step(pr)
    assert d.status.phase == P.PAUSED and d.status.batch == 1 and d.active
    assert d.status.counts == {"Pending": 2} and writes(d) == []
    assert d.status.current_batch == []  # the batch ended while paused
    edges.clear()
    _, d = w.step(with_spec(pr, pause=False))
    assert edges == [(S.PENDING, S.ADDING), (S.PENDING, S.ADDING), (P.PAUSED, P.RUNNING)]
    assert d.status.batch == 2


def test_a_limit_changed_between_batches_applies_from_the_next_one(edges: list[Edge]) -> None:
    w = world()
    w.add_topic("u", {p: (0, 1, 2) for p in range(4)}, min_isr=1)
    targets = [("u", p, [0, 1, 3]) for p in range(4)]
    pr = started(w, reassign(targets, maxConcurrentPartitionMovements=1))
    assert pr.status is not None
    assert [(e.topic, e.partition) for e in pr.status.current_batch] == [("u", 0)]
    pr = with_spec(pr, maxConcurrentPartitionMovements=3, maxConcurrentReplicaMovements=2)
    d = advance(w.observe(pr))
    assert writes(d) == []  # the step in flight is left alone
    w.catch_up()
    pr, _ = w.step(pr)
    pr, _ = w.step(pr)
    pr, d = w.step(pr)
    assert [(e.topic, e.partition) for e in d.status.current_batch] == [
        ("u", 1),
        ("u", 2),
        ("u", 3),
    ]
    assert d.status.batch == 2


def test_the_per_broker_budget_counts_other_resources_moves() -> None:
    w = world()
    w.busy = {3: 5}  # broker 3 at Cruise Control's default budget for someone else
    d = advance(w.observe(reassign([("t", 0, [0, 1, 3]), ("t", 1, [1, 2, 4])])))
    assert [(e.topic, e.partition) for e in d.status.current_batch] == [("t", 1)]
    assert d.status.counts == {"Adding": 1, "Pending": 1}


def test_pending_to_waiting_when_a_target_broker_is_down_then_back(edges: list[Edge]) -> None:
    w = world()
    w.live.discard(3)
    pr, d = w.step(reassign([("t", 0, [3, 1, 2])]))
    assert edges == [(None, P.PENDING), (S.PENDING, S.WAITING)]
    assert d.status.phase == P.PENDING and writes(d) == [] and d.active
    e = detail(d, T0)
    assert (e.state, e.message) == (S.WAITING, "waiting for target broker(s) 3 to be live")
    pr, d = w.step(pr)  # still down: still waiting, the reason kept
    assert detail(d, T0).message == "waiting for target broker(s) 3 to be live"
    w.live.add(3)
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(S.WAITING, S.PENDING), (S.PENDING, S.ADDING), (P.PENDING, P.RUNNING)]


def test_waiting_to_pending_when_the_budget_leaves_it_out_of_the_batch(
    edges: list[Edge],
) -> None:
    w = world()
    w.live.discard(3)
    pr, _ = w.step(reassign([("t", 0, [3, 1, 2])]))
    w.live.add(3)
    w.busy = {3: 5}
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(S.WAITING, S.PENDING)]
    assert d.status.counts == {"Pending": 1} and d.status.phase == P.PENDING


def test_waiting_when_the_partition_has_no_live_in_sync_replica(edges: list[Edge]) -> None:
    w = world()
    w.set_part(replace(w.part(T0), isr=(0,), leader=0))
    w.live.discard(0)
    _, d = w.step(reassign([("t", 0, [0, 1, 3])]))
    assert (S.PENDING, S.WAITING) in edges
    assert "no live in-sync replica" in (detail(d, T0).message or "")


def test_a_new_replica_on_a_dead_broker_is_waited_for_and_says_so() -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])]))
    w.live.discard(3)
    _, d = w.step(pr)
    assert state_of(d, T0) == S.ADDING and writes(d) == []
    assert detail(d, T0).message == "waiting for brokers [3] (not live) to catch up"


def test_stalled_when_new_replicas_move_no_byte_for_stall_after_seconds() -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])], stallAfterSeconds=60))
    w.now += 30
    pr, d = w.step(pr)
    assert condition(d, "Stalled")[0] == "False"
    w.now += 31
    pr, d = w.step(pr)
    status, reason, message = condition(d, "Stalled")
    assert (status, reason) == ("True", "NoProgress")
    assert message == "t-0: no progress for 61s on brokers [3]"
    w.held[3]["a"][T0] = 10  # a byte moved: the clock starts again
    w.now += 1
    _, d = w.step(pr)
    assert condition(d, "Stalled")[0] == "False"


# -- cancel ---------------------------------------------------------------------------------


def test_running_to_cancelling_reverts_a_step_whose_new_replicas_are_not_in_sync(
    edges: list[Edge],
) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))  # during: (0, 1, 2, 3), 0 dropped
    before = w.part(T0)
    edges.clear()
    pr, d = w.step(with_spec(pr, cancel=True))
    assert edges == [(S.ADDING, S.REMOVING), (P.RUNNING, P.CANCELLING)]
    [out] = writes(d)
    assert out.replicas == (0, 1, 2)  # the order before the step
    assert out.leader == 0  # and its leader
    assert out.isr == (0, 1, 2) and out.leader_epoch == before.leader_epoch + 1
    assert (out.adding, out.removing, out.target) == ((), (3,), ())
    assert changes(d)[1:] == (Tell("t", 0, frozenset({0, 1, 2})), Delete(3, "t", 0))
    assert detail(d, T0).message == "cancelled: deleting the new replicas on brokers [3]"
    assert condition(d, "Progressing")[:2] == ("True", "Cancelling")
    edges.clear()
    pr, d = w.step(pr)  # 3 deleted: back at its original replicas, released
    assert edges == [(S.REMOVING, S.DONE)]
    assert writes(d)[0].reassigned_by is None
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(P.CANCELLING, P.CANCELLED)] and not d.active
    assert w.part(T0).replicas == (0, 1, 2) and w.part(T0).reassigned_by is None
    assert w.where(3, T0) is None
    assert condition(d, "Cancelled")[:2] == ("True", "Cancelled")


def test_cancel_keeps_a_step_whose_new_replicas_are_in_sync(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    w.catch_up()
    _, d = w.step(with_spec(pr, cancel=True))
    assert writes(d)[0].replicas == (1, 2, 3)  # finished, not undone
    assert edges[-1] == (P.RUNNING, P.CANCELLING)


def test_running_to_cancelled_with_nothing_in_flight(edges: list[Edge]) -> None:
    w = world()
    targets = [("t", 0, [0, 1, 3]), ("t", 1, [1, 2, 4])]
    pr = started(w, reassign(targets, maxConcurrentPartitionMovements=1))
    w.catch_up()
    pr, _ = w.step(pr)
    pr, _ = w.step(pr)  # t-0 done and released; t-1 never started
    assert pr.status is not None and pr.status.phase == P.RUNNING
    assert pr.status.counts == {"Done": 1, "Pending": 1}
    edges.clear()
    _, d = w.step(with_spec(pr, cancel=True))
    # t-1 never started: at its original replicas, where a cancel leads it.
    assert edges == [(S.PENDING, S.DONE), (P.RUNNING, P.CANCELLED)] and d.actions == ()
    assert w.part(T0).replicas == (0, 1, 3)  # at its target: kept


def test_a_cancel_between_two_steps_of_a_partition_walks_it_back_to_its_original_size() -> None:
    """Issue 37 item 3, no fault: ``[0, 3, 2] -> [1, 2, 0]`` adds the new preferred leader
    first (``[1, 2, 0, 3]``, four replicas) and drops 3 in a later step. Cancelled while the
    next batch runs (another partition's step), the partition between its steps is neither
    at its target nor at its original: it walks back to ``[0, 3, 2]`` instead of staying at
    RF + 1, which the next reassignment of it refused."""
    w = world()
    w.add_topic("u", {0: (0, 3, 2), 1: (0, 3, 2)}, min_isr=2)
    targets = [("u", 0, [1, 2, 0]), ("u", 1, [1, 2, 0])]
    pr = reassign(targets, maxConcurrentPartitionMovements=1)
    for _ in range(10):
        pr, _ = w.step(pr)
        if w.part(("u", 1)).adding:
            break
        w.catch_up()
    assert w.part(("u", 0)).replicas == (1, 2, 0, 3) and not w.part(("u", 0)).adding
    assert w.part(("u", 1)).adding == (1,)
    pr, ds = w.run(with_spec(pr, cancel=True), until=[P.CANCELLED])
    for key in (("u", 0), ("u", 1)):
        pv = w.part(key)
        assert (pv.replicas, pv.leader, pv.adding, pv.removing) == ((0, 3, 2), 0, (), ())
        assert [b for b in range(w.n) if w.where(b, key) is not None] == [0, 2, 3]
    assert all(len(d.status.current_batch) <= 1 for d in ds)
    assert ds[-1].status.counts == {"Done": 2}


def test_paused_to_cancelling_and_paused_to_cancelled(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])], pause=True))
    assert pr.status is not None and pr.status.phase == P.PAUSED
    w2 = world()
    pr2 = started(w2, reassign([("t", 0, [0, 1, 3])]))
    pr2, _ = w2.step(with_spec(pr2, pause=True))  # Paused with the step in flight
    assert pr2.status is not None and pr2.status.phase == P.PAUSED
    edges.clear()
    w.step(with_spec(pr, cancel=True))
    assert edges == [(S.PENDING, S.DONE), (P.PAUSED, P.CANCELLED)]
    edges.clear()
    w2.step(with_spec(pr2, cancel=True))
    assert edges == [(S.ADDING, S.REMOVING), (P.PAUSED, P.CANCELLING)]


# -- rollback -------------------------------------------------------------------------------


def test_succeeded_to_rolling_back_to_rolled_back_walks_back_to_the_original_order(
    edges: list[Edge],
) -> None:
    w = world()
    targets = [("t", 0, [3, 4, 5], ["b", "b", "b"]), ("t", 1, [4, 5, 3])]
    pr, _ = w.run(reassign(targets, maxConcurrentPartitionMovements=1), until=[P.SUCCEEDED])
    assert [w.part(k).replicas for k in (T0, T1)] == [(3, 4, 5), (4, 5, 3)]
    assert [w.where(b, T0) for b in (3, 4, 5)] == ["b", "b", "b"]
    edges.clear()
    pr, ds = w.run(with_spec(pr, rollback=True), until=[P.ROLLED_BACK])
    phases = [e for e in edges if isinstance(e[1], P)]
    assert phases == [(P.SUCCEEDED, P.ROLLING_BACK), (P.ROLLING_BACK, P.ROLLED_BACK)]
    assert edges[:3] == [(S.DONE, S.PENDING), (S.DONE, S.PENDING), (S.PENDING, S.ADDING)]
    for key, original in ((T0, (0, 1, 2)), (T1, (1, 2, 0))):
        pv = w.part(key)
        assert (pv.replicas, pv.leader, pv.isr, pv.reassigned_by) == (
            original,
            original[0],
            tuple(sorted(original, key=pv.isr.index)),
            None,
        )
        assert [w.where(b, key) for b in original] == ["a", "a", "a"]  # their own dirs
        assert all(w.where(b, key) is None for b in (3, 4, 5))
    assert condition(ds[-1], "RolledBack")[:2] == ("True", "RolledBack")
    assert not ds[-1].active
    # Under the same limits: one partition per batch.
    assert all(len(d.status.current_batch) <= 1 for d in ds)


def test_running_to_rolling_back_finishes_the_step_in_flight_first(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])]))
    edges.clear()
    pr, d = w.step(with_spec(pr, rollback=True))
    assert edges == [(P.RUNNING, P.ROLLING_BACK)] and writes(d) == []
    w.run(pr, until=[P.ROLLED_BACK])
    assert w.part(T0).replicas == (0, 1, 2) and w.where(3, T0) is None


def test_paused_and_cancelled_to_rolling_back(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])]))
    pr, _ = w.step(with_spec(pr, pause=True))
    edges.clear()
    w.step(with_spec(pr, rollback=True))
    assert edges[-1] == (P.PAUSED, P.ROLLING_BACK)
    w = world()
    pr, _ = w.run(reassign([("t", 0, [0, 1, 3]), ("t", 1, [1, 2, 4])]), until=[P.RUNNING])
    pr, _ = w.run(with_spec(pr, cancel=True), until=[P.CANCELLED])
    edges.clear()
    pr, _ = w.run(with_spec(pr, rollback=True), until=[P.ROLLED_BACK])
    assert next(e for e in edges if isinstance(e[1], P)) == (P.CANCELLED, P.ROLLING_BACK)
    assert [w.part(k).replicas for k in (T0, T1)] == [(0, 1, 2), (1, 2, 0)]


def test_placing_to_pending_on_a_rollback(edges: list[Edge]) -> None:
    w = world()
    pr = reassign([("t", 0, [0, 1, 3], ["b", "a", "a"])])
    for _ in range(3):  # step written, shrunk, dropped replica deleted: 0 still in dir a
        pr, d = w.step(pr)
        w.catch_up()
    assert state_of(d, T0) == S.PLACING
    edges.clear()
    _, d = w.step(with_spec(pr, rollback=True))
    assert edges[:2] == [(S.PLACING, S.PENDING), (S.PENDING, S.ADDING)]


# -- the topic deleted ----------------------------------------------------------------------


GONE_SETUPS: dict[S, tuple[list[Any], int]] = {
    # u-0's leader movement goes first; t-0 waits for the next batch
    S.PENDING: ([("u", 0, [3, 1, 2]), ("t", 0, [0, 1, 4])], 1),
    S.WAITING: ([("t", 0, [5, 1, 2])], 1),  # broker 5 is down
    S.ADDING: ([("t", 0, [0, 1, 3])], 1),
    S.REMOVING: ([("t", 0, [0, 1, 3])], 2),
    S.PLACING: ([("t", 0, [0, 1, 2], ["b", "a", "a"])], 1),
}


@pytest.mark.parametrize("state", sorted(GONE_SETUPS))
def test_to_gone_when_the_topic_disappears(state: S, edges: list[Edge]) -> None:
    w = world()
    w.add_topic("u", {0: (0, 1, 2)})
    w.live.discard(5)
    targets, passes = GONE_SETUPS[state]
    pr = reassign(targets, maxConcurrentPartitionMovements=1)
    for _ in range(passes):
        pr, d = w.step(pr)
        w.catch_up()
    assert state_of(d, T0) == state or (state == S.PENDING and d.status.counts["Pending"] == 1)
    edges.clear()
    w.drop_topic("t")
    _, d = w.step(pr)
    assert (state, S.GONE) in edges
    assert d.status.counts.get("Gone") == 1 and state_of(d, T0) is None
    assert not [a for a in d.actions if getattr(a, "topic", None) == "t"]


def test_a_topic_being_deleted_is_gone_too(edges: list[Edge]) -> None:
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])]))
    w.topics["t"] = replace(w.topics["t"], deleting=True)
    w.step(pr)
    assert edges[-2:] == [(S.ADDING, S.GONE), (P.RUNNING, P.SUCCEEDED)]


# -- a restart anywhere ----------------------------------------------------------------------


def test_a_batch_written_before_a_crash_that_lost_even_the_acceptance_is_adopted(
    edges: list[Edge],
) -> None:
    w = world()
    pr = reassign([("t", 0, [0, 1, 3])])
    w.apply(advance(w.observe(pr)))  # Topics written, brokers told; the status never was
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(None, P.PENDING), (S.PENDING, S.ADDING), (P.PENDING, P.RUNNING)]
    assert [o.replicas for o in d.status.original or []] == [[0, 1, 2]]  # not the step's
    assert d.status.batch == 1 and [e.target_brokers for e in d.status.current_batch] == [[0, 1, 3]]
    assert d.status.current_batch[0].current_brokers == [0, 1, 2]
    assert ("Normal", "BatchStarted", "batch 1: resumed with 1 partitions") in d.events
    assert writes(d) == []  # nothing written twice


def test_only_an_acceptance_that_starts_steps_is_recorded_before_acting() -> None:
    """``recorded_first``: the acceptance alone (Pending, the originals) when the first pass
    starts steps; nothing when it starts none or the resource was accepted before."""
    w = world()
    pr = reassign([("t", 0, [0, 1, 3])])
    d = advance(w.observe(pr))
    first = plan.recorded_first(pr.status, d)
    assert first is not None and first.phase == P.PENDING
    assert [o.replicas for o in first.original or []] == [[0, 1, 2]]
    assert (first.batch, first.current_batch, first.start_time) == (0, [], d.status.start_time)
    # Accepted already (a later pass), or nothing to submit (already at its target).
    pr, _ = w.step(pr)
    assert plan.recorded_first(pr.status, advance(w.observe(pr))) is None
    at_target = reassign([("t", 1, [1, 2, 0])])
    assert plan.recorded_first(None, advance(w.observe(at_target))) is None


def test_a_step_written_but_not_told_is_told_again() -> None:
    w = world()
    pr = reassign([("t", 0, [0, 1, 3], ["a", "a", "b"])])
    d = advance(w.observe(pr))
    for a in d.actions:  # the handler died after writing the Topic
        if isinstance(a, WritePartition):
            w.set_part(a.view)
    pr = pr.model_copy(update={"status": d.status})
    _, d = w.step(pr)
    assert changes(d) == (
        PreferDir(3, "t", 0, path(3, "b")),
        Tell("t", 0, frozenset({3}), frozenset({3})),
    )
    assert w.where(3, T0) == "b"


def test_a_pass_after_a_crash_mid_shrink_moves_on_without_repeating_it(
    edges: list[Edge],
) -> None:
    """The shrink written, the pass died before its status: the next pass sees a partition
    deleting its dropped replica and takes it from Adding through Removing."""
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    w.catch_up()
    w.apply(advance(w.observe(pr)))  # shrunk and deleted; the status still says Adding
    edges.clear()
    _, d = w.step(pr)
    assert edges == [(S.ADDING, S.REMOVING), (S.REMOVING, S.DONE)]
    assert [v.removing for v in writes(d)] == [()]


# -- throttles -------------------------------------------------------------------------------


def test_the_throttle_covers_the_leader_and_the_new_followers_and_is_lifted_at_the_end() -> None:
    w = world()
    pr = reassign([("t", 0, [1, 2, 3])], throttleBytesPerSecond=1000)
    pr, d = w.step(pr)
    throttles = [a for a in d.actions if isinstance(a, Throttle)]
    # From the pass that starts the step: the new replica must not fetch unthrottled.
    assert throttles == [
        Throttle(0, 1000, frozenset({T0}), frozenset(), SCOPE_T0),
        Throttle(3, 1000, frozenset(), frozenset({T0}), SCOPE_T0),
    ]
    assert pr.status is not None and pr.status.throttled_brokers == [0, 3]
    pr, d = w.step(pr)  # re-sent: a broker forgets it when it restarts
    assert [a for a in d.actions if isinstance(a, Throttle)] == throttles
    w.catch_up()
    pr, d = w.step(pr)  # shrunk: nothing catching up, lifted
    assert [a for a in d.actions if isinstance(a, Throttle)] == [
        Throttle(0, 0, frozenset(), frozenset(), SCOPE_T0),
        Throttle(3, 0, frozenset(), frozenset(), SCOPE_T0),
    ]
    assert pr.status is not None and pr.status.throttled_brokers == []


def test_brokers_about_to_be_throttled_are_on_record_before_the_throttle_is_set() -> None:
    """An operator killed after setting a throttle and before writing its status, the step
    ending before the next one looked: the throttle is still lifted at the end, from the
    brokers ``recorded_first`` put on record (Kafka keeps a throttle until it is lifted)."""
    w = world()
    pr = reassign([("t", 0, [1, 2, 3])], throttleBytesPerSecond=1000)
    d = advance(w.observe(pr))
    first = plan.recorded_first(pr.status, d)
    assert first is not None and first.throttled_brokers == [0, 3]
    w.apply(d)  # the throttles set and the step written; the operator dies before its status
    pr = pr.model_copy(update={"status": first})
    w.catch_up()  # the step ends before anyone looks
    pr, ds = w.run(pr, until=[P.SUCCEEDED])
    lifted = [a for d in ds for a in d.actions if isinstance(a, Throttle)]
    assert lifted == [
        Throttle(0, 0, frozenset(), frozenset(), SCOPE_T0),
        Throttle(3, 0, frozenset(), frozenset(), SCOPE_T0),
    ]
    assert pr.status is not None and pr.status.throttled_brokers == []
    # A pass that throttles no broker it has not recorded writes nothing first.
    w2 = world()
    pr2 = started(w2, reassign([("t", 0, [1, 2, 3])], throttleBytesPerSecond=1000))
    assert plan.recorded_first(pr2.status, advance(w2.observe(pr2))) is None


def test_a_throttle_on_a_broker_not_heard_from_yet_is_lifted_once_it_is() -> None:
    """Issue 37 item 4: an operator that takes over hears from the brokers one by one. The
    step ended before broker 3 heartbeated to it: the end lifted broker 0 and used to drop
    broker 3 from ``throttledBrokers`` unlifted, its throttle left for good. It stays on
    record, the resource is followed while it does, and the lift goes out once 3 is live."""
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])], throttleBytesPerSecond=1000))
    assert w.throttled[3] == ThrottleSeen(1000, frozenset({T0}))
    w.catch_up()
    w.live.discard(3)  # up, throttled, but not heard from by the new operator yet
    pr, ds = w.run(pr, until=[P.SUCCEEDED])
    assert ds[-1].active and pr.status is not None and pr.status.throttled_brokers == [3]
    assert w.throttled[0] == ThrottleSeen(0, frozenset())
    w.live.add(3)
    pr, d = w.step(pr)
    assert [a.broker for a in d.actions if isinstance(a, Throttle)] == [3]
    assert w.throttled[3] == ThrottleSeen(0, frozenset())
    assert pr.status is not None and pr.status.throttled_brokers == [] and not d.active
    assert pr.status.phase == P.SUCCEEDED
    _, d = w.step(pr)
    assert d.actions == () and not d.active


def test_the_end_lifts_a_throttle_the_brokers_report_whatever_the_status_lists() -> None:
    """A throttle naming this resource's partitions that no status lists (set by a pass whose
    record was lost) is lifted at the end, as read from the broker; another resource's
    throttled replicas on that broker are kept."""
    w = world()
    pr, _ = w.run(reassign([("t", 0, [0, 1, 3])]), until=[P.SUCCEEDED])
    other = ("u", 0)
    w.throttled[1] = ThrottleSeen(1000, frozenset({T0, other}))
    pr, d = w.step(pr)
    assert [a.broker for a in d.actions if isinstance(a, Throttle)] == [1]
    assert w.throttled[1] == ThrottleSeen(1000, frozenset({other}))
    assert not d.active and pr.status is not None and pr.status.phase == P.SUCCEEDED


# -- what the first version got wrong (each failed before its fix) ---------------------------


def test_a_rollback_asked_before_anything_moved_ends_rolled_back() -> None:
    """Pending has no edge to RollingBack: the pass raised IllegalTransitionError on every
    try, so a reassignment created with ``rollback: true`` (or waiting for a broker when it was
    set) never ended. Nothing moved, so it is cancelled and rolled back at once."""
    w = world()
    w.live.discard(3)
    pr, d = w.step(reassign([("t", 0, [3, 1, 2])]))
    assert d.status.phase == P.PENDING
    _, d = w.step(with_spec(pr, rollback=True))
    assert d.status.phase == P.ROLLED_BACK and writes(d) == [] and not d.active
    _, d = w.step(reassign([("t", 0, [0, 1, 4])], rollback=True))
    assert d.status.phase == P.ROLLED_BACK and writes(d) == []
    assert w.part(T0).replicas == (0, 1, 2)


def test_a_rollback_asked_while_cancelling_rolls_back_once_the_cancel_ended() -> None:
    """Cancelling has no edge to RollingBack either: the pass raised until the user removed
    ``rollback``. The cancel finishes first, then the rollback walks back from Cancelled."""
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3]), ("t", 1, [2, 0, 4])]))
    w.catch_up(T0)  # t-0's step finishes and is kept; t-1's is undone
    pr, d = w.step(with_spec(pr, cancel=True))
    assert d.status.phase == P.CANCELLING
    assert w.part(T1).removing == (4,)  # being undone
    pr, ds = w.run(with_spec(pr, rollback=True), until=[P.CANCELLED])
    assert {d.status.phase for d in ds} == {P.CANCELLING, P.CANCELLED}
    assert ds[-1].active  # the rollback is next: the handler keeps following it
    assert w.part(T0).replicas == (1, 2, 3)  # the finished step was kept by the cancel
    pr, ds = w.run(pr, until=[P.ROLLED_BACK])
    assert ds[0].status.phase == P.ROLLING_BACK
    assert [w.part(k).replicas for k in (T0, T1)] == [(0, 1, 2), (1, 2, 0)]


def test_a_cancelled_step_whose_leader_moved_to_a_new_replica_gets_an_original_leader() -> None:
    """The cluster controller elects among the in-sync replicas, new ones included: when the
    leader died mid-step and a caught-up new replica took over, the revert kept it as leader
    while removing it from the replicas (a leader outside ``replicas``, StopReplica sent to
    it). The original preferred replica leads again, if in sync."""
    w = world()
    pr = started(w, reassign([("t", 0, [0, 3, 4])], maxConcurrentReplicaMovements=2))
    during = w.part(T0)
    assert during.adding == (3, 4)
    # 3 caught up and became leader when 0 died; 4 still copying; 0 back and in sync.
    w.set_part(replace(during, isr=(1, 2, 0, 3), leader=3, leader_epoch=during.leader_epoch + 1))
    _, d = w.step(with_spec(pr, cancel=True))
    [out] = writes(d)
    assert out.replicas == (0, 1, 2) and out.leader == 0 and out.isr == (1, 2, 0)
    assert Delete(3, "t", 0) in d.actions


def kafka_step(w: World, pr: PartitionReassignment) -> tuple[int, ...]:
    """T0's step of ``pr``'s first batch as Kafka lists it while it runs: the step's target
    first, then the replicas leaving. Returns the target."""
    (entry,) = pr.status.current_batch if pr.status else []
    pv = w.part(T0)
    step = tuple(entry.target_brokers)
    reps = step + tuple(b for b in pv.replicas if b not in step)
    w.set_part(replace(pv, replicas=reps, dirs=tuple(pv.dir_of(b) for b in reps)))
    return step


def kafka_revert(w: World) -> None:
    """Kafka's revert of T0's step (a null target): the replicas it lists without the new
    ones, in its order; the leader kept; nothing in flight; the new replica deleted."""
    pv = w.part(T0)
    back = tuple(b for b in pv.replicas if b not in pv.adding)
    for b in pv.adding:
        for held in w.held[b].values():
            held.pop(T0, None)
    w.set_part(
        replace(
            pv,
            replicas=back,
            dirs=tuple(pv.dir_of(b) for b in back),
            isr=tuple(b for b in pv.isr if b in back),
            adding=(),
            removing=(),
            target=(),
            reassigned_by=None,
        )
    )


def write_actions(d: Decision) -> list[WritePartition]:
    return [a for a in d.actions if isinstance(a, WritePartition)]


def test_a_cancel_on_kafka_puts_back_the_order_kafka_s_revert_changed() -> None:
    """Kafka lists a step in flight as its target then the replicas leaving, so ``(0, 1, 2)``
    stepping to ``(1, 2, 3)`` reads ``(1, 2, 3, 0)``, and its revert leaves ``(1, 2, 0)``.
    The cancel writes the order recorded in the batch entry; the next pass, seeing Kafka's
    order, writes the reorder (a target with nothing in flight, which ``kafka_reassignment``
    submits) with the first replica as leader; the cancel ends once the record shows both."""
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3])]))
    step = kafka_step(w, pr)
    assert step[0] != 0 and w.part(T0).replicas[:3] == step
    seen = w.part(T0)
    pr, d = w.step(with_spec(pr, cancel=True))
    (out,) = writes(d)
    assert out.replicas == (0, 1, 2) and out.leader == 0 and out.removing == (3,)
    assert kr.submit(write_actions(d), {T0: seen}).cancels == (T0,)
    w.set_part(seen)
    kafka_revert(w)
    assert w.part(T0).replicas == (1, 2, 0) and w.part(T0).leader == 0
    seen = w.part(T0)
    pr, d = w.step(pr)
    (out,) = writes(d)
    assert (out.replicas, out.leader, out.adding, out.removing) == ((0, 1, 2), 0, (), ())
    assert Tell("t", 0, frozenset({0, 1, 2})) in d.actions
    assert kr.submit(write_actions(d), {T0: seen}).targets == {T0: (0, 1, 2)}
    assert state_of(d, T0) == S.REMOVING and d.status.phase == P.CANCELLING
    assert detail(d, T0).message == "cancelled: putting the replicas back in their order [0, 1, 2]"
    pr, d = w.step(pr)  # the reorder applied: the cancel ends
    assert d.status.phase == P.CANCELLED and writes(d) == []
    assert w.part(T0).replicas == (0, 1, 2) and w.part(T0).leader == 0


def test_after_a_cancel_on_kafka_the_first_replica_is_elected_and_a_lagging_read_waits() -> None:
    """Kafka's revert keeps the leader it had; when that is not the first replica (a
    failover mid-step) the next passes elect the first one once it is in sync and live. A
    Metadata read that still lists the new replica with nothing in flight (a broker's cache
    behind the controller) waits, Cancelling, instead of ending the cancel on it."""
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])]))
    kafka_step(w, pr)
    seen = w.part(T0)
    pr, _ = w.step(with_spec(pr, cancel=True))
    w.set_part(replace(seen, adding=(), removing=(), target=(), reassigned_by=None))
    pr, d = w.step(pr)  # the revert not in this read yet
    assert writes(d) == [] and state_of(d, T0) == S.REMOVING
    assert d.status.phase == P.CANCELLING
    assert detail(d, T0).message == "cancelled: waiting for brokers [3] to leave"
    # A step Kafka had ended just before the cancel never drops them: after a while the
    # partition goes on from where it is, which is neither its target nor its original, so
    # the cancel walks it back (here, back to the waiting read for the story).
    late = copy.deepcopy(w)
    late.now += plan.REVERT_SHOWN_WITHIN_S + 1
    _, d_late = late.step(pr)
    assert [v.replicas for v in writes(d_late)] == [(0, 1, 2)]
    assert d_late.status.phase == P.CANCELLING
    w.set_part(seen)
    kafka_revert(w)
    w.set_part(replace(w.part(T0), leader=1, isr=(1, 2)))
    pr, d = w.step(pr)  # 0 out of the ISR: it leads again once it is back in
    assert writes(d) == [] and state_of(d, T0) == S.REMOVING
    assert (
        detail(d, T0).message == "cancelled: waiting for broker 0 to rejoin the ISR to lead again"
    )
    w.set_part(replace(w.part(T0), isr=(1, 2, 0)))
    seen = w.part(T0)
    pr, d = w.step(pr)
    (out,) = writes(d)
    assert (out.replicas, out.leader) == ((0, 1, 2), 0)
    assert kr.to_elect([T0], {T0: out}, {T0: seen}) == [T0]
    assert detail(d, T0).message == "electing broker 0, its first replica, as leader"
    _, d = w.step(pr)
    assert d.status.phase == P.CANCELLED and writes(d) == []


def test_a_cancel_ends_with_each_partition_led_by_its_first_replica() -> None:
    """A partition the batch never reached whose leader a failover moved while the steps
    ran: the cancel elects its first replica (in sync and live) and ends once it leads."""
    w = world()
    targets = [("t", 0, [1, 2, 3]), ("t", 1, [1, 2, 4])]
    pr = started(w, reassign(targets, maxConcurrentPartitionMovements=1))
    assert [(e.topic, e.partition) for e in pr.status.current_batch] == [T0]  # type: ignore[union-attr]
    w.set_part(replace(w.part(T1), leader=2))
    pr, d = w.step(with_spec(pr, cancel=True))
    elected = [v for v in writes(d) if v.key == T1]
    assert [(v.replicas, v.leader) for v in elected] == [((1, 2, 0), 1)]
    assert Tell("t", 1, frozenset({0, 1, 2})) in d.actions
    assert detail(d, T1).message == "electing broker 1, its first replica, as leader"
    pr, _ = w.run(pr, until=[P.CANCELLED])
    assert w.part(T1).leader == 1 and w.part(T0).replicas == (0, 1, 2)


def test_a_step_is_not_undone_when_only_its_new_replicas_are_in_sync() -> None:
    """Undoing it would leave an ISR of replicas that are no longer replicas (the last ISR
    kept: the revert had nobody else in sync). It finishes instead and is kept."""
    w = world()
    pr = started(w, reassign([("t", 0, [0, 3, 4])], maxConcurrentReplicaMovements=2))
    during = w.part(T0)
    w.set_part(replace(during, isr=(3,), leader=3, leader_epoch=during.leader_epoch + 1))
    _, d = w.step(with_spec(pr, cancel=True))
    assert writes(d) == [] and state_of(d, T0) == S.ADDING


def test_a_new_batch_of_the_same_partition_written_before_a_crash_is_adopted() -> None:
    """The crash check compared partition names only: with one partition moving in several
    steps (P=1), the step written before the crash has the same name as the last recorded
    batch, so it was not adopted and the status kept the previous batch's number and brokers
    (and a second BatchFinished for it)."""
    w = world()
    pr = started(w, reassign([("t", 0, [0, 3, 4])]))
    w.catch_up()
    pr, _ = w.step(pr)  # shrunk
    pr, _ = w.step(pr)  # deleted
    assert pr.status is not None and pr.status.batch == 1
    w.apply(advance(w.observe(pr)))  # batch 2 written; its status lost
    assert w.part(T0).adding == (4,)
    _, d = w.step(pr)
    assert d.status.batch == 2
    [entry] = d.status.current_batch
    assert (entry.current_brokers, entry.target_brokers) == ([0, 3, 2], [0, 3, 4])


def test_a_partition_another_resource_moves_gets_no_step() -> None:
    """``claims`` and another PartitionReassignment's ``reassignedBy`` were only looked at on
    acceptance: a partition claimed after it (a LogDirMove created while it was still Pending,
    or a step of another reassignment) went into the next batch, and its step was written over
    the other one's."""
    w = world()
    w.live -= {3, 4}
    pr, _ = w.step(reassign([("t", 0, [3, 1, 2]), ("t", 1, [1, 2, 4])]))
    w.live |= {3, 4}  # both waited for a target; both could start now
    w.claims[T0] = "LogDirMove m"
    t1 = w.part(T1)
    other = replace(
        t1, replicas=(1, 2, 0, 5), dirs=(*t1.dirs, None), adding=(5,), reassigned_by="other"
    )
    w.set_part(other)
    _, d = w.step(pr)
    assert writes(d) == [] and d.status.batch == 0
    assert detail(d, T0).message == "LogDirMove m is moving it"
    assert detail(d, T1).message == "other is moving it"
    assert state_of(d, T0) == state_of(d, T1) == S.WAITING


def test_a_done_partition_walks_back_on_a_rollback_through_the_tables_edge(
    edges: list[Edge],
) -> None:
    """Partitions left out of the status' detail were told apart (Pending or Done) against
    the rollback's goal, so a Done one counted as Pending and Done -> Pending was never
    taken: a Done partition is Done against the goal the last pass had."""
    w = world()
    pr, _ = w.run(reassign([("t", 0, [0, 1, 3])]), until=[P.SUCCEEDED])
    edges.clear()
    w.step(with_spec(pr, rollback=True))
    assert edges[:2] == [(S.DONE, S.PENDING), (S.PENDING, S.ADDING)]


# -- refused specs: (new) -> Failed, the partition and the cause named, nothing done ---------


def refusal_world() -> World:
    w = world()
    w.add_topic("gone", {0: (0, 1, 2)})
    w.topics["gone"] = replace(w.topics["gone"], deleting=True)
    w.offline.add((3, "b"))
    w.cordoned.add((4, "b"))
    w.silent.add(5)
    w.claims[T1] = "PartitionReassignment other"
    return w


REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown topic", {"topic": "nope"}, "nope-0: topic 'nope' does not exist in cluster"),
    ("topic being deleted", {"topic": "gone"}, "gone-0: topic 'gone' is being deleted"),
    ("unknown partition", {"partition": 9}, "t-9: topic 't' has no partition 9"),
    ("unknown broker", {"replicas": [0, 1, 7]}, "t-0: broker 7 does not exist (brokers 0-5)"),
    ("duplicate replicas", {"replicas": [0, 1, 1]}, "t-0: replicas [0, 1, 1] name a broker twice"),
    (
        "replication factor change",
        {"replicas": [0, 1]},
        "t-0: the target has 2 replicas, the partition 3; set allowReplicationFactorChange to "
        "change it",
    ),
    (
        "replication factor change, flag set, under min ISR",
        {"replicas": [0], "allowReplicationFactorChange": True},
        "t-0: 1 target replicas are fewer than the topic's min.insync.replicas 2",
    ),
    ("dir not on the broker", {"logDirs": ["zz", "a", "a"]}, "t-0: broker 0 has no log dir 'zz'"),
    (
        "dir path not on the broker",
        {"logDirs": [path(1, "a"), "a", "a"]},
        f"t-0: broker 0 has no log dir '{path(1, 'a')}'",
    ),
    (
        "dir offline",
        {"replicas": [3, 1, 2], "logDirs": ["b", "a", "a"]},
        "t-0: log dir b of broker 3 is offline",
    ),
    (
        "dir cordoned",
        {"replicas": [4, 1, 2], "logDirs": ["data-b", "a", "a"]},
        "t-0: log dir b of broker 4 is cordoned (being drained)",
    ),
    (
        "dir unknown on a broker that did not describe",
        {"replicas": [5, 1, 2], "logDirs": ["zz", "a", "a"]},
        "t-0: broker 5 has no log dir 'zz'",
    ),
    (
        "another resource moves it",
        {"partition": 1, "replicas": [1, 2, 3]},
        "t-1: PartitionReassignment other is moving this partition",
    ),
]


@pytest.mark.parametrize(("case", "entry", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_new_to_failed_naming_the_partition_and_the_cause(
    case: str, entry: dict[str, Any], message: str, edges: list[Edge]
) -> None:
    w = refusal_world()
    raw: dict[str, Any] = {"topic": "t", "partition": 0, "replicas": [0, 1, 3], **entry}
    flag = raw.pop("allowReplicationFactorChange", False)
    target = (
        raw["topic"],
        raw["partition"],
        raw["replicas"],
        *([raw["logDirs"]] if "logDirs" in raw else []),
    )
    pr = reassign([target], allowReplicationFactorChange=flag)
    d = advance(w.observe(pr))
    assert edges == [(None, P.FAILED)]
    assert d.status.phase == P.FAILED and d.actions == () and not d.active
    status, reason, text = condition(d, "Failed")
    assert (status, reason) == ("True", "InvalidSpec")
    assert text == f"1 partition(s) refused: {message}"
    assert d.events == (("Warning", "InvalidSpec", text),)
    assert d.status.original is None and d.status.completion_time == iso(NOW)
    assert condition(d, "Progressing")[0] == "False"


def test_every_refused_partition_is_named_at_once() -> None:
    w = refusal_world()
    pr = reassign([("t", 0, [0, 1, 7]), ("t", 1, [1, 2, 3]), ("u", 0, [0, 1, 2])])
    d = advance(w.observe(pr))
    message = condition(d, "Failed")[2]
    assert message == (
        "3 partition(s) refused: t-0: broker 7 does not exist (brokers 0-5); "
        "t-1: PartitionReassignment other is moving this partition; "
        "u-0: topic 'u' does not exist in cluster"
    )
    assert d.actions == ()


def test_a_failed_reassignment_changes_nothing_afterwards(edges: list[Edge]) -> None:
    w = refusal_world()
    pr, d = w.step(reassign([("nope", 0, [0, 1, 2])]))
    edges.clear()
    _, again = w.step(pr)
    assert edges == [] and again.status == d.status and again.actions == ()


def test_the_bounded_detail_lists_the_steps_in_flight_before_the_waiting_ones() -> None:
    """The detail was cut at MAX_DETAIL in key order: with many partitions waiting (a broker
    down) before it, a step in flight was not listed at all, so its state and the time its
    bytes last moved were lost every pass and it could never be reported Stalled."""
    w = world()
    w.add_topic("a", {p: (0, 1, 2) for p in range(MAX_DETAIL + 1)})
    w.live.discard(5)
    targets: list[Any] = [("a", p, [5, 1, 2]) for p in range(MAX_DETAIL + 1)]
    pr = reassign([*targets, ("t", 0, [0, 1, 3])], stallAfterSeconds=60)
    pr, d = w.step(pr)
    assert d.status.counts == {"Waiting": MAX_DETAIL + 1, "Adding": 1}
    assert len(d.status.partitions) == MAX_DETAIL and state_of(d, T0) == S.ADDING
    w.now += 61
    _, d = w.step(pr)
    assert condition(d, "Stalled")[2] == "t-0: no progress for 61s on brokers [3]"
    assert [(e.topic, e.partition) for e in d.status.partitions] == sorted(
        (e.topic, e.partition) for e in d.status.partitions
    )


def test_a_second_pass_over_an_unchanged_world_changes_nothing(edges: list[Edge]) -> None:
    """Idempotence: nothing is written twice, no Event repeated, the same status; only the
    idempotent LeaderAndIsr to the new replicas not yet in sync is repeated."""
    w = world()
    pr = started(w, reassign([("t", 0, [1, 2, 3]), ("t", 1, [1, 2, 4])]))
    first = advance(w.observe(pr))
    pr2 = pr.model_copy(update={"status": first.status})
    again = advance(w.observe(pr2))
    assert pr.status is not None
    assert again.status.dump() == first.status.dump() == pr.status.dump()
    assert again.actions == first.actions and again.events == ()
    assert {type(a).__name__ for a in again.actions} <= {"Tell", "Throttle"}
    assert all(a.new == a.brokers for a in again.actions if isinstance(a, Tell))


# -- every allowed edge has its pass -------------------------------------------------------

TAKEN_BY: dict[Edge, str] = {
    (None, P.PENDING): "test_new_to_pending_to_running_when_the_first_batch_starts",
    (None, P.FAILED): "test_new_to_failed_naming_the_partition_and_the_cause",
    (P.PENDING, P.RUNNING): "test_new_to_pending_to_running_when_the_first_batch_starts",
    (
        P.PENDING,
        P.SUCCEEDED,
    ): "test_pending_to_succeeded_when_every_partition_is_already_at_its_target",
    (P.PENDING, P.PAUSED): "test_pending_to_paused_when_created_paused",
    (P.PENDING, P.CANCELLED): "test_pending_to_cancelled_when_cancelled_before_anything_moved",
    (P.RUNNING, P.PAUSED): "test_running_to_paused_steps_in_flight_finish_and_no_new_batch_starts",
    (
        P.RUNNING,
        P.SUCCEEDED,
    ): "test_removing_to_done_once_the_describes_show_the_dropped_replicas_gone",
    (
        P.RUNNING,
        P.CANCELLING,
    ): "test_running_to_cancelling_reverts_a_step_whose_new_replicas_are_not_in_sync",
    (P.RUNNING, P.CANCELLED): "test_running_to_cancelled_with_nothing_in_flight",
    (P.RUNNING, P.ROLLING_BACK): "test_running_to_rolling_back_finishes_the_step_in_flight_first",
    (P.PAUSED, P.RUNNING): "test_running_to_paused_steps_in_flight_finish_and_no_new_batch_starts",
    (P.PAUSED, P.CANCELLING): "test_paused_to_cancelling_and_paused_to_cancelled",
    (P.PAUSED, P.CANCELLED): "test_paused_to_cancelling_and_paused_to_cancelled",
    (P.PAUSED, P.ROLLING_BACK): "test_paused_and_cancelled_to_rolling_back",
    (
        P.CANCELLING,
        P.CANCELLED,
    ): "test_running_to_cancelling_reverts_a_step_whose_new_replicas_are_not_in_sync",
    (
        P.SUCCEEDED,
        P.ROLLING_BACK,
    ): "test_succeeded_to_rolling_back_to_rolled_back_walks_back_to_the_original_order",
    (P.CANCELLED, P.ROLLING_BACK): "test_paused_and_cancelled_to_rolling_back",
    (
        P.ROLLING_BACK,
        P.ROLLED_BACK,
    ): "test_succeeded_to_rolling_back_to_rolled_back_walks_back_to_the_original_order",
    (S.PENDING, S.ADDING): "test_new_to_pending_to_running_when_the_first_batch_starts",
    (
        S.PENDING,
        S.REMOVING,
    ): "test_pending_to_removing_a_step_that_only_drops_replicas_shrinks_at_once",
    (S.PENDING, S.WAITING): "test_pending_to_waiting_when_a_target_broker_is_down_then_back",
    (S.PENDING, S.DONE): "test_pending_to_succeeded_when_every_partition_is_already_at_its_target",
    (S.PENDING, S.GONE): "test_to_gone_when_the_topic_disappears",
    (S.WAITING, S.PENDING): "test_pending_to_waiting_when_a_target_broker_is_down_then_back",
    (S.WAITING, S.GONE): "test_to_gone_when_the_topic_disappears",
    (S.ADDING, S.REMOVING): "test_adding_to_removing_when_every_new_replica_is_in_the_isr",
    (S.ADDING, S.GONE): "test_to_gone_when_the_topic_disappears",
    (S.REMOVING, S.PENDING): "test_removing_to_pending_when_more_steps_are_to_go",
    (S.REMOVING, S.DONE): "test_removing_to_done_once_the_describes_show_the_dropped_replicas_gone",
    (
        S.REMOVING,
        S.PLACING,
    ): "test_removing_to_placing_then_done_when_a_kept_replica_is_named_a_new_dir",
    (S.REMOVING, S.GONE): "test_to_gone_when_the_topic_disappears",
    (S.PENDING, S.PLACING): "test_pending_to_placing_when_only_the_dir_changes",
    (S.PLACING, S.DONE): "test_pending_to_placing_when_only_the_dir_changes",
    (S.PLACING, S.PENDING): "test_placing_to_pending_on_a_rollback",
    (S.PLACING, S.GONE): "test_to_gone_when_the_topic_disappears",
    (S.DONE, S.PENDING): "test_a_done_partition_walks_back_on_a_rollback_through_the_tables_edge",
}
"""Which test takes each allowed edge through ``advance`` (and asserts it among the edges
recorded): an edge added to a table fails the next test until a pass is shown taking it."""


def test_every_allowed_edge_is_taken_by_a_named_pass() -> None:
    assert set(TAKEN_BY) == set(PHASE_TRANSITIONS) | set(PARTITION_TRANSITIONS)
    for name in set(TAKEN_BY.values()):
        assert callable(globals().get(name)), name


@pytest.mark.parametrize(("a", "b"), sorted(TAKEN_BY, key=str), ids=str)
def test_each_allowed_edge_is_taken_by_the_pass_its_test_drives(a: Any, b: Any) -> None:
    """The named test, run again with ``transition`` recorded, takes the edge through the
    pass (not merely ends in its state): an edge no pass takes fails here."""
    test = globals()[TAKEN_BY[(a, b)]]
    assert (a, b) in edges_taken_by(test, plan), f"{test.__name__} does not take {a} -> {b}"


# -- facts Kafka needs (issue 22), shared by both adapters -------------------------------------


def test_the_partition_limit_counts_partitions_other_reassignments_move() -> None:
    """The partition limit is cluster-wide: one partition someone else moves leaves room for
    one of ours under a limit of 2; the status says so."""
    w = world()
    pr = reassign([("t", 0, [0, 1, 3]), ("t", 1, [1, 2, 4])], maxConcurrentPartitionMovements=2)
    obs = replace(w.observe(pr), others_in_flight=1)
    d = advance(obs)
    assert [(e.topic, e.partition) for e in d.status.current_batch] == [("t", 0)]
    msg = condition(d, "Progressing")[2]
    assert "1 partitions moved by other reassignments count against the limits" in msg
    assert [(e.topic, e.partition) for e in advance(w.observe(pr)).status.current_batch] == [
        T0,
        T1,
    ]


def _ended_led_by(w: World, step: tuple[int, ...], leader: int) -> PartView:
    """Kafka ended t-0's step by itself: the step's target in order, ``leader`` leading (on
    Kafka a step's end keeps a leader that stays; our shrink elects the first replica)."""
    pv = w.part(T0)
    for b in step:
        if w.where(b, T0) is None:
            w.held[b]["a"][T0] = SIZE
    ended = replace(pv, replicas=step, dirs=tuple(path(b, "a") for b in step), isr=step)
    seen = replace(ended, leader=leader, adding=(), removing=(), target=(), reassigned_by=None)
    w.set_part(seen)
    return seen


def test_a_step_that_ends_led_by_another_replica_elects_it_and_the_next_batch_starts() -> None:
    """The pass that sees the step's end writes its first replica's election (a new leader
    epoch, told) and, that being the batch's last act, starts the next batch from the entry
    as written: the next step goes out led by the first replica, as ``plan_all`` counts on,
    and Kafka is asked to elect it (the step is submitted first). A later read that still
    shows the old leader changes nothing: the step is in flight."""
    w = world()
    pr = started(
        w,
        reassign(
            [("t", 0, [3, 4, 5])], maxConcurrentReplicaMovements=2, throttleBytesPerSecond=1000
        ),
    )
    (entry,) = pr.status.current_batch if pr.status else []
    step = tuple(entry.target_brokers)
    assert step == (3, 0, 1, 2)  # the new preferred leader added alone
    seen = _ended_led_by(w, step, leader=0)
    pr, d = w.step(pr)
    # Throttled at both leaders: the one read serves the new replica until the election.
    throttles = {a.broker: a for a in d.actions if isinstance(a, Throttle)}
    assert T0 in throttles[0].leader_replicas and T0 in throttles[3].leader_replicas
    assert T0 in throttles[4].follower_replicas and throttles[4].rate == 1000
    elected, nxt = writes(d)
    assert (elected.leader, elected.leader_epoch, elected.replicas) == (3, 4, step)
    assert (nxt.leader, nxt.adding, nxt.removing, nxt.target) == (3, (4,), (0, 1), (3, 4, 2))
    assert Tell("t", 0, frozenset(step)) in d.actions
    assert Tell("t", 0, frozenset({*step, 4}), frozenset({4})) in d.actions
    assert [e[1] for e in d.events] == ["BatchFinished", "BatchStarted"]
    assert d.status.batch == 2 and state_of(d, T0) == S.ADDING and d.status.phase == P.RUNNING
    assert detail(d, T0).message == "new replicas on brokers [4] catching up"
    # On Kafka: the step submitted, then the first replica elected.
    sub = kr.submit([WritePartition("t", v) for v in writes(d)], {T0: seen})
    assert (sub.targets, sub.cancels) == ({T0: (3, 4, 2)}, ())
    assert kr.to_elect([T0], {T0: nxt}, {T0: seen}) == [T0]
    # Kafka's read still shows broker 0 leading, the step in flight: nothing is asked again.
    w.set_part(replace(w.part(T0), leader=0))
    pr, d = w.step(pr)
    assert writes(d) == [] and state_of(d, T0) == S.ADDING and d.status.batch == 2
    w.set_part(replace(w.part(T0), leader=3))
    pr, _ = w.run(pr, until=[P.SUCCEEDED])
    assert w.part(T0).replicas == (3, 4, 5) and w.part(T0).leader == 3


def test_a_step_that_ends_at_its_goal_led_by_another_replica_ends_once_its_first_leads() -> None:
    """At its goal, a partition led by another replica than its first (a failover while its
    last step ran) gets that one elected, and the reassignment ends only once a read shows it
    leading: the election is asked again while the read lags."""
    w = world()
    pr = started(w, reassign([("t", 0, [0, 1, 3])]))
    (entry,) = pr.status.current_batch if pr.status else []
    assert tuple(entry.target_brokers) == (0, 1, 3)
    _ended_led_by(w, (0, 1, 3), leader=1)
    pr, d = w.step(pr)
    (out,) = writes(d)
    assert (out.leader, out.leader_epoch, out.replicas) == (0, 4, (0, 1, 3))
    assert state_of(d, T0) == S.REMOVING and d.status.phase == P.RUNNING
    assert detail(d, T0).message == "electing broker 0, its first replica, as leader"
    assert d.status.batch == 1 and d.events == ()
    w.set_part(replace(w.part(T0), leader=1))  # the election not seen yet
    pr, d = w.step(pr)
    assert [v.leader for v in writes(d)] == [0] and state_of(d, T0) == S.REMOVING
    assert d.status.batch == 1 and d.events == ()
    pr, d = w.step(pr)  # led by 0 (the write applied)
    assert d.status.phase == P.SUCCEEDED and state_of(d, T0) in (S.DONE, None)


def test_no_batch_starts_while_another_step_of_the_batch_still_catches_up() -> None:
    """Of a batch's two steps, one ended led by another replica (its election written), the
    other's new replica is still catching up: the batch is not over."""
    w = world()
    pr = started(
        w,
        reassign(
            [("t", 0, [3, 4, 5]), ("t", 1, [4, 3, 5])],
            maxConcurrentReplicaMovements=2,
            maxConcurrentPartitionMovements=2,
        ),
    )
    assert {(e.topic, e.partition) for e in (pr.status.current_batch if pr.status else [])} == {
        T0,
        T1,
    }
    _ended_led_by(w, (3, 0, 1, 2), leader=0)
    pr, d = w.step(pr)
    assert [(v.key, v.leader) for v in writes(d)] == [(T0, 3)]
    assert state_of(d, T0) == S.REMOVING and state_of(d, T1) == S.ADDING
    assert d.status.batch == 1 and d.events == ()


def test_at_its_target_a_partition_led_by_another_replica_gets_its_preferred_leader() -> None:
    """A partition at its target whose leader is not its first replica (a cancel, a failover)
    gets the first one elected while it is in sync and live; not when it is out of the ISR."""
    w = world()
    pr = reassign([("t", 0, [0, 1, 2]), ("t", 1, [3, 2, 0])])
    w.set_part(replace(w.part(T0), leader=1))
    d = advance(w.observe(pr))
    elected = [v for v in writes(d) if v.key == T0]
    assert [(v.leader, v.leader_epoch) for v in elected] == [(0, 4)]
    assert Tell("t", 0, frozenset({0, 1, 2})) in d.actions
    w2 = world()
    w2.set_part(replace(w2.part(T0), leader=1, isr=(1, 2)))
    d2 = advance(w2.observe(pr))
    assert [v for v in writes(d2) if v.key == T0] == []


# -- a cluster that cannot be worked on ------------------------------------------------------


@pytest.mark.parametrize(
    "problem",
    [
        None,
        ("KafkaUnreachable", "Kafka's DescribeCluster failed: NoBrokersAvailable"),
        ("ClusterAmbiguous", "both a BrokerCluster and a KafkaCluster are named kafka/kip"),
    ],
)
def test_a_cluster_missing_or_unusable_does_nothing_and_says_why(
    problem: tuple[str, str] | None,
) -> None:
    """Accepted or running, a pass that could not read its cluster changes nothing (no phase,
    no action) and names the cause in Progressing; the resource stays active."""
    w = world()
    new = reassign([("t", 0, [3, 1, 2])])
    running = started(w, new)
    reason, message = problem or ("ClusterNotFound", "BrokerCluster kip not found")
    for pr in (new, running):
        d = plan.advance(plan.Observed(pr, 0.0, cluster_size=None, cluster_problem=problem))
        assert d.actions == () and d.active
        assert d.status.phase == (pr.status.phase if pr.status else None)
        assert condition(d, "Progressing")[1:] == (reason, message)
