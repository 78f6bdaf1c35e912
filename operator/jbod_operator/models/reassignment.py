"""PartitionReassignment: move replicas across brokers in incremental batches (KIP-435), each
new replica's disk named with it, with a live KIP-240/455 view.

The schema and the states live here; the transitions are decided in
``jbod_operator.plan.reassignment`` (one table, pure, over the steps
``plan.reassignment_steps`` computes) and carried out by ``handlers.reassignments``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field, StringConstraints, field_validator

from .common import (
    ABSOLUTE_PATH,
    API_VERSION,
    MAX_REPLICAS,
    BrokerId,
    CamelModel,
    Condition,
    PartitionId,
    ResourceMeta,
    ResourceName,
    StrayReplica,
    TopicName,
)

MAX_PARTITIONS = 500
"""Partitions one PartitionReassignment may name; ``jbod-ctl`` and the planner split larger
plans. Set from a measurement on the real API server (tests/integration/
test_reassignment_size.py): at every schema limit at once (500 partitions of 249-character
topics with 8 replicas and 64-character dirs each) and with the status at its largest, the
object is 1.13 MiB (1,180,763 bytes as stored, 100 stray replicas listed), under etcd's 1.5
MiB request limit."""


MAX_DETAIL = 100
"""Partitions listed one by one in the status (those in flight or in trouble); the rest are
only counted, so the status stays bounded whatever the plan's size."""

MAX_BATCH = 200
"""The largest batch (maxConcurrentPartitionMovements): the status lists the current batch."""

# The execution limits, with their bounds and defaults in one place: a PartitionReassignment
# takes them, and a Rebalance hands them to the children it creates (``models.rebalance``).
ReplicaMovements = Annotated[
    int,
    Field(
        ge=1,
        le=MAX_REPLICAS,
        description="KIP-435 (reassignment.max.concurrent.replica.movements): replicas of "
        "one partition changed per step. The first step may add more to keep min ISR.",
    ),
]
PartitionMovements = Annotated[
    int,
    Field(
        ge=1,
        le=MAX_BATCH,
        description="KIP-435 (reassignment.max.concurrent.partition.movements): "
        "partitions per batch.",
    ),
]
LeaderMovements = Annotated[
    int,
    Field(
        ge=1,
        le=MAX_BATCH,
        description="KIP-435 (reassignment.max.concurrent.leader.movements): steps in "
        "one batch that move a partition's leader.",
    ),
]
MovesPerBroker = Annotated[
    int,
    Field(
        ge=1,
        le=64,
        description="Replica moves in and out of one broker at once, shared with every "
        "active PartitionReassignment and LogDirMove of the cluster (Cruise Control: 5).",
    ),
]
ThrottleRate = Annotated[
    int,
    Field(
        ge=1,
        le=2**40,
        description="Replication throttle on the moving replicas only (their leaders and "
        "new followers); removed at the end, on cancel and on deletion.",
    ),
]
DEFAULT_REPLICA_MOVEMENTS = 1
DEFAULT_PARTITION_MOVEMENTS = 5
DEFAULT_LEADER_MOVEMENTS = 5
DEFAULT_MOVES_PER_BROKER = 5


ReassignmentDirRef = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=64, pattern=rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?|{ABSOLUTE_PATH})$"
    ),
]
"""A dir name (``a``), its folder (``data-a``), its path, or ``any``; 64 characters at most
(part of the size budget)."""


class ReassignmentPhase(StrEnum):
    """The phase of a PartitionReassignment (``status.phase``).

    Allowed transitions (``plan.reassignment.PHASE_TRANSITIONS``, one test each)::

        (new)       -> Pending      accepted: every partition checked, originals recorded
        (new)       -> Failed       the spec can never work, or another resource moves a partition
        Pending     -> Running      the first batch started
        Pending     -> Succeeded    every partition already at its target
        Pending     -> Paused       spec.pause
        Pending     -> Cancelled    spec.cancel before anything moved
        Running     -> Paused       spec.pause (steps in flight finish)
        Running     -> Succeeded    every partition at its target
        Running     -> Cancelling   spec.cancel: steps in flight or partitions to walk back
        Running     -> Cancelled    spec.cancel: every partition at its target or original
        Running     -> RollingBack  spec.rollback
        Paused      -> Running      spec.pause cleared
        Paused      -> Cancelling   spec.cancel: steps in flight or partitions to walk back
        Paused      -> Cancelled    spec.cancel: every partition at its target or original
        Paused      -> RollingBack  spec.rollback
        Cancelling  -> Cancelled    every partition at its target or back at its original
        Succeeded   -> RollingBack  spec.rollback after the end
        Cancelled   -> RollingBack  spec.rollback after a cancel
        RollingBack -> RolledBack   every partition back at its original replicas, in order

    Failed and RolledBack are final; Succeeded and Cancelled are final unless rolled back.
    """

    PENDING = "Pending"
    RUNNING = "Running"
    PAUSED = "Paused"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLING = "Cancelling"
    CANCELLED = "Cancelled"
    ROLLING_BACK = "RollingBack"
    ROLLED_BACK = "RolledBack"


ENDED_PHASES = frozenset(
    {
        ReassignmentPhase.SUCCEEDED,
        ReassignmentPhase.FAILED,
        ReassignmentPhase.CANCELLED,
        ReassignmentPhase.ROLLED_BACK,
    }
)
"""Phases with nothing in flight: only ``spec.rollback`` moves Succeeded/Cancelled on."""


class PartitionPhase(StrEnum):
    """Where one partition of a PartitionReassignment is (``status.partitions[].state``).

    Allowed transitions (``plan.reassignment.PARTITION_TRANSITIONS``, one test each)::

        Pending   -> Adding     a step written: new replicas added (KIP-455 addingReplicas)
        Pending   -> Removing   a step that only drops replicas written
        Pending   -> Waiting    the next step cannot start (a target broker down, no ISR)
        Pending   -> Done       at its target, in order, with its leader
        Pending   -> Gone       its topic was deleted
        Waiting   -> Pending    what blocked it is back
        Waiting   -> Gone       its topic was deleted
        Adding    -> Removing   every new replica in sync: ISR and replicas shrunk
        Adding    -> Gone       its topic was deleted
        Removing  -> Pending    the dropped replicas deleted; more steps to go
        Removing  -> Done       the dropped replicas deleted; at its target
        Removing  -> Placing    the dropped replicas deleted; a replica not in its named dir
        Removing  -> Gone       its topic was deleted
        Pending   -> Placing    at its target brokers; a replica not in its named dir (KIP-113)
        Placing   -> Done       every replica in its named dir
        Placing   -> Pending    a rollback: it walks back to its original replicas
        Placing   -> Gone       its topic was deleted
        Done      -> Pending    a rollback: it walks back to its original replicas

    Gone is final; Done is final unless rolled back.
    """

    PENDING = "Pending"
    WAITING = "Waiting"
    ADDING = "Adding"
    REMOVING = "Removing"
    PLACING = "Placing"
    DONE = "Done"
    GONE = "Gone"


class TargetAssignment(CamelModel):
    model_config = CamelModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.logDirs) || size(self.logDirs) == size(self.replicas)",
                    "message": "logDirs must name one directory per replica",
                },
            ]
        }
    }

    topic: TopicName
    partition: PartitionId
    replicas: Annotated[
        list[BrokerId],
        Field(
            min_length=1,
            max_length=MAX_REPLICAS,
            description="The final target replicas; the first is the preferred leader.",
            json_schema_extra={"x-kubernetes-list-type": "set"},
        ),
    ]
    log_dirs: Annotated[
        list[ReassignmentDirRef] | None,
        Field(
            max_length=MAX_REPLICAS,
            description="Per replica: a dir name, data-<name>, its path, or 'any' (the "
            "broker's choice).",
        ),
    ] = None


class PartitionReassignmentSpec(CamelModel):
    # The plan is fixed once written: the status (original assignment, batches, per-partition
    # state) describes this plan, and a target changed mid-way would leave steps planned for
    # another one. A different plan is a new resource (after cancelling or rolling back this
    # one); the limits, throttle and pause/cancel/rollback stay changeable.
    cluster_name: Annotated[
        ResourceName,
        Field(
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "clusterName is immutable"}
                ]
            }
        ),
    ]
    # A partition named twice is refused by the list-map keys (a CEL rule comparing every pair
    # would be quadratic and over the API server's cost budget).
    partitions: Annotated[
        list[TargetAssignment],
        Field(
            min_length=1,
            max_length=MAX_PARTITIONS,
            json_schema_extra={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["topic", "partition"],
                "x-kubernetes-validations": [
                    {
                        "rule": "self == oldSelf",
                        "message": "partitions are immutable: create another "
                        "PartitionReassignment for another plan",
                    }
                ],
            },
        ),
    ]
    max_concurrent_replica_movements: ReplicaMovements = DEFAULT_REPLICA_MOVEMENTS
    max_concurrent_partition_movements: PartitionMovements = DEFAULT_PARTITION_MOVEMENTS
    max_concurrent_leader_movements: LeaderMovements = DEFAULT_LEADER_MOVEMENTS
    max_concurrent_moves_per_broker: MovesPerBroker = DEFAULT_MOVES_PER_BROKER
    throttle_bytes_per_second: ThrottleRate | None = None
    allow_replication_factor_change: Annotated[
        bool,
        Field(
            description="KIP-860: a target with a different replica count is refused unless set."
        ),
    ] = False
    stall_after_seconds: Annotated[
        int,
        Field(
            ge=10,
            le=7 * 24 * 3600,
            description="A partition with no byte progress this long raises Stalled.",
        ),
    ] = 600
    pause: bool = False
    cancel: Annotated[
        bool,
        Field(
            description="Stop the reassignment: each partition ends at its target if it "
            "reached it, else back at its original replicas (their order, leader and dirs); "
            "never at a set between the two."
        ),
    ] = False
    rollback: bool = False

    @field_validator("partitions")
    @classmethod
    def _each_partition_once(cls, v: list[TargetAssignment]) -> list[TargetAssignment]:
        """The CRD's list-map rule for objects that do not come from the API server (the
        planner's and jbod-ctl's manifests, tests): a partition named twice would get two
        targets, and which one wins would depend on the order they are applied in (issue 14)."""
        seen: set[tuple[str, int]] = set()
        for i, t in enumerate(v):
            key = (t.topic, t.partition)
            if key in seen:
                raise ValueError(f"partitions[{i}]: {t.topic}-{t.partition} is named twice")
            seen.add(key)
        return v


class BatchEntry(CamelModel):
    """KIP-435's CurrentPartitionReassignmentBatch entry."""

    topic: str
    partition: int
    current_brokers: list[int]
    target_brokers: list[int]


class PartitionStatus(CamelModel):
    """A partition in flight or in trouble (the others are only counted)."""

    topic: str
    partition: int
    state: PartitionPhase
    replicas: list[int] = Field(default_factory=list)
    adding_replicas: list[int] = Field(default_factory=list)
    removing_replicas: list[int] = Field(default_factory=list)
    target_replicas: list[int] = Field(default_factory=list)
    steps_done: int = 0
    bytes_to_move: int = 0
    bytes_moved: int = 0
    message: str | None = None
    since: str | None = None
    """When it entered this state (and when its bytes last moved, for Stalled)."""


class OriginalAssignment(CamelModel):
    """A partition's replicas (and their dirs) before this PartitionReassignment: what cancel
    and rollback walk back to, preferred leader and order included."""

    topic: str
    partition: int
    replicas: list[int]
    log_dirs: list[str] | None = None


class PartitionReassignmentStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    phase: ReassignmentPhase | None = None
    start_time: str | None = None
    completion_time: str | None = None
    original: list[OriginalAssignment] | None = None
    """Recorded once when accepted; absent for a refused spec."""
    batch: int = 0
    """The number of the current (or last) batch."""
    current_batch: list[BatchEntry] = Field(default_factory=list)
    batches_planned: int | None = None
    """Batches the planner expects for what is left, at the current limits."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Partitions per state."""
    partitions: list[PartitionStatus] = Field(default_factory=list)
    bytes_to_move: int = 0
    bytes_moved: int = 0
    progress_percent: int | None = None
    rate_bytes_per_second: int | None = None
    eta_seconds: int | None = None
    throttled_brokers: list[int] = Field(default_factory=list)
    """Brokers holding this resource's throttle: cleared from exactly these at the end."""
    stray_replicas: list[StrayReplica] = Field(default_factory=list, max_length=MAX_DETAIL)
    """Dropped replicas whose broker was down when their step ended, so they could not be
    deleted then (the step goes on without them). The cluster controller deletes each one
    when its broker returns (``plan.strays``); until then the BrokerCluster's
    ``status.strayReplicas`` lists it too. A record of what this resource left: entries stay
    here after the deletion (the BrokerCluster's list is the live one). The latest
    ``MAX_DETAIL`` are kept."""

    def with_stray(
        self, broker: int, topic: str, partition: int, since: str
    ) -> PartitionReassignmentStatus:
        """This status with ``broker``'s replica of ``topic-partition`` recorded as left."""
        kept = [
            s
            for s in self.stray_replicas
            if (s.broker_id, s.topic, s.partition) != (broker, topic, partition)
        ]
        left = StrayReplica(broker_id=broker, topic=topic, partition=partition, since=since)
        return self.model_copy(update={"stray_replicas": [*kept, left][-MAX_DETAIL:]})


class PartitionReassignment(CamelModel):
    # The whole object as read from the API: apiVersion/kind and server fields pass through.
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "PartitionReassignment"
    plural: ClassVar[str] = "partitionreassignments"
    short_names: ClassVar[list[str]] = ["preassign", "pr"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"},
        {"name": "State", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Progress", "type": "integer", "jsonPath": ".status.progressPercent"},
        {"name": "Batch", "type": "integer", "jsonPath": ".status.batch"},
        {"name": "ETA", "type": "integer", "jsonPath": ".status.etaSeconds"},
        {
            "name": "Message",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Progressing")].message',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = API_VERSION
    metadata: ResourceMeta
    spec: PartitionReassignmentSpec
    status: PartitionReassignmentStatus | None = None
