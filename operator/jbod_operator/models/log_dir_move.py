"""LogDirMove: put replicas on chosen disks of their brokers, or drain a disk (KIP-113).

The schema and the states live here; the transitions between the states are decided in
``jbod_operator.plan.logdirmove`` (one table, pure) and carried out by
``jbod_operator.handlers.logdirmoves``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field, StringConstraints

from .common import (
    ABSOLUTE_PATH,
    API_VERSION,
    BrokerId,
    CamelModel,
    Condition,
    PartitionId,
    ResourceMeta,
    ResourceName,
    TopicName,
)

MAX_MOVES = 10_000
"""Replicas one LogDirMove may name; ``jbod-ctl`` and the planner split larger plans."""


class MovePhase(StrEnum):
    """The phase of a LogDirMove (``status.phase``, a summary of its replicas).

    Allowed transitions (``plan.logdirmove.PHASE_TRANSITIONS``, one test each)::

        (new)   -> Pending    planned, or waiting for its BrokerCluster
        (new)   -> Failed     the spec can never work, or an older LogDirMove moves a replica
        Pending -> Moving     a replica started moving or finished
        Pending -> Succeeded  every replica verified in its target dir (a drain: dir empty)
        Pending -> Failed     every replica ended and one failed; timeout
        Pending -> Cancelled  spec.cancel
        Moving  -> Pending    the moved replicas failed and the rest wait; BrokerCluster gone
        Moving  -> Succeeded  every replica verified in its target dir (a drain: dir empty)
        Moving  -> Failed     every replica ended and one failed; timeout; drain not empty
        Moving  -> Cancelled  spec.cancel

    Succeeded, Failed and Cancelled are final: nothing leaves them.
    """

    PENDING = "Pending"
    MOVING = "Moving"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


ENDED_PHASES = frozenset({MovePhase.SUCCEEDED, MovePhase.FAILED, MovePhase.CANCELLED})
"""Phases a LogDirMove never leaves; a restarted operator never re-sends their moves."""


class ReplicaState(StrEnum):
    """The state of one replica of a LogDirMove (``status.replicas[].state``).

    Allowed transitions (``plan.logdirmove.REPLICA_TRANSITIONS``, one test each)::

        Pending -> Moving     the broker accepted alter-replica-log-dirs
        Pending -> Succeeded  the replica is already in its target dir
        Pending -> Failed     not on its broker after replicaWaitSeconds; broker refused; timeout
        Pending -> Cancelled  spec.cancel
        Moving  -> Succeeded  describe-log-dirs shows it in its target dir, no future copy
        Moving  -> Failed     the broker's move failed (dir offline, copy error); timeout
        Moving  -> Cancelled  spec.cancel

    Succeeded, Failed and Cancelled are final.
    """

    PENDING = "Pending"
    MOVING = "Moving"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


ENDED_REPLICA_STATES = frozenset(
    {ReplicaState.SUCCEEDED, ReplicaState.FAILED, ReplicaState.CANCELLED}
)


LogDirRef = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=4096, pattern=rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?|{ABSOLUTE_PATH})$"
    ),
]


class ReplicaMove(CamelModel):
    broker_id: BrokerId
    topic: TopicName
    partition: PartitionId
    log_dir: Annotated[
        LogDirRef,
        Field(description="A log dir name from the BrokerCluster spec, or its absolute path."),
    ]


class Drain(CamelModel):
    broker_id: BrokerId
    log_dir: LogDirRef


class LogDirMoveSpec(CamelModel):
    model_config = CamelModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "(has(self.moves) && size(self.moves) > 0) != has(self.drain)",
                    "message": "set exactly one of moves or drain",
                },
            ]
        }
    }

    cluster_name: ResourceName
    # A replica listed twice is refused by the list-map keys (a CEL rule comparing every pair
    # would be quadratic: the API server refuses such a CRD as far over its cost budget).
    moves: Annotated[
        list[ReplicaMove] | None,
        Field(
            max_length=MAX_MOVES,
            json_schema_extra={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["brokerId", "topic", "partition"],
            },
        ),
    ] = None
    drain: Drain | None = None
    throttle_bytes_per_second: Annotated[int, Field(ge=0, le=2**53)] | None = None
    timeout_seconds: Annotated[int, Field(ge=1, le=7 * 24 * 3600)] = 3600
    replica_wait_seconds: Annotated[
        int,
        Field(
            ge=1,
            le=24 * 3600,
            description="How long to retry a replica that is not on its "
            "broker yet (KIP-113's --timeout, default 10 s there).",
        ),
    ] = 10
    max_concurrent_moves_per_broker: Annotated[int, Field(ge=1, le=64)] = 2
    cancel: bool = False


class ReplicaMoveStatus(CamelModel):
    broker_id: int
    topic: str
    partition: int
    source_log_dir: str | None = None
    target_log_dir: str | None = None
    bytes_copied: int = 0
    bytes_total: int = 0
    offset_lag: int = 0
    state: Annotated[
        ReplicaState,
        Field(description="Pending, Moving, then Succeeded, Failed or Cancelled (final)."),
    ] = ReplicaState.PENDING
    message: str | None = None


class LogDirMoveStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    phase: Annotated[
        MovePhase | None,
        Field(description="Pending, Moving, then Succeeded, Failed or Cancelled (final)."),
    ] = None
    replicas: list[ReplicaMoveStatus] | None = None
    """The plan, one entry per replica: absent until planned (a refused spec has none)."""
    bytes_copied: int | None = None
    bytes_total: int | None = None
    progress_percent: int | None = None
    rate_bytes_per_second: int | None = None
    eta_seconds: int | None = None
    start_time: str | None = None
    completion_time: str | None = None


class LogDirMove(CamelModel):
    # The whole object as read from the API: apiVersion/kind and server fields pass through.
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "LogDirMove"
    plural: ClassVar[str] = "logdirmoves"
    short_names: ClassVar[list[str]] = ["ldm"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"},
        {"name": "State", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Progress", "type": "integer", "jsonPath": ".status.progressPercent"},
        {"name": "Rate", "type": "integer", "jsonPath": ".status.rateBytesPerSecond"},
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
    spec: LogDirMoveSpec
    status: LogDirMoveStatus | None = None
