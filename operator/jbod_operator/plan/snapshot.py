"""The snapshot the placement planner reads, built from what the operator can observe.

Pure: it takes the BrokerCluster and the Topics (as the API server returns them) and every
live broker's describe-log-dirs answer, and returns a
:class:`~jbod_operator.models.snapshot.ClusterSnapshot`. The operator calls it for a
Rebalance and ``python -m jbod_spark.collect`` from the command line; the I/O (kubectl, the
broker client) is theirs. A KafkaCluster's snapshot (``plan.kafka_dirs.kafka_snapshot``, from
DescribeCluster, DescribeLogDirs and Metadata) ends in the same :func:`assemble`, so both
kinds of cluster are measured by one rule.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jbod_broker.wire import DescribeLogDirsResponse

from ..models.broker_cluster import rack_for
from ..models.snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo
from ..models.topic import kafka_topic_name
from .port_types import BrokerDirs, broker_dirs
from .storage_diff import parse_quantity

__all__ = [
    "SHARED_DISK_FACTOR",
    "RecordedPartition",
    "assemble",
    "build_snapshot",
    "measure_dirs",
    "quantity_bytes",
]

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


@dataclass(frozen=True)
class RecordedPartition:
    """One partition as the cluster's state of record has it: replicas in order, the leader
    (-1: none) and, where the record names one, each replica's dir (our Topic statuses do;
    Kafka's Metadata does not, its brokers' DescribeLogDirs say)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int = -1
    dirs: Mapping[int, str] = field(default_factory=dict)


def build_snapshot(
    cluster_name: str,
    broker_cluster: dict[str, Any],
    topics: list[dict[str, Any]],
    describes: dict[int, DescribeLogDirsResponse],
    *,
    namespace: str = "default",
    captured_at: str | None = None,
) -> ClusterSnapshot:
    """A BrokerCluster's snapshot: its spec (brokers, racks, dir sizes), its status (the dirs
    of a broker that did not answer), its Topics' statuses (the state of record) and the
    answering brokers' describe-log-dirs."""
    spec = broker_cluster.get("spec", {})
    status = broker_cluster.get("status") or {}
    spec_size = {
        ld["name"]: quantity_bytes(str(ld.get("size", "0"))) for ld in spec.get("logDirs", [])
    }
    racks = spec.get("racks") or []
    st_brokers = {int(b["id"]): b for b in status.get("brokers", [])}
    n = int(spec.get("replicas", len(st_brokers)))
    ids = sorted(set(range(n)) | set(st_brokers) | set(describes))
    brokers = {b: st_brokers.get(b, {}).get("rack") or rack_for(racks, b) for b in ids}
    away = {
        b: [
            LogDirInfo(
                broker_id=b,
                name=str(ld["name"]),
                path=str(ld["path"]),
                capacity_bytes=spec_size.get(str(ld["name"]), 0),
                used_bytes=0,
                live=False,
                cordoned=bool(ld.get("cordoned", False)),
            )
            for ld in st_brokers.get(b, {}).get("logDirs", [])
        ]
        for b in ids
        if b not in describes
    }
    partitions = []
    for t in sorted(topics, key=lambda t: t.get("metadata", {}).get("name", "")):
        if t.get("spec", {}).get("clusterName") != cluster_name:
            continue
        name = kafka_topic_name(t)
        for ps in (t.get("status") or {}).get("partitions", []):
            reps = ps["replicas"]
            partitions.append(
                RecordedPartition(
                    topic=name,
                    partition=int(ps["partition"]),
                    replicas=tuple(int(r["brokerId"]) for r in reps),
                    leader=int(ps.get("leader", -1)),
                    dirs={int(r["brokerId"]): r["logDir"] for r in reps if r.get("logDir")},
                )
            )
    return assemble(
        cluster_name,
        brokers,
        {b: broker_dirs(b, d) for b, d in describes.items()},
        partitions,
        spec_size,
        away=away,
        namespace=namespace,
        captured_at=captured_at,
    )


def measure_dirs(bd: BrokerDirs, spec_size: Mapping[str, int]) -> list[LogDirInfo]:
    """One answering broker's dirs as the planner counts them: a volume's own figures (used:
    total minus usable, replicas or not), or, for dirs sharing one filesystem (see the module
    docstring), the size ``spec_size`` gives the dir's name and its replicas' bytes."""
    figures = Counter((d.total_bytes, d.usable_bytes) for d in bd.dirs if d.live)
    totals = Counter(d.total_bytes for d in bd.dirs if d.live)
    out = []
    for d in bd.dirs:
        size = spec_size.get(d.name, 0)
        shared = size > 0 and (
            figures[(d.total_bytes, d.usable_bytes)] > 1
            or (totals[d.total_bytes] > 1 and d.total_bytes > SHARED_DISK_FACTOR * size)
        )
        out.append(
            LogDirInfo(
                broker_id=bd.broker,
                name=d.name,
                path=d.path,
                capacity_bytes=size if shared else d.total_bytes,
                used_bytes=sum(d.replicas.values())
                if shared
                else max(0, d.total_bytes - d.usable_bytes),
                live=d.live,
                cordoned=d.cordoned,
            )
        )
    return out


def assemble(
    cluster_name: str,
    brokers: Mapping[int, str | None],
    described: Mapping[int, BrokerDirs],
    partitions: Iterable[RecordedPartition],
    spec_size: Mapping[str, int],
    *,
    away: Mapping[int, Sequence[LogDirInfo]] | None = None,
    namespace: str = "default",
    captured_at: str | None = None,
) -> ClusterSnapshot:
    """The snapshot from what either kind of cluster reports, read into one form: the
    brokers (id → rack), each answering broker's dirs, the partition state of record and
    the dirs' sizes by name; ``away`` gives the dirs of a broker that did not answer, as far
    as they are known. Both kinds (``build_snapshot``, ``plan.kafka_dirs.kafka_snapshot``)
    end here, so a Rebalance plans a BrokerCluster and a KafkaCluster alike."""
    infos: list[BrokerInfo] = []
    dirs: list[LogDirInfo] = []
    located: dict[tuple[str, int, int], tuple[str, int]] = {}
    for b in sorted(set(brokers) | set(described)):
        bd = described.get(b)
        infos.append(BrokerInfo(id=b, rack=brokers.get(b), live=bd is not None))
        if bd is None:
            dirs.extend((away or {}).get(b, ()))
            continue
        dirs.extend(measure_dirs(bd, spec_size))
        for d in bd.dirs:
            for (topic, part), size in d.replicas.items():
                located[(topic, part, b)] = (d.path, size)
    known = {(d.broker_id, d.path) for d in dirs}
    first_dir: dict[int, str] = {}
    for ld_info in dirs:
        first_dir.setdefault(ld_info.broker_id, ld_info.path)
    replicas: list[ReplicaInfo] = []
    for p in partitions:
        sizes = [
            located[(p.topic, p.partition, b)][1]
            for b in p.replicas
            if (p.topic, p.partition, b) in located
        ]
        fallback = max(sizes) if sizes else 0
        for b in p.replicas:
            got = located.get((p.topic, p.partition, b))
            if got is not None:
                path, size = got
            else:
                path = p.dirs.get(b) or first_dir.get(b, "")
                size = fallback
            if (b, path) not in known:
                continue  # a broker with no dir at all: nothing can be planned for it
            replicas.append(
                ReplicaInfo(
                    topic=p.topic,
                    partition=p.partition,
                    broker_id=b,
                    log_dir=path,
                    size_bytes=size,
                    leader=p.leader == b,
                )
            )
    return ClusterSnapshot(
        cluster_name=cluster_name,
        namespace=namespace,
        captured_at=captured_at,
        brokers=infos,
        log_dirs=dirs,
        replicas=replicas,
    )
