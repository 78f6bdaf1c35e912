"""Continuous detection's translations, pure: a cluster snapshot into a
:class:`~.balance_trigger.Sample`, Rebalance objects into :class:`~.balance_trigger.RebalanceView`,
a decision into the Rebalance to create and into the cluster's ``status.balance`` (a
BrokerCluster's or a KafkaCluster's: the same shape).

The sampler (``handlers.balance``) does the I/O around them; the rules are
``plan.balance_trigger``'s.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..models import BrokerCluster
from ..models.common import API_VERSION
from ..models.kafka_cluster import KafkaCluster
from ..models.rebalance import CLUSTER_LABEL, ENDED_PHASES, TRIGGER_LABEL, RebalanceMode
from ..models.snapshot import ClusterSnapshot
from .balance_trigger import (
    Create,
    Decision,
    DiskSample,
    Known,
    PartitionSize,
    RebalanceView,
    Sample,
)
from .builders import owner_reference
from .conditions import iso, parse_iso
from .topic_spec import Event

MAX_NAME = 63
"""A created Rebalance's name fits a label value (its children are labelled with it)."""
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def sample_from_snapshot(time: float, snap: ClusterSnapshot) -> Sample:
    """One sample from the snapshot a Rebalance of the cluster would plan from (either kind:
    ``plan.execution.ClusterSnapshots``): each answering broker's dirs as the planner measures
    them (the volume's used bytes and size, or, for dirs sharing one filesystem, their
    replicas' bytes and their size in the spec), so detection and the Rebalance it creates
    agree on what is skewed; and each partition's size (its largest replica on an answering
    broker; a future copy being moved in is not a second partition). Every broker of the
    snapshot is expected to answer."""
    answering = {b.id for b in snap.brokers if b.live}
    disks = tuple(
        DiskSample(
            broker_id=d.broker_id,
            log_dir=d.name,
            used_bytes=d.used_bytes,
            capacity_bytes=d.capacity_bytes,
            live=d.live,
            cordoned=d.cordoned,
        )
        for d in snap.log_dirs
        if d.broker_id in answering
    )
    sizes: dict[tuple[str, int], int] = {}
    for r in snap.replicas:
        if r.broker_id in answering:
            key = (r.topic, r.partition)
            sizes[key] = max(sizes.get(key, 0), r.size_bytes)
    return Sample(
        time=time,
        expected_brokers=frozenset(b.id for b in snap.brokers),
        answered=frozenset(answering),
        disks=disks,
        partitions=tuple(PartitionSize(t, p, n) for (t, p), n in sorted(sizes.items())),
    )


def rebalance_view(obj: Mapping[str, Any]) -> RebalanceView:
    """A Rebalance object as detection sees it: finished once in an ended phase, at its
    ``completionTime`` (else when its phase condition last changed)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    phase = status.get("phase")
    finished = phase in ENDED_PHASES
    created = parse_iso(meta.get("creationTimestamp"), 0.0)
    finished_at: float | None = None
    if finished:
        when = status.get("completionTime") or next(
            (
                c.get("lastTransitionTime")
                for c in status.get("conditions") or []
                if c.get("type") == phase
            ),
            None,
        )
        finished_at = parse_iso(when, created)
    return RebalanceView(
        name=meta.get("name", ""),
        finished=finished,
        triggered=TRIGGER_LABEL in (meta.get("labels") or {}),
        created=created,
        finished_at=finished_at,
        phase=phase,
    )


def rebalance_name(cluster: str, create: Create, now: float) -> str:
    """``<cluster>-<trigger>-<UTC time>``, at most :data:`MAX_NAME` characters (the cluster's
    name shortened if need be): readable, and one per second at most."""
    stamp = dt.datetime.fromtimestamp(int(now), dt.UTC).strftime("%Y%m%d-%H%M%S")
    suffix = f"-{create.trigger.value}-{stamp}"
    head = cluster[: MAX_NAME - len(suffix)].rstrip("-.")
    return head + suffix


def build_rebalance(bc: BrokerCluster | KafkaCluster, create: Create, now: float) -> dict[str, Any]:
    """The Rebalance to create: the contract's spec, labelled with its trigger and cluster,
    owned by the cluster (deleted with it; not its controller)."""
    assert bc.spec.balance is not None
    name = bc.metadata.name
    labels = {TRIGGER_LABEL: create.trigger.value}
    if len(name) <= MAX_NAME and _LABEL_VALUE.match(name):
        labels[CLUSTER_LABEL] = name  # a longer name cannot be a label value
    spec: dict[str, Any] = {
        "clusterName": name,
        "mode": create.mode.value,
        "autoApprove": bc.spec.balance.auto_approve,
    }
    if create.mode == RebalanceMode.ADD_BROKERS:
        spec["brokers"] = list(create.brokers)
    return {
        "apiVersion": API_VERSION,
        "kind": "Rebalance",
        "metadata": {
            "name": rebalance_name(name, create, now),
            "namespace": bc.metadata.namespace,
            "labels": labels,
            "ownerReferences": [{**owner_reference(bc), "controller": False}],
        },
        "spec": spec,
    }


def known_from_status(balance: Mapping[str, Any] | None) -> Known | None:
    """What a previous operator had accounted for (None: nothing recorded yet)."""
    if not balance or balance.get("knownBrokers") is None or balance.get("knownLogDirs") is None:
        return None
    return Known(frozenset(balance["knownBrokers"]), frozenset(balance["knownLogDirs"]))


def last_triggered_at(balance: Mapping[str, Any] | None) -> float | None:
    last = (balance or {}).get("lastTriggered") or {}
    return parse_iso(last["created"], 0.0) if last.get("created") else None


def _opt_iso(ts: float | None) -> str | None:
    return None if ts is None else iso(ts)


def balance_status(
    decision: Decision,
    *,
    samples: int,
    last_sample_time: float | None,
    last_triggered: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """``status.balance``, every key present (None removes it in a merge patch). Spreads are
    rounded to 0.1 pp so the status does not churn on every write to a disk."""
    sp = decision.spread
    known = decision.known
    return {
        "lastSampleTime": _opt_iso(last_sample_time),
        "samples": samples,
        "diskSpreadPercent": None if sp is None else round(sp.disk_pp, 1),
        "worstBroker": None if sp is None else sp.worst_broker,
        "brokerSpreadPercent": None if sp is None else round(sp.broker_pp, 1),
        "sustainedSince": _opt_iso(decision.sustained_since),
        "cooldownUntil": _opt_iso(decision.cooldown_until),
        "activeRebalance": decision.active,
        "lastTriggered": dict(last_triggered) if last_triggered else None,
        "knownBrokers": None if known is None else sorted(known.brokers),
        "knownLogDirs": None if known is None else sorted(known.log_dirs),
        "message": decision.message,
    }


def triggered_record(manifest: Mapping[str, Any], create: Create, now: float) -> dict[str, Any]:
    """``status.balance.lastTriggered`` for a Rebalance just created."""
    out: dict[str, Any] = {
        "name": manifest["metadata"]["name"],
        "trigger": create.trigger.value,
        "mode": create.mode.value,
        "created": iso(now),
        "reason": create.reason,
    }
    if create.brokers:
        out["brokers"] = list(create.brokers)
    return out


@dataclass(frozen=True)
class Created:
    """A round whose Rebalance was created: the decision the status reports, the
    ``lastTriggered`` record and the Event."""

    decision: Decision
    last_triggered: dict[str, Any]
    event: Event


def after_created(
    decision: Decision, manifest: Mapping[str, Any], now: float, cooldown_s: float, auto: bool
) -> Created:
    """``decision`` once its Rebalance (``manifest``) exists: what it adds is accounted for,
    it is the active Rebalance from now, and the cooldown counts from it. ``auto``: the
    Rebalance was created auto-approved."""
    create = decision.create
    assert create is not None, "only a decision to create creates"
    name = manifest["metadata"]["name"]
    message = (
        f"created Rebalance {name} ({create.mode.value}, trigger "
        f"{create.trigger.value}{', auto-approved' if auto else ''}): {create.reason}"
    )
    return Created(
        replace(decision, known=create.known_after, active=name, cooldown_until=now + cooldown_s),
        triggered_record(manifest, create, now),
        ("Normal", "RebalanceCreated", message),
    )


def after_refused(decision: Decision, name: str, error: str) -> Decision:
    """``decision`` when the API server refused its Rebalance ``name``: nothing was created,
    and the status says why (the next round decides again)."""
    return replace(decision, create=None, message=f"could not create Rebalance {name}: {error}")
