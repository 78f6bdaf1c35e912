"""Manifests of a BrokerCluster: names, PVC templates, env, probes, security, ownership."""

from __future__ import annotations

import copy
import json
import os
import sys
import types
from typing import Any

import pytest

from jbod_operator.models import BrokerCluster
from jbod_operator.plan import builders

UID = "0f6e4c1a-8a55-4e1c-9d53-1c1c6f5f8a10"
CONTROLLER = "http://jbod-operator.jbod-system.svc:8080/clusters/kafka/main"
TOKEN = "s3cr3t-token-0123456789"
CLUSTER_ID = "D25MGopVThydUxwcb1-KEA"
"""UID's 16 bytes as Kafka's Uuid prints them (base64url, no padding)."""


def cluster(**spec: Any) -> BrokerCluster:
    body: dict[str, Any] = {
        "apiVersion": "jbod.io/v1alpha1",
        "metadata": {"name": "main", "namespace": "kafka", "uid": UID, "generation": 3},
        "spec": {
            "replicas": 3,
            "logDirs": [
                {"name": "0", "size": "10Gi", "storageClassName": "fast"},
                {"name": "1", "size": "20Gi"},
            ],
            **spec,
        },
    }
    return BrokerCluster.model_validate(body)


def sts_of(bc: BrokerCluster) -> dict[str, Any]:
    return builders.build_statefulset(bc, controller_url=CONTROLLER, token_secret="main-tok")


def container(sts: dict[str, Any]) -> dict[str, Any]:
    containers = sts["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    c: dict[str, Any] = containers[0]
    return c


def env_of(sts: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(sts)["env"]}


def all_manifests(bc: BrokerCluster) -> list[dict[str, Any]]:
    return [
        sts_of(bc),
        builders.build_headless_service(bc),
        builders.build_configmap(bc),
        builders.build_token_secret(bc, TOKEN),
        builders.build_pdb(bc),
    ]


# -- names --------------------------------------------------------------------------------


def test_names_are_deterministic() -> None:
    bc = cluster()
    assert builders.statefulset_name(bc) == "main-broker"
    assert builders.headless_service_name(bc) == "main-brokers"
    assert builders.configmap_name(bc) == "main-broker-config"
    assert builders.token_secret_name(bc) == "main-broker-token"
    assert builders.pdb_name(bc) == "main-broker"
    assert builders.volume_name(bc.spec.log_dirs[0]) == "data-0"
    assert builders.volume_name("hot") == "data-hot"
    assert builders.mount_path("hot") == "/var/lib/jbod/data-hot"
    assert builders.pod_name(bc, 2) == "main-broker-2"
    assert builders.pvc_name(bc, "1", 2) == "data-1-main-broker-2"
    assert builders.broker_url(bc, 1) == "http://main-broker-1.main-brokers.kafka.svc:9092"


def test_log_dir_name_from_path_inverts_mount_path() -> None:
    assert builders.log_dir_name_from_path(builders.mount_path("hot")) == "hot"
    assert builders.log_dir_name_from_path("/var/lib/jbod/data-hot/") == "hot"
    assert builders.log_dir_name_from_path("/var/lib/jbod/data-") is None
    assert builders.log_dir_name_from_path("/mnt/data-hot") is None
    assert builders.log_dir_name_from_path("/var/lib/jbod/data-a/b") is None


def test_rack_of_cycles_through_racks() -> None:
    bc = cluster(racks=["a", "b"])
    assert [builders.rack_of(bc, i) for i in range(5)] == ["a", "b", "a", "b", "a"]
    assert builders.rack_of(cluster(), 0) is None


# -- StatefulSet --------------------------------------------------------------------------


def test_statefulset_shape() -> None:
    sts = sts_of(cluster())
    assert sts["apiVersion"] == "apps/v1"
    assert sts["kind"] == "StatefulSet"
    assert sts["metadata"]["name"] == "main-broker"
    assert sts["metadata"]["namespace"] == "kafka"
    spec = sts["spec"]
    assert spec["replicas"] == 3
    assert spec["serviceName"] == "main-brokers"
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    assert spec["selector"]["matchLabels"] == builders.selector_labels(cluster())
    # The selector must match the pod template's labels.
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 60
    assert pod["enableServiceLinks"] is False


def test_one_pvc_template_per_log_dir_in_spec_order() -> None:
    sts = sts_of(cluster())
    assert sts["spec"]["volumeClaimTemplates"] == [
        {
            "metadata": {"name": "data-0"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
                "storageClassName": "fast",
            },
        },
        {
            "metadata": {"name": "data-1"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "20Gi"}},
            },
        },
    ]


def test_mounts_every_log_dir_config_and_token() -> None:
    mounts = {m["name"]: m for m in container(sts_of(cluster()))["volumeMounts"]}
    assert mounts["data-0"] == {"name": "data-0", "mountPath": "/var/lib/jbod/data-0"}
    assert mounts["data-1"] == {"name": "data-1", "mountPath": "/var/lib/jbod/data-1"}
    assert mounts["config"] == {
        "name": "config",
        "mountPath": "/etc/jbod/server.properties",
        "subPath": "server.properties",
        "readOnly": True,
    }
    assert mounts["token"] == {"name": "token", "mountPath": "/etc/jbod/token", "readOnly": True}
    volumes = {v["name"]: v for v in sts_of(cluster())["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == "main-broker-config"
    assert volumes["token"]["secret"]["secretName"] == "main-tok"
    assert volumes["token"]["secret"]["items"] == [{"key": "token", "path": "token"}]
    # Every mount has a volume or a claim template.
    templates = {t["metadata"]["name"] for t in sts_of(cluster())["spec"]["volumeClaimTemplates"]}
    assert set(mounts) == set(volumes) | templates


def test_env() -> None:
    env = env_of(sts_of(cluster()))
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["JBOD_BROKER_ID"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    assert env["JBOD_LOG_DIRS"] == "/var/lib/jbod/data-0,/var/lib/jbod/data-1"
    assert env["JBOD_ADVERTISED_URL"] == "http://$(POD_NAME).main-brokers.kafka.svc:9092"
    assert env["JBOD_CONTROLLER_URL"] == CONTROLLER
    assert env["JBOD_TOKEN_FILE"] == "/etc/jbod/token/token"
    assert builders.RACKS_ENV not in env
    names = [e["name"] for e in container(sts_of(cluster()))["env"]]
    # $(POD_NAME) only expands if POD_NAME is defined earlier in the list.
    assert names.index("POD_NAME") < names.index("JBOD_ADVERTISED_URL")


def test_advertised_url_expands_to_broker_url() -> None:
    bc = cluster()
    advertised = env_of(sts_of(bc))["JBOD_ADVERTISED_URL"]
    assert advertised.replace("$(POD_NAME)", builders.pod_name(bc, 2)) == builders.broker_url(bc, 2)


def test_every_jbod_variable_is_a_broker_setting() -> None:
    # The broker refuses to start on an unknown JBOD_* variable.
    from jbod_broker.config import BrokerConfig

    known = {f.alias for f in BrokerConfig.model_fields.values() if f.alias}
    for bc in (cluster(), cluster(racks=["a", "b"])):
        for name in env_of(sts_of(bc)):
            if name.startswith("JBOD_"):
                assert name[5:].lower().replace("_", ".") in known, name


def test_container_image_ports_resources() -> None:
    bc = cluster(
        image="registry.local/broker:1.2",
        imagePullPolicy="Always",
        resources={"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
    )
    c = container(sts_of(bc))
    assert c["image"] == "registry.local/broker:1.2"
    assert c["imagePullPolicy"] == "Always"
    assert c["ports"] == [
        {"name": "http", "containerPort": 9092, "protocol": "TCP"},
        {"name": "kafka", "containerPort": 9093, "protocol": "TCP"},
    ]
    assert c["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"memory": "2Gi"},
    }
    assert c["args"] == ["--config", "/etc/jbod/server.properties"]
    assert "command" not in c
    assert "resources" not in container(sts_of(cluster()))


def test_probes() -> None:
    c = container(sts_of(cluster()))
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": "HTTP"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": "HTTP"}
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"


def test_security_context() -> None:
    sts = sts_of(cluster())
    pod = sts["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert pod["runAsUser"] == 10001
    assert pod["fsGroup"] == 10001
    c = container(sts)["securityContext"]
    assert c["allowPrivilegeEscalation"] is False
    assert c["readOnlyRootFilesystem"] is True
    assert c["capabilities"] == {"drop": ["ALL"]}


def test_racks_go_through_the_launcher() -> None:
    c = container(sts_of(cluster(racks=["zone-a", "zone-b"])))
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env[builders.RACKS_ENV] == "zone-a,zone-b"
    assert c["command"] == ["python", "-c", builders.RACK_LAUNCHER]
    assert c["args"] == ["--config", "/etc/jbod/server.properties"]


@pytest.mark.parametrize(("broker_id", "rack"), [("0", "zone-a"), ("1", "zone-b"), ("4", "zone-a")])
def test_rack_launcher_picks_rack_by_ordinal(
    monkeypatch: pytest.MonkeyPatch, broker_id: str, rack: str
) -> None:
    seen: dict[str, Any] = {}

    def fake_main(argv: list[str]) -> int:
        seen["argv"] = argv
        seen["rack"] = os.environ.get("JBOD_BROKER_RACK")
        seen["racks_left"] = builders.RACKS_ENV in os.environ
        return 0

    stub = types.ModuleType("jbod_broker.__main__")
    stub.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jbod_broker.__main__", stub)
    monkeypatch.setenv(builders.RACKS_ENV, "zone-a,zone-b")
    monkeypatch.setenv("JBOD_BROKER_ID", broker_id)
    monkeypatch.delenv("JBOD_BROKER_RACK", raising=False)
    monkeypatch.setattr(sys, "argv", ["-c", "--config", "/etc/jbod/server.properties"])
    with pytest.raises(SystemExit) as exit_info:
        exec(compile(builders.RACK_LAUNCHER, "<launcher>", "exec"), {"__name__": "__main__"})
    assert exit_info.value.code == 0
    assert seen == {
        "argv": ["--config", "/etc/jbod/server.properties"],
        "rack": rack,
        "racks_left": False,
    }


def test_config_hash_rolls_pods_on_config_log_dirs_and_racks() -> None:
    def pod_hash(bc: BrokerCluster) -> str:
        ann = sts_of(bc)["spec"]["template"]["metadata"]["annotations"]
        h: str = ann[builders.CONFIG_HASH_ANNOTATION]
        return h

    base = pod_hash(cluster())
    assert base == pod_hash(cluster())
    assert base == sts_of(cluster())["metadata"]["annotations"][builders.CONFIG_HASH_ANNOTATION]
    assert pod_hash(cluster(config={"min.insync.replicas": "2"})) != base
    assert pod_hash(cluster(racks=["a"])) != base
    more_dirs = cluster(logDirs=[{"name": "0", "size": "10Gi"}, {"name": "2", "size": "1Gi"}])
    assert pod_hash(more_dirs) != base
    # Scaling does not roll the existing brokers.
    assert pod_hash(cluster(replicas=5)) == base


# -- other objects ------------------------------------------------------------------------


def test_headless_service() -> None:
    svc = builders.build_headless_service(cluster())
    assert svc["metadata"]["name"] == "main-brokers"
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["ports"] == [
        {"name": "http", "port": 9092, "targetPort": "http", "protocol": "TCP"},
        {"name": "kafka", "port": 9093, "targetPort": "kafka", "protocol": "TCP"},
    ]
    assert svc["spec"]["selector"] == builders.selector_labels(cluster())


def test_configmap_server_properties_sorted() -> None:
    bc = cluster(config={"num.replica.fetchers": "2", "min.insync.replicas": "2"})
    cm = builders.build_configmap(bc)
    assert cm["metadata"]["name"] == "main-broker-config"
    text = cm["data"]["server.properties"]
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines == [
        "listeners=http://0.0.0.0:9092",
        "kafka.listeners=PLAINTEXT://:9093",
        f"cluster.id={CLUSTER_ID}",
        "min.insync.replicas=2",
        "num.replica.fetchers=2",
    ]


def test_cluster_id_is_the_uid_in_kafkas_uuid_form_and_the_broker_accepts_it() -> None:
    """Kafka prints a cluster id as base64url without padding (``kafka-storage
    random-uuid``); the broker's config checks that form, so the two must agree."""
    import base64
    import uuid as uuidlib

    from jbod_broker.config import BrokerConfig

    raw = uuidlib.UUID(UID).bytes
    assert builders.cluster_id(cluster()) == CLUSTER_ID
    assert base64.urlsafe_b64decode(CLUSTER_ID + "==") == raw
    cfg = BrokerConfig.model_validate(
        {"broker.id": 0, "log.dirs": ["/d"], "cluster.id": builders.cluster_id(cluster())}
    )
    assert cfg.cluster_id == CLUSTER_ID
    meta = cluster().metadata
    assert (
        builders.cluster_id(
            cluster().model_copy(update={"metadata": meta.model_copy(update={"uid": None})})
        )
        is None
    )


def test_server_properties_parse_back_with_the_brokers_parser() -> None:
    from jbod_broker.storage.checkpoints import parse_properties

    bc = cluster(config={"log.retention.ms": "1000", "x.y": "a=b"})
    text = builders.render_server_properties(bc)
    assert parse_properties(text.encode()) == {
        "listeners": "http://0.0.0.0:9092",
        "kafka.listeners": "PLAINTEXT://:9093",
        "cluster.id": CLUSTER_ID,
        "log.retention.ms": "1000",
        "x.y": "a=b",
    }


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"config": {"listeners": "http://0.0.0.0:1"}}, "spec.config.listeners is set by"),
        ({"config": {"broker.id": "7"}}, "spec.config.broker.id is set by"),
        ({"config": {"cluster.id": CLUSTER_ID}}, "spec.config.cluster.id is set by"),
        ({"config": {"a.b": "1\nauth.disabled=true"}}, "control characters"),
        ({"logDirs": [{"name": "x" * 59, "size": "1Gi"}]}, "must be a DNS label"),
        (
            {"logDirs": [{"name": "a", "size": "1Gi"}, {"name": "a", "size": "2Gi"}]},
            "listed twice",
        ),
    ],
)
def test_spec_problems_refuse_to_build(spec: dict[str, Any], fragment: str) -> None:
    bc = cluster(**spec)
    assert any(fragment in p for p in builders.spec_problems(bc))
    with pytest.raises(ValueError, match="BrokerCluster main"):
        sts_of(bc)
    with pytest.raises(ValueError):
        builders.build_configmap(bc)


def test_long_cluster_name_is_a_problem() -> None:
    bc = cluster().model_copy(
        update={"metadata": cluster().metadata.model_copy(update={"name": "n" * 46})}
    )
    assert any("metadata.name" in p for p in builders.spec_problems(bc))
    assert builders.spec_problems(cluster()) == []


def test_token_secret() -> None:
    s = builders.build_token_secret(cluster(), TOKEN)
    assert s["type"] == "Opaque"
    assert s["metadata"]["name"] == "main-broker-token"
    assert s["stringData"] == {"token": TOKEN}
    with pytest.raises(ValueError, match="at least 16"):
        builders.build_token_secret(cluster(), "short")
    with pytest.raises(ValueError):
        builders.build_token_secret(cluster(), TOKEN + "\n")


def test_pdb() -> None:
    pdb = builders.build_pdb(cluster())
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": builders.selector_labels(cluster())},
    }


# -- common properties --------------------------------------------------------------------


def test_labels_and_owner_references_on_everything() -> None:
    expected_labels = {
        "app.kubernetes.io/name": "jbod-broker",
        "app.kubernetes.io/instance": "main",
        "app.kubernetes.io/managed-by": "jbod-operator",
        "app.kubernetes.io/component": "broker",
    }
    owner = {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "BrokerCluster",
        "name": "main",
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for m in all_manifests(cluster()):
        assert m["metadata"]["labels"] == expected_labels, m["kind"]
        assert m["metadata"]["ownerReferences"] == [owner], m["kind"]
        assert m["metadata"]["namespace"] == "kafka", m["kind"]
    sts = sts_of(cluster())
    assert sts["spec"]["template"]["metadata"]["labels"] == expected_labels


def test_missing_uid_or_namespace_is_refused() -> None:
    meta = cluster().metadata
    no_uid = cluster().model_copy(update={"metadata": meta.model_copy(update={"uid": None})})
    with pytest.raises(ValueError, match=r"metadata\.uid"):
        builders.build_pdb(no_uid)
    no_ns = cluster().model_copy(update={"metadata": meta.model_copy(update={"namespace": None})})
    with pytest.raises(ValueError, match=r"metadata\.namespace"):
        builders.build_headless_service(no_ns)


def test_deterministic_and_json_serialisable() -> None:
    spec = {"config": {"b.c": "1", "a.b": "2"}, "racks": ["r1", "r2"]}
    first = all_manifests(cluster(**spec))
    second = all_manifests(cluster(**spec))
    assert first == second
    dumped = json.dumps(first, sort_keys=False)
    assert dumped == json.dumps(second, sort_keys=False)  # same key order too
    assert json.loads(dumped) == first
    # Config order in the spec does not matter.
    reordered = all_manifests(cluster(config={"a.b": "2", "b.c": "1"}, racks=["r1", "r2"]))
    assert json.dumps(reordered) == dumped


def test_builders_do_not_mutate_or_share_state() -> None:
    bc = cluster()
    before = bc.model_dump()
    a = sts_of(bc)
    snapshot = copy.deepcopy(a)
    a["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    a["metadata"]["ownerReferences"][0]["name"] = "other"
    assert sts_of(bc) == snapshot
    assert bc.model_dump() == before
