"""The order of a Rebalance's replica moves: waves in which no disk goes over its threshold.

Pure: no I/O, no clock. A Rebalance runs its plan (inter-broker moves: a replica leaves broker
A dir x for broker B dir y; intra-broker moves: dir x to dir y of one broker) as children in
waves; a wave starts when the one before it ended. :func:`order_waves` decides which moves go
in which wave, or that a move cannot go anywhere and why.

**What a wave costs a disk.** A moving replica exists twice until its move ends (Kafka's
``-future`` log beside the current one; a new follower beside the replica it replaces), so in a
wave a destination holds the incoming bytes from the wave's start while the source still holds
them until the wave's end. The highest a disk gets in a wave is therefore

    peak = used + reserved + (bytes of the wave coming in)

and nothing that leaves it in the same wave lowers that. ``reserved`` is what moves of other
resources in flight (LogDirMoves, PartitionReassignments, new replicas) still have to write
there: it lands whatever we do.

**The rule** (Cruise Control #1590 and Kafka's tool fill disks mid-move; issue 13 made a
LogDirMove refuse a move without room): a disk receiving bytes in a wave must keep its peak
within ``threshold * capacity`` and within the broker's own headroom. It is
:mod:`jbod_broker.storage.room`'s rule, ``need ≤ usable - reserved - headroom``, with the
threshold's share of the capacity as one more headroom (:func:`disk_ceiling`). A disk that
starts above it receives nothing until moves out of it bring it down: it may only go down.

**How the order is found.** The state after a set of moves depends only on which moves ran, so
the search is over sets. Moves of one partition form one *unit* (they become one
PartitionReassignment target, so they are never split). A disk is *safe* when its room covers
every byte still to come into it; a unit all of whose destinations are safe can run at once
without ever costing another unit its place (running it first keeps any order that existed
valid), and a disk, once safe, stays safe. So the search runs safe units, fullest source disk
first (drains free the room later waves use), and only chooses where disks are contended: a
unit that frees room on a contended disk first, then the smallest, as more of them fit (chains
and cycles, A→B while B→A, resolve when the threshold leaves room for one step). A choice that
leads to a dead end is undone (depth-first, dead sets remembered), within a work budget that
depends on the plan's size only, so the answer is deterministic. Disks that no move links are
independent: each group of linked disks is searched on its own (a deadlock in one spends no
budget of the others and is proven as such) and the groups' orders are merged by priority. The
moves left when no order fits (a true deadlock when the search of their group was exhaustive) are
reported with the disks and bytes that block them.

**Using it.** The caller passes every disk of the cluster (a path or name, the same string in
disks and moves), the plan's moves and the threshold as a fraction. Between waves it may call
again with fresh figures (describe-log-dirs' used and reserved bytes) for the moves not yet
run: a source's old folder is deleted in the background after its move ends, so the room a
wave frees can come later than the wave's end, and fresh figures see that. Cost measured here
(CPU, random crowded plans over 250 brokers x 12 disks): 1 s for 20,000 partitions, 2.7 s for
60,000 in waves of 1,000; the planner's own plans, far less crowded, take milliseconds.

The order found runs one unit at a time; waves pack it: a unit joins the current wave only if
the wave's peaks fit and every unit left for later still fits at its turn with the bytes
brought forward (the check is the order's own peaks plus what joined early), so the rest of the
order stays valid and a later wave never finds less room than the order assumed.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from jbod_broker.storage.room import DirSpace, Headroom, check_room

__all__ = [
    "Blocker",
    "Disk",
    "DiskRef",
    "Move",
    "StuckReason",
    "Unscheduled",
    "WavePlan",
    "disk_ceiling",
    "order_waves",
]

COMPONENT_WORK = 3_000
"""The least budget of a group of linked disks, so a small group is searched to the end even
in a large plan."""

SEARCH_WORK = 60_000
"""The search's budget in unit-steps (a run costs one per partition of the plan, a bound as
much): small plans are searched to the end, a contended one of 200 partitions gets about 200
orders tried (0.1-0.3 s here), one of 60,000 or more only the first, which always runs whole.
Counted in steps, not time, so the answer is the same on any machine."""

MEMO_UNITS = 4096
"""Dead sets are remembered (as bit masks) only up to this many units; above it the budget
allows too few runs for a memory of them to matter."""


@dataclass(frozen=True, slots=True, order=True)
class DiskRef:
    """One log dir of one broker, as the plan names it (the same string in disks and moves)."""

    broker_id: int
    log_dir: str

    def __str__(self) -> str:
        return f"broker {self.broker_id} dir {self.log_dir}"


@dataclass(frozen=True, slots=True)
class Disk:
    """What is known of one log dir when the order is decided."""

    broker_id: int
    log_dir: str
    capacity_bytes: int
    used_bytes: int
    """Everything on the volume (capacity minus usable bytes), replicas or not."""
    reserved_bytes: int = 0
    """What moves and new replicas of other resources in flight still have to write into it."""
    headroom_bytes: int = 0
    """What the broker keeps free on it (storage.room's headroom, as describe-log-dirs says)."""

    def __post_init__(self) -> None:
        for name in ("capacity_bytes", "used_bytes", "reserved_bytes", "headroom_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{self.ref}: {name} must be >= 0, got {getattr(self, name)}")

    @property
    def ref(self) -> DiskRef:
        return DiskRef(self.broker_id, self.log_dir)


@dataclass(frozen=True, slots=True)
class Move:
    """One replica of a partition leaving ``source`` for ``target`` (same broker: intra), or,
    with no ``source``, a new replica (the replication factor grows): bytes come to ``target``
    and leave no disk."""

    topic: str
    partition: int
    source: DiskRef | None
    target: DiskRef
    size_bytes: int

    def __post_init__(self) -> None:
        if self.size_bytes < 0:
            raise ValueError(f"{self.topic}-{self.partition}: size_bytes must be >= 0")

    @property
    def intra_broker(self) -> bool:
        return self.source is not None and self.source.broker_id == self.target.broker_id


class StuckReason(StrEnum):
    """Why a move was not scheduled."""

    NO_ROOM = "NoRoom"
    """No order found in which its destination has room (the blockers say which disks)."""
    UNKNOWN_DISK = "UnknownDisk"
    SAME_DISK = "SameDisk"
    """Source and target are the same dir: nothing to move."""
    CONFLICTING_MOVES = "ConflictingMoves"
    """Two moves of one partition leave, or reach, the same broker."""
    TOO_MANY_MOVES = "TooManyMoves"
    """The partition moves more replicas than ``max_moves_per_wave``: they must go together."""


@dataclass(frozen=True, slots=True)
class Blocker:
    """A disk that cannot take what a stuck partition would bring to it."""

    disk: DiskRef
    need_bytes: int
    """What the partition's moves would bring in."""
    available_bytes: int
    """Room left under the threshold after every scheduled wave (may be negative)."""
    leaving_bytes: int
    """Bytes that stuck moves would take off it: what it waits for (a cycle, when > 0)."""


@dataclass(frozen=True, slots=True)
class Unscheduled:
    move: Move
    reason: StuckReason
    message: str
    blockers: tuple[Blocker, ...] = ()


@dataclass(frozen=True, slots=True)
class WavePlan:
    waves: tuple[tuple[Move, ...], ...]
    """In order; each wave's moves sorted; the moves of one partition always in one wave."""
    unscheduled: tuple[Unscheduled, ...]
    """Sorted by move."""
    exhaustive: bool
    """True when everything was scheduled or the search tried every order: a NoRoom is then a
    true deadlock. False when the work budget ended the search first."""

    @property
    def scheduled(self) -> tuple[Move, ...]:
        return tuple(m for wave in self.waves for m in wave)

    def wave_of(self) -> dict[tuple[str, int], int]:
        """The wave (numbered from 1) of each scheduled partition."""
        return {(m.topic, m.partition): n for n, w in enumerate(self.waves, 1) for m in w}


def disk_ceiling(disk: Disk, threshold: float) -> int:
    """The most bytes (used + reserved + incoming) the disk may hold while it receives:
    storage.room's rule with the threshold's share of the capacity as one more headroom."""
    limit = math.floor(threshold * disk.capacity_bytes)
    headroom = Headroom(bytes=max(disk.headroom_bytes, disk.capacity_bytes - limit))
    empty = DirSpace(disk.log_dir, disk.capacity_bytes, disk.capacity_bytes, 0)
    return check_room(empty, 0, headroom).room_bytes


# -- the problem, in indices ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Unit:
    """The moves of one partition: they run together."""

    moves: tuple[Move, ...]
    ins: tuple[tuple[int, int], ...]
    """(disk, bytes > 0) coming in."""
    outs: tuple[tuple[int, int], ...]
    """(disk, bytes > 0) going out."""
    rises: tuple[tuple[int, int], ...]
    """(disk, net bytes > 0) the unit leaves on a disk once done."""
    priority: tuple[float, int, str, int]
    choice: tuple[int, float, str, int]
    """Fullest source disk first, then the largest, then by name."""


@dataclass(slots=True)
class _Problem:
    disks: list[Disk]
    ceiling: list[int]
    start: list[int]
    """used + reserved per disk."""
    units: list[_Unit]
    by_dest: list[list[int]]
    """disk -> the units bringing bytes to it."""


@dataclass(slots=True)
class _Run:
    order: list[int]
    end: list[int]
    choices: list[int]
    """The choice taken at each decision point."""
    masks: list[int]
    """The set done at each decision point (empty without memory)."""
    work: int
    """Unit-steps spent (the search's budget counts these)."""
    complete: bool
    natural: bool
    """Ended because nothing fit (or complete), not cut by memory or exhausted choices."""


def order_waves(
    dirs: Iterable[Disk],
    moves: Iterable[Move],
    *,
    threshold: float,
    max_moves_per_wave: int | None = None,
) -> WavePlan:
    """The waves of ``moves`` over ``dirs`` (see the module docstring), and what cannot go.

    ``threshold`` is a fraction of capacity in (0, 1] (a Rebalance's
    ``capacityThresholdPercent / 100``). ``max_moves_per_wave`` caps the moves in one wave; a
    partition moving more replicas than that is reported, never split.
    """
    if not (0 < threshold <= 1):
        raise ValueError(f"threshold must be a fraction in (0, 1], got {threshold}")
    if max_moves_per_wave is not None and max_moves_per_wave < 1:
        raise ValueError(f"max_moves_per_wave must be >= 1, got {max_moves_per_wave}")
    disk_list = sorted(dirs, key=lambda d: d.ref)
    index: dict[DiskRef, int] = {}
    for i, known in enumerate(disk_list):
        if known.ref in index:
            raise ValueError(f"{known.ref} is listed twice")
        index[known.ref] = i

    stuck: list[Unscheduled] = []
    groups: dict[tuple[str, int], list[Move]] = defaultdict(list)
    for m in moves:
        groups[(m.topic, m.partition)].append(m)
    units: list[_Unit] = []
    start = [d.used_bytes + d.reserved_bytes for d in disk_list]
    for key in sorted(groups):
        group = tuple(sorted(groups[key], key=_move_key))
        problem = _invalid(group, index, max_moves_per_wave)
        if problem is not None:
            reason, message = problem
            stuck.extend(Unscheduled(m, reason, message) for m in group)
            continue
        units.append(_unit(group, index, disk_list, start))

    ceiling = [disk_ceiling(d, threshold) for d in disk_list]
    never = _hopeless(units, start, ceiling, range(len(units)))
    alive = [u for i, u in enumerate(units) if i not in never]
    whole = _problem(disk_list, ceiling, start, alive)
    # disks no move links are independent: each group of linked ones is searched on its own
    # (a deadlock in one never spends the budget of the others)
    total = sum(len(u.moves) for u in alive) + 1
    end = list(start)
    orders: list[list[int]] = []
    left: list[tuple[_Unit, bool]] = [(units[i], True) for i in sorted(never)]
    comps = _components(alive, len(disk_list))
    for comp in comps:
        if len(comps) == 1:  # one group (most plans across brokers): no renumbering
            local, sub = list(range(len(disk_list))), whole
        else:
            local = sorted({d for i in comp for d, _ in alive[i].ins + alive[i].outs})
            pos = {d: k for k, d in enumerate(local)}
            sub = _problem(
                [disk_list[d] for d in local],
                [ceiling[d] for d in local],
                [start[d] for d in local],
                [_remap(alive[i], pos) for i in comp],
            )
        size = sum(len(alive[i].moves) for i in comp)
        best, proven = _search(sub, max(COMPONENT_WORK, SEARCH_WORK * size // total))
        orders.append([comp[k] for k in best.order])
        for k, d in enumerate(local):
            end[d] = best.end[k]
        done = set(best.order)
        left += [(alive[comp[k]], proven) for k in range(len(comp)) if k not in done]

    waves = _pack(whole, _merge(orders, alive), max_moves_per_wave)
    stuck.extend(_blocked(whole, left, end, threshold))
    return WavePlan(
        waves=tuple(
            tuple(sorted((m for i in w for m in alive[i].moves), key=_move_key)) for w in waves
        ),
        unscheduled=tuple(sorted(stuck, key=lambda s: _move_key(s.move))),
        exhaustive=all(proven for _, proven in left),
    )


def _problem(
    disks: list[Disk], ceiling: list[int], start: list[int], units: list[_Unit]
) -> _Problem:
    p = _Problem(disks, ceiling, start, units, [[] for _ in disks])
    for i, u in enumerate(units):
        for k, _ in u.ins:
            p.by_dest[k].append(i)
    return p


def _components(units: Sequence[_Unit], n_disks: int) -> list[list[int]]:
    """Units grouped by the disks they link (union-find), each group in unit order, groups in
    the order of their first unit; units that move no byte form one group of their own."""
    parent = list(range(n_disks))

    def root(d: int) -> int:
        while parent[d] != d:
            parent[d] = parent[parent[d]]
            d = parent[d]
        return d

    for u in units:
        ds = [d for d, _ in u.ins + u.outs]
        for d in ds[1:]:
            a, b = root(ds[0]), root(d)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i, u in enumerate(units):
        ds = [d for d, _ in u.ins + u.outs]
        groups.setdefault(root(ds[0]) if ds else -1, []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _remap(u: _Unit, pos: dict[int, int]) -> _Unit:
    """The unit with disk indices local to its group."""
    return _Unit(
        moves=u.moves,
        ins=tuple((pos[d], b) for d, b in u.ins),
        outs=tuple((pos[d], b) for d, b in u.outs),
        rises=tuple((pos[d], b) for d, b in u.rises),
        priority=u.priority,
        choice=u.choice,
    )


def _merge(orders: list[list[int]], units: Sequence[_Unit]) -> list[int]:
    """One order from the groups' orders: each group's kept, the next unit always the one with
    the best priority among the groups' next ones (the groups share no disk, so any
    interleaving is as valid, and this one keeps drains of the fullest disks early)."""
    heap = [(units[o[0]].priority, g, 0) for g, o in enumerate(orders) if o]
    heapq.heapify(heap)
    out: list[int] = []
    while heap:
        _, g, k = heapq.heappop(heap)
        out.append(orders[g][k])
        if k + 1 < len(orders[g]):
            heapq.heappush(heap, (units[orders[g][k + 1]].priority, g, k + 1))
    return out


def _hopeless(
    units: Sequence[_Unit], x: Sequence[int], ceiling: Sequence[int], candidates: Iterable[int]
) -> set[int]:
    """The units no order from state ``x`` can run: on one of their destinations, even every
    byte the other runnable units take off it would leave too little room (their own bytes
    leave only when they end). A fixpoint: a unit that can never run frees nothing."""
    alive = set(candidates)
    off: dict[int, int] = defaultdict(int)
    by_dest: dict[int, list[int]] = defaultdict(list)
    for i in alive:
        for d, b in units[i].outs:
            off[d] += b
        for d, _ in units[i].ins:
            by_dest[d].append(i)

    def stuck(i: int) -> bool:
        u = units[i]
        own = dict(u.outs)
        return any(x[d] - (off[d] - own.get(d, 0)) + b > ceiling[d] for d, b in u.ins)

    never: set[int] = set()
    work = sorted(alive)
    while work:
        i = work.pop()
        if i in never or not stuck(i):
            continue
        never.add(i)
        for d, b in units[i].outs:
            off[d] -= b
            work.extend(j for j in by_dest[d] if j not in never)
    return never


def _move_key(m: Move) -> tuple[str, int, int, str, int, str, int]:
    """Move's own order, as a plain tuple (sorting dataclasses compares them field by field
    through generated methods, several times slower on 100,000 moves)."""
    s, t = m.source or DiskRef(-1, ""), m.target
    return (m.topic, m.partition, s.broker_id, s.log_dir, t.broker_id, t.log_dir, m.size_bytes)


def _invalid(
    group: tuple[Move, ...], index: dict[DiskRef, int], cap: int | None
) -> tuple[StuckReason, str] | None:
    def name() -> str:
        return f"{group[0].topic}-{group[0].partition}"

    for m in group:
        for ref in (m.source, m.target):
            if ref is not None and ref not in index:
                return StuckReason.UNKNOWN_DISK, f"{name()}: {ref} is not a known log dir"
        if m.source == m.target:
            return StuckReason.SAME_DISK, f"{name()}: source and target are both {m.source}"
    if len(group) > 1:
        for side, refs in (
            ("source", [m.source for m in group]),
            ("target", [m.target for m in group]),
        ):
            brokers = [r.broker_id for r in refs if r is not None]
            twice = sorted({b for b in brokers if brokers.count(b) > 1})
            if twice:
                return (
                    StuckReason.CONFLICTING_MOVES,
                    f"{name()}: two moves have broker {twice[0]} as their {side}",
                )
    if cap is not None and len(group) > cap:
        return (
            StuckReason.TOO_MANY_MOVES,
            f"{name()} moves {len(group)} replicas, more than max_moves_per_wave {cap}; "
            "a partition's moves must start together",
        )
    return None


def _unit(
    group: tuple[Move, ...], index: dict[DiskRef, int], disks: list[Disk], start: list[int]
) -> _Unit:
    first = group[0]

    def fullness(d: int) -> float:
        cap = disks[d].capacity_bytes
        return start[d] / cap if cap else math.inf

    coming: dict[int, int] = defaultdict(int)
    going: dict[int, int] = defaultdict(int)
    for m in group:
        coming[index[m.target]] += m.size_bytes
        if m.source is not None:
            going[index[m.source]] += m.size_bytes
    fullest = max((fullness(d) for d in going), default=0.0)  # only new replicas: frees nothing
    size = sum(m.size_bytes for m in group)
    net = {d: coming.get(d, 0) - going.get(d, 0) for d in set(coming) | set(going)}
    return _Unit(
        moves=group,
        ins=tuple(sorted((d, b) for d, b in coming.items() if b > 0)),
        outs=tuple(sorted((d, b) for d, b in going.items() if b > 0)),
        rises=tuple(sorted((d, b) for d, b in net.items() if b > 0)),
        priority=(-fullest, -size, first.topic, first.partition),
        choice=(size, -fullest, first.topic, first.partition),
    )


# -- the search ------------------------------------------------------------------------------


def _search(p: _Problem, budget: int) -> tuple[_Run, bool]:
    """Depth-first over the choices at contended disks, re-running from the start with the
    next choice (memory stays linear), pruning a choice that cannot schedule more units than
    the best run so far (:func:`_hopeless` bounds it); returns the best run and whether the
    search was exhaustive (then no order schedules more)."""
    dead: set[int] | None = set() if len(p.units) <= MEMO_UNITS else None
    choices: list[int] = []
    best: _Run | None = None
    work = 0
    while True:
        run = _run(p, choices, dead, len(best.order) if best else -1)
        work += run.work
        if run.natural and (best is None or len(run.order) > len(best.order)):
            best = run
        assert best is not None, "the first run is never cut"
        if run.complete:
            return best, True
        depth = len(run.choices)
        # the node at ``depth`` is dead: nothing fits, every choice tried, or no better than best
        if dead is not None and run.masks:
            dead.add(run.masks[depth])
        if depth == 0:
            return best, True
        if work >= budget:
            return best, False
        choices = run.choices[:depth]
        choices[-1] += 1


def _run(p: _Problem, choices: Sequence[int], dead: set[int] | None, best: int) -> _Run:
    """One order: safe units by priority; at each contended point, the ``choices[k]``-th
    fitting unit in preference order (0 past the end of ``choices``). Past the choices given
    (where this run differs from the last), a point that cannot beat ``best`` units ends it."""
    units, ceiling = p.units, p.ceiling
    x = list(p.start)
    pend = [0] * len(x)
    for u in units:
        for d, b in u.ins:
            pend[d] += b
    unsafe = [ceiling[d] - x[d] < pend[d] for d in range(len(x))]
    waiting = [sum(1 for d, _ in u.ins if unsafe[d]) for u in units]
    remaining = [True] * len(units)
    left = len(units)
    work = len(units)
    safe_heap = [(u.priority, i) for i, u in enumerate(units) if waiting[i] == 0]
    heapq.heapify(safe_heap)

    def frees_contended(i: int) -> int:
        return 0 if any(unsafe[d] for d, _ in units[i].outs) else 1

    choice_heap = [(frees_contended(i), u.choice, i) for i, u in enumerate(units) if waiting[i]]
    heapq.heapify(choice_heap)
    parked: list[list[int]] = [[] for _ in x]
    order: list[int] = []
    taken: list[int] = []
    masks: list[int] = []
    mask = 0

    def run_unit(i: int) -> None:
        nonlocal left, mask
        remaining[i] = False
        left -= 1
        order.append(i)
        if dead is not None:
            mask |= 1 << i
        u = units[i]
        for d, b in u.ins:
            x[d] += b
            pend[d] -= b
        for d, b in u.outs:
            x[d] -= b
        for d, _ in u.ins + u.outs:
            if unsafe[d] and ceiling[d] - x[d] >= pend[d]:
                unsafe[d] = False
                for j in p.by_dest[d]:
                    if remaining[j]:
                        waiting[j] -= 1
                        if waiting[j] == 0:
                            heapq.heappush(safe_heap, (units[j].priority, j))
        for d, _ in u.outs:
            for j in parked[d]:
                if remaining[j]:
                    heapq.heappush(choice_heap, (frees_contended(j), units[j].choice, j))
            parked[d].clear()

    def blocking(i: int) -> int | None:
        for d, b in units[i].ins:
            if x[d] + b > ceiling[d]:
                return d
        return None

    while True:
        while safe_heap:
            _, i = heapq.heappop(safe_heap)
            if remaining[i]:
                run_unit(i)
        if left == 0:
            return _Run(order, x, taken, masks, work, complete=True, natural=True)
        if dead is not None:
            masks.append(mask)
            if mask in dead:
                return _Run(order, x, taken, masks, work, complete=False, natural=False)
        if best >= 0 and len(taken) >= len(choices) - 1:
            work += len(units)
            rest = [i for i in range(len(units)) if remaining[i]]
            if len(order) + left - len(_hopeless(units, x, ceiling, rest)) <= best:
                return _Run(order, x, taken, masks, work, complete=False, natural=False)
        want = choices[len(taken)] if len(taken) < len(choices) else 0
        fitting: list[tuple[int, tuple[int, float, str, int], int]] = []
        while choice_heap and len(fitting) <= want:
            entry = heapq.heappop(choice_heap)
            flag, prio, i = entry
            if not remaining[i]:
                continue
            now = frees_contended(i)
            if now != flag:  # a source became safe since: it sorts later now
                heapq.heappush(choice_heap, (now, prio, i))
                continue
            blocked_on = blocking(i)
            if blocked_on is None:
                fitting.append(entry)
            else:
                parked[blocked_on].append(i)
        if len(fitting) <= want:
            for entry in fitting:
                heapq.heappush(choice_heap, entry)
            return _Run(order, x, taken, masks, work, complete=False, natural=want == 0)
        for entry in fitting[:-1]:
            heapq.heappush(choice_heap, entry)
        taken.append(want)
        run_unit(fitting[-1][2])


# -- waves -----------------------------------------------------------------------------------


def _pack(p: _Problem, order: list[int], cap: int | None) -> list[list[int]]:
    """Waves from a one-at-a-time order (see the module docstring): a unit joins the wave when
    the wave's peaks fit and no unit left for later loses the room it had at its turn."""
    units, ceiling = p.units, p.ceiling
    x = list(p.start)
    rest = order
    waves: list[list[int]] = []
    while rest:
        incoming: dict[int, int] = defaultdict(int)
        later_peak: dict[int, int] = {}
        """disk → the highest peak of a unit left for later, counting bytes brought forward."""
        z = list(x)
        """the one-at-a-time state before the unit scanned."""
        wave: list[int] = []
        kept: list[int] = []
        count = 0
        for pos, i in enumerate(rest):
            u = units[i]
            fits = cap is None or count + len(u.moves) <= cap
            if fits:
                fits = all(x[d] + incoming[d] + b <= ceiling[d] for d, b in u.ins) and all(
                    d not in later_peak or later_peak[d] + b <= ceiling[d] for d, b in u.rises
                )
            if fits:
                wave.append(i)
                count += len(u.moves)
                for d, b in u.ins:
                    incoming[d] += b
                for d, b in u.rises:
                    if d in later_peak:
                        later_peak[d] += b
            else:
                kept.append(i)
                for d, b in u.ins:
                    later_peak[d] = max(later_peak.get(d, z[d] + b), z[d] + b)
            for d, b in u.ins:
                z[d] += b
            for d, b in u.outs:
                z[d] -= b
            if cap is not None and count >= cap:
                kept.extend(rest[pos + 1 :])
                break
        assert wave, "the first unit of a valid order always fits a wave of its own"
        for i in wave:
            for d, b in units[i].ins:
                x[d] += b
            for d, b in units[i].outs:
                x[d] -= b
        waves.append(wave)
        rest = kept
    return waves


# -- what could not go -----------------------------------------------------------------------


def _blocked(
    p: _Problem, left: list[tuple[_Unit, bool]], end: list[int], threshold: float
) -> list[Unscheduled]:
    """Each stuck move with the disks that cannot take its partition's bytes at the end of the
    last wave, and what stuck moves would take off them (a cycle waits on itself). The flag
    says whether the search proved that no order runs it."""
    leaving: dict[int, int] = defaultdict(int)
    for u, _ in left:
        for d, b in u.outs:
            leaving[d] += b
    out: list[Unscheduled] = []
    for u, proven in left:
        why = (
            "no order of the plan gives it room"
            if proven
            else "no order giving it room was found within the search budget"
        )
        blockers: list[Blocker] = []
        parts: list[str] = []
        for d, b in u.ins:
            if end[d] + b <= p.ceiling[d]:
                continue
            disk = p.disks[d]
            blocker = Blocker(disk.ref, b, p.ceiling[d] - end[d], leaving.get(d, 0))
            blockers.append(blocker)
            used = end[d] - disk.reserved_bytes
            part = (
                f"{disk.ref} has {max(blocker.available_bytes, 0)} of the {b} bytes it would "
                f"take below {threshold:.0%} of {disk.capacity_bytes} ({used} used, "
                f"{disk.reserved_bytes} reserved by other moves, {disk.headroom_bytes} headroom)"
            )
            if blocker.leaving_bytes:
                part += (
                    f", waiting for {blocker.leaving_bytes} bytes that stuck moves would take off"
                )
            parts.append(part)
        name = f"{u.moves[0].topic}-{u.moves[0].partition}"
        message = f"{name}: {why}: " + "; ".join(parts)
        out.extend(Unscheduled(m, StuckReason.NO_ROOM, message, tuple(blockers)) for m in u.moves)
    return out
