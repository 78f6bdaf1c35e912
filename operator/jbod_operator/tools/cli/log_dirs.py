"""``jbod-ctl log-dirs describe``: the brokers' describe-log-dirs answers as KIP-113's
``kafka-log-dirs`` JSON, so scripts written for Kafka's tool read ours unchanged.

Brokers are found from a BrokerCluster's status and token Secret (``--cluster``, through
kubectl) or named directly (``--bootstrap-url``, with ``--token-file``); every broker is asked
at once and any broker's failure fails the command, naming that broker.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError

from .common import CliError, positive_float, print_json
from .kubectl import Kubectl, KubectlError, add_kube_options, kubectl_from_args
from .reassignments_view import partition_records

Placements = Mapping[tuple[int, str, int], str | None]
"""(broker, topic, partition) → the dir the partition state of record names (None: any)."""


def record_placements(
    topics: Iterable[Mapping[str, Any]], cluster: str
) -> dict[tuple[int, str, int], str | None]:
    """Where the cluster's partition state of record (its Topics' PartitionShards, joined)
    places each replica."""
    out: dict[tuple[int, str, int], str | None] = {}
    for (topic, partition), v in partition_records(topics, cluster).get(cluster, {}).items():
        for b, d in zip(v.replicas, v.dirs, strict=True):
            out[(b, topic, partition)] = d
    return out


def _recorded(placements: Placements, broker: int, topic: str, partition: int, path: str) -> bool:
    key = (broker, topic, partition)
    return key in placements and placements[key] in (None, path)


def describe_to_kip(
    responses: Iterable[wire.DescribeLogDirsResponse],
    *,
    brokers: Iterable[int] | None = None,
    topics: Iterable[str] | None = None,
    placements: Placements | None = None,
) -> dict[str, Any]:
    """KIP-113's ``kafka-log-dirs`` JSON from the brokers' describe-log-dirs answers.

    ``{"version": 1, "brokers": [{"broker": id, "log dirs": [{"is_live", "path",
    "partitions": [{"topic", "partition", "size", "offset_lag", "is_temporary"}],
    "total_bytes", "usable_bytes", "reserved_bytes", "headroom_bytes"}]}]}`` (the four byte
    counts are ours: the room a move into the dir is checked against),
    brokers by id, log dirs in the broker's order, partitions by topic and partition (a future
    replica after the current one). With ``placements`` (``--cluster``), each partition also
    says whether the state of record puts it there (``in_record``; false: a stray, or the
    source or destination of a move not recorded yet)."""
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
                    **(
                        {
                            "in_record": _recorded(
                                placements, r.broker_id, p.topic, p.partition, d.path
                            )
                        }
                        if placements is not None
                        else {}
                    ),
                }
                for p in sorted(d.partitions, key=lambda p: (p.topic, p.partition, p.is_future))
                if want_t is None or p.topic in want_t
            ]
            dirs.append(
                {
                    "is_live": d.is_live,
                    "path": d.path,
                    "partitions": parts,
                    # Beyond KIP-113 (extra keys leave Kafka's readers unchanged): the space
                    # a move is checked against (issue 13).
                    "total_bytes": d.total_bytes,
                    "usable_bytes": d.usable_bytes,
                    "reserved_bytes": d.reserved_bytes,
                    "headroom_bytes": d.headroom_bytes,
                }
            )
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
    """describe-log-dirs from every URL at once; any failure is a CliError naming the broker
    (every failing broker, not just the first, so one run shows the whole picture)."""
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
    """``t1,t2`` → ["t1", "t2"] (for argparse: an empty list is a usage error)."""
    out = [p.strip() for p in text.split(",") if p.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected a comma-separated list of topic names")
    return out


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
    """The bearer token in ``path`` (none without a path, or when the file is blank)."""
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
    """The whole ``log-dirs describe`` command as a function of its options, apart from
    argparse, so that both ways of finding brokers share one filtering and one report."""
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
        placements = record_placements(kubectl.topics(), cluster)
    else:
        placements = None
        responses = describe_urls(bootstrap_urls, token, topics=topic_list, timeout_s=timeout_s)
        if brokers is not None:
            seen = {r.broker_id for r in responses}
            missing = [b for b in brokers if b not in seen]
            if missing:
                raise CliError(
                    f"broker(s) {', '.join(map(str, missing))} not among the bootstrap URLs' "
                    f"brokers ({', '.join(map(str, sorted(seen)))})"
                )
    return describe_to_kip(responses, brokers=brokers, topics=topic_list, placements=placements)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``log-dirs describe`` and its options."""
    ld = sub.add_parser("log-dirs", help="describe the brokers' log dirs (KIP-113)")
    ld_sub = ld.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = ld_sub.add_parser(
        "describe",
        help="print kafka-log-dirs JSON",
        description="Print KIP-113's kafka-log-dirs JSON: per broker, per log dir, the replicas "
        "in it with size and offset lag (is_temporary: the future replica of a move), and each "
        "dir's total, usable, reserved (by moves in flight) and headroom bytes; with --cluster, "
        "whether the partition state of record puts each replica there (in_record).",
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
    add_kube_options(d)


def cmd_describe(ns: argparse.Namespace) -> int:
    """``log-dirs describe``: the KIP-113 JSON on stdout."""
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
            kubectl=kubectl_from_args(ns),
            brokers=ns.broker_list,
            topics=ns.topic_list,
            timeout_s=ns.timeout,
        )
    print_json(doc)
    return 0
