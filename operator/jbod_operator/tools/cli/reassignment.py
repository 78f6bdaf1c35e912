"""``jbod-ctl reassignment to-manifests``: a ``kafka-reassign-partitions`` JSON file (with
``log_dirs``) turned into the custom resources that carry it out.

Partitions that keep their replica list but name directories become one LogDirMove; partitions
whose replica list changes become one PartitionReassignment (with their ``logDirs``). Every
partition lands in exactly one resource, so no replica is the subject of two moves at once
(KAFKA-9087). Each manifest is validated with the resource's pydantic model here, so a plan the
API server would refuse is refused before ``kubectl apply``, naming the input entry at fault.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from jbod_broker import wire

from ...models import kafka_topic_name
from ...models.common import API_VERSION
from ...models.log_dir_move import MAX_MOVES, LogDirMoveSpec
from ...models.reassignment import MAX_PARTITIONS, PartitionReassignmentSpec
from .common import (
    MAX_ERRORS_SHOWN,
    CliError,
    non_negative_int,
    problems,
    read_text,
)
from .kubectl import Kubectl, KubectlError, add_kube_options, kubectl_from_args

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class PartitionAssignment:
    """One entry of the input file, checked."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None
    where: str = ""
    """Where it came from in the input, for messages: ``partitions[3] (clicks-2)``."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _valid_dir_ref(d: str) -> bool:
    if d == wire.ANY_LOG_DIR or (_DNS_LABEL.match(d) and len(d) <= 63):
        return True
    return d.startswith("/") and "\x00" not in d and len(d) <= 4096


def parse_reassignment(
    text: str, source: str = "input", *, allow_empty: bool = False
) -> list[PartitionAssignment]:
    """A kafka-reassign-partitions JSON document, checked field by field. Every problem is
    reported at once, each naming the entry (``partitions[3] (clicks-2)``) and the field.

    A document nested deeper than Python's recursion limit is bad input like any other, not a
    traceback."""
    try:
        return _parse_reassignment(text, source, allow_empty=allow_empty)
    except RecursionError:
        raise CliError(
            f"{source}: nested too deeply: a reassignment file is an object holding a list of "
            "flat partition entries"
        ) from None


def _parse_reassignment(text: str, source: str, *, allow_empty: bool) -> list[PartitionAssignment]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise CliError(
            f"{source}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None
    if not isinstance(doc, dict):
        raise CliError(
            f'{source}: the top level must be an object like {{"version": 1, "partitions": [...]}}'
        )
    if "version" not in doc:
        raise CliError(f'{source}: missing "version" (expected 1)')
    if not _is_int(doc["version"]) or doc["version"] != 1:
        raise CliError(f"{source}: unknown version {doc['version']!r}: only version 1 is supported")
    if "partitions" not in doc:
        raise CliError(f'{source}: missing "partitions"')
    items = doc["partitions"]
    if not isinstance(items, list):
        raise CliError(f'{source}: "partitions" must be a list')
    if not items and not allow_empty:
        raise CliError(f'{source}: "partitions" is empty: nothing to reassign')
    errors: list[str] = []
    out: list[PartitionAssignment] = []
    seen: dict[tuple[str, int], str] = {}
    for i, item in enumerate(items):
        where = f"partitions[{i}]"
        if not isinstance(item, dict):
            errors.append(f"{where} must be an object")
            continue
        topic = item.get("topic")
        if not isinstance(topic, str) or not topic:
            errors.append(f'{where}: "topic" must be a non-empty string')
            continue
        part = item.get("partition")
        if not isinstance(part, int) or isinstance(part, bool) or part < 0:
            what = "missing" if "partition" not in item else f"got {part!r}"
            errors.append(f'{where} (topic {topic}): "partition" must be an integer >= 0 ({what})')
            continue
        where = f"{where} ({topic}-{part})"
        before = len(errors)
        replicas = item.get("replicas")
        if "replicas" not in item:
            errors.append(f'{where}: missing "replicas"')
        elif not isinstance(replicas, list) or not replicas:
            errors.append(f'{where}: "replicas" must be a non-empty list of broker ids')
        else:
            for j, b in enumerate(replicas):
                if not _is_int(b):
                    errors.append(f"{where}: replicas[{j}] must be an integer broker id, got {b!r}")
                elif b < 0:
                    errors.append(f"{where}: replicas[{j}] is a negative broker id ({b})")
            dupes = sorted({b for b in replicas if _is_int(b) and replicas.count(b) > 1})
            for b in dupes:
                errors.append(f"{where}: broker {b} is listed twice in replicas")
        dirs = item.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list):
                errors.append(f'{where}: "log_dirs" must be a list of directories')
            else:
                if isinstance(replicas, list) and len(dirs) != len(replicas):
                    errors.append(
                        f"{where}: log_dirs has {len(dirs)} entries but replicas has "
                        f'{len(replicas)}: give one directory (or "any") per replica'
                    )
                for j, d in enumerate(dirs):
                    if not isinstance(d, str) or not _valid_dir_ref(d):
                        errors.append(
                            f'{where}: log_dirs[{j}] must be "any", an absolute path or a log dir '
                            f"name from the BrokerCluster spec, got {d!r}"
                        )
        if (topic, part) in seen:
            errors.append(f"{where}: {topic}-{part} is listed twice (also {seen[(topic, part)]})")
        seen.setdefault((topic, part), where)
        if len(errors) > before:
            continue
        assert isinstance(replicas, list)
        out.append(
            PartitionAssignment(
                topic=topic,
                partition=part,
                replicas=tuple(replicas),
                log_dirs=tuple(dirs) if isinstance(dirs, list) else None,
                where=where,
            )
        )
    if errors:
        raise problems(f"{source}: {len(errors)} problem{'s' if len(errors) > 1 else ''}", errors)
    return out


@dataclass(frozen=True)
class CurrentPartition:
    """Where a partition is now: its replica list in order and each replica's dir (``None``:
    not known, e.g. ``any`` in a ``--current`` file)."""

    replicas: tuple[int, ...]
    log_dirs: tuple[str | None, ...]


def current_from_assignments(
    parts: Iterable[PartitionAssignment],
) -> dict[tuple[str, int], CurrentPartition]:
    """The current state from a ``--current`` file in the same format as the plan."""
    out = {}
    for p in parts:
        dirs = p.log_dirs or tuple(wire.ANY_LOG_DIR for _ in p.replicas)
        out[p.key] = CurrentPartition(
            p.replicas, tuple(None if d == wire.ANY_LOG_DIR else d for d in dirs)
        )
    return out


def current_from_topics(
    topics: Iterable[Mapping[str, Any]], cluster: str
) -> dict[tuple[str, int], CurrentPartition]:
    """The state of record: each Topic's status (replica list in order, each replica's dir)."""
    out = {}
    for t in topics:
        if (t.get("spec") or {}).get("clusterName") != cluster:
            continue
        name = kafka_topic_name(t)
        for p in (t.get("status") or {}).get("partitions") or []:
            reps = p.get("replicas") or []
            out[(name, int(p["partition"]))] = CurrentPartition(
                tuple(int(r["brokerId"]) for r in reps), tuple(r.get("logDir") for r in reps)
            )
    return out


def same_dir(target: str, current: str | None) -> bool:
    """A target (name, ``data-<name>`` or path) names the directory the replica is in; a
    replica whose dir is not known is never already there."""
    return current is not None and wire.refers_to_log_dir(target, current)


def default_name_prefix(cluster: str, targets: Sequence[PartitionAssignment]) -> str:
    """Deterministic: the same input gives the same names (so kubectl apply is idempotent)."""
    canon = json.dumps(
        [[t.topic, t.partition, list(t.replicas), list(t.log_dirs or [])] for t in targets],
        sort_keys=True,
    )
    digest = hashlib.sha1(canon.encode()).hexdigest()[:8]
    return f"{cluster[:200]}-reassign-{digest}"


def check_name_prefix(prefix: str) -> None:
    """A prefix that, with ``-brokers-N``/``-dirs-N`` added, is a valid resource name."""
    if not _RESOURCE_NAME.match(prefix) or len(prefix) > 230:
        raise CliError(
            f"--name {prefix!r}: must be lower-case letters, digits, '-' or '.', start and end "
            "with a letter or digit, at most 230 characters"
        )


@dataclass
class ManifestResult:
    """The manifests to apply and what the user should know about the partitions left out."""

    manifests: list[dict[str, Any]]
    notes: list[str]


def _validation_message(
    kind: str, name: str, err: ValidationError, sources: Mapping[int, str], list_field: str
) -> str:
    lines = []
    for e in err.errors()[:MAX_ERRORS_SHOWN]:
        loc = list(e["loc"])
        origin = ""
        if len(loc) >= 2 and loc[0] == list_field and isinstance(loc[1], int):
            origin = sources.get(loc[1], "") + ": "
            loc = loc[2:]
        field = ".".join(str(x) for x in loc) or "spec"
        lines.append(f"{origin}{field}: {e['msg']}")
    return f"{kind} {name} would be refused:\n  " + "\n  ".join(lines)


@dataclass
class _Sorted:
    """Targets sorted into the two resources' entries, each with the file location it came
    from (for a refusal's message), and what the user should know."""

    moves: list[dict[str, Any]] = field(default_factory=list)
    move_src: list[str] = field(default_factory=list)
    parts: list[dict[str, Any]] = field(default_factory=list)
    part_src: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _as_moves(t: PartitionAssignment, cur: CurrentPartition, out: _Sorted) -> None:
    """Same replicas in the same order: each replica with a named dir it is not in yet is a
    LogDirMove move."""
    dirs = t.log_dirs or tuple(wire.ANY_LOG_DIR for _ in t.replicas)
    wanted = 0
    for b, d, here in zip(t.replicas, dirs, cur.log_dirs, strict=True):
        if d == wire.ANY_LOG_DIR:
            continue
        wanted += 1
        if same_dir(d, here):
            out.notes.append(f"{t.topic}-{t.partition} on broker {b} is already in {d}")
            continue
        out.moves.append({"brokerId": b, "topic": t.topic, "partition": t.partition, "logDir": d})
        out.move_src.append(t.where)
    if not wanted:
        out.notes.append(f"{t.topic}-{t.partition}: unchanged (same replicas, no log_dirs)")


def _as_partition(t: PartitionAssignment, cur: CurrentPartition, out: _Sorted) -> None:
    """A new replica list (brokers or order): one PartitionReassignment entry."""
    dirs = t.log_dirs or tuple(wire.ANY_LOG_DIR for _ in t.replicas)
    entry: dict[str, Any] = {
        "topic": t.topic,
        "partition": t.partition,
        "replicas": list(t.replicas),
    }
    if any(d != wire.ANY_LOG_DIR for d in dirs):
        entry["logDirs"] = list(dirs)
    if set(t.replicas) == set(cur.replicas):
        out.notes.append(
            f"{t.topic}-{t.partition}: same brokers in a new order (preferred leader "
            f"{t.replicas[0]}): a PartitionReassignment"
        )
    out.parts.append(entry)
    out.part_src.append(t.where)


def _sort_targets(
    targets: Sequence[PartitionAssignment],
    current: Mapping[tuple[str, int], CurrentPartition],
    *,
    cluster: str,
    broker_count: int | None,
    current_source: str,
) -> _Sorted:
    out = _Sorted()
    for t in targets:
        cur = current.get(t.key)
        if cur is None:
            out.errors.append(f"{t.where}: {t.topic}-{t.partition} is not in {current_source}")
            continue
        bad = [b for b in t.replicas if broker_count is not None and b >= broker_count]
        if bad:
            assert broker_count is not None
            out.errors.append(
                f"{t.where}: broker {bad[0]} does not exist in cluster {cluster} "
                f"(brokers 0-{broker_count - 1})"
            )
        elif t.replicas == cur.replicas:
            _as_moves(t, cur, out)
        else:
            _as_partition(t, cur, out)
    return out


def _chunked(
    kind: str,
    entries: Sequence[dict[str, Any]],
    sources: Sequence[str],
    *,
    cluster: str,
    name: Callable[[int, int], str],
    metadata: Callable[[str], dict[str, Any]],
    throttle: int | None,
) -> list[dict[str, Any]]:
    """``entries`` as resources of ``kind`` of at most the kind's limit each, every one
    validated by the kind's model (a refusal names the file location of the bad entry)."""
    field_name, model = _KINDS[kind]
    # Read at call time: the limits are module constants a test may lower.
    limit = MAX_PARTITIONS if kind == "PartitionReassignment" else MAX_MOVES
    n = -(-len(entries) // limit)
    out: list[dict[str, Any]] = []
    for i in range(n):
        lo = i * limit
        chunk = list(entries[lo : lo + limit])
        spec: dict[str, Any] = {"clusterName": cluster, field_name: chunk}
        if throttle is not None:
            spec["throttleBytesPerSecond"] = throttle
        nm = name(i, n)
        try:
            model.model_validate(spec)
        except ValidationError as e:
            src = dict(enumerate(sources[lo : lo + len(chunk)]))
            raise CliError(_validation_message(kind, nm, e, src, field_name)) from None
        out.append(
            {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata(nm), "spec": spec}
        )
    return out


_KINDS: Mapping[str, tuple[str, type[BaseModel]]] = {
    "PartitionReassignment": ("partitions", PartitionReassignmentSpec),
    "LogDirMove": ("moves", LogDirMoveSpec),
}
"""Per kind: its list field and its spec's model."""


def build_manifests(
    targets: Sequence[PartitionAssignment],
    current: Mapping[tuple[str, int], CurrentPartition],
    *,
    cluster: str,
    name_prefix: str | None = None,
    namespace: str | None = None,
    throttle: int | None = None,
    broker_count: int | None = None,
    current_source: str = "the current assignment",
) -> ManifestResult:
    """The custom resources that carry out ``targets``.

    - Replica list unchanged (same brokers, same order): every replica whose ``log_dirs`` entry
      is not ``any`` (and not already its directory) becomes a move of one LogDirMove.
    - Replica list changed (brokers or order, i.e. the preferred leader): the partition goes to
      one PartitionReassignment, with ``logDirs`` when any entry is not ``any``.

    Plans larger than one resource may hold (:data:`MAX_MOVES` moves, or
    :data:`MAX_PARTITIONS` partitions) are split into numbered resources.
    Each manifest is validated with the resource's pydantic model before it is returned."""
    got = _sort_targets(
        targets, current, cluster=cluster, broker_count=broker_count, current_source=current_source
    )
    if got.errors:
        n = len(got.errors)
        raise problems(f"{n} partition{'s' if n > 1 else ''} cannot be planned", got.errors)
    prefix = name_prefix or default_name_prefix(cluster, targets)
    check_name_prefix(prefix)

    def meta(name: str) -> dict[str, Any]:
        m: dict[str, Any] = {"name": name}
        if namespace:
            m["namespace"] = namespace
        m["labels"] = {"jbod.io/cluster": cluster[:63]}
        return m

    def namer(kind: str) -> Callable[[int, int], str]:
        return lambda i, n: f"{prefix}-{kind}" if n == 1 else f"{prefix}-{kind}-{i}"

    manifests = [
        *_chunked(
            "PartitionReassignment",
            got.parts,
            got.part_src,
            cluster=cluster,
            name=namer("brokers"),
            metadata=meta,
            throttle=throttle,
        ),
        *_chunked(
            "LogDirMove",
            got.moves,
            got.move_src,
            cluster=cluster,
            name=namer("dirs"),
            metadata=meta,
            throttle=throttle,
        ),
    ]
    return ManifestResult(manifests, got.notes)


def manifests_yaml(manifests: Sequence[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream, keys in the order written (apiVersion, kind, ...)."""
    return yaml.safe_dump_all(manifests, sort_keys=False, default_flow_style=False)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``reassignment to-manifests`` and its options."""
    ra = sub.add_parser("reassignment", help="kafka-reassign-partitions JSON to resources")
    ra_sub = ra.add_subparsers(dest="action", required=True, metavar="ACTION")
    tm = ra_sub.add_parser(
        "to-manifests",
        help="print LogDirMove / PartitionReassignment YAML",
        description="Read a kafka-reassign-partitions JSON file (with optional log_dirs) and "
        "print the resources that carry it out: a LogDirMove for partitions that keep their "
        "replica list, a PartitionReassignment for those whose replica list changes.",
    )
    tm.add_argument("file", metavar="FILE", help="reassignment JSON ('-' for stdin)")
    tm.add_argument("--cluster", metavar="NAME", required=True, help="BrokerCluster name")
    tm.add_argument(
        "--name", metavar="PREFIX", help="name prefix of the resources (default: derived from FILE)"
    )
    tm.add_argument(
        "--throttle", type=non_negative_int, metavar="BYTES_PER_S", help="move throttle"
    )
    tm.add_argument(
        "--current",
        metavar="FILE_OR_-",
        help="current assignment in the same JSON format (default: the Topic statuses)",
    )
    add_kube_options(tm)


def manifests_from_kafka_json(
    text: str,
    label: str,
    *,
    cluster: str,
    kubectl: Kubectl | None,
    current_text: str | None = None,
    current_label: str = "",
    name_prefix: str | None = None,
    namespace: str | None = None,
    throttle: int | None = None,
) -> ManifestResult:
    """A kafka-reassign-partitions JSON document turned into manifests, against the current
    assignment of ``current_text`` (same format) or else the Topic statuses of ``cluster``
    (read with ``kubectl``, which also gives the cluster's broker count). The one path behind
    ``reassignment to-manifests`` and ``reassignments apply`` of a Kafka file."""
    targets = parse_reassignment(text, label)
    broker_count: int | None = None
    if current_text is not None:
        cur_parts = parse_reassignment(current_text, current_label, allow_empty=True)
        current = current_from_assignments(cur_parts)
        source = f"--current {current_label}"
    else:
        assert kubectl is not None
        topics = kubectl.topics()
        current = current_from_topics(topics, cluster)
        try:
            bc = kubectl.get_json("brokerclusters.jbod.io", cluster)
            broker_count = int(bc["spec"]["replicas"])
        except KubectlError as e:
            if not e.not_found:
                raise
            where = f" in namespace {kubectl.namespace}" if kubectl.namespace else ""
            raise CliError(f"BrokerCluster {cluster} not found{where}") from None
        source = f"the Topic statuses of cluster {cluster}"
    return build_manifests(
        targets,
        current,
        cluster=cluster,
        name_prefix=name_prefix,
        namespace=namespace,
        throttle=throttle,
        broker_count=broker_count,
        current_source=source,
    )


def is_kafka_json(text: str) -> bool:
    """A kafka-reassign-partitions document (``{"version": 1, "partitions": [...]}``) rather
    than Kubernetes manifests: JSON, an object, with ``partitions`` and no ``kind``."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and "partitions" in doc and "kind" not in doc


def cmd_to_manifests(ns: argparse.Namespace) -> int:
    """``reassignment to-manifests``: YAML on stdout, notes and a one-line summary on stderr
    (so ``> plan.yaml`` captures only what ``kubectl apply`` should read)."""
    if ns.file == "-" and ns.current == "-":
        raise CliError("FILE and --current cannot both be read from stdin")
    label = "stdin" if ns.file == "-" else ns.file
    text = read_text(ns.file, "reassignment file")
    current_text: str | None = None
    clabel = ""
    if ns.current is not None:
        clabel = "stdin" if ns.current == "-" else ns.current
        current_text = read_text(ns.current, "current assignment")
    res = manifests_from_kafka_json(
        text,
        label,
        cluster=ns.cluster,
        kubectl=None if current_text is not None else kubectl_from_args(ns),
        current_text=current_text,
        current_label=clabel,
        name_prefix=ns.name,
        namespace=ns.namespace,
        throttle=ns.throttle,
    )
    for n in res.notes:
        print(f"note: {n}", file=sys.stderr)
    if not res.manifests:
        print("note: nothing to do: every partition is already as asked", file=sys.stderr)
        return 0
    sys.stdout.write(manifests_yaml(res.manifests))
    kinds = ", ".join(f"{m['kind']} {m['metadata']['name']}" for m in res.manifests)
    print(f"{len(res.manifests)} manifest(s): {kinds}", file=sys.stderr)
    return 0
