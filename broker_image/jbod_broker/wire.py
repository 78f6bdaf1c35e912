"""Wire types of the broker's HTTP API: the single source for the server, the typed client and
the operator. Field names follow Kafka's request schemas in snake_case.

Admin and controller bodies are JSON described here; the data path (produce, fetch) carries
RecordBatch v2 bytes, not JSON-wrapped records. Every model forbids unknown fields and bounds
its numbers, so a malformed request is refused with a 400 that names the field before it
reaches any state.
"""

from __future__ import annotations

import os
import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from .storage.names import MAX_TOPIC_LENGTH, TOPIC_NAME_PATTERN, parse_topic_id

Topic = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_TOPIC_LENGTH, pattern=TOPIC_NAME_PATTERN),
]
"""A Kafka topic name: the one rule of storage.names, as a type (the CRDs use it too)."""
PartitionId = Annotated[int, Field(ge=0, le=2**31 - 1)]


def _topic_id(v: str) -> str:
    parse_topic_id(v)
    return v


TopicId = Annotated[
    str,
    StringConstraints(min_length=22, max_length=22, pattern=r"^[A-Za-z0-9_-]{22}$"),
    AfterValidator(_topic_id),
]
"""A topic id (KIP-516) in Kafka's string form (``storage.names.parse_topic_id``)."""
BrokerId = Annotated[int, Field(ge=0, le=2**31 - 1)]
Epoch = Annotated[int, Field(ge=-1, le=2**31 - 1)]
Offset = Annotated[int, Field(ge=-2, le=2**63 - 1)]
LogDirPath = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
MAX_LIST = 100_000
MAX_ALTER_LOG_DIRS = 10_000
"""Entries in one alter-replica-log-dirs request: what a broker serves well inside its heartbeat
interval (each entry takes the move engine's locks; about 0.2 ms). The client splits longer
lists into several requests (issue 14)."""

# -- log dir names: one rule for the broker, the operator, the planner and the CLI ----------

ANY_LOG_DIR = "any"
"""The alter-replica-log-dirs destination that means "no preference": it cancels a move."""

LOG_DIR_FOLDER_PREFIX = "data-"


def log_dir_folder(name: str) -> str:
    """The folder, volume and PVC template name of log dir ``name``: ``data-<name>``.

    Strimzi's JBOD naming: a disk's name in the BrokerCluster spec is short (``a``), its
    volume and mount folder carry the prefix, so ``ls`` on a broker shows what each folder is.
    """
    return f"{LOG_DIR_FOLDER_PREFIX}{name}"


def log_dir_short_name(path: str) -> str:
    """The BrokerCluster name of the log dir at ``path`` (``/var/lib/x/data-a`` -> ``a``)."""
    return os.path.basename(path.rstrip("/")).removeprefix(LOG_DIR_FOLDER_PREFIX)


def refers_to_log_dir(ref: str, path: str) -> bool:
    """Whether ``ref`` (a dir name ``a``, its folder ``data-a`` or an absolute path) names the
    log dir at ``path``."""
    if ref.startswith("/"):
        return os.path.normpath(ref) == os.path.normpath(path)
    name = log_dir_short_name(path)
    return ref in (name, log_dir_folder(name))


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ErrorBody(Model):
    error: str
    message: str


# -- log dirs (KIP-113) ---------------------------------------------------------------------


class DescribeLogDirsRequest(Model):
    topics: list[Topic] | None = Field(default=None, max_length=MAX_LIST)
    log_dirs: list[LogDirPath] | None = Field(default=None, max_length=1000)


class ReplicaDescription(Model):
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool
    log_end_offset: int


class LogDirDescription(Model):
    path: str
    is_live: bool
    error: str | None
    total_bytes: int
    usable_bytes: int
    cordoned: bool
    partitions: list[ReplicaDescription]
    reserved_bytes: int = 0
    """What moves and new replicas in flight to this dir still have to write."""
    headroom_bytes: int = 0
    """What the broker keeps free on this dir (its headroom setting applied to the capacity)."""


class DescribeLogDirsResponse(Model):
    broker_id: int
    log_dirs: list[LogDirDescription]


class AlterReplicaLogDir(Model):
    topic: Topic
    partition: PartitionId
    log_dir: LogDirPath
    """An absolute path of one of the broker's log dirs, or "any" to cancel a move."""


class AlterReplicaLogDirsRequest(Model):
    partitions: list[AlterReplicaLogDir] = Field(min_length=1, max_length=MAX_ALTER_LOG_DIRS)


class PartitionResult(Model):
    topic: str
    partition: int
    error: str | None = None
    message: str | None = None


class AlterReplicaLogDirsResponse(Model):
    partitions: list[PartitionResult]


class ReplicaRef(Model):
    topic: Topic
    partition: PartitionId


class DescribeReplicaLogDirsRequest(Model):
    partitions: list[ReplicaRef] | None = Field(default=None, max_length=MAX_LIST)
    wait_ms: int = Field(
        default=0,
        ge=0,
        le=60_000,
        description="Long poll: answer as soon as one of the listed moves ends (or is not "
        "running), at the latest after this many milliseconds; 0 answers at once.",
    )


class MoveState(StrEnum):
    """Where a replica's move between log dirs stands (describe-replica-log-dirs ``state``).

    The values are the JSON strings on the wire. The broker's move engine
    (``jbod_broker.move``) uses this enum for its tasks and refuses any transition not listed
    here (``jbod_broker.move.task.TRANSITIONS``)::

        Queued     -> Copying | Cancelled | Interrupted
        Copying    -> CatchingUp | Swapping | Failed | Cancelled | Interrupted
        CatchingUp -> Copying | Swapping | Failed | Cancelled | Interrupted
        Swapping   -> Done | Failed | Cancelled | Interrupted
        Done, Failed, Cancelled, Interrupted: final (a new request is a new move)

    ``None`` is not a state of a move: it is what describe answers for a replica with no move
    (the broker restarted, or never had one).
    """

    NONE = "None"
    """No move known for this replica."""
    QUEUED = "Queued"
    """Accepted; waiting for a free worker (``num.replica.alter.log.dirs.threads``)."""
    COPYING = "Copying"
    """Copying sealed segments."""
    CATCHING_UP = "CatchingUp"
    """Copying the source's active segment while appends continue."""
    SWAPPING = "Swapping"
    """Appends are held; the last bytes are copied and the future log takes the source's place."""
    DONE = "Done"
    FAILED = "Failed"
    """A directory failed or the copy could not go on; ``error`` says why."""
    CANCELLED = "Cancelled"
    """Destination "any", a new destination, or the replica deleted (StopReplica)."""
    INTERRUPTED = "Interrupted"
    """The broker shut down; the future folder stays and the move resumes at the next start."""

    @property
    def finished(self) -> bool:
        """A final state: the move ended (``None`` is no move, not an ended one)."""
        return self in _FINISHED_MOVE_STATES


_FINISHED_MOVE_STATES = frozenset(
    {MoveState.DONE, MoveState.FAILED, MoveState.CANCELLED, MoveState.INTERRUPTED}
)


class ReplicaLogDirInfo(Model):
    topic: str
    partition: int
    current_log_dir: str | None
    future_log_dir: str | None
    future_offset_lag: int
    bytes_copied: int
    bytes_total: int
    state: MoveState
    error: str | None = None
    rate_bytes_per_sec: float = 0.0
    eta_seconds: float | None = None


class DescribeReplicaLogDirsResponse(Model):
    partitions: list[ReplicaLogDirInfo]


class CordonLogDirRequest(Model):
    log_dir: LogDirPath
    cordoned: bool


# -- controller to broker -------------------------------------------------------------------


class LeaderAndIsrPartition(Model):
    topic: Topic
    partition: PartitionId
    leader: Annotated[int, Field(ge=-1, le=2**31 - 1)]
    leader_epoch: Annotated[int, Field(ge=0, le=2**31 - 1)]
    isr: list[BrokerId] = Field(max_length=1000)
    partition_epoch: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0
    replicas: list[BrokerId] = Field(min_length=1, max_length=1000)
    is_new_replica: bool = False
    min_insync_replicas: Annotated[int, Field(ge=1, le=1000)] = 1
    configs: dict[str, str] = Field(default_factory=dict, max_length=100)
    topic_id: TopicId | None = None
    """KIP-516: the topic's id; the broker keeps it in ``partition.metadata`` and refuses the
    partition (INCONSISTENT_TOPIC_ID) when its replica has another. ``None``: a controller that
    has not assigned one yet; nothing is checked or written."""

    @model_validator(mode="after")
    def _consistent(self) -> LeaderAndIsrPartition:
        """Kafka's invariants of a partition's state (issue 14): each replica once, the ISR a
        subset of the replicas (each once), and a leader (when there is one) in the ISR. A
        request breaking them would make a broker lead or follow an impossible partition."""
        if len(set(self.replicas)) != len(self.replicas):
            raise ValueError(f"replicas {self.replicas} name a broker twice")
        if len(set(self.isr)) != len(self.isr):
            raise ValueError(f"isr {self.isr} names a broker twice")
        outside = sorted(set(self.isr) - set(self.replicas))
        if outside:
            raise ValueError(f"isr {self.isr} has brokers {outside} that are not replicas")
        if self.leader != -1 and self.leader not in self.isr:
            raise ValueError(f"leader {self.leader} is not in the isr {self.isr}")
        return self


_BROKER_URL = re.compile(r"http://(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})/?")


def _broker_url(v: str) -> str:
    """A broker's URL is its listener: ``http://HOST:PORT`` and nothing else (issue 14). A
    follower fetches from whatever URL a controller names; another scheme, a path, a query or
    credentials would point it somewhere that is not a broker. (A pattern, not urllib: the
    pure layers that import this module stay free of I/O libraries.)"""
    m = _BROKER_URL.fullmatch(v)
    if m is None or not 0 < int(m["port"]) <= 65535:
        raise ValueError(f"{v!r} must look like http://HOST:PORT")
    return v


BrokerUrl = Annotated[
    str, StringConstraints(min_length=1, max_length=2048), AfterValidator(_broker_url)
]


_KAFKA_ENDPOINT = re.compile(r"(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")


def _kafka_endpoint(v: str) -> str:
    """Where Kafka clients reach a broker (issue 18): ``HOST:PORT``, what Metadata hands them."""
    m = _KAFKA_ENDPOINT.fullmatch(v)
    if m is None or not 0 < int(m["port"]) <= 65535:
        raise ValueError(f"{v!r} must look like HOST:PORT")
    return v


KafkaEndpoint = Annotated[
    str, StringConstraints(min_length=1, max_length=1024), AfterValidator(_kafka_endpoint)
]


def split_kafka_endpoint(v: str) -> tuple[str, int]:
    """``HOST:PORT`` (a valid :data:`KafkaEndpoint`) as ``(HOST, PORT)``."""
    host, _, port = v.rpartition(":")
    return host.strip("[]"), int(port)


class BrokerEndpoint(Model):
    broker_id: BrokerId
    url: BrokerUrl
    rack: str | None = None
    kafka_endpoint: KafkaEndpoint | None = None
    """The broker's advertised Kafka listener, learnt from its heartbeats; ``None`` for a
    broker without one (it is then left out of Kafka Metadata responses)."""


class LeaderAndIsrRequest(Model):
    controller_id: Annotated[int, Field(ge=-1)]
    controller_epoch: Annotated[int, Field(ge=0, le=2**31 - 1)]
    partitions: list[LeaderAndIsrPartition] = Field(max_length=MAX_LIST)
    live_leaders: list[BrokerEndpoint] = Field(default_factory=list, max_length=10_000)


class LeaderAndIsrResponse(Model):
    partitions: list[PartitionResult]


class StopReplicaPartition(Model):
    topic: Topic
    partition: PartitionId
    leader_epoch: Epoch = -1
    delete: bool = False


class StopReplicaRequest(Model):
    controller_id: Annotated[int, Field(ge=-1)]
    controller_epoch: Annotated[int, Field(ge=0, le=2**31 - 1)]
    partitions: list[StopReplicaPartition] = Field(max_length=MAX_LIST)


class StopReplicaResponse(Model):
    partitions: list[PartitionResult]


class PartitionMetadata(Model):
    topic: Topic
    partition: PartitionId
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    offline_replicas: list[int] = Field(default_factory=list)
    topic_id: TopicId | None = None


class UpdateMetadataRequest(Model):
    controller_id: Annotated[int, Field(ge=-1)]
    controller_epoch: Annotated[int, Field(ge=0, le=2**31 - 1)]
    live_brokers: list[BrokerEndpoint] = Field(max_length=10_000)
    partitions: list[PartitionMetadata] = Field(default_factory=list, max_length=MAX_LIST)


class MetadataResponse(Model):
    controller_id: int
    controller_epoch: int
    brokers: list[BrokerEndpoint]
    partitions: list[PartitionMetadata]


class ThrottleConfig(Model):
    """Dynamic broker configs, as kafka-reassign-partitions --throttle sets them."""

    intra_broker_throttled_rate: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    leader_replication_throttled_rate: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    follower_replication_throttled_rate: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    leader_replication_throttled_replicas: list[ReplicaRef] | None = None
    follower_replication_throttled_replicas: list[ReplicaRef] | None = None


# -- broker to controller -------------------------------------------------------------------


class AlterPartitionItem(Model):
    topic: Topic
    partition: PartitionId
    leader_epoch: Epoch
    partition_epoch: Annotated[int, Field(ge=0)]
    new_isr: list[BrokerId]


class AlterPartitionRequest(Model):
    broker_id: BrokerId
    partitions: list[AlterPartitionItem] = Field(max_length=MAX_LIST)


class AlterPartitionResult(Model):
    topic: str
    partition: int
    error: str | None = None
    leader: int = -1
    leader_epoch: int = -1
    isr: list[int] = Field(default_factory=list)
    partition_epoch: int = -1


class AlterPartitionResponse(Model):
    partitions: list[AlterPartitionResult]


class BrokerHeartbeat(Model):
    """Liveness: the controller counts a broker live while these arrive in its session."""

    broker_id: BrokerId
    offline_log_dirs: list[str] = Field(default_factory=list, max_length=1000)
    kafka_endpoint: KafkaEndpoint | None = None
    """The broker's advertised Kafka listener (``kafka.advertised.listeners``): the controller
    passes every live broker's in UpdateMetadata, so each can answer Metadata for all."""
    incarnation: Annotated[str, StringConstraints(max_length=64)] | None = None
    """A token the broker draws when its process starts (KRaft's broker epoch plays this
    part): a controller seeing a new one knows the broker restarted, however quickly, and sends
    it its whole state again; otherwise it sends only what changed (issue 39)."""


class AllocateProducerIdsRequest(Model):
    """A broker asks the controller for a block of producer ids (Kafka's
    AllocateProducerIds, KIP-730): InitProducerId hands them out one by one."""

    broker_id: BrokerId


class AllocateProducerIdsResponse(Model):
    """Ids ``first_producer_id`` to ``first_producer_id + count - 1``, this broker's alone."""

    first_producer_id: int = Field(ge=0, le=2**63 - 1)
    count: int = Field(ge=1, le=1_000_000)


class LogDirEvent(Model):
    """KIP-112's notification, sent to the controller instead of a ZooKeeper znode."""

    version: Literal[1] = 1
    broker: BrokerId
    event: Literal[1] = 1
    log_dir: str
    reason: str
    offline_replicas: list[ReplicaRef]


# -- data path ------------------------------------------------------------------------------


class ProduceResponse(Model):
    topic: str
    partition: int
    base_offset: int
    last_offset: int
    log_start_offset: int
    log_append_time: int = -1


class ListOffsetsResponse(Model):
    topic: str
    partition: int
    offset: int
    leader_epoch: int
