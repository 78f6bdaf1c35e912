"""PartitionReassignment decisions, pure: every transition of a reassignment and of its
partitions, over KIP-435's steps (``plan.reassignment_steps``).

The handler (``handlers/reassignments.py``) observes the API and the brokers into an
:class:`Observed` (the Topics' partition state of record read under the cluster controller's
lock), calls :func:`advance`, carries out the :class:`Decision`'s actions in order (Topic
statuses first: the state of record is written before brokers are told) and writes this
resource's status once.

The partition state of record is the Topic's (``status.partitions[]``, KIP-455's view):

- a step starts by writing ``replicas`` = the current ones in their order + the new ones,
  ``addingReplicas`` = the new ones (created in their named dir), ``removingReplicas`` = the
  ones the step drops, ``targetReplicas`` = where the step ends (in order) and
  ``reassignedBy``; then LeaderAndIsr goes to all of them (the new ones as new replicas);
- when every new replica is in the ISR (the leader's AlterPartition, through the cluster
  controller) the step *shrinks*: ``replicas`` = the target, the ISR without the dropped ones,
  the target's first replica elected when it is in sync (or the leader leaves), a new leader
  epoch (the dropped replicas are fenced); the dropped ones stay in ``removingReplicas``,
  outside ``replicas``, until their brokers deleted them (StopReplica with delete);
- then the next step, until ``replicas`` equals the final target, order included.

Every partition's state is derived from that record on each pass, so an operator killed at
any point resumes at the transition it was in and repeats only idempotent requests. Every
state change goes through :func:`machine.transition` over :data:`PHASE_TRANSITIONS` /
:data:`PARTITION_TRANSITIONS` (drawn in the enums' docstrings; a test keeps them equal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..models.common import Condition
from ..models.reassignment import (
    ENDED_PHASES,
    MAX_DETAIL,
    BatchEntry,
    PartitionPhase,
    PartitionReassignment,
    PartitionReassignmentStatus,
    PartitionStatus,
    ReassignmentPhase,
)
from . import reassignment_steps as steps
from .conditions import iso, parse_iso, set_condition
from .election import NO_LEADER
from .machine import transition
from .port_types import (
    TP,
    BrokerDirs,
    Delete,
    PartView,
    PreferDir,
    RecordDirs,
    Tell,
    Throttle,
    ThrottleSeen,
    TopicView,
    WritePartition,
)
from .reassignment_goals import (
    Goal,
    goals,
    goals_for_run,
    original_goals,
    originals,
)
from .reassignment_progress import (
    bytes_moved_now,
    partition_size,
    progress_percent,
    rate_and_eta,
    totals,
)
from .reassignment_throttles import plan_throttles, scope_of, throttles_to_lift

Phase = ReassignmentPhase
PState = PartitionPhase

PHASE_TRANSITIONS: Mapping[tuple[Phase | None, Phase], str] = {
    (None, Phase.PENDING): "accepted: every partition checked, originals recorded",
    (None, Phase.FAILED): "the spec can never work, or another resource moves a partition",
    (Phase.PENDING, Phase.RUNNING): "the first batch started",
    (Phase.PENDING, Phase.SUCCEEDED): "every partition already at its target",
    (Phase.PENDING, Phase.PAUSED): "spec.pause",
    (Phase.PENDING, Phase.CANCELLED): "spec.cancel before anything moved",
    (Phase.RUNNING, Phase.PAUSED): "spec.pause (steps in flight finish)",
    (Phase.RUNNING, Phase.SUCCEEDED): "every partition at its target",
    (Phase.RUNNING, Phase.CANCELLING): "spec.cancel: steps in flight or partitions to walk back",
    (Phase.RUNNING, Phase.CANCELLED): "spec.cancel: every partition at its target or original",
    (Phase.RUNNING, Phase.ROLLING_BACK): "spec.rollback",
    (Phase.PAUSED, Phase.RUNNING): "spec.pause cleared",
    (Phase.PAUSED, Phase.CANCELLING): "spec.cancel: steps in flight or partitions to walk back",
    (Phase.PAUSED, Phase.CANCELLED): "spec.cancel: every partition at its target or original",
    (Phase.PAUSED, Phase.ROLLING_BACK): "spec.rollback",
    (Phase.CANCELLING, Phase.CANCELLED): "every partition at its target or back at its original",
    (Phase.SUCCEEDED, Phase.ROLLING_BACK): "spec.rollback after the end",
    (Phase.CANCELLED, Phase.ROLLING_BACK): "spec.rollback after a cancel",
    (Phase.ROLLING_BACK, Phase.ROLLED_BACK): "every partition back at its original replicas, "
    "in order",
}
"""Every allowed change of a PartitionReassignment's phase (``None``: not yet accepted)."""

PARTITION_TRANSITIONS: Mapping[tuple[PState, PState], str] = {
    (PState.PENDING, PState.ADDING): "a step written: new replicas added (KIP-455 addingReplicas)",
    (PState.PENDING, PState.REMOVING): "a step that only drops replicas written",
    (PState.PENDING, PState.WAITING): "the next step cannot start (a target broker down, no ISR)",
    (PState.PENDING, PState.DONE): "at its target, in order, with its leader",
    (PState.PENDING, PState.GONE): "its topic was deleted",
    (PState.WAITING, PState.PENDING): "what blocked it is back",
    (PState.WAITING, PState.GONE): "its topic was deleted",
    (PState.ADDING, PState.REMOVING): "every new replica in sync: ISR and replicas shrunk",
    (PState.ADDING, PState.GONE): "its topic was deleted",
    (PState.REMOVING, PState.PENDING): "the dropped replicas deleted; more steps to go",
    (PState.REMOVING, PState.DONE): "the dropped replicas deleted; at its target",
    (PState.REMOVING, PState.PLACING): "the dropped replicas deleted; a replica not in its "
    "named dir",
    (PState.REMOVING, PState.GONE): "its topic was deleted",
    (PState.PENDING, PState.PLACING): "at its target brokers; a replica not in its named dir "
    "(KIP-113)",
    (PState.PLACING, PState.DONE): "every replica in its named dir",
    (PState.PLACING, PState.PENDING): "a rollback: it walks back to its original replicas",
    (PState.PLACING, PState.GONE): "its topic was deleted",
    (PState.DONE, PState.PENDING): "a rollback: it walks back to its original replicas",
}
"""Every allowed change of one partition's state."""

ACTIVE_PHASES = frozenset(
    {Phase.PENDING, Phase.RUNNING, Phase.PAUSED, Phase.CANCELLING, Phase.ROLLING_BACK}
)
IN_FLIGHT = frozenset({PState.ADDING, PState.REMOVING})
REVERT_SHOWN_WITHIN_S = 30.0
"""How long a cancel waits for a read to stop listing the replicas a revert drops before it
takes the read as it is (Metadata lags Kafka's controller by well under a second; a step Kafka
had already ended when the cancel came never drops them)."""
TROUBLE = frozenset({PState.WAITING})


# -- observations -------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    pr: PartitionReassignment
    now: float
    cluster_size: int | None
    """The cluster's broker count (on Kafka: the highest id plus one); None when it does not
    exist or cannot be worked on (``cluster_problem`` says why)."""
    live: frozenset[int] = frozenset()
    topics: Mapping[str, TopicView] = field(default_factory=dict)
    """By Kafka name: the Topics of the cluster that the spec names (present ones only)."""
    brokers: Mapping[int, BrokerDirs | None] = field(default_factory=dict)
    """describe-log-dirs of every broker (None: it did not answer)."""
    busy: Mapping[int, int] = field(default_factory=dict)
    """Per broker: replica moves in flight for other resources (LogDirMoves, other
    PartitionReassignments): the per-broker budget is shared."""
    claims: Mapping[TP, str] = field(default_factory=dict)
    """Partitions another active resource moves, with that resource's kind/name."""
    cluster_dirs: tuple[str, ...] = ()
    """The BrokerCluster's log dir names."""
    others_in_flight: int = 0
    """Partitions other reassignments move anywhere in the cluster (other resources', and on
    Kafka ones someone else started): they count against ``maxConcurrentPartitionMovements``,
    which is cluster-wide."""
    throttles: Mapping[int, ThrottleSeen] = field(default_factory=dict)
    """The throttles of the live brokers this resource's partitions are on, as read."""
    liveness_known: bool = True
    """False right after the operator took over (the controller's grace period): a broker
    not heard from yet may well be up, so nothing is decided from its absence."""
    cluster_problem: tuple[str, str] | None = None
    """(reason, message) when the named cluster cannot be worked on now (``cluster_size`` is
    then None): two clusters of that name, Kafka unreachable, its credentials missing."""
    broker_ids: frozenset[int] | None = None
    """The ids of the brokers the cluster has, up or down: on Kafka the ones DescribeCluster
    lists (fenced ones too: Kafka's controller takes a registered broker, down or not, in a
    reassignment, and refuses any other id); None: ``0 .. cluster_size - 1``, a
    BrokerCluster's."""

    @property
    def cluster_brokers(self) -> frozenset[int]:
        """The brokers the cluster has (``broker_ids``, else a BrokerCluster's dense ids)."""
        if self.broker_ids is not None:
            return self.broker_ids
        return frozenset(range(self.cluster_size or 0))


# -- actions ------------------------------------------------------------------------------


Action = WritePartition | PreferDir | Tell | Delete | Throttle | RecordDirs


@dataclass(frozen=True)
class Decision:
    status: PartitionReassignmentStatus
    events: tuple[tuple[str, str, str], ...] = ()
    actions: tuple[Action, ...] = ()
    active: bool = False
    """Whether the handler should keep following it (something may still change)."""


# -- one pass -----------------------------------------------------------------------------


@dataclass
class _Pass:
    obs: Observed
    status: PartitionReassignmentStatus
    gen: int | None
    events: list[tuple[str, str, str]] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    states: dict[TP, PState] = field(default_factory=dict)
    detail: dict[TP, PartitionStatus] = field(default_factory=dict)
    wrote: dict[TP, PartView] = field(default_factory=dict)
    """The entries this pass writes: what the brokers are told next, so what the throttles
    (and anything else decided after the write) must look at."""
    recording: set[TP] = field(default_factory=set)
    """Partitions whose dirs this pass records on their own (:class:`RecordDirs`): the
    resource does not end on a pass that still corrects its record; the next one confirms."""
    elected: set[TP] = field(default_factory=set)
    """Partitions whose step ended led by another replica than its first, and whose write in
    this pass is that replica's election: the step's last act (see :func:`_ended_by_elections`)."""

    @property
    def name(self) -> str:
        return self.obs.pr.metadata.name

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    def write(self, tv: TopicView, view: PartView) -> None:
        self.actions.append(WritePartition(tv.resource, view))
        self.wrote[view.key] = view


def _previous(status: PartitionReassignmentStatus) -> dict[TP, PartitionStatus]:
    return {(p.topic, p.partition): p for p in status.partitions}


def _path(a: PState, b: PState) -> list[PState]:
    """The shortest chain of table edges from ``a`` to ``b`` (``[b]`` when there is none, so
    :func:`machine.transition` refuses the direct edge and names it)."""
    if a == b:
        return []
    frontier: list[tuple[PState, list[PState]]] = [(a, [])]
    seen = {a}
    while frontier:
        nxt: list[tuple[PState, list[PState]]] = []
        for s, path in frontier:
            for x, y in PARTITION_TRANSITIONS:
                if x == s and y not in seen:
                    if y == b:
                        return [*path, y]
                    seen.add(y)
                    nxt.append((y, [*path, y]))
        frontier = nxt
    return [b]


def _move(p: _Pass, key: TP, before: PState, after: PState) -> None:
    """Record ``after`` for ``key``, reached from ``before`` along the table's edges.

    One pass may take a partition over several edges (a standby that took over sees a step
    already shrunk); each edge on the way must be in :data:`PARTITION_TRANSITIONS`, so an
    impossible change raises :class:`machine.IllegalTransitionError`.
    """
    state = before
    for nxt in _path(before, after):
        state = transition(PARTITION_TRANSITIONS, state, nxt)
    p.states[key] = after


def _prior_state(
    p: _Pass, key: TP, prev: Mapping[TP, PartitionStatus], pv: PartView | None, goal: Goal | None
) -> PState:
    """A partition's state at the end of the last pass: listed ones as listed; the others were
    Pending or Done (only those two are left out of the detail), told apart by the record
    against ``goal``, the goal *the last pass* had (the spec's target, or the originals once
    rolling back): against this pass' goal, a Done partition that a rollback starts to walk
    back would count as Pending and its Done -> Pending would never be taken."""
    if key in prev:
        return prev[key].state
    if pv is not None and goal is not None and _at(pv, goal) and p.status.batch > 0:
        return PState.DONE
    return PState.PENDING


def advance(obs: Observed) -> Decision:
    """Every transition the observation allows, as a new status, Events and actions."""
    pr = obs.pr
    status = pr.status or PartitionReassignmentStatus()
    p = _Pass(obs, status, pr.metadata.generation)
    phase = status.phase
    if phase is None:
        return _accept(p)
    if phase in ENDED_PHASES and not (
        pr.spec.rollback and phase in (Phase.SUCCEEDED, Phase.CANCELLED)
    ):
        return _ended(p)
    if obs.cluster_size is None:
        return _cluster_unusable(p, phase)
    return _run(p, phase)


def _ended(p: _Pass) -> Decision:
    """An ended reassignment changes nothing, but lifts the throttles its end could not
    reach (a broker not live then, listed in ``throttledBrokers``; or one whose throttle, as
    read, still names its partitions), and is followed until none is left."""
    scope = scope_of(p.obs.pr)
    seen = any(t.replicas & scope for t in p.obs.throttles.values())
    if p.obs.cluster_size is None or not (throttles_to_lift(p.status) or seen):
        return Decision(p.status, (), (), throttles_to_lift(p.status))
    _throttle(p, active=False)
    return Decision(p.status, (), tuple(p.actions), throttles_to_lift(p.status))


def recorded_first(
    before: PartitionReassignmentStatus | None, d: Decision
) -> PartitionReassignmentStatus | None:
    """The status to write before ``d``'s actions, or None: what must be on record before
    the cluster is touched, because the cluster cannot tell it back afterwards.

    - The acceptance (Pending, the originals), when the pass that accepts the resource also
      starts its first steps. On Kafka the status is the only record that a step in flight
      is this resource's (Kafka does not say who submitted a reassignment), and the originals
      cannot be read back once a step is in flight (Kafka lists its target first, then the
      replicas leaving). An operator killed after submitting the first batch and before
      writing the status left a resource that the next pass accepted again, from the cluster
      mid-step: its own steps taken for someone else's and originals in the wrong order.
      Written first, the acceptance lets that pass adopt the steps as it does any batch
      submitted before a crash.
    - The brokers about to be throttled, added to ``throttledBrokers``: the end lifts the
      throttle from the brokers listed there, and Kafka keeps a throttle until it is lifted.
      An operator killed between setting a throttle and writing its status left a broker
      throttled for good when the step had ended before the next operator looked.
    """
    accepting = (
        (before is None or before.phase is None)
        and d.status.original is not None
        and any(isinstance(a, WritePartition) and a.view.adding for a in d.actions)
    )
    had = set(before.throttled_brokers) if before is not None else set()
    throttling = {a.broker for a in d.actions if isinstance(a, Throttle)} - had
    if not accepting and not throttling:
        return None
    update: dict[str, Any] = {}
    if accepting:
        update |= {
            "phase": Phase.PENDING,
            "observed_generation": d.status.observed_generation,
            "start_time": d.status.start_time,
            "original": d.status.original,
        }
    if throttling:
        update["throttled_brokers"] = sorted(had | throttling)
    return (before or PartitionReassignmentStatus()).model_copy(update=update)


def _cluster_unusable(p: _Pass, phase: Phase | None) -> Decision:
    """The cluster is missing or cannot be worked on now: nothing is done, the Progressing
    condition says why, and the resource stays active so that it is looked at again."""
    reason, msg = p.obs.cluster_problem or (
        "ClusterNotFound",
        f"BrokerCluster {p.obs.pr.spec.cluster_name} not found",
    )
    p.status = p.status.model_copy(update={"conditions": _conditions(p, phase, reason, msg)})
    return Decision(p.status, (), (), True)


def _accept(p: _Pass) -> Decision:
    """The first pass: every partition checked against the cluster; the originals recorded."""
    obs = p.obs
    if obs.cluster_size is None:
        return _cluster_unusable(p, None)
    _, errors = goals(obs)
    if errors:
        phase = transition(PHASE_TRANSITIONS, None, Phase.FAILED)
        msg = f"{len(errors)} partition(s) refused: " + "; ".join(errors[:20])
        if len(errors) > 20:
            msg += f"; and {len(errors) - 20} more"
        p.event("Warning", "InvalidSpec", msg)
        p.status = p.status.model_copy(
            update={
                "phase": phase,
                "observed_generation": p.gen,
                "conditions": _conditions(p, phase, "InvalidSpec", msg),
                "completion_time": iso(obs.now),
            }
        )
        return Decision(p.status, tuple(p.events), (), False)
    phase = transition(PHASE_TRANSITIONS, None, Phase.PENDING)
    p.event("Normal", "Accepted", f"{len(obs.pr.spec.partitions)} partitions to reassign")
    p.status = p.status.model_copy(
        update={
            "phase": phase,
            "observed_generation": p.gen,
            "start_time": iso(obs.now),
            "original": originals(obs),
        }
    )
    return _run(p, phase)


def _run(p: _Pass, phase: Phase) -> Decision:
    spec = p.obs.pr.spec
    # A rollback asked while a cancel undoes steps waits for the cancel to end (Cancelling
    # has no edge to RollingBack): it starts from Cancelled, on the next pass.
    rolling = (spec.rollback and phase != Phase.CANCELLING) or phase == Phase.ROLLING_BACK
    cancelling = not rolling and (spec.cancel or phase == Phase.CANCELLING)
    original = original_goals(p.status, p.obs)
    targets = goals_for_run(p.obs)
    if rolling:
        goal_of = original
    elif cancelling:
        goal_of = cancel_goals(p.obs, targets, original)
    else:
        goal_of = targets
    if phase == Phase.ROLLING_BACK:
        last_goal = original
    elif phase == Phase.CANCELLING:
        last_goal = cancel_goals(p.obs, targets, original)
    else:
        last_goal = targets
    prev = _previous(p.status)
    # 1. every partition from its state of record
    for key in sorted(original):
        before = _prior_state(p, key, prev, _view(p.obs, key), last_goal.get(key))
        _follow(p, key, before, goal_of.get(key), prev, cancelling=cancelling)
    in_flight = sorted(k for k, s in p.states.items() if s in IN_FLIGHT)
    # 2. a new batch, once the last one ended and nothing was written in this pass (but the
    # elections that end its steps)
    started = False
    stopping = phase in (Phase.SUCCEEDED, Phase.CANCELLED) and not rolling
    # A cancel walks partitions back even while paused: pause holds a reassignment's way
    # forward, and a cancel that waited for it would never end.
    going = (not spec.pause or cancelling) and not stopping
    settled = not p.wrote
    if going and _ended_by_elections(p, in_flight, goal_of):
        for key in in_flight:
            _move(p, key, p.states[key], PState.PENDING)
            p.detail.pop(key, None)
        in_flight, settled = [], True
    if not in_flight and settled and p.status.current_batch:
        done = p.status.current_batch
        p.event("Normal", "BatchFinished", f"batch {p.status.batch}: {len(done)} partitions done")
        p.status = p.status.model_copy(update={"current_batch": []})
    if not in_flight and settled and going:
        started = _next_batch(p, goal_of)
    elif in_flight and not _recorded(p, in_flight):
        _adopt_batch(p, in_flight)  # a crash after writing a batch, before recording it
    # 3. the record's dirs where the brokers hold the replicas elsewhere
    _record_dirs(p)
    # 4. throttles on the replicas in flight
    _throttle(p, active=True)
    # 5. the phase
    new_phase = _next_phase(p, phase, started=started, rolling=rolling, cancelling=cancelling)
    return _finish(p, new_phase)


def cancel_goals(
    obs: Observed, targets: Mapping[TP, Goal], original: Mapping[TP, Goal]
) -> dict[TP, Goal]:
    """Where a cancel leads each partition: its target when the record is at it (the
    replicas in order, nothing in flight), else its original replicas, in order and with
    the dirs recorded at acceptance.

    KIP-435's steps pass through sets that are neither: a new preferred leader is added
    before anything is removed, so ``[0, 3, 2] -> [1, 2, 0]`` holds ``[1, 2, 0, 3]`` between
    two steps. A cancel that only undid the step in flight left such a set behind, four
    replicas of an RF 3 topic that the next reassignment of the partition refused. Kafka's
    own cancel (KIP-455) reverts a partition in flight to its original replicas; a partition
    moved in several steps is in flight until its last one ends, so it walks back as a
    rollback would (same planner, limits and throttle). Decided from the record on every
    pass, so an operator that takes over mid-cancel leads every partition where its
    predecessor did: one at its target stays there, any other is not at its target and
    keeps walking back."""
    out: dict[TP, Goal] = {}
    for key, back in original.items():
        pv = _view(obs, key)
        target = targets.get(key)
        kept = pv is not None and target is not None and _at(pv, target)
        out[key] = target if kept and target is not None else back
    return out


def _record_dirs(p: _Pass) -> None:
    """Make the state of record name the dir each settled replica is in, as its broker's
    describe-log-dirs shows it: folded into this pass' write of the partition when there is
    one (so one write says it all), else a :class:`RecordDirs` of its own.

    The record was written where a step named a dir and never again: a replica created with
    "any" had none, one moved in place to its named dir kept its old one, and a rollback or a
    cancel read its originals' dirs from that record and put replicas back in dirs they had
    never been in. A replica a step is adding is left until the step shrinks: its dir in the
    record is the one asked for, which a resend of the request needs until it exists. A
    partition another resource moves is that resource's to record."""
    for key, state in sorted(p.states.items()):
        if state == PState.GONE:
            continue
        tv = p.obs.topics.get(key[0])
        read = tv.partitions.get(key[1]) if tv is not None else None
        if tv is None or read is None or _held_by(p, read) is not None:
            continue
        view = _current(p, key)
        fixes = _misrecorded(p.obs, view)
        if not fixes:
            continue
        if key in p.wrote:
            fixed = replace(
                view,
                dirs=tuple(fixes.get(b, d) for b, d in zip(view.replicas, view.dirs, strict=True)),
            )
            p.actions = [
                WritePartition(a.topic_resource, fixed)
                if isinstance(a, WritePartition) and a.view.key == key
                else a
                for a in p.actions
            ]
            p.wrote[key] = fixed
        else:
            p.actions.append(RecordDirs(tv.resource, key[0], key[1], tuple(sorted(fixes.items()))))
            p.recording.add(key)


def _misrecorded(obs: Observed, view: PartView) -> dict[int, str]:
    """Per settled replica of ``view`` whose broker shows it in another dir than recorded:
    that dir's path."""
    out: dict[int, str] = {}
    for b, recorded in zip(view.replicas, view.dirs, strict=True):
        bd = obs.brokers.get(b)
        here = bd.locate(*view.key) if bd is not None and b not in view.adding else None
        if here is not None and recorded != here.path:
            out[b] = here.path
    return out


def _ended_by_elections(p: _Pass, in_flight: Sequence[TP], goal_of: Mapping[TP, Goal]) -> bool:
    """Every step in flight ended led by another replica than its first, this pass writes
    nothing but those replicas' elections, and each of these partitions has steps to go: the
    batch is over, and the next one starts in this pass, from the entries as written (led by
    their first replicas, as :func:`steps.plan_all` counts on). Waiting for a read that
    shows the new leaders cost a Kafka batch boundary one more pass (0.4 s each,
    bench/kafka_reassignment.py); the next step of such a partition goes out with its
    election, so Kafka elects it while the step's new replica catches up, and a new replica
    that started fetching from the old leader follows the new one.

    A partition at its goal is not ended so: the reassignment must not end (Succeeded,
    Cancelled...) on an election no read has shown yet; its election is confirmed, and
    asked again while a read lags, on the next passes, as before."""
    if not in_flight or set(in_flight) != p.elected or set(p.wrote) != p.elected:
        return False
    for key in in_flight:
        goal = goal_of.get(key)
        if goal is None or _at(p.wrote[key], goal):
            return False
    return True


def _view(obs: Observed, key: TP) -> PartView | None:
    tv = obs.topics.get(key[0])
    return tv.partitions.get(key[1]) if tv is not None else None


def _held_by(p: _Pass, pv: PartView) -> str | None:
    """Another resource moving this partition (its kind and name), None when nobody else
    does: a step of another PartitionReassignment (the record's ``reassignedBy``), or a
    LogDirMove planned after this one was accepted, while the partition was still waiting
    for its batch. Its own step goes on; none is started while another resource holds it."""
    if pv.reassigned_by == p.name:
        return None
    return p.obs.claims.get(pv.key) or pv.reassigned_by


def _follow(
    p: _Pass,
    key: TP,
    before: PState,
    goal: Goal | None,
    prev: Mapping[TP, PartitionStatus],
    *,
    cancelling: bool,
) -> None:
    """Move one partition along from its state of record (at most one write per pass)."""
    tv = p.obs.topics.get(key[0])
    pv = tv.partitions.get(key[1]) if tv is not None else None
    if before == PState.GONE:
        p.states[key] = PState.GONE
        return
    if tv is None or pv is None or tv.deleting or goal is None:
        _move(p, key, before, PState.GONE)
        return
    mine = pv.reassigned_by == p.name
    other = _held_by(p, pv)
    after: PState
    if other is not None:
        after = PState.WAITING if before in (PState.PENDING, PState.WAITING) else before
        if after != PState.DONE:
            _detail(p, key, pv, goal, f"{other} is moving it", after)
    elif mine and pv.deleting:
        after = _finish_deletion(p, tv, pv, goal)
    elif mine and pv.in_step:
        synced = set(pv.adding) <= set(pv.isr)
        if cancelling and not synced and _revertible(pv):
            after = _revert_step(p, tv, pv, goal)
        elif synced:
            after = _shrink(p, tv, pv, goal)
        else:
            after = _catching_up(p, tv, pv, goal)
    elif (
        cancelling
        and before == PState.REMOVING
        and (restored := _after_revert(p, tv, pv, goal, prev.get(key))) is not None
    ):
        after = restored
    elif (cancelling or before in IN_FLIGHT) and _elect_preferred(p, pv, pv.replicas[0]):
        # A step that ended with another leader than its first replica (on Kafka the leader
        # stays when it is kept): the step ends once that replica leads, as a shrink elects
        # it, so the next batch starts from the leaders the planner counts on. A cancel ends
        # with every partition led by its first replica where that one can lead (one a
        # failover moved while the steps ran included): what the user stopped is left as
        # it was, preferred leaders and all.
        p.write(tv, _preferred(pv))
        p.actions.append(Tell(pv.topic, pv.partition, _live_of(p, pv)))
        msg = f"electing broker {pv.replicas[0]}, its first replica, as leader"
        _detail(p, key, pv, goal, msg, PState.REMOVING)
        after = PState.REMOVING
        if not cancelling:
            p.elected.add(key)
    elif _at(pv, goal):
        if _elect_preferred(p, pv, goal.replicas[0]):
            p.write(tv, _preferred(pv))
            p.actions.append(Tell(pv.topic, pv.partition, _live_of(p, pv)))
        elif mine:
            p.write(tv, replace(pv, reassigned_by=None, target=()))
        after = _placed(p, pv, goal)
    else:
        if mine and cancelling:
            p.write(tv, replace(pv, reassigned_by=None, target=()))
        # Waiting ones are looked at again when the next batch is collected.
        after = PState.WAITING if before == PState.WAITING else PState.PENDING
        if before == PState.WAITING and key in prev:
            p.detail[key] = prev[key]
    _move(p, key, before, after)


def _at(pv: PartView, goal: Goal) -> bool:
    """At its goal: the replicas in order, nothing in flight."""
    return pv.replicas == goal.replicas and not pv.adding and not pv.removing


def _elect_preferred(p: _Pass, pv: PartView, first: int) -> bool:
    """Led by another replica than ``first`` (the first of its replicas) while that one is in
    sync and live: the preferred leader is to be elected (on Kafka a step's end keeps the
    leader when it stays, and a cancel may leave another one leading)."""
    return pv.leader != first and first in pv.isr and first in p.obs.live


def _preferred(pv: PartView) -> PartView:
    """The entry with its first replica leading, under a new leader epoch; no step left."""
    return replace(
        pv,
        leader=pv.replicas[0],
        leader_epoch=pv.leader_epoch + 1,
        partition_epoch=pv.partition_epoch + 1,
        reassigned_by=None,
        target=(),
    )


def _live_of(p: _Pass, pv: PartView) -> frozenset[int]:
    return frozenset(b for b in pv.replicas if b in p.obs.live)


def _step_view(pv: PartView, step: steps.Step, goal: Goal, name: str) -> PartView:
    """The entry that starts ``step``: the current replicas in their order, then the new ones
    (so the order before the step is still known to a cancel)."""
    new = tuple(b for b in step.adding if b not in pv.replicas)
    dir_of = dict(zip(goal.replicas, goal.dirs, strict=True))
    return replace(
        pv,
        replicas=pv.replicas + new,
        dirs=pv.dirs + tuple(dir_of.get(b) for b in new),
        adding=new,
        removing=tuple(step.removing),
        target=tuple(step.replicas),
        reassigned_by=name,
        partition_epoch=pv.partition_epoch + 1,
    )


def shrunk(pv: PartView) -> PartView:
    """The entry once every new replica is in sync: the step's target, the dropped replicas
    out of the ISR and fenced by a new leader epoch, the target's first replica leading when
    it is in sync (KIP-435 elects the new preferred leader as early as it can), else the
    current leader if it stays, else the first in-sync replica of the target."""
    target = pv.target or tuple(b for b in pv.replicas if b not in pv.removing)
    isr = tuple(b for b in pv.isr if b in target)
    if target[0] in isr:
        leader = target[0]
    elif pv.leader in isr:
        leader = pv.leader
    else:
        leader = next((b for b in target if b in isr), -1)
    return replace(
        pv,
        replicas=target,
        dirs=tuple(pv.dir_of(b) for b in target),
        isr=isr or pv.isr,
        leader=leader,
        leader_epoch=pv.leader_epoch + 1,
        partition_epoch=pv.partition_epoch + 1,
        adding=(),
        removing=tuple(b for b in pv.removing if b not in target),
        target=(),
    )


def _tell_shrunk(p: _Pass, pv: PartView, out: PartView) -> None:
    live = p.obs.live
    p.actions.append(Tell(pv.topic, pv.partition, frozenset(b for b in out.replicas if b in live)))
    for b in out.removing:
        if b in live:
            p.actions.append(Delete(b, pv.topic, pv.partition))


def _shrink(p: _Pass, tv: TopicView, pv: PartView, goal: Goal) -> PState:
    out = shrunk(pv)
    if not out.removing and _at(out, goal):
        out = replace(out, reassigned_by=None)
    p.write(tv, out)
    _tell_shrunk(p, pv, out)
    if out.removing:
        msg = f"deleting the replicas on brokers {list(out.removing)}"
        _detail(p, pv.key, out, goal, msg, PState.REMOVING)
        return PState.REMOVING
    return _placed(p, out, goal) if _at(out, goal) else PState.PENDING


def _revert_step(p: _Pass, tv: TopicView, pv: PartView, goal: Goal) -> PState:
    """spec.cancel: a step whose new replicas are not all in sync goes back to where it
    started (order and leader as they were); the new replicas are deleted.

    The leader stays unless it is one of the new replicas: the cluster controller elects
    among the in-sync replicas, new ones included, so a caught-up new replica may lead when
    the old leader died mid-step. Then the first original replica in sync leads (the
    original preferred leader when it is), as :func:`reassignment_steps.cancel_step` says."""
    back = _order_before_step(p, pv)
    isr = tuple(b for b in pv.isr if b in back)
    leader = pv.leader if pv.leader in isr else next((b for b in back if b in isr), NO_LEADER)
    out = replace(
        pv,
        replicas=back,
        dirs=tuple(pv.dir_of(b) for b in back),
        isr=isr,
        leader=leader,
        leader_epoch=pv.leader_epoch + 1,
        partition_epoch=pv.partition_epoch + 1,
        adding=(),
        removing=pv.adding,
        target=(),
    )
    p.write(tv, out)
    _tell_shrunk(p, pv, out)
    msg = f"cancelled: deleting the new replicas on brokers {list(out.removing)}"
    _detail(p, pv.key, out, goal, msg, PState.REMOVING)
    return PState.REMOVING


def _order_before_step(p: _Pass, pv: PartView) -> tuple[int, ...]:
    """The replicas a cancelled step goes back to, in their order before it: the batch
    entry's, recorded when the step started. The entry in flight does not always keep that
    order: on Kafka it is the step's target first, then the replicas leaving, so ``[2, 1]``
    stepping to ``[1, 3]`` reads ``[1, 3, 2]``, and the replicas without the new one
    (``[1, 2]``, what Kafka's revert leaves) are not the order to restore. Without an entry
    (a batch adopted after a crash) the replicas without the new ones are all there is."""
    left = tuple(b for b in pv.replicas if b not in pv.adding)
    for e in p.status.current_batch:
        if (e.topic, e.partition) == pv.key and sorted(e.current_brokers) == sorted(left):
            return tuple(e.current_brokers)
    return left


def _after_revert(
    p: _Pass, tv: TopicView, pv: PartView, goal: Goal, last: PartitionStatus | None
) -> PState | None:
    """A partition the last pass of a cancel left Removing, with nothing of its own in flight:
    once its replicas are the ones recorded (``last.replicas``), their order and the preferred
    leader are put back where they differ, one write a pass until the record shows both
    (Removing meanwhile, so the cancel does not end before). On Kafka the controller undoes a
    cancelled step by itself and may leave the replicas in another order (issue 22); the
    leader it keeps is not always the first (:func:`_follow` elects the first replica of
    every partition a cancel leaves, this one included). A read that still lists replicas the revert
    drops (Metadata from a broker's cache lags the controller) waits, up to
    :data:`REVERT_SHOWN_WITHIN_S` (a step Kafka had ended just before the cancel keeps them:
    the partition then goes on from where it is, as a kept step), and so does a first
    replica that is live but out of the ISR (it leads again once it is back; a dead one is
    not waited for). None when there is nothing to restore: the partition goes on as any
    other (a replica set someone else changed since is not ours to reorder)."""
    if last is None or last.state != PState.REMOVING or not last.replicas or pv.in_step:
        return None
    if pv.reassigned_by == p.name and pv.deleting:
        return None  # our brokers: the dropped replicas are still being deleted
    back = tuple(last.replicas)
    if set(pv.replicas) != set(back):
        waited = p.obs.now - parse_iso(last.since, p.obs.now) if last.since else 0.0
        if not set(back) < set(pv.replicas) or waited > REVERT_SHOWN_WITHIN_S:
            return None
        msg = f"cancelled: waiting for brokers {sorted(set(pv.replicas) - set(back))} to leave"
        _detail(p, pv.key, replace(pv, replicas=back), goal, msg, PState.REMOVING)
        return PState.REMOVING
    first = back[0]
    if pv.replicas != back:
        lead = first in pv.isr and first in p.obs.live
        out = replace(
            pv,
            replicas=back,
            dirs=tuple(pv.dir_of(b) for b in back),
            leader=first if lead else pv.leader,
            reassigned_by=None,
            target=(),
        )
        p.write(tv, out)
        p.actions.append(Tell(pv.topic, pv.partition, _live_of(p, out)))
        msg = f"cancelled: putting the replicas back in their order {list(back)}"
        _detail(p, pv.key, out, goal, msg, PState.REMOVING)
        return PState.REMOVING
    if pv.leader != first and first in p.obs.live and first not in pv.isr:
        msg = f"cancelled: waiting for broker {first} to rejoin the ISR to lead again"
        _detail(p, pv.key, pv, goal, msg, PState.REMOVING)
        return PState.REMOVING
    return None  # the preferred leader, if it is not leading, is elected as for any partition


def _revertible(pv: PartView) -> bool:
    """Whether undoing the step leaves an in-sync replica: when only new replicas are in
    sync (the originals lagging or dead), they hold the only complete copies, so the step
    finishes instead (and is kept, as a step whose new replicas are in sync is)."""
    return any(b in pv.isr for b in pv.replicas if b not in pv.adding)


def _catching_up(p: _Pass, tv: TopicView, pv: PartView, goal: Goal) -> PState:
    obs = p.obs
    down = [b for b in pv.adding if b not in obs.live]
    for b in pv.adding:
        bd = obs.brokers.get(b)
        if b not in obs.live or b in pv.isr:
            continue
        # Told on every pass until in sync: a broker that restarted (or an operator that died
        # between writing and telling) lost it, and the cluster controller's probe leaves
        # adding replicas to us. LeaderAndIsr is idempotent on the broker.
        if bd is not None and bd.locate(*pv.key) is None:
            d = pv.dir_of(b)
            if d and not d.startswith("/"):
                found = bd.find(d)
                d = found.path if found is not None else None
            if d:
                p.actions.append(PreferDir(b, pv.topic, pv.partition, d))
        p.actions.append(Tell(pv.topic, pv.partition, frozenset({b}), frozenset({b})))
    msg = (
        f"waiting for brokers {down} (not live) to catch up"
        if down
        else f"new replicas on brokers {[b for b in pv.adding if b not in pv.isr]} catching up"
    )
    _detail(p, pv.key, pv, goal, msg, PState.ADDING)
    return PState.ADDING


def _finish_deletion(p: _Pass, tv: TopicView, pv: PartView, goal: Goal) -> PState:
    obs = p.obs
    left = []
    for b in pv.removing:
        if b not in obs.live and obs.liveness_known:
            # Down: its copy stays on its disk and the step goes on. It is a stray, recorded
            # in the status; the cluster controller deletes it when the broker returns (as
            # Kafka's brokers delete the replicas the metadata does not place on them).
            p.event(
                "Warning",
                "ReplicaLeftOnDeadBroker",
                f"{pv.topic}-{pv.partition}: broker {b} is down; its dropped replica is "
                "deleted when it returns",
            )
            p.status = p.status.with_stray(b, pv.topic, pv.partition, iso(obs.now))
            continue
        bd = obs.brokers.get(b)
        if bd is None or bd.locate(*pv.key) is not None or bd.has_future(pv.key):
            left.append(b)
    if left:
        for b in left:
            p.actions.append(Delete(b, pv.topic, pv.partition))
        _detail(p, pv.key, pv, goal, f"deleting the replicas on brokers {left}", PState.REMOVING)
        return PState.REMOVING
    done = _at(replace(pv, removing=()), goal)
    p.write(tv, replace(pv, removing=(), reassigned_by=None if done else pv.reassigned_by))
    return _placed(p, pv, goal) if done else PState.PENDING


def _placed(p: _Pass, pv: PartView, goal: Goal) -> PState:
    """Done when describe-log-dirs of every replica with a named dir shows it in that dir,
    with no future copy left; else Placing, with a KIP-113 move to the named dir for each one
    that is not (a replica created before its dir was known, e.g. by a probe after an operator
    crash, or one that stays on its broker but is named a new dir). Asked again on every
    pass until the broker shows it there.

    Placement is confirmed, never assumed: a broker that did not answer describe-log-dirs
    keeps the partition Placing, saying so, and gets the move when it answers again. Counted
    as placed, a broker down at the moment its partition finished left a Succeeded
    reassignment with that replica outside its named dir: the move had never reached it."""
    wrong: list[int] = []
    silent: list[int] = []
    for b, d in zip(goal.replicas, goal.dirs, strict=True):
        if not d:
            continue
        bd = p.obs.brokers.get(b)
        if bd is None or not d.startswith("/"):
            silent.append(b)  # a name not resolved to a path: that broker was not described
            continue
        here = bd.locate(*pv.key)
        if here is None or here.path != d or bd.has_future(pv.key):
            wrong.append(b)
            if (here is None or here.path != d) and not bd.has_future(pv.key):
                p.actions.append(PreferDir(b, pv.topic, pv.partition, d))
    if not wrong and not silent:
        return PState.DONE
    why = [f"moving to the named dirs on brokers {wrong}"] if wrong else []
    if silent:
        why.append(f"brokers {silent} did not answer describe-log-dirs")
    _detail(p, pv.key, pv, goal, "; ".join(why), PState.PLACING)
    return PState.PLACING


def _detail(p: _Pass, key: TP, pv: PartView, goal: Goal, message: str, state: PState) -> None:
    """A partition in flight or in trouble, listed in the status (bounded by MAX_DETAIL)."""
    prev = _previous(p.status).get(key)
    moved = bytes_moved_now(p.obs.brokers, pv)
    to_move = partition_size(p.obs.brokers, pv) * len(pv.adding)
    since = iso(p.obs.now)
    if prev is not None and prev.state == state and prev.bytes_moved >= moved and prev.since:
        since = prev.since  # no byte progress since then: Stalled counts from here
    p.detail[key] = PartitionStatus(
        topic=key[0],
        partition=key[1],
        state=state,
        replicas=list(pv.replicas),
        adding_replicas=list(pv.adding),
        removing_replicas=list(pv.removing),
        target_replicas=list(goal.replicas),
        bytes_to_move=to_move,
        bytes_moved=min(moved, to_move) if to_move else moved,
        message=message,
        since=since,
    )


# -- batches ------------------------------------------------------------------------------


def limits_of(pr: PartitionReassignment) -> steps.Limits:
    """The spec's limits as the planner takes them (read on every pass: a change applies
    from the next batch on, as KIP-435 says)."""
    s = pr.spec
    return steps.Limits(
        replica_movements=s.max_concurrent_replica_movements,
        partition_movements=s.max_concurrent_partition_movements,
        leader_movements=s.max_concurrent_leader_movements,
        moves_per_broker=s.max_concurrent_moves_per_broker,
    )


def _next_batch(p: _Pass, goal_of: Mapping[TP, Goal]) -> bool:
    """KIP-435's batch: the next step of every pending partition, leader movements first, up
    to the limits; each step written (the state of record) and told to its brokers."""
    obs = p.obs
    limits = limits_of(obs.pr)
    candidates: list[steps.PlannedStep] = []
    for key, state in sorted(p.states.items()):
        if state not in (PState.PENDING, PState.WAITING):
            continue
        tv = obs.topics[key[0]]
        pv = _current(p, key)
        if _held_by(p, pv) is not None:
            continue  # Waiting, and says for whom (_follow)
        goal = goal_of[key]
        res = steps.next_step(
            pv.replicas,
            goal.replicas,
            min_isr=tv.min_isr,
            replica_movements=limits.replica_movements,
            live=obs.live,
            leader=pv.leader,
            isr=pv.isr,
        )
        if isinstance(res, steps.Waiting):
            _move(p, key, state, PState.WAITING)
            _detail(p, key, pv, goal, res.message, PState.WAITING)
        elif res is not None:
            _move(p, key, state, PState.PENDING)
            p.detail.pop(key, None)
            candidates.append(steps.PlannedStep(key[0], key[1], res))
    if not candidates:
        return False
    batch = steps.collect_batch(
        candidates, limits, obs.busy, partitions_in_flight=obs.others_in_flight
    )
    entries = [_start_step(p, st, goal_of[(st.topic, st.partition)]) for st in batch.steps]
    if not entries:
        return False
    number = p.status.batch + 1
    p.status = p.status.model_copy(update={"batch": number, "current_batch": entries})
    p.event(
        "Normal",
        "BatchStarted",
        f"batch {number}: "
        + ", ".join(
            f"{e.topic}-{e.partition} {e.current_brokers}->{e.target_brokers}" for e in entries
        ),
    )
    return True


def _current(p: _Pass, key: TP) -> PartView:
    """The partition's entry as this pass leaves it so far: written (an election that ended
    its step), else as read."""
    return p.wrote.get(key) or p.obs.topics[key[0]].partitions[key[1]]


def _start_step(p: _Pass, planned: steps.PlannedStep, goal: Goal) -> BatchEntry:
    obs = p.obs
    st = planned.step
    key = (planned.topic, planned.partition)
    tv = obs.topics[key[0]]
    pv = _current(p, key)
    entry = BatchEntry(
        topic=key[0],
        partition=key[1],
        current_brokers=list(pv.replicas),
        target_brokers=list(st.replicas),
    )
    if not st.adding:
        # Only drops (a smaller replication factor): shrink at once.
        p.states[key] = PState.PENDING
        out = shrunk(
            replace(
                pv, target=tuple(st.replicas), removing=tuple(st.removing), reassigned_by=p.name
            )
        )
        p.write(tv, out)
        _tell_shrunk(p, pv, out)
        msg = f"deleting the replicas on brokers {list(out.removing)}"
        _detail(p, key, out, goal, msg, PState.REMOVING)
        _move(p, key, PState.PENDING, PState.REMOVING)
        return entry
    out = _step_view(pv, st, goal, p.name)
    p.write(tv, out)
    for b in out.adding:
        d = out.dir_of(b)
        if d and d.startswith("/"):
            p.actions.append(PreferDir(b, pv.topic, pv.partition, d))
    live = frozenset(b for b in out.replicas if b in obs.live)
    p.actions.append(Tell(pv.topic, pv.partition, live, frozenset(out.adding)))
    msg = f"new replicas on brokers {list(out.adding)} catching up"
    _detail(p, key, out, goal, msg, PState.ADDING)
    _move(p, key, PState.PENDING, PState.ADDING)
    return entry


def _recorded(p: _Pass, in_flight: Sequence[TP]) -> bool:
    """Whether the status' current batch is the one in flight: every step in flight listed
    with the brokers it goes to. Names alone are not enough: a partition moving in several
    steps is in consecutive batches, so a batch written before a crash may name exactly the
    partitions of the batch recorded before it."""
    listed = {(e.topic, e.partition): e for e in p.status.current_batch}
    for key in in_flight:
        e = listed.get(key)
        pv = p.obs.topics[key[0]].partitions[key[1]]
        if e is None:
            return False
        if pv.deleting or not pv.in_step:
            # Shrunk (at the step's target), undone by a cancel (back where it started), or
            # ended with its first replica being elected.
            if list(pv.replicas) not in (e.target_brokers, e.current_brokers):
                return False
        elif list(pv.target) != e.target_brokers:
            return False
    return True


def _adopt_batch(p: _Pass, in_flight: Sequence[TP]) -> None:
    """Steps in flight that the status does not list (written by a pass that died before it
    wrote this status): they are the current batch."""
    entries = []
    for key in in_flight:
        pv = p.obs.topics[key[0]].partitions[key[1]]
        entries.append(
            BatchEntry(
                topic=key[0],
                partition=key[1],
                current_brokers=[b for b in pv.replicas if b not in pv.adding],
                target_brokers=list(pv.target or pv.replicas),
            )
        )
    number = p.status.batch + 1
    p.status = p.status.model_copy(update={"batch": number, "current_batch": entries})
    p.event("Normal", "BatchStarted", f"batch {number}: resumed with {len(entries)} partitions")


def _throttle(p: _Pass, *, active: bool) -> None:
    """The pass' throttles (``plan.reassignment_throttles``): on the steps catching up while
    ``active``, lifted from every broker that no longer needs them."""
    obs = p.obs
    adding = {
        key: (obs.topics[key[0]].partitions[key[1]], _current(p, key))
        for key, state in p.states.items()
        if active and state == PState.ADDING
    }
    plan = plan_throttles(
        obs.pr,
        adding,
        listed=p.status.throttled_brokers,
        seen=obs.throttles,
        live=obs.live,
        cluster_size=obs.cluster_size,
    )
    p.actions.extend(plan.actions)
    p.status = p.status.model_copy(update={"throttled_brokers": plan.throttled_brokers})


# -- the phase and the summary ------------------------------------------------------------


def _next_phase(p: _Pass, phase: Phase, *, started: bool, rolling: bool, cancelling: bool) -> Phase:
    spec = p.obs.pr.spec
    # A pass that writes (a partition's entry, or its dirs) ends nothing: the record it
    # writes is confirmed by the next pass' read (a dir record the API server refused on a
    # conflict ended a reassignment with the record naming the wrong dir).
    in_flight = any(s in IN_FLIGHT for s in p.states.values()) or bool(p.wrote)
    settled = (
        not in_flight
        and not p.recording
        and all(s in (PState.DONE, PState.GONE) for s in p.states.values())
    )
    if rolling:
        new = phase
        if phase == Phase.PENDING:
            # Pending has no edge to RollingBack: it is left through Running when a step is
            # in flight (adopted after a crash), else through Cancelled (nothing moved: the
            # rollback is a cancel, and the walk back ends at once).
            via = Phase.RUNNING if in_flight or started else Phase.CANCELLED
            phase = transition(PHASE_TRANSITIONS, phase, via)
        if phase != Phase.ROLLING_BACK:
            new = transition(PHASE_TRANSITIONS, phase, Phase.ROLLING_BACK)
            p.event(
                "Normal", "RollingBack", "walking every partition back to its original replicas"
            )
        if settled:
            new = transition(PHASE_TRANSITIONS, new, Phase.ROLLED_BACK)
            p.event("Normal", "RolledBack", "every partition is back at its original replicas")
        return new
    if cancelling:
        if phase == Phase.CANCELLING and not settled:
            return phase
        new = Phase.CANCELLED if settled else Phase.CANCELLING
        if phase == Phase.PENDING and not settled:
            phase = transition(PHASE_TRANSITIONS, phase, Phase.RUNNING)
        new = transition(PHASE_TRANSITIONS, phase, new)
        if new == Phase.CANCELLED:
            p.event(
                "Normal",
                "Cancelled",
                "cancelled: partitions at their target kept, the others back at their "
                "original replicas",
            )
        return new
    if settled and phase in (Phase.PENDING, Phase.RUNNING, Phase.PAUSED):
        if phase == Phase.PAUSED:
            phase = transition(PHASE_TRANSITIONS, phase, Phase.RUNNING)
        p.event("Normal", "Succeeded", "every partition is at its target")
        return transition(PHASE_TRANSITIONS, phase, Phase.SUCCEEDED)
    if spec.pause and phase in (Phase.PENDING, Phase.RUNNING):
        return transition(PHASE_TRANSITIONS, phase, Phase.PAUSED)
    if not spec.pause and phase == Phase.PAUSED:
        return transition(PHASE_TRANSITIONS, phase, Phase.RUNNING)
    if phase == Phase.PENDING and (started or in_flight):
        return transition(PHASE_TRANSITIONS, phase, Phase.RUNNING)
    return phase


def _conditions(p: _Pass, phase: Phase | None, reason: str, message: str) -> list[Condition]:
    """Progressing, Succeeded, Failed, Cancelled, RolledBack and Paused for ``phase``."""
    c = [x.dump() for x in p.status.conditions]
    gen, now = p.gen, p.obs.now
    c = set_condition(c, "Progressing", phase in ACTIVE_PHASES, reason, message, gen, now=now)
    for ph, cond in (
        (Phase.SUCCEEDED, "Succeeded"),
        (Phase.FAILED, "Failed"),
        (Phase.CANCELLED, "Cancelled"),
        (Phase.ROLLED_BACK, "RolledBack"),
        (Phase.PAUSED, "Paused"),
    ):
        mine = phase == ph
        c = set_condition(
            c, cond, mine, reason if mine else "", message if mine else "", gen, now=now
        )
    return [Condition.model_validate(x) for x in c]


def _stalled(p: _Pass) -> str:
    """Partitions whose new replicas moved no byte for ``stallAfterSeconds`` (empty: none)."""
    after = p.obs.pr.spec.stall_after_seconds
    out = []
    for key, d in sorted(p.detail.items()):
        if d.state != PState.ADDING or not d.since:
            continue
        idle = p.obs.now - parse_iso(d.since, p.obs.now)
        if idle >= after:
            late = [b for b in d.adding_replicas]
            out.append(f"{key[0]}-{key[1]}: no progress for {int(idle)}s on brokers {late}")
    return "; ".join(out[:10])


def _finish(p: _Pass, phase: Phase) -> Decision:
    """Counts, bytes, rate, ETA and conditions; the status this pass writes."""
    obs = p.obs
    ended = phase in ENDED_PHASES
    if ended:
        _throttle(p, active=False)
    counts: dict[str, int] = {}
    for s in p.states.values():
        counts[s.value] = counts.get(s.value, 0) + 1
    moved, to_move = totals(obs.pr, p.status.original or [], obs.topics, obs.brokers)
    rate, eta = rate_and_eta(p.status.start_time, obs.now, moved, to_move)
    total = sum(counts.values())
    done = counts.get(PState.DONE.value, 0) + counts.get(PState.GONE.value, 0)
    reason, message = _summary(p, phase, counts)
    update: dict[str, Any] = {
        "phase": phase,
        "observed_generation": p.gen,
        "counts": counts,
        "partitions": _listed(p.detail),
        "bytes_to_move": to_move,
        "bytes_moved": moved,
        "progress_percent": progress_percent(moved=moved, to_move=to_move, done=done, total=total),
        "rate_bytes_per_second": rate,
        "eta_seconds": eta,
        "conditions": _conditions(p, phase, reason, message),
    }
    if ended and p.status.phase != phase:
        update["completion_time"] = iso(obs.now)
        update["current_batch"] = []
    p.status = p.status.model_copy(update=update)
    why = _stalled(p)
    c = set_condition(
        [x.dump() for x in p.status.conditions],
        "Stalled",
        bool(why),
        "NoProgress" if why else "",
        why,
        p.gen,
        now=obs.now,
    )
    p.status = p.status.model_copy(update={"conditions": [Condition.model_validate(x) for x in c]})
    # Cancelled while a rollback waited for the cancel to end: the rollback is next.
    rollback_next = obs.pr.spec.rollback and phase in (Phase.SUCCEEDED, Phase.CANCELLED)
    following = not ended or rollback_next or throttles_to_lift(p.status)
    return Decision(p.status, tuple(p.events), tuple(p.actions), following)


_LISTING_ORDER = {PState.ADDING: 0, PState.REMOVING: 0, PState.PLACING: 1, PState.WAITING: 2}


def _listed(detail: Mapping[TP, PartitionStatus]) -> list[PartitionStatus]:
    """The detail the status keeps (MAX_DETAIL at most), in key order: steps in flight
    first, then dir moves, then waiting ones. The next pass reads its partitions' states and
    the time their bytes last moved (Stalled) from here, so a step in flight must not be cut
    for the sake of partitions that are only waiting (those are counted either way)."""
    kept = sorted(detail, key=lambda k: (_LISTING_ORDER.get(detail[k].state, 3), k))
    return [detail[k] for k in sorted(kept[:MAX_DETAIL])]


def _summary(p: _Pass, phase: Phase, counts: Mapping[str, int]) -> tuple[str, str]:
    parts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
    batch = f"batch {p.status.batch}" if p.status.batch else "no batch yet"
    others = p.obs.others_in_flight
    also = f"; {others} partitions moved by other reassignments count against the limits"
    return phase.value, f"{parts or 'nothing to do'}; {batch}{also if others else ''}"
