"""What ``jbod-ctl reassignments list|describe|verify`` print, from plain data: Topic and
PartitionReassignment objects as kubectl returns them and the brokers' answers.

Pure (no kubectl, no HTTP), so the unit tests feed it fixtures. Every command builds one JSON
document first (``--json`` prints it) and the text is drawn from that document, so the two
cannot say different things. The text keeps Kafka's own sentences where Kafka has them
(``kafka-reassign-partitions --list`` and ``--verify``), so what people and scripts know from
Kafka reads the same here.

Where each fact comes from:

- the partition state of record, KIP-455's view (replicas, adding, removing, the step's
  target): the Topics' ``status.partitions`` (:class:`~jbod_operator.plan.reassignment.PartView`,
  the operator's own reading of it);
- the plan, its phase, batch (KIP-435's current batch), start time and per-partition detail:
  the PartitionReassignment;
- log end offsets, log dirs and throttles: the brokers (describe-log-dirs, configs), as KIP-240
  says a client must ask them (the controller does not know the LEOs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jbod_broker import wire

from ...models import kafka_topic_name
from ...models.common import human_bytes
from ...models.reassignment import ENDED_PHASES, PartitionPhase
from ...plan.port_types import PartView

TP = tuple[str, int]

NO_REASSIGNMENTS = "No partition reassignments found."
"""Kafka's --list answer when nothing moves."""


def tp_name(tp: TP) -> str:
    """``clicks-0``: Kafka's TopicPartition as text."""
    return f"{tp[0]}-{tp[1]}"


def ids(brokers: Iterable[int]) -> str:
    """``0,1,2``: broker ids as Kafka's tool joins them."""
    return ",".join(str(b) for b in brokers)


# -- the partition state of record ---------------------------------------------------------


def partition_records(
    topics: Iterable[Mapping[str, Any]], cluster: str | None = None
) -> dict[str, dict[TP, PartView]]:
    """Cluster → (topic, partition) → the Topic status entry, typed. Entries not written in
    full yet (a Topic being created) are left out rather than failing the command."""
    out: dict[str, dict[TP, PartView]] = {}
    for t in topics:
        c = str((t.get("spec") or {}).get("clusterName") or "")
        if cluster is not None and c != cluster:
            continue
        name = kafka_topic_name(t)
        views = out.setdefault(c, {})
        for s in (t.get("status") or {}).get("partitions") or []:
            try:
                v = PartView.from_status(name, s)
            except (KeyError, TypeError, ValueError):
                continue
            views[v.key] = v
    return out


def in_flight(v: PartView) -> bool:
    """A reassignment step is under way (KIP-455: adding or removing replicas listed)."""
    return bool(v.adding or v.removing or v.target)


def kafka_list_line(v: PartView) -> str:
    """``clicks-0: replicas: 0,1,2. adding: 2. removing: 0.`` as kafka-reassign-partitions
    --list prints it."""
    line = f"{tp_name(v.key)}: replicas: {ids(v.replicas)}."
    if v.adding:
        line += f" adding: {ids(v.adding)}."
    if v.removing:
        line += f" removing: {ids(v.removing)}."
    return line


# -- list ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchView:
    """One PartitionReassignment that has not ended, with KIP-435's current batch."""

    name: str
    namespace: str | None
    cluster: str
    phase: str | None
    batch: int
    batches_planned: int | None
    entries: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> BatchView:
        meta, spec, st = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
        return cls(
            name=str(meta.get("name")),
            namespace=meta.get("namespace"),
            cluster=str(spec.get("clusterName") or ""),
            phase=st.get("phase"),
            batch=int(st.get("batch") or 0),
            batches_planned=st.get("batchesPlanned"),
            entries=tuple(st.get("currentBatch") or ()),
        )

    def heading(self) -> str:
        phase = self.phase or "not accepted yet"
        batch = f"batch {self.batch}" if self.batch else "no batch yet"
        if self.batches_planned:
            batch += f" ({self.batches_planned} more planned)"
        return f"PartitionReassignment {self.name} (cluster {self.cluster}): {phase}, {batch}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "clusterName": self.cluster,
            "phase": self.phase,
            "batch": self.batch,
            "batchesPlanned": self.batches_planned,
            "currentBatch": [dict(e) for e in self.entries],
        }


def active_batches(
    reassignments: Iterable[Mapping[str, Any]], cluster: str | None = None
) -> list[BatchView]:
    """The PartitionReassignments not ended (of ``cluster``), by name."""
    out = [BatchView.from_object(o) for o in reassignments]
    return sorted(
        (
            b
            for b in out
            if b.phase not in ENDED_PHASES and (cluster is None or b.cluster == cluster)
        ),
        key=lambda b: b.name,
    )


def list_document(
    records: Mapping[str, Mapping[TP, PartView]], batches: Sequence[BatchView]
) -> dict[str, Any]:
    """``list --json``: the partitions in flight (KIP-455's fields, per cluster, by topic and
    partition as Kafka sorts them) and every running PartitionReassignment's current batch."""
    parts = []
    for c in sorted(records):
        for key in sorted(records[c]):
            v = records[c][key]
            if not in_flight(v):
                continue
            parts.append(
                {
                    "clusterName": c,
                    "topic": v.topic,
                    "partition": v.partition,
                    "replicas": list(v.replicas),
                    "addingReplicas": list(v.adding),
                    "removingReplicas": list(v.removing),
                    "targetReplicas": list(v.target),
                    "reassignedBy": v.reassigned_by,
                }
            )
    return {"partitions": parts, "reassignments": [b.to_json() for b in batches]}


def format_list(doc: Mapping[str, Any]) -> str:
    """Kafka's --list text (one block per cluster when there are several), then each running
    PartitionReassignment's current batch::

        Current partition reassignments:
        clicks-0: replicas: 0,1,2. adding: 2. removing: 0.

        PartitionReassignment even (cluster kip): Running, batch 2
          clicks-0: current brokers: 0,1. target brokers: 1,2.
    """
    lines: list[str] = []
    parts: list[Mapping[str, Any]] = doc["partitions"]
    clusters = sorted({p["clusterName"] for p in parts})
    if not parts:
        lines.append(NO_REASSIGNMENTS)
    for c in clusters:
        head = "Current partition reassignments"
        lines.append(f"{head} (cluster {c}):" if len(clusters) > 1 else f"{head}:")
        for p in parts:
            if p["clusterName"] != c:
                continue
            line = f"{p['topic']}-{p['partition']}: replicas: {ids(p['replicas'])}."
            if p["addingReplicas"]:
                line += f" adding: {ids(p['addingReplicas'])}."
            if p["removingReplicas"]:
                line += f" removing: {ids(p['removingReplicas'])}."
            lines.append(line)
    for r in doc["reassignments"]:
        b = BatchView.from_object(
            {
                "metadata": {"name": r["name"], "namespace": r["namespace"]},
                "spec": {"clusterName": r["clusterName"]},
                "status": r,
            }
        )
        lines += ["", b.heading()]
        if not b.entries:
            lines.append("  no partition in flight")
        for e in b.entries:
            lines.append(
                f"  {e['topic']}-{e['partition']}: current brokers: "
                f"{ids(e.get('currentBrokers') or [])}. target brokers: "
                f"{ids(e.get('targetBrokers') or [])}."
            )
    return "\n".join(lines)


# -- what the brokers say ------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaOnBroker:
    """One replica (or the future replica of a move) in one log dir of one broker."""

    path: str
    log_end_offset: int
    size: int
    is_future: bool


@dataclass(frozen=True)
class BrokerView:
    """A broker's describe-log-dirs and throttles, or why it did not answer."""

    broker: int
    replicas: Mapping[TP, tuple[ReplicaOnBroker, ...]] = field(default_factory=dict)
    offline_dirs: tuple[str, ...] = ()
    throttle: wire.ThrottleConfig | None = None
    error: str | None = None

    @classmethod
    def from_wire(
        cls, resp: wire.DescribeLogDirsResponse, cfg: wire.ThrottleConfig | None
    ) -> BrokerView:
        reps: dict[TP, list[ReplicaOnBroker]] = {}
        for d in resp.log_dirs:
            if not d.is_live:
                continue
            for r in d.partitions:
                reps.setdefault((r.topic, r.partition), []).append(
                    ReplicaOnBroker(d.path, r.log_end_offset, r.size, r.is_future)
                )
        return cls(
            broker=resp.broker_id,
            replicas={k: tuple(v) for k, v in reps.items()},
            offline_dirs=tuple(d.path for d in resp.log_dirs if not d.is_live),
            throttle=cfg,
        )

    def current(self, tp: TP) -> ReplicaOnBroker | None:
        return next((r for r in self.replicas.get(tp, ()) if not r.is_future), None)

    def future(self, tp: TP) -> ReplicaOnBroker | None:
        return next((r for r in self.replicas.get(tp, ()) if r.is_future), None)

    def leader_throttle(self, tp: TP) -> int | None:
        """The leader throttle on ``tp`` here (bytes/s); None: not throttled (rate 0 is
        unlimited, as in Kafka)."""
        cfg = self.throttle
        if cfg is None or not cfg.leader_replication_throttled_rate:
            return None
        refs = cfg.leader_replication_throttled_replicas or []
        return cfg.leader_replication_throttled_rate if _names(refs, tp) else None

    def follower_throttle(self, tp: TP) -> int | None:
        cfg = self.throttle
        if cfg is None or not cfg.follower_replication_throttled_rate:
            return None
        refs = cfg.follower_replication_throttled_replicas or []
        return cfg.follower_replication_throttled_rate if _names(refs, tp) else None


def _names(refs: Iterable[wire.ReplicaRef], tp: TP) -> bool:
    return any((r.topic, r.partition) == tp for r in refs)


def throttle_text(rate: int | None) -> str:
    return "none" if rate is None else f"{human_bytes(rate)}/s"


# -- describe ------------------------------------------------------------------------------


def _spec_targets(pr: Mapping[str, Any]) -> dict[TP, Mapping[str, Any]]:
    return {
        (str(p["topic"]), int(p["partition"])): p
        for p in (pr.get("spec") or {}).get("partitions") or []
    }


def _details(pr: Mapping[str, Any]) -> dict[TP, Mapping[str, Any]]:
    return {
        (str(p["topic"]), int(p["partition"])): p
        for p in (pr.get("status") or {}).get("partitions") or []
    }


def _originals(pr: Mapping[str, Any]) -> dict[TP, list[int]]:
    return {
        (str(o["topic"]), int(o["partition"])): [int(b) for b in o["replicas"]]
        for o in (pr.get("status") or {}).get("original") or []
    }


def describe_document(
    pr: Mapping[str, Any],
    parts: Mapping[TP, PartView],
    brokers: Mapping[int, BrokerView],
    *,
    all_partitions: bool = False,
) -> dict[str, Any]:
    """``describe --json``: the reassignment's summary and, per partition in flight or in
    trouble (every partition of the spec with ``all_partitions``), KIP-240's description —
    start time, current leader, leader throttle, new assigned brokers and their throttles —
    with each target replica's log end offset and lag behind the leader (leader LEO - its
    LEO), its log dir, and whether it is new to the partition."""
    meta, spec, st = pr.get("metadata") or {}, pr.get("spec") or {}, pr.get("status") or {}
    name = str(meta.get("name"))
    targets = _spec_targets(pr)
    details = _details(pr)
    originals = _originals(pr)
    batch_keys = {(str(e["topic"]), int(e["partition"])) for e in st.get("currentBatch") or []}
    chosen = sorted(
        k
        for k in targets
        if all_partitions
        or k in details
        or k in batch_keys
        or (k in parts and parts[k].reassigned_by == name)
    )
    out_parts = [
        _describe_partition(
            key, targets[key], parts.get(key), details.get(key), originals.get(key), brokers
        )
        for key in chosen
    ]
    return {
        "name": name,
        "namespace": meta.get("namespace"),
        "clusterName": spec.get("clusterName"),
        "phase": st.get("phase"),
        "startTime": st.get("startTime"),
        "completionTime": st.get("completionTime"),
        "batch": int(st.get("batch") or 0),
        "progressPercent": st.get("progressPercent"),
        "counts": dict(st.get("counts") or {}),
        "bytesMoved": st.get("bytesMoved"),
        "bytesToMove": st.get("bytesToMove"),
        "rateBytesPerSecond": st.get("rateBytesPerSecond"),
        "etaSeconds": st.get("etaSeconds"),
        "partitionsInSpec": len(targets),
        "partitions": out_parts,
        "brokerErrors": {
            str(b): v.error for b, v in sorted(brokers.items()) if v.error is not None
        },
    }


def _state(v: PartView | None, target: Sequence[int], detail: Mapping[str, Any] | None) -> str:
    """The partition's state: the operator's word for it when it lists the partition, else
    what the state of record shows (a step adding or removing replicas: Adding or Removing;
    at its target: Done; otherwise not started: Pending)."""
    if detail is not None and detail.get("state"):
        return str(detail["state"])
    if v is None:
        return "Unknown"
    if in_flight(v):
        return (PartitionPhase.ADDING if v.adding else PartitionPhase.REMOVING).value
    if list(v.replicas) == list(target):
        return PartitionPhase.DONE.value
    return PartitionPhase.PENDING.value


def _describe_partition(
    key: TP,
    target: Mapping[str, Any],
    v: PartView | None,
    detail: Mapping[str, Any] | None,
    original: Sequence[int] | None,
    brokers: Mapping[int, BrokerView],
) -> dict[str, Any]:
    final = [int(b) for b in target["replicas"]]
    doc: dict[str, Any] = {
        "topic": key[0],
        "partition": key[1],
        "state": _state(v, final, detail),
        "since": (detail or {}).get("since"),
        "message": (detail or {}).get("message"),
        "newAssignedBrokers": final,
    }
    if v is None:
        doc["message"] = doc["message"] or "not in any Topic status of the cluster"
        return doc
    before = set(original if original is not None else (b for b in v.replicas if b not in v.adding))
    leader_view = brokers.get(v.leader)
    leader_rep = leader_view.current(key) if leader_view is not None else None
    leader_leo = leader_rep.log_end_offset if leader_rep is not None else None
    doc.update(
        {
            "currentLeader": v.leader,
            "leaderThrottle": leader_view.leader_throttle(key) if leader_view else None,
            "replicas": list(v.replicas),
            "isr": list(v.isr),
            "addingReplicas": list(v.adding),
            "removingReplicas": list(v.removing),
            "targetReplicas": list(v.target),
            "newAssignedThrottles": {
                str(b): (brokers[b].follower_throttle(key) if b in brokers else None) for b in final
            },
        }
    )
    reps = []
    for b in [*final, *(x for x in v.adding if x not in final)]:
        bv = brokers.get(b)
        r: dict[str, Any] = {"broker": b, "new": b not in before}
        if bv is None or bv.error is not None:
            r["error"] = bv.error if bv is not None else "not asked"
        else:
            cur, fut = bv.current(key), bv.future(key)
            r["logDir"] = cur.path if cur else None
            r["logEndOffset"] = cur.log_end_offset if cur else None
            r["lag"] = (
                max(0, leader_leo - cur.log_end_offset)
                if cur is not None and leader_leo is not None
                else None
            )
            if fut is not None:
                r["futureLogDir"] = fut.path
        reps.append(r)
    doc["brokers"] = reps
    return doc


def format_describe(doc: Mapping[str, Any]) -> str:
    """The describe document as text, one block per partition::

    PartitionReassignment even (cluster kip): Running, batch 2, 40%, started ...
    clicks-0: Adding since ...: new replicas on brokers [2] catching up
      start time: ... current leader: 0. leader throttle: 1.0 MiB/s.
      replicas: 0,1,2. adding: 2. removing: 0.
      new assigned brokers: 1,2. throttles: 1: none, 2: 1.0 MiB/s.
      broker 2 (new): log end offset 3000, lag 2000, in /k/2/data-b.
    """
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(doc["counts"].items()))
    head = (
        f"PartitionReassignment {doc['name']} (cluster {doc['clusterName']}): "
        f"{doc['phase'] or 'not accepted yet'}"
    )
    if doc["batch"]:
        head += f", batch {doc['batch']}"
    if doc["progressPercent"] is not None:
        head += f", {doc['progressPercent']}%"
    if counts:
        head += f" ({counts})"
    head += f", started {doc['startTime']}" if doc["startTime"] else ", not started"
    lines = [head + "."]
    for b, err in doc["brokerErrors"].items():
        lines.append(f"broker {b} did not answer: {err}")
    if not doc["partitions"]:
        lines.append(
            f"No partition in flight or in trouble (of {doc['partitionsInSpec']}; "
            "--all lists every one)."
        )
    for p in doc["partitions"]:
        lines.append(_describe_lines(p, doc["startTime"]))
    return "\n".join(lines)


def _describe_lines(p: Mapping[str, Any], start: str | None) -> str:
    head = f"{p['topic']}-{p['partition']}: {p['state']}"
    if p.get("since"):
        head += f" since {p['since']}"
    if p.get("message"):
        head += f": {p['message']}"
    lines = [head]
    if "currentLeader" not in p:
        return "\n".join(lines)
    lines.append(
        f"  start time: {start or '-'}. current leader: {p['currentLeader']}. "
        f"leader throttle: {throttle_text(p['leaderThrottle'])}."
    )
    rec = f"  replicas: {ids(p['replicas'])}."
    if p["addingReplicas"]:
        rec += f" adding: {ids(p['addingReplicas'])}."
    if p["removingReplicas"]:
        rec += f" removing: {ids(p['removingReplicas'])}."
    lines.append(rec)
    throttles = ", ".join(f"{b}: {throttle_text(r)}" for b, r in p["newAssignedThrottles"].items())
    lines.append(f"  new assigned brokers: {ids(p['newAssignedBrokers'])}. throttles: {throttles}.")
    for r in p["brokers"]:
        who = f"  broker {r['broker']}{' (new)' if r['new'] else ''}"
        if "error" in r:
            lines.append(f"{who}: did not answer: {r['error']}")
        elif r["logEndOffset"] is None:
            lines.append(f"{who}: no replica yet")
        else:
            lag = "-" if r["lag"] is None else str(r["lag"])
            line = f"{who}: log end offset {r['logEndOffset']}, lag {lag}, in {r['logDir']}"
            if r.get("futureLogDir"):
                line += f", moving to {r['futureLogDir']}"
            lines.append(line + ".")
    return "\n".join(lines)


# -- verify --------------------------------------------------------------------------------


def verify_document(
    pr: Mapping[str, Any],
    parts: Mapping[TP, PartView],
    brokers: Mapping[int, BrokerView],
) -> dict[str, Any]:
    """``verify --json``: Kafka's --verify, with our log dirs.

    A partition is complete when its state of record is its target replicas, in order, with
    no step in flight; each replica whose ``logDirs`` entry names a dir must be in that dir
    (a current replica there, no move left), as the broker says (describe-log-dirs). Throttles
    still naming the spec's partitions on a broker are reported (the operator lifts them when
    the reassignment ends; Kafka's tool leaves them until --verify). ``complete`` is the exit
    code's answer: every partition and every named dir."""
    targets = _spec_targets(pr)
    out_parts, out_reps = [], []
    for key in sorted(targets):
        target = [int(b) for b in targets[key]["replicas"]]
        v = parts.get(key)
        if v is None:
            done, msg = (
                False,
                f"Partition {tp_name(key)} is not in any Topic status of the cluster.",
            )
        elif in_flight(v):
            done, msg = False, f"Reassignment of partition {tp_name(key)} is still in progress."
        elif list(v.replicas) != target:
            done, msg = (
                False,
                f"There is no active reassignment of partition {tp_name(key)}, but replica set "
                f"is {ids(v.replicas)} rather than {ids(target)}.",
            )
        else:
            done, msg = True, f"Reassignment of partition {tp_name(key)} is completed."
        out_parts.append({"topic": key[0], "partition": key[1], "done": done, "message": msg})
        dirs = targets[key].get("logDirs") or []
        for b, ref in zip(target, dirs, strict=False):
            if ref == wire.ANY_LOG_DIR:
                continue
            done, msg = _replica_in_dir(key, int(b), str(ref), brokers.get(int(b)))
            out_reps.append(
                {
                    "topic": key[0],
                    "partition": key[1],
                    "broker": int(b),
                    "logDir": ref,
                    "done": done,
                    "message": msg,
                }
            )
    throttles = []
    for b, bv in sorted(brokers.items()):
        if bv.throttle is None:
            continue
        for side, refs, rate in (
            (
                "leader",
                bv.throttle.leader_replication_throttled_replicas or [],
                bv.throttle.leader_replication_throttled_rate,
            ),
            (
                "follower",
                bv.throttle.follower_replication_throttled_replicas or [],
                bv.throttle.follower_replication_throttled_rate,
            ),
        ):
            mine = sorted({(r.topic, r.partition) for r in refs} & set(targets))
            if mine:
                throttles.append(
                    {
                        "broker": b,
                        "side": side,
                        "rate": rate or None,
                        "partitions": [tp_name(k) for k in mine],
                        "message": f"Throttle still set on broker {b}: "
                        f"{side}.replication.throttled.replicas names "
                        f"{', '.join(tp_name(k) for k in mine[:10])}"
                        + (f" and {len(mine) - 10} more" if len(mine) > 10 else "")
                        + f" ({side}.replication.throttled.rate {throttle_text(rate or None)}).",
                    }
                )
    complete = all(p["done"] for p in out_parts) and all(r["done"] for r in out_reps)
    meta = pr.get("metadata") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "phase": (pr.get("status") or {}).get("phase"),
        "complete": complete,
        "partitions": out_parts,
        "replicas": out_reps,
        "throttles": throttles,
    }


def _replica_in_dir(key: TP, b: int, ref: str, bv: BrokerView | None) -> tuple[bool, str]:
    """Kafka's log-dir sentences (its replicaMoveStatesToString) for one replica whose
    target names a dir; ``ref`` may be a name, ``data-<name>`` or a path."""
    replica = f"{tp_name(key)}-{b}"
    if bv is None or bv.error is not None:
        why = bv.error if bv is not None else "no URL in the BrokerCluster status"
        return False, f"Broker {b} did not answer ({why}): cannot check replica {replica}."
    cur, fut = bv.current(key), bv.future(key)
    if cur is None:
        if bv.offline_dirs:
            return False, (
                f"Partition {tp_name(key)} is not found in any live log dir on broker {b}. "
                "There is likely an offline log directory on the broker."
            )
        return False, (
            f"Partition {tp_name(key)} cannot be found in any live log directory on broker {b}."
        )
    if fut is not None:
        if wire.refers_to_log_dir(ref, fut.path):
            return False, f"Reassignment of replica {replica} is still in progress."
        return False, (
            f"Partition {tp_name(key)} on broker {b} is being moved to log dir {fut.path} "
            f"instead of {ref}."
        )
    if wire.refers_to_log_dir(ref, cur.path):
        return True, f"Reassignment of replica {replica} completed successfully."
    return False, (
        f"Partition {tp_name(key)} on broker {b} is not being moved from log dir {cur.path} "
        f"to {ref}."
    )


def format_verify(doc: Mapping[str, Any]) -> str:
    """Kafka's --verify text: the partitions, then the replicas with a named dir, then the
    throttles still set, then one line saying whether it is all done."""
    lines = ["Status of partition reassignment:"]
    lines += [p["message"] for p in doc["partitions"]]
    lines += [r["message"] for r in doc["replicas"]]
    lines += [t["message"] for t in doc["throttles"]]
    todo = sum(not p["done"] for p in doc["partitions"]) + sum(
        not r["done"] for r in doc["replicas"]
    )
    if doc["complete"]:
        lines.append(f"PartitionReassignment {doc['name']}: every partition is at its target.")
    else:
        lines.append(f"PartitionReassignment {doc['name']}: {todo} not at their target yet.")
    return "\n".join(lines)
