"""Where replicas go: brokers for a topic's partitions, then a log dir on each broker. Pure.

Brokers: Kafka's ``AdminUtils.assignReplicasToBrokers``, made deterministic. The live brokers
are arranged rack-alternated (``getRackAlternatedBrokerList``: racks sorted, brokers of each rack
sorted by id, one rack after the other), so that walking the list visits every rack in turn.
Partition *p* gets its leader at ``arranged[(p + start) % n]``; the followers are found by
stepping from the leader by ``1 + (shift + k) % (n - 1)``, where the shift grows by one every
*n* partitions (so followers do not always sit right after their leader). With racks, a
follower is skipped while its rack already has a replica and some rack has none, or while its
broker already has one and some broker has none. Hence:

- the replicas of a partition are on distinct brokers and on ``min(rf, racks)`` distinct racks;
- leaders go round the arranged list, so over any run of consecutive partition ids each broker
  leads the same number of partitions, give or take one;
- the same input always gives the same output (Kafka draws ``start`` and ``shift`` at random;
  here both come from ``seed_offset``, e.g. a stable hash of the topic name, so that different
  topics do not all start on the same broker).

A partition count increase keeps every existing assignment and continues the pattern where
partition 0 started (Kafka's ``addPartitions`` does the same, with ``startPartitionId``).

Log dirs: :func:`choose_log_dir` is the broker's rule (``jbod_broker.storage.placement``: the
live, non-cordoned dir with the most usable bytes, then the fewest replicas, then config order),
plus an account of the replicas already planned in the same pass, so that a batch of new
partitions does not all land on the same directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PLANNED_REPLICA_BYTES",
    "BrokerInfo",
    "DirUsage",
    "assign_partitions",
    "choose_log_dir",
    "plan_log_dirs",
    "rack_alternated",
]

DEFAULT_PLANNED_REPLICA_BYTES = 1 << 30
"""What a replica planned in this pass is assumed to take soon: one segment at the broker's
default ``log.segment.bytes`` (1 GiB). New replicas are empty, so without some estimate the
directory with the most free space would take every one of them."""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    rack: str | None = None
    live: bool = True


@dataclass(frozen=True, slots=True)
class DirUsage:
    """One log dir of one broker as it reports it (``describe_log_dirs`` / status)."""

    name: str
    path: str
    live: bool
    cordoned: bool
    usable_bytes: int
    replicas: int


def rack_alternated(brokers: Sequence[BrokerInfo]) -> list[int]:
    """Broker ids with racks interleaved: racks sorted, brokers sorted by id within a rack,
    then the first of each rack, the second of each rack, ... (Kafka's order). Without racks:
    the ids sorted."""
    by_rack: dict[str, list[int]] = {}
    for b in brokers:
        by_rack.setdefault(b.rack or "", []).append(b.id)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    depth = max((len(q) for q in queues), default=0)
    for i in range(depth):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def _follower_index(first: int, shift: int, k: int, n: int) -> int:
    return (first + 1 + (shift + k) % (n - 1)) % n


def _live_brokers(brokers: Sequence[BrokerInfo], rf: int) -> list[BrokerInfo]:
    ids = [b.id for b in brokers]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"broker ids listed twice: {dup}")
    if rf < 1:
        raise ValueError(f"replication factor must be at least 1, got {rf}")
    live = [b for b in brokers if b.live]
    if rf > len(live):
        raise ValueError(
            f"replication factor {rf} is larger than the number of live brokers "
            f"({len(live)}: {sorted(b.id for b in live)})"
        )
    racked = [b for b in live if b.rack is not None]
    if racked and len(racked) != len(live):
        missing = sorted(b.id for b in live if b.rack is None)
        raise ValueError(
            f"brokers {missing} have no rack while others do; rack-aware assignment needs "
            "a rack on every live broker"
        )
    return live


def assign_partitions(
    partitions: Iterable[int],
    rf: int,
    brokers: Sequence[BrokerInfo],
    *,
    existing: Mapping[int, Sequence[int]] | None = None,
    seed_offset: int = 0,
) -> dict[int, list[int]]:
    """Replica lists (leader first) for every partition id in ``partitions``.

    Ids already in ``existing`` keep their replicas, unchanged (even on brokers now down);
    ``existing`` ids not in ``partitions`` are not returned. New partitions continue the
    pattern of partition 0 when it is in ``existing`` and its leader is live, so that leaders
    stay balanced after an increase; otherwise the pattern starts at ``seed_offset``.
    Only live brokers receive replicas.

    Raises ValueError when ``rf`` is below 1 or above the number of live brokers, when a broker
    id is listed twice, or when some live brokers have a rack and others do not.
    """
    live = _live_brokers(brokers, rf)
    arranged = rack_alternated(live)
    rack = {b.id: b.rack for b in live}
    n = len(arranged)
    n_racks = len(set(rack.values()))
    old = existing or {}
    start = seed_offset % n
    first_old = old.get(0)
    if first_old and first_old[0] in rack:
        start = arranged.index(first_old[0])
    out: dict[int, list[int]] = {}
    for p in partitions:
        if p < 0:
            raise ValueError(f"partition ids cannot be negative, got {p}")
        if p in old:
            out[p] = list(old[p])
            continue
        # Kafka bumps the shift each time the partition id wraps round the broker list.
        shift = start + p // n
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack[leader]}
        k = 0
        while len(replicas) < rf:
            candidate = arranged[_follower_index(first, shift * n_racks, k, n)]
            k += 1
            if candidate in replicas:
                continue
            if rack[candidate] in racks_used and len(racks_used) < n_racks:
                continue
            replicas.append(candidate)
            racks_used.add(rack[candidate])
        out[p] = replicas
    return out


def _eligible(dirs: Sequence[DirUsage]) -> list[tuple[int, DirUsage]]:
    eligible = [(i, d) for i, d in enumerate(dirs) if d.live and not d.cordoned]
    if not eligible:
        cordoned = any(d.live for d in dirs)
        raise ValueError(
            "no live log directory can take a new replica"
            + (" (the live ones are cordoned)" if cordoned else "")
        )
    return eligible


def choose_log_dir(
    dirs: Sequence[DirUsage],
    planned: Mapping[str, int] | None = None,
    *,
    planned_replica_bytes: int = DEFAULT_PLANNED_REPLICA_BYTES,
) -> DirUsage:
    """The dir of one broker that gets its next new replica.

    Among the live, non-cordoned dirs: the most usable bytes, then the fewest replicas, then
    the earliest in ``dirs`` (the broker's rule). ``planned`` counts, by dir name, the replicas
    this pass already put there: each takes ``planned_replica_bytes`` from the usable bytes
    and counts as a replica. Raises ValueError when no dir qualifies.
    """
    counts = planned or {}

    def key(item: tuple[int, DirUsage]) -> tuple[int, int, int]:
        i, d = item
        extra = counts.get(d.name, 0)
        return (-(d.usable_bytes - extra * planned_replica_bytes), d.replicas + extra, i)

    return min(_eligible(dirs), key=key)[1]


def plan_log_dirs(
    dirs: Sequence[DirUsage],
    count: int,
    planned: Mapping[str, int] | None = None,
    *,
    planned_replica_bytes: int = DEFAULT_PLANNED_REPLICA_BYTES,
) -> list[DirUsage]:
    """Dirs for ``count`` new replicas of one broker, chosen one after the other with
    :func:`choose_log_dir`, each choice counted for the next."""
    counts = dict(planned or {})
    out: list[DirUsage] = []
    for _ in range(count):
        d = choose_log_dir(dirs, counts, planned_replica_bytes=planned_replica_bytes)
        counts[d.name] = counts.get(d.name, 0) + 1
        out.append(d)
    return out
