"""Pieces shared by every resource: the API group, camelCase models, status conditions.

Conditions follow the Kubernetes API conventions: a list keyed by ``type``, each with
``status`` (True/False/Unknown), a CamelCase ``reason``, a ``message``, ``observedGeneration``
and ``lastTransitionTime``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from jbod_broker import wire

GROUP = "jbod.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

DnsLabel = Annotated[
    str, StringConstraints(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
]
# Kafka's topic rule has one home, storage.names; the CRDs get its pattern through wire.Topic.
TopicName = wire.Topic
ResourceName = Annotated[
    str,
    StringConstraints(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    ),
]
Quantity = Annotated[
    str,
    StringConstraints(
        max_length=64,
        pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$",
    ),
]
MAX_REPLICAS = 8
"""Replicas of one partition: a Topic's replicationFactor and a reassignment's target (Kafka's
largest replication factors in use are 5 or 6). Part of two size budgets: a
PartitionReassignment's (``models.reassignment.MAX_PARTITIONS``) and a PartitionShard's
(``models.partition_shard.SHARD_SIZE``), whose entries list up to twice as many while a step
adds new replicas beside the old."""
BrokerId = Annotated[int, Field(ge=0, le=1_000_000)]
PartitionId = Annotated[int, Field(ge=0, le=2**31 - 1)]
# One path segment that is not "." or ".." (same trick as TopicName), and an absolute path of them.
PATH_SEGMENT = r"(\.?[^/\x00.]|\.\.[^/\x00])[^/\x00]*"
ABSOLUTE_PATH = rf"/{PATH_SEGMENT}(/{PATH_SEGMENT})*/?"
AbsolutePath = Annotated[
    str, StringConstraints(min_length=2, max_length=4096, pattern=rf"^{ABSOLUTE_PATH}$")
]


def human_bytes(n: float) -> str:
    """Binary units with one decimal (``1.5 MiB``), whole bytes below 1 KiB: how every report
    and tool shows a byte count to a person (here because the plan report needs it too)."""
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


class CamelModel(BaseModel):
    """camelCase on the wire, strict about unknown fields (the CRD prunes them anyway)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class StrayReplica(CamelModel):
    """A replica a broker holds, or may hold, that the partition's state of record does not
    place on it (a "stray", as Kafka's brokers call one): dropped by a reassignment while the
    broker was down, or of a topic deleted meanwhile. The cluster controller deletes it
    (StopReplica with delete) when it finds it on the broker (``plan.strays``)."""

    broker_id: BrokerId
    topic: TopicName
    partition: PartitionId
    log_dir: Annotated[str, StringConstraints(max_length=255)] | None = None
    """The dir it was seen in (absent: not seen, e.g. its broker was down). 255 characters
    at most (part of a PartitionReassignment's size budget; our brokers' dirs are
    ``/var/lib/jbod/data-<name>``)."""
    since: Annotated[str, StringConstraints(max_length=32)] | None = None
    """When it was left (RFC 3339)."""


class Condition(CamelModel):
    type: Annotated[str, StringConstraints(min_length=1, max_length=316)]
    status: Literal["True", "False", "Unknown"]
    reason: Annotated[
        str,
        StringConstraints(max_length=1024, pattern=r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?)?$"),
    ] = ""
    message: Annotated[str, StringConstraints(max_length=32768)] = ""
    observed_generation: Annotated[int, Field(ge=0)] | None = None
    last_transition_time: str | None = None


class ResourceMeta(CamelModel):
    """Kubernetes metadata as the operator needs it (the API server owns the real schema)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True
    )
    name: str
    namespace: str | None = None
    generation: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
