"""PartitionShard: a bounded slice of one Topic's partition state of record (issue 39).

Kafka's KRaft controller keeps one PartitionRecord per partition in its metadata log; ZooKeeper
kept one znode per partition. A Topic's status cannot hold them all: etcd refuses an object
over 1.5 MiB, about 4,400 partitions at RF 3. So the state of record is sharded by a fixed
rule (``plan.partition_shards``): shard ``k`` of a Topic holds partitions ``[k*SHARD_SIZE,
(k+1)*SHARD_SIZE)``, one object each, owned by the Topic (deleted with it) and written with
its resourceVersion, so two writers never lose each other's update.

The spec *is* the record (as a ConfigMap's ``data`` is): the operator is its only writer, and
nothing reconciles a PartitionShard. Every list of a partition state is bounded by the CRD
(``models.topic.PartitionState``), so the largest shard the API server admits is under
``MAX_OBJECT_BYTES`` (measured on the real API server in
tests/integration/test_reassignment_size.py).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field, StringConstraints

from .common import API_VERSION, CamelModel, ResourceMeta, ResourceName
from .topic import MAX_PARTITIONS, PartitionState

SHARD_SIZE = 128
"""Partitions per shard. At every schema limit at once (16 replicas with 255-character dirs,
every id list full, a 253-character reassignedBy) a partition state is 5,760 bytes as JSON,
so a full shard is about 740 KB, under ``MAX_OBJECT_BYTES``; a typical one (RF 3) about 44 KB."""
MAX_SHARDS = -(-MAX_PARTITIONS // SHARD_SIZE)
"""Shards of the largest Topic the CRD admits."""
MAX_OBJECT_BYTES = 1 << 20
"""The largest object the operator writes (issue 39's bound, under etcd's 1.5 MiB)."""
TOPIC_UID_LABEL = "jbod.io/topic-uid"
"""The owning Topic's uid: a deleted and re-created Topic of the same name never reads the
shards of the one before it (they are garbage collected after it)."""

Uid = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class PartitionShardSpec(CamelModel):
    cluster_name: ResourceName
    topic: Annotated[ResourceName, Field(description="The owning Topic resource's name.")]
    topic_uid: Annotated[Uid, Field(description="The owning Topic's metadata.uid.")]
    shard: Annotated[int, Field(ge=0, le=MAX_SHARDS - 1)]
    partitions: Annotated[
        list[PartitionState],
        Field(
            max_length=SHARD_SIZE,
            description="The states of partitions [shard*size, (shard+1)*size), by partition.",
        ),
    ]


class PartitionShard(CamelModel):
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "PartitionShard"
    plural: ClassVar[str] = "partitionshards"
    short_names: ClassVar[list[str]] = ["jps"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"},
        {"name": "Topic", "type": "string", "jsonPath": ".spec.topic"},
        {"name": "Shard", "type": "integer", "jsonPath": ".spec.shard"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = API_VERSION
    metadata: ResourceMeta
    spec: PartitionShardSpec
