"""The vocabulary of the step port (``plan.execution``): the observations its methods
return and the actions they take, for LogDirMoves and PartitionReassignments alike (and the
record a Rebalance reads).

The port, both of its adapters (``control.our_brokers`` over our brokers,
``control.kafka_*`` over Kafka's Admin API) and the pure planners (``plan.logdirmove``,
``plan.reassignment``) import these from here and from nowhere else: an adapter needs no
planner to know what it is asked, and a planner's size says what it decides, not what it
speaks in. Plain frozen data (with ``broker_dirs``, our describe-log-dirs read as
:class:`BrokerDirs`, and ``id_ranges``, broker ids as messages name them), no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from jbod_broker import wire
from jbod_broker.storage.room import DirSpace, Headroom, RoomVerdict, check_room

from ..models.log_dir_move import Drain

TP = tuple[str, int]
"""(topic, partition)."""

ReplicaKey = tuple[int, str, int]
"""(broker, topic, partition)."""


def id_ranges(ids: Iterable[int]) -> str:
    """Broker ids as a person reads them, runs joined: ``0-5``, ``1-4``, ``1-2, 4``."""
    runs: list[list[int]] = []
    for b in sorted(set(ids)):
        if runs and b == runs[-1][-1] + 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs) or "none"


# -- what the brokers hold ----------------------------------------------------------------


@dataclass(frozen=True)
class Dir:
    name: str
    path: str
    live: bool
    cordoned: bool
    usable_bytes: int
    replicas: dict[tuple[str, int], int]
    """(topic, partition) → size, current replicas only."""
    futures: frozenset[tuple[str, int]] = frozenset()
    total_bytes: int = 0
    reserved_bytes: int = 0
    """What moves and new replicas in flight to it still have to write (the broker's figure)."""
    headroom_bytes: int = 0
    """What the broker keeps free on it."""
    can_cordon: bool = True
    """Whether its broker can cordon it (ours always; Apache Kafka from 4.3, KIP-1066)."""

    def room_for(self, need_bytes: int) -> RoomVerdict:
        """The broker's own rule, with the figures the broker reported."""
        space = DirSpace(self.path, self.total_bytes, self.usable_bytes, self.reserved_bytes)
        return check_room(space, need_bytes, Headroom(bytes=self.headroom_bytes))


@dataclass(frozen=True)
class BrokerDirs:
    broker: int
    dirs: tuple[Dir, ...]

    def locate(self, topic: str, partition: int) -> Dir | None:
        return next((d for d in self.dirs if (topic, partition) in d.replicas), None)

    def find(self, ref: str) -> Dir | None:
        """A dir by its BrokerCluster name (``a``), folder name (``data-a``) or absolute path."""
        return next((d for d in self.dirs if wire.refers_to_log_dir(ref, d.path)), None)

    def has_future(self, key: tuple[str, int]) -> bool:
        return any(key in d.futures for d in self.dirs)


def broker_dirs(broker: int, desc: wire.DescribeLogDirsResponse) -> BrokerDirs:
    dirs = []
    for d in desc.log_dirs:
        dirs.append(
            Dir(
                name=wire.log_dir_short_name(d.path),
                path=d.path,
                live=d.is_live,
                cordoned=d.cordoned,
                usable_bytes=d.usable_bytes,
                replicas={(p.topic, p.partition): p.size for p in d.partitions if not p.is_future},
                futures=frozenset((p.topic, p.partition) for p in d.partitions if p.is_future),
                total_bytes=d.total_bytes,
                reserved_bytes=d.reserved_bytes,
                headroom_bytes=d.headroom_bytes,
            )
        )
    return BrokerDirs(broker, tuple(dirs))


# -- the partition state of record --------------------------------------------------------


@dataclass(frozen=True)
class PartView:
    """One ``Topic.status.partitions[]`` entry, typed: the partition state of record."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    dirs: tuple[str | None, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    target: tuple[int, ...] = ()
    reassigned_by: str | None = None

    @classmethod
    def from_status(cls, topic: str, s: Mapping[str, Any]) -> PartView:
        return cls(
            topic=topic,
            partition=int(s["partition"]),
            replicas=tuple(int(r["brokerId"]) for r in s["replicas"]),
            dirs=tuple(r.get("logDir") for r in s["replicas"]),
            leader=int(s["leader"]),
            leader_epoch=int(s["leaderEpoch"]),
            isr=tuple(int(x) for x in s["isr"]),
            partition_epoch=int(s.get("partitionEpoch", 0)),
            adding=tuple(int(x) for x in s.get("addingReplicas") or ()),
            removing=tuple(int(x) for x in s.get("removingReplicas") or ()),
            target=tuple(int(x) for x in s.get("targetReplicas") or ()),
            reassigned_by=s.get("reassignedBy"),
        )

    def to_status(self, s: Mapping[str, Any]) -> dict[str, Any]:
        """``s`` (the entry as read) with this view's fields written over it."""
        out: dict[str, Any] = {
            **s,
            "replicas": [
                {"brokerId": b, **({"logDir": d} if d else {})}
                for b, d in zip(self.replicas, self.dirs, strict=True)
            ],
            "leader": self.leader,
            "leaderEpoch": self.leader_epoch,
            "isr": list(self.isr),
            "partitionEpoch": self.partition_epoch,
            "addingReplicas": list(self.adding),
            "removingReplicas": list(self.removing),
            "targetReplicas": list(self.target),
        }
        out.pop("reassignedBy", None)
        if self.reassigned_by:
            out["reassignedBy"] = self.reassigned_by
        return out

    @property
    def key(self) -> TP:
        return (self.topic, self.partition)

    @property
    def deleting(self) -> bool:
        """After a shrink (or a cancelled step): dropped replicas whose deletion is pending."""
        return bool(self.removing) and not set(self.removing) & set(self.replicas)

    @property
    def in_step(self) -> bool:
        """A step written and not shrunk yet (new replicas catching up)."""
        return bool(self.adding) or (bool(self.removing) and not self.deleting)

    def dir_of(self, broker: int) -> str | None:
        for b, d in zip(self.replicas, self.dirs, strict=True):
            if b == broker:
                return d
        return None


@dataclass(frozen=True)
class TopicView:
    resource: str
    """The Topic resource's ``metadata.name`` (what the handler writes)."""
    name: str
    """The Kafka name."""
    min_isr: int
    partitions: Mapping[int, PartView]
    deleting: bool = False


@dataclass(frozen=True)
class ThrottleSeen:
    """A broker's replication throttle as the broker (or Kafka's DescribeConfigs) reports it:
    what the end of a reassignment checks it lifted, whatever its status lists."""

    rate: int
    """The throttled rate (0: none)."""
    replicas: frozenset[TP]
    """The replicas its throttle applies to, as leader or as follower (on Kafka: of the
    topics the reassignment names, the ones whose throttled-replica lists name this
    broker)."""


@dataclass(frozen=True)
class ClusterSeen:
    """What a PartitionReassignment pass reads of the cluster before it takes the lock."""

    size: int
    """How many brokers it has (``Observed.cluster_size``)."""
    dir_names: tuple[str, ...]
    """The log dir names every broker has (``Observed.cluster_dirs``)."""
    brokers: Mapping[int, BrokerDirs | None]
    """Each broker's dirs (None: it did not answer)."""
    broker_ids: frozenset[int] | None = None
    """The ids of the brokers the cluster has, up or down (``Observed.broker_ids``); None:
    ``0 .. size - 1``, a BrokerCluster's."""


@dataclass(frozen=True)
class PartitionsSeen:
    """The partition state of record of the cluster, as ``plan.reassignment`` reads it."""

    topics: Mapping[str, TopicView]
    """By Kafka name: the wanted topics that exist."""
    busy: Mapping[int, int] = field(default_factory=dict)
    """Per broker: replicas being added or removed for another reassignment."""
    claims: Mapping[TP, str] = field(default_factory=dict)
    """Partitions another reassignment is moving, with its kind and name."""
    others_in_flight: int = 0
    """How many partitions other reassignments move anywhere in the cluster (counted against
    the partition limit)."""


@dataclass(frozen=True)
class ClusterRecord:
    """What a Rebalance pass reads of its cluster besides a snapshot."""

    size: int
    """The plans' cluster size: every broker id is below it."""
    dir_names: tuple[str, ...]
    """The log dir names brokers have (by the spec where there is one), for the spec's checks
    while no broker was described."""
    fingerprint: Mapping[str, str]
    """What placement depends on, per object (``plan.rebalance.fingerprint_of``)."""
    held: Mapping[int, int]
    """Per broker, the replicas the state of record puts on it (a remove-brokers Rebalance
    is done when its brokers hold none)."""
    broker_ids: frozenset[int] | None = None
    """The brokers the cluster has, down ones included (None: 0 to ``size`` - 1, a
    BrokerCluster's). A Kafka cluster's ids need not start at 0 nor be dense."""


# -- a LogDirMove's actions and their answers ---------------------------------------------


@dataclass(frozen=True)
class Cordon:
    """Cordon (or lift the cordon of) a drained dir: no new replica lands there."""

    drain: Drain
    on: bool


@dataclass(frozen=True)
class SetThrottle:
    """``intra.broker.throttled.rate`` on these brokers (0 lifts it)."""

    brokers: tuple[int, ...]
    rate: int


@dataclass(frozen=True)
class CancelMoves:
    """Destination "any" for each replica: the broker stops the copy, drops the future."""

    replicas: tuple[ReplicaKey, ...]


@dataclass(frozen=True)
class Resend:
    """Ask again for a move the broker forgot (it restarted): idempotent, answer unused."""

    replica: ReplicaKey
    target: str


@dataclass(frozen=True)
class Start:
    """Start a pending replica's move; its answer goes to :func:`settle`."""

    replica: ReplicaKey
    target: str


@dataclass(frozen=True)
class RecordInTopic:
    """Write the replica's new dir into its Topic's status (the partition state of record)."""

    replica: ReplicaKey
    path: str


class StartAnswer(StrEnum):
    """How a broker answered a :class:`Start`."""

    ACCEPTED = "Accepted"
    BROKER_AWAY = "BrokerAway"
    """It could not be reached (restarting): try again on the next pass."""
    NOT_THERE_YET = "NotThereYet"
    """REPLICA_NOT_AVAILABLE: KIP-113 says wait for it up to replicaWaitSeconds."""
    REFUSED = "Refused"


@dataclass(frozen=True)
class StartResult:
    replica: ReplicaKey
    answer: StartAnswer
    message: str = ""


# -- a PartitionReassignment's actions ----------------------------------------------------


@dataclass(frozen=True)
class WritePartition:
    """Write this entry into its Topic's status (first: the state of record)."""

    topic_resource: str
    view: PartView


@dataclass(frozen=True)
class PreferDir:
    """KIP-113: the broker creates the replica it does not hold yet in this dir."""

    broker: int
    topic: str
    partition: int
    log_dir: str


@dataclass(frozen=True)
class Tell:
    """LeaderAndIsr of the written entry to ``brokers`` (``new`` ones as new replicas)."""

    topic: str
    partition: int
    brokers: frozenset[int]
    new: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Delete:
    """StopReplica with delete: a dropped replica goes away."""

    broker: int
    topic: str
    partition: int


@dataclass(frozen=True)
class Throttle:
    """Replication throttles on one broker: the rate and the replicas it applies to, as
    leader and as follower (Kafka's throttled-replicas configs); rate 0 and empty sets lift
    it."""

    broker: int
    rate: int
    leader_replicas: frozenset[TP]
    follower_replicas: frozenset[TP]
    scope: frozenset[TP] = frozenset()
    """The partitions of the resource that sets it: what it replaces of the broker's
    throttled replicas (the others, another reassignment's, are kept)."""


@dataclass(frozen=True)
class RecordDirs:
    """The partition state of record follows its replicas: each ``(broker, path)`` is where
    that broker's describe-log-dirs shows the replica, which the Topic's status did not say
    (a replica created with "any", or moved in place to its named dir). Nothing is sent to a
    broker: the record only catches up with what the brokers hold."""

    topic_resource: str
    topic: str
    partition: int
    dirs: tuple[tuple[int, str], ...]
