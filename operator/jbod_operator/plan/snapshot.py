"""The snapshot the placement planner reads, built from what the operator can observe.

Pure: it takes the BrokerCluster and the Topics (as the API server returns them) and every
live broker's describe-log-dirs answer, and returns a
:class:`~jbod_operator.models.snapshot.ClusterSnapshot`. The operator calls it for a
Rebalance and ``python -m jbod_spark.collect`` from the command line; the I/O (kubectl, the
broker client) is theirs.

Dirs of one broker that report the same total and usable bytes share a filesystem (a demo on
one disk): their capacity is then the size the BrokerCluster spec gives them and their use the
bytes of their replicas. So do dirs of one broker that report the same total when that total
is far above the size the spec gives them (:data:`SHARED_DISK_FACTOR`): a filesystem written
to while the broker reads each dir's figures in turn (a producer running during the snapshot)
reports usable bytes that differ from one dir to the next, and taking such a dir as a disk of
its own would count the whole filesystem's use against it.

Observed state wins: a replica found by describe-log-dirs in another dir than its Topic status
says is taken where the broker has it. A replica the broker could not describe (dead broker,
offline dir) keeps the status' dir and the size of its largest sibling replica. Moves in
flight (``-future`` logs) are not counted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from jbod_broker import wire
from jbod_broker.wire import DescribeLogDirsResponse

from ..models.snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo
from ..models.topic import kafka_topic_name
from .storage_diff import parse_quantity

__all__ = ["SHARED_DISK_FACTOR", "build_snapshot", "quantity_bytes"]

SHARED_DISK_FACTOR = 2
"""A dir whose filesystem is more than this many times the size the spec gives it, and which
reports the same total as another dir of its broker, shares that filesystem. A provisioned
volume is about its claim's size, so no dir with a disk of its own is taken for shared."""


def quantity_bytes(q: str) -> int:
    """A Kubernetes quantity in whole bytes; 0 for one that does not parse (a log dir whose size
    is unknown counts as no capacity, so nothing is planned onto it)."""
    try:
        return int(parse_quantity(q))
    except ValueError:
        return 0


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
            totals = Counter(d.total_bytes for d in desc.log_dirs if d.is_live)
            for d in desc.log_dirs:
                name = wire.log_dir_short_name(d.path)
                size = spec_size.get(name, 0)
                shared = size > 0 and (
                    figures[(d.total_bytes, d.usable_bytes)] > 1
                    or (totals[d.total_bytes] > 1 and d.total_bytes > SHARED_DISK_FACTOR * size)
                )
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
