"""Leader election and ISR rules of the controller, on plain data. Pure: no I/O.

Kafka's rules, KIP-112 included:
- A replica is *available* when its broker is live and its log dir is not offline.
- The ISR loses every unavailable member (it cannot be in sync). If that would empty it, the
  last ISR is kept as it was: those replicas hold every committed record, and the partition
  waits for one of them to come back (unclean election is off).
- A leader that became unavailable is replaced by the first available ISR member in replica
  order; with none, the partition is offline (leader -1).
- Preferred leader election: when the preferred replica (first in the assignment) is available
  and in the ISR, leadership returns to it (``auto.leader.rebalance.enable``, on by default).
- Every leader change bumps the leader epoch; every leader or ISR change bumps the partition
  epoch (what AlterPartition is checked against).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

NO_LEADER = -1


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    offline_replicas: tuple[int, ...] = ()
    """Replicas whose broker is live but whose log dir failed (KIP-112)."""

    @property
    def preferred(self) -> int:
        return self.replicas[0]


@dataclass(frozen=True)
class Decision:
    before: PartitionView
    after: PartitionView

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def leader_changed(self) -> bool:
        return (self.before.leader, self.before.leader_epoch) != (
            self.after.leader,
            self.after.leader_epoch,
        )


def decide(p: PartitionView, live: set[int], *, preferred_election: bool = True) -> Decision:
    """The partition's next state given which brokers are live."""
    available = {r for r in p.replicas if r in live and r not in p.offline_replicas}
    isr = tuple(r for r in p.isr if r in available)
    if not isr:
        isr = p.isr  # nobody left in sync: keep the last ISR, never elect outside it
    leader = p.leader
    if leader not in available or leader not in isr:
        candidates = [r for r in p.replicas if r in isr and r in available]
        leader = candidates[0] if candidates else NO_LEADER
    if (
        preferred_election
        and leader != p.preferred
        and p.preferred in available
        and p.preferred in isr
    ):
        leader = p.preferred
    leader_epoch = p.leader_epoch + (1 if leader != p.leader else 0)
    partition_epoch = p.partition_epoch + (1 if (leader != p.leader or isr != p.isr) else 0)
    after = replace(
        p, leader=leader, leader_epoch=leader_epoch, isr=isr, partition_epoch=partition_epoch
    )
    return Decision(p, after)


def validate_alter_partition(
    p: PartitionView,
    broker: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: list[int],
    fenced: frozenset[int] = frozenset(),
) -> str | None:
    """The Kafka error an AlterPartition deserves, or None to apply it.

    ``fenced``: brokers the controller knows are not alive (no heartbeat within the session
    timeout). As KIP-841 has it, an ISR may not grow to one of them: a leader can still hold
    a fetch a follower sent before it died, answer it later and count the follower caught up.
    Shrinking never needs a live broker."""
    if broker != p.leader or leader_epoch != p.leader_epoch:
        return "FENCED_LEADER_EPOCH"
    if partition_epoch != p.partition_epoch:
        return "INVALID_UPDATE_VERSION"
    if not set(new_isr) <= set(p.replicas) or p.leader not in new_isr:
        return "INVALID_REQUEST"
    if set(new_isr) & set(p.offline_replicas):
        return "INELIGIBLE_REPLICA"
    if (set(new_isr) - set(p.isr)) & fenced:
        return "INELIGIBLE_REPLICA"
    return None


def settled(
    s: Mapping[str, Any], live: set[int], dead: set[int], *, preferred_election: bool = True
) -> bool:
    """Whether :func:`decide` and :func:`apply_to_status` would leave state ``s`` as it is,
    checked without building its view: every ISR member live, no replica offline or dead,
    the leader in the ISR and, with preferred election, the preferred replica leading or
    out of the ISR. Nearly every partition of a healthy cluster is, so a pass over 200,000
    of them costs a check each rather than a decision each (issue 39)."""
    if s.get("diskOfflineReplicas") or s.get("offlineReplicas"):
        return False
    isr = s["isr"]
    leader = s["leader"]
    if leader not in isr or not all(r in live for r in isr):
        return False
    replicas = s["replicas"]
    if dead and any(r["brokerId"] in dead for r in replicas):
        return False
    preferred = replicas[0]["brokerId"] if replicas else leader
    return not preferred_election or leader == preferred or preferred not in isr


def unchanged(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether ``after`` (from :func:`apply_to_status`) says what ``before`` says: a list
    field ``before`` leaves out is empty (a partition as created has no
    diskOfflineReplicas), so filling it in is no change to write."""
    keys = before.keys() | after.keys()
    return all(before.get(k, []) == after.get(k, []) for k in keys)


def view_from_status(topic: str, s: Mapping[str, Any]) -> PartitionView:
    return PartitionView(
        topic=topic,
        partition=int(s["partition"]),
        replicas=tuple(int(r["brokerId"]) for r in s["replicas"]),
        leader=int(s["leader"]),
        leader_epoch=int(s["leaderEpoch"]),
        isr=tuple(int(x) for x in s["isr"]),
        partition_epoch=int(s.get("partitionEpoch", 0)),
        offline_replicas=tuple(int(x) for x in s.get("diskOfflineReplicas", [])),
    )


def apply_to_status(s: Mapping[str, Any], v: PartitionView, dead: set[int]) -> dict[str, Any]:
    """The status entry for ``v``; offlineReplicas is KIP-112's union: dead brokers' replicas
    and replicas on failed dirs."""
    return {
        **s,
        "leader": v.leader,
        "leaderEpoch": v.leader_epoch,
        "isr": list(v.isr),
        "partitionEpoch": v.partition_epoch,
        "diskOfflineReplicas": sorted(v.offline_replicas),
        "offlineReplicas": sorted(set(v.offline_replicas) | {r for r in v.replicas if r in dead}),
    }
