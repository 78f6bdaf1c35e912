"""What a write of the state of record costs the API server (issue 39): PartitionShard
replaces a second, against a ConfigMap of the same bytes on the same API server.

A broker's failover changes partitions in every shard of the cluster (a broker's replicas are
spread over all of them), so the controller's failover time at 200,000 partitions is about
1,562 shard writes over the API server's write rate. This bench measures that rate on a fresh
kube-apiserver and etcd (``tests.kube_cluster``, loopback), with the operator's own client
(``clients.kube.KubeClient``) and its concurrency (``partition_store.WRITES_AT_ONCE``):

``shard_writes_per_s``
    Replaces of full PartitionShards (128 partition states RF 3, the shape the controller
    writes, about 41 KB) under the generated CRD schema.
``shard_writes_per_s_by_schema``
    The same objects under variants of the CRD: the schema as generated; the partition items
    schemaless (``x-kubernetes-preserve-unknown-fields``); the whole spec schemaless. It shows
    what the per-item schema costs and what the API server's decoding of a CRD object costs.
``configmap_writes_per_s`` (the yardstick)
    Replaces of ConfigMaps holding one string of the shard's size: the API server's write
    path for the same bytes without a CRD's object tree.

``--quick``: fewer objects. One JSON line on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from jbod_operator.clients.kube import CONFIGMAPS, PARTITION_SHARDS, KubeClient
from jbod_operator.clients.partition_store import WRITES_AT_ONCE
from jbod_operator.models.partition_shard import SHARD_SIZE
from tests.fake_api import state
from tests.kube_cluster import KubeCluster

ROOT = Path(__file__).resolve().parent.parent
CRD = ROOT / "crds" / "jbod.io_partitionshards.yaml"
NS = "default"
BROKERS = 50


def shard_body(prefix: str, k: int) -> dict[str, Any]:
    """Shard ``k``: 128 RF-3 states spread over 50 brokers, every list present."""
    parts = []
    for i in range(SHARD_SIZE):
        p = k * SHARD_SIZE + i
        s = state(p, brokers=(p % BROKERS, (p + 1) % BROKERS, (p + 2) % BROKERS))
        s.update(offlineReplicas=[], diskOfflineReplicas=[])
        parts.append(s)
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionShard",
        "metadata": {"name": f"{prefix}-{k}", "namespace": NS},
        "spec": {
            "clusterName": "c",
            "topic": "t",
            "topicUid": "u",
            "shard": k,
            "partitions": parts,
        },
    }


def crd_variants() -> dict[str, dict[str, Any]]:
    base = yaml.safe_load(CRD.read_text())
    items = copy.deepcopy(base)
    spec = items["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["partitions"]["items"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    whole = copy.deepcopy(base)
    whole["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    return {"generated": base, "items_schemaless": items, "spec_schemaless": whole}


async def rate(
    objs: list[dict[str, Any]], replace: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
) -> float:
    """Writes a second replacing every object once, ``WRITES_AT_ONCE`` at a time."""
    gate = asyncio.Semaphore(WRITES_AT_ONCE)

    async def one(i: int) -> None:
        async with gate:
            objs[i] = await replace(objs[i])

    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(len(objs))))
    return round(len(objs) / (time.monotonic() - t0), 1)


async def shards(kube: KubeClient, prefix: str, n: int) -> float:
    objs = [await kube.create(PARTITION_SHARDS, NS, shard_body(prefix, k)) for k in range(n)]

    async def replace(o: dict[str, Any]) -> dict[str, Any]:
        for s in o["spec"]["partitions"]:
            s["leaderEpoch"] += 1
        out: dict[str, Any] = await kube.replace(PARTITION_SHARDS, NS, o)
        return out

    return await rate(objs, replace)


async def configmaps(kube: KubeClient, size: int, n: int) -> float:
    objs = []
    for k in range(n):
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{k}", "namespace": NS},
            "data": {"x": "a" * size},
        }
        objs.append(await kube.create(CONFIGMAPS, NS, body))

    async def replace(o: dict[str, Any]) -> dict[str, Any]:
        o["data"]["x"] = ("b" if o["data"]["x"][0] == "a" else "a") * size
        out: dict[str, Any] = await kube.replace(CONFIGMAPS, NS, o)
        return out

    return await rate(objs, replace)


def install(kc: KubeCluster, crd: dict[str, Any], path: Path) -> None:
    path.write_text(yaml.safe_dump(crd))
    kc.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path), check=True)
    kc.wait_established("partitionshards.jbod.io")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="40 objects instead of 200")
    args = ap.parse_args()
    n = 40 if args.quick else 200
    size = len(json.dumps(shard_body("x", 0), separators=(",", ":")))
    by_schema: dict[str, float] = {}
    with KubeCluster() as kc:
        workdir = kc.workdir
        assert workdir is not None
        kube = KubeClient.from_env(str(kc.kubeconfig))

        async def run() -> float:
            try:
                for name, crd in crd_variants().items():
                    install(kc, crd, workdir / f"crd-{name}.yaml")
                    by_schema[name] = await shards(kube, name.replace("_", "-"), n)
                    print(f"shards under the {name} schema: {by_schema[name]}/s", file=sys.stderr)
                return await configmaps(kube, size, n)
            finally:
                await kube.close()

        cm = asyncio.run(run())
    print(
        json.dumps(
            {
                "objects": n,
                "object_bytes": size,
                "writes_at_once": WRITES_AT_ONCE,
                "shard_writes_per_s": by_schema["generated"],
                "shard_writes_per_s_by_schema": by_schema,
                "yardstick": {"configmap_writes_per_s": cm},
                "shard_vs_configmap": round(by_schema["generated"] / cm, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
