"""Snapshot collector: ``python -m jbod_spark.collect --cluster NAME [-n NS] --out snap.json``.

Reads the BrokerCluster (brokers, racks, URLs, log dir names) and the cluster's Topics
(replica lists with brokerId and logDir, leaders) with ``kubectl ... -o json``, asks every live
broker for describe-log-dirs, and writes a :class:`~jbod_spark.snapshot.ClusterSnapshot`.
:func:`build_snapshot` is the pure part (tested without a cluster).

Dirs of one broker that report the same total and usable bytes share a filesystem (a demo on
one disk): their capacity is then the size the BrokerCluster spec gives them and their use the
bytes of their replicas. Observed state wins: a replica found by describe-log-dirs in another
dir than its Topic status says is taken where the broker has it. A replica the broker could
not describe (dead broker, offline dir) keeps the status' dir and the size of its largest
sibling replica. Moves in flight (``-future`` logs) are not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jbod_broker import wire
from jbod_broker.wire import DescribeLogDirsResponse
from jbod_operator.models import kafka_topic_name

from .snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo

_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def quantity_bytes(q: str) -> int:
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?", q.strip())
    if not m:
        return 0
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""])


def build_snapshot(
    cluster_name: str,
    broker_cluster: dict[str, Any],
    topics: list[dict[str, Any]],
    describes: dict[int, DescribeLogDirsResponse],
    *,
    namespace: str = "default",
    captured_at: str | None = None,
) -> ClusterSnapshot:
    spec = broker_cluster.get("spec", {})
    status = broker_cluster.get("status") or {}
    spec_size = {
        ld["name"]: quantity_bytes(str(ld.get("size", "0"))) for ld in spec.get("logDirs", [])
    }
    racks = spec.get("racks") or []
    st_brokers = {int(b["id"]): b for b in status.get("brokers", [])}
    n = int(spec.get("replicas", len(st_brokers)))
    ids = sorted(set(range(n)) | set(st_brokers) | set(describes))
    brokers: list[BrokerInfo] = []
    dirs: list[LogDirInfo] = []
    located: dict[tuple[str, int, int], tuple[str, int]] = {}
    for b in ids:
        sb = st_brokers.get(b, {})
        rack = sb.get("rack") or (racks[b % len(racks)] if racks else None)
        desc = describes.get(b)
        brokers.append(BrokerInfo(id=b, rack=rack, live=desc is not None))
        if desc is not None:
            # dirs on one filesystem all report the whole disk: then a dir's capacity is its
            # size in the BrokerCluster spec and its use the bytes of its replicas
            figures = Counter((d.total_bytes, d.usable_bytes) for d in desc.log_dirs if d.is_live)
            for d in desc.log_dirs:
                name = wire.log_dir_short_name(d.path)
                shared = figures[(d.total_bytes, d.usable_bytes)] > 1 and spec_size.get(name)
                replica_bytes = sum(p.size for p in d.partitions if not p.is_future)
                dirs.append(
                    LogDirInfo(
                        broker_id=b,
                        name=name,
                        path=d.path,
                        capacity_bytes=spec_size[name] if shared else d.total_bytes,
                        used_bytes=replica_bytes
                        if shared
                        else max(0, d.total_bytes - d.usable_bytes),
                        live=d.is_live,
                        cordoned=d.cordoned,
                    )
                )
                for p in d.partitions:
                    if not p.is_future:
                        located[(p.topic, p.partition, b)] = (d.path, p.size)
        else:
            for ld in sb.get("logDirs", []):
                dirs.append(
                    LogDirInfo(
                        broker_id=b,
                        name=str(ld["name"]),
                        path=str(ld["path"]),
                        capacity_bytes=spec_size.get(str(ld["name"]), 0),
                        used_bytes=0,
                        live=False,
                        cordoned=bool(ld.get("cordoned", False)),
                    )
                )
    known = {(d.broker_id, d.path) for d in dirs}
    first_dir: dict[int, str] = {}
    for ld_info in dirs:
        first_dir.setdefault(ld_info.broker_id, ld_info.path)
    replicas: list[ReplicaInfo] = []
    for t in sorted(topics, key=lambda t: t.get("metadata", {}).get("name", "")):
        if t.get("spec", {}).get("clusterName") != cluster_name:
            continue
        ts = t.get("status") or {}
        name = kafka_topic_name(t)
        for ps in ts.get("partitions", []):
            part = int(ps["partition"])
            sizes = [
                located[(name, part, int(r["brokerId"]))][1]
                for r in ps["replicas"]
                if (name, part, int(r["brokerId"])) in located
            ]
            fallback = max(sizes) if sizes else 0
            for r in ps["replicas"]:
                b = int(r["brokerId"])
                got = located.get((name, part, b))
                if got is not None:
                    path, size = got
                else:
                    path = r.get("logDir") or first_dir.get(b, "")
                    size = fallback
                if (b, path) not in known:
                    continue  # a broker with no dir at all: nothing can be planned for it
                replicas.append(
                    ReplicaInfo(
                        topic=name,
                        partition=part,
                        broker_id=b,
                        log_dir=path,
                        size_bytes=size,
                        leader=int(ps.get("leader", -1)) == b,
                    )
                )
    return ClusterSnapshot(
        cluster_name=cluster_name,
        namespace=namespace,
        captured_at=captured_at,
        brokers=brokers,
        log_dirs=dirs,
        replicas=replicas,
    )


def kubectl_json(kubectl: str, *args: str) -> dict[str, Any]:
    out = subprocess.run([kubectl, *args, "-o", "json"], check=True, capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert isinstance(data, dict)
    return data


async def describe_all(
    urls: dict[int, str], token: str | None, timeout_s: float
) -> dict[int, DescribeLogDirsResponse]:
    from jbod_broker.client import BrokerClient

    async def one(b: int, url: str) -> tuple[int, DescribeLogDirsResponse | None]:
        try:
            async with BrokerClient(url, token=token, timeout_s=timeout_s) as c:
                return b, await c.describe_log_dirs()
        except Exception as e:  # an unreachable broker is a dead broker in the snapshot
            print(f"broker {b} ({url}): {type(e).__name__}: {e}", file=sys.stderr)
            return b, None

    got = await asyncio.gather(*(one(b, u) for b, u in sorted(urls.items())))
    return {b: d for b, d in got if d is not None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jbod_spark.collect", description=__doc__)
    ap.add_argument("--cluster", required=True, help="BrokerCluster name")
    ap.add_argument("-n", "--namespace", default="default")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--token-file", default=os.environ.get("JBOD_BROKER_TOKEN_FILE", ""))
    ap.add_argument("--timeout", type=float, default=30.0)
    ns = ap.parse_args(argv)
    bc = kubectl_json(ns.kubectl, "get", "brokerclusters.jbod.io", ns.cluster, "-n", ns.namespace)
    topics = kubectl_json(ns.kubectl, "get", "topics.jbod.io", "-n", ns.namespace)["items"]
    urls = {
        int(b["id"]): str(b["url"])
        for b in (bc.get("status") or {}).get("brokers", [])
        if b.get("url")
    }
    token = Path(ns.token_file).read_text().strip() if ns.token_file else None
    describes = asyncio.run(describe_all(urls, token, ns.timeout))
    snap = build_snapshot(
        ns.cluster,
        bc,
        topics,
        describes,
        namespace=ns.namespace,
        captured_at=datetime.now(UTC).isoformat(),
    )
    Path(ns.out).write_text(snap.dump_json() + "\n")
    print(
        f"{ns.cluster}: {len(snap.brokers)} brokers ({len(describes)} answered), "
        f"{len(snap.log_dirs)} log dirs, {len(snap.replicas)} replicas -> {ns.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
