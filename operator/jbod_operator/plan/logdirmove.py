"""LogDirMove decisions, pure: every transition of a LogDirMove and of its replicas.

The handler (``handlers/logdirmoves.py``) observes the brokers and the API into an
:class:`Observed`, calls :func:`advance`, carries out the :class:`Decision`'s actions, hands
the answers to the replicas it was told to start to :func:`settle`, and writes the status the
result holds, once. Nothing here does I/O, so each transition is a unit test.

Every state change goes through :func:`transition`, which refuses an edge that is not in
:data:`REPLICA_TRANSITIONS` / :data:`PHASE_TRANSITIONS` (the enums in
``models.log_dir_move`` draw the same tables in their docstrings; a test keeps them equal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jbod_broker import wire

from ..models import Condition, LogDirMove, LogDirMoveSpec, LogDirMoveStatus
from ..models.log_dir_move import (
    ENDED_PHASES,
    ENDED_REPLICA_STATES,
    Drain,
    MovePhase,
    ReplicaMoveStatus,
    ReplicaState,
)
from .conditions import iso, parse_iso, set_condition
from .machine import IllegalTransitionError, transition
from .port_types import (
    BrokerDirs,
    CancelMoves,
    Cordon,
    RecordInTopic,
    ReplicaKey,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
)

Phase = MovePhase
State = ReplicaState

# -- the transition tables ----------------------------------------------------------------

REPLICA_TRANSITIONS: Mapping[tuple[State, State], str] = {
    (State.PENDING, State.MOVING): "the broker accepted alter-replica-log-dirs",
    (State.PENDING, State.SUCCEEDED): "the replica is already in its target dir",
    (State.PENDING, State.FAILED): "not on its broker after replicaWaitSeconds; broker refused; "
    "timeout",
    (State.PENDING, State.CANCELLED): "spec.cancel",
    (State.MOVING, State.SUCCEEDED): "describe-log-dirs shows it in its target dir, no future copy",
    (State.MOVING, State.FAILED): "the broker's move failed (dir offline, copy error); timeout",
    (State.MOVING, State.CANCELLED): "spec.cancel",
}
"""Every allowed change of a replica's state, with what causes it."""

PHASE_TRANSITIONS: Mapping[tuple[Phase | None, Phase], str] = {
    (None, Phase.PENDING): "planned, or waiting for its BrokerCluster",
    (None, Phase.FAILED): "the spec can never work, or an older LogDirMove moves a replica",
    (Phase.PENDING, Phase.MOVING): "a replica started moving or finished",
    (Phase.PENDING, Phase.SUCCEEDED): "every replica verified in its target dir (a drain: "
    "dir empty)",
    (Phase.PENDING, Phase.FAILED): "every replica ended and one failed; timeout",
    (Phase.PENDING, Phase.CANCELLED): "spec.cancel",
    (Phase.MOVING, Phase.PENDING): "the moved replicas failed and the rest wait; BrokerCluster "
    "gone",
    (Phase.MOVING, Phase.SUCCEEDED): "every replica verified in its target dir (a drain: "
    "dir empty)",
    (Phase.MOVING, Phase.FAILED): "every replica ended and one failed; timeout; drain not empty",
    (Phase.MOVING, Phase.CANCELLED): "spec.cancel",
}
"""Every allowed change of a LogDirMove's phase (``None``: not yet planned)."""


# -- observations -------------------------------------------------------------------------


class MoveSpecError(ValueError):
    """A LogDirMove that can never work as written; the message names the broker and dir."""

    reason = "InvalidSpec"


class NoRoomError(MoveSpecError):
    """A target dir cannot hold what would move into it (storage.room's rule)."""

    reason = "InsufficientSpace"


def key_of(e: ReplicaMoveStatus) -> ReplicaKey:
    return (e.broker_id, e.topic, e.partition)


@dataclass(frozen=True)
class Observed:
    """What one pass saw, read before anything is decided."""

    move: LogDirMove
    now: float
    """Wall clock, seconds since the epoch."""
    cluster_size: int | None
    """Brokers of the BrokerCluster; None when it does not exist."""
    brokers: Mapping[int, BrokerDirs | None] = field(default_factory=dict)
    """describe-log-dirs of every broker; None for one that did not answer."""
    moves: Mapping[ReplicaKey, wire.ReplicaLogDirInfo] = field(default_factory=dict)
    """describe-replica-log-dirs of the replicas in state Moving, where the broker answered."""
    others: Sequence[LogDirMove] = ()
    """The cluster's other LogDirMoves; read only while this one is not planned yet."""
    reassigning: Mapping[tuple[str, int], str] = field(default_factory=dict)
    """Partitions a PartitionReassignment is moving (the Topics' ``reassignedBy``), with its
    name; read only while this one is not planned yet."""
    cluster_problem: tuple[str, str] | None = None
    """(reason, message) when the named cluster cannot be worked on now (``cluster_size`` is
    then None): two clusters of that name, Kafka unreachable, its credentials missing."""


# -- decisions ----------------------------------------------------------------------------


Action = Cordon | SetThrottle | CancelMoves | Resend | Start | RecordInTopic


Event = tuple[str, str, str]
"""(type, reason, message) of a Kubernetes Event."""


@dataclass(frozen=True)
class Decision:
    status: LogDirMoveStatus
    actions: tuple[Action, ...] = ()
    """In the order they are to be carried out."""
    events: tuple[Event, ...] = ()
    active: bool = False
    """The move still runs: keep following it."""
    settled: bool = True
    """False while the answers to its Start actions must still go through :func:`settle`."""
    rates: Mapping[ReplicaKey, float] = field(default_factory=dict)
    """Copy rate of each replica seen moving (bytes/s), for the totals."""

    @property
    def starts(self) -> tuple[Start, ...]:
        return tuple(a for a in self.actions if isinstance(a, Start))


# -- planning -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaTarget:
    broker: int
    topic: str
    partition: int
    target_ref: str


def expand_drain(bd: BrokerDirs, source_ref: str) -> list[ReplicaTarget]:
    """Everything on ``source_ref`` to the broker's other live, uncordoned dirs, balancing by
    free bytes: the largest replica first, each to the dir with the most room left."""
    src = bd.find(source_ref)
    if src is None:
        raise MoveSpecError(f"broker {bd.broker} has no log dir {source_ref!r}")
    if not src.live:
        raise MoveSpecError(
            f"broker {bd.broker}: log dir {src.path} is offline; it cannot be read to drain it"
        )
    others = [d for d in bd.dirs if d.path != src.path and d.live and not d.cordoned]
    if src.replicas and not others:
        raise MoveSpecError(
            f"broker {bd.broker} has no other live, uncordoned log dir to take "
            f"the {len(src.replicas)} replicas of {src.path}"
        )
    room = {d.path: d.usable_bytes for d in others}
    out = []
    for (topic, part), size in sorted(src.replicas.items(), key=lambda kv: (-kv[1], kv[0])):
        best = max(others, key=lambda d: (room[d.path], -others.index(d)))
        room[best.path] -= size
        out.append(ReplicaTarget(bd.broker, topic, part, best.path))
    return out


def resolve(
    spec: LogDirMoveSpec, brokers: Mapping[int, BrokerDirs | None], broker_count: int
) -> list[ReplicaMoveStatus]:
    """The per-replica plan of a LogDirMove, or MoveSpecError naming what is wrong."""
    targets: list[ReplicaTarget] = []
    if spec.drain is not None:
        targets = expand_drain(
            _answering(spec.drain.broker_id, broker_count, brokers), spec.drain.log_dir
        )
    for m in spec.moves or []:
        _answering(m.broker_id, broker_count, brokers)
        targets.append(ReplicaTarget(m.broker_id, m.topic, m.partition, m.log_dir))
    out = []
    for t in targets:
        bd = _answering(t.broker, broker_count, brokers)
        dest = bd.find(t.target_ref)
        if dest is None:
            raise MoveSpecError(
                f"broker {t.broker} has no log dir {t.target_ref!r} "
                f"(it has: {', '.join(d.name for d in bd.dirs)})"
            )
        if not dest.live:
            raise MoveSpecError(f"broker {t.broker}: target log dir {dest.path} is offline")
        src = bd.locate(t.topic, t.partition)
        if dest.cordoned and (src is None or src.path != dest.path):
            raise MoveSpecError(
                f"broker {t.broker}: target log dir {dest.path} is cordoned (drained or being "
                "drained): no replica may be placed on it"
            )
        out.append(
            ReplicaMoveStatus(
                broker_id=t.broker,
                topic=t.topic,
                partition=t.partition,
                source_log_dir=src.path if src else None,
                target_log_dir=dest.path,
                bytes_copied=0,
                bytes_total=src.replicas[(t.topic, t.partition)] if src else 0,
                offset_lag=0,
                state=State.PENDING,
            )
        )
    _check_room(out, brokers)
    return out


def _check_room(
    entries: Sequence[ReplicaMoveStatus], brokers: Mapping[int, BrokerDirs | None]
) -> None:
    """Every target dir must hold all that moves into it, before anything is sent."""
    need: dict[tuple[int, str], int] = {}
    for e in entries:
        if e.target_log_dir and e.source_log_dir != e.target_log_dir:
            key = (e.broker_id, e.target_log_dir)
            need[key] = need.get(key, 0) + e.bytes_total
    for (b, target), size in sorted(need.items()):
        bd = brokers.get(b)
        dest = bd.find(target) if bd else None
        if dest is None:
            continue
        verdict = dest.room_for(size)
        if not verdict.fits:
            raise NoRoomError(f"broker {b}: {verdict.reason}")


def _answering(b: int, count: int, brokers: Mapping[int, BrokerDirs | None]) -> BrokerDirs:
    if b >= count:
        raise MoveSpecError(f"broker {b} does not exist (the cluster has brokers 0-{count - 1})")
    bd = brokers.get(b)
    if bd is None:
        raise MoveSpecError(f"broker {b} does not answer; its log dirs cannot be checked")
    return bd


def conflicts(
    me: tuple[str, str], entries: Iterable[ReplicaMoveStatus], others: Sequence[LogDirMove]
) -> str | None:
    """The name of an older active LogDirMove that touches one of our replicas, if any.

    ``me`` is (creationTimestamp, name): the older one wins, a tie goes to the lower name.
    """
    mine = {key_of(e) for e in entries}
    for o in others:
        if (o.metadata.creation_timestamp or "", o.metadata.name) >= me:
            continue
        st = o.status or LogDirMoveStatus()
        if st.phase in ENDED_PHASES:
            continue
        theirs = {key_of(e) for e in st.replicas or []} or {
            (m.broker_id, m.topic, m.partition) for m in o.spec.moves or []
        }
        both = mine & theirs
        if both:
            b, t, p = sorted(both)[0]
            return f"{o.metadata.name} (it already moves {t}-{p} on broker {b})"
    return None


# -- progress -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Totals:
    copied: int
    total: int
    percent: int
    rate: int
    eta: int | None


def totals(entries: Sequence[ReplicaMoveStatus], rates: Mapping[ReplicaKey, float]) -> Totals:
    total = sum(e.bytes_total for e in entries)
    copied = sum(
        e.bytes_total
        if e.state == State.SUCCEEDED
        else 0
        if e.state in ENDED_REPLICA_STATES  # failed or cancelled: its copy was dropped
        else e.bytes_copied
        for e in entries
    )
    done = all(e.state in ENDED_REPLICA_STATES for e in entries)
    all_moved = bool(entries) and all(e.state == State.SUCCEEDED for e in entries)
    percent = 100 if all_moved else (int(100 * copied / total) if total else 0)
    rate = int(sum(rates.values()))
    eta = None if done or rate <= 0 else int((total - copied) / rate)
    return Totals(copied, total, min(percent, 100), rate, eta)


def next_to_start(entries: Sequence[ReplicaMoveStatus], per_broker: int) -> list[ReplicaMoveStatus]:
    """Pending replicas that fit under each broker's concurrency limit, in plan order."""
    running: dict[int, int] = {}
    for e in entries:
        if e.state == State.MOVING:
            running[e.broker_id] = running.get(e.broker_id, 0) + 1
    out = []
    for e in entries:
        if e.state != State.PENDING:
            continue
        if running.get(e.broker_id, 0) < per_broker:
            out.append(e)
            running[e.broker_id] = running.get(e.broker_id, 0) + 1
    return out


# -- the pass -----------------------------------------------------------------------------


def phase_conditions(
    conditions: Sequence[Condition],
    phase: Phase,
    reason: str,
    message: str,
    gen: int | None,
    *,
    now: float,
) -> list[Condition]:
    """Progressing, Succeeded, Failed and Cancelled for ``phase`` (each set, True or False)."""
    c = [x.dump() for x in conditions]
    c = set_condition(
        c, "Progressing", phase in (Phase.PENDING, Phase.MOVING), reason, message, gen, now=now
    )
    c = set_condition(c, "Succeeded", phase == Phase.SUCCEEDED, reason, message, gen, now=now)
    for final in (Phase.FAILED, Phase.CANCELLED):
        mine = phase == final
        c = set_condition(
            c, final.value, mine, reason if mine else "", message if mine else "", gen, now=now
        )
    return [Condition.model_validate(x) for x in c]


@dataclass
class _Pass:
    """The mutable state of one decision, private to this module; frozen into a Decision."""

    obs: Observed
    status: LogDirMoveStatus
    entries: list[ReplicaMoveStatus]
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    rates: dict[ReplicaKey, float] = field(default_factory=dict)

    @property
    def spec(self) -> LogDirMoveSpec:
        return self.obs.move.spec

    @property
    def gen(self) -> int | None:
        return self.obs.move.metadata.generation

    def set_state(self, i: int, new: State, **fields: Any) -> None:
        e = self.entries[i]
        self.entries[i] = e.model_copy(
            update={"state": transition(REPLICA_TRANSITIONS, e.state, new), **fields}
        )

    def set_phase(self, new: Phase, reason: str, message: str, *, event: str | None = None) -> None:
        """Move to ``new`` (checked against the table) with its four conditions."""
        phase = transition(PHASE_TRANSITIONS, self.status.phase, new)
        self.status = self.status.model_copy(
            update={
                "phase": phase,
                "conditions": phase_conditions(
                    self.status.conditions, phase, reason, message, self.gen, now=self.obs.now
                ),
            }
        )
        if event is not None:
            self.events.append((event, reason, message))

    def finish(self, new: Phase, reason: str, message: str) -> None:
        self.set_phase(new, reason, message, event="Warning" if new == Phase.FAILED else "Normal")
        if self.status.completion_time is None:
            self.status = self.status.model_copy(update={"completion_time": iso(self.obs.now)})

    def decision(self, *, active: bool = False, settled: bool = True) -> Decision:
        status = self.status.model_copy(update={"replicas": list(self.entries) or None})
        return Decision(
            status, tuple(self.actions), tuple(self.events), active, settled, dict(self.rates)
        )


def advance(obs: Observed) -> Decision:
    """Every transition a pass can decide from what it saw.

    The answers to the replicas it starts are not known yet: a Decision with ``settled``
    False goes through :func:`settle` once they are.
    """
    move = obs.move
    status = move.status or LogDirMoveStatus()
    p = _Pass(obs, status, list(status.replicas or []))
    if p.status.phase in ENDED_PHASES:
        if p.status.phase == Phase.SUCCEEDED and move.spec.drain is not None:
            # Keep the drained dir cordoned (brokers forget cordons when they restart) until
            # this LogDirMove is deleted: the dir is meant to be removed.
            p.actions.append(Cordon(move.spec.drain, True))
        return p.decision()
    if obs.cluster_size is None:
        reason, message = obs.cluster_problem or (
            "ClusterNotFound",
            f"BrokerCluster {move.metadata.namespace}/{move.spec.cluster_name} does not exist",
        )
        p.set_phase(Phase.PENDING, reason, message)
        return p.decision(active=True)
    if not p.entries and not _plan(p):
        return p.decision()
    if _stop(p):
        return p.decision()
    involved = sorted({e.broker_id for e in p.entries})
    throttle = move.spec.throttle_bytes_per_second or 0
    if throttle:
        # Kept up to date on every pass: brokers forget it when they restart.
        p.actions.append(SetThrottle(tuple(involved), throttle))
    _follow_moving(p)
    _start_pending(p)
    return p.decision(settled=False)


def _plan(p: _Pass) -> bool:
    """Plan once: the plan is the state of record from then on. False: the move failed."""
    obs, move = p.obs, p.obs.move
    assert obs.cluster_size is not None
    try:
        plan = resolve(move.spec, obs.brokers, obs.cluster_size)
    except MoveSpecError as err:
        p.finish(Phase.FAILED, err.reason, str(err))
        return False
    me = (move.metadata.creation_timestamp or "", move.metadata.name)
    clash = conflicts(me, plan, obs.others)
    if clash:
        p.finish(Phase.FAILED, "Conflict", f"refused: LogDirMove {clash}")
        return False
    busy = sorted({(e.topic, e.partition) for e in plan} & set(obs.reassigning))
    if busy:
        t, part = busy[0]
        p.finish(
            Phase.FAILED,
            "Conflict",
            f"refused: PartitionReassignment {obs.reassigning[(t, part)]} is moving {t}-{part}",
        )
        return False
    p.entries = plan
    p.status = p.status.model_copy(
        update={"start_time": iso(obs.now), "observed_generation": p.gen}
    )
    message = f"{len(plan)} replicas to move"
    uncordoned = _cannot_cordon(move.spec.drain, obs.brokers)
    if uncordoned:
        message += f"; {uncordoned}"
    p.set_phase(Phase.PENDING, "Planned", message, event="Normal")
    if move.spec.drain is not None:
        p.actions.append(Cordon(move.spec.drain, True))
    return True


def _elapsed(p: _Pass) -> float:
    # startTime is truncated to the second: count from the latest possible start.
    return p.obs.now - parse_iso(p.status.start_time, p.obs.now) - 1


def _stop(p: _Pass) -> bool:
    """spec.cancel and the timeout stop every move still running."""
    spec = p.spec
    if spec.cancel:
        new, reason, message = Phase.CANCELLED, "Cancelled", "cancelled by spec.cancel"
    elif _elapsed(p) > spec.timeout_seconds:
        new, reason, message = (
            Phase.FAILED,
            "Timeout",
            f"not finished after {spec.timeout_seconds} s",
        )
    else:
        return False
    running = tuple(key_of(e) for e in p.entries if e.state in (State.MOVING, State.PENDING))
    p.actions.append(CancelMoves(running))
    for i, e in enumerate(p.entries):
        if e.state not in ENDED_REPLICA_STATES:
            p.set_state(i, State(new.value), message=message)
    p.actions.append(SetThrottle(tuple(sorted({e.broker_id for e in p.entries})), 0))
    if spec.drain is not None:
        p.actions.append(Cordon(spec.drain, False))
    p.finish(new, reason, message)
    return True


RESEND_STATES = frozenset(
    {wire.MoveState.NONE, wire.MoveState.CANCELLED, wire.MoveState.INTERRUPTED}
)
"""Broker move states that mean it forgot the move (restarted, or its engine was reset)."""


def _follow_moving(p: _Pass) -> None:
    """Verify, fail or follow each replica in state Moving."""
    for i, e in enumerate(p.entries):
        if e.state != State.MOVING:
            continue
        bd = p.obs.brokers.get(e.broker_id)
        if bd is None:
            continue  # broker away: wait for it (its engine resumes from -future)
        key = (e.topic, e.partition)
        here = bd.locate(*key)
        target = e.target_log_dir or ""
        if here is not None and here.path == target and not bd.has_future(key):
            # KIP-113 "verify": describe-log-dirs shows the replica in its target dir.
            p.set_state(i, State.SUCCEEDED, bytes_copied=e.bytes_total, offset_lag=0)
            message = f"broker {e.broker_id}: {key[0]}-{key[1]} is now on {target}"
            p.events.append(("Normal", "ReplicaMoved", message))
            p.actions.append(RecordInTopic(key_of(e), target))
            continue
        info = p.obs.moves.get(key_of(e))
        if info is None or info.state in RESEND_STATES:
            p.actions.append(Resend(key_of(e), target))
            continue
        if info.state == wire.MoveState.FAILED:
            message = f"broker {e.broker_id}: {info.error}"
            p.set_state(i, State.FAILED, message=message)
            p.events.append(("Warning", "ReplicaMoveFailed", message))
            continue
        p.entries[i] = e.model_copy(
            update={
                "bytes_copied": info.bytes_copied,
                "bytes_total": max(info.bytes_total, e.bytes_total),
                "offset_lag": info.future_offset_lag,
            }
        )
        p.rates[key_of(e)] = info.rate_bytes_per_sec


def _start_pending(p: _Pass) -> None:
    """Start what fits under maxConcurrentMovesPerBroker on brokers that answered."""
    index = {key_of(e): i for i, e in enumerate(p.entries)}
    for e in next_to_start(p.entries, p.spec.max_concurrent_moves_per_broker):
        bd = p.obs.brokers.get(e.broker_id)
        if bd is None:
            continue
        here = bd.locate(e.topic, e.partition)
        if here is not None and here.path == e.target_log_dir:
            p.set_state(index[key_of(e)], State.SUCCEEDED, message="already in its target log dir")
            continue
        p.actions.append(Start(key_of(e), e.target_log_dir or ""))


def settle(obs: Observed, decision: Decision, results: Iterable[StartResult]) -> Decision:
    """The rest of the pass once its Start actions were answered: replica states from the
    answers, then totals and the phase (and, when every replica ended, the end's actions)."""
    if decision.settled:
        return decision
    p = _Pass(obs, decision.status, list(decision.status.replicas or []))
    p.actions, p.events = list(decision.actions), list(decision.events)
    p.rates = dict(decision.rates)
    _record_starts(p, results)
    return _summarize(p)


def _record_starts(p: _Pass, results: Iterable[StartResult]) -> None:
    index = {key_of(e): i for i, e in enumerate(p.entries)}
    wait_s = p.spec.replica_wait_seconds
    for r in results:
        i = index[r.replica]
        e = p.entries[i]
        b, topic, part = r.replica
        if r.answer == StartAnswer.ACCEPTED:
            here = p.obs.brokers.get(b)
            src = here.locate(topic, part) if here else None
            p.set_state(i, State.MOVING, source_log_dir=src.path if src else e.source_log_dir)
        elif r.answer == StartAnswer.NOT_THERE_YET:
            # KIP-113: the broker remembers the dir and creates the replica there if it
            # arrives; we retry until replicaWaitSeconds.
            if _elapsed(p) > wait_s:
                message = f"{topic}-{part} is not on broker {b} (waited {wait_s} s)"
                p.set_state(i, State.FAILED, message=message)
                p.events.append(("Warning", "ReplicaNotFound", message))
        elif r.answer == StartAnswer.REFUSED:
            message = f"broker {b}: {r.message}"
            p.set_state(i, State.FAILED, message=message)
            p.events.append(("Warning", "ReplicaMoveFailed", message))


def _summarize(p: _Pass) -> Decision:
    t = totals(p.entries, p.rates)
    p.status = p.status.model_copy(
        update={
            "bytes_copied": t.copied,
            "bytes_total": t.total,
            "progress_percent": t.percent,
            "rate_bytes_per_second": t.rate,
            "eta_seconds": t.eta,
            "observed_generation": p.gen,
        }
    )
    if not all(e.state in ENDED_REPLICA_STATES for e in p.entries):
        moving = sum(1 for e in p.entries if e.state == State.MOVING)
        started = moving or any(e.state == State.SUCCEEDED for e in p.entries)
        new = Phase.MOVING if started else Phase.PENDING
        changed = new != p.status.phase
        p.set_phase(
            new,
            "Moving" if moving else "Waiting",
            f"{t.percent}% of {t.total} bytes, {moving} replicas moving",
        )
        if changed:
            p.events.append(("Normal", new.value, f"{moving} replicas moving"))
        return p.decision(active=True)
    spec = p.spec
    if spec.throttle_bytes_per_second:
        p.actions.append(SetThrottle(tuple(sorted({e.broker_id for e in p.entries})), 0))
    failed = [e for e in p.entries if e.state != State.SUCCEEDED]
    if failed:
        p.finish(
            Phase.FAILED,
            "ReplicaMovesFailed",
            f"{len(failed)} of {len(p.entries)} replicas not moved: "
            + "; ".join(e.message or "" for e in failed[:3]),
        )
    elif spec.drain is not None:
        left = drain_left(spec.drain, p.obs.brokers.get(spec.drain.broker_id))
        if left:
            p.finish(Phase.FAILED, "DrainNotEmpty", left)
        else:
            uncordoned = _cannot_cordon(spec.drain, p.obs.brokers)
            p.finish(
                Phase.SUCCEEDED,
                "Drained",
                f"log dir {spec.drain.log_dir} of broker {spec.drain.broker_id} "
                + (
                    f"is verified empty; {uncordoned}"
                    if uncordoned
                    else "is verified empty and stays cordoned"
                ),
            )
    else:
        p.finish(Phase.SUCCEEDED, "AllMoved", f"{len(p.entries)} replicas moved and verified")
    return p.decision()


def _cannot_cordon(drain: Drain | None, brokers: Mapping[int, BrokerDirs | None]) -> str:
    """Why the drained dir is not cordoned although asked, or "" (no drain, or it can be)."""
    if drain is None:
        return ""
    bd = brokers.get(drain.broker_id)
    d = bd.find(drain.log_dir) if bd else None
    if d is None or d.can_cordon:
        return ""
    return (
        f"broker {drain.broker_id} cannot cordon a log dir (Kafka's cordoned.log.dirs needs "
        "4.3+): not cordoned, new replicas may still be placed there"
    )


def drain_left(drain: Drain, bd: BrokerDirs | None) -> str:
    """Why the drained dir is not verified empty, or "" when it is."""
    b = drain.broker_id
    if bd is None:
        return f"broker {b} did not answer to verify the drain"
    d = bd.find(drain.log_dir)
    if d is None:
        return f"broker {b} has no log dir {drain.log_dir!r}"
    if d.replicas or d.futures:
        names = ", ".join(f"{t}-{p}" for t, p in sorted(d.replicas)[:5])
        return f"log dir {d.path} of broker {b} still holds {len(d.replicas)} replicas ({names})"
    return ""


def moving_by_broker(status: LogDirMoveStatus | None) -> dict[int, list[tuple[str, int]]]:
    """The replicas in state Moving, per broker: what the long poll waits on."""
    out: dict[int, list[tuple[str, int]]] = {}
    for e in (status or LogDirMoveStatus()).replicas or []:
        if e.state == State.MOVING:
            out.setdefault(e.broker_id, []).append((e.topic, e.partition))
    return out


def is_followed(move: LogDirMove) -> bool:
    """Whether passes still have work: not final, or a drain whose dir stays cordoned."""
    phase = (move.status or LogDirMoveStatus()).phase
    return phase not in ENDED_PHASES or move.spec.drain is not None


__all__ = [
    "PHASE_TRANSITIONS",
    "REPLICA_TRANSITIONS",
    "Action",
    "Decision",
    "IllegalTransitionError",
    "MoveSpecError",
    "NoRoomError",
    "Observed",
    "ReplicaTarget",
    "advance",
    "conflicts",
    "drain_left",
    "expand_drain",
    "next_to_start",
    "resolve",
    "settle",
    "totals",
    "transition",
]
