"""How far a PartitionReassignment is, pure: the bytes its new replicas copied and have to
copy, the rate since its start and the ETA.

Its own module because it is its own job: ``plan.reassignment`` decides the steps, this
measures them from the same observation (each broker's dirs, the partition state of record)
for the status' progress fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..models.reassignment import OriginalAssignment, PartitionReassignment
from .conditions import parse_iso
from .port_types import TP, BrokerDirs, PartView, TopicView

Brokers = Mapping[int, BrokerDirs | None]
"""Each broker's dirs as described (None: it did not answer)."""


def partition_size(brokers: Brokers, pv: PartView) -> int:
    """The partition's size: what its leader (else any settled replica) holds."""
    for b in (pv.leader, *[b for b in pv.replicas if b not in pv.adding]):
        bd = brokers.get(b)
        d = bd.locate(*pv.key) if bd is not None else None
        if d is not None:
            return d.replicas[pv.key]
    return 0


def bytes_moved_now(brokers: Brokers, pv: PartView) -> int:
    """What the new replicas of the step in flight hold so far."""
    total = 0
    for b in pv.adding:
        bd = brokers.get(b)
        d = bd.locate(*pv.key) if bd is not None else None
        if d is not None:
            total += d.replicas[pv.key]
    return total


def totals(
    pr: PartitionReassignment,
    original: Sequence[OriginalAssignment],
    topics: Mapping[str, TopicView],
    brokers: Brokers,
) -> tuple[int, int]:
    """Bytes moved and to move: each new replica copies its partition once."""
    moved = to_move = 0
    targets: dict[TP, tuple[int, ...]] = {
        (t.topic, t.partition): tuple(t.replicas) for t in pr.spec.partitions
    }
    for o in original:
        tv = topics.get(o.topic)
        pv = tv.partitions.get(o.partition) if tv else None
        if pv is None:
            continue
        size = partition_size(brokers, pv)
        new = set(targets.get((o.topic, o.partition), ())) - set(o.replicas)
        to_move += size * len(new)
        settled = {b for b in pv.replicas if b not in pv.adding}
        moved += size * len(new & settled)
        moved += min(bytes_moved_now(brokers, pv), size * len(set(pv.adding) & new))
    return moved, to_move


def rate_and_eta(
    start_time: str | None, now: float, moved: int, to_move: int
) -> tuple[int | None, int | None]:
    """The average rate since the start, and the ETA of what is left at that rate."""
    if start_time is None:
        return None, None
    elapsed = now - parse_iso(start_time, now)
    if elapsed <= 0 or moved <= 0:
        return None, None
    rate = int(moved / elapsed)
    return rate, (int(max(0, to_move - moved) / rate) if rate > 0 else None)


def progress_percent(*, moved: int, to_move: int, done: int, total: int) -> int:
    """``progressPercent``: the bytes copied of the bytes to copy, the figure the bytes, rate
    and ETA fields give (counted by finished partitions, one big partition showed 0% for most
    of its move). Where nothing is to copy (a reorder of the leaders, empty partitions) the
    finished partitions say it. Never 100 before every partition is done: a partition whose
    bytes are copied still has its step to end (the ISR, the shrink, its dir)."""
    by_bytes = to_move > 0
    percent = 100 * min(moved, to_move) // to_move if by_bytes else 100 * done // max(total, 1)
    return percent if done >= total else min(percent, 99)
