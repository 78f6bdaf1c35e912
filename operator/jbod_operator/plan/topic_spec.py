"""Which Topics the operator takes to the brokers, and the topic configs in force. Pure.

Kafka's controller refuses a topic whose name is not legal, whose configs it does not know or
are out of range (INVALID_CONFIG), whose name is taken, or whose name collides with an
existing one once '.' is read as '_' (issue 14). A Topic resource cannot be refused that way
(the API server has stored it already, and its schema cannot see other objects), so the
refusal is the Topic's Ready condition and an Event, and nothing is sent to any broker.

Of two Topics wanting one Kafka name (or two colliding ones), the one that holds it keeps it:
the one whose partitions exist already (it is on the brokers), else the older
(``creationTimestamp``), else the one whose name sorts first. A Topic is on the brokers once
its status has a topic id: the controller records it, under its lock, before the first
partition (the states themselves live in PartitionShards, issue 39, so a Topic read from the
API server has none in its status; a Topic stored before shards may still list them there).
A Topic being deleted still holds its name until it is gone: its replicas are deleted by name,
and would take a newcomer's along.

The configs in force are ``status.configs``: what the operator last accepted, recorded before
brokers are told and sent with every LeaderAndIsr. A spec edit that is refused therefore
changes nothing on the brokers, and a broker never receives configs it would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jbod_broker.storage import topic_configs
from jbod_broker.storage.errors import InvalidTopicError
from jbod_broker.storage.names import unify_collision_chars, validate_topic

from ..models import Topic, TopicSpec, kafka_topic_name
from .conditions import set_condition

MIN_ISR = topic_configs.MIN_INSYNC_REPLICAS

Event = tuple[str, str, str]
"""(type, reason, message), as kopf posts it."""

LISTED_PARTITIONS = 20
"""Partitions a Topic's Ready message names; the rest are counted."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a Topic is not taken to the brokers: the Ready condition's reason and message."""

    reason: str
    message: str


def _holder_order(t: Topic) -> tuple[int, str, str]:
    """Smaller holds a contested name first (the module's rule)."""
    on_brokers = bool(t.status and (t.status.topic_id or t.status.partitions))
    return (0 if on_brokers else 1, t.metadata.creation_timestamp or "", t.metadata.name)


def _name_problem(t: Topic) -> Refusal | None:
    name = kafka_topic_name(t)
    try:
        validate_topic(name)
    except InvalidTopicError as e:
        hint = "" if t.spec.topic_name else "; set spec.topicName to a name Kafka allows"
        return Refusal("InvalidTopicName", f"{e}{hint}")
    return None


def config_problems(spec: TopicSpec) -> list[str]:
    """Every problem of ``spec.configs``: the brokers' rule (keys and Kafka's ranges), and
    min.insync.replicas against the replication factor and against spec.minInsyncReplicas."""
    configs = spec.configs or {}
    found = topic_configs.problems(configs)
    raw = configs.get(MIN_ISR)
    if raw is None or topic_configs.problem(MIN_ISR, raw) is not None:
        return found
    if int(raw) > spec.replication_factor:
        found.append(
            f"{MIN_ISR}={raw!r} is more than the replicationFactor "
            f"{spec.replication_factor}: no write could ever be acknowledged"
        )
    if spec.min_insync_replicas is not None and spec.min_insync_replicas != int(raw):
        found.append(
            f"{MIN_ISR}={raw!r} disagrees with spec.minInsyncReplicas "
            f"{spec.min_insync_replicas}: set it in one place"
        )
    return found


def _rival(t: Topic, others: Iterable[Topic]) -> Refusal | None:
    name = kafka_topic_name(t)
    mine = _holder_order(t)
    ahead = sorted(
        (
            o
            for o in others
            if o.spec.cluster_name == t.spec.cluster_name
            and o.metadata.name != t.metadata.name
            and _holder_order(o) < mine
        ),
        key=_holder_order,
    )
    ns = t.metadata.namespace or "default"
    for o in ahead:
        other = kafka_topic_name(o)
        going = " (being deleted: this Topic goes ahead once it is gone)"
        tail = going if o.metadata.deletion_timestamp else ""
        if other == name:
            return Refusal(
                "DuplicateTopicName",
                f"Kafka topic {name!r} of cluster {t.spec.cluster_name} is Topic "
                f"{ns}/{o.metadata.name}'s{tail}",
            )
        if unify_collision_chars(other) == unify_collision_chars(name):
            return Refusal(
                "TopicNameCollision",
                f"Kafka topic {name!r} collides with {other!r} of Topic {ns}/"
                f"{o.metadata.name}{tail}: Kafka refuses names that differ only in '.' and '_'",
            )
    return None


def check_topic(t: Topic, others: Iterable[Topic]) -> Refusal | None:
    """Why ``t`` must not go to the brokers, or None. ``others``: the namespace's other
    Topics (any cluster; those of another cluster are ignored)."""
    refusal = _name_problem(t)
    if refusal is not None:
        return refusal
    problems = config_problems(t.spec)
    if problems:
        return Refusal("InvalidConfig", "; ".join(problems))
    return _rival(t, others)


def accepted_configs(spec: TopicSpec) -> dict[str, str]:
    """The configs a spec that passed :func:`check_topic` puts in force: ``spec.configs``,
    with spec.minInsyncReplicas as min.insync.replicas (one value sent in both places)."""
    configs = dict(spec.configs or {})
    if spec.min_insync_replicas is not None:
        configs[MIN_ISR] = str(spec.min_insync_replicas)
    return configs


def configs_in_force(topic: Mapping[str, Any]) -> dict[str, str]:
    """The configs to send for a Topic as read from the API: ``status.configs`` when the
    operator recorded them. A Topic not reconciled since the operator began recording them
    gets its spec's valid entries: what brokers applied before they refused the rest."""
    status = topic.get("status") or {}
    if status.get("configs") is not None:
        return dict(status["configs"])
    spec = topic.get("spec") or {}
    configs = {
        k: v for k, v in (spec.get("configs") or {}).items() if topic_configs.problem(k, v) is None
    }
    if spec.get("minInsyncReplicas") is not None:
        configs[MIN_ISR] = str(spec["minInsyncReplicas"])
    return configs


def min_insync_replicas(configs: Mapping[str, str]) -> int:
    """The partitions' min ISR from configs in force (1, Kafka's default, when unset)."""
    return int(configs.get(MIN_ISR, "1"))


def ready_status(
    t: Topic, status: Mapping[str, Any], refusal: Refusal | None, *, now: float
) -> tuple[dict[str, Any], list[Event]]:
    """The Topic's status after a pass and the Events to post. A refusal is the Ready
    condition (posted as an Event only when it is new, not on every periodic pass); otherwise
    readiness from the partition states, with the Kafka name and the configs in force."""
    gen = t.metadata.generation
    conditions: list[dict[str, Any]] = list(status.get("conditions") or [])
    if refusal is not None:
        before = next((c for c in conditions if c.get("type") == "Ready"), {})
        new = (before.get("status"), before.get("reason"), before.get("message")) != (
            "False",
            refusal.reason,
            refusal.message,
        )
        conditions = set_condition(
            conditions, "Ready", False, refusal.reason, refusal.message, gen, now=now
        )
        events = [("Warning", refusal.reason, refusal.message)] if new else []
        return {**status, "observedGeneration": gen, "conditions": conditions}, events
    states = status.get("partitions") or []
    offline = sorted({r for s in states for r in s.get("offlineReplicas", [])})
    leaderless = [s["partition"] for s in states if s["leader"] < 0]
    msg = f"{len(states)} partitions, replication factor {t.spec.replication_factor}"
    if offline:
        msg += f"; replicas on brokers {offline} offline"
    if leaderless:
        # Bounded (a condition's message is at most 32 KiB; 100,000 partitions may be listed).
        shown = ", ".join(map(str, leaderless[:LISTED_PARTITIONS]))
        more = len(leaderless) - LISTED_PARTITIONS
        msg += f"; partitions [{shown}{f' and {more} more' if more > 0 else ''}] have no leader"
    conditions = set_condition(
        conditions,
        "Ready",
        not leaderless,
        "Reconciled" if not leaderless else "OfflinePartitions",
        msg,
        gen,
        now=now,
    )
    return {
        **status,
        "observedGeneration": gen,
        "topicName": kafka_topic_name(t),
        "configs": accepted_configs(t.spec),
        "conditions": conditions,
    }, []
