"""Scaling brokers down (issue 16): refused while a broker that would go still holds replicas.

A StatefulSet scales down from its highest ordinal, so lowering ``spec.replicas`` from M to N
removes brokers N..M-1 with their disks' data. Strimzi (KafkaNodePool) and Kafka's own tools
refuse that while the brokers hold partitions; so do we: the StatefulSet keeps M replicas, the
BrokerCluster gets the condition ``ScaleDownBlocked`` naming each broker and how many replicas
it still holds, and the remedy (a Rebalance in mode ``remove-brokers`` naming them, which moves
their replicas away). Once the Topic statuses (the state of record) show them empty, the
decrease goes ahead. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CONDITION = "ScaleDownBlocked"
REASON_BLOCKED = "BrokersHoldReplicas"
REASON_CLEAR = "NoBrokerToEmpty"

_ROLES = ("replicas", "addingReplicas", "removingReplicas", "targetReplicas")
"""Every way a Topic status names a broker for a partition: its replicas, and those a
reassignment is adding, still deleting, or moving to (KIP-455)."""


def replicas_per_broker(topics: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """How many partitions each broker holds or is about to hold, by the Topic statuses."""
    held: dict[int, int] = {}
    for t in topics:
        for p in (t.get("status") or {}).get("partitions") or []:
            brokers: set[int] = set()
            for role in _ROLES:
                for r in p.get(role) or ():
                    brokers.add(int(r["brokerId"]) if isinstance(r, Mapping) else int(r))
            for b in brokers:
                held[b] = held.get(b, 0) + 1
    return held


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    replicas: int
    """What the StatefulSet gets: the spec's, or the current count while the decrease waits."""
    blocked: dict[int, int] = field(default_factory=dict)
    """The brokers that would go but still hold replicas, with how many."""
    message: str = ""


def decide_replicas(current: int | None, desired: int, held: Mapping[int, int]) -> ScaleDecision:
    """``current``: the StatefulSet's replicas now (None: not created yet)."""
    if current is None or desired >= current:
        return ScaleDecision(desired)
    leaving = list(range(desired, current))
    blocked = {b: held[b] for b in leaving if held.get(b, 0) > 0}
    if not blocked:
        return ScaleDecision(desired)
    holders = "; ".join(
        f"broker {b} still holds {n} replica{'s' if n != 1 else ''}" for b, n in blocked.items()
    )
    message = (
        f"spec.replicas {desired} would remove broker{'s' if len(leaving) > 1 else ''} "
        f"{', '.join(map(str, leaving))}, but {holders}; keeping {current} brokers. Empty them "
        f"first with a Rebalance (mode: remove-brokers, brokers: {leaving})"
    )
    return ScaleDecision(current, blocked, message)
