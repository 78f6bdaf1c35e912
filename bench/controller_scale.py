"""The controller at Kafka's scale (issue 39): 10k, 50k and 200k partitions on 50 brokers.

Each size runs on a fresh API server (tests.kube_cluster's real kube-apiserver and etcd), two
operator processes (the Lease picks the active one; the other is the standby) reaching it
through a counting reverse proxy (``tests.api_proxy``: every request, every byte, the largest
body written), and 50 simulated brokers in one process (``tests.stub_brokers``: they answer
the controller's requests, record what they were told, heartbeat). RF 3, topics of at most
100,000 partitions: 10k = 1 x 10k, 50k = 1 x 50k, 200k = 2 x 100k. ``--quick``: 2k and 10k.

Figures per size:

``create_s``
    Topic(s) applied (kubectl apply) to Ready True and every stub told all its replicas
    (LeaderAndIsr) — the whole creation, the state of record written first.
``steady_pass``
    The periodic full pass in steady state, between three of its ends (each ends with the
    stray check's describe-log-dirs to every live broker, seen at a stub): its interval (the
    controller runs it every max(5 s, 10 x its own duration), so an interval above 5 s is ten
    times the pass), the operator's CPU seconds per pass (``/proc``), the bytes it sent the
    brokers and the bytes it wrote to / read from the API server per pass.
``broker_failover``
    One stub (the one leading the most partitions, ~1/50) killed (its listener closed, its
    heartbeats stopped); ``elected_s`` is from the kill to the moment the last of its
    partitions has a new leader at the stubs (the highest leader epoch any stub holds names
    another broker; the stubs stamp it). It includes the session timeout (6 s, the operator's
    default; KRaft's broker.session.timeout.ms is 9 s): ``elected_after_session_s`` is the rest,
    the controller's own work. API bytes written for it.
``takeover``
    The standby is started only now (``ScaleEnv.late_standby``: at 100k partitions a standby
    running all along took the Lease from an active operator whose loop was held past it,
    over and over), then SIGKILL of the active operator; ``active_s`` until the standby's
    /readyz says active (the Lease's 15 s, its default, dominates), ``resumed_s`` until its
    controller (a new epoch) has sent every live stub the LeaderAndIsr of all its replicas;
    the standby's VmHWM; API bytes for it.
``operator_vm_hwm_mib``
    The active operator's peak RSS (VmHWM) after the phases; ``largest_object_written`` is the
    largest request body any client wrote through the proxy (the operator's, PartitionShards
    and Topics; the bench's own kubectl applies are small).

Yardstick: Kafka's KRaft controller's published figures (``yardstick``, with their sources as
``anchor``). Targets at 200k: failover <= 10 s, takeover <= 30 s, RSS <= 1 GiB, no object over
1 MiB — printed beside the figures with pass/fail. Progress goes to stderr; one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.kube_cluster import KubeCluster
from tests.scale_env import ScaleEnv
from tests.waiting import WaitTimeout

MiB = 1 << 20
TOPIC_MAX = 100_000
SESSION_S = 6.0
TIMER_S = 300
TARGETS = {"failover_s": 10.0, "takeover_s": 30.0, "rss_mib": 1024.0, "largest_object": MiB}
YARDSTICK: dict[str, Any] = {
    "what": (
        "Confluent's KIP-500 preview: a cluster of 2,000,000 partitions, the ZooKeeper-based "
        "controller against the KRaft quorum controller"
    ),
    "partitions": 2_000_000,
    "controlled_shutdown_s": {"zookeeper": 135, "kraft": 32},
    "recovery_after_uncontrolled_shutdown_s": {"zookeeper": 503, "kraft": 37},
    "per_100k_partitions_kraft_s": {"controlled_shutdown": 1.6, "recovery": 1.85},
    "anchor": [
        "https://www.confluent.io/blog/kafka-without-zookeeper-a-sneak-peek/",
        "https://www.plushcap.com/content/confluent/blog/confluent-kafka-without-zookeeper-a-sneak-peek",
    ],
    "note": (
        "the figures were read from the second anchor's summary of the first (the stored copy "
        "of the Confluent post is cut before its chart); KRaft scales them linearly here only "
        "as a rough per-100k rate. KRaft's broker session timeout (broker.session.timeout.ms) "
        "is 9 s by default; the operator's is 6 s"
    ),
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def topics_for(total: int) -> list[int]:
    """Topic sizes for ``total`` partitions: as few topics as the CRD's 100,000 allows."""
    n = -(-total // TOPIC_MAX)
    return [total // n] * n


def run_size(total: int, brokers: int, work: Path, pass_timeout: float) -> dict[str, Any]:
    kc = KubeCluster()
    kc.start()
    # Timers (Topic and BrokerCluster resyncs) every 5 minutes: they also read every broker's
    # dirs, and the periodic pass is told apart by its describe-log-dirs burst.
    env = ScaleEnv(
        kc,
        work,
        f"scale{total}",
        brokers=brokers,
        late_standby=True,
        operator_env={"JBOD_OPERATOR_RECONCILE_INTERVAL_SECONDS": str(TIMER_S)},
    )
    try:
        env.start()
        log(f"{total}: operators and {brokers} stubs up")
        creates = [env.create_topic(f"t{i}", n) for i, n in enumerate(topics_for(total))]
        create_s = round(sum(c["ready_and_told_s"] for c in creates), 2)
        log(f"{total}: created in {create_s}s")
        p0 = time.monotonic()
        try:
            steady = env.steady_pass(passes=1, timeout=pass_timeout)
        except WaitTimeout:
            # The periodic pass runs every 10 x its own length: past the time box it is not
            # measured, only bounded (what the interval is at least).
            steady = {"not_measured": True, "interval_s_at_least": round(time.monotonic() - p0)}
        log(f"{total}: steady pass {steady}")
        st = env.state()
        victim = max(range(brokers), key=lambda b: st["leaders"].get(str(b), 0))
        fo = env.broker_failover(victim)
        fo["elected_after_session_s"] = round(fo["elected_s"] - SESSION_S, 2)
        log(f"{total}: failover {fo}")
        hwm = env.operator_hwm_mib()
        tk = env.takeover()
        log(f"{total}: takeover {tk}")
        largest = env.proxy.stats()
        return {
            "partitions": total,
            "topics": topics_for(total),
            "create_s": create_s,
            "create": creates,
            "steady_pass": steady,
            "broker_failover": fo,
            "takeover": tk,
            "operator_vm_hwm_mib": hwm,
            "stub_vm_hwm_mib": round(env.state()["vm_hwm_kib"] / 1024, 1),
            "largest_object_written": largest["largest_write"],
            "largest_object_what": largest["largest_write_what"],
            "api_totals": {k: largest[k] for k in ("writes", "bytes_written")},
        }
    finally:
        env.stop()
        kc.stop()


def verdict(r: dict[str, Any]) -> dict[str, Any]:
    fo, tk = r["broker_failover"]["elected_s"], r["takeover"]["resumed_s"]
    return {
        "failover_s": {"value": fo, "target": TARGETS["failover_s"], "ok": fo <= 10},
        "takeover_s": {"value": tk, "target": TARGETS["takeover_s"], "ok": tk <= 30},
        "rss_mib": {
            "value": max(r["operator_vm_hwm_mib"], r["takeover"]["standby_vm_hwm_mib"]),
            "target": TARGETS["rss_mib"],
            "ok": max(r["operator_vm_hwm_mib"], r["takeover"]["standby_vm_hwm_mib"]) <= 1024,
        },
        "largest_object": {
            "value": r["largest_object_written"],
            "target": TARGETS["largest_object"],
            "ok": r["largest_object_written"] <= MiB,
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2k and 10k partitions")
    ap.add_argument("--sizes", default=None, help="comma-separated totals (default 10k,50k,200k)")
    ap.add_argument("--brokers", type=int, default=50)
    ap.add_argument(
        "--pass-timeout", type=float, default=600, help="longest wait for periodic passes (s)"
    )
    ap.add_argument("--keep", default=None, help="keep the run's logs in this directory")
    args = ap.parse_args()
    sizes = [
        int(s)
        for s in (args.sizes or ("2000,10000" if args.quick else "10000,50000,200000")).split(",")
    ]
    t0 = time.monotonic()
    load0 = os.getloadavg()
    work = Path(args.keep or tempfile.mkdtemp(prefix="jbod-controller-scale-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    with contextlib.redirect_stdout(sys.stderr):
        try:
            for total in sizes:
                d = work / str(total)
                d.mkdir()
                results.append(run_size(total, args.brokers, d, args.pass_timeout))
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    biggest = results[-1]
    out = {
        "bench": "controller_scale",
        "quick": args.quick,
        "brokers": args.brokers,
        "replication_factor": 3,
        "sizes": results,
        "targets_at": biggest["partitions"],
        "targets": verdict(biggest),
        "meets_targets": all(v["ok"] for v in verdict(biggest).values()),
        "yardstick": YARDSTICK,
        "loadavg_start": [round(x, 2) for x in load0],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "wall_seconds": round(time.monotonic() - t0, 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
