"""A Topic's partitions: which are missing, where the new ones go, the status around them. Pure.

The Topic handler decides with these and writes the Topic's conditions; the cluster controller
writes the state of record they plan (``ClusterController.create_partitions``) and tells the
brokers. Kafka's controller does the same split: ``AdminZkClient`` computes an assignment and
the controller's partition state machine makes it so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jbod_broker import wire
from jbod_broker.storage.names import new_topic_id

from ..models import BrokerCluster, Topic, kafka_topic_name
from ..models.broker_cluster import rack_for
from .assignment import BrokerInfo, DirUsage, assign_partitions, choose_log_dir
from .conditions import set_condition
from .topic_spec import Event, Refusal, accepted_configs, ready_status

Describes = Mapping[int, wire.DescribeLogDirsResponse | None]
"""Each broker's describe-log-dirs, None for one that did not answer (not live)."""


class TopicNotReady(Exception):
    """Cannot progress now (no cluster, too few brokers); retried after ``delay`` seconds."""

    def __init__(self, message: str, reason: str, delay: float = 10.0) -> None:
        super().__init__(message)
        self.reason = reason
        self.delay = delay


@dataclass(frozen=True)
class PartitionCreation:
    """What a pass decided on the Topic as stored (read under the controller's lock).

    ``status``: the state of record to write when ``new`` names partitions (every partition,
    the new ones included, and the configs in force), else the status as stored. ``refusal``:
    why the stored Topic is not taken to the brokers (then nothing is new). ``live``: the
    brokers that answered, the ones told."""

    status: dict[str, Any]
    new: frozenset[int] = frozenset()
    refusal: Refusal | None = None
    live: tuple[int, ...] = ()
    topic: str = ""


def broker_infos(bc: BrokerCluster, live: set[int]) -> list[BrokerInfo]:
    racks = bc.spec.racks or []
    return [
        BrokerInfo(id=i, rack=rack_for(racks, i), live=i in live) for i in range(bc.spec.replicas)
    ]


def dir_usages(desc: wire.DescribeLogDirsResponse) -> list[DirUsage]:
    return [
        DirUsage(
            name=wire.log_dir_short_name(d.path),
            path=d.path,
            live=d.is_live,
            cordoned=d.cordoned,
            usable_bytes=d.usable_bytes,
            replicas=len(d.partitions),
        )
        for d in desc.log_dirs
    ]


def live_brokers(describes: Describes) -> list[int]:
    return sorted(i for i, d in describes.items() if d is not None)


def missing_partitions(t: Topic, status: Mapping[str, Any]) -> bool:
    """Whether the spec asks for partitions the status does not have; a decrease is refused
    (Kafka cannot remove partitions)."""
    existing = status.get("partitions") or []
    if t.spec.partitions < len(existing):
        raise TopicNotReady(
            f"partitions cannot decrease from {len(existing)} to {t.spec.partitions}",
            "PartitionDecreaseRefused",
            delay=60,
        )
    return len(existing) < t.spec.partitions


def plan_new_partitions(
    t: Topic,
    bc: BrokerCluster,
    describes: Describes,
    existing: dict[int, dict[str, Any]],
) -> dict[int, dict[str, Any]]:
    """Partition states for partitions the status does not have yet: replicas by
    ``assign_partitions`` over the live brokers, each in the dir ``choose_log_dir`` picks."""
    missing = [p for p in range(t.spec.partitions) if p not in existing]
    if not missing:
        return {}
    live = set(live_brokers(describes))
    rf = t.spec.replication_factor
    if rf > len(live):
        raise TopicNotReady(
            f"replicationFactor {rf} needs {rf} live brokers; {len(live)} of "
            f"{bc.spec.replicas} answer ({sorted(live)})",
            "NotEnoughBrokers",
        )
    assignment = assign_partitions(
        missing,
        rf,
        broker_infos(bc, live),
        existing={p: [r["brokerId"] for r in s["replicas"]] for p, s in existing.items()},
    )
    planned: dict[int, dict[str, int]] = {}
    out: dict[int, dict[str, Any]] = {}
    for p in missing:
        replicas = []
        for b in assignment[p]:
            desc = describes[b]
            assert desc is not None
            usage = planned.setdefault(b, {})
            d = choose_log_dir(dir_usages(desc), usage)
            usage[d.name] = usage.get(d.name, 0) + 1
            replicas.append({"brokerId": b, "logDir": d.path})
        out[p] = {
            "partition": p,
            "replicas": replicas,
            "leader": assignment[p][0],
            "leaderEpoch": 0,
            "isr": list(assignment[p]),
            "partitionEpoch": 0,
            "offlineReplicas": [],
        }
    return out


def plan_creation(
    t: Topic,
    bc: BrokerCluster,
    describes: Describes,
    status: Mapping[str, Any],
    refusal: Refusal | None = None,
    *,
    now: float,
) -> PartitionCreation:
    """The decision on the Topic as stored (``t``, its ``status``): nothing if refused or
    none is missing, else the state of record with the new partitions, the configs in force
    and the topic id (KIP-516: assigned once, with the first partitions, before any broker
    hears of them), Ready False "Creating" until the pass is done."""
    stored = dict(status)
    if refusal is not None:
        return PartitionCreation(stored, refusal=refusal)
    existing = {s["partition"]: s for s in stored.get("partitions") or []}
    new = plan_new_partitions(t, bc, describes, existing)
    if not new:
        return PartitionCreation(stored)
    conditions = set_condition(
        list(stored.get("conditions") or []),
        "Ready",
        False,
        "Creating",
        f"creating {len(new)} partitions",
        t.metadata.generation,
        now=now,
    )
    record = {
        **stored,
        "topicId": stored.get("topicId") or new_topic_id(),
        "topicName": kafka_topic_name(t),
        "configs": accepted_configs(t.spec),
        "partitions": sorted({**existing, **new}.values(), key=lambda s: s["partition"]),
        "conditions": conditions,
    }
    return PartitionCreation(
        record, frozenset(new), live=tuple(live_brokers(describes)), topic=kafka_topic_name(t)
    )


def pass_status(
    t: Topic, status: Mapping[str, Any], refusal: Refusal | None, *, now: float
) -> tuple[dict[str, Any], list[Event]]:
    """The status a pass ends with (``topic_spec.ready_status``) and its Events. A Topic
    made before topic ids (its partitions all exist) gets its id here, and the controller's
    next pass hands it to the brokers with the rest of the state."""
    out, events = ready_status(t, status, refusal, now=now)
    if refusal is None and not out.get("topicId"):
        out = {**out, "topicId": new_topic_id()}
    return out, events


def not_ready_status(
    t: Topic, status: Mapping[str, Any], e: TopicNotReady, *, now: float
) -> dict[str, Any]:
    """The status of a pass that cannot progress now: Ready False with the reason."""
    conditions = set_condition(
        list(status.get("conditions") or []),
        "Ready",
        False,
        e.reason,
        str(e),
        t.metadata.generation,
        now=now,
    )
    return {**status, "observedGeneration": t.metadata.generation, "conditions": conditions}


def without_partitions(status: Mapping[str, Any]) -> dict[str, Any]:
    """What the Topic handler may write: never the partition states (the controller's)."""
    return {k: v for k, v in status.items() if k != "partitions"}
