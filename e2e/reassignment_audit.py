"""An audit of one finished PartitionReassignment against what the brokers hold (issue 37).

A phase is a claim; this checks it. After a reassignment has reached its end phase, per
partition of its spec:

- its replicas, in order, are the end the phase promises: Succeeded its target; RolledBack its
  originals (``status.original``); Cancelled its target or its originals, never another set
  and never another replica count (a KIP-435 intermediate state is no end state);
- it is led by its first replica whenever that replica is in the ISR;
- each replica is in the dir it was named (the spec's ``logDirs``, the original's for a
  rollback or a partition a cancel sent back; ``any`` checks nothing), as describe-log-dirs of
  its broker shows, and no future replica (a ``-future`` folder) is left;

and, cluster-wide: no replication throttle is left on a broker (or, on Kafka, a topic's
throttled-replica list) once no reassignment is active; no broker holds a replica its
partition's replicas do not list (a stray); and our state of record (the Topic status:
replicas, leader, each replica's ``logDir``) says what the brokers hold.

The comparison is pure (:func:`compare`), over what was read (:class:`Held`, :class:`Record`);
two readers feed it: :func:`audit_brokers` for a BrokerCluster of ours (the brokers' Metadata,
describe-log-dirs and throttle configs, the Topic statuses) and :func:`audit_kafka` for an
Apache Kafka cluster through its Admin API (Kafka's metadata is its own state of record).
Each returns human-readable problems; an empty list is a clean end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.wire import log_dir_short_name
from jbod_operator.clients.kafka_admin import KafkaAdmin
from jbod_operator.plan.kafka_types import ConfigKind

TP = tuple[str, int]
Placement = dict[int, str]
"""Broker → the short name of the dir holding its replica of one partition."""

KAFKA_BROKER_THROTTLES = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
KAFKA_TOPIC_THROTTLES = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


# -- what was read ------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionHeld:
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]


@dataclass
class Held:
    """What the cluster holds: the partitions as its metadata shows them, where each replica
    is on disk (current and future), the throttles in force, the brokers that did not
    answer."""

    partitions: dict[TP, PartitionHeld] = field(default_factory=dict)
    placement: dict[TP, Placement] = field(default_factory=dict)
    futures: dict[TP, Placement] = field(default_factory=dict)
    throttles: list[str] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RecordedPartition:
    replicas: tuple[int, ...]
    leader: int
    dirs: Mapping[int, str | None]
    """Broker → the short name of the dir the state of record names (None: none)."""


Record = dict[TP, RecordedPartition]


@dataclass(frozen=True)
class Ending:
    """One end a partition may be at: replicas in order, and the dir each must be in (short
    names; None for ``any``)."""

    label: str
    replicas: tuple[int, ...]
    dirs: tuple[str | None, ...]


# -- the expected end ---------------------------------------------------------------------


def _dir_ref(ref: str | None) -> str | None:
    """A spec's or the original's dir reference as a short name (None for ``any``)."""
    if ref is None or ref == wire.ANY_LOG_DIR:
        return None
    return log_dir_short_name(ref)


def _dirs(refs: list[str] | None, n: int) -> tuple[str | None, ...]:
    if not refs:
        return (None,) * n
    return tuple(_dir_ref(r) for r in refs)


def expected_ends(pr: Mapping[str, Any]) -> tuple[str, dict[TP, list[Ending]], list[str]]:
    """The phase, each partition's acceptable ends, and what makes the resource unauditable."""
    spec, st = pr.get("spec") or {}, pr.get("status") or {}
    phase = str(st.get("phase"))
    targets = {
        (t["topic"], int(t["partition"])): Ending(
            "target", tuple(t["replicas"]), _dirs(t.get("logDirs"), len(t["replicas"]))
        )
        for t in spec.get("partitions") or []
    }
    originals = {
        (o["topic"], int(o["partition"])): Ending(
            "original", tuple(o["replicas"]), _dirs(o.get("logDirs"), len(o["replicas"]))
        )
        for o in st.get("original") or []
    }
    problems: list[str] = []
    if phase in ("RolledBack", "Cancelled") and set(originals) != set(targets):
        problems.append(f"status.original lists {sorted(originals)}, the spec {sorted(targets)}")
    out: dict[TP, list[Ending]] = {}
    for tp, target in targets.items():
        if phase == "Succeeded":
            out[tp] = [target]
        elif phase == "RolledBack" and tp in originals:
            out[tp] = [originals[tp]]
        elif phase == "Cancelled" and tp in originals:
            out[tp] = [target, originals[tp]]
        elif phase not in ("Succeeded", "RolledBack", "Cancelled"):
            problems.append(f"phase {phase}: not an end this audit knows")
            return phase, {}, problems
    return phase, out, problems


# -- the comparison -----------------------------------------------------------------------


def _name(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"


def _check_dirs(tp: TP, end: Ending, placed: Placement, other: Ending | None) -> list[str]:
    """Each replica in its named dir. At a cancel's target (``other``: the original), a
    replica that was an original one may also stay in its original dir (the cancel rule names
    no dir for it); at the original, every replica must be back in its recorded dir."""
    out = []
    for i, b in enumerate(end.replicas):
        at = placed.get(b)
        want = end.dirs[i] if i < len(end.dirs) else None
        if at is None:
            out.append(f"{_name(tp)}: broker {b} holds no replica of it (describe-log-dirs)")
            continue
        ok = {want} if want is not None else {at}
        if other is not None and b in other.replicas:
            alt = other.dirs[other.replicas.index(b)]
            ok.add(alt if alt is not None else at)
        if at not in ok:
            out.append(
                f"{_name(tp)}: replica on broker {b} is in dir {at!r}, named {want!r} ({end.label})"
            )
    return out


def _check_partition(tp: TP, ends: list[Ending], held: Held) -> list[str]:
    now = held.partitions.get(tp)
    if now is None:
        return [f"{_name(tp)}: the cluster's metadata does not list it"]
    end = next((e for e in ends if e.replicas == now.replicas), None)
    if end is None:
        named = ", ".join(f"{e.label} {list(e.replicas)}" for e in ends)
        size = (
            ""
            if any(len(e.replicas) == len(now.replicas) for e in ends)
            else (f" ({len(now.replicas)} replicas, the end has {len(ends[0].replicas)})")
        )
        return [f"{_name(tp)}: replicas {list(now.replicas)} are none of: {named}{size}"]
    out = []
    if now.replicas[0] in now.isr and now.leader != now.replicas[0]:
        out.append(
            f"{_name(tp)}: led by {now.leader}, not its first replica {now.replicas[0]} "
            f"(ISR {list(now.isr)})"
        )
    other = next((e for e in ends if e is not end), None) if end.label == "target" else None
    out += _check_dirs(tp, end, held.placement.get(tp, {}), other)
    return out


def _strays(held: Held, record: Record | None) -> list[str]:
    """Replicas on brokers that the partition's replicas (the state of record's where there
    is one) do not list, and replicas of partitions nobody lists at all."""
    out = []
    for tp, placed in sorted(held.placement.items()):
        listed: tuple[int, ...] | None = None
        if record is not None and tp in record:
            listed = record[tp].replicas
        elif tp in held.partitions:
            listed = held.partitions[tp].replicas
        for b, d in sorted(placed.items()):
            if listed is None:
                out.append(
                    f"{_name(tp)}: stray replica on broker {b} (dir {d!r}) of a "
                    "partition no topic lists"
                )
            elif b not in listed:
                out.append(
                    f"{_name(tp)}: stray replica on broker {b} (dir {d!r}), replicas {list(listed)}"
                )
    return out


def _futures(held: Held) -> list[str]:
    return [
        f"{_name(tp)}: future replica left on broker {b} (dir {d!r})"
        for tp, placed in sorted(held.futures.items())
        for b, d in sorted(placed.items())
    ]


def _record_vs_held(record: Record, held: Held, tps: Iterable[TP]) -> list[str]:
    """The state of record says what the brokers hold: replicas, leader, each replica's dir."""
    out = []
    for tp in sorted(tps):
        rec, now = record.get(tp), held.partitions.get(tp)
        if rec is None:
            out.append(f"{_name(tp)}: no state of record")
            continue
        if now is not None and (rec.replicas, rec.leader) != (now.replicas, now.leader):
            out.append(
                f"{_name(tp)}: state of record replicas {list(rec.replicas)} leader "
                f"{rec.leader}, the brokers {list(now.replicas)} leader {now.leader}"
            )
        placed = held.placement.get(tp, {})
        for b in rec.replicas:
            named, at = rec.dirs.get(b), placed.get(b)
            if at is not None and named != at:
                out.append(
                    f"{_name(tp)}: state of record names dir {named!r} for broker {b}, "
                    f"which holds it in {at!r}"
                )
    return out


def _original_vs_before(pr: Mapping[str, Any], before: Mapping[TP, Placement]) -> list[str]:
    """``status.original`` records the dirs the replicas were in at acceptance."""
    out = []
    for o in (pr.get("status") or {}).get("original") or []:
        tp = (o["topic"], int(o["partition"]))
        was = before.get(tp)
        if was is None:
            continue
        dirs = _dirs(o.get("logDirs"), len(o["replicas"]))
        for b, d in zip(o["replicas"], dirs, strict=False):
            if was.get(b) is not None and d != was[b]:
                out.append(
                    f"{_name(tp)}: status.original records dir {d!r} for broker {b}, which "
                    f"held it in {was[b]!r} before the reassignment"
                )
    return out


def compare(
    pr: Mapping[str, Any],
    held: Held,
    record: Record | None = None,
    before: Mapping[TP, Placement] | None = None,
) -> list[str]:
    """Every way ``held`` (and ``record``, our state of record; None on Kafka) differs from
    the end ``pr`` claims; ``before``: where the replicas were before it (to check what
    ``status.original`` recorded)."""
    name = (pr.get("metadata") or {}).get("name")
    phase, ends, problems = expected_ends(pr)
    problems = [*held.silent, *problems]
    for tp, options in sorted(ends.items()):
        problems += _check_partition(tp, options, held)
    problems += _futures(held) + _strays(held, record) + held.throttles
    if record is not None:
        problems += _record_vs_held(record, held, ends)
    if before is not None:
        problems += _original_vs_before(pr, before)
    return [f"{name} ({phase}): {p}" for p in problems]


# -- reading our brokers ------------------------------------------------------------------


def _place(out: dict[TP, Placement], topic: str, partition: int, broker: int, path: str) -> None:
    out.setdefault((topic, partition), {})[broker] = log_dir_short_name(path)


def _throttles_of(broker: int, cfg: wire.ThrottleConfig) -> list[str]:
    out = []
    for key in (
        "leader_replication_throttled_rate",
        "follower_replication_throttled_rate",
        "intra_broker_throttled_rate",
    ):
        if getattr(cfg, key):
            out.append(f"broker {broker}: throttle {key}={getattr(cfg, key)} left")
    for key in ("leader_replication_throttled_replicas", "follower_replication_throttled_replicas"):
        refs = getattr(cfg, key) or []
        if refs:
            listed = sorted(f"{r.topic}-{r.partition}" for r in refs)
            out.append(f"broker {broker}: {key} left: {listed}")
    return out


async def _read_broker(b: int, c: BrokerClient, held: Held) -> wire.MetadataResponse | None:
    try:
        dirs = await c.describe_log_dirs()
        cfg = await c.get_configs()
        md = await c.metadata()
    except Exception as e:  # a broker that does not answer is a finding, not a crash
        held.silent.append(f"broker {b} did not answer: {type(e).__name__}: {e}")
        return None
    for d in dirs.log_dirs:
        for r in d.partitions:
            _place(held.futures if r.is_future else held.placement, r.topic, r.partition, b, d.path)
        if d.error:
            held.silent.append(f"broker {b}: log dir {d.path} offline ({d.error})")
    held.throttles += _throttles_of(b, cfg)
    return md


def _agree(metas: Mapping[int, wire.MetadataResponse], held: Held) -> None:
    """The partitions as the brokers' metadata shows them; brokers that disagree are named."""
    views: dict[TP, dict[PartitionHeld, list[int]]] = {}
    for b, md in metas.items():
        for p in md.partitions:
            ph = PartitionHeld(tuple(p.replicas), p.leader, tuple(p.isr))
            views.setdefault((p.topic, p.partition), {}).setdefault(ph, []).append(b)
    for tp, seen in views.items():
        best = max(seen, key=lambda ph: len(seen[ph]))
        held.partitions[tp] = best
        if len(seen) > 1:
            held.silent.append(
                f"{_name(tp)}: brokers disagree on its metadata: "
                + "; ".join(f"{bs}: {ph}" for ph, bs in seen.items())
            )


def record_of(topics: Iterable[Mapping[str, Any]]) -> Record:
    """Our state of record from Topic resources (their status)."""
    out: Record = {}
    for t in topics:
        st = t.get("status") or {}
        name = st.get("topicName") or (t.get("spec") or {}).get("topicName")
        name = name or t["metadata"]["name"]
        for p in st.get("partitions") or []:
            reps = p.get("replicas") or []
            out[(name, int(p["partition"]))] = RecordedPartition(
                replicas=tuple(int(r["brokerId"]) for r in reps),
                leader=int(p["leader"]),
                dirs={
                    int(r["brokerId"]): log_dir_short_name(r["logDir"]) if r.get("logDir") else None
                    for r in reps
                },
            )
    return out


async def read_brokers(clients: Mapping[int, BrokerClient]) -> Held:
    """What our brokers hold: describe-log-dirs, throttle configs and Metadata of each."""
    held = Held()
    metas = {}
    for b, c in sorted(clients.items()):
        md = await _read_broker(b, c, held)
        if md is not None:
            metas[b] = md
    _agree(metas, held)
    return held


async def placement_of(clients: Mapping[int, BrokerClient]) -> dict[TP, Placement]:
    """Where every current replica is, per describe-log-dirs (what :func:`compare`'s
    ``before`` takes)."""
    return (await read_brokers(clients)).placement


async def audit_brokers(
    pr: Mapping[str, Any],
    clients: Mapping[int, BrokerClient],
    topics: Iterable[Mapping[str, Any]],
    before: Mapping[TP, Placement] | None = None,
) -> list[str]:
    """The audit of ``pr`` (the PartitionReassignment as read) on our brokers, against the
    Topic resources ``topics`` (the cluster's, for the state of record and strays)."""
    held = await read_brokers(clients)
    return compare(pr, held, record_of(topics), before)


# -- reading Apache Kafka -----------------------------------------------------------------


async def _kafka_throttles(
    admin: KafkaAdmin, brokers: Iterable[int], topics: Iterable[str]
) -> list[str]:
    out = []
    for b in brokers:
        got = await admin.describe_configs(ConfigKind.BROKER, str(b))
        for key in KAFKA_BROKER_THROTTLES:
            if key in got and got[key].value not in (None, "", "0"):
                out.append(f"broker {b}: {key}={got[key].value} left")
    for t in topics:
        got = await admin.describe_configs(ConfigKind.TOPIC, t)
        for key in KAFKA_TOPIC_THROTTLES:
            if key in got and got[key].value:
                out.append(f"topic {t}: {key}={got[key].value} left")
    return out


async def read_kafka(admin: KafkaAdmin, topics: Iterable[str]) -> Held:
    """What an Apache Kafka cluster holds, through its Admin API: Metadata, DescribeLogDirs
    of every broker, DescribeConfigs of every broker and of ``topics``."""
    held = Held()
    for t in await admin.describe_topics():
        for p in t.partitions:
            held.partitions[(t.name, p.partition)] = PartitionHeld(
                p.replicas, -1 if p.leader is None else p.leader, p.isr
            )
    brokers = [b.broker_id for b in (await admin.describe_cluster()).brokers]
    for bd in await admin.describe_log_dirs(brokers):
        for d in bd.dirs:
            if d.error:
                held.silent.append(f"broker {bd.broker_id}: log dir {d.path} ({d.error})")
            for r in d.replicas:
                _place(
                    held.futures if r.is_future else held.placement,
                    r.topic,
                    r.partition,
                    bd.broker_id,
                    d.path,
                )
    held.throttles += await _kafka_throttles(admin, brokers, topics)
    return held


async def audit_kafka(
    pr: Mapping[str, Any], admin: KafkaAdmin, before: Mapping[TP, Placement] | None = None
) -> list[str]:
    """The audit of ``pr`` on Apache Kafka (Kafka's metadata is the state of record)."""
    topics = sorted({t["topic"] for t in (pr.get("spec") or {}).get("partitions") or []})
    return compare(pr, await read_kafka(admin, topics), None, before)


# -- settling -----------------------------------------------------------------------------


async def settled(
    run: Callable[[], Awaitable[list[str]]], timeout_s: float = 20, poll_s: float = 0.5
) -> tuple[list[str], float]:
    """``run`` repeated until it finds nothing or ``timeout_s`` passed: the problems that
    stayed (empty when clean) and the seconds it took. Metadata reaches every broker and a
    preferred leader is elected a moment after a phase is written; what is still wrong after
    the timeout is what the end left."""
    start = time.monotonic()
    while True:
        problems = await run()
        waited = time.monotonic() - start
        if not problems or waited >= timeout_s:
            return problems, waited
        await asyncio.sleep(poll_s)
