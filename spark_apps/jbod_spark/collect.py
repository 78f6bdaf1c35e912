"""Snapshot collector: ``python -m jbod_spark.collect --cluster NAME [-n NS] --out snap.json``.

Reads the BrokerCluster (brokers, racks, URLs, log dir names) and the cluster's Topics
(replica lists with brokerId and logDir, leaders) with ``kubectl ... -o json``, asks every live
broker for describe-log-dirs, and writes a
:class:`~jbod_operator.models.snapshot.ClusterSnapshot`. The pure part, and the rules it
follows, is :func:`jbod_operator.plan.snapshot.build_snapshot` (the operator's Rebalance uses
the same one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jbod_broker.wire import DescribeLogDirsResponse
from jbod_operator.plan.snapshot import build_snapshot


def kubectl_json(kubectl: str, *args: str) -> dict[str, Any]:
    out = subprocess.run([kubectl, *args, "-o", "json"], check=True, capture_output=True, text=True)
    data = json.loads(out.stdout)
    assert isinstance(data, dict)
    return data


async def describe_all(
    urls: dict[int, str], token: str | None, timeout_s: float
) -> dict[int, DescribeLogDirsResponse]:
    from jbod_broker.client import BrokerClient

    async def one(b: int, url: str) -> tuple[int, DescribeLogDirsResponse | None]:
        try:
            async with BrokerClient(url, token=token, timeout_s=timeout_s) as c:
                return b, await c.describe_log_dirs()
        except Exception as e:  # an unreachable broker is a dead broker in the snapshot
            print(f"broker {b} ({url}): {type(e).__name__}: {e}", file=sys.stderr)
            return b, None

    got = await asyncio.gather(*(one(b, u) for b, u in sorted(urls.items())))
    return {b: d for b, d in got if d is not None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jbod_spark.collect", description=__doc__)
    ap.add_argument("--cluster", required=True, help="BrokerCluster name")
    ap.add_argument("-n", "--namespace", default="default")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--token-file", default=os.environ.get("JBOD_BROKER_TOKEN_FILE", ""))
    ap.add_argument("--timeout", type=float, default=30.0)
    ns = ap.parse_args(argv)
    bc = kubectl_json(ns.kubectl, "get", "brokerclusters.jbod.io", ns.cluster, "-n", ns.namespace)
    topics = kubectl_json(ns.kubectl, "get", "topics.jbod.io", "-n", ns.namespace)["items"]
    urls = {
        int(b["id"]): str(b["url"])
        for b in (bc.get("status") or {}).get("brokers", [])
        if b.get("url")
    }
    token = Path(ns.token_file).read_text().strip() if ns.token_file else None
    describes = asyncio.run(describe_all(urls, token, ns.timeout))
    snap = build_snapshot(
        ns.cluster,
        bc,
        topics,
        describes,
        namespace=ns.namespace,
        captured_at=datetime.now(UTC).isoformat(),
    )
    Path(ns.out).write_text(snap.dump_json() + "\n")
    print(
        f"{ns.cluster}: {len(snap.brokers)} brokers ({len(describes)} answered), "
        f"{len(snap.log_dirs)} log dirs, {len(snap.replicas)} replicas -> {ns.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
