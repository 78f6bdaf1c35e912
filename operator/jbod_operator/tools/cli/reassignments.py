"""``jbod-ctl reassignments list|describe|verify|apply|wait``: PartitionReassignments seen as
Kafka's tools show reassignments (KIP-455's list, KIP-240's describe, ``--verify``), and
applied and followed with a progress bar.

The reading and formatting is :mod:`.reassignments_view` (pure); this module fetches what it
needs — Topics and PartitionReassignments through kubectl, log dirs, log end offsets and
throttles from the brokers — and maps outcomes to exit codes.

Exit codes of ``apply --wait`` and ``wait`` (:data:`EXIT_CODES`): 0 Succeeded, 1 Failed,
3 Cancelled, 4 RolledBack, 5 timed out (2 stays argparse's usage error). ``verify``: 0 when
every partition is at its target in its named dir, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError

from ...models.reassignment import ENDED_PHASES, ReassignmentPhase
from . import logdirmove
from .common import CliError, non_negative_int, positive_float, print_json, read_text
from .follow import POLL_SECONDS, Watched, final_message, follow
from .kubectl import Kubectl, KubectlError, add_kube_options, kubectl_from_args
from .log_dirs import cluster_endpoints
from .progress import format_reassignment_progress
from .reassignment import is_kafka_json, manifests_from_kafka_json, manifests_yaml
from .reassignments_view import (
    TP,
    BrokerView,
    active_batches,
    describe_document,
    format_describe,
    format_list,
    format_verify,
    list_document,
    partition_records,
    verify_document,
)

RESOURCE = "partitionreassignments.jbod.io"

EXIT_CODES: Mapping[str, int] = {
    ReassignmentPhase.SUCCEEDED: 0,
    ReassignmentPhase.FAILED: 1,
    ReassignmentPhase.CANCELLED: 3,
    ReassignmentPhase.ROLLED_BACK: 4,
}
"""The exit code of each way a PartitionReassignment ends, so a script tells them apart."""

TIMEOUT_EXIT = 5


def reassignment_summary(
    name: str, namespace: str | None, status: Mapping[str, Any], elapsed: float
) -> dict[str, Any]:
    """The JSON a script reads after waiting: phase, message, partitions per state, bytes."""
    return {
        "name": name,
        "namespace": namespace,
        "phase": status.get("phase"),
        "message": final_message(status),
        "progressPercent": status.get("progressPercent"),
        "batch": status.get("batch"),
        "counts": dict(status.get("counts") or {}),
        "bytesMoved": status.get("bytesMoved"),
        "bytesToMove": status.get("bytesToMove"),
        "elapsedSeconds": round(elapsed, 1),
    }


PARTITION_REASSIGNMENT = Watched(
    kind="PartitionReassignment",
    resource=RESOURCE,
    final_phases=frozenset(ENDED_PHASES),
    exit_codes=EXIT_CODES,
    timeout_exit=TIMEOUT_EXIT,
    first_phase=ReassignmentPhase.PENDING,
    formatter=format_reassignment_progress,
    summary=reassignment_summary,
)


def wait_for_reassignment(
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
    """Follow the PartitionReassignment until it ends (Succeeded, Failed, Cancelled,
    RolledBack) or ``timeout_s`` passed: (exit code, summary)."""
    return follow(
        kubectl,
        name,
        PARTITION_REASSIGNMENT,
        timeout_s=timeout_s,
        out=out,
        poll_s=poll_s,
        clock=clock,
        sleep=sleep,
        tty=tty,
    )


# -- reads ---------------------------------------------------------------------------------


def get_reassignment(kubectl: Kubectl, name: str) -> dict[str, Any]:
    try:
        return kubectl.get_json(RESOURCE, name)
    except KubectlError as e:
        if not e.not_found:
            raise
        where = f" in namespace {kubectl.namespace}" if kubectl.namespace else ""
        raise CliError(f"PartitionReassignment {name} not found{where}") from None


def cluster_partitions(kubectl: Kubectl, cluster: str) -> dict[TP, Any]:
    """The cluster's partition state of record (its Topics' statuses)."""
    topics = kubectl.topics()
    return partition_records(topics, cluster).get(cluster, {})


async def _probe_one(
    url: str, token: str | None, topics: list[str], timeout_s: float
) -> tuple[wire.DescribeLogDirsResponse, wire.ThrottleConfig]:
    async with BrokerClient(url, token=token, timeout_s=timeout_s) as c:
        dirs = await c.describe_log_dirs(topics=topics)
        return dirs, await c.get_configs()


async def _probe_all(
    urls: Mapping[int, str], token: str | None, topics: list[str], timeout_s: float
) -> dict[int, BrokerView]:
    ids = sorted(urls)
    results = await asyncio.gather(
        *(_probe_one(urls[b], token, topics, timeout_s) for b in ids), return_exceptions=True
    )
    out: dict[int, BrokerView] = {}
    for b, res in zip(ids, results, strict=True):
        if isinstance(res, KafkaError):
            out[b] = BrokerView(b, error=f"{urls[b]}: {type(res).__name__}: {res}")
        elif isinstance(res, BaseException):
            if not isinstance(res, Exception):
                raise res
            out[b] = BrokerView(b, error=f"{urls[b]}: {type(res).__name__}: {res}")
        else:
            out[b] = BrokerView.from_wire(*res)
    return out


def probe_brokers(
    kubectl: Kubectl, cluster: str, topics: Sequence[str], brokers: Sequence[int], timeout_s: float
) -> dict[int, BrokerView]:
    """Every broker of ``cluster`` (and every broker id in ``brokers``) asked at once for its
    log dirs (``topics`` only) and throttles. A broker that does not answer, or has no URL in
    the BrokerCluster status (it is down), is a view with its error, not a failed command: the
    others still say what they know."""
    urls, token = cluster_endpoints(kubectl, cluster)
    views = asyncio.run(_probe_all(urls, token, sorted(set(topics)), timeout_s))
    for b in brokers:
        if b not in views:
            views[b] = BrokerView(b, error="no URL in the BrokerCluster status (is it up?)")
    return views


def _spec_of(pr: Mapping[str, Any]) -> tuple[str, list[str], list[int]]:
    spec = pr.get("spec") or {}
    parts = spec.get("partitions") or []
    topics = sorted({str(p["topic"]) for p in parts})
    brokers = sorted({int(b) for p in parts for b in p.get("replicas") or []})
    return str(spec.get("clusterName")), topics, brokers


# -- commands ------------------------------------------------------------------------------


def cmd_list(ns: argparse.Namespace) -> int:
    """``reassignments list``: Kafka's --list from the Topics' statuses, then each running
    PartitionReassignment's current batch."""
    kubectl = kubectl_from_args(ns)
    topics = kubectl.topics()
    prs = kubectl.get_json(RESOURCE).get("items") or []
    doc = list_document(partition_records(topics, ns.cluster), active_batches(prs, ns.cluster))
    if ns.json:
        print_json(doc)
    else:
        print(format_list(doc))
    return 0


def cmd_describe(ns: argparse.Namespace) -> int:
    """``reassignments describe NAME``: KIP-240's description per partition, with the log end
    offsets and lags the brokers report."""
    kubectl = kubectl_from_args(ns)
    pr = get_reassignment(kubectl, ns.name)
    cluster, topics, brokers = _spec_of(pr)
    parts = cluster_partitions(kubectl, cluster)
    views = probe_brokers(kubectl, cluster, topics, brokers, ns.timeout)
    doc = describe_document(pr, parts, views, all_partitions=ns.all)
    if ns.json:
        print_json(doc)
    else:
        print(format_describe(doc))
    return 0


def cmd_verify(ns: argparse.Namespace) -> int:
    """``reassignments verify NAME``: exit 0 only when every partition is at its target
    replicas (in order) and every replica with a named dir is in it."""
    kubectl = kubectl_from_args(ns)
    pr = get_reassignment(kubectl, ns.name)
    cluster, topics, brokers = _spec_of(pr)
    parts = cluster_partitions(kubectl, cluster)
    views = probe_brokers(kubectl, cluster, topics, brokers, ns.timeout)
    doc = verify_document(pr, parts, views)
    if ns.json:
        print_json(doc)
    else:
        print(format_verify(doc))
    return 0 if doc["complete"] else 1


def cmd_wait(ns: argparse.Namespace) -> int:
    """``reassignments wait NAME``: the bar on stderr, the summary on stdout."""
    code, summary = wait_for_reassignment(
        kubectl_from_args(ns), ns.name, timeout_s=ns.timeout, out=sys.stderr
    )
    print_json(summary)
    return code


def cmd_apply(ns: argparse.Namespace) -> int:
    """``reassignments apply FILE [--wait]``: kubectl apply of PartitionReassignment manifests
    (YAML or JSON), or of a kafka-reassign-partitions JSON file turned into manifests the way
    ``reassignment to-manifests`` does (``--cluster`` needed). With --wait, every
    PartitionReassignment and LogDirMove applied is followed in turn under one deadline; the
    exit code is the first that did not succeed (0 when all did). Applied server-side, so a
    resource at the schema's largest is accepted (see :func:`.logdirmove.apply_text`)."""
    kubectl = kubectl_from_args(ns)
    label = "stdin" if ns.file == "-" else ns.file
    text = read_text(ns.file, "manifest file")
    if is_kafka_json(text):
        if not ns.cluster:
            raise CliError(
                f"{label} is a kafka-reassign-partitions file: --cluster names the cluster "
                "it is for"
            )
        res = manifests_from_kafka_json(
            text,
            label,
            cluster=ns.cluster,
            kubectl=kubectl,
            name_prefix=ns.name,
            namespace=ns.namespace,
            throttle=ns.throttle,
        )
        for n in res.notes:
            print(f"note: {n}", file=sys.stderr)
        if not res.manifests:
            print("note: nothing to do: every partition is already as asked", file=sys.stderr)
            print_json({"applied": []})
            return 0
        text = manifests_yaml(res.manifests)
    elif ns.name or ns.throttle is not None:
        raise CliError("--name and --throttle apply to a kafka-reassign-partitions file only")
    applied = logdirmove.apply_text(kubectl, text, server_side=True)
    for o in applied:
        print(f"applied {o['kind']} {o['name']}", file=sys.stderr)
    result: dict[str, Any] = {"applied": applied}
    code = 0
    if ns.wait:
        followed = [o for o in applied if o["kind"] in ("PartitionReassignment", "LogDirMove")]
        if not followed:
            raise CliError(f"--wait: {label} holds no PartitionReassignment or LogDirMove")
        deadline = time.monotonic() + ns.timeout
        result["reassignments"], result["moves"] = [], []
        for o in followed:
            k = Kubectl(kubectl.binary, kubectl.kubeconfig, o["namespace"] or kubectl.namespace)
            left = max(0.001, deadline - time.monotonic())
            if o["kind"] == "PartitionReassignment":
                c, summary = wait_for_reassignment(k, o["name"], timeout_s=left, out=sys.stderr)
                result["reassignments"].append(summary)
            else:
                c, summary = logdirmove.wait_for_move(k, o["name"], timeout_s=left, out=sys.stderr)
                result["moves"].append(summary)
            code = code or c
    print_json(result)
    return code


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``reassignments list|describe|verify|apply|wait`` and their options."""
    ra = sub.add_parser(
        "reassignments", help="list, describe, verify, apply and follow PartitionReassignments"
    )
    ra_sub = ra.add_subparsers(dest="action", required=True, metavar="ACTION")

    ls = ra_sub.add_parser(
        "list",
        help="partitions being reassigned (kafka-reassign-partitions --list) and current batches",
        description="Print the partitions in flight as kafka-reassign-partitions --list does "
        "(replicas, adding, removing: KIP-455, from the Topic statuses), then each running "
        "PartitionReassignment's current batch (KIP-435).",
    )
    ls.add_argument("--cluster", metavar="NAME", help="only this BrokerCluster")
    ls.add_argument("--json", action="store_true", help="print JSON")
    add_kube_options(ls)

    de = ra_sub.add_parser(
        "describe",
        help="KIP-240's description per partition, with log end offsets and lags",
        description="Per partition in flight or in trouble: start time, current leader, leader "
        "throttle, new assigned brokers and their throttles (KIP-240), and each target "
        "replica's log end offset, lag behind the leader and log dir, as the brokers report.",
    )
    de.add_argument("name", metavar="NAME")
    de.add_argument("--all", action="store_true", help="every partition of the spec")
    de.add_argument("--json", action="store_true", help="print JSON")
    de.add_argument(
        "--timeout", metavar="S", type=positive_float, default=30.0, help="seconds per broker"
    )
    add_kube_options(de)

    ve = ra_sub.add_parser(
        "verify",
        help="exit 0 only when every partition is at its target, in its named dir",
        description="Kafka's --verify: each partition at its target replicas (in order, no "
        "step in flight) and each replica with a named log dir in that dir (describe-log-dirs); "
        "throttles still set are reported. Exit 0 when all is done, 1 otherwise.",
    )
    ve.add_argument("name", metavar="NAME")
    ve.add_argument("--json", action="store_true", help="print JSON")
    ve.add_argument(
        "--timeout", metavar="S", type=positive_float, default=30.0, help="seconds per broker"
    )
    add_kube_options(ve)

    ap = ra_sub.add_parser(
        "apply",
        help="apply PartitionReassignment manifests or a kafka-reassign-partitions file",
        description="kubectl apply a PartitionReassignment manifest (YAML or JSON), or a "
        "kafka-reassign-partitions JSON file converted as `reassignment to-manifests` does. "
        "--wait follows each one with a progress bar until it ends; exit 0 Succeeded, "
        "1 Failed, 3 Cancelled, 4 RolledBack, 5 timed out.",
    )
    ap.add_argument("file", metavar="FILE", help="manifest or reassignment JSON ('-': stdin)")
    ap.add_argument("--wait", action="store_true", help="follow what was applied until it ends")
    ap.add_argument(
        "--timeout", metavar="S", type=positive_float, default=3600.0, help="seconds (3600)"
    )
    ap.add_argument("--cluster", metavar="NAME", help="BrokerCluster (a Kafka JSON file)")
    ap.add_argument("--name", metavar="PREFIX", help="name prefix (a Kafka JSON file)")
    ap.add_argument(
        "--throttle", type=non_negative_int, metavar="BYTES_PER_S", help="(a Kafka JSON file)"
    )
    add_kube_options(ap)

    wa = ra_sub.add_parser("wait", help="follow a PartitionReassignment until it ends")
    wa.add_argument("name", metavar="NAME")
    wa.add_argument(
        "--timeout", metavar="S", type=positive_float, default=3600.0, help="seconds (3600)"
    )
    add_kube_options(wa)
