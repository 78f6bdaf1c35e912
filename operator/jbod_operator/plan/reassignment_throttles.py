"""A PartitionReassignment's replication throttles, pure: which brokers get which throttle in
a pass, and which are lifted.

Its own module because it is its own rule (KIP-73's throttled replicas over a reassignment's
steps) with its own inputs: the steps catching up, the brokers' throttles as read and the
brokers the status lists. ``plan.reassignment`` calls :func:`plan_throttles` once a pass,
after the steps were decided, and at the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..models.reassignment import PartitionReassignment, PartitionReassignmentStatus
from .port_types import TP, PartView, Throttle, ThrottleSeen


@dataclass(frozen=True)
class ThrottlePlan:
    """One pass' throttles: the actions, and the brokers the status lists from now on."""

    actions: tuple[Throttle, ...]
    throttled_brokers: list[int]
    """Brokers that hold (or may hold) this resource's throttle after the actions: the set
    ones, and the ones to lift that are not live (a lift has not reached them yet)."""


def plan_throttles(
    pr: PartitionReassignment,
    adding: Mapping[TP, tuple[PartView, PartView]],
    *,
    listed: Sequence[int],
    seen: Mapping[int, ThrottleSeen],
    live: frozenset[int],
    cluster_size: int | None,
) -> ThrottlePlan:
    """The throttle on the leaders and new followers of the steps catching up (``adding``:
    per partition, the entry read and the one this pass writes; empty at the end); lifted
    from every broker that may hold it and no longer needs it.

    A broker may hold it when the status lists it (``listed``: ``recorded_first`` lists a
    broker before its throttle is set) or when its throttle, as read (``seen``), names one of
    this resource's partitions (or has a rate and names nothing: a throttle left of a lift
    that cleared the lists only). A broker that is not live now keeps its place on the list
    until a lift reaches it: dropped unlifted, a broker that an operator just taking over had
    not heard from yet, or a Kafka broker restarting (Kafka keeps the configs), stayed
    throttled after the end, under a status listing no broker.

    The throttled-replica lists are set even without a throttle (rate 0, no limit): they are
    how a broker knows which replication is reassignment traffic, so its
    ReassignmentBytesIn/Out metrics count an unthrottled move too (as Kafka's do)."""
    scope = scope_of(pr)
    leaders: dict[int, set[TP]] = {}
    followers: dict[int, set[TP]] = {}
    for key, (read, pv) in adding.items():
        # A step started in this pass is in the entry written, not in the one read: its new
        # replicas fetch as soon as they are told, so they are throttled from now. A step
        # that goes out with its first replica's election is served by the leader read until
        # Kafka has elected the one written: both listed.
        for lead in {pv.leader, read.leader}:
            if lead >= 0:
                leaders.setdefault(lead, set()).add(key)
        for b in pv.adding:
            followers.setdefault(b, set()).add(key)
    rate = pr.spec.throttle_bytes_per_second or 0
    involved = set(leaders) | set(followers)
    actions = [
        Throttle(b, rate, frozenset(leaders.get(b, ())), frozenset(followers.get(b, ())), scope)
        for b in sorted(involved & live)
    ]
    held = set(listed) | {
        b for b, t in seen.items() if t.replicas & scope or (t.rate and not t.replicas)
    }
    size = cluster_size if cluster_size is not None else 1 << 31
    lift = {b for b in held - involved if b < size}
    actions += [Throttle(b, 0, frozenset(), frozenset(), scope) for b in sorted(lift & live)]
    return ThrottlePlan(tuple(actions), sorted(involved | (lift - live)))


def scope_of(pr: PartitionReassignment) -> frozenset[TP]:
    """The partitions ``pr`` names: the replicas its throttles may set and lift."""
    return frozenset((t.topic, t.partition) for t in pr.spec.partitions)


def throttles_to_lift(status: PartitionReassignmentStatus | None) -> bool:
    """Whether an ended reassignment still lists brokers whose throttle no lift has reached
    (they were not live at its end): it is followed until one has."""
    return status is not None and bool(status.throttled_brokers)
