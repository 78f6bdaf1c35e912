"""jbod-ctl against real processes: broker processes (LocalCluster, the test as controller) for
``log-dirs describe``, and the real API server for the kubectl paths (``--cluster``,
``to-manifests`` from Topic statuses, ``logdirmove apply --wait`` following a status).

The tool runs as users run it: the installed console script in a child process.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from jbod_broker import wire
from jbod_broker.local import LocalCluster
from jbod_broker.storage.records import build_batch
from jbod_operator.models.common import MAX_REPLICAS
from jbod_operator.models.reassignment import MAX_PARTITIONS
from tests.integration.controller_stub import ControllerStub
from tests.kube_cluster import KubeCluster
from tests.waiting import wait_async, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
JBOD_CTL = Path(sys.executable).parent / "jbod-ctl"

# KIP-113's kafka-log-dirs JSON, exactly: no other keys anywhere.
SPACE_KEYS = ("total_bytes", "usable_bytes", "reserved_bytes", "headroom_bytes")
"""Ours, beyond KIP-113: the room a move into the dir is checked against (issue 13)."""

KIP113_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["version", "brokers"],
    "additionalProperties": False,
    "properties": {
        "version": {"const": 1},
        "brokers": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["broker", "log dirs"],
                "additionalProperties": False,
                "properties": {
                    "broker": {"type": "integer", "minimum": 0},
                    "log dirs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": [
                                "is_live",
                                "path",
                                "partitions",
                                *SPACE_KEYS,
                            ],
                            "additionalProperties": False,
                            "properties": {
                                "is_live": {"type": "boolean"},
                                "path": {"type": "string", "pattern": "^/"},
                                **{k: {"type": "integer", "minimum": 0} for k in SPACE_KEYS},
                                "partitions": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": [
                                            "topic",
                                            "partition",
                                            "size",
                                            "offset_lag",
                                            "is_temporary",
                                        ],
                                        "additionalProperties": False,
                                        "properties": {
                                            "topic": {"type": "string"},
                                            "partition": {"type": "integer", "minimum": 0},
                                            "size": {"type": "integer", "minimum": 0},
                                            "offset_lag": {"type": "integer", "minimum": 0},
                                            "is_temporary": {"type": "boolean"},
                                            # Ours, with --cluster (issue 39): whether the
                                            # partition state of record puts it there.
                                            "in_record": {"type": "boolean"},
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def jbod_ctl(
    *args: str, env: dict[str, str] | None = None, stderr: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI's run; with ``stderr``, what it writes there goes to that file as it comes (a
    test reads its progress while it runs) and is the result's ``stderr`` too."""
    cmd = (
        [str(JBOD_CTL)] if JBOD_CTL.exists() else [sys.executable, "-m", "jbod_operator.tools.cli"]
    )
    if stderr is None:
        return subprocess.run(
            [*cmd, *args], capture_output=True, text=True, timeout=120, env=env, check=False
        )
    with stderr.open("w") as err:
        done = subprocess.run(
            [*cmd, *args], stdout=subprocess.PIPE, stderr=err, text=True, timeout=120, env=env
        )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, stderr.read_text())


def placement(doc: dict[str, Any]) -> dict[int, set[tuple[str, int]]]:
    return {
        b["broker"]: {
            (p["topic"], p["partition"])
            for d in b["log dirs"]
            for p in d["partitions"]
            if not p["is_temporary"]
        }
        for b in doc["brokers"]
    }


# ---------------------------------------------------------------------------------------------
# log-dirs describe --bootstrap-url against two broker processes
# ---------------------------------------------------------------------------------------------


@dataclass
class Env:
    ctl: ControllerStub
    cluster: LocalCluster

    @property
    def urls(self) -> str:
        return ",".join(b.url for b in self.cluster.brokers)

    @property
    def token_file(self) -> str:
        return os.path.join(self.cluster.base_dir, "token")

    async def describe(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(
            jbod_ctl,
            "log-dirs",
            "describe",
            "--bootstrap-url",
            self.urls,
            "--token-file",
            self.token_file,
            *extra,
        )


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    ctl = ControllerStub()
    await ctl.start()
    cluster = LocalCluster(
        str(tmp_path / "cluster"),
        size=2,
        num_dirs=2,
        controller_url=ctl.url,
        settings={"replica.fetch.wait.max.ms": "200"},
    )
    ctl.cluster = cluster
    try:
        await asyncio.to_thread(cluster.start)
        yield Env(ctl, cluster)
    finally:
        await asyncio.to_thread(cluster.stop)
        await ctl.stop()


async def test_describe_bootstrap_prints_kip113_json(env: Env) -> None:
    t = await env.ctl.create_topic("orders", 3, rf=2)
    u = await env.ctl.create_topic("audit", 1, rf=1, first_leader=1)
    batch = build_batch([(None, b"x" * 1000)] * 10)
    for tp in [*t, *u]:
        await env.ctl.client(env.ctl.leader_of(tp)).produce(tp.topic, tp.partition, batch)

    p = await env.describe()
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    jsonschema.validate(doc, KIP113_SCHEMA)
    assert [b["broker"] for b in doc["brokers"]] == [0, 1]
    for b in doc["brokers"]:
        broker = env.cluster[b["broker"]]
        assert [d["path"] for d in b["log dirs"]] == broker.log_dirs
        assert all(d["is_live"] for d in b["log dirs"])
        # No move in flight; the default headroom is 1% of each dir's capacity.
        assert all(d["reserved_bytes"] == 0 for d in b["log dirs"])
        assert all(d["headroom_bytes"] == -(-d["total_bytes"] // 100) for d in b["log dirs"])
    # The partitions are exactly the controller's assignment.
    expected: dict[int, set[tuple[str, int]]] = {0: set(), 1: set()}
    for tp, st in env.ctl.state.items():
        for r in st.replicas:
            expected[r].add((tp.topic, tp.partition))
    assert placement(doc) == expected
    assert expected[1] == {("orders", 0), ("orders", 1), ("orders", 2), ("audit", 0)}
    # Sizes are the bytes on disk: each leader has its batch.
    sizes = {
        (b["broker"], p["topic"], p["partition"]): p["size"]
        for b in doc["brokers"]
        for d in b["log dirs"]
        for p in d["partitions"]
    }
    for tp in [*t, *u]:
        assert sizes[(env.ctl.leader_of(tp), tp.topic, tp.partition)] >= len(batch)
    assert not any(
        p["is_temporary"] for b in doc["brokers"] for d in b["log dirs"] for p in d["partitions"]
    )

    # --broker-list and --topic-list narrow the answer.
    p = await env.describe("--broker-list", "1", "--topic-list", "audit")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    jsonschema.validate(doc, KIP113_SCHEMA)
    assert placement(doc) == {1: {("audit", 0)}}


async def test_describe_shows_a_move_in_flight_as_temporary(env: Env) -> None:
    (tp,) = await env.ctl.create_topic("big", 1, rf=1)
    leader = env.ctl.client(env.ctl.leader_of(tp))
    batch = build_batch([(None, b"y" * 60_000)] * 16)
    for _ in range(4):
        await leader.produce(tp.topic, tp.partition, batch)
    before = await leader.describe_log_dirs(topics=["big"])
    src = next(d.path for d in before.log_dirs if d.partitions)
    dst = next(d.path for d in before.log_dirs if d.path != src)
    await leader.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=128 * 1024))
    try:
        await leader.alter_replica_log_dirs([(tp.topic, tp.partition, dst)])
        p = await env.describe("--topic-list", "big")
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        jsonschema.validate(doc, KIP113_SCHEMA)
        dirs = {d["path"]: d["partitions"] for b in doc["brokers"] for d in b["log dirs"]}
        assert [(x["topic"], x["is_temporary"]) for x in dirs[src]] == [("big", False)]
        assert [(x["topic"], x["is_temporary"]) for x in dirs[dst]] == [("big", True)]
        assert dirs[dst][0]["size"] < dirs[src][0]["size"]
    finally:
        await leader.alter_replica_log_dirs([(tp.topic, tp.partition, "any")])  # cancel
        await leader.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=0))


async def test_describe_errors_exit_1(env: Env, tmp_path: Path) -> None:
    bad = tmp_path / "wrong-token"
    bad.write_text("not-the-token\n")
    p = await asyncio.to_thread(
        jbod_ctl, "log-dirs", "describe", "--bootstrap-url", env.urls, "--token-file", str(bad)
    )
    assert p.returncode == 1 and p.stdout == ""
    assert "describe-log-dirs failed on" in p.stderr and "token" in p.stderr.lower()
    p = await env.describe("--broker-list", "0,7")
    assert p.returncode == 1
    assert "broker(s) 7 not among the bootstrap URLs' brokers (0, 1)" in p.stderr


# ---------------------------------------------------------------------------------------------
# kubectl paths against the real API server (the test writes the statuses the operator would)
# ---------------------------------------------------------------------------------------------


@dataclass
class KubeEnv:
    kc: KubeCluster
    ns: str

    def kubectl(self, *args: str, input: str | None = None) -> str:
        p = self.kc.kubectl(*args, "-n", self.ns, input=input)
        assert p.returncode == 0, f"kubectl {' '.join(args)}: {p.stderr}"
        return p.stdout

    def apply(self, obj: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def patch_status(self, kind: str, name: str, status: dict[str, Any]) -> None:
        self.kubectl(
            "patch",
            kind,
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )

    def ctl(self, *args: str, stderr: Path | None = None) -> subprocess.CompletedProcess[str]:
        assert self.kc.kubeconfig is not None and self.kc.workdir is not None
        env = dict(os.environ, KUBECACHEDIR=str(self.kc.workdir / "kubectl-cache"))
        return jbod_ctl(
            *args,
            "-n",
            self.ns,
            "--kubeconfig",
            str(self.kc.kubeconfig),
            "--kubectl",
            str(self.kc.kubectl_path),
            env=env,
            stderr=stderr,
        )


@pytest.fixture
def kube(kube_cluster: KubeCluster, request: pytest.FixtureRequest) -> Iterator[KubeEnv]:
    kube_cluster.kubectl("apply", "-f", str(REPO / "crds"), check=True)
    kube_cluster.wait_established()
    ns = request.node.name.replace("_", "-")[:50]
    kube_cluster.kubectl("create", "namespace", ns, check=True)
    try:
        yield KubeEnv(kube_cluster, ns)
    finally:
        kube_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def topic(name: str, partitions: list[list[tuple[int, str]]]) -> tuple[dict[str, Any], Any]:
    obj = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": {"clusterName": "kip", "partitions": len(partitions), "replicationFactor": 2},
    }
    status = {
        "topicName": name,
        "partitions": [
            {
                "partition": i,
                "replicas": [{"brokerId": b, "logDir": d} for b, d in reps],
                "leader": reps[0][0],
                "leaderEpoch": 0,
                "isr": [b for b, _ in reps],
            }
            for i, reps in enumerate(partitions)
        ],
    }
    return obj, status


def broker_cluster(kube: KubeEnv) -> None:
    kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "BrokerCluster",
            "metadata": {"name": "kip"},
            "spec": {
                "replicas": 3,
                "logDirs": [{"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}],
            },
        }
    )


def test_to_manifests_reads_topic_statuses_and_apply_waits(kube: KubeEnv, tmp_path: Path) -> None:
    broker_cluster(kube)
    obj, status = topic(
        "clicks",
        [[(0, "/k/0/data-a"), (1, "/k/1/data-a")], [(1, "/k/1/data-b"), (2, "/k/2/data-a")]],
    )
    kube.apply(obj)
    kube.patch_status("topic", "clicks", status)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "clicks", "partition": 0, "replicas": [0, 1], "log_dirs": ["b", "a"]},
                    {"topic": "clicks", "partition": 1, "replicas": [1, 0]},
                ],
            }
        )
    )
    p = kube.ctl("reassignment", "to-manifests", str(plan), "--cluster", "kip", "--name", "t1")
    assert p.returncode == 0, p.stderr
    docs = list(yaml.safe_load_all(p.stdout))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("PartitionReassignment", "t1-brokers"),
        ("LogDirMove", "t1-dirs"),
    ]
    # broker 1's replica of clicks-0 is already in "a": only broker 0's moves.
    assert docs[1]["spec"]["moves"] == [
        {"brokerId": 0, "topic": "clicks", "partition": 0, "logDir": "b"}
    ]
    assert "clicks-0 on broker 1 is already in a" in p.stderr
    # (apply --wait below has the API server accept both: schema and CEL rules.)
    manifests = tmp_path / "m.yaml"
    manifests.write_text(p.stdout)

    # A broker id the cluster does not have is refused before anything is printed.
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "clicks", "partition": 0, "replicas": [0, 5]}]}
        )
    )
    p = kube.ctl("reassignment", "to-manifests", str(plan), "--cluster", "kip")
    assert p.returncode == 1 and p.stdout == ""
    assert "broker 5 does not exist in cluster kip (brokers 0-2)" in p.stderr

    # apply --wait follows the status (written here as the operator would), each step once
    # the CLI has shown the one before.
    progress = tmp_path / "apply.err"

    def operator() -> None:
        wait_for(
            lambda: (
                kube.kc.kubectl(
                    "get", "logdirmove", "t1-dirs", "-n", kube.ns, check=False
                ).returncode
                == 0
            ),
            "the LogDirMove applied",
            30,
        )
        kube.patch_status(
            "logdirmove",
            "t1-dirs",
            {
                "phase": "Moving",
                "progressPercent": 40,
                "rateBytesPerSecond": 2 << 20,
                "etaSeconds": 3,
                "bytesCopied": 4 << 20,
                "bytesTotal": 10 << 20,
                "replicas": [{"brokerId": 0, "topic": "clicks", "partition": 0, "state": "Moving"}],
            },
        )
        wait_for(lambda: "Moving" in progress.read_text(), "the CLI to show Moving", 60)
        kube.patch_status(
            "logdirmove",
            "t1-dirs",
            {
                "phase": "Succeeded",
                "progressPercent": 100,
                "bytesCopied": 10 << 20,
                "bytesTotal": 10 << 20,
                "replicas": [
                    {"brokerId": 0, "topic": "clicks", "partition": 0, "state": "Succeeded"}
                ],
                "conditions": [
                    {
                        "type": "Succeeded",
                        "status": "True",
                        "reason": "AllMoved",
                        "message": "1 replicas moved and verified",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                ],
            },
        )

    th = threading.Thread(target=operator, daemon=True)
    th.start()
    p = kube.ctl(
        "logdirmove", "apply", str(manifests), "--wait", "--timeout", "60", stderr=progress
    )
    th.join()
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert {(a["kind"], a["name"]) for a in out["applied"]} == {
        ("PartitionReassignment", "t1-brokers"),
        ("LogDirMove", "t1-dirs"),
    }
    assert out["moves"][0]["phase"] == "Succeeded"
    assert out["moves"][0]["replicas"] == {"Succeeded": 1}
    # Not a terminal: plain progress lines, then the outcome.
    assert "\r" not in p.stderr
    assert "t1-dirs: [########------------]  40%  2.0 MiB/s  ETA 3s  Moving" in p.stderr
    assert "LogDirMove t1-dirs: Succeeded: 1 replicas moved and verified" in p.stderr


def test_wait_reports_failure_and_timeout(kube: KubeEnv) -> None:
    broker_cluster(kube)
    move = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "LogDirMove",
        "metadata": {"name": "doomed"},
        "spec": {
            "clusterName": "kip",
            "moves": [{"brokerId": 0, "topic": "t", "partition": 0, "logDir": "b"}],
        },
    }
    kube.apply(move)
    p = kube.ctl("logdirmove", "wait", "doomed", "--timeout", "1")
    assert p.returncode == 1
    assert "LogDirMove doomed: timed out after 1 s in phase Pending at 0%" in p.stderr
    assert json.loads(p.stdout)["timedOut"] is True
    kube.patch_status(
        "logdirmove",
        "doomed",
        {
            "phase": "Failed",
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "ReplicaMovesFailed",
                    "message": "broker 0: log dir /k/0/data-b is offline",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    )
    p = kube.ctl("logdirmove", "wait", "doomed")
    assert p.returncode == 1
    assert "LogDirMove doomed: Failed: broker 0: log dir /k/0/data-b is offline" in p.stderr
    p = kube.ctl("logdirmove", "wait", "nope")
    assert p.returncode == 1 and "LogDirMove nope not found in namespace" in p.stderr


def test_describe_cluster_reads_status_and_secret(kube: KubeEnv, tmp_path: Path) -> None:
    broker_cluster(kube)

    async def scenario() -> None:
        ctl = ControllerStub()
        await ctl.start()
        cl = LocalCluster(str(tmp_path / "brokers"), size=2, num_dirs=2, controller_url=ctl.url)
        ctl.cluster = cl
        try:
            await asyncio.to_thread(cl.start)
            await ctl.create_topic("orders", 2, rf=1)
            kube.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "kip-broker-token"},
                    "data": {"token": base64.b64encode(cl.token.encode()).decode()},
                }
            )
            kube.patch_status(
                "brokercluster",
                "kip",
                {"brokers": [{"id": b.broker_id, "live": True, "url": b.url} for b in cl.brokers]},
            )
            p = await asyncio.to_thread(kube.ctl, "log-dirs", "describe", "--cluster", "kip")
            assert p.returncode == 0, p.stderr
            doc = json.loads(p.stdout)
            jsonschema.validate(doc, KIP113_SCHEMA)
            assert placement(doc) == {
                b: {(tp.topic, tp.partition) for tp, st in ctl.state.items() if b in st.replicas}
                for b in (0, 1)
            }
            # The stub controller made them on the brokers only: no Topic records them.
            listed = [p for b in doc["brokers"] for d in b["log dirs"] for p in d["partitions"]]
            assert listed and not any(p["in_record"] for p in listed)
            p = await asyncio.to_thread(
                kube.ctl, "log-dirs", "describe", "--cluster", "kip", "--broker-list", "2"
            )
            assert p.returncode == 1
            assert "BrokerCluster kip has no URL for broker(s) 2 (known: 0, 1)" in p.stderr
            p = await asyncio.to_thread(kube.ctl, "log-dirs", "describe", "--cluster", "nope")
            assert p.returncode == 1
            assert f"BrokerCluster nope not found in namespace {kube.ns}" in p.stderr
        finally:
            await asyncio.to_thread(cl.stop)
            await ctl.stop()

    asyncio.run(scenario())


# ---------------------------------------------------------------------------------------------
# reassignments list|describe|verify on broker processes, apply --wait on the API server
# ---------------------------------------------------------------------------------------------


def reassignment(name: str, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": name},
        "spec": {"clusterName": "kip", "partitions": partitions},
    }


def test_reassignments_list_describe_verify_on_real_brokers(kube: KubeEnv, tmp_path: Path) -> None:
    """A step of a reassignment taken by hand as the operator takes it (the named dir
    preferred on the new replica's broker, the throttle on both ends, the state of record
    written, LeaderAndIsr), read back through jbod-ctl: --list's lines from the Topic status,
    KIP-240's description with the log end offsets the brokers report, and --verify failing
    until the new replica is in sync in its named dir, then passing."""
    broker_cluster(kube)
    rate = 64 * 1024

    async def scenario() -> None:
        ctl = ControllerStub()
        await ctl.start()
        cl = LocalCluster(
            str(tmp_path / "brokers"),
            size=2,
            num_dirs=2,
            dir_names=["a", "b"],
            controller_url=ctl.url,
            settings={"replica.fetch.wait.max.ms": "100"},
        )
        ctl.cluster = cl

        async def ctl_run(*args: str) -> subprocess.CompletedProcess[str]:
            return await asyncio.to_thread(kube.ctl, "reassignments", *args)

        try:
            await asyncio.to_thread(cl.start)
            (tp,) = await ctl.create_topic("orders", 1, rf=1)
            leader = ctl.client(0)
            batch = build_batch([(None, b"o" * 1000)] * 50)
            for _ in range(80):  # 4 MB: a minute at the throttle
                await leader.produce("orders", 0, batch, acks=1)
            kube.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "kip-broker-token"},
                    "data": {"token": base64.b64encode(cl.token.encode()).decode()},
                }
            )
            kube.patch_status(
                "brokercluster",
                "kip",
                {"brokers": [{"id": b.broker_id, "live": True, "url": b.url} for b in cl.brokers]},
            )
            src = next(
                d.path
                for d in (await leader.describe_log_dirs(["orders"])).log_dirs
                if d.partitions
            )
            dst_b = cl[1].log_dirs[1]  # broker 1's data-b
            kube.apply(
                {
                    "apiVersion": "jbod.io/v1alpha1",
                    "kind": "Topic",
                    "metadata": {"name": "orders"},
                    "spec": {"clusterName": "kip", "partitions": 1, "replicationFactor": 1},
                }
            )

            def record(**extra: Any) -> None:
                st = ctl.state[tp]
                dirs = {0: src, 1: dst_b}
                entry = {
                    "partition": 0,
                    "replicas": [{"brokerId": b, "logDir": dirs[b]} for b in st.replicas],
                    "leader": st.leader,
                    "leaderEpoch": st.leader_epoch,
                    "isr": list(st.isr),
                    "partitionEpoch": st.partition_epoch,
                    "addingReplicas": [],
                    "removingReplicas": [],
                    "targetReplicas": [],
                    **extra,
                }
                kube.patch_status("topic", "orders", {"topicName": "orders", "partitions": [entry]})

            record()
            kube.apply(
                reassignment(
                    "grow",
                    [
                        {
                            "topic": "orders",
                            "partition": 0,
                            "replicas": [0, 1],
                            "logDirs": ["any", "b"],
                        }
                    ],
                )
            )

            # Nothing started: not at its target, and no replica on broker 1 yet.
            p = await ctl_run("verify", "grow")
            assert p.returncode == 1, p.stderr
            assert p.stdout.splitlines() == [
                "Status of partition reassignment:",
                "There is no active reassignment of partition orders-0, but replica set is 0 "
                "rather than 0,1.",
                "Partition orders-0 cannot be found in any live log directory on broker 1.",
                "PartitionReassignment grow: 2 not at their target yet.",
            ]
            p = await ctl_run("list", "--cluster", "kip")
            assert p.returncode == 0, p.stderr
            assert p.stdout.splitlines() == [
                "No partition reassignments found.",
                "",
                "PartitionReassignment grow (cluster kip): not accepted yet, no batch yet",
                "  no partition in flight",
            ]

            # The step: broker 1 added in its named dir, throttled at both ends; the state of
            # record first, then the brokers.
            await ctl.client(1).alter_replica_log_dirs([("orders", 0, dst_b)])
            ref = [wire.ReplicaRef(topic="orders", partition=0)]
            await leader.set_configs(
                wire.ThrottleConfig(
                    leader_replication_throttled_rate=rate,
                    leader_replication_throttled_replicas=ref,
                )
            )
            await ctl.client(1).set_configs(
                wire.ThrottleConfig(
                    follower_replication_throttled_rate=rate,
                    follower_replication_throttled_replicas=ref,
                )
            )
            ctl.state[tp].replicas = [0, 1]
            record(addingReplicas=[1], targetReplicas=[0, 1], reassignedBy="grow")
            kube.patch_status(
                "partitionreassignment",
                "grow",
                {
                    "phase": "Running",
                    "observedGeneration": 1,
                    "startTime": "2026-01-01T00:00:00Z",
                    "batch": 1,
                    "currentBatch": [
                        {
                            "topic": "orders",
                            "partition": 0,
                            "currentBrokers": [0],
                            "targetBrokers": [0, 1],
                        }
                    ],
                    "original": [{"topic": "orders", "partition": 0, "replicas": [0]}],
                    "counts": {"Adding": 1},
                },
            )
            await ctl.send_leader_and_isr([tp], [0, 1])
            await ctl.update_metadata()

            p = await ctl_run("list")
            assert p.returncode == 0, p.stderr
            assert p.stdout.splitlines() == [
                "Current partition reassignments:",
                "orders-0: replicas: 0,1. adding: 1.",
                "",
                "PartitionReassignment grow (cluster kip): Running, batch 1",
                "  orders-0: current brokers: 0. target brokers: 0,1.",
            ]
            p = await ctl_run("list", "--json")
            assert json.loads(p.stdout)["partitions"] == [
                {
                    "clusterName": "kip",
                    "topic": "orders",
                    "partition": 0,
                    "replicas": [0, 1],
                    "addingReplicas": [1],
                    "removingReplicas": [],
                    "targetReplicas": [0, 1],
                    "reassignedBy": "grow",
                }
            ]

            p = await ctl_run("describe", "grow", "--json")
            assert p.returncode == 0, p.stderr
            (d,) = json.loads(p.stdout)["partitions"]
            assert d["currentLeader"] == 0 and d["leaderThrottle"] == rate
            assert d["newAssignedBrokers"] == [0, 1]
            assert d["newAssignedThrottles"] == {"0": None, "1": rate}
            b0, b1 = d["brokers"]
            assert (b0["broker"], b0["new"], b0["logDir"], b0["lag"]) == (0, False, src, 0)
            assert b0["logEndOffset"] == 80 * 50  # every record produced
            # The new replica, in its named dir, behind the leader by what it still has to
            # copy at 64 KiB/s (4 MB: it cannot have caught up yet).
            assert (b1["broker"], b1["new"], b1["logDir"]) == (1, True, dst_b)
            assert b1["lag"] == b0["logEndOffset"] - b1["logEndOffset"] > 0
            p = await ctl_run("describe", "grow")
            assert p.returncode == 0, p.stderr
            # The state from the record (the status lists no detail here): a step adding.
            assert "\norders-0: Adding\n" in p.stdout
            assert "  new assigned brokers: 0,1. throttles: 0: none, 1: 64.0 KiB/s." in p.stdout
            assert "  broker 1 (new): log end offset " in p.stdout

            p = await ctl_run("verify", "grow")
            assert p.returncode == 1
            assert p.stdout.splitlines() == [
                "Status of partition reassignment:",
                "Reassignment of partition orders-0 is still in progress.",
                "Reassignment of replica orders-0-1 completed successfully.",
                "Throttle still set on broker 0: leader.replication.throttled.replicas names "
                "orders-0 (leader.replication.throttled.rate 64.0 KiB/s).",
                "Throttle still set on broker 1: follower.replication.throttled.replicas names "
                "orders-0 (follower.replication.throttled.rate 64.0 KiB/s).",
                "PartitionReassignment grow: 1 not at their target yet.",
            ]

            # The end of the step: throttles lifted, broker 1 in sync, the state of record.
            for b in (0, 1):
                await ctl.client(b).set_configs(
                    wire.ThrottleConfig(
                        leader_replication_throttled_rate=0,
                        follower_replication_throttled_rate=0,
                        leader_replication_throttled_replicas=[],
                        follower_replication_throttled_replicas=[],
                    )
                )
            await wait_async(lambda: ctl.state[tp].isr == [0, 1], "broker 1 to join the ISR")
            record()
            kube.patch_status(
                "partitionreassignment",
                "grow",
                {"phase": "Succeeded", "currentBatch": [], "counts": {"Done": 1}},
            )
            p = await ctl_run("verify", "grow")
            assert p.returncode == 0, p.stdout + p.stderr
            assert p.stdout.splitlines() == [
                "Status of partition reassignment:",
                "Reassignment of partition orders-0 is completed.",
                "Reassignment of replica orders-0-1 completed successfully.",
                "PartitionReassignment grow: every partition is at its target.",
            ]
            p = await ctl_run("list")
            assert p.stdout.splitlines() == ["No partition reassignments found."]

            # A named dir the replica is not in fails verify, in Kafka's words.
            other = "b" if src.endswith("data-a") else "a"
            kube.apply(
                reassignment(
                    "elsewhere",
                    [
                        {
                            "topic": "orders",
                            "partition": 0,
                            "replicas": [0, 1],
                            "logDirs": [other, "b"],
                        }
                    ],
                )
            )
            p = await ctl_run("verify", "elsewhere", "--json")
            assert p.returncode == 1
            doc = json.loads(p.stdout)
            assert doc["complete"] is False
            assert [r["message"] for r in doc["replicas"]] == [
                f"Partition orders-0 on broker 0 is not being moved from log dir {src} to {other}.",
                "Reassignment of replica orders-0-1 completed successfully.",
            ]
            p = await ctl_run("verify", "nope")
            assert p.returncode == 1
            assert f"PartitionReassignment nope not found in namespace {kube.ns}" in p.stderr
        finally:
            await asyncio.to_thread(cl.stop)
            await ctl.stop()

    asyncio.run(scenario())


def follow_ctl(
    kube: KubeEnv, args: list[str], react: list[tuple[str, Callable[[], None]]]
) -> tuple[int, str, str]:
    """Run jbod-ctl and, each time its stderr shows the next awaited text, do what the
    operator would do then: the test moves on conditions, not on sleeps."""
    assert kube.kc.kubeconfig is not None and kube.kc.workdir is not None
    env = dict(os.environ, KUBECACHEDIR=str(kube.kc.workdir / "kubectl-cache"))
    cmd = (
        [str(JBOD_CTL)] if JBOD_CTL.exists() else [sys.executable, "-m", "jbod_operator.tools.cli"]
    )
    pending = list(react)
    err = []
    with subprocess.Popen(
        [
            *cmd,
            *args,
            "-n",
            kube.ns,
            "--kubeconfig",
            str(kube.kc.kubeconfig),
            "--kubectl",
            str(kube.kc.kubectl_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        for line in proc.stderr:
            err.append(line)
            while pending and pending[0][0] in line:
                pending.pop(0)[1]()
        out = proc.stdout.read()
        code = proc.wait(timeout=60)
    assert not pending, f"never saw {pending[0][0]!r} in:\n{''.join(err)}"
    return code, out, "".join(err)


def test_reassignments_apply_wait_follows_to_the_outcome(kube: KubeEnv, tmp_path: Path) -> None:
    """apply of a kafka-reassign-partitions file (converted as to-manifests does) --wait:
    the bar shows the status the operator writes (here the test, on cue), and the exit code is
    the outcome: 0 Succeeded, 4 RolledBack, 3 Cancelled, 5 timed out."""
    broker_cluster(kube)
    obj, status = topic(
        "clicks",
        [[(0, "/k/0/data-a"), (1, "/k/1/data-a")], [(1, "/k/1/data-b"), (2, "/k/2/data-a")]],
    )
    kube.apply(obj)
    kube.patch_status("topic", "clicks", status)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "clicks", "partition": 1, "replicas": [2, 0]}]}
        )
    )
    running = {
        "phase": "Running",
        "observedGeneration": 1,
        "progressPercent": 40,
        "rateBytesPerSecond": 2 << 20,
        "etaSeconds": 3,
        "batch": 1,
        "counts": {"Adding": 1},
        "bytesMoved": 4 << 20,
        "bytesToMove": 10 << 20,
    }

    def ended(phase: str, message: str) -> dict[str, Any]:
        return {
            "phase": phase,
            "observedGeneration": 1,
            "progressPercent": 100,
            "counts": {"Done": 1},
            "currentBatch": [],
            "conditions": [
                {
                    "type": phase,
                    "status": "True",
                    "reason": phase,
                    "message": message,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }

    name = "w1-brokers"
    code, out, err = follow_ctl(
        kube,
        ["reassignments", "apply", str(plan), "--cluster", "kip", "--name", "w1", "--wait"],
        [
            (
                f"applied PartitionReassignment {name}",
                lambda: kube.patch_status("partitionreassignment", name, running),
            ),
            (
                f"{name}: [########------------]  40%",
                lambda: kube.patch_status(
                    "partitionreassignment", name, ended("Succeeded", "1 partitions moved")
                ),
            ),
        ],
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["applied"] == [
        {"kind": "PartitionReassignment", "name": name, "namespace": kube.ns}
    ]
    (summary,) = result["reassignments"]
    assert (summary["phase"], summary["message"]) == ("Succeeded", "1 partitions moved")
    assert "\r" not in err  # not a terminal: plain lines
    assert (
        f"{name}: [########------------]  40%  2.0 MiB/s  ETA 3s  Running  batch 1  "
        "0/1 partitions  4.0 MiB of 10.0 MiB" in err
    )
    assert f"PartitionReassignment {name}: Succeeded: 1 partitions moved" in err
    spec = json.loads(kube.kubectl("get", "partitionreassignment", name, "-o", "json"))["spec"]
    assert spec["partitions"] == [{"topic": "clicks", "partition": 1, "replicas": [2, 0]}]

    # Applied again with rollback (a YAML manifest; generation 2): the old Succeeded is not
    # taken as the outcome; RolledBack is, with exit code 4.
    manifest = tmp_path / "rollback.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "PartitionReassignment",
                "metadata": {"name": name, "labels": {"jbod.io/cluster": "kip"}},
                "spec": {
                    "clusterName": "kip",
                    "partitions": [{"topic": "clicks", "partition": 1, "replicas": [2, 0]}],
                    "rollback": True,
                },
            }
        )
    )
    rolled = ended("RolledBack", "every partition is back at its original replicas")
    rolled["observedGeneration"] = 2
    code, out, err = follow_ctl(
        kube,
        ["reassignments", "apply", str(manifest), "--wait"],
        [
            (
                f"{name}: [####################] 100%",  # the stale Succeeded, drawn
                lambda: kube.patch_status("partitionreassignment", name, rolled),
            )
        ],
    )
    assert code == 4, err
    assert json.loads(out)["reassignments"][0]["phase"] == "RolledBack"
    assert f"PartitionReassignment {name}: RolledBack: every partition is back" in err

    # wait: Cancelled is 3; a reassignment that does not end in time is 5.
    kube.patch_status(
        "partitionreassignment", name, ended("Cancelled", "cancelled") | {"observedGeneration": 2}
    )
    p = kube.ctl("reassignments", "wait", name)
    assert p.returncode == 3, p.stderr
    assert json.loads(p.stdout)["phase"] == "Cancelled"
    kube.patch_status("partitionreassignment", name, running | {"observedGeneration": 2})
    p = kube.ctl("reassignments", "wait", name, "--timeout", "1")
    assert p.returncode == 5
    assert f"PartitionReassignment {name}: timed out after 1 s in phase Running at 40%" in p.stderr


def test_reassignments_apply_takes_a_reassignment_at_the_schemas_largest(
    kube: KubeEnv, tmp_path: Path
) -> None:
    """A PartitionReassignment with every partition the schema allows, each with long names,
    the most replicas and a dir path per replica, is applied (server-side): a client-side
    apply would copy it into its last-applied annotation, over the 256 KiB annotation limit."""
    spec: dict[str, Any] = {
        "clusterName": "kip",
        "partitions": [
            {
                "topic": "t" * 249,
                "partition": i,
                "replicas": list(range(MAX_REPLICAS)),
                "logDirs": ["/" + "p" * 63] * MAX_REPLICAS,
            }
            for i in range(MAX_PARTITIONS)
        ],
    }
    body: dict[str, Any] = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "PartitionReassignment",
        "metadata": {"name": "largest"},
        "spec": spec,
    }
    manifest = tmp_path / "largest.json"
    manifest.write_text(json.dumps(body))
    assert manifest.stat().st_size > 256 * 1024
    p = kube.ctl("reassignments", "apply", str(manifest))
    assert p.returncode == 0, p.stderr[:2000]
    got = json.loads(kube.kubectl("get", "partitionreassignment", "largest", "-o", "json"))
    assert len(got["spec"]["partitions"]) == MAX_PARTITIONS
    # Applied again with a change (the same field manager): merged, not refused.
    body["spec"]["pause"] = True
    manifest.write_text(json.dumps(body))
    p = kube.ctl("reassignments", "apply", str(manifest))
    assert p.returncode == 0, p.stderr[:2000]
    got = json.loads(kube.kubectl("get", "partitionreassignment", "largest", "-o", "json"))
    assert got["spec"]["pause"] is True and got["metadata"]["generation"] == 2


def test_rebalance_show_plot_and_commands(kube: KubeEnv, tmp_path: Path) -> None:
    """A Rebalance and its proposal ConfigMap as the operator writes them (report.json in data,
    plot.png in binaryData): show prints every disk, --plot writes the PNG byte for byte, and
    approve/refresh/stop set the command annotation."""
    from jbod_spark import plan_directory_balance
    from jbod_spark.plot import plot_png
    from tests.unit.test_planner import demo_snapshot

    report = plan_directory_balance(demo_snapshot()).report
    png = plot_png(report)
    kube.apply(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "Rebalance",
            "metadata": {"name": "even"},
            "spec": {"clusterName": "demo", "mode": "dirs-only"},
        }
    )
    kube.patch_status(
        "rebalance",
        "even",
        {
            "phase": "ProposalReady",
            "proposalConfigMap": "even-proposal",
            "conditions": [
                {
                    "type": "ProposalReady",
                    "status": "True",
                    "reason": "Planned",
                    "message": "ready for review",
                    "lastTransitionTime": "2026-11-24T19:00:00Z",
                }
            ],
        },
    )
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "even-proposal"},
            "data": {
                "report.json": report.model_dump_json(by_alias=True),
                "report.txt": report.text(),
            },
            "binaryData": {"plot.png": base64.b64encode(png).decode()},
        }
    )
    out_png = tmp_path / "proposal.png"
    p = kube.ctl("rebalance", "show", "even", "--plot", str(out_png))
    assert p.returncode == 0, p.stderr
    assert out_png.read_bytes() == png
    lines = p.stdout.splitlines()
    assert lines[0] == "Rebalance even (cluster demo, mode dirs-only): ProposalReady"
    assert lines[-1] == f"plot: {out_png}"
    for d in report.dirs:
        assert any(ln.split()[:2] == [str(d.broker_id), d.name] for ln in lines), d
    p = kube.ctl("rebalance", "show", "even", "-o", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["phase"] == "ProposalReady" and doc["plot"] is None
    assert doc["report"]["planId"] == report.plan_id
    for command in ("approve", "refresh", "stop"):
        p = kube.ctl("rebalance", command, "even")
        assert p.returncode == 0, p.stderr
        got = json.loads(kube.kubectl("get", "rebalance", "even", "-o", "json"))
        assert got["metadata"]["annotations"]["jbod.io/rebalance"] == command
    p = kube.ctl("rebalance", "show", "missing")
    assert p.returncode == 1 and "Rebalance missing not found" in p.stderr
