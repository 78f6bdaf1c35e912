"""PartitionReassignment: move replicas across brokers in incremental batches (KIP-435),
each replica's destination disk named with it. Schema now; behaviour in a later issue."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from .common import (
    BrokerId,
    CamelModel,
    Condition,
    PartitionId,
    ResourceMeta,
    ResourceName,
    TopicName,
)
from .log_dir_move import LogDirRef

MAX_PARTITIONS = 100_000
"""Partitions one PartitionReassignment may name; jbod-ctl and the planner split larger plans."""


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
        Field(min_length=1, max_length=32, json_schema_extra={"x-kubernetes-list-type": "set"}),
    ]
    log_dirs: Annotated[list[LogDirRef] | None, Field(max_length=32)] = None


class PartitionReassignmentSpec(CamelModel):
    cluster_name: ResourceName
    partitions: Annotated[list[TargetAssignment], Field(min_length=1, max_length=MAX_PARTITIONS)]
    throttle_bytes_per_second: Annotated[int, Field(ge=0, le=2**53)] | None = None
    max_concurrent_moves_per_broker: Annotated[int, Field(ge=1, le=64)] = 5
    max_batch_size: Annotated[
        int, Field(ge=1, le=10_000, description="KIP-435: replicas added per partition per step.")
    ] = 1
    cancel: bool = False


class PartitionReassignmentStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    phase: str | None = None


class PartitionReassignment(CamelModel):
    # The whole object as read from the API: apiVersion/kind and server fields pass through.
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "PartitionReassignment"
    plural: ClassVar[str] = "partitionreassignments"
    short_names: ClassVar[list[str]] = ["preassign"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"},
        {"name": "State", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = "jbod.io/v1alpha1"
    metadata: ResourceMeta
    spec: PartitionReassignmentSpec
    status: PartitionReassignmentStatus | None = None
