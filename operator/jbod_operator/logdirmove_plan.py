"""LogDirMove decisions on plain data: target resolution, drain plans, conflicts, progress.

Pure: the handler (``handlers/logdirmoves.py``) observes brokers and the API, calls these, and
acts on the result. Replica states form a small state machine::

    Pending ──alter sent──▶ Moving ──engine Done + verified──▶ Succeeded
       │                      ├──engine Failed / dir offline──▶ Failed
       │                      └──cancel / timeout──▶ Cancelled
       └──replica absent past replicaWaitSeconds──▶ Failed
    (Succeeded, Failed and Cancelled are final: a restarted operator never re-sends them.)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jbod_broker import wire

PENDING, MOVING, SUCCEEDED, FAILED, CANCELLED = (
    "Pending",
    "Moving",
    "Succeeded",
    "Failed",
    "Cancelled",
)
FINAL = {SUCCEEDED, FAILED, CANCELLED}


class MoveSpecError(ValueError):
    """A LogDirMove that can never work as written; the message names the broker and dir."""


@dataclass(frozen=True)
class Dir:
    name: str
    path: str
    live: bool
    cordoned: bool
    usable_bytes: int
    replicas: dict[tuple[str, int], int]
    """(topic, partition) → size, current replicas only."""
    futures: frozenset[tuple[str, int]] = frozenset()


@dataclass(frozen=True)
class BrokerDirs:
    broker: int
    dirs: tuple[Dir, ...]

    def locate(self, topic: str, partition: int) -> Dir | None:
        return next((d for d in self.dirs if (topic, partition) in d.replicas), None)

    def find(self, ref: str) -> Dir | None:
        """A dir by its BrokerCluster name (``a``), folder name (``data-a``) or absolute path."""
        for d in self.dirs:
            if ref in (d.name, d.path, f"data-{d.name}") or (
                ref.startswith("/") and os.path.normpath(ref) == d.path
            ):
                return d
        return None


def dir_name(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    return base[len("data-") :] if base.startswith("data-") else base


def broker_dirs(broker: int, desc: wire.DescribeLogDirsResponse) -> BrokerDirs:
    dirs = []
    for d in desc.log_dirs:
        dirs.append(
            Dir(
                name=dir_name(d.path),
                path=d.path,
                live=d.is_live,
                cordoned=d.cordoned,
                usable_bytes=d.usable_bytes,
                replicas={(p.topic, p.partition): p.size for p in d.partitions if not p.is_future},
                futures=frozenset((p.topic, p.partition) for p in d.partitions if p.is_future),
            )
        )
    return BrokerDirs(broker, tuple(dirs))


@dataclass
class ReplicaTarget:
    broker: int
    topic: str
    partition: int
    target_ref: str


def expand_drain(bd: BrokerDirs, source_ref: str) -> list[ReplicaTarget]:
    """Everything on ``source_ref`` to the broker's other live, uncordoned dirs, balancing by
    free bytes: the largest replica first, each to the dir with the most room left."""
    src = bd.find(source_ref)
    if src is None:
        raise MoveSpecError(f"broker {bd.broker} has no log dir {source_ref!r}")
    if not src.live:
        raise MoveSpecError(
            f"broker {bd.broker}: log dir {src.path} is offline; it cannot be read to drain it"
        )
    others = [d for d in bd.dirs if d.path != src.path and d.live and not d.cordoned]
    if src.replicas and not others:
        raise MoveSpecError(
            f"broker {bd.broker} has no other live, uncordoned log dir to take "
            f"the {len(src.replicas)} replicas of {src.path}"
        )
    room = {d.path: d.usable_bytes for d in others}
    out = []
    for (topic, part), size in sorted(src.replicas.items(), key=lambda kv: (-kv[1], kv[0])):
        best = max(others, key=lambda d: (room[d.path], -others.index(d)))
        room[best.path] -= size
        out.append(ReplicaTarget(bd.broker, topic, part, best.path))
    return out


@dataclass
class Resolved:
    entries: list[dict[str, Any]] = field(default_factory=list)
    """status.replicas entries, in a stable order."""


def resolve(
    spec: dict[str, Any], brokers: dict[int, BrokerDirs | None], broker_count: int
) -> Resolved:
    """The per-replica plan of a LogDirMove, or MoveSpecError naming what is wrong."""
    targets: list[ReplicaTarget] = []
    drain = spec.get("drain")
    if drain:
        b = int(drain["brokerId"])
        _check_broker(b, broker_count, brokers)
        bd = brokers[b]
        assert bd is not None
        targets = expand_drain(bd, drain["logDir"])
    for m in spec.get("moves") or []:
        b = int(m["brokerId"])
        _check_broker(b, broker_count, brokers)
        targets.append(ReplicaTarget(b, m["topic"], int(m["partition"]), m["logDir"]))
    out = Resolved()
    for t in targets:
        bd = brokers[t.broker]
        assert bd is not None
        dest = bd.find(t.target_ref)
        if dest is None:
            raise MoveSpecError(
                f"broker {t.broker} has no log dir {t.target_ref!r} "
                f"(it has: {', '.join(d.name for d in bd.dirs)})"
            )
        if not dest.live:
            raise MoveSpecError(f"broker {t.broker}: target log dir {dest.path} is offline")
        src = bd.locate(t.topic, t.partition)
        if dest.cordoned and (src is None or src.path != dest.path):
            raise MoveSpecError(
                f"broker {t.broker}: target log dir {dest.path} is cordoned (drained or being "
                "drained): no replica may be placed on it"
            )
        out.entries.append(
            {
                "brokerId": t.broker,
                "topic": t.topic,
                "partition": t.partition,
                "sourceLogDir": src.path if src else None,
                "targetLogDir": dest.path,
                "bytesCopied": 0,
                "bytesTotal": src.replicas[(t.topic, t.partition)] if src else 0,
                "offsetLag": 0,
                "state": PENDING,
            }
        )
    return out


def _check_broker(b: int, count: int, brokers: dict[int, BrokerDirs | None]) -> None:
    if b >= count:
        raise MoveSpecError(f"broker {b} does not exist (the cluster has brokers 0-{count - 1})")
    if brokers.get(b) is None:
        raise MoveSpecError(f"broker {b} does not answer; its log dirs cannot be checked")


def conflicts(
    me: tuple[str, str], entries: Iterable[dict[str, Any]], others: Sequence[dict[str, Any]]
) -> str | None:
    """The name of an older active LogDirMove that touches one of our replicas, if any."""
    mine = {(e["brokerId"], e["topic"], e["partition"]) for e in entries}
    for o in others:
        if (o["metadata"]["creationTimestamp"], o["metadata"]["name"]) >= me:
            continue
        st = o.get("status") or {}
        if st.get("phase") in ("Succeeded", "Failed", "Cancelled"):
            continue
        theirs = {(e["brokerId"], e["topic"], e["partition"]) for e in st.get("replicas") or []}
        if not theirs:
            theirs = {
                (m["brokerId"], m["topic"], m["partition"])
                for m in (o.get("spec") or {}).get("moves") or []
            }
        both = mine & theirs
        if both:
            b, t, p = sorted(both)[0]
            return f"{o['metadata']['name']} (it already moves {t}-{p} on broker {b})"
    return None


@dataclass(frozen=True)
class Totals:
    copied: int
    total: int
    percent: int
    rate: int
    eta: int | None


def totals(entries: Sequence[dict[str, Any]], rates: dict[tuple[int, str, int], float]) -> Totals:
    total = sum(int(e.get("bytesTotal") or 0) for e in entries)
    copied = sum(
        int(e.get("bytesTotal") or 0)
        if e["state"] == SUCCEEDED
        else 0
        if e["state"] in FINAL  # failed or cancelled: its copy was dropped
        else int(e.get("bytesCopied") or 0)
        for e in entries
    )
    done = all(e["state"] in FINAL for e in entries)
    all_moved = bool(entries) and all(e["state"] == SUCCEEDED for e in entries)
    percent = 100 if all_moved else (int(100 * copied / total) if total else 0)
    rate = int(sum(rates.values()))
    eta = None if done or rate <= 0 else int((total - copied) / rate)
    return Totals(copied, total, min(percent, 100), rate, eta)


def next_to_start(entries: Sequence[dict[str, Any]], per_broker: int) -> list[dict[str, Any]]:
    """Pending replicas that fit under each broker's concurrency limit, in plan order."""
    running: dict[int, int] = {}
    for e in entries:
        if e["state"] == MOVING:
            running[e["brokerId"]] = running.get(e["brokerId"], 0) + 1
    out = []
    for e in entries:
        if e["state"] != PENDING:
            continue
        b = e["brokerId"]
        if running.get(b, 0) < per_broker:
            out.append(e)
            running[b] = running.get(b, 0) + 1
    return out
