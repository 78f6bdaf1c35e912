"""Custom resources of the operator, as pydantic models: the one source for the CRD schemas
(``crds/`` is generated from these) and for the operator's own reading and writing.

Group ``jbod.io``, version ``v1alpha1``. Fields are camelCase on the wire (Kubernetes API
conventions) and snake_case in Python.
"""

from .broker_cluster import (
    BalanceSpec,
    BalanceTrigger,
    BrokerCluster,
    BrokerClusterSpec,
    BrokerClusterStatus,
    LogDir,
)
from .common import GROUP, VERSION, Condition
from .kafka_cluster import (
    KafkaCluster,
    KafkaClusterSpec,
    KafkaClusterStatus,
    SaslMechanism,
    SecurityProtocol,
)
from .log_dir_move import LogDirMove, LogDirMoveSpec, LogDirMoveStatus
from .partition_shard import PartitionShard, PartitionShardSpec
from .reassignment import PartitionReassignment, PartitionReassignmentSpec
from .rebalance import (
    Rebalance,
    RebalanceCommand,
    RebalanceMode,
    RebalancePhase,
    RebalanceSpec,
    RebalanceStatus,
)
from .topic import Topic, TopicSpec, TopicStatus, kafka_topic_name, topic_id_of

__all__ = [
    "GROUP",
    "VERSION",
    "BalanceSpec",
    "BalanceTrigger",
    "BrokerCluster",
    "BrokerClusterSpec",
    "BrokerClusterStatus",
    "Condition",
    "KafkaCluster",
    "KafkaClusterSpec",
    "KafkaClusterStatus",
    "LogDir",
    "LogDirMove",
    "LogDirMoveSpec",
    "LogDirMoveStatus",
    "PartitionReassignment",
    "PartitionReassignmentSpec",
    "PartitionShard",
    "PartitionShardSpec",
    "Rebalance",
    "RebalanceCommand",
    "RebalanceMode",
    "RebalancePhase",
    "RebalanceSpec",
    "RebalanceStatus",
    "SaslMechanism",
    "SecurityProtocol",
    "Topic",
    "TopicSpec",
    "TopicStatus",
    "kafka_topic_name",
    "topic_id_of",
]
