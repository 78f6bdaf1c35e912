"""The largest PartitionReassignment the schema allows, with its status at its largest, on the
real API server: the measurement that sets ``MAX_PARTITIONS`` (etcd refuses an object over
about 1.5 MiB, so a bigger limit would be a resource that validates and cannot be stored);
and the largest PartitionShard, which sets ``SHARD_SIZE`` (issue 39)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from jbod_operator.clients.kube import KubeClient
from jbod_operator.clients.partition_store import PartitionStore
from jbod_operator.models.common import MAX_REPLICAS
from jbod_operator.models.partition_shard import MAX_OBJECT_BYTES, MAX_SHARDS, SHARD_SIZE
from jbod_operator.models.reassignment import (
    MAX_BATCH,
    MAX_DETAIL,
    MAX_PARTITIONS,
    PartitionPhase,
    PartitionReassignment,
)
from jbod_operator.models.topic import MAX_PARTITIONS as MAX_TOPIC_PARTITIONS
from jbod_operator.plan import partition_shards as rule
from tests.fake_api import largest_state
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "reassignment-size"
SHARD_NAMESPACE = "shard-size"
ETCD_LIMIT = int(1.5 * 1024 * 1024)
TOPIC = "t" * 249
BROKERS = [1_000_000 - i for i in range(MAX_REPLICAS)]
DIR = "d" * 63  # a dir name (a DNS label); a 64-character path is the same size


def largest() -> dict[str, Any]:
    spec = {
        "clusterName": "c" * 253,
        "partitions": [
            {
                "topic": TOPIC,
                "partition": 2**31 - 1 - i,
                "replicas": BROKERS,
                "logDirs": ["/" + "p" * 63] * MAX_REPLICAS,
            }
            for i in range(MAX_PARTITIONS)
        ],
        "maxConcurrentReplicaMovements": MAX_REPLICAS,
        "maxConcurrentPartitionMovements": MAX_BATCH,
        "maxConcurrentLeaderMovements": MAX_BATCH,
        "maxConcurrentMovesPerBroker": 64,
        "throttleBytesPerSecond": 2**40,
        "allowReplicationFactorChange": True,
        "stallAfterSeconds": 7 * 24 * 3600,
        "pause": True,
        "cancel": True,
        "rollback": True,
    }
    big = 2**53
    status = {
        "observedGeneration": big,
        "phase": "RollingBack",
        "startTime": "2026-11-24T16:58:00Z",
        "completionTime": "2026-11-24T16:58:00Z",
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": "R" * 64,
                "message": "m" * 2048,
                "observedGeneration": big,
                "lastTransitionTime": "2026-11-24T16:58:00Z",
            }
            for t in (
                "Progressing",
                "Succeeded",
                "Failed",
                "Cancelled",
                "RolledBack",
                "Paused",
                "Stalled",
            )
        ],
        "original": [
            {
                "topic": TOPIC,
                "partition": 2**31 - 1 - i,
                "replicas": BROKERS,
                "logDirs": [DIR] * MAX_REPLICAS,
            }
            for i in range(MAX_PARTITIONS)
        ],
        "batch": big,
        "currentBatch": [
            {
                "topic": TOPIC,
                "partition": 2**31 - 1 - i,
                "currentBrokers": BROKERS * 2,
                "targetBrokers": BROKERS,
            }
            for i in range(MAX_BATCH)
        ],
        "batchesPlanned": big,
        "counts": {s.value: big for s in PartitionPhase},
        "partitions": [
            {
                "topic": TOPIC,
                "partition": 2**31 - 1 - i,
                "state": "Removing",
                "replicas": BROKERS * 2,
                "addingReplicas": BROKERS,
                "removingReplicas": BROKERS,
                "targetReplicas": BROKERS,
                "stepsDone": big,
                "bytesToMove": big,
                "bytesMoved": big,
                "message": "m" * 256,
                "since": "2026-11-24T16:58:00Z",
            }
            for i in range(MAX_DETAIL)
        ],
        "bytesToMove": big,
        "bytesMoved": big,
        "progressPercent": 100,
        "rateBytesPerSecond": big,
        "etaSeconds": big,
        "throttledBrokers": list(range(1_000_000 - 64, 1_000_000)),
        "strayReplicas": [
            {
                "brokerId": 1_000_000 - i,
                "topic": TOPIC,
                "partition": 2**31 - 1 - i,
                "logDir": "/" + "d" * 254,
                "since": "2026-11-24T16:58:00Z",
            }
            for i in range(MAX_DETAIL)
        ],
    }
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": "r" * 253, "namespace": NAMESPACE},
        "spec": spec,
        "status": status,
    }


def test_largest_reassignment_is_stored(kube_cluster: KubeCluster) -> None:
    obj = largest()
    # It is the largest the models allow: one more partition, replica or character is refused.
    PartitionReassignment.model_validate(obj)
    applied = kube_cluster.kubectl("apply", "-f", str(REPO_ROOT / "crds"))
    assert applied.returncode == 0, applied.stderr
    kube_cluster.wait_established("partitionreassignments.jbod.io")
    kube_cluster.kubectl("create", "namespace", NAMESPACE)
    body = {k: v for k, v in obj.items() if k != "status"}
    # `create` stores no last-applied annotation (a client-side apply would add a second copy
    # of the spec, over the annotations' 256 KiB limit): use it, or apply --server-side.
    created = kube_cluster.kubectl("create", "-f", "-", input=json.dumps(body))
    assert created.returncode == 0, created.stderr[:2000]
    stored = json.loads(
        kube_cluster.kubectl(
            "get", "partitionreassignment", obj["metadata"]["name"], "-n", NAMESPACE, "-o", "json"
        ).stdout
    )
    stored["status"] = obj["status"]
    replaced = kube_cluster.kubectl(
        "replace", "--subresource=status", "-f", "-", input=json.dumps(stored)
    )
    assert replaced.returncode == 0, replaced.stderr[:2000]
    final = kube_cluster.kubectl(
        "get", "partitionreassignment", obj["metadata"]["name"], "-n", NAMESPACE, "-o", "json"
    ).stdout
    # What etcd holds: the object as compact JSON (kubectl prints it indented), managed fields
    # included.
    size = len(json.dumps(json.loads(final), separators=(",", ":")).encode())
    print(
        json.dumps(
            {
                "largest_reassignment_bytes": size,
                "etcd_limit_bytes": ETCD_LIMIT,
                "max_partitions": MAX_PARTITIONS,
                "max_replicas": MAX_REPLICAS,
            }
        )
    )
    assert json.loads(final)["status"]["original"][-1] == obj["status"]["original"][-1]
    assert size < ETCD_LIMIT, size


# -- the largest PartitionShard (issue 39) ------------------------------------------------------


def test_largest_partition_shard_is_written_by_the_store(kube_cluster: KubeCluster) -> None:
    """The last shard of the largest Topic the CRD admits (100,000 partitions), every state at
    its largest, written by the operator's own store and read back: under the 1 MiB the
    operator allows itself (the CRD's limits and ``SHARD_SIZE`` agree)."""
    applied = kube_cluster.kubectl("apply", "-f", str(REPO_ROOT / "crds"))
    assert applied.returncode == 0, applied.stderr
    kube_cluster.wait_established("partitionshards.jbod.io", "topics.jbod.io")
    kube_cluster.kubectl("create", "namespace", SHARD_NAMESPACE)
    name = "t" * 253
    topic = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name, "namespace": SHARD_NAMESPACE},
        "spec": {
            "clusterName": "c" * 253,
            "topicName": "t" * 249,
            "partitions": MAX_TOPIC_PARTITIONS,
            "replicationFactor": MAX_REPLICAS,
        },
    }
    created = kube_cluster.kubectl("create", "-f", "-", input=json.dumps(topic))
    assert created.returncode == 0, created.stderr[:2000]
    stored_topic = json.loads(
        kube_cluster.kubectl("get", "topic", name, "-n", SHARD_NAMESPACE, "-o", "json").stdout
    )
    last = rule.shard_of(MAX_TOPIC_PARTITIONS - 1)
    first = last * SHARD_SIZE
    updates = {p: {**largest_state(p), "leader": -1} for p in range(first, first + SHARD_SIZE)}

    async def write() -> dict[str, int]:
        kube = KubeClient.from_env(str(kube_cluster.kubeconfig))
        try:
            store = PartitionStore(kube)
            await store.put(stored_topic, updates)
            return {"largest_written": store.stats.largest_written}
        finally:
            await kube.close()

    figures = asyncio.run(write())
    got = kube_cluster.kubectl(
        "get", "partitionshard", rule.shard_name(name, last), "-n", SHARD_NAMESPACE, "-o", "json"
    )
    assert got.returncode == 0, got.stderr
    size = len(json.dumps(json.loads(got.stdout), separators=(",", ":")).encode())
    print(
        json.dumps(
            {
                "largest_shard_stored_bytes": size,
                **figures,
                "object_limit_bytes": MAX_OBJECT_BYTES,
                "shard_size": SHARD_SIZE,
                "shards_of_the_largest_topic": MAX_SHARDS,
            }
        )
    )
    joined = rule.join(stored_topic, [json.loads(got.stdout)])["status"]["partitions"]
    assert [s["partition"] for s in joined] == list(range(first, first + SHARD_SIZE))
    assert size < MAX_OBJECT_BYTES, size
