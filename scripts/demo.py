"""``make demo``: the Rebalance story end to end, locally, in about two minutes.

What it does (everything on 127.0.0.1, everything it started stopped and removed at the end):

1. **start**: a real kube-apiserver + etcd (``jbod_operator.tools.localkube``, the same as the
   tests'; binaries from ``make kube-bins``), the CRDs from ``crds/``, the operator, and a
   BrokerCluster of 3 brokers x 2 log dirs (``a``, ``b``) run as local processes; two topics
   of uneven sizes, replication factor 3 and min ISR 2;
2. **fill**: bulk data of uneven sizes (the disks end uneven), then a counting producer
   (acks=all) and a consumer that run until the end (``jbod_broker.counting``, the tests' own);
3. **scale_up**: the BrokerCluster grows to 4 brokers and 3 log dirs (``c`` added). With no
   kubelet here the demo does what Kubernetes would: broker 3 is started as a new process and
   brokers 0-2 are restarted one at a time with the new dir (a broker reads ``log.dirs`` only
   at start, as Kafka does), each waiting for every partition's ISR to be full again, as a
   PodDisruptionBudget makes a rolling update wait;
4. **plan**: a ``Rebalance`` in mode ``add-brokers`` naming broker 3 (see :data:`MODE`), planned
   by the Spark job on ``local[*]`` as a process the operator launches; the proposal summary
   and a before/after plot of every disk (``jbod-ctl rebalance show NAME --plot PATH``);
5. **approve_to_ready**: ``jbod-ctl rebalance approve``, then the execution followed from the
   Rebalance's status: each wave's PartitionReassignments and LogDirMoves, bytes, rate and ETA;
6. **verify**: every disk's usage after (the operator's measure and describe-log-dirs), inside
   the band; the producer stopped, the consumer read to the end, and the counts compared:
   anything acknowledged lost, or anything read twice, fails the demo.

The last line printed is one JSON object, the wall time of each phase (``bench/rebalance.py``
reads it). Ctrl-C at any point stops every process it started and removes its temp dirs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.counting import (
    CountingConsumer,
    CountingProducer,
    fill_bytes,
    verify,
)
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from jbod_operator.tools.localkube import (
    Kube,
    KubeBinariesMissing,
    KubeCluster,
    OperatorProcess,
    find_binaries,
    start_local_brokers,
    wait_for,
)

REPO = Path(__file__).resolve().parents[1]

NS = "demo"
CLUSTER = "demo"
REBALANCE = "grow"
DIRS = ["a", "b"]
NEW_DIR = "c"
BROKERS = 3
DIR_SIZE = "64Mi"
DIR_CAPACITY = 64 * 1024 * 1024  # DIR_SIZE in bytes: the dirs share one disk here
MiB = 1024 * 1024
RF = 3
MIN_ISR = 2
# (topic, MiB per partition): clicks is big and uneven, orders small. With these the plan has
# both kinds of child: partitions that change brokers or leader (a PartitionReassignment) and
# partitions that only change disks (a LogDirMove), and the demo checks it got both. The
# largest replica is under the band (2.5 MiB is 3.9 pp of a 64 MiB disk): a larger one could
# leave a broker's disks further apart than the band whatever the plan, and the proposal
# would say Infeasible.
TOPICS: list[tuple[str, list[float]]] = [
    ("clicks", [2.5, 2.5, 2, 2, 1.5, 1.5, 1, 1, 0.75, 0.75, 0.5, 0.5]),
    ("orders", [0.25] * 6),
]
MODE = "add-brokers"
"""The story's mode: replicas cross brokers only onto the added broker 3 (Cruise Control's
add_broker), and every broker's disks are balanced in the same plan, so the new disk ``c`` of
brokers 0-2 fills by moves within each broker."""
ADDED = [3]
BAND_PP = 4.0
THROTTLE = 3 * MiB  # per broker: slow enough that the progress of the moves can be watched
PLAN_TIMEOUT = 240.0  # a Spark driver starting on a busy 2-core machine
RUN_TIMEOUT = 240.0
BROKER_SETTINGS = {
    "replica.lag.time.max.ms": "3000",
    "replica.high.watermark.checkpoint.interval.ms": "300",
    "log.flush.scheduler.interval.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
}

T0 = time.monotonic()
T = TypeVar("T")


def say(msg: str) -> None:
    print(f"[{time.monotonic() - T0:5.1f}s] {msg}", flush=True)


def mib(n: float) -> str:
    return f"{n / MiB:5.1f} MiB"


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


async def blocking(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """A blocking step (kubectl, jbod-ctl, a broker restart) in a thread, so the counting
    producer and consumer keep running on the event loop meanwhile."""
    return await asyncio.to_thread(functools.partial(fn, *args, **kw))


# ---------------------------------------------------------------------------------------------
# Usage tables from kafka-log-dirs JSON (what `jbod-ctl log-dirs describe` prints)
# ---------------------------------------------------------------------------------------------


def dir_usage(kip: dict[str, Any]) -> dict[int, dict[str, tuple[int, int]]]:
    """broker → dir name → (bytes, replicas), from the replicas in it (no future replicas)."""
    out: dict[int, dict[str, tuple[int, int]]] = {}
    for b in sorted(kip["brokers"], key=lambda b: b["broker"]):
        dirs = {}
        for d in b["log dirs"]:
            parts = [p for p in d["partitions"] if not p["is_temporary"]]
            dirs[wire.log_dir_short_name(d["path"])] = (sum(p["size"] for p in parts), len(parts))
        out[b["broker"]] = dict(sorted(dirs.items()))
    return out


def pct(size: int) -> float:
    return 100.0 * size / DIR_CAPACITY


def print_table(title: str, kip: dict[str, Any], scale: int | None = None) -> tuple[int, float]:
    """Every disk of every broker; returns the bar scale (to share it with a later table) and
    the worst per-broker spread in percentage points."""
    usage = dir_usage(kip)
    top = scale or max((s for u in usage.values() for s, _ in u.values()), default=1) or 1
    worst = 0.0
    print(f"\n  {title}  (each disk {DIR_SIZE}; band {BAND_PP:g} pp)")
    print("  broker  disk  replicas       size   used")
    for b, dirs in usage.items():
        for i, (name, (size, n)) in enumerate(dirs.items()):
            bar = "#" * round(30 * size / top)
            head = f"{b:>6}" if i == 0 else " " * 6
            print(f"  {head}  {name:>4}  {n:>8}  {mib(size)}  {pct(size):4.1f}%  {bar}")
        sp = max(pct(s) for s, _ in dirs.values()) - min(pct(s) for s, _ in dirs.values())
        worst = max(worst, sp)
        verdict = "in band" if sp <= BAND_PP else "OUTSIDE the band"
        print(f"  {'':6}  spread (fullest - emptiest disk): {sp:.1f} pp, {verdict}")
    print()
    return top, worst


# ---------------------------------------------------------------------------------------------
# The cluster
# ---------------------------------------------------------------------------------------------


class Leaders:
    """Each partition's leader from the Topic status, polled in the background: the counting
    clients' leader lookup (the way a Kafka client follows metadata)."""

    def __init__(self, demo: Demo, tps: list[TopicPartition]) -> None:
        self.demo = demo
        self.tps = tps
        self.leaders: dict[TopicPartition, int] = {}
        self._task: asyncio.Task[None] | None = None

    def refresh(self) -> None:
        for topic in sorted({tp.topic for tp in self.tps}):
            for p in self.demo.partitions(topic):
                if p["leader"] >= 0:
                    self.leaders[TopicPartition(topic, p["partition"])] = p["leader"]

    def start(self) -> None:
        self.refresh()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            # A failed read is read again on the next pass; the clients retry meanwhile.
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.refresh)
            await asyncio.sleep(0.3)

    def __call__(self, tp: TopicPartition) -> BrokerClient:
        return self.demo.client(self.leaders[tp])


class Demo:
    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="jbod-demo-"))
        self.kc: KubeCluster | None = None
        self.op: OperatorProcess | None = None
        self.brokers: LocalCluster | None = None
        self.kube: Kube | None = None
        self.env = dict(os.environ)
        self._clients: dict[int, BrokerClient] = {}

    # -- helpers ----------------------------------------------------------------------------

    def ctl(self, *args: str, show: bool = True) -> str:
        """Run jbod-ctl (the installed console script) as a user would."""
        exe = Path(sys.executable).parent / "jbod-ctl"
        cmd = (
            [str(exe)]
            if os.access(exe, os.X_OK)
            else [sys.executable, "-m", "jbod_operator.tools.cli"]
        )
        if show:
            print(f"  $ jbod-ctl {' '.join(args)}", flush=True)
        p = subprocess.run(
            [*cmd, *args], env=self.env, stdout=subprocess.PIPE, text=True, check=False
        )
        if p.returncode != 0:
            raise RuntimeError(f"jbod-ctl {' '.join(args)} exited with {p.returncode}")
        return p.stdout

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(
            self.ctl("log-dirs", "describe", "--cluster", CLUSTER, "-n", NS, show=False)
        )
        return out

    def client(self, broker: int) -> BrokerClient:
        assert self.brokers is not None
        c = self._clients.get(broker)
        if c is None:
            c = BrokerClient(self.brokers[broker].url, token=self.brokers.token, timeout_s=10)
            self._clients[broker] = c
        return c

    async def close_clients(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        assert self.kube is not None
        return self.kube.partitions(topic)

    def rebalance_status(self) -> dict[str, Any]:
        assert self.kube is not None
        return dict((self.kube.get("rebalance", REBALANCE) or {}).get("status") or {})

    # -- steps ------------------------------------------------------------------------------

    def start_api(self) -> None:
        say("starting kube-apiserver + etcd on 127.0.0.1 (jbod_operator.tools.localkube)")
        self.kc = KubeCluster()
        self.kc.require_kubectl()
        self.kc.start()
        assert self.kc.kubeconfig is not None
        venv_bin = str(Path(sys.executable).parent)
        self.env.update(
            {
                "KUBECONFIG": str(self.kc.kubeconfig),
                "KUBECACHEDIR": str(self.tmp / "kubectl-cache"),
                "PATH": venv_bin + os.pathsep + self.env.get("PATH", ""),
            }
        )
        self.kc.kubectl("apply", "-f", str(REPO / "crds"), check=True)
        self.kc.wait_established()
        self.kc.kubectl("create", "namespace", NS, check=True)
        self.kube = Kube(self.kc, NS)
        say(f"API server {self.kc.server} ready; CRDs installed; namespace {NS}")

    def cluster_spec(self, replicas: int, dirs: list[str]) -> dict[str, Any]:
        return {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "BrokerCluster",
            "metadata": {"name": CLUSTER},
            "spec": {
                "replicas": replicas,
                "logDirs": [{"name": d, "size": DIR_SIZE} for d in dirs],
            },
        }

    def cluster_ready(self, replicas: int, dirs: list[str]) -> bool:
        assert self.kube is not None
        bc = self.kube.get("brokercluster", CLUSTER) or {}
        st = bc.get("status") or {}
        c = next((c for c in st.get("conditions") or [] if c["type"] == "Ready"), None)
        return bool(
            c
            and c["status"] == "True"
            and st.get("observedGeneration") == bc["metadata"]["generation"]
            and st.get("readyBrokers") == replicas
            and st.get("logDirs") == dirs
        )

    def start_cluster(self) -> None:
        assert self.kc is not None and self.kube is not None
        say("starting the operator (python -m jbod_operator)")
        self.op = OperatorProcess(
            self.kc,
            NS,
            str(self.tmp),
            env={
                "JBOD_OPERATOR_LEASE_NAMESPACE": NS,
                "JBOD_OPERATOR_REBALANCE_WORK_DIR": str(self.tmp / "jobs"),
                "JBOD_OPERATOR_REBALANCE_POLL_SECONDS": "0.5",
                "JBOD_OPERATOR_REASSIGNMENT_POLL_SECONDS": "0.3",
                "JBOD_OPERATOR_MOVE_POLL_SECONDS": "0.5",
            },
        )
        self.op.start()
        kube = self.kube
        wait_for(
            lambda: ((kube.get("lease", "jbod-operator-leader") or {}).get("spec") or {}).get(
                "holderIdentity"
            ),
            timeout=60,
            what="the operator to take its Lease",
        )
        say(f"BrokerCluster {CLUSTER}: {BROKERS} brokers x {len(DIRS)} log dirs {DIRS}")
        kube.apply(self.cluster_spec(BROKERS, DIRS))
        wait_for(lambda: kube.get("statefulset", f"{CLUSTER}-broker"), what="the StatefulSet")
        self.brokers = start_local_brokers(
            self.op,
            kube,
            CLUSTER,
            str(self.tmp / "brokers"),
            size=BROKERS,
            dir_names=list(DIRS),
            settings=BROKER_SETTINGS,
        )
        wait_for(lambda: self.cluster_ready(BROKERS, DIRS), timeout=60, what="BrokerCluster Ready")
        say(f"brokers up as local processes under {self.tmp / 'brokers'}; cluster Ready")

    def create_topics(self) -> list[TopicPartition]:
        assert self.kube is not None
        kube = self.kube
        for name, sizes in TOPICS:
            kube.apply(
                {
                    "apiVersion": "jbod.io/v1alpha1",
                    "kind": "Topic",
                    "metadata": {"name": name},
                    "spec": {
                        "clusterName": CLUSTER,
                        "partitions": len(sizes),
                        "replicationFactor": RF,
                        "minInsyncReplicas": MIN_ISR,
                    },
                }
            )

        def ready(name: str) -> bool:
            c = kube.condition("topic", name, "Ready")
            return c is not None and c["status"] == "True"

        for name, _ in TOPICS:
            wait_for(functools.partial(ready, name), timeout=60, what=f"Topic {name} Ready")
        return [TopicPartition(name, p) for name, sizes in TOPICS for p in range(len(sizes))]

    def isr_full(self) -> bool:
        """Every partition has all its replicas in sync (what a rolling restart waits for)."""
        for name, _ in TOPICS:
            for p in self.partitions(name):
                if sorted(p["isr"]) != sorted(r["brokerId"] for r in p["replicas"]):
                    return False
        return True

    def scale_up(self) -> None:
        """The BrokerCluster grows by a broker and a disk; the local processes follow as the
        StatefulSet's pods would (a new pod; each old pod rolled onto the new template)."""
        assert self.kube is not None and self.brokers is not None and self.op is not None
        dirs = [*DIRS, NEW_DIR]
        size = BROKERS + 1
        print(
            f"  $ kubectl patch brokercluster {CLUSTER}: replicas {BROKERS} -> {size}, "
            f"logDirs {DIRS} -> {dirs}"
        )
        self.kube.apply(self.cluster_spec(size, dirs))

        def sts_follows() -> bool:
            assert self.kube is not None
            # Claim templates are immutable: the operator deletes the StatefulSet orphaning
            # its pods and creates it again; the garbage collector's part is played here.
            self.kube.finish_orphan_deletions()
            sts = self.kube.get("statefulset", f"{CLUSTER}-broker") or {}
            spec = sts.get("spec") or {}
            claims = [c["metadata"]["name"] for c in spec.get("volumeClaimTemplates") or []]
            return spec.get("replicas") == size and claims == [wire.log_dir_folder(d) for d in dirs]

        wait_for(sts_follows, timeout=60, what="the StatefulSet with 4 replicas and disk c")
        say("the operator updated the StatefulSet (4 replicas; claim templates data-a/b/c)")
        new = self.brokers.add_broker()
        new.dir_names = dirs
        self.op.set_endpoints(CLUSTER, self.brokers.endpoints())
        new.start()
        say(f"broker {new.broker_id} started (a new pod), with disks {dirs}: empty")
        for b in range(BROKERS):
            wait_for(self.isr_full, timeout=60, what="every partition's ISR full")
            self.brokers.restart_with_dirs(b, dirs)
            say(f"broker {b} restarted with disks {dirs} (rolled onto the new template)")
        wait_for(self.isr_full, timeout=60, what="every partition's ISR full")
        wait_for(lambda: self.cluster_ready(size, dirs), timeout=60, what="BrokerCluster Ready")
        say(f"BrokerCluster {CLUSTER} Ready: {size} brokers x {len(dirs)} disks; every ISR full")

    def stop(self) -> None:
        if self.op is not None:
            self.op.stop()
        if self.brokers is not None:
            self.brokers.stop()
        if self.kc is not None:
            self.kc.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def logs(self) -> Iterator[str]:
        if self.op is not None:
            yield f"--- operator log (last lines)\n{self.op.tail(30)}"
        if self.brokers is not None:
            for b in self.brokers.brokers:
                yield f"--- broker {b.broker_id} log (last lines)\n{b.tail(15)}"


# ---------------------------------------------------------------------------------------------
# Following the Rebalance
# ---------------------------------------------------------------------------------------------


def progress_line(st: dict[str, Any]) -> str:
    """One line of what the status says: phase, wave, the children by kind and phase, bytes,
    rate and ETA."""
    kids = st.get("children") or []
    by_kind: dict[str, dict[str, int]] = {}
    for k in kids:
        phases = by_kind.setdefault(k["kind"], {})
        ph = k.get("phase") or "Pending"
        phases[ph] = phases.get(ph, 0) + 1
    kinds = "; ".join(
        f"{kind} x{sum(ph.values())} ({', '.join(f'{n} {p}' for p, n in sorted(ph.items()))})"
        for kind, ph in sorted(by_kind.items())
    )
    waves = (st.get("proposal") or {}).get("waves") or 0
    rate = st.get("rateBytesPerSecond")
    eta = st.get("etaSeconds")
    return (
        f"{st.get('phase')} wave {st.get('wave', 0)}/{waves}: {kinds or 'no children yet'} | "
        f"{mib(st.get('bytesMoved') or 0).strip()} of {mib(st.get('bytesToMove') or 0).strip()}"
        f" ({st.get('progressPercent') or 0}%)"
        + (f", {rate / MiB:.1f} MiB/s" if rate else "")
        + (f", ETA {eta} s" if eta is not None else "")
    )


def failed(st: dict[str, Any]) -> str | None:
    if st.get("phase") in ("NotReady", "Stopped"):
        msgs = [c.get("message", "") for c in st.get("conditions") or [] if c.get("message")]
        return f"Rebalance {REBALANCE} is {st['phase']}: {' '.join(msgs)}"
    return None


async def follow(demo: Demo, want: str, timeout: float, *, show: bool) -> dict[str, Any]:
    """Poll the Rebalance's status until phase ``want``; print each new progress line."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        st = await blocking(demo.rebalance_status)
        bad = failed(st)
        if bad:
            raise RuntimeError(bad)
        if show:
            line = progress_line(st)
            if line != last:
                say(line)
                last = line
        if st.get("phase") == want:
            return st
        await asyncio.sleep(0.5)
    raise TimeoutError(f"Rebalance {REBALANCE} not {want} after {timeout:.0f} s")


# ---------------------------------------------------------------------------------------------
# The story
# ---------------------------------------------------------------------------------------------


SHARE: dict[str, Any] = {}
"""The new broker's share in the proposal (the demo's JSON line carries it)."""
SHARE_GOALS = (
    "DiskUsageDistributionGoal",
    "ReplicaDistributionGoal",
    "LeaderReplicaDistributionGoal",
)


def new_broker_share(p: dict[str, Any]) -> dict[str, Any]:
    """Broker 3's replicas, leaders and bytes after the proposal against the brokers' mean,
    and the verdict of the goals that give it its share; a goal not met must say why."""
    rows = p["brokers"]
    new = next(b for b in rows if b["brokerId"] == BROKERS)
    out: dict[str, Any] = {"broker": BROKERS}
    for key, field in (
        ("replicas", "replicasAfter"),
        ("leaders", "leadersAfter"),
        ("bytes", "usedBytesAfter"),
    ):
        mean = sum(b[field] for b in rows) / len(rows)
        out[key] = new[field]
        out[f"{key}_mean"] = round(mean, 2)
    goals = {g["name"]: g for g in p.get("goals") or []}
    out["goals"] = {n: goals[n]["met"] for n in SHARE_GOALS if n in goals}
    say(
        f"new broker {BROKERS} after the proposal: {out['replicas']} replicas (mean "
        f"{out['replicas_mean']}), {out['leaders']} leaders (mean {out['leaders_mean']}), "
        f"{mib(out['bytes']).strip()} (mean {mib(int(out['bytes_mean'])).strip()})"
    )
    for n in SHARE_GOALS:
        g = goals.get(n)
        if g is None:
            raise RuntimeError(f"the proposal does not report {n}")
        verdict = "met" if g["met"] else f"NOT met: {g['reason']}"
        say(
            f"  {n}: {g['minAfter']:.4g}..{g['maxAfter']:.4g} within {g['lower']:.4g}.."
            f"{g['upper']:.4g}: {verdict}"
        )
        if not g["met"] and not g["reason"]:
            raise RuntimeError(f"{n} is not met and the proposal does not say why")
    return out


class Phases:
    """Wall time per phase (the last line's JSON)."""

    def __init__(self) -> None:
        self.took: dict[str, float] = {}
        self._t = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.took[name] = round(now - self._t, 1)
        self._t = now


async def run(demo: Demo, phases: Phases, plot: Path) -> str:
    await blocking(demo.start_api)
    await blocking(demo.start_cluster)
    say(
        f"topics: {', '.join(f'{n} ({len(s)} partitions)' for n, s in TOPICS)}, "
        f"RF {RF}, min ISR {MIN_ISR}"
    )
    tps = await blocking(demo.create_topics)
    phases.done("start")

    leaders = Leaders(demo, tps)
    leaders.start()
    t = time.monotonic()
    for name, sizes in TOPICS:
        for p, size in enumerate(sizes):
            await fill_bytes(leaders, [TopicPartition(name, p)], size)
    total = sum(sum(s) for _, s in TOPICS)
    say(f"filled {total:.1f} MiB (x{RF} replicas) in {time.monotonic() - t:.1f} s, acks=all")
    producer = CountingProducer(leaders, tps, timeout_ms=5000, pause_s=0.05)
    consumer = CountingConsumer(leaders, tps)
    producer.start()
    consumer.start()
    say("a counting producer (acks=all) and consumer run from now to the end")
    try:
        print_table("BEFORE", await blocking(demo.describe))
        phases.done("fill")

        say("adding a fourth broker and a new disk c to every broker")
        await blocking(demo.scale_up)
        scale, before_worst = print_table(
            "AFTER SCALE-UP (broker 3 and disks c empty)", await blocking(demo.describe)
        )
        phases.done("scale_up")

        rb = {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "Rebalance",
            "metadata": {"name": REBALANCE},
            "spec": {
                "clusterName": CLUSTER,
                "mode": MODE,
                "brokers": ADDED,
                "balanceBandPercent": BAND_PP,
                "throttleBytesPerSecond": THROTTLE,
            },
        }
        print(f"  $ kubectl apply -f - <<< {json.dumps(rb)}")
        assert demo.kube is not None
        await blocking(demo.kube.apply, rb)
        say(
            f"Rebalance {REBALANCE} (mode {MODE}): the operator snapshots the cluster and "
            "launches the Spark job on local[*]"
        )
        st = await follow(demo, "ProposalReady", PLAN_TIMEOUT, show=False)
        p = st["proposal"]
        if not p["feasible"]:
            raise RuntimeError(f"the proposal is infeasible: {p.get('problems')}")
        say(
            f"proposal: {p['movesBetweenBrokers']} moves between brokers, "
            f"{p['movesBetweenDisks']} between disks, {mib(p['bytesToMove']).strip()}, "
            f"{p.get('waves', 0)} wave(s); worst disk spread {p['worstSpreadBefore']:.1f} pp "
            f"-> {p['worstSpreadAfter']:.1f} pp (band {BAND_PP:g})"
        )
        SHARE.update(new_broker_share(p))
        shown = await blocking(
            demo.ctl, "rebalance", "show", REBALANCE, "-n", NS, "--plot", str(plot)
        )
        print("    " + shown.rstrip().replace("\n", "\n    "))
        if not plot.is_file() or plot.read_bytes()[:8] != b"\x89PNG\r\n\x1a\n":
            raise RuntimeError(f"no PNG plot at {plot}")
        say(f"plot of every disk before/after: {plot}")
        phases.done("plan")

        await blocking(demo.ctl, "rebalance", "approve", REBALANCE, "-n", NS)
        st = await follow(demo, "Ready", RUN_TIMEOUT, show=True)
        assert demo.kc is not None
        table = await blocking(
            demo.kc.kubectl, "get", "rb,partitionreassignments,logdirmoves", "-n", NS, check=True
        )
        print("    " + table.stdout.rstrip().replace("\n", "\n    "))
        phases.done("approve_to_ready")
    finally:
        await producer.stop()
        await consumer.stop()
        await leaders.stop()
        await demo.close_clients()

    measured = st.get("measured") or []
    out = [m for m in measured if m["spread"] > BAND_PP]
    if len(measured) != BROKERS + 1 or out:
        raise RuntimeError(f"the operator measured disks outside the band: {measured}")
    _, after_worst = print_table("AFTER", await blocking(demo.describe), scale)
    print("  the operator's measure at Ready (per broker, spread of its disks):")
    for m in measured:
        print(
            f"    broker {m['brokerId']}: spread {m['spread']:.1f} pp, fullest disk "
            f"{m['largestUtilisation']:.1f}%"
        )
    kids = {(k["kind"], k.get("phase")) for k in st.get("children") or []}
    kinds = {k for k, _ in kids}
    print(f"  children: {sorted(kids)}")
    if not {"PartitionReassignment", "LogDirMove"} <= kinds:
        raise RuntimeError(f"expected both kinds of move among the children, got {kinds}")

    verify(producer.acked, consumer.consumed)
    acked, read = producer.acked_count, consumer.count
    unacked = producer.sent - acked
    say(
        f"counts: producer sent {producer.sent}, acknowledged {acked} ({unacked} refused while "
        f"leadership moved, never acknowledged); consumer read {read}: every acknowledged "
        "value read exactly once, in order: 0 lost, 0 duplicated"
    )
    phases.done("verify")
    return (
        f"counts: {acked} acknowledged, {read} read, 0 lost, 0 duplicated; "
        f"worst disk spread after the scale-up {before_worst:.1f} pp -> {after_worst:.1f} pp "
        f"(band {BAND_PP:g} pp); "
        f"Rebalance {REBALANCE} Ready; plot {plot}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--plot",
        type=Path,
        default=Path(tempfile.gettempdir()) / "jbod-demo-rebalance.png",
        help="where the proposal's before/after plot is written (kept after the demo)",
    )
    args = ap.parse_args(argv)
    try:
        find_binaries()
    except KubeBinariesMissing as e:
        print(f"demo: {e}\n(`make demo` runs `make setup` first, which builds them)")
        return 1
    if importlib.util.find_spec("matplotlib") is None:
        # The Spark job draws the proposal's plot with it, in this same Python: say so now,
        # not after two minutes when the plot is missing.
        print("demo: matplotlib is not installed (the spark extra): run `make setup`")
        return 1
    signal.signal(signal.SIGTERM, _on_term)
    print("jbod-operator demo: add a broker and a disk, then one Rebalance evens it all out\n")
    demo = Demo()
    phases = Phases()
    code = 1
    summary = ""
    try:
        summary = asyncio.run(run(demo, phases, args.plot.resolve()))
        code = 0
    except KeyboardInterrupt:
        print("\ndemo: interrupted; cleaning up", flush=True)
        code = 130
    except Exception as e:
        print(f"\ndemo FAILED: {type(e).__name__}: {e}", flush=True)
        for text in demo.logs():
            print(text)
    finally:
        # A second Ctrl-C must not leave processes behind: cleanup runs to the end.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        say("cleaning up: operator, brokers, API server, temp dirs")
        demo.stop()
    phases.done("cleanup")
    total = round(time.monotonic() - T0, 1)
    if code == 0:
        print(f"demo OK in {total:.0f} s: {summary}")
    else:
        what = "FAILED" if code == 1 else "interrupted"
        print(f"demo {what} after {total:.0f} s (everything it started was stopped and removed)")
    print(
        json.dumps(
            {
                "demo_phases_s": phases.took,
                "demo_total_s": total,
                "demo_ok": code == 0,
                "new_broker": SHARE,
            }
        )
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
