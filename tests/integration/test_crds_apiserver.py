"""The generated CRDs on a real kube-apiserver: they install, valid objects are stored (with
the schema's defaults), and invalid ones are refused by the server with a clear message."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jbod_operator.models import (
    BalanceTrigger,
    BrokerClusterSpec,
    KafkaClusterSpec,
    LogDirMoveSpec,
    PartitionReassignmentSpec,
    PartitionShardSpec,
    RebalanceSpec,
    TopicSpec,
)
from jbod_operator.tools import crdgen
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "crds"
NAMESPACE = "crd-tests"
API_VERSION = "jbod.io/v1alpha1"
RESOURCES: list[Any] = list(crdgen.RESOURCES)
CRD_NAMES = [f"{m.plural}.jbod.io" for m in RESOURCES]


def obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


def broker_cluster(name: str = "bc1", **spec: Any) -> dict[str, Any]:
    base = {"replicas": 3, "logDirs": [{"name": "d0", "size": "10Gi"}]}
    return obj("BrokerCluster", name, {**base, **spec})


def topic(name: str = "orders", **spec: Any) -> dict[str, Any]:
    base = {"clusterName": "bc1", "partitions": 6, "replicationFactor": 3}
    return obj("Topic", name, {**base, **spec})


MOVE = {"brokerId": 0, "topic": "orders", "partition": 1, "logDir": "d1"}


def log_dir_move(name: str = "move1", **spec: Any) -> dict[str, Any]:
    return obj("LogDirMove", name, {"clusterName": "bc1", **spec})


def reassignment(name: str = "ra1", **assignment: Any) -> dict[str, Any]:
    target = {"topic": "orders", "partition": 0, "replicas": [1, 2, 3], **assignment}
    return obj("PartitionReassignment", name, {"clusterName": "bc1", "partitions": [target]})


def rebalance(name: str = "rb1", **spec: Any) -> dict[str, Any]:
    return obj("Rebalance", name, {"clusterName": "bc1", **spec})


def kafka_cluster(name: str = "kc1", **spec: Any) -> dict[str, Any]:
    return obj("KafkaCluster", name, {"bootstrapServers": ["kafka-0.kafka:9092"], **spec})


SECRET_REF = {"secretKeyRef": {"name": "kafka-admin", "key": "password"}}


def run(
    kube: KubeCluster, *args: str, manifest: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    stdin = None if manifest is None else json.dumps(manifest)
    return kube.kubectl(*args, input=stdin)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args[2:]} failed:\n{result.stderr}"
    return result.stdout


def get(kube: KubeCluster, plural: str, name: str) -> dict[str, Any]:
    out = ok(kube.kubectl("get", f"{plural}.jbod.io", name, "-n", NAMESPACE, "-o", "json"))
    got: dict[str, Any] = json.loads(out)
    return got


def create(kube: KubeCluster, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return kube.kubectl("create", "-f", "-", input=json.dumps(manifest))


@pytest.fixture(scope="module")
def kube(kube_cluster: KubeCluster) -> KubeCluster:
    """kube_cluster with crds/ applied, every CRD Established, and a namespace to play in."""
    applied = kube_cluster.kubectl("apply", "-f", str(CRD_DIR))
    assert applied.returncode == 0, f"kubectl apply -f crds/ failed:\n{applied.stderr}"
    assert "Warning" not in applied.stderr, applied.stderr
    kube_cluster.wait_established(*CRD_NAMES)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    ok(kube_cluster.kubectl("apply", "-f", "-", input=json.dumps(namespace)))
    return kube_cluster


# -- installing ---------------------------------------------------------------------------------


def test_every_crd_is_established_with_the_generated_schema(kube: KubeCluster) -> None:
    for model in RESOURCES:
        name = f"{model.plural}.jbod.io"
        stored = json.loads(ok(kube.kubectl("get", "crd", name, "-o", "json")))
        conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert conditions["Established"] == "True", stored["status"]
        assert conditions["NamesAccepted"] == "True", stored["status"]
        # What the server stored is what the models say: the YAML round-trips exactly.
        expected = crdgen.crd(model)["spec"]
        for key in ("group", "names", "scope"):
            assert stored["spec"][key] == expected[key]
        assert stored["spec"]["versions"] == expected["versions"]


def test_applying_again_changes_nothing(kube: KubeCluster) -> None:
    out = ok(kube.kubectl("apply", "-f", str(CRD_DIR)))
    assert out.count("unchanged") == len(CRD_NAMES), out


def test_discovery_short_names_and_category(kube: KubeCluster) -> None:
    out = ok(kube.kubectl("api-resources", "--api-group=jbod.io", "-o", "wide"))
    for model in RESOURCES:
        line = next(ln for ln in out.splitlines() if ln.split()[0] == model.plural)
        assert model.kind in line.split()
        for short in model.short_names:
            assert short in line
        assert "jbod" in line.split()[-1]  # CATEGORIES column
    ok(kube.kubectl("get", "jbod", "-n", NAMESPACE))


# -- valid objects --------------------------------------------------------------------------------

VALID = [
    broker_cluster(
        "bc1",
        replicas=3,
        logDirs=[
            {"name": "d0", "size": "100Gi"},
            {"name": "d1", "size": "1.5Ti", "storageClassName": "fast-ssd"},
        ],
        racks=["rack-a", "rack-b"],
        config={"min.insync.replicas": "2", "num.replica.alter.log.dirs.threads": "4"},
        resources={"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
    ),
    broker_cluster(
        "balanced",
        balance={
            "enabled": True,
            "diskSpreadThresholdPercent": 7.5,
            "windowSeconds": 300,
            "cooldownSeconds": 1800,
            "triggers": ["disk-imbalance", "disk-added"],
            "autoApprove": True,
            "sampleIntervalSeconds": 10,
            "historySamples": 360,
        },
    ),
    topic("orders", minInsyncReplicas=2, configs={"retention.ms": "604800000"}),
    topic("offsets", topicName="__consumer_offsets", partitions=50, replicationFactor=1),
    log_dir_move("move1", moves=[MOVE, {**MOVE, "partition": 2, "logDir": "/data/d1"}]),
    log_dir_move("drain1", drain={"brokerId": 2, "logDir": "d0"}, throttleBytesPerSecond=0),
    reassignment("ra1", logDirs=["d0", "d1", "/data/d0"]),
    rebalance("rb1", mode="add-brokers", brokers=[3], maxConcurrentMovesPerBroker=3),
    rebalance("rb2", mode="remove-disks", logDirs=[{"brokerId": 0, "logDir": "d1"}]),
    obj(
        "PartitionShard",
        "orders-0",
        {
            "clusterName": "bc1",
            "topic": "orders",
            "topicUid": "0b4c6c1e-3d3e-4f0a-9a43-2d0f5d9c7a11",
            "shard": 0,
            "partitions": [
                {
                    "partition": 0,
                    "replicas": [{"brokerId": 0, "logDir": "/var/lib/jbod/data-d0"}],
                    "leader": 0,
                    "leaderEpoch": 0,
                    "isr": [0],
                    "partitionEpoch": 0,
                }
            ],
        },
    ),
    kafka_cluster("kc1"),
    kafka_cluster(
        "kc-sasl",
        bootstrapServers=["10.0.0.1:9094", "[::1]:9094"],
        securityProtocol="SASL_SSL",
        sasl={"mechanism": "SCRAM-SHA-512", "username": SECRET_REF, "password": SECRET_REF},
        tls={
            "ca": {"secretKeyRef": {"name": "kafka-ca", "key": "ca.crt"}},
            "verifyHostname": True,
        },
        refreshIntervalSeconds=10,
    ),
]
SPEC_MODELS: dict[str, Any] = {
    "BrokerCluster": BrokerClusterSpec,
    "Topic": TopicSpec,
    "LogDirMove": LogDirMoveSpec,
    "PartitionReassignment": PartitionReassignmentSpec,
    "Rebalance": RebalanceSpec,
    "KafkaCluster": KafkaClusterSpec,
    "PartitionShard": PartitionShardSpec,
}
PLURALS = {m.kind: m.plural for m in RESOURCES}


@pytest.mark.parametrize("manifest", VALID, ids=[m["metadata"]["name"] for m in VALID])
def test_valid_objects_apply_and_parse(kube: KubeCluster, manifest: dict[str, Any]) -> None:
    ok(run(kube, "apply", "-f", "-", manifest=manifest))
    stored = get(kube, PLURALS[manifest["kind"]], manifest["metadata"]["name"])
    for key, value in manifest["spec"].items():
        assert stored["spec"][key] == value
    # The stored spec, with the server's defaults, is a valid model for the operator.
    SPEC_MODELS[manifest["kind"]].model_validate(stored["spec"])


def test_server_applies_schema_defaults(kube: KubeCluster) -> None:
    ok(run(kube, "apply", "-f", "-", manifest=log_dir_move("defaults", moves=[MOVE])))
    spec = get(kube, "logdirmoves", "defaults")["spec"]
    assert spec["timeoutSeconds"] == 3600
    assert spec["replicaWaitSeconds"] == 10
    assert spec["maxConcurrentMovesPerBroker"] == 2
    assert spec["cancel"] is False
    assert "throttleBytesPerSecond" not in spec
    ok(run(kube, "apply", "-f", "-", manifest=broker_cluster("bc-defaults")))
    bc = get(kube, "brokerclusters", "bc-defaults")["spec"]
    assert bc["imagePullPolicy"] == "IfNotPresent"
    assert bc["image"] == "ghcr.io/jbod-operator/broker:0.1.0"
    assert "racks" not in bc
    assert "balance" not in bc  # continuous detection is off unless asked for
    ok(run(kube, "apply", "-f", "-", manifest=broker_cluster("bc-balance", balance={})))
    balance = get(kube, "brokerclusters", "bc-balance")["spec"]["balance"]
    assert balance == {
        "enabled": False,
        "diskSpreadThresholdPercent": 10.0,
        "windowSeconds": 600,
        "cooldownSeconds": 3600,
        "autoApprove": False,
        "sampleIntervalSeconds": 30,
        "historySamples": 240,
    }
    assert BrokerClusterSpec.model_validate(
        get(kube, "brokerclusters", "bc-balance")["spec"]
    ).balance.triggers == list(BalanceTrigger)  # type: ignore[union-attr]


def test_unknown_fields_are_refused_by_strict_validation(kube: KubeCluster) -> None:
    result = create(kube, topic("typo", partitionz=3))
    assert result.returncode != 0
    assert 'unknown field "spec.partitionz"' in result.stderr, result.stderr


def test_server_side_dry_run(kube: KubeCluster) -> None:
    out = ok(run(kube, "apply", "--dry-run=server", "-f", "-", manifest=topic("dry-run-only")))
    assert "(server dry run)" in out
    missing = kube.kubectl("get", "topics.jbod.io", "dry-run-only", "-n", NAMESPACE)
    assert missing.returncode != 0 and "NotFound" in missing.stderr
    # The dry run validates like the real thing, CEL included.
    bad = run(
        kube,
        "apply",
        "--dry-run=server",
        "-f",
        "-",
        manifest=topic("dry-bad", replicationFactor=1, minInsyncReplicas=2),
    )
    assert bad.returncode != 0
    assert "minInsyncReplicas cannot exceed replicationFactor" in bad.stderr


def test_status_subresource_and_printer_columns(kube: KubeCluster) -> None:
    ok(run(kube, "apply", "-f", "-", manifest=topic("shown", partitions=12)))
    # status is a subresource: the main resource ignores it, the subresource sets it.
    ignored = topic("shown", partitions=12)
    ignored["status"] = {"topicName": "ignored"}
    ok(run(kube, "apply", "-f", "-", manifest=ignored))
    assert "status" not in get(kube, "topics", "shown")
    status = {
        "status": {
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Created",
                    "message": "all partitions online",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ],
            "partitions": [
                {
                    "partition": 0,
                    "replicas": [{"brokerId": 1}],
                    "leader": 1,
                    "leaderEpoch": 0,
                    "isr": [1],
                }
            ],
        }
    }
    ok(
        kube.kubectl(
            "patch",
            "topics.jbod.io",
            "shown",
            "-n",
            NAMESPACE,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps(status),
        )
    )
    stored = get(kube, "topics", "shown")["status"]
    assert stored["conditions"][0]["status"] == "True"
    assert stored["partitions"][0]["partitionEpoch"] == 0  # a status default

    table = ok(kube.kubectl("get", "topics", "-n", NAMESPACE, "shown"))
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "CLUSTER", "PARTITIONS", "RF", "READY", "AGE"]
    assert row.split()[:5] == ["shown", "bc1", "12", "3", "True"]
    wide = ok(kube.kubectl("get", "jt", "-n", NAMESPACE, "shown", "-o", "wide"))
    assert wide.splitlines()[0].split() == [
        "NAME",
        "CLUSTER",
        "PARTITIONS",
        "RF",
        "READY",
        "MESSAGE",
        "AGE",
    ]
    assert "all partitions online" in wide.splitlines()[1]

    for model in RESOURCES:
        example = next(m for m in VALID if m["kind"] == model.kind)
        ok(run(kube, "apply", "-f", "-", manifest=example))
        out = ok(kube.kubectl("get", model.plural, "-n", NAMESPACE))
        columns = out.splitlines()[0].split()
        wanted = [c["name"].upper() for c in model.printer_columns if not c.get("priority")]
        assert columns == ["NAME", *wanted], out


# -- invalid objects ----------------------------------------------------------------------------


@dataclass
class Refused:
    """``manifest`` must be refused (on create, or as an update of ``before``) with ``expect``."""

    id: str
    manifest: dict[str, Any]
    expect: list[str]
    before: dict[str, Any] | None = None


REFUSED = [
    # wrong types
    Refused(
        "replicas-not-int",
        broker_cluster("bad-type", replicas="three"),
        ["spec.replicas", "must be of type integer"],
    ),
    Refused(
        "partition-not-int",
        log_dir_move("bad-type", moves=[{**MOVE, "partition": "zero"}]),
        ["spec.moves[0].partition", "must be of type integer"],
    ),
    # counts
    Refused(
        "negative-replicas",
        broker_cluster("neg", replicas=-1),
        ["spec.replicas", "should be greater than or equal to 1"],
    ),
    Refused(
        "zero-partitions",
        topic("zero", partitions=0),
        ["spec.partitions", "should be greater than or equal to 1"],
    ),
    Refused(
        "negative-throttle",
        log_dir_move("neg-throttle", moves=[MOVE], throttleBytesPerSecond=-1),
        ["spec.throttleBytesPerSecond", "should be greater than or equal to 0"],
    ),
    Refused(
        "empty-reassignment",
        obj("PartitionReassignment", "empty", {"clusterName": "bc1", "partitions": []}),
        ["spec.partitions", "should have at least 1 items"],
    ),
    # names
    Refused(
        "topic-with-slash",
        log_dir_move("bad-topic", moves=[{**MOVE, "topic": "../x"}]),
        ["spec.moves[0].topic", "should match"],
    ),
    Refused(
        "topic-dot-dot",
        topic("dotdot", topicName=".."),
        ["spec.topicName", "should match"],
    ),
    Refused(
        "log-dir-uppercase",
        broker_cluster("upper", logDirs=[{"name": "Data0", "size": "1Gi"}]),
        ["spec.logDirs[0].name", "should match"],
    ),
    Refused(
        "log-dir-too-long",
        broker_cluster("long", logDirs=[{"name": "d" * 64, "size": "1Gi"}]),
        ["spec.logDirs[0].name", "may not be more than 63 bytes"],
    ),
    Refused(
        "log-dir-traversal-name",
        broker_cluster("traversal", logDirs=[{"name": "data/../x", "size": "1Gi"}]),
        ["spec.logDirs[0].name", "should match"],
    ),
    Refused(
        "log-dir-relative-path",
        log_dir_move("relative", moves=[{**MOVE, "logDir": "data/d1"}]),
        ["spec.moves[0].logDir", "should match"],
    ),
    Refused(
        "log-dir-dot-dot-path",
        log_dir_move("dotdot", drain={"brokerId": 0, "logDir": "/data/../etc"}),
        ["spec.drain.logDir", "should match"],
    ),
    Refused(
        "bad-quantity",
        broker_cluster("qty", logDirs=[{"name": "d0", "size": "ten gigs"}]),
        ["spec.logDirs[0].size", "should match"],
    ),
    Refused(
        "bad-config-key",
        broker_cluster("cfg", config={"Min InSync": "2"}),
        ["spec.config", "keys must be 1 to 255 characters long and match"],
    ),
    # required fields and enums
    Refused(
        "missing-replication-factor",
        obj("Topic", "no-rf", {"clusterName": "bc1", "partitions": 3}),
        ["spec.replicationFactor", "Required value"],
    ),
    Refused(
        "missing-log-dirs",
        obj("BrokerCluster", "no-dirs", {"replicas": 1}),
        ["spec.logDirs", "Required value"],
    ),
    Refused(
        "missing-spec",
        {
            "apiVersion": API_VERSION,
            "kind": "Topic",
            "metadata": {"name": "no-spec", "namespace": NAMESPACE},
        },
        ["spec", "Required value"],
    ),
    Refused(
        "unknown-image-pull-policy",
        broker_cluster("pull", imagePullPolicy="Sometimes"),
        ["spec.imagePullPolicy", 'Unsupported value: "Sometimes"', '"IfNotPresent"'],
    ),
    # continuous detection (issue 16)
    Refused(
        "balance-unknown-trigger",
        broker_cluster("trig", balance={"triggers": ["disk-full"]}),
        ["spec.balance.triggers[0]", 'Unsupported value: "disk-full"'],
    ),
    Refused(
        "balance-trigger-twice",
        broker_cluster("trig2", balance={"triggers": ["disk-added", "disk-added"]}),
        ["spec.balance.triggers[1]", "Duplicate value"],
    ),
    Refused(
        "balance-huge-window",
        broker_cluster("win", balance={"windowSeconds": 10**12}),
        ["spec.balance.windowSeconds", "should be less than or equal to 604800"],
    ),
    Refused(
        "balance-zero-threshold",
        broker_cluster("thr", balance={"diskSpreadThresholdPercent": 0}),
        ["spec.balance.diskSpreadThresholdPercent", "must be at least 0.5 percentage points"],
    ),
    Refused(
        "balance-small-threshold",
        broker_cluster("thr2", balance={"diskSpreadThresholdPercent": 0.25}),
        ["spec.balance.diskSpreadThresholdPercent", "should be greater than or equal to 0.5"],
    ),
    Refused(
        "balance-history-shorter-than-window",
        broker_cluster("hist", balance={"windowSeconds": 600, "historySamples": 10}),
        ["spec.balance", "historySamples x sampleIntervalSeconds must be longer than"],
    ),
    Refused(
        "balance-zero-interval",
        broker_cluster("intv", balance={"sampleIntervalSeconds": 0}),
        ["spec.balance.sampleIntervalSeconds", "should be greater than or equal to 1"],
    ),
    # CEL
    Refused(
        "min-insync-above-rf",
        topic("isr", replicationFactor=2, minInsyncReplicas=3),
        ["minInsyncReplicas cannot exceed replicationFactor"],
    ),
    Refused(
        "moves-and-drain",
        log_dir_move("both", moves=[MOVE], drain={"brokerId": 0, "logDir": "d0"}),
        ["spec", "set exactly one of moves or drain"],
    ),
    Refused(
        "neither-moves-nor-drain",
        log_dir_move("neither"),
        ["spec", "set exactly one of moves or drain"],
    ),
    Refused(
        "empty-moves-no-drain",
        log_dir_move("empty", moves=[]),
        ["spec", "set exactly one of moves or drain"],
    ),
    Refused(
        # Issue 14 (6): a Kubernetes name may have 253 characters, a Kafka topic name 249.
        "topic-name-over-249",
        topic("t" * 253),
        ["metadata.name is longer than a Kafka topic name may be (249 characters)"],
    ),
    Refused(
        "topic-name-250",
        topic("t" * 250),
        ["set spec.topicName"],
    ),
    Refused(
        "log-dirs-per-replica",
        reassignment("short", logDirs=["d0", "d1"]),
        ["spec.partitions[0]", "logDirs must name one directory per replica"],
    ),
    # list types
    Refused(
        "duplicate-move",
        log_dir_move("dup", moves=[MOVE, {**MOVE, "logDir": "d0"}]),
        ["spec.moves[1]", "Duplicate value"],
    ),
    Refused(
        "duplicate-replica-ids",
        reassignment("dup-ids", replicas=[1, 2, 1]),
        ["spec.partitions[0].replicas[2]", "Duplicate value: 1"],
    ),
    Refused(
        # Issue 14 (6): one partition given two targets.
        "reassignment-partition-twice",
        obj(
            "PartitionReassignment",
            "twice",
            {
                "clusterName": "bc1",
                "partitions": [
                    {"topic": "orders", "partition": 0, "replicas": [1, 2]},
                    {"topic": "orders", "partition": 1, "replicas": [1, 2]},
                    {"topic": "orders", "partition": 0, "replicas": [2, 3]},
                ],
            },
        ),
        ["spec.partitions[2]", "Duplicate value", '"partition":0', '"topic":"orders"'],
    ),
    Refused(
        "duplicate-log-dir-names",
        broker_cluster(
            "dup-dirs", logDirs=[{"name": "d0", "size": "1Gi"}, {"name": "d0", "size": "2Gi"}]
        ),
        ["spec.logDirs[1]", "Duplicate value", '"name":"d0"'],
    ),
    # transition rules: updates of an object that exists
    Refused(
        "decrease-partitions",
        topic("shrink", partitions=3),
        ["spec.partitions", "partitions cannot be decreased"],
        before=topic("shrink", partitions=6),
    ),
    Refused(
        "rebalance-add-brokers-without-brokers",
        rebalance("rb-nobrokers", mode="add-brokers"),
        ["modes add-brokers and remove-brokers need brokers"],
    ),
    Refused(
        "rebalance-remove-disks-without-disks",
        rebalance("rb-nodisks", mode="remove-disks"),
        ["mode remove-disks needs logDirs"],
    ),
    Refused(
        "rebalance-unknown-mode",
        rebalance("rb-mode", mode="everything"),
        ["spec.mode", "Unsupported value"],
    ),
    Refused(
        "rebalance-band-zero",
        rebalance("rb-band", balanceBandPercent=0),
        ["spec.balanceBandPercent"],
    ),
    Refused(
        "change-cluster-name",
        topic("move-cluster", clusterName="bc2"),
        ["spec.clusterName", "clusterName is immutable"],
        before=topic("move-cluster"),
    ),
    Refused(
        "change-replication-factor",
        topic("rf", replicationFactor=2),
        ["spec.replicationFactor", "replicationFactor is immutable"],
        before=topic("rf"),
    ),
    Refused(
        "change-topic-name",
        topic("rename", topicName="other"),
        ["spec.topicName", "topicName is immutable"],
        before=topic("rename", topicName="first"),
    ),
    Refused(
        "kafka-cluster-sasl-without-credentials",
        kafka_cluster("no-sasl", securityProtocol="SASL_SSL"),
        ["spec", "sasl is required with SASL_PLAINTEXT and SASL_SSL"],
    ),
    Refused(
        "kafka-cluster-client-cert-without-key",
        kafka_cluster(
            "half-mtls",
            securityProtocol="SSL",
            tls={"certificate": {"secretKeyRef": {"name": "c", "key": "tls.crt"}}},
        ),
        ["spec.tls", "set both certificate and key"],
    ),
    Refused(
        "add-topic-name",
        topic("add-name", topicName="other"),
        ["spec", "topicName is immutable: it cannot be added or removed"],
        before=topic("add-name"),
    ),
]


@pytest.mark.parametrize("case", REFUSED, ids=[c.id for c in REFUSED])
def test_invalid_objects_are_refused(kube: KubeCluster, case: Refused) -> None:
    name = case.manifest["metadata"]["name"]
    plural = PLURALS[case.manifest["kind"]]
    if case.before is not None:
        ok(create(kube, case.before))
        result = run(kube, "replace", "-f", "-", manifest=case.manifest)
    else:
        result = create(kube, case.manifest)
    assert result.returncode != 0, f"{case.id}: accepted\n{result.stdout}"
    for text in case.expect:
        assert text in result.stderr, f"{case.id}: {text!r} not in\n{result.stderr}"
    if case.before is None:
        missing = kube.kubectl("get", f"{plural}.jbod.io", name, "-n", NAMESPACE)
        assert "NotFound" in missing.stderr
    else:
        stored = get(kube, plural, name)
        assert stored["spec"] == {**stored["spec"], **case.before["spec"]}


def test_topic_names_up_to_kafka_s_limit_are_stored(kube: KubeCluster) -> None:
    """The root CEL rule of issue 14 (6) refuses only what Kafka would: 249 characters without
    spec.topicName, and any Kubernetes name with one, are stored (and renaming stays refused)."""
    longest = "t" * 249
    ok(create(kube, topic(longest)))
    ok(create(kube, topic("k" * 253, topicName="short-kafka-name")))
    assert get(kube, "topics", "k" * 253)["spec"]["topicName"] == "short-kafka-name"
    removed = run(kube, "replace", "-f", "-", manifest=topic("k" * 253))
    assert removed.returncode != 0
    assert "topicName is immutable: it cannot be added or removed" in removed.stderr


def test_a_reassignment_naming_distinct_partitions_is_stored(kube: KubeCluster) -> None:
    spec = {
        "clusterName": "bc1",
        "partitions": [
            {"topic": "orders", "partition": 0, "replicas": [1, 2]},
            {"topic": "orders", "partition": 1, "replicas": [1, 2]},
            {"topic": "clicks", "partition": 0, "replicas": [2, 3]},
        ],
    }
    ok(create(kube, obj("PartitionReassignment", "distinct", spec)))
    stored = get(kube, "partitionreassignments", "distinct")["spec"]
    PartitionReassignmentSpec.model_validate(stored)
    assert len(stored["partitions"]) == 3


def test_enough_invalid_cases() -> None:
    assert len(REFUSED) >= 15
