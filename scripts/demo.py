"""``make demo``: even out the disks of each broker with one LogDirMove, end to end, locally.

What it does (about a minute; everything on 127.0.0.1, everything removed at the end):

1. starts a real kube-apiserver + etcd (``jbod_operator.tools.localkube``, the same as the
   tests'; binaries from ``make kube-bins``) and installs the CRDs from ``crds/``;
2. runs the operator and a BrokerCluster of 3 brokers x 3 log dirs as local processes
   (``localkube`` again);
3. creates two topics with skewed sizes (``clicks``: 6 partitions, RF 2, large and uneven;
   ``orders``: 3 partitions, RF 2, small) and fills them;
4. prints each directory's usage (``jbod-ctl log-dirs describe``), plans a directory balance
   with the product's planner (``jbod_spark.plan_directory_balance``; if it fails, so does the
   demo), writes it as a kafka-reassign-partitions JSON file, turns it into a LogDirMove
   (``jbod-ctl reassignment to-manifests``), applies it and follows its progress
   (``jbod-ctl logdirmove apply --wait``);
5. prints the usage after, checks that the moved replicas are where they were sent (and
   unchanged in size), and sums up.

Ctrl-C at any point stops every process it started and removes its temporary directories.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster
from jbod_broker.storage.records import build_batch
from jbod_operator.tools.localkube import (
    Kube,
    KubeBinariesMissing,
    KubeCluster,
    OperatorProcess,
    find_binaries,
    start_local_brokers,
    wait_for,
)
from jbod_spark import (
    BrokerInfo,
    ClusterSnapshot,
    LogDirInfo,
    ReplicaInfo,
    plan_directory_balance,
)

REPO = Path(__file__).resolve().parents[1]

NS = "demo"
CLUSTER = "demo"
DIRS = ("a", "b", "c")
BROKERS = 3
DIR_CAPACITY = 64 * 1024 * 1024  # the BrokerCluster's nominal log dir size ("64Mi")
MiB = 1024 * 1024
# (topic, partitions, RF, MiB per partition): clicks is big and uneven, orders small.
TOPICS: list[tuple[str, list[float]]] = [
    ("clicks", [6, 5, 3, 2, 1.5, 1]),
    ("orders", [0.5, 0.5, 0.5]),
]
RF = 2
MOVE_SECONDS = 6.0  # the throttle is chosen so that the move takes about this long
BROKER_SETTINGS = {
    "replica.lag.time.max.ms": "3000",
    "replica.high.watermark.checkpoint.interval.ms": "300",
    "log.flush.scheduler.interval.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
}

T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - T0:5.1f}s] {msg}", flush=True)


def mib(n: float) -> str:
    return f"{n / MiB:6.1f} MiB"


def _on_term(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


# ---------------------------------------------------------------------------------------------
# Usage tables from kafka-log-dirs JSON (what `jbod-ctl log-dirs describe` prints)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rep:
    broker: int
    topic: str
    partition: int
    path: str
    size: int


def replicas_of(kip: dict[str, Any]) -> list[Rep]:
    out = []
    for b in kip["brokers"]:
        for d in b["log dirs"]:
            for p in d["partitions"]:
                if not p["is_temporary"]:
                    out.append(Rep(b["broker"], p["topic"], p["partition"], d["path"], p["size"]))
    return out


def dir_usage(kip: dict[str, Any]) -> dict[int, dict[str, int]]:
    """broker → dir path → bytes of the replicas in it (in the broker's dir order)."""
    out: dict[int, dict[str, int]] = {}
    for b in kip["brokers"]:
        out[b["broker"]] = {
            d["path"]: sum(p["size"] for p in d["partitions"] if not p["is_temporary"])
            for d in b["log dirs"]
        }
    return out


def spread(sizes: dict[str, int]) -> int:
    return max(sizes.values()) - min(sizes.values()) if sizes else 0


def print_table(title: str, kip: dict[str, Any], scale: int | None = None) -> int:
    """The table; returns its bar scale (the fullest dir) so that a later table can share it."""
    usage = dir_usage(kip)
    counts: dict[tuple[int, str], int] = {}
    for r in replicas_of(kip):
        counts[(r.broker, r.path)] = counts.get((r.broker, r.path), 0) + 1
    top = scale or max((s for u in usage.values() for s in u.values()), default=1) or 1
    print(f"\n  {title}")
    print("  broker  dir  replicas        size")
    for b, dirs in usage.items():
        for i, (path, size) in enumerate(dirs.items()):
            bar = "#" * round(30 * size / top)
            head = f"{b:>6}" if i == 0 else " " * 6
            n = counts.get((b, path), 0)
            print(f"  {head}  {wire.log_dir_short_name(path):>3}  {n:>8}  {mib(size)}  {bar}")
        print(f"  {'':6}  spread (fullest - emptiest dir): {mib(spread(dirs)).strip()}")
    print()
    return top


# ---------------------------------------------------------------------------------------------
# Planning: the product's planner, jbod_spark's directory balance
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedMove:
    broker: int
    topic: str
    partition: int
    from_path: str
    to_path: str
    size: int


def spark_balance(
    reps: list[Rep], usage: dict[int, dict[str, int]], leaders: dict[tuple[str, int], int]
) -> list[PlannedMove]:
    """jbod_spark.plan_directory_balance on a snapshot of what describe-log-dirs showed. The
    dirs share one disk here, so each gets the BrokerCluster's nominal size as capacity."""
    snap = ClusterSnapshot(
        cluster_name=CLUSTER,
        namespace=NS,
        brokers=[BrokerInfo(id=b) for b in usage],
        log_dirs=[
            LogDirInfo(
                broker_id=b,
                name=wire.log_dir_short_name(p),
                path=p,
                capacity_bytes=DIR_CAPACITY,
                used_bytes=size,
            )
            for b, dirs in usage.items()
            for p, size in dirs.items()
        ],
        replicas=[
            ReplicaInfo(
                topic=r.topic,
                partition=r.partition,
                broker_id=r.broker,
                log_dir=r.path,
                size_bytes=r.size,
                leader=leaders.get((r.topic, r.partition)) == r.broker,
            )
            for r in reps
        ],
    )
    plan = plan_directory_balance(snap, tolerance=0.01)
    paths = {(b, wire.log_dir_short_name(p)): p for b, dirs in usage.items() for p in dirs}
    paths.update({(b, p): p for b, dirs in usage.items() for p in dirs})
    out = []
    for m in plan.moves:
        if m.kind != "intra" or m.from_broker != m.to_broker:
            raise ValueError(f"the directory plan moves {m.topic}-{m.partition} across brokers")
        to = paths.get((m.to_broker, m.to_dir)) or paths.get((m.to_broker, m.to_dir_name))
        src = paths.get((m.from_broker, m.from_dir))
        if to is None or src is None:
            raise ValueError(f"the plan names an unknown dir on broker {m.to_broker}: {m}")
        out.append(PlannedMove(m.to_broker, m.topic, m.partition, src, to, m.size_bytes))
    return out


def predicted(usage: dict[int, dict[str, int]], moves: list[PlannedMove]) -> dict[int, int]:
    after = {b: dict(d) for b, d in usage.items()}
    for m in moves:
        after[m.broker][m.from_path] -= m.size
        after[m.broker][m.to_path] += m.size
    return {b: spread(d) for b, d in after.items()}


def plan_moves(
    reps: list[Rep], usage: dict[int, dict[str, int]], leaders: dict[tuple[str, int], int]
) -> list[PlannedMove]:
    """The planner's moves; any failure of the planner ends the demo, saying so (the demo shows
    the product's planner or nothing)."""
    try:
        return spark_balance(reps, usage, leaders)
    except Exception as e:
        raise RuntimeError(f"the jbod_spark planner failed: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------------------------------
# The cluster
# ---------------------------------------------------------------------------------------------


class Demo:
    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="jbod-demo-"))
        self.kc: KubeCluster | None = None
        self.op: OperatorProcess | None = None
        self.brokers: LocalCluster | None = None
        self.kube: Kube | None = None
        self.env = dict(os.environ)

    # -- helpers ----------------------------------------------------------------------------

    def ctl(self, *args: str, show: bool = True, stdout_file: Path | None = None) -> str:
        """Run jbod-ctl (the installed console script) as a user would."""
        exe = Path(sys.executable).parent / "jbod-ctl"
        cmd = (
            [str(exe)]
            if os.access(exe, os.X_OK)
            else [sys.executable, "-m", "jbod_operator.tools.cli"]
        )
        if show:
            tail = f" > {stdout_file.name}" if stdout_file else ""
            print(f"  $ jbod-ctl {' '.join(args)}{tail}", flush=True)
        p = subprocess.run(
            [*cmd, *args], env=self.env, stdout=subprocess.PIPE, text=True, check=False
        )
        if p.returncode != 0:
            raise RuntimeError(f"jbod-ctl {' '.join(args)} exited with {p.returncode}")
        if stdout_file is not None:
            stdout_file.write_text(p.stdout)
        return p.stdout

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(
            self.ctl("log-dirs", "describe", "--cluster", CLUSTER, "-n", NS)
        )
        return out

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
        self.kc.kubectl(
            "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s", check=True
        )
        self.kc.kubectl("create", "namespace", NS, check=True)
        self.kube = Kube(self.kc, NS)
        say(f"API server {self.kc.server} ready; CRDs installed; namespace {NS}")

    def start_cluster(self) -> None:
        assert self.kc is not None and self.kube is not None
        say("starting the operator (python -m jbod_operator)")
        self.op = OperatorProcess(
            self.kc,
            NS,
            str(self.tmp),
            env={
                "JBOD_OPERATOR_LEASE_NAMESPACE": NS,
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
        kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "BrokerCluster",
                "metadata": {"name": CLUSTER},
                "spec": {
                    "replicas": BROKERS,
                    "logDirs": [{"name": d, "size": "64Mi"} for d in DIRS],
                },
            }
        )
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
        wait_for(
            lambda: (
                (c := kube.condition("brokercluster", CLUSTER, "Ready")) and c["status"] == "True"
            ),
            timeout=60,
            what="BrokerCluster Ready",
        )
        say(f"brokers up as local processes under {self.tmp / 'brokers'}; cluster Ready")

    def create_topics(self) -> dict[tuple[str, int], int]:
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
                        "minInsyncReplicas": 1,
                    },
                }
            )

        def ready(name: str) -> bool:
            c = kube.condition("topic", name, "Ready")
            return c is not None and c["status"] == "True"

        for name, _ in TOPICS:
            wait_for(functools.partial(ready, name), timeout=60, what=f"Topic {name} Ready")
        return self.leaders()

    def leaders(self) -> dict[tuple[str, int], int]:
        assert self.kube is not None
        out = {}
        for name, _ in TOPICS:
            t = self.kube.get("topic", name) or {}
            for p in (t.get("status") or {}).get("partitions") or []:
                out[(name, int(p["partition"]))] = int(p["leader"])
        return out

    async def _produce(self, leaders: dict[tuple[str, int], int]) -> int:
        assert self.brokers is not None
        cl = self.brokers
        payload = b"demo:" + os.urandom(16) + b"." * (64 * 1024 - 21)
        batch = build_batch([(None, payload)] * 15)  # ~960 KiB: under message.max.bytes
        small = build_batch([(None, payload)] * 2)
        clients = {
            b.broker_id: BrokerClient(b.url, token=cl.token, timeout_s=60) for b in cl.brokers
        }
        total = 0

        async def fill(topic: str, part: int, size_mib: float) -> int:
            want = int(size_mib * MiB)
            done = 0
            c = clients[leaders[(topic, part)]]
            while done < want:
                b = batch if want - done >= len(batch) else small
                await c.produce(topic, part, b, acks=-1)
                done += len(b)
            return done

        try:
            jobs = [fill(topic, p, mb) for topic, sizes in TOPICS for p, mb in enumerate(sizes)]
            for n in await asyncio.gather(*jobs):
                total += n
        finally:
            for c in clients.values():
                await c.close()
        return total

    def produce(self, leaders: dict[tuple[str, int], int]) -> None:
        t = time.monotonic()
        n = asyncio.run(self._produce(leaders))
        say(
            f"produced {n / MiB:.1f} MiB (acks=all, RF {RF}: {RF * n / MiB:.1f} MiB on disk) "
            f"in {time.monotonic() - t:.1f} s"
        )

    def topic_replicas(self) -> dict[tuple[str, int], list[int]]:
        assert self.kube is not None
        out = {}
        for name, _ in TOPICS:
            t = self.kube.get("topic", name) or {}
            for p in (t.get("status") or {}).get("partitions") or []:
                out[(name, int(p["partition"]))] = [int(r["brokerId"]) for r in p["replicas"]]
        return out

    def reassignment_json(self, moves: list[PlannedMove]) -> dict[str, Any]:
        """The plan as Kafka users write it: kafka-reassign-partitions JSON with log_dirs
        (the replica list unchanged, "any" for replicas that stay in their dir)."""
        current = self.topic_replicas()
        target: dict[tuple[str, int], dict[int, str]] = {}
        for m in moves:
            to = wire.log_dir_short_name(m.to_path)
            target.setdefault((m.topic, m.partition), {})[m.broker] = to
        parts = []
        for (topic, p), dirs in sorted(target.items()):
            reps = current[(topic, p)]
            parts.append(
                {
                    "topic": topic,
                    "partition": p,
                    "replicas": reps,
                    "log_dirs": [dirs.get(b, "any") for b in reps],
                }
            )
        return {"version": 1, "partitions": parts}

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


def run(demo: Demo) -> str:
    demo.start_api()
    demo.start_cluster()
    say("creating topics: clicks (6 partitions, RF 2, 1-6 MiB each), orders (3 x 0.5 MiB)")
    leaders = demo.create_topics()
    demo.produce(leaders)

    say("per-directory usage, from describe-log-dirs (KIP-113's kafka-log-dirs JSON):")
    before_kip = demo.describe()
    scale = print_table("BEFORE", before_kip)
    usage = dir_usage(before_kip)
    reps = replicas_of(before_kip)
    before = {b: spread(d) for b, d in usage.items()}

    moves = plan_moves(reps, usage, demo.leaders())
    if not moves:
        raise RuntimeError("the planner found nothing to move: the topics came out balanced")
    after_pred = predicted(usage, moves)
    moved_bytes = sum(m.size for m in moves)
    per_broker = {b: sum(m.size for m in moves if m.broker == b) for b in usage}
    # Slow enough to watch: the busiest broker needs about MOVE_SECONDS.
    step = 64 * 1024
    throttle = max(4 * step, int(max(per_broker.values()) / MOVE_SECONDS) // step * step)
    say(
        f"plan by jbod_spark.plan_directory_balance (dirs-only mode): {len(moves)} replica "
        f"moves, {moved_bytes / MiB:.1f} MiB"
    )
    for m in moves:
        print(
            f"    broker {m.broker}: {m.topic}-{m.partition:<2} {mib(m.size)}  "
            f"{wire.log_dir_short_name(m.from_path)} -> {wire.log_dir_short_name(m.to_path)}"
        )
    for b in usage:
        print(f"    broker {b}: spread {mib(before[b])} -> {mib(after_pred[b])} (predicted)")

    plan_file = demo.tmp / "balance.json"
    plan_file.write_text(json.dumps(demo.reassignment_json(moves), indent=1) + "\n")
    yaml_file = demo.tmp / "balance.yaml"
    say("the plan as kafka-reassign-partitions JSON -> a LogDirMove manifest:")
    # Run from the temp dir so the command reads like a user's (relative file names).
    old = os.getcwd()
    os.chdir(demo.tmp)
    try:
        demo.ctl(
            "reassignment",
            "to-manifests",
            plan_file.name,
            "--cluster",
            CLUSTER,
            "-n",
            NS,
            "--name",
            "balance",
            "--throttle",
            str(throttle),
            stdout_file=yaml_file,
        )
        print("    " + yaml_file.read_text().replace("\n", "\n    ").rstrip())
        say(f"applying it (throttle {throttle / MiB:.2f} MiB/s per broker) and following it:")
        t_move = time.monotonic()
        out = demo.ctl(
            "logdirmove", "apply", yaml_file.name, "--wait", "-n", NS, "--timeout", "180"
        )
        move_s = time.monotonic() - t_move
    finally:
        os.chdir(old)
    result = json.loads(out)
    phase = result["moves"][0]["phase"]
    if phase != "Succeeded":
        raise RuntimeError(f"LogDirMove ended {phase}: {result['moves'][0]['message']}")
    assert demo.kc is not None
    print(demo.kc.kubectl("get", "logdirmoves", "-n", NS, check=True).stdout.rstrip())

    say("per-directory usage after the move:")
    after_kip = demo.describe()
    print_table("AFTER", after_kip, scale)
    after_reps = {(r.broker, r.topic, r.partition): r for r in replicas_of(after_kip)}
    before_reps = {(r.broker, r.topic, r.partition): r for r in reps}
    for m in moves:
        r = after_reps.get((m.broker, m.topic, m.partition))
        if r is None or r.path != m.to_path:
            raise RuntimeError(f"broker {m.broker}: {m.topic}-{m.partition} is not in {m.to_path}")
    if any(
        after_reps.get(k) is None or after_reps[k].size != r.size for k, r in before_reps.items()
    ):
        raise RuntimeError("a replica changed size or went missing during the move")
    if any(
        p["is_temporary"]
        for b in after_kip["brokers"]
        for d in b["log dirs"]
        for p in d["partitions"]
    ):
        raise RuntimeError("a future replica is still there after Succeeded")
    after = {b: spread(d) for b, d in dir_usage(after_kip).items()}
    print("  broker  spread before  spread after")
    for b in usage:
        print(f"  {b:>6}  {mib(before[b]):>13}  {mib(after[b]):>12}")
    print()
    if max(after.values()) >= max(before.values()):
        raise RuntimeError("the worst spread did not improve")
    return (
        f"moved {len(moves)} replicas ({moved_bytes / MiB:.1f} MiB) between the disks of "
        f"{len({m.broker for m in moves})} brokers in {move_s:.1f} s; every replica verified "
        f"in its new dir, sizes unchanged; worst per-broker dir spread "
        f"{max(before.values()) / MiB:.1f} MiB -> {max(after.values()) / MiB:.1f} MiB"
    )


def main() -> int:
    try:
        find_binaries()
    except KubeBinariesMissing as e:
        print(f"demo: {e}\n(`make demo` runs `make setup` first, which builds them)")
        return 1
    signal.signal(signal.SIGTERM, _on_term)
    print("jbod-operator demo: even out the log dirs of each broker with one LogDirMove\n")
    demo = Demo()
    code = 1
    summary = ""
    try:
        summary = run(demo)
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
    total = time.monotonic() - T0
    if code == 0:
        print(f"demo OK in {total:.0f} s: {summary}")
    else:
        what = "FAILED" if code == 1 else "interrupted"
        print(f"demo {what} after {total:.0f} s (everything it started was stopped and removed)")
    return code


if __name__ == "__main__":
    sys.exit(main())
