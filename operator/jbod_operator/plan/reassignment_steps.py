"""KIP-435's step planner and batch collector, on plain data. Pure: no I/O, no clock.

A PartitionReassignment does not send a partition's final replicas at once (Kafka's tool does,
and that is what cripples produce latency, Cruise Control #150). Per partition, the planner
computes the *next step* from the current replicas (CR) and the final target replicas (FTR)
alone, so it can be called again after any restart or limit change and gives the same answer
for the same observation (KIP-435 "Calculating a Reassignment Step"). Across partitions,
:func:`collect_batch` picks which of those steps run now: leader movements first, then the
others, never over the partition, leader or per-broker limits (KIP-435 "Collecting a
reassignment batch"). :func:`plan_all` runs both to completion on the assumption that every
new replica catches up, which is what the status' "batches planned", the bench's
``plan_10k_partitions_s`` and the tests use.

How the KIP's text is read where it and its own example disagree is written down in
docs/architecture.md ("PartitionReassignment: reading KIP-435's step algorithm"). In short,
for a step from CR towards FTR with at most R replicas changed (``replica_movements``):

- *leader step*: when FTR's preferred leader is not in CR, the step adds it alone (plus
  the min-ISR extras below) and removes nothing; it is elected in that step (the example's
  ``(0,1,2,3,4) -> (5,0,1,2,3,4)``);
- otherwise the step removes the first R excess replicas (in CR order) and adds, in FTR
  order, only as many new ones as bring the replica count back to ``len(FTR)`` (never more
  than R), never leaving fewer replicas than ``min(len(CR), len(FTR))``;
- *min-ISR rule*: if the step would leave fewer in-sync replicas than
  ``min(min_isr, len(FTR))``, it adds more target replicas at once, past R (KIP-435: "4
  brokers, min.insync.replicas 3, one in sync: add 2 at once");
- every step's replicas are ordered as FTR's members in FTR order, then the remaining current
  ones in CR order, so the preferred leader is first as soon as it is a replica and the last
  step equals FTR exactly (rule 5);
- a target broker that is not live is not added; a step that could then change nothing waits
  (:class:`Waiting`, rule 2a), as does a partition without a live in-sync replica (2b).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .election import NO_LEADER

__all__ = [
    "Batch",
    "Limits",
    "PartitionMove",
    "PlannedStep",
    "Step",
    "WaitReason",
    "Waiting",
    "cancel_step",
    "collect_batch",
    "max_steps",
    "next_step",
    "plan_all",
    "rollback_target",
]


@dataclass(frozen=True)
class Limits:
    """KIP-435's three limits and Cruise Control's per-broker budget, as the planner uses them.

    Every call takes the limits it is given, so a limit changed while a reassignment runs
    applies from the next step on and leaves the steps in flight alone (KIP-435: "would only
    affect the next reassignment step calculation"). The defaults belong to the resource's
    model (one home), so there are none here.
    """

    replica_movements: int
    """KIP-435 ``reassignment.max.concurrent.replica.movements`` (the algorithm's R, its
    ``reassignment.parallel.replica.count``): replicas of one partition added, and replicas
    removed, per step; only the min-ISR rule adds more."""
    partition_movements: int
    """P: partitions whose step runs in one batch."""
    leader_movements: int
    """L: steps in one batch that move a partition's leader."""
    moves_per_broker: int
    """Cruise Control's ``num.concurrent.partition.movements.per.broker`` (its default is 5):
    replica moves in flight on one broker, incoming (a replica added there) plus outgoing (a
    replica removed from there), shared with every other PartitionReassignment and LogDirMove
    of the cluster."""

    def __post_init__(self) -> None:
        for name in ("replica_movements", "partition_movements", "leader_movements"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 (KIP-435: valid values [1,...])")
        if self.moves_per_broker < 1:
            raise ValueError("moves_per_broker must be at least 1: no step could ever start")


@dataclass(frozen=True)
class Step:
    """One partition's next step: what changes, the replicas it ends with, whom it elects.

    A step runs as KIP-435's "Performing reassignment for a single partition": the replicas
    become :attr:`during` (the current ones plus :attr:`adding`, KIP-455's adding replicas,
    each created as a new replica); when the added ones are in sync, :attr:`leader_to_elect`
    is elected if set, then the replica set shrinks to :attr:`replicas` and the
    :attr:`removing` ones are stopped and deleted.
    """

    adding: tuple[int, ...]
    """New replicas (NR), in FTR order."""
    removing: tuple[int, ...]
    """Dropped replicas (DR), in CR order (KIP-455's removing replicas)."""
    replicas: tuple[int, ...]
    """The assignment after the step (TR): FTR's members in FTR order, then the other current
    replicas in CR order."""
    leader_to_elect: int | None
    """FTR's preferred leader, when this step moves leadership to it: it is a replica from
    this step on and is not the leader yet. Elected once it is in sync; the old leader leaves
    (if it is removed) only after that."""
    is_last: bool
    """The step ends at FTR, in FTR's order (rule 5)."""

    @property
    def involves_leader_movement(self) -> bool:
        """Counted against L. The leader moves exactly when this step elects someone: a
        removed leader is never in FTR, so FTR's preferred leader replaces it in that step."""
        return self.leader_to_elect is not None

    @property
    def during(self) -> tuple[int, ...]:
        """The replica set while the step runs (current plus adding), target order first."""
        return self.replicas + self.removing

    @property
    def brokers_charged(self) -> tuple[int, ...]:
        """The brokers whose per-broker budget this step uses, one move each: incoming where
        a replica is added, outgoing where one is removed (Cruise Control's accounting)."""
        return self.adding + self.removing


class WaitReason(StrEnum):
    """Why a partition's step cannot start now (KIP-435 step 2); CamelCase for conditions."""

    TARGET_BROKERS_NOT_LIVE = "TargetBrokersNotLive"
    """2a: the replicas the step needs would go to brokers that are not live, so the step
    would be identical to the current assignment."""
    NO_LIVE_IN_SYNC_REPLICA = "NoLiveInSyncReplica"
    """2b: the partition is offline; nobody could serve the new replicas' fetches."""
    TARGET_REPLICAS_NOT_IN_SYNC = "TargetReplicasNotInSync"
    """Every removal would leave fewer in-sync replicas than min ISR (or none) while the
    target's own replicas lag: they must catch up first. Never unclean, never data loss."""


@dataclass(frozen=True)
class Waiting:
    """The partition waits; the status says why and names the brokers it waits for."""

    reason: WaitReason
    brokers: tuple[int, ...]

    @property
    def message(self) -> str:
        ids = ", ".join(str(b) for b in self.brokers)
        if self.reason is WaitReason.TARGET_BROKERS_NOT_LIVE:
            return f"waiting for target broker(s) {ids} to be live"
        if self.reason is WaitReason.TARGET_REPLICAS_NOT_IN_SYNC:
            return (
                f"waiting for the replica(s) on broker(s) {ids} to be in sync: removing another"
                " would leave fewer in-sync replicas than min ISR"
            )
        return f"no live in-sync replica (replicas on broker(s) {ids}): the partition is offline"


def _replicas(name: str, replicas: Sequence[int]) -> tuple[int, ...]:
    r = tuple(replicas)
    if not r:
        raise ValueError(f"{name} replicas must not be empty")
    if len(set(r)) != len(r):
        raise ValueError(f"{name} replicas name a broker twice: {list(r)}")
    return r


def next_step(
    current: Sequence[int],
    target: Sequence[int],
    *,
    min_isr: int,
    replica_movements: int,
    live: Collection[int] | None = None,
    leader: int | None = None,
    isr: Collection[int] | None = None,
) -> Step | Waiting | None:
    """The next step from ``current`` towards ``target``; None when there is nothing to do.

    ``live`` (None: every broker) limits which brokers can be added; ``leader`` is the
    current leader (None: ``current[0]``, the preferred one; ``NO_LEADER`` when offline);
    ``isr`` the current in-sync replicas (None: every current replica, what :func:`plan_all`
    assumes), which the min-ISR rule counts. A :class:`Waiting` says why nothing can start:
    targets not live (2a; also FTR's preferred leader, which goes first), or no live in-sync
    replica (2b).

    Stateless on purpose: the step depends only on what is observed and on the limit passed
    now, so a limit changed mid-way applies to the next step, and an operator that restarts
    plans from the state of record (a step recorded as in flight is finished or cancelled,
    never planned again).
    """
    cr = _replicas("current", current)
    fr = _replicas("target", target)
    if replica_movements < 1:
        raise ValueError("replica_movements must be at least 1")
    if min_isr < 1:
        raise ValueError("min_isr must be at least 1")
    if leader is not None and leader != NO_LEADER and leader not in cr:
        raise ValueError(f"leader {leader} is not one of the current replicas {list(cr)}")
    return _next_step(
        cr,
        fr,
        set(fr),
        cr[0] if leader is None else leader,
        min_isr,
        replica_movements,
        None if live is None else set(live),
        None if isr is None else set(isr),
    )


def _next_step(
    cr: tuple[int, ...],
    fr: tuple[int, ...],
    fset: set[int],
    lead: int,
    min_isr: int,
    r: int,
    live: set[int] | None,
    isr: set[int] | None,
) -> Step | Waiting | None:
    """:func:`next_step` on validated input (:func:`plan_all` validates once per plan)."""
    pl = fr[0]
    cset = set(cr)
    in_sync = cset if isr is None else cset & isr
    if live is not None:
        in_sync = in_sync & live
        if not in_sync:  # 2b
            return Waiting(WaitReason.NO_LIVE_IN_SYNC_REPLICA, cr)
        if pl not in live and lead != pl:
            # The preferred leader is added and elected first; nothing else goes before it.
            return Waiting(WaitReason.TARGET_BROKERS_NOT_LIVE, (pl,))
    if cr == fr:
        if lead == pl:
            return None
        return Step(adding=(), removing=(), replicas=fr, leader_to_elect=pl, is_last=True)

    missing = [b for b in fr if b not in cset]
    addable = missing if live is None else [b for b in missing if b in live]

    adding: list[int]
    removing: list[int]
    if pl not in cset:
        # 3b, the example's first step: the new preferred leader alone, nothing removed.
        adding, removing = [pl], []
    else:
        removing = [b for b in cr if b not in fset][:r]  # 2b-2c: the first R excess ones
        # Only as many as bring the count back to len(FTR): more would be added now and
        # removed later (the example's second step adds one and removes two).
        adding = addable[: min(r, max(0, len(fr) - len(cr) + len(removing)))]
        # Never fewer replicas than min(len(CR), len(FTR)): with targets not live, the
        # removals wait for the additions that replace them.
        floor = min(len(cr), len(fr))
        del removing[max(0, len(cr) + len(adding) - floor) :]

    # 3a/3c, the min-ISR rule: enough in-sync replicas after the step for acks=all producers,
    # even past R.
    short = min(min_isr, len(fr)) - len(adding) - len(in_sync.difference(removing))
    if short > 0:
        extra = [b for b in addable if b not in adding][:short]
        if extra:
            chosen = set(adding).union(extra)
            adding = [b for b in fr if b in chosen]
            short -= len(extra)
        while short > 0 and any(b in in_sync for b in removing):
            # Keep an in-sync replica rather than fall below min ISR (the last one named).
            keep = max(i for i, b in enumerate(removing) if b in in_sync)
            del removing[keep]
            short -= 1

    if not adding and not removing and cset != fset:
        # 2a: the step would be identical to the current assignment. Name whom it waits for:
        # the targets that cannot be added, else the target replicas that are down, else
        # (the min-ISR rule kept every removal back) the ones that must catch up first.
        if live is not None:
            down = [b for b in missing if b not in live] or [b for b in fr if b not in live]
            if down:
                return Waiting(WaitReason.TARGET_BROKERS_NOT_LIVE, tuple(down))
        lagging = tuple(b for b in fr if b in cset and b not in in_sync)
        return Waiting(WaitReason.TARGET_REPLICAS_NOT_IN_SYNC, lagging)
    # FTR's members in FTR order, then the remaining current ones in CR order: the preferred
    # leader is first as soon as it is a replica, and a set equal to FTR's is FTR (rule 5).
    gone = set(removing)
    added = set(adding)
    replicas = tuple(b for b in fr if b in added or (b in cset and b not in gone)) + tuple(
        b for b in cr if b not in fset and b not in gone
    )
    return Step(
        adding=tuple(adding),
        removing=tuple(removing),
        replicas=replicas,
        leader_to_elect=pl if lead != pl else None,
        is_last=replicas == fr,
    )


def max_steps(current: Sequence[int], target: Sequence[int], replica_movements: int) -> int:
    """The most steps :func:`next_step` takes from ``current`` to ``target`` with every broker
    live: one leader step, then each step removes R excess replicas or adds R missing ones
    (whichever are more), so ``1 + ceil(max(|CR - FTR|, |FTR - CR|) / R)``. A reorder or an
    election alone is one step. The tests check every plan against it."""
    cset, fset = set(current), set(target)
    changes = max(len(cset - fset), len(fset - cset))
    return 1 + math.ceil(changes / replica_movements)


def cancel_step(
    current: Sequence[int],
    original: Sequence[int],
    adding: Collection[int],
    *,
    leader: int | None = None,
) -> Step | None:
    """The step that undoes a step in flight: ``current`` is the replica set during it
    (its start plus ``adding``), ``original`` the assignment it started from.

    Every replica the step added is removed (the ones already in sync too: keeping them would
    leave a set that is neither the start nor the target) and ``original`` comes back in its
    own order, with its first replica to be elected if it does not lead: Kafka 4.3's cancel
    restored [2,1] as [1,2], a different preferred leader. A step whose removals already
    happened is finished, not in flight: it is kept, so this refuses it (``ValueError``);
    walking it back is a rollback (:func:`rollback_target`). None when nothing was added.
    """
    cr = _replicas("current", current)
    orig = _replicas("original", original)
    added = set(adding)
    if not set(orig) <= set(cr):
        raise ValueError(
            f"replicas {sorted(set(orig) - set(cr))} of {list(orig)} already left {list(cr)}:"
            " the step finished; roll it back instead"
        )
    stray = set(cr) - set(orig) - added
    if stray:
        raise ValueError(f"replicas {sorted(stray)} are in neither the original nor adding")
    lead = cr[0] if leader is None else leader
    removing = tuple(b for b in cr if b not in set(orig))
    if not removing and cr == orig and lead == orig[0]:
        return None
    return Step(
        adding=(),
        removing=removing,
        replicas=orig,
        leader_to_elect=orig[0] if lead != orig[0] else None,
        is_last=True,
    )


def rollback_target(original: Sequence[int]) -> tuple[int, ...]:
    """The target of a rollback: the original replicas in their original order.

    A rollback is an ordinary reassignment towards the original assignment with the same
    planner and limits (``next_step(current, rollback_target(original), ...)``), so it keeps
    every rule (min ISR, leader first, R) and ends in the original order with the original
    preferred leader elected, which Kafka's cancel did not (it restored [2,1] as [1,2]).
    """
    return _replicas("original", original)


# -- batches ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedStep:
    """A partition's next step, as the batch collector sees it."""

    topic: str
    partition: int
    step: Step


@dataclass(frozen=True)
class Batch:
    """One KIP-435 batch: the steps that start together, in the order they were chosen
    (leader movements first, each group in the plan's order: KIP-435's
    ``leaderMovements ++ otherPartitionMovements``)."""

    steps: tuple[PlannedStep, ...]
    leader_movements: int
    moves_per_broker: Mapping[int, int] = field(hash=False)
    """Moves this batch adds per broker (to add to the budget in use while it runs)."""
    blocked_brokers: tuple[int, ...] = ()
    """Brokers at their budget once this batch starts that a step left out needs (sorted):
    what the status names when partitions wait for the per-broker budget."""
    held_by_leader_limit: int = 0
    """Leader-moving steps held back by L while the batch had room for more partitions."""


class _Queues:
    """The steps waiting for a batch, as indices in the plan's order, split the way the
    collector takes them: leader movements, then the others; each with the sub-list of
    steps that charge no broker (an election or a reorder alone), which still fit when
    every broker is at its budget; and how many waiting steps charge each set of brokers,
    to name the full brokers that steps wait for without walking every step."""

    def __init__(self) -> None:
        self.leaders: list[int] = []
        self.others: list[int] = []
        self.zero_leaders: list[int] = []
        self.zero_others: list[int] = []
        self.mask_counts: dict[int, int] = {}

    def _lists(self, step: Step) -> tuple[list[int], list[int]]:
        if step.involves_leader_movement:
            return self.leaders, self.zero_leaders
        return self.others, self.zero_others

    def add(self, i: int, step: Step, mask: int) -> None:
        queue, zeros = self._lists(step)
        bisect.insort(queue, i)
        if not mask:
            bisect.insort(zeros, i)
        self.mask_counts[mask] = self.mask_counts.get(mask, 0) + 1

    def remove(self, i: int, step: Step, mask: int) -> None:
        queue, zeros = self._lists(step)
        del queue[bisect.bisect_left(queue, i)]
        if not mask:
            del zeros[bisect.bisect_left(zeros, i)]
        self.mask_counts[mask] -= 1
        if not self.mask_counts[mask]:
            del self.mask_counts[mask]

    def needs(self, full: int) -> int:
        """The full brokers (bits of ``full``) that some waiting step charges."""
        union = 0
        for m in self.mask_counts:
            union |= m
        return union & full

    def __bool__(self) -> bool:
        return bool(self.leaders or self.others)


def _take(
    queue: list[int],
    zeros: list[int],
    quota: int,
    masks: Sequence[int],
    bits: Sequence[tuple[int, ...]],
    room: list[int],
    full: int,
    chosen: list[int],
) -> int:
    """Append to ``chosen`` up to ``quota`` steps of ``queue`` that fit, in order; returns
    the new full-broker mask.

    The hot path of :func:`plan_all`: a mask test per step, and once every broker is at its
    budget (the usual end of a batch when the budget binds) only the steps that charge no
    broker can still fit, so the loop jumps to those instead of testing the rest.
    """
    all_bits = (1 << len(room)) - 1
    for i in queue:
        if full == all_bits:
            for j in zeros[bisect.bisect_left(zeros, i) :]:
                if not quota:
                    break
                chosen.append(j)
                quota -= 1
            return full
        if masks[i] & full:
            continue
        chosen.append(i)
        for bit in bits[i]:
            room[bit] -= 1
            if room[bit] <= 0:
                full |= 1 << bit
        quota -= 1
        if not quota:
            break
    return full


def _fill(
    queues: _Queues,
    masks: Sequence[int],
    bits: Sequence[tuple[int, ...]],
    room: list[int],
    p_room: int,
    l_room: int,
) -> tuple[list[int], int, int]:
    """The collection rule on indices: ``masks[i]`` has one bit per broker step ``i``
    charges, ``bits[i]`` lists those bits, ``room[bit]`` is what that broker's budget has
    left (updated). Returns the chosen indices, the mask of brokers at their budget and the
    number of leader steps L held back. One rule serves :func:`collect_batch` and
    :func:`plan_all`, so the simulator's batches are the collector's by construction."""
    full = 0
    for bit, left in enumerate(room):
        if left <= 0:
            full |= 1 << bit
    chosen: list[int] = []
    held = 0
    if p_room <= 0:
        return chosen, full, 0
    quota = min(p_room, l_room)
    if quota > 0:
        full = _take(queues.leaders, queues.zero_leaders, quota, masks, bits, room, full, chosen)
    if len(chosen) == quota < p_room or quota <= 0:
        # L stopped the leader movements (P did not): the rest of them are held back by it.
        last = bisect.bisect_right(queues.leaders, chosen[-1]) if chosen else 0
        held = len(queues.leaders) - last
    quota = p_room - len(chosen)
    if quota > 0:
        full = _take(queues.others, queues.zero_others, quota, masks, bits, room, full, chosen)
    return chosen, full, held


def _masks(
    steps: Sequence[Step | None], bit_of: dict[int, int], start: int = 0
) -> tuple[list[int], list[tuple[int, ...]]]:
    bits = [
        () if s is None else tuple(bit_of.setdefault(b, len(bit_of)) for b in s.brokers_charged)
        for s in steps[start:]
    ]
    return [sum(1 << x for x in bs) for bs in bits], bits


def _batch(
    chosen: list[PlannedStep], broker_of_bit: Sequence[int], blocked: int, held: int
) -> Batch:
    moves: dict[int, int] = {}
    for s in chosen:
        for b in s.step.brokers_charged:
            moves[b] = moves.get(b, 0) + 1
    return Batch(
        steps=tuple(chosen),
        leader_movements=sum(1 for s in chosen if s.step.involves_leader_movement),
        moves_per_broker=moves,
        blocked_brokers=tuple(sorted(b for x, b in enumerate(broker_of_bit) if blocked >> x & 1)),
        held_by_leader_limit=held,
    )


def collect_batch(
    steps: Iterable[PlannedStep],
    limits: Limits,
    broker_moves_in_use: Mapping[int, int],
    *,
    partitions_in_flight: int = 0,
    leader_movements_in_flight: int = 0,
) -> Batch:
    """KIP-435's batch: leader movements first, then the others, up to P partitions, never
    over L leader movements nor any broker's budget given the moves already in use there.

    ``steps`` come in the plan's order (the resource's partition order), which is the order
    within each group. A step that does not fit is skipped, not waited for, so a later one
    that fits takes its place (KIP-435: "instead if possible add reassignments that involve
    no leader movement"). ``partitions_in_flight`` and ``leader_movements_in_flight`` count
    steps still running from earlier batches, for a caller that starts steps as others end;
    their broker moves belong in ``broker_moves_in_use``.
    """
    planned = list(steps)
    seen: set[tuple[str, int]] = set()
    for s in planned:
        if (s.topic, s.partition) in seen:
            raise ValueError(f"partition {s.topic}-{s.partition} has two steps")
        seen.add((s.topic, s.partition))
    bit_of: dict[int, int] = {}
    masks, bits = _masks([s.step for s in planned], bit_of)
    room = [limits.moves_per_broker - broker_moves_in_use.get(b, 0) for b in bit_of]
    queues = _Queues()
    for i, s in enumerate(planned):
        queues.add(i, s.step, masks[i])
    chosen, full, held = _fill(
        queues,
        masks,
        bits,
        room,
        limits.partition_movements - partitions_in_flight,
        limits.leader_movements - leader_movements_in_flight,
    )
    for i in chosen:
        queues.remove(i, planned[i].step, masks[i])
    return _batch([planned[i] for i in chosen], list(bit_of), queues.needs(full), held)


# -- the simulator ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionMove:
    """One partition of a plan: where it is, where it goes, who leads now (None: the first
    current replica)."""

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    leader: int | None = None


def plan_all(
    partitions: Sequence[PartitionMove],
    limits: Limits,
    *,
    min_isr: int | Mapping[str, int],
) -> list[Batch]:
    """Every batch of the plan, run to completion: each batch starts with no moves in use
    and ends with every new replica in sync and every elected leader leading (KIP-435: a
    batch is executed, then the next one calculated). ``min_isr`` is one value or one per
    topic (a topic not named: 1).

    Each partition's step is recomputed only after it ran, and batches are collected on bit
    masks by the collector's own rule (:func:`_fill`), so 10,000 partitions plan well within
    a second (issue 15's ``plan_10k_partitions_s``).
    """
    n = len(partitions)
    current: list[tuple[int, ...]] = []
    leader: list[int] = []
    targets: list[tuple[tuple[int, ...], set[int]]] = []
    floors: list[int] = []
    seen: set[tuple[str, int]] = set()
    for p in partitions:
        if (p.topic, p.partition) in seen:
            raise ValueError(f"partition {p.topic}-{p.partition} is named twice")
        seen.add((p.topic, p.partition))
        cr = _replicas(f"{p.topic}-{p.partition} current", p.current)
        fr = _replicas(f"{p.topic}-{p.partition} target", p.target)
        if p.leader is not None and p.leader != NO_LEADER and p.leader not in cr:
            raise ValueError(f"{p.topic}-{p.partition}: leader {p.leader} is not a replica")
        current.append(cr)
        leader.append(cr[0] if p.leader is None else p.leader)
        targets.append((fr, set(fr)))
        floor = min_isr if isinstance(min_isr, int) else min_isr.get(p.topic, 1)
        if floor < 1:
            raise ValueError(f"min ISR of {p.topic} must be at least 1")
        floors.append(floor)
    r = limits.replica_movements

    def step_of(i: int) -> Step | None:
        s = _next_step(current[i], *targets[i], leader[i], floors[i], r, None, None)
        assert not isinstance(s, Waiting), "with every broker live nothing waits"
        return s

    steps = [step_of(i) for i in range(n)]
    bit_of: dict[int, int] = {}
    masks, bits = _masks(steps, bit_of)
    queues = _Queues()
    for i, s in enumerate(steps):
        if s is not None:
            queues.add(i, s, masks[i])

    batches: list[Batch] = []
    while queues:
        room = [limits.moves_per_broker] * len(bit_of)
        chosen, full, held = _fill(
            queues, masks, bits, room, limits.partition_movements, limits.leader_movements
        )
        # Every step fits an empty budget alone (it charges a broker at most once), so an
        # empty batch here is a bug, and looping on it would never end.
        assert chosen, "no step fits an empty batch"
        ran: list[PlannedStep] = []
        for i in chosen:
            s = steps[i]
            assert s is not None
            ran.append(PlannedStep(partitions[i].topic, partitions[i].partition, s))
            queues.remove(i, s, masks[i])
            current[i] = s.replicas
            if s.leader_to_elect is not None:
                leader[i] = s.leader_to_elect
        batches.append(_batch(ran, list(bit_of), queues.needs(full), held))
        for i in chosen:
            s = steps[i] = step_of(i)
            if s is not None:
                [masks[i]], [bits[i]] = _masks([s], bit_of)
                queues.add(i, s, masks[i])
    return batches
