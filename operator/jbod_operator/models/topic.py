"""Topic: partitions, replication and configs; its status is the controller's partition state
(what Kafka keeps in ZooKeeper), so a restarted operator finds it again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field, StringConstraints

from jbod_broker.storage.names import MAX_TOPIC_LENGTH, TOPIC_ID_LENGTH

from .common import (
    API_VERSION,
    MAX_REPLICAS,
    BrokerId,
    CamelModel,
    Condition,
    PartitionId,
    ResourceMeta,
    ResourceName,
    TopicName,
)

TopicConfigKey = Annotated[
    str, StringConstraints(min_length=1, max_length=255, pattern=r"^[a-z0-9.]+$")
]


class TopicSpec(CamelModel):
    model_config = CamelModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.minInsyncReplicas)"
                    " || self.minInsyncReplicas <= self.replicationFactor",
                    "message": "minInsyncReplicas cannot exceed replicationFactor",
                },
                {
                    # topicName's own rule only sees changes, not adding or removing it.
                    "rule": "has(self.topicName) == has(oldSelf.topicName)",
                    "message": "topicName is immutable: it cannot be added or removed",
                },
            ]
        }
    }

    cluster_name: Annotated[
        ResourceName,
        Field(
            description="The BrokerCluster (same namespace) holding this topic.",
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "clusterName is immutable"}
                ]
            },
        ),
    ]
    topic_name: Annotated[
        TopicName | None,
        Field(
            description="The topic's name in the brokers; defaults to metadata.name.",
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "topicName is immutable"}
                ]
            },
        ),
    ] = None
    partitions: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_PARTITIONS,
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": "self >= oldSelf", "message": "partitions cannot be decreased"}
                ]
            },
        ),
    ]
    replication_factor: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_REPLICAS,
            json_schema_extra={
                "x-kubernetes-validations": [
                    {
                        "rule": "self == oldSelf",
                        "message": "replicationFactor is immutable here;"
                        " use a PartitionReassignment",
                    }
                ]
            },
        ),
    ]
    min_insync_replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] | None = None
    configs: Annotated[
        dict[TopicConfigKey, Annotated[str, StringConstraints(max_length=4096)]] | None,
        Field(max_length=100, description="Topic configs (Kafka names), e.g. retention.ms."),
    ] = None


MAX_ENTRY_REPLICAS = 2 * MAX_REPLICAS
"""Replicas one partition state lists: a step adds new replicas beside the old ones (KIP-455)."""
LOG_DIR_LENGTH = 255
"""A log dir's path in the state of record (our brokers' are ``/var/lib/jbod/data-<name>``)."""

ReplicaIds = Annotated[list[BrokerId], Field(max_length=MAX_ENTRY_REPLICAS)]


class ReplicaPlacement(CamelModel):
    broker_id: BrokerId
    log_dir: Annotated[str, StringConstraints(max_length=LOG_DIR_LENGTH)] | None = None


class PartitionState(CamelModel):
    """One partition's state of record (Kafka's PartitionRecord): kept in PartitionShards
    (``models.partition_shard``). Every list is bounded, so a shard's size is."""

    partition: PartitionId
    replicas: Annotated[list[ReplicaPlacement], Field(max_length=MAX_ENTRY_REPLICAS)]
    leader: Annotated[int, Field(ge=-1, le=1_000_000)]
    leader_epoch: Annotated[int, Field(ge=0, le=2**31 - 1)]
    isr: ReplicaIds
    partition_epoch: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0
    offline_replicas: ReplicaIds = Field(
        default_factory=list,
        description="KIP-112: replicas on dead brokers and replicas on failed log dirs.",
    )
    disk_offline_replicas: ReplicaIds = Field(
        default_factory=list, description="Replicas whose broker is up but whose log dir failed."
    )
    adding_replicas: ReplicaIds = Field(
        default_factory=list,
        description="KIP-455: replicas a reassignment step added, not yet in sync (they are "
        "also in replicas, after the ones the step started from).",
    )
    removing_replicas: ReplicaIds = Field(
        default_factory=list,
        description="KIP-455: replicas a reassignment step drops. While new ones catch up "
        "they are still in replicas; once the step shrank the partition they are not, and "
        "stay listed until their brokers deleted them.",
    )
    target_replicas: ReplicaIds = Field(
        default_factory=list,
        description="The replicas (in order) the step in flight ends with; empty between steps.",
    )
    reassigned_by: ResourceName | None = Field(
        default=None, description="The PartitionReassignment moving this partition."
    )


LEGACY_PARTITIONS = 4000
"""The most partitions an older operator could have written into a Topic's status before
etcd's 1.5 MiB limit refused it (about 342 bytes each at RF 3)."""
MAX_PARTITIONS = 100_000
"""Partitions of one Topic (the CRD's limit; Kafka has none, KRaft clusters hold millions)."""


class TopicStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    topic_name: str | None = None
    topic_id: Annotated[
        str | None,
        Field(
            min_length=TOPIC_ID_LENGTH,
            max_length=TOPIC_ID_LENGTH,
            pattern=r"^[A-Za-z0-9_-]+$",
            description="KIP-516: the topic's id (Kafka's base64url form of a random UUID), "
            "assigned once by the operator and kept; brokers keep it in each replica's "
            "partition.metadata and refuse a replica with another.",
        ),
    ] = None
    configs: Annotated[
        dict[str, str] | None,
        Field(
            max_length=100,
            description="The topic configs in force: the last spec.configs the operator "
            "accepted (min.insync.replicas included when set); brokers are sent these.",
        ),
    ] = None
    partitions: list[PartitionState] = Field(
        default_factory=list,
        max_length=LEGACY_PARTITIONS,
        description="Deprecated (issue 39): the partition states live in PartitionShards. A "
        "Topic stored by an older operator keeps them here until the operator moves them.",
    )


class Topic(CamelModel):
    # The whole object as read from the API: apiVersion/kind and server fields pass through.
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "Topic"
    plural: ClassVar[str] = "topics"
    # Rules on the whole object: only there can CEL read metadata.name (issue 14: a Kubernetes
    # name may have 253 characters, a Kafka topic name 249).
    root_validations: ClassVar[list[dict[str, str]]] = [
        {
            "rule": f"has(self.spec.topicName) || size(self.metadata.name) <= {MAX_TOPIC_LENGTH}",
            "message": f"metadata.name is longer than a Kafka topic name may be "
            f"({MAX_TOPIC_LENGTH} characters): set spec.topicName",
        }
    ]
    short_names: ClassVar[list[str]] = ["jt"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"},
        {"name": "Partitions", "type": "integer", "jsonPath": ".spec.partitions"},
        {"name": "RF", "type": "integer", "jsonPath": ".spec.replicationFactor"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {
            "name": "Message",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = API_VERSION
    metadata: ResourceMeta
    spec: TopicSpec
    status: TopicStatus | None = None


def topic_id_of(topic: Mapping[str, Any]) -> str | None:
    """The topic id in a Topic's status as read from the API (``None`` before the operator
    assigned one): what every request to brokers about the topic carries (KIP-516)."""
    tid = (topic.get("status") or {}).get("topicId")
    return str(tid) if tid else None


def kafka_topic_name(topic: Topic | Mapping[str, Any]) -> str:
    """The Kafka name of a Topic resource as read from the API: ``spec.topicName`` when set
    (Kafka allows names a Kubernetes object cannot have), else ``metadata.name``.

    The one rule every component uses. ``topicName`` is immutable (CEL), so the name recorded
    in ``status.topicName`` at creation is always this one.
    """
    if isinstance(topic, Topic):
        explicit, name = topic.spec.topic_name, topic.metadata.name
    else:
        explicit, name = (topic.get("spec") or {}).get("topicName"), topic["metadata"]["name"]
    return str(explicit or name)
