"""What a BrokerCluster reconcile decides, from what it observed. Pure: no client, no clock.

``handlers.clusters`` observes (the StatefulSet's claim templates, the scale decision, each
broker's describe-log-dirs, the time), calls :func:`decide`, then acts on the decision (the
objects, a StatefulSet recreation) and writes the status it carries, once.

The storage plan: a change to the log dirs is classified before anything acts on it. A
refused change (a resize, a storage class change, the removal of a dir that still holds a
replica) keeps the current claim templates, the refused dirs included, so nothing applied
loses data (Strimzi #9640 deletes the claim of a disk that still holds data); an allowed
change that alters the templates recreates the StatefulSet (volumeClaimTemplates are
immutable). A refusal is posted as an Event when it is new, not on every periodic pass.

``status.balance`` (continuous detection's) and ``status.strayReplicas`` (the cluster
controller's) are never part of the decision: a pass that read the object before their writer
cannot put an older value back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jbod_broker import wire

from ..models import BrokerCluster, LogDir
from ..models.broker_cluster import rack_for
from . import scale_down, storage_diff
from .conditions import set_condition
from .scale_down import ScaleDecision
from .storage_diff import diff_log_dirs, removal_blockers
from .topic_spec import Event

REMOVAL_BLOCKED = storage_diff.CONDITION
STORAGE_REFUSED = "StorageChangeRefused"
OTHERS_STATUS = ("balance", "strayReplicas")
"""Status fields another writer owns (see the module docstring)."""

Describes = Mapping[int, wire.DescribeLogDirsResponse | None]
"""Each broker's describe-log-dirs answer, None for one that did not answer."""


@dataclass(frozen=True)
class ClusterObservation:
    """What one pass read. ``current_log_dirs``: the StatefulSet's claim templates (None: no
    StatefulSet yet); ``urls``: each broker's address for the status; ``now``: the time the
    conditions that change are stamped with."""

    cluster: BrokerCluster
    status: Mapping[str, Any]
    current_log_dirs: Sequence[LogDir] | None
    scale: ScaleDecision
    describes: Describes
    urls: Mapping[int, str]
    now: float


@dataclass(frozen=True)
class StoragePlan:
    """The log dirs the StatefulSet gets and why they may differ from the spec's.

    ``refused``: every refused change, joined (empty: none); ``removal_blocked``: the part
    that is removals of dirs still in use (condition ``LogDirRemovalBlocked``)."""

    log_dirs: tuple[LogDir, ...]
    refused: str = ""
    removal_blocked: str = ""
    recreate: bool = False
    only_removals: bool = False
    """Every refusal is a blocked removal (its Event is the condition's, posted once)."""


@dataclass(frozen=True)
class ClusterDecision:
    """What the handler does: apply ``effective`` (recreating the StatefulSet first when
    ``recreate``), post ``refusals`` before acting and ``offline`` after, write ``status``
    when ``changed``."""

    effective: BrokerCluster
    recreate: bool
    refusals: tuple[Event, ...]
    offline: tuple[Event, ...]
    status: dict[str, Any]
    changed: bool


def nonempty_dirs(describes: Describes, names: list[str]) -> dict[str, list[str]]:
    """For each named dir: what still holds it, one entry per replica (``broker 2: orders-3``,
    a move's ``-future`` log included) or per broker we cannot ask (it may hold some)."""
    out: dict[str, list[str]] = {}
    for name in names:
        for b, desc in describes.items():
            if desc is None:
                out.setdefault(name, []).append(f"broker {b} did not answer")
                continue
            for d in desc.log_dirs:
                if wire.refers_to_log_dir(name, d.path):
                    out.setdefault(name, []).extend(
                        f"broker {b}: {p.topic}-{p.partition}" for p in d.partitions
                    )
    return out


def _dir_state(d: wire.LogDirDescription) -> dict[str, Any]:
    return {
        "name": wire.log_dir_short_name(d.path),
        "path": d.path,
        "live": d.is_live,
        **({"error": d.error} if d.error else {}),
        # Whole percent, not bytes: status must not churn on every write to the disk (exact
        # figures: describe-log-dirs).
        "usedPercent": 100 - (100 * d.usable_bytes) // d.total_bytes if d.total_bytes else 0,
        "cordoned": d.cordoned,
        "replicas": len(d.partitions),
    }


def broker_states(
    bc: BrokerCluster, describes: Describes, urls: Mapping[int, str], count: int | None = None
) -> list[dict[str, Any]]:
    """``status.brokers``. ``count``: the brokers there are (the spec's, unless a scale-down
    waits)."""
    racks = bc.spec.racks or []
    out = []
    for b in range(bc.spec.replicas if count is None else count):
        desc = describes.get(b)
        dirs = [_dir_state(d) for d in desc.log_dirs] if desc is not None else []
        out.append(
            {
                "id": b,
                **({"rack": rack} if (rack := rack_for(racks, b)) else {}),
                "live": desc is not None,
                "url": urls[b],
                "offlineLogDirs": [d["name"] for d in dirs if not d["live"]],
                "logDirs": dirs,
            }
        )
    return out


def plan_storage(
    current: Sequence[LogDir] | None, wanted: Sequence[LogDir], describes: Describes
) -> StoragePlan:
    """The log dirs to apply for the spec's ``wanted`` over the StatefulSet's ``current``."""
    if current is None:
        return StoragePlan(tuple(wanted))
    diff = diff_log_dirs(current, list(wanted))
    problems = list(diff.refused_messages())
    blockers: list[str] = []
    keep = list(wanted)
    if diff.removed:
        removed = {d.name for d in diff.removed}
        blockers = removal_blockers(
            diff.removed, nonempty_dirs(describes, [d.name for d in diff.removed])
        )
        if blockers:
            problems += blockers
            keep += [d for d in current if d.name in removed]
    if not problems:
        return StoragePlan(tuple(wanted), recreate=diff.recreate_statefulset)
    # Refused: the current templates stay, in their order, with what the spec adds after.
    keep_names = {d.name for d in keep}
    ordered = [d for d in current if d.name in keep_names]
    ordered += [d for d in keep if d.name not in {c.name for c in ordered}]
    return StoragePlan(
        tuple(ordered),
        refused="; ".join(problems),
        removal_blocked="; ".join(blockers),
        recreate=diff_log_dirs(current, ordered).recreate_statefulset,
        only_removals=problems == blockers,
    )


def _holds(conditions: Sequence[Mapping[str, Any]], type_: str, message: str) -> bool:
    """The condition already says this (True, same message): its Event was posted before."""
    c = next((c for c in conditions if c.get("type") == type_), None)
    return bool(c and c.get("status") == "True" and c.get("message") == message)


def refusal_events(
    storage: StoragePlan, scale: ScaleDecision, conditions: Sequence[Mapping[str, Any]]
) -> list[Event]:
    """Warnings for refusals that the stored conditions do not already say."""
    out: list[Event] = []
    if storage.refused and not (
        storage.only_removals and _holds(conditions, REMOVAL_BLOCKED, storage.removal_blocked)
    ):
        out.append(("Warning", STORAGE_REFUSED, storage.refused))
    if scale.blocked and not _holds(conditions, scale_down.CONDITION, scale.message):
        out.append(("Warning", "ScaleDownRefused", scale.message))
    return out


def effective_cluster(
    bc: BrokerCluster, storage: StoragePlan, scale: ScaleDecision
) -> BrokerCluster:
    """The cluster the objects are built from: the planned log dirs, and the current broker
    count while a decrease waits."""
    update: dict[str, Any] = {}
    if list(storage.log_dirs) != list(bc.spec.log_dirs):
        update["log_dirs"] = list(storage.log_dirs)
    if scale.blocked:
        update["replicas"] = scale.replicas
    if not update:
        return bc
    return bc.model_copy(update={"spec": bc.spec.model_copy(update=update)})


def ready_reason(ready: int, count: int, storage: StoragePlan, scale: ScaleDecision) -> str:
    """The Ready condition's reason: the first that applies."""
    if ready < count:
        return "BrokersNotReady"
    if scale.blocked:
        return scale_down.CONDITION
    if storage.removal_blocked:
        return REMOVAL_BLOCKED
    if storage.refused:
        return STORAGE_REFUSED
    return "AllBrokersReady"


@dataclass(frozen=True)
class Stamp:
    """What every condition of one pass is set with."""

    generation: int | None
    now: float

    def set(
        self, c: list[dict[str, Any]], type_: str, ok: bool, reason: str, message: str
    ) -> list[dict[str, Any]]:
        return set_condition(c, type_, ok, reason, message, self.generation, now=self.now)


def _blocker_conditions(
    c: list[dict[str, Any]], stamp: Stamp, storage: StoragePlan, scale: ScaleDecision
) -> list[dict[str, Any]]:
    """ScaleDownBlocked and LogDirRemovalBlocked: set once they have been True, then kept
    (False, with the all-clear) so the remedy is seen to have worked."""
    if scale.blocked or any(x.get("type") == scale_down.CONDITION for x in c):
        c = stamp.set(
            c,
            scale_down.CONDITION,
            bool(scale.blocked),
            scale_down.REASON_BLOCKED if scale.blocked else scale_down.REASON_CLEAR,
            scale.message or "no broker that would be removed holds a replica",
        )
    removal = storage.removal_blocked
    if removal or any(x.get("type") == REMOVAL_BLOCKED for x in c):
        c = stamp.set(
            c,
            REMOVAL_BLOCKED,
            bool(removal),
            storage_diff.REASON_BLOCKED if removal else storage_diff.REASON_CLEAR,
            removal or "no log dir removed from the spec holds a replica",
        )
    return c


def cluster_conditions(
    before: Sequence[dict[str, Any]],
    brokers: Sequence[Mapping[str, Any]],
    count: int,
    storage: StoragePlan,
    scale: ScaleDecision,
    stamp: Stamp,
) -> list[dict[str, Any]]:
    """Ready, the two blockers, Degraded and Progressing, in that order."""
    ready = sum(1 for b in brokers if b["live"])
    offline = [f"broker {b['id']}: {d}" for b in brokers for d in b["offlineLogDirs"]]
    refused = "; ".join(m for m in (storage.refused, scale.message) if m)
    c = stamp.set(
        list(before),
        "Ready",
        ready == count and not refused,
        ready_reason(ready, count, storage, scale),
        refused or f"{ready}/{count} brokers answer",
    )
    c = _blocker_conditions(c, stamp, storage, scale)
    c = stamp.set(
        c,
        "Degraded",
        bool(offline) or bool(storage.refused),
        "LogDirOffline" if offline else (STORAGE_REFUSED if storage.refused else "Healthy"),
        "; ".join(offline) if offline else (storage.refused or "every log dir is live"),
    )
    waiting = ready < count
    return stamp.set(
        c,
        "Progressing",
        waiting,
        "WaitingForBrokers" if waiting else "Stable",
        f"{count - ready} brokers not answering yet" if waiting else "",
    )


def offline_events(
    before: Sequence[Mapping[str, Any]], brokers: Sequence[Mapping[str, Any]]
) -> list[Event]:
    """A Warning for each log dir that went offline since the stored ``status.brokers``."""
    seen = {(b["id"], d) for b in before for d in b.get("offlineLogDirs", [])}
    return [
        ("Warning", "LogDirOffline", f"broker {b['id']}: log dir {d} is offline")
        for b in brokers
        for d in b["offlineLogDirs"]
        if (b["id"], d) not in seen
    ]


def decide(obs: ClusterObservation) -> ClusterDecision:
    """The storage plan, the objects' cluster, the conditions, the Events and the status."""
    bc, scale = obs.cluster, obs.scale
    stored = {k: v for k, v in obs.status.items() if k not in OTHERS_STATUS}
    conditions: list[dict[str, Any]] = list(stored.get("conditions") or [])
    storage = plan_storage(obs.current_log_dirs, bc.spec.log_dirs, obs.describes)
    effective = effective_cluster(bc, storage, scale)
    brokers = broker_states(bc, obs.describes, obs.urls, scale.replicas)
    stamp = Stamp(bc.metadata.generation, obs.now)
    status = {
        **stored,
        "observedGeneration": bc.metadata.generation,
        "conditions": cluster_conditions(
            conditions, brokers, scale.replicas, storage, scale, stamp
        ),
        "readyBrokers": sum(1 for b in brokers if b["live"]),
        "brokers": brokers,
        "logDirs": [d.name for d in effective.spec.log_dirs],
    }
    return ClusterDecision(
        effective=effective,
        recreate=storage.recreate,
        refusals=tuple(refusal_events(storage, scale, conditions)),
        offline=tuple(offline_events(stored.get("brokers") or [], brokers)),
        status=status,
        changed=status != stored,
    )
