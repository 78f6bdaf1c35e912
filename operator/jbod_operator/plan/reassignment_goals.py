"""Where a PartitionReassignment leads each partition, pure: the spec checked against the
cluster (what is refused, and why), the originals a cancel or rollback walks back to, and
each partition's goal (its replicas in order, each in its dir).

Its own module because the checks are their own job, read by the first pass (the
acceptance) and the goals by every pass of ``plan.reassignment``; both read only the part of
its observation that :class:`Seen` names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from jbod_broker import wire

from ..models.reassignment import (
    OriginalAssignment,
    PartitionReassignment,
    PartitionReassignmentStatus,
)
from .port_types import TP, BrokerDirs, PartView, TopicView, id_ranges


class ReassignmentSpecError(ValueError):
    """A PartitionReassignment that can never work as written (the message says why)."""


class Seen(Protocol):
    """What the checks and goals read of a pass' observation (``plan.reassignment.Observed``
    has it all)."""

    @property
    def pr(self) -> PartitionReassignment: ...
    @property
    def cluster_brokers(self) -> frozenset[int]: ...
    @property
    def topics(self) -> Mapping[str, TopicView]: ...
    @property
    def brokers(self) -> Mapping[int, BrokerDirs | None]: ...
    @property
    def claims(self) -> Mapping[TP, str]: ...
    @property
    def cluster_dirs(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Goal:
    replicas: tuple[int, ...]
    dirs: tuple[str | None, ...]
    """Per replica: the named dir (resolved to its BrokerCluster name), None for "any"."""


def _resolve_dir(ref: str, broker: int, obs: Seen) -> str | None:
    """The path of the dir ``ref`` names on ``broker`` (None for "any"); raises when it is not
    a usable dir. A broker that did not describe its dirs is checked against the
    BrokerCluster's dir names, and the name is kept until its path is known."""
    if ref == wire.ANY_LOG_DIR:
        return None
    bd = obs.brokers.get(broker)
    if bd is not None:
        d = bd.find(ref)
        if d is None:
            raise ReassignmentSpecError(f"broker {broker} has no log dir {ref!r}")
        if not d.live:
            raise ReassignmentSpecError(f"log dir {d.name} of broker {broker} is offline")
        if d.cordoned:
            raise ReassignmentSpecError(
                f"log dir {d.name} of broker {broker} is cordoned (being drained)"
            )
        return d.path
    for name in obs.cluster_dirs:
        if ref in (name, wire.log_dir_folder(name)):
            return name
    raise ReassignmentSpecError(f"broker {broker} has no log dir {ref!r}")


def goals(obs: Seen) -> tuple[dict[TP, Goal], list[str]]:
    """Every partition's final target with its dirs, and what is wrong with the spec."""
    spec = obs.pr.spec
    known = obs.cluster_brokers
    out: dict[TP, Goal] = {}
    errors: list[str] = []
    for t in spec.partitions:
        where = f"{t.topic}-{t.partition}"
        tv = obs.topics.get(t.topic)
        if tv is None:
            errors.append(f"{where}: topic {t.topic!r} does not exist in cluster")
            continue
        if tv.deleting:
            errors.append(f"{where}: topic {t.topic!r} is being deleted")
            continue
        pv = tv.partitions.get(t.partition)
        if pv is None:
            errors.append(f"{where}: topic {t.topic!r} has no partition {t.partition}")
            continue
        # One rule for an id the cluster does not have, whatever its value (on Kafka, ids
        # are not dense from 0): refused, as Kafka's controller refuses it ("no such broker
        # is registered"); waiting for it would wait for ever.
        bad = [b for b in t.replicas if b not in known]
        if bad:
            errors.append(f"{where}: broker {bad[0]} does not exist (brokers {id_ranges(known)})")
            continue
        if len(set(t.replicas)) != len(t.replicas):
            errors.append(f"{where}: replicas {t.replicas} name a broker twice")
            continue
        # A step this resource wrote before a crash (a new operator accepts it again) has
        # added replicas that are not the partition's own yet.
        settled = [b for b in pv.replicas if b not in pv.adding]
        if len(t.replicas) != len(settled) and not spec.allow_replication_factor_change:
            errors.append(
                f"{where}: the target has {len(t.replicas)} replicas, the partition "
                f"{len(settled)}; set allowReplicationFactorChange to change it"
            )
            continue
        if len(t.replicas) < tv.min_isr:
            errors.append(
                f"{where}: {len(t.replicas)} target replicas are fewer than the topic's "
                f"min.insync.replicas {tv.min_isr}"
            )
            continue
        other = obs.claims.get((t.topic, t.partition))
        if other is not None:
            errors.append(f"{where}: {other} is moving this partition")
            continue
        refs = t.log_dirs or [wire.ANY_LOG_DIR] * len(t.replicas)
        try:
            dirs = tuple(_resolve_dir(r, b, obs) for b, r in zip(t.replicas, refs, strict=True))
        except ReassignmentSpecError as e:
            errors.append(f"{where}: {e}")
            continue
        out[(t.topic, t.partition)] = Goal(tuple(t.replicas), dirs)
    return out, errors


def originals(obs: Seen) -> list[OriginalAssignment]:
    """What cancel and rollback walk back to: replicas in order, with their dirs, each dir
    where its broker's describe-log-dirs shows the replica (the record's only for a broker
    that did not answer): the record lagged a replica moved in place, and a rollback that
    trusted it moved replicas into dirs they had never been in."""
    out = []
    for t in obs.pr.spec.partitions:
        pv = obs.topics[t.topic].partitions[t.partition]
        reps = [b for b in pv.replicas if b not in pv.adding]
        dirs = [_held_in(obs, pv, b) for b in reps]
        out.append(
            OriginalAssignment(
                topic=t.topic,
                partition=t.partition,
                replicas=reps,
                log_dirs=[wire.log_dir_short_name(d) if d else wire.ANY_LOG_DIR for d in dirs]
                if any(dirs)
                else None,
            )
        )
    return out


def _held_in(obs: Seen, pv: PartView, broker: int) -> str | None:
    """The dir ``broker`` holds ``pv``'s replica in: its describe-log-dirs, else the record."""
    bd = obs.brokers.get(broker)
    here = bd.locate(*pv.key) if bd is not None else None
    return here.path if here is not None else pv.dir_of(broker)


def original_goals(status: PartitionReassignmentStatus, obs: Seen) -> dict[TP, Goal]:
    """Where cancel and rollback lead: the original replicas in order, each in its dir (the
    recorded name resolved to its path; a dir no longer usable is left to the broker)."""
    return {
        (o.topic, o.partition): _goal(o.replicas, o.log_dirs, obs) for o in status.original or []
    }


def goals_for_run(obs: Seen) -> dict[TP, Goal]:
    """The spec's targets while running. A named dir that stopped being usable after the
    acceptance (offline, cordoned) is left to the broker's choice for replicas not created
    yet: the broker never places a replica on an offline or cordoned dir."""
    return {
        (t.topic, t.partition): _goal(t.replicas, t.log_dirs, obs) for t in obs.pr.spec.partitions
    }


def _goal(replicas: Sequence[int], log_dirs: Sequence[str] | None, obs: Seen) -> Goal:
    """Replicas in order, each in its named dir resolved to a path; ``any``, or a dir no
    longer usable, is None (the broker's choice)."""
    refs = log_dirs or [wire.ANY_LOG_DIR] * len(replicas)
    dirs: list[str | None] = []
    for b, r in zip(replicas, refs, strict=True):
        try:
            dirs.append(_resolve_dir(r, b, obs))
        except ReassignmentSpecError:
            dirs.append(None)
    return Goal(tuple(replicas), tuple(dirs))
