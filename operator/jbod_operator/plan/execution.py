"""The step-execution interfaces: what a LogDirMove or a PartitionReassignment pass asks of
the cluster it runs on, and nothing else (issue 22).

The pure planners (``plan.logdirmove``, ``plan.reassignment`` over
``plan.reassignment_steps``) and their state machines are one code path. Who executes a step
differs: on our brokers the operator is their controller (it writes the partition state of
record in the Topics' statuses and tells the brokers); on an Apache Kafka cluster Kafka's
controller executes each step and the operator only asks through the Admin API. A handler
resolves an adapter for the named cluster, observes through it, lets the plan decide, carries
the plan's actions out through it and writes its resource's status once. What is read from the
operator's own resources (the other LogDirMoves and PartitionReassignments, which claim
partitions and share the per-broker budget) stays in the handler: it is the same for both.
What the methods return and take (the observations, the actions) is ``plan.port_types``, the
port's one vocabulary: the adapters import it, not the planners.

Each Protocol method names the Kafka Admin API calls an adapter over Kafka's controller would
make; that column is checked by review only (no test can show an unwritten adapter could be
written). The rule: every method is implementable with DescribeCluster, Metadata (replicas,
ISR, leader, leader epoch), DescribeLogDirs (total/usable bytes, cordoned, future replicas),
AlterReplicaLogDirs, AlterPartitionReassignments (a step's replica list; null cancels),
ListPartitionReassignments, DescribeConfigs / IncrementalAlterConfigs (the throttle configs,
``cordoned.log.dirs``, a topic's ``min.insync.replicas``) and ElectLeaders PREFERRED, or with
no call at all where Kafka's controller does the work itself.

LogDirMove (:class:`LogDirMoveExecutor`):

=========================  ==================================  ================================
method                     our brokers (operator=controller)   Kafka Admin API
=========================  ==================================  ================================
cluster_size               BrokerCluster ``spec.replicas``     DescribeCluster (broker ids)
describe_dirs              describe-log-dirs per broker        DescribeLogDirs
describe_moves             describe-replica-log-dirs           DescribeLogDirs (future replica
                                                               size against the current one's)
wait_for_a_move_to_end     the brokers' long poll              no long poll: False (the handler
                                                               paces itself)
reassigning                Topics' ``reassignedBy``            ListPartitionReassignments
start / resend             alter-replica-log-dirs              AlterReplicaLogDirs
cancel                     alter-replica-log-dirs to "any"     AlterReplicaLogDirs back to the
                                                               current dir
set_throttle               intra-broker throttle config        IncrementalAlterConfigs
                                                               ``replica.alter.log.dirs.io.max
                                                               .bytes.per.second``
cordon                     cordon-log-dir                      IncrementalAlterConfigs
                                                               ``cordoned.log.dirs`` (4.3+)
record_placement           the Topic's status (state of        none: Kafka's metadata is the
                           record) gets the new dir            state of record
=========================  ==================================  ================================

PartitionReassignment (:class:`ReassignmentExecutor`):

=========================  ==================================  ================================
method                     our brokers (operator=controller)   Kafka Admin API
=========================  ==================================  ================================
cluster                    BrokerCluster + describe-log-dirs   DescribeCluster + DescribeLogDirs
serialized                 the cluster controller's lock       a per-cluster lock (Kafka's
                           (the one writer of leader/ISR)      controller orders its own writes)
liveness                   the controller's heartbeats         DescribeCluster (unfenced brokers)
partitions                 the Topics' statuses (the state     Metadata +
                           of record, KIP-455's view; who      ListPartitionReassignments (a
                           moves a partition: its              step is this resource's when
                           ``reassignedBy``)                   its status has it in flight,
                                                               else someone else's) +
                                                               DescribeConfigs (min ISR)
throttles                  each broker's throttle configs      DescribeConfigs of the topics'
                                                               throttled-replica lists (read
                                                               with ``partitions``)
write_partitions           replace the Topics' statuses        AlterPartitionReassignments: an
                           (409: :class:`RecordChanged`)       entry in a step → its target
                                                               (the new replicas' dirs set first
                                                               with AlterReplicaLogDirs, from
                                                               the entry); a step undone → null
record_dirs                the Topics' statuses get the dirs   none: Kafka's metadata (its
                           describe-log-dirs shows             DescribeLogDirs) is the record
prefer_dirs                alter-replica-log-dirs              AlterReplicaLogDirs (the retry
                                                               while the replica is not there)
tell                       LeaderAndIsr                        ElectLeaders PREFERRED where the
                                                               entry's leader is not the
                                                               partition's (Kafka's controller
                                                               sends the rest)
delete                     StopReplica with delete             none: Kafka's controller deletes
                                                               the removed replicas
throttle                   the broker's replication throttle   IncrementalAlterConfigs:
                           config                              ``leader/follower.replication
                                                               .throttled.rate|replicas``
announce                   UpdateMetadata to live brokers      none: Kafka's controller does it
=========================  ==================================  ================================

Rebalance (:class:`ClusterSnapshots`): only reads, since its children (LogDirMoves and
PartitionReassignments naming the same cluster) execute the plan through the two above:

=========================  ==================================  ================================
method                     our brokers (operator=controller)   Kafka Admin API
=========================  ==================================  ================================
record                     BrokerCluster spec, the Topics'     DescribeCluster, DescribeLogDirs,
                           statuses                            Metadata (``kafka_snapshot``)
snapshot                   describe-log-dirs + the above       the same, read again
                           (``plan.snapshot.build_snapshot``)  (``plan.kafka_dirs.kafka_snapshot``)
=========================  ==================================  ================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from jbod_broker import wire

from ..models.reassignment import PartitionReassignment
from ..models.snapshot import ClusterSnapshot
from .port_types import (
    BrokerDirs,
    CancelMoves,
    ClusterRecord,
    ClusterSeen,
    Cordon,
    Delete,
    PartitionsSeen,
    PreferDir,
    RecordDirs,
    RecordInTopic,
    Resend,
    SetThrottle,
    Start,
    StartResult,
    Tell,
    Throttle,
    ThrottleSeen,
    WritePartition,
)


class LogDirMoveExecutor(Protocol):
    """Where a LogDirMove's steps run: observe-side methods return what
    ``plan.logdirmove.Observed`` is made of, act-side ones take its actions (both
    ``plan.port_types``; the module docstring maps each to the Admin API)."""

    async def cluster_size(self) -> int | None:
        """How many brokers the cluster has; None when the cluster does not exist."""
        ...

    async def describe_dirs(self, brokers: Sequence[int]) -> Mapping[int, BrokerDirs | None]:
        """Each broker's dirs with their replicas (None: it did not answer)."""
        ...

    async def describe_moves(
        self, broker: int, replicas: Sequence[tuple[str, int]]
    ) -> Sequence[wire.ReplicaLogDirInfo]:
        """How the moves of ``replicas`` on ``broker`` stand; empty when it did not answer."""
        ...

    async def wait_for_a_move_to_end(
        self, by_broker: Mapping[int, Sequence[tuple[str, int]]], wait_s: float
    ) -> bool:
        """Wait up to about ``wait_s`` for one of these moves to end. True when a broker
        answered; False when none could be asked (the caller then paces itself)."""
        ...

    async def reassigning(self) -> Mapping[tuple[str, int], str]:
        """Partitions a reassignment is moving, with who moves them."""
        ...

    async def start(self, action: Start) -> StartResult:
        """Ask for the move; the answer goes to ``plan.logdirmove.settle``."""
        ...

    async def resend(self, action: Resend) -> None:
        """Ask again for a move the broker forgot; raises what the broker answered."""
        ...

    async def cancel(self, action: CancelMoves) -> None:
        """Stop each copy and drop its future replica (best effort)."""
        ...

    async def set_throttle(self, action: SetThrottle) -> None:
        """The intra-broker copy rate on these brokers (0 lifts it). A write a live broker did
        not take raises :class:`ActionFailed` once the others were tried (Kafka keeps the
        rate in its metadata until it is lifted; our brokers keep it until they restart).
        A broker that is down is passed over where it forgets the rate when it restarts
        (ours), and where a config written for it would wait for it (KAFKA-13392)."""
        ...

    async def cordon(self, action: Cordon) -> None:
        """Cordon, or lift the cordon of, the drained dir (best effort)."""
        ...

    async def record_placement(self, action: RecordInTopic) -> None:
        """Make the partition state of record say where the moved replica now lives."""
        ...


class ClusterUnusable(Exception):
    """The named cluster cannot be worked on now (a BrokerCluster and a KafkaCluster of one
    name, Kafka unreachable, its credentials missing): the pass does nothing and says why, as a
    condition with ``reason`` and the message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class RecordChanged(Exception):
    """The partition state of record changed since this pass read it: the pass stops, and the
    next one decides again from what is there."""


class ActionFailed(Exception):
    """An action whose effect outlives the resource did not take (a throttle Kafka keeps in
    its metadata until it is lifted, for a PartitionReassignment or a LogDirMove; a live
    broker's replication throttle, kept until it restarts): the pass stops before its status
    is written, so the next one decides the same actions again instead of recording them as
    done."""


class ReassignmentExecutor(Protocol):
    """Where a PartitionReassignment's steps run: observe-side methods return the models
    ``plan.reassignment.Observed`` is made of, act-side ones take its actions (both
    ``plan.port_types``), called by the handler in the order that plan's docstring gives (the
    module docstring maps each to the Admin API)."""

    async def cluster(self) -> ClusterSeen | None:
        """The cluster's size, dir names and each broker's dirs; None when it does not exist."""
        ...

    def serialized(self) -> AbstractAsyncContextManager[object]:
        """Held from reading the partitions to the last action: no other writer of the
        partition state of record interleaves with a pass."""
        ...

    async def liveness(self) -> tuple[frozenset[int], bool]:
        """The live brokers, and whether their absence can be trusted yet."""
        ...

    async def partitions(self, pr: PartitionReassignment) -> PartitionsSeen:
        """The partitions of the topics ``pr`` names as recorded, and what other reassignments
        are moving anywhere in the cluster (``pr``'s status says which steps are its own where
        the record does not name who started them, as Kafka's does not)."""
        ...

    async def throttles(self, brokers: Sequence[int]) -> Mapping[int, ThrottleSeen]:
        """The replication throttle of each of these live brokers, as it reports it (one that
        does not answer is left out): what a pass checks it lifted, whatever its status
        lists."""
        ...

    async def write_partitions(self, writes: Sequence[WritePartition]) -> None:
        """Record each entry; raises :class:`RecordChanged` when one changed since read."""
        ...

    async def record_dirs(self, records: Sequence[RecordDirs]) -> None:
        """Make the state of record name the dirs the brokers hold these replicas in (best
        effort: the next pass finds what is still wrong and asks again)."""
        ...

    async def prefer_dirs(self, prefer: Sequence[PreferDir]) -> None:
        """Name the dir each replica is to live in (best effort, retried by later passes)."""
        ...

    async def tell(self, tells: Sequence[Tell]) -> None:
        """Make the brokers act on the recorded entries (best effort)."""
        ...

    async def delete(self, deletes: Sequence[Delete]) -> None:
        """Delete the dropped replicas (best effort)."""
        ...

    async def throttle(self, actions: Sequence[Throttle]) -> None:
        """Set (rate 0 and empty sets: lift) the replication throttles of the pass: one per
        broker, all together, so that state shared between brokers (Kafka's per-topic lists
        of throttled replicas) is written once from the whole set, never from part of it. A
        write a live broker did not take raises :class:`ActionFailed` once the others were
        tried."""
        ...

    async def announce(self) -> None:
        """After partitions were recorded: every live broker learns the new metadata."""
        ...


class ClusterSnapshots(Protocol):
    """What a Rebalance reads of the cluster it balances: the same
    :class:`~jbod_operator.models.snapshot.ClusterSnapshot` from either kind, so the Spark job,
    the proposal, the waves and the measure at the end are one code path."""

    async def record(self) -> ClusterRecord | None:
        """The cluster's record now; None when it does not exist; raises
        :class:`ClusterUnusable` when it cannot be read."""
        ...

    async def snapshot(self, captured_at: str) -> ClusterSnapshot:
        """Every broker's dirs read afresh with the partition state of record, as the planner
        reads a cluster (after :meth:`record` in the same pass)."""
        ...
