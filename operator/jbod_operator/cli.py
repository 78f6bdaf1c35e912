"""``jbod-ctl``: the command-line tool for the daily path of JBOD brokers (KIP-113).

Three commands, each printing JSON (or YAML manifests) on stdout and what went wrong on stderr
(exit 1; 2 for a usage error):

``jbod-ctl log-dirs describe``
    Kafka's ``kafka-log-dirs --describe`` output as KIP-113 describes it: per broker, per log
    dir, ``is_live``, ``path`` and the replicas in it (``is_temporary`` marks the future replica
    of a move). Brokers are found from a BrokerCluster's status (``--cluster``, through kubectl)
    or named directly (``--bootstrap-url``).

``jbod-ctl reassignment to-manifests``
    A ``kafka-reassign-partitions`` JSON file (with ``log_dirs``) turned into custom resources:
    partitions that keep their replica list but name directories become one LogDirMove;
    partitions whose replica list changes become one PartitionReassignment (with their
    ``logDirs``). Every partition lands in exactly one resource, so no replica is the subject
    of two moves at once (KAFKA-9087).

``jbod-ctl logdirmove wait|apply``
    Follows a LogDirMove's status until it is final, with a progress bar on a terminal.

The pure parts (conversions, validation, formatting) are functions on plain data; the I/O
(kubectl, broker HTTP) sits at the edges, behind :class:`Kubectl` and :func:`describe_urls`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError

from .models.common import API_VERSION
from .models.log_dir_move import LogDirMoveSpec
from .models.reassignment import PartitionReassignmentSpec

PROG = "jbod-ctl"
ANY = "any"
MAX_MOVES_PER_LOGDIRMOVE = 10_000
MAX_PARTITIONS_PER_REASSIGNMENT = 100_000
POLL_SECONDS = 0.5
FINAL_PHASES = ("Succeeded", "Failed", "Cancelled")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAX_ERRORS_SHOWN = 20


class CliError(Exception):
    """What the user did wrong or what failed, said plainly; exit code 1."""


# ---------------------------------------------------------------------------------------------
# log-dirs describe: describe-log-dirs answers → KIP-113's kafka-log-dirs JSON
# ---------------------------------------------------------------------------------------------


def describe_to_kip(
    responses: Iterable[wire.DescribeLogDirsResponse],
    *,
    brokers: Iterable[int] | None = None,
    topics: Iterable[str] | None = None,
) -> dict[str, Any]:
    """KIP-113's ``kafka-log-dirs`` JSON from the brokers' describe-log-dirs answers.

    ``{"version": 1, "brokers": [{"broker": id, "log dirs": [{"is_live", "path",
    "partitions": [{"topic", "partition", "size", "offset_lag", "is_temporary"}]}]}]}``,
    brokers by id, log dirs in the broker's order, partitions by topic and partition (a future
    replica after the current one)."""
    want_b = set(brokers) if brokers is not None else None
    want_t = set(topics) if topics is not None else None
    out: list[dict[str, Any]] = []
    for r in sorted(responses, key=lambda r: r.broker_id):
        if want_b is not None and r.broker_id not in want_b:
            continue
        dirs = []
        for d in r.log_dirs:
            parts = [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "size": p.size,
                    "offset_lag": p.offset_lag,
                    "is_temporary": p.is_future,
                }
                for p in sorted(d.partitions, key=lambda p: (p.topic, p.partition, p.is_future))
                if want_t is None or p.topic in want_t
            ]
            dirs.append({"is_live": d.is_live, "path": d.path, "partitions": parts})
        out.append({"broker": r.broker_id, "log dirs": dirs})
    return {"version": 1, "brokers": out}


async def _describe_one(
    url: str, token: str | None, topics: list[str] | None, timeout_s: float
) -> wire.DescribeLogDirsResponse:
    async with BrokerClient(url, token=token, timeout_s=timeout_s) as c:
        return await c.describe_log_dirs(topics=topics)


async def _describe_all(
    urls: Sequence[str], token: str | None, topics: list[str] | None, timeout_s: float
) -> list[wire.DescribeLogDirsResponse | BaseException]:
    return await asyncio.gather(
        *(_describe_one(u, token, topics, timeout_s) for u in urls), return_exceptions=True
    )


def describe_urls(
    urls: Sequence[str],
    token: str | None,
    *,
    topics: list[str] | None = None,
    timeout_s: float = 30.0,
    labels: Sequence[str] | None = None,
) -> list[wire.DescribeLogDirsResponse]:
    """describe-log-dirs from every URL at once; any failure is a CliError naming the broker."""
    results = asyncio.run(_describe_all(urls, token, topics, timeout_s))
    errors = []
    ok: list[wire.DescribeLogDirsResponse] = []
    for i, (url, res) in enumerate(zip(urls, results, strict=True)):
        who = f"{labels[i]} ({url})" if labels else url
        if isinstance(res, KafkaError):
            errors.append(f"{who}: {type(res).__name__}: {res}")
        elif isinstance(res, BaseException):
            if not isinstance(res, Exception):
                raise res
            errors.append(f"{who}: unexpected answer: {type(res).__name__}: {res}")
        else:
            ok.append(res)
    if errors:
        raise CliError("describe-log-dirs failed on " + "; ".join(errors))
    return ok


def parse_id_list(text: str) -> list[int]:
    """``0,1,2`` → [0, 1, 2] (for argparse: a bad list is a usage error)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit():
            raise argparse.ArgumentTypeError(f"{part!r} is not a broker id (an integer >= 0)")
        out.append(int(part))
    if not out:
        raise argparse.ArgumentTypeError("expected a comma-separated list of broker ids")
    return out


def parse_name_list(text: str) -> list[str]:
    out = [p.strip() for p in text.split(",") if p.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected a comma-separated list of topic names")
    return out


def non_negative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{v} must be > 0")
    return v


# ---------------------------------------------------------------------------------------------
# kubectl
# ---------------------------------------------------------------------------------------------


def find_kubectl(explicit: str | None = None) -> str:
    """--kubectl, else $KUBECTL, else kubectl on PATH, else the one next to this Python (the
    project's .venv/bin, where ``make setup`` puts it)."""
    for cand in (explicit, os.environ.get("KUBECTL")):
        if cand:
            return cand
    found = shutil.which("kubectl")
    if found:
        return found
    sibling = Path(sys.executable).parent / "kubectl"
    if os.access(sibling, os.X_OK):
        return str(sibling)
    raise CliError(
        "kubectl not found: run `make setup` (it installs kubectl into .venv/bin) "
        "or pass --kubectl PATH"
    )


class KubectlError(CliError):
    def __init__(self, args: Sequence[str], stderr: str) -> None:
        self.not_found = "NotFound" in stderr or "not found" in stderr
        text = stderr.strip() or "(no output)"
        super().__init__(f"kubectl {' '.join(args)} failed: {text}")


@dataclass
class Kubectl:
    binary: str
    kubeconfig: str | None = None
    namespace: str | None = None
    timeout_s: float = 60.0

    def command(self, args: Sequence[str]) -> list[str]:
        cmd = [self.binary]
        if self.kubeconfig:
            cmd.append(f"--kubeconfig={self.kubeconfig}")
        if self.namespace:
            cmd += ["-n", self.namespace]
        return cmd + list(args)

    def run(self, *args: str, input: str | None = None) -> str:
        try:
            p = subprocess.run(
                self.command(args),
                input=input,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise CliError(f"cannot run {self.binary!r}: no such file") from None
        except subprocess.TimeoutExpired:
            raise CliError(
                f"kubectl {' '.join(args)}: no answer in {self.timeout_s:.0f} s"
            ) from None
        if p.returncode != 0:
            raise KubectlError(args, p.stderr)
        return p.stdout

    def get_json(self, *args: str) -> dict[str, Any]:
        text = self.run("get", *args, "-o", "json")
        try:
            data = json.loads(text)
        except ValueError as e:
            raise CliError(f"kubectl get {' '.join(args)}: not JSON: {e}") from None
        if not isinstance(data, dict):
            raise CliError(f"kubectl get {' '.join(args)}: expected an object")
        return data


def cluster_endpoints(kubectl: Kubectl, cluster: str) -> tuple[dict[int, str], str | None]:
    """Broker id → URL from the BrokerCluster's status, and the token from its Secret."""
    try:
        bc = kubectl.get_json("brokerclusters.jbod.io", cluster)
    except KubectlError as e:
        if not e.not_found:
            raise
        where = f" in namespace {kubectl.namespace}" if kubectl.namespace else ""
        raise CliError(f"BrokerCluster {cluster} not found{where}") from None
    urls = {
        int(b["id"]): str(b["url"])
        for b in (bc.get("status") or {}).get("brokers") or []
        if b.get("url")
    }
    if not urls:
        raise CliError(
            f"BrokerCluster {cluster} lists no broker URLs in its status yet "
            "(is the operator running?)"
        )
    secret = kubectl.get_json("secret", f"{cluster}-broker-token")
    raw = (secret.get("data") or {}).get("token")
    token = base64.b64decode(raw).decode().strip() if raw else None
    return urls, token


def read_token_file(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except OSError as e:
        raise CliError(f"cannot read the token file: {e}") from None


def log_dirs_describe(
    *,
    cluster: str | None = None,
    kubectl: Kubectl | None = None,
    bootstrap_urls: Sequence[str] = (),
    token: str | None = None,
    brokers: Sequence[int] | None = None,
    topics: Sequence[str] | None = None,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """The whole ``log-dirs describe`` command as a function (used by the demo too)."""
    topic_list = list(topics) if topics else None
    if cluster is not None:
        assert kubectl is not None
        urls, token = cluster_endpoints(kubectl, cluster)
        ids = sorted(urls) if brokers is None else list(brokers)
        missing = [b for b in ids if b not in urls]
        if missing:
            raise CliError(
                f"BrokerCluster {cluster} has no URL for broker(s) "
                f"{', '.join(map(str, missing))} (known: {', '.join(map(str, sorted(urls)))})"
            )
        responses = describe_urls(
            [urls[b] for b in ids],
            token,
            topics=topic_list,
            timeout_s=timeout_s,
            labels=[f"broker {b}" for b in ids],
        )
    else:
        responses = describe_urls(bootstrap_urls, token, topics=topic_list, timeout_s=timeout_s)
        if brokers is not None:
            seen = {r.broker_id for r in responses}
            missing = [b for b in brokers if b not in seen]
            if missing:
                raise CliError(
                    f"broker(s) {', '.join(map(str, missing))} not among the bootstrap URLs' "
                    f"brokers ({', '.join(map(str, sorted(seen)))})"
                )
    return describe_to_kip(responses, brokers=brokers, topics=topic_list)


# ---------------------------------------------------------------------------------------------
# reassignment to-manifests: kafka-reassign-partitions JSON → LogDirMove / PartitionReassignment
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionAssignment:
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
    if d == ANY or (_DNS_LABEL.match(d) and len(d) <= 63):
        return True
    return d.startswith("/") and "\x00" not in d and len(d) <= 4096


def parse_reassignment(
    text: str, source: str = "input", *, allow_empty: bool = False
) -> list[PartitionAssignment]:
    """A kafka-reassign-partitions JSON document, checked field by field. Every problem is
    reported at once, each naming the entry (``partitions[3] (clicks-2)``) and the field."""
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
        shown = errors[:_MAX_ERRORS_SHOWN]
        more = len(errors) - len(shown)
        raise CliError(
            f"{source}: {len(errors)} problem{'s' if len(errors) > 1 else ''}:\n  "
            + "\n  ".join(shown)
            + (f"\n  ... and {more} more" if more else "")
        )
    return out


@dataclass(frozen=True)
class CurrentPartition:
    replicas: tuple[int, ...]
    log_dirs: tuple[str | None, ...]


def current_from_assignments(
    parts: Iterable[PartitionAssignment],
) -> dict[tuple[str, int], CurrentPartition]:
    out = {}
    for p in parts:
        dirs = p.log_dirs or tuple(ANY for _ in p.replicas)
        out[p.key] = CurrentPartition(p.replicas, tuple(None if d == ANY else d for d in dirs))
    return out


def current_from_topics(
    topics: Iterable[Mapping[str, Any]], cluster: str
) -> dict[tuple[str, int], CurrentPartition]:
    """The state of record: each Topic's status (replica list in order, each replica's dir)."""
    out = {}
    for t in topics:
        if (t.get("spec") or {}).get("clusterName") != cluster:
            continue
        st = t.get("status") or {}
        name = st.get("topicName") or (t.get("spec") or {}).get("topicName")
        name = name or t["metadata"]["name"]
        for p in st.get("partitions") or []:
            reps = p.get("replicas") or []
            out[(str(name), int(p["partition"]))] = CurrentPartition(
                tuple(int(r["brokerId"]) for r in reps), tuple(r.get("logDir") for r in reps)
            )
    return out


def same_dir(target: str, current: str | None) -> bool:
    """A target (name, ``data-<name>`` or path) names the directory the replica is in."""
    if current is None:
        return False
    if target.startswith("/"):
        return os.path.normpath(target) == os.path.normpath(current)
    base = os.path.basename(current.rstrip("/"))
    return target in (base, base.removeprefix("data-"))


def default_name_prefix(cluster: str, targets: Sequence[PartitionAssignment]) -> str:
    """Deterministic: the same input gives the same names (so kubectl apply is idempotent)."""
    canon = json.dumps(
        [[t.topic, t.partition, list(t.replicas), list(t.log_dirs or [])] for t in targets],
        sort_keys=True,
    )
    digest = hashlib.sha1(canon.encode()).hexdigest()[:8]
    return f"{cluster[:200]}-reassign-{digest}"


def check_name_prefix(prefix: str) -> None:
    if not _RESOURCE_NAME.match(prefix) or len(prefix) > 230:
        raise CliError(
            f"--name {prefix!r}: must be lower-case letters, digits, '-' or '.', start and end "
            "with a letter or digit, at most 230 characters"
        )


@dataclass
class ManifestResult:
    manifests: list[dict[str, Any]]
    notes: list[str]


def _validation_message(
    kind: str, name: str, err: ValidationError, sources: Mapping[int, str], list_field: str
) -> str:
    lines = []
    for e in err.errors()[:_MAX_ERRORS_SHOWN]:
        loc = list(e["loc"])
        origin = ""
        if len(loc) >= 2 and loc[0] == list_field and isinstance(loc[1], int):
            origin = sources.get(loc[1], "") + ": "
            loc = loc[2:]
        field = ".".join(str(x) for x in loc) or "spec"
        lines.append(f"{origin}{field}: {e['msg']}")
    return f"{kind} {name} would be refused:\n  " + "\n  ".join(lines)


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

    Each manifest is validated with the resource's pydantic model before it is returned."""
    errors: list[str] = []
    notes: list[str] = []
    moves: list[dict[str, Any]] = []
    move_src: list[str] = []
    parts: list[dict[str, Any]] = []
    part_src: list[str] = []
    for t in targets:
        cur = current.get(t.key)
        if cur is None:
            errors.append(f"{t.where}: {t.topic}-{t.partition} is not in {current_source}")
            continue
        if broker_count is not None:
            bad = [b for b in t.replicas if b >= broker_count]
            if bad:
                errors.append(
                    f"{t.where}: broker {bad[0]} does not exist in cluster {cluster} "
                    f"(brokers 0-{broker_count - 1})"
                )
                continue
        dirs = t.log_dirs or tuple(ANY for _ in t.replicas)
        if t.replicas == cur.replicas:
            wanted = 0
            for b, d, here in zip(t.replicas, dirs, cur.log_dirs, strict=True):
                if d == ANY:
                    continue
                wanted += 1
                if same_dir(d, here):
                    notes.append(f"{t.topic}-{t.partition} on broker {b} is already in {d}")
                    continue
                moves.append(
                    {"brokerId": b, "topic": t.topic, "partition": t.partition, "logDir": d}
                )
                move_src.append(t.where)
            if not wanted:
                notes.append(f"{t.topic}-{t.partition}: unchanged (same replicas, no log_dirs)")
            continue
        entry: dict[str, Any] = {
            "topic": t.topic,
            "partition": t.partition,
            "replicas": list(t.replicas),
        }
        if any(d != ANY for d in dirs):
            entry["logDirs"] = list(dirs)
        if set(t.replicas) == set(cur.replicas):
            notes.append(
                f"{t.topic}-{t.partition}: same brokers in a new order (preferred leader "
                f"{t.replicas[0]}): a PartitionReassignment"
            )
        parts.append(entry)
        part_src.append(t.where)
    if errors:
        shown = errors[:_MAX_ERRORS_SHOWN]
        more = len(errors) - len(shown)
        raise CliError(
            f"{len(errors)} partition{'s' if len(errors) > 1 else ''} cannot be planned:\n  "
            + "\n  ".join(shown)
            + (f"\n  ... and {more} more" if more else "")
        )
    prefix = name_prefix or default_name_prefix(cluster, targets)
    check_name_prefix(prefix)
    manifests: list[dict[str, Any]] = []

    def meta(name: str) -> dict[str, Any]:
        m: dict[str, Any] = {"name": name}
        if namespace:
            m["namespace"] = namespace
        m["labels"] = {"jbod.io/cluster": cluster[:63]}
        return m

    def chunk_name(kind: str, i: int, n: int) -> str:
        return f"{prefix}-{kind}" if n == 1 else f"{prefix}-{kind}-{i}"

    n_pr = -(-len(parts) // MAX_PARTITIONS_PER_REASSIGNMENT)
    for i in range(n_pr):
        lo = i * MAX_PARTITIONS_PER_REASSIGNMENT
        chunk = parts[lo : lo + MAX_PARTITIONS_PER_REASSIGNMENT]
        spec: dict[str, Any] = {"clusterName": cluster, "partitions": chunk}
        if throttle is not None:
            spec["throttleBytesPerSecond"] = throttle
        name = chunk_name("brokers", i, n_pr)
        try:
            PartitionReassignmentSpec.model_validate(spec)
        except ValidationError as e:
            src = dict(enumerate(part_src[lo : lo + len(chunk)]))
            raise CliError(
                _validation_message("PartitionReassignment", name, e, src, "partitions")
            ) from None
        manifests.append(
            {
                "apiVersion": API_VERSION,
                "kind": "PartitionReassignment",
                "metadata": meta(name),
                "spec": spec,
            }
        )
    n_ldm = -(-len(moves) // MAX_MOVES_PER_LOGDIRMOVE)
    for i in range(n_ldm):
        lo = i * MAX_MOVES_PER_LOGDIRMOVE
        chunk = moves[lo : lo + MAX_MOVES_PER_LOGDIRMOVE]
        spec = {"clusterName": cluster, "moves": chunk}
        if throttle is not None:
            spec["throttleBytesPerSecond"] = throttle
        name = chunk_name("dirs", i, n_ldm)
        try:
            LogDirMoveSpec.model_validate(spec)
        except ValidationError as e:
            src = dict(enumerate(move_src[lo : lo + len(chunk)]))
            raise CliError(_validation_message("LogDirMove", name, e, src, "moves")) from None
        manifests.append(
            {"apiVersion": API_VERSION, "kind": "LogDirMove", "metadata": meta(name), "spec": spec}
        )
    return ManifestResult(manifests, notes)


def manifests_yaml(manifests: Sequence[Mapping[str, Any]]) -> str:
    return yaml.safe_dump_all(manifests, sort_keys=False, default_flow_style=False)


def read_text(path: str, what: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read {what} {path}: {e.strerror or e}") from None


# ---------------------------------------------------------------------------------------------
# logdirmove wait / apply: progress from the status
# ---------------------------------------------------------------------------------------------


def human_bytes(n: float) -> str:
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")


def human_duration(s: float) -> str:
    s = max(0, round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_progress(status: Mapping[str, Any] | None, width: int = 20) -> str:
    """One line: ``[########------------]  42%  12.3 MiB/s  ETA 9s  Moving  2/6 replicas``."""
    st = status or {}
    phase = str(st.get("phase") or "Pending")
    pct = max(0, min(100, int(st.get("progressPercent") or 0)))
    filled = pct * width // 100
    bar = "#" * filled + "-" * (width - filled)
    rate = st.get("rateBytesPerSecond")
    rate_s = f"{human_bytes(rate or 0)}/s"
    eta = st.get("etaSeconds")
    if eta is None or phase in FINAL_PHASES:
        eta_s = "-"
    else:
        eta_s = human_duration(eta) if eta >= 1 else "<1s"
    parts = [f"[{bar}] {pct:3d}%", rate_s, f"ETA {eta_s}", phase]
    replicas = st.get("replicas") or []
    if replicas:
        done = sum(1 for r in replicas if r.get("state") == "Succeeded")
        parts.append(f"{done}/{len(replicas)} replicas")
    total = st.get("bytesTotal")
    if total:
        parts.append(f"{human_bytes(int(st.get('bytesCopied') or 0))} of {human_bytes(total)}")
    return "  ".join(parts)


def final_message(status: Mapping[str, Any]) -> str:
    phase = status.get("phase")
    for c in status.get("conditions") or []:
        if c.get("type") == phase and c.get("message"):
            return str(c["message"])
    for c in status.get("conditions") or []:
        if c.get("type") == "Progressing" and c.get("message"):
            return str(c["message"])
    return ""


def move_summary(
    name: str, namespace: str | None, status: Mapping[str, Any], elapsed: float
) -> dict[str, Any]:
    states: dict[str, int] = {}
    for r in status.get("replicas") or []:
        s = str(r.get("state"))
        states[s] = states.get(s, 0) + 1
    return {
        "name": name,
        "namespace": namespace,
        "phase": status.get("phase"),
        "message": final_message(status),
        "progressPercent": status.get("progressPercent"),
        "bytesCopied": status.get("bytesCopied"),
        "bytesTotal": status.get("bytesTotal"),
        "replicas": states,
        "elapsedSeconds": round(elapsed, 1),
    }


class ProgressView:
    """A bar redrawn in place on a terminal; plain lines (on change, or every 10 s) otherwise."""

    def __init__(self, out: TextIO, name: str, tty: bool | None = None) -> None:
        self.out = out
        self.name = name
        self.tty = out.isatty() if tty is None else tty
        self._last_key: tuple[Any, ...] | None = None
        self._last_time = 0.0
        self._drawn = False

    def update(self, status: Mapping[str, Any] | None, now: float) -> None:
        line = format_progress(status)
        if self.tty:
            self.out.write(f"\r{self.name}: {line}\x1b[K")
            self._drawn = True
        else:
            st = status or {}
            key = (st.get("phase"), st.get("progressPercent"))
            if key == self._last_key and now - self._last_time < 10:
                return
            self._last_key, self._last_time = key, now
            self.out.write(f"{self.name}: {line}\n")
        self.out.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.out.write("\n")
            self.out.flush()
            self._drawn = False


def wait_for_move(
    kubectl: Kubectl,
    name: str,
    *,
    timeout_s: float,
    out: TextIO,
    poll_s: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tty: bool | None = None,
) -> tuple[int, dict[str, Any]]:
    """Poll the LogDirMove until it is final or ``timeout_s`` passed: (exit code, summary)."""
    start = clock()
    view = ProgressView(out, name, tty)
    status: dict[str, Any] = {}
    last_error = ""
    try:
        while True:
            try:
                obj = kubectl.get_json("logdirmoves.jbod.io", name)
                status = dict(obj.get("status") or {})
                last_error = ""
            except KubectlError as e:
                if e.not_found:
                    raise CliError(
                        f"LogDirMove {name} not found"
                        + (f" in namespace {kubectl.namespace}" if kubectl.namespace else "")
                    ) from None
                last_error = str(e)  # the API server may be busy: keep polling
            now = clock()
            view.update(status, now)
            phase = status.get("phase")
            if phase in FINAL_PHASES:
                view.close()
                summary = move_summary(name, kubectl.namespace, status, now - start)
                msg = summary["message"]
                print(f"LogDirMove {name}: {phase}{': ' + msg if msg else ''}", file=out)
                return (0 if phase == "Succeeded" else 1), summary
            if now - start >= timeout_s:
                view.close()
                summary = move_summary(name, kubectl.namespace, status, now - start)
                summary["phase"] = summary["phase"] or "Pending"
                detail = f"; last error: {last_error}" if last_error else ""
                print(
                    f"LogDirMove {name}: timed out after {timeout_s:g} s in phase "
                    f"{summary['phase']} at {status.get('progressPercent') or 0}%{detail}",
                    file=out,
                )
                summary["timedOut"] = True
                return 1, summary
            sleep(poll_s)
    finally:
        view.close()


def apply_file(kubectl: Kubectl, path: str) -> list[dict[str, str]]:
    """kubectl apply; returns kind/name/namespace of every object applied."""
    text = read_text(path, "manifest file")
    out = kubectl.run("apply", "-f", "-", "-o", "json", input=text)
    try:
        data = json.loads(out)
    except ValueError:
        raise CliError(f"kubectl apply: unexpected output: {out[:200]!r}") from None
    items = data.get("items", []) if data.get("kind") == "List" else [data]
    return [
        {
            "kind": str(o.get("kind")),
            "name": str(o["metadata"]["name"]),
            "namespace": str(o["metadata"].get("namespace") or ""),
        }
        for o in items
    ]


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _kube_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: the kubeconfig's)")
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    p.add_argument(
        "--kubectl", metavar="PATH", help="kubectl binary (default: $KUBECTL, PATH, .venv/bin)"
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Daily operations on JBOD broker clusters: log dirs, reassignments, moves.",
    )
    sub = ap.add_subparsers(dest="group", required=True, metavar="COMMAND")

    ld = sub.add_parser("log-dirs", help="describe the brokers' log dirs (KIP-113)")
    ld_sub = ld.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = ld_sub.add_parser(
        "describe",
        help="print kafka-log-dirs JSON",
        description="Print KIP-113's kafka-log-dirs JSON: per broker, per log dir, the replicas "
        "in it with size and offset lag (is_temporary: the future replica of a move).",
    )
    src = d.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--cluster", metavar="NAME", help="BrokerCluster name: broker URLs and token via kubectl"
    )
    src.add_argument(
        "--bootstrap-url",
        metavar="URL[,URL...]",
        type=lambda s: [u.strip() for u in s.split(",") if u.strip()],
        help="broker URL(s), comma-separated, e.g. http://127.0.0.1:9092",
    )
    d.add_argument(
        "--token-file",
        metavar="FILE",
        help="file holding the brokers' bearer token (--bootstrap-url)",
    )
    d.add_argument(
        "--broker-list", metavar="0,1", type=parse_id_list, help="only these broker ids, e.g. 0,1"
    )
    d.add_argument(
        "--topic-list", metavar="T1,T2", type=parse_name_list, help="only these topics, e.g. t1,t2"
    )
    d.add_argument(
        "--timeout", metavar="S", type=positive_float, default=30.0, help="seconds per broker"
    )
    _kube_options(d)

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
    _kube_options(tm)

    lm = sub.add_parser("logdirmove", help="apply LogDirMoves and follow their progress")
    lm_sub = lm.add_subparsers(dest="action", required=True, metavar="ACTION")
    w = lm_sub.add_parser("wait", help="wait until a LogDirMove is final, showing progress")
    w.add_argument("name", metavar="NAME")
    w.add_argument(
        "--timeout", metavar="S", type=positive_float, default=3600.0, help="seconds (3600)"
    )
    _kube_options(w)
    a = lm_sub.add_parser("apply", help="kubectl apply a manifest file, optionally wait")
    a.add_argument("file", metavar="FILE", help="manifest file ('-' for stdin)")
    a.add_argument("--wait", action="store_true", help="wait for every LogDirMove in FILE")
    a.add_argument(
        "--timeout", metavar="S", type=positive_float, default=3600.0, help="seconds (3600)"
    )
    _kube_options(a)
    return ap


def _kubectl(ns: argparse.Namespace) -> Kubectl:
    return Kubectl(find_kubectl(ns.kubectl), ns.kubeconfig, ns.namespace)


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
    sys.stdout.flush()


def cmd_describe(ns: argparse.Namespace) -> int:
    if ns.bootstrap_url is not None:
        if not ns.bootstrap_url:
            raise CliError("--bootstrap-url: no URL given")
        doc = log_dirs_describe(
            bootstrap_urls=ns.bootstrap_url,
            token=read_token_file(ns.token_file),
            brokers=ns.broker_list,
            topics=ns.topic_list,
            timeout_s=ns.timeout,
        )
    else:
        if ns.token_file:
            raise CliError("--token-file goes with --bootstrap-url (--cluster reads the Secret)")
        doc = log_dirs_describe(
            cluster=ns.cluster,
            kubectl=_kubectl(ns),
            brokers=ns.broker_list,
            topics=ns.topic_list,
            timeout_s=ns.timeout,
        )
    _print_json(doc)
    return 0


def cmd_to_manifests(ns: argparse.Namespace) -> int:
    if ns.file == "-" and ns.current == "-":
        raise CliError("FILE and --current cannot both be read from stdin")
    label = "stdin" if ns.file == "-" else ns.file
    targets = parse_reassignment(read_text(ns.file, "reassignment file"), label)
    broker_count: int | None = None
    if ns.current is not None:
        clabel = "stdin" if ns.current == "-" else ns.current
        cur_parts = parse_reassignment(
            read_text(ns.current, "current assignment"), clabel, allow_empty=True
        )
        current = current_from_assignments(cur_parts)
        source = f"--current {clabel}"
    else:
        kubectl = _kubectl(ns)
        topics = kubectl.get_json("topics.jbod.io").get("items") or []
        current = current_from_topics(topics, ns.cluster)
        try:
            bc = kubectl.get_json("brokerclusters.jbod.io", ns.cluster)
            broker_count = int(bc["spec"]["replicas"])
        except KubectlError as e:
            if not e.not_found:
                raise
            where = f" in namespace {ns.namespace}" if ns.namespace else ""
            raise CliError(f"BrokerCluster {ns.cluster} not found{where}") from None
        source = f"the Topic statuses of cluster {ns.cluster}"
    res = build_manifests(
        targets,
        current,
        cluster=ns.cluster,
        name_prefix=ns.name,
        namespace=ns.namespace,
        throttle=ns.throttle,
        broker_count=broker_count,
        current_source=source,
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


def cmd_wait(ns: argparse.Namespace) -> int:
    code, summary = wait_for_move(_kubectl(ns), ns.name, timeout_s=ns.timeout, out=sys.stderr)
    _print_json(summary)
    return code


def cmd_apply(ns: argparse.Namespace) -> int:
    kubectl = _kubectl(ns)
    applied = apply_file(kubectl, ns.file)
    for o in applied:
        print(f"applied {o['kind']} {o['name']}", file=sys.stderr)
    result: dict[str, Any] = {"applied": applied}
    code = 0
    if ns.wait:
        moves = [o for o in applied if o["kind"] == "LogDirMove"]
        if not moves:
            raise CliError(f"--wait: {ns.file} holds no LogDirMove")
        deadline = time.monotonic() + ns.timeout
        result["moves"] = []
        for o in moves:
            k = Kubectl(kubectl.binary, kubectl.kubeconfig, o["namespace"] or kubectl.namespace)
            left = max(0.001, deadline - time.monotonic())
            c, summary = wait_for_move(k, o["name"], timeout_s=left, out=sys.stderr)
            result["moves"].append(summary)
            code = max(code, c)
    _print_json(result)
    return code


COMMANDS: dict[tuple[str, str], Callable[[argparse.Namespace], int]] = {
    ("log-dirs", "describe"): cmd_describe,
    ("reassignment", "to-manifests"): cmd_to_manifests,
    ("logdirmove", "wait"): cmd_wait,
    ("logdirmove", "apply"): cmd_apply,
}


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        return COMMANDS[(ns.group, ns.action)](ns)
    except CliError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
