"""What Apache Kafka's Admin API reports, as typed values: the results of
:mod:`jbod_operator.clients.kafka_admin` (issue 22). Pure.

They live here, not beside the client, so that pure code (the KafkaCluster status and
conditions, next the Kafka adapters' decisions) reads them without importing a client. Broker
ids, paths and sizes are Kafka's own; Kafka's "unknown" values (``-1`` bytes, a ``-1`` leader)
become ``None`` so no caller mistakes them for numbers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True)
class KafkaBroker:
    """One broker as DescribeCluster lists it. ``fenced`` is ``None`` where the API does not
    say (a broker older than KIP-1073's DescribeCluster v2)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool | None = None


@dataclass(frozen=True)
class ClusterDescription:
    """DescribeCluster. ``controller_id`` is the broker the API names as controller: in KRaft
    that is a broker that forwards to the quorum, never a KRaft controller node (their ids are
    not brokers')."""

    cluster_id: str
    controller_id: int | None
    brokers: tuple[KafkaBroker, ...]


@dataclass(frozen=True)
class LogDirReplica:
    """One replica in a log dir. ``is_future``: the copy AlterReplicaLogDirs is making (it
    replaces the current one in another dir of the same broker once it has caught up)."""

    topic: str
    partition: int
    size_bytes: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDir:
    """One log dir of one broker (DescribeLogDirs). ``error``: Kafka's error name when the dir
    is offline (``KAFKA_STORAGE_ERROR``), else ``None``. ``total_bytes``/``usable_bytes`` are
    ``None`` before v4 (or when the broker cannot tell); ``cordoned`` is ``None`` before
    KIP-1066 (Kafka 4.3, DescribeLogDirs v5)."""

    path: str
    error: str | None
    total_bytes: int | None
    usable_bytes: int | None
    cordoned: bool | None
    replicas: tuple[LogDirReplica, ...]

    @property
    def replica_bytes(self) -> int:
        """The current replicas' bytes (future copies not counted: they are in flight)."""
        return sum(r.size_bytes for r in self.replicas if not r.is_future)


@dataclass(frozen=True)
class BrokerLogDirs:
    broker_id: int
    dirs: tuple[LogDir, ...]


@dataclass(frozen=True)
class PartitionMetadata:
    """One partition (Metadata). ``leader`` is ``None`` when it has none; ``error`` is Kafka's
    error name (``LEADER_NOT_AVAILABLE``...) or ``None``."""

    topic: str
    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error: str | None = None


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    topic_id: str | None
    internal: bool
    partitions: tuple[PartitionMetadata, ...]
    error: str | None = None


@dataclass(frozen=True)
class OngoingReassignment:
    """ListPartitionReassignments: ``replicas`` is the full set while it moves (old and new),
    ``adding``/``removing`` the brokers joining and leaving."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


class KafkaErrorName(enum.StrEnum):
    """Kafka's protocol names of the errors the operator decides on, one spelling each: what
    :class:`~jbod_operator.clients.kafka_admin.KafkaAdminError` carries and the Admin API's
    per-item answers give (a test checks each is the name of one of kafka-python's error
    classes, which are Kafka's). A ``StrEnum``: a name read from Kafka compares equal."""

    REPLICA_NOT_AVAILABLE = "REPLICA_NOT_AVAILABLE"
    """AlterReplicaLogDirs: the broker does not host the replica (yet)."""
    NOT_LEADER_FOR_PARTITION = "NOT_LEADER_FOR_PARTITION"
    """Code 6, Kafka's NOT_LEADER_OR_FOLLOWER since KIP-392, by the name kafka-python still
    gives it (the one its answers carry: ``NOT_LEADER_OR_FOLLOWER`` never matched)."""
    NO_REASSIGNMENT_IN_PROGRESS = "NO_REASSIGNMENT_IN_PROGRESS"
    """AlterPartitionReassignments: a cancel of a partition with nothing in flight."""
    ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"
    """ElectLeaders: the preferred replica leads already."""
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
    SASL_AUTHENTICATION_FAILED = "SASL_AUTHENTICATION_FAILED"
    ILLEGAL_SASL_STATE = "ILLEGAL_SASL_STATE"
    UNSUPPORTED_SASL_MECHANISM = "UNSUPPORTED_SASL_MECHANISM"
    CLUSTER_AUTHORIZATION_FAILED = "CLUSTER_AUTHORIZATION_FAILED"
    TOPIC_AUTHORIZATION_FAILED = "TOPIC_AUTHORIZATION_FAILED"
    GROUP_AUTHORIZATION_FAILED = "GROUP_AUTHORIZATION_FAILED"


class ConfigKind(enum.StrEnum):
    """The config resources the reassignment and move adapters touch."""

    BROKER = "BROKER"
    TOPIC = "TOPIC"


@dataclass(frozen=True)
class ConfigEntry:
    """DescribeConfigs: ``source`` is Kafka's (``DYNAMIC_BROKER_CONFIG``,
    ``DYNAMIC_TOPIC_CONFIG``, ``STATIC_BROKER_CONFIG``, ``DEFAULT_CONFIG``...); ``value`` is
    ``None`` for sensitive entries."""

    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


TopicPartitionKey = tuple[str, int]
"""(topic, partition)."""

ReplicaKey = tuple[str, int, int]
"""(topic, partition, broker id): one replica, as AlterReplicaLogDirs addresses it."""
