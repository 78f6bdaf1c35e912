"""The loopback kube-apiserver + etcd from tests/kube_cluster.py serve a real Kubernetes API."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.kube_cluster import KubeCluster, pinned_kube_version

pytestmark = pytest.mark.integration

GROUP = "test.example.com"


def kubectl_json(kube: KubeCluster, *args: str, input: str | None = None) -> Any:
    result = kube.kubectl(*args, "-o", "json", input=input)
    assert result.returncode == 0, f"kubectl {' '.join(args)} failed:\n{result.stderr}"
    return json.loads(result.stdout)


def apply(kube: KubeCluster, manifest: dict[str, Any], *extra: str) -> str:
    result = kube.kubectl("apply", "-f", "-", *extra, input=json.dumps(manifest))
    assert result.returncode == 0, f"kubectl apply failed:\n{result.stderr}"
    return result.stdout


def test_server_version_is_the_pinned_tag(kube_cluster: KubeCluster) -> None:
    version = kubectl_json(kube_cluster, "version")
    server = version["serverVersion"]
    assert server["gitVersion"] == pinned_kube_version()
    assert (server["major"], server["minor"]) == ("1", "33")


def test_namespace_and_configmap_round_trip(kube_cluster: KubeCluster) -> None:
    kube_cluster.kubectl("create", "namespace", "kc-roundtrip", check=True)
    assert kubectl_json(kube_cluster, "get", "namespace", "kc-roundtrip")["status"] == {
        "phase": "Active"
    }
    apply(
        kube_cluster,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "disks", "namespace": "kc-roundtrip"},
            "data": {"log.dirs": "/data/d0,/data/d1"},
        },
    )
    cm = kubectl_json(kube_cluster, "get", "configmap", "disks", "-n", "kc-roundtrip")
    assert cm["data"] == {"log.dirs": "/data/d0,/data/d1"}


def test_custom_resource_definition_becomes_established(kube_cluster: KubeCluster) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"disks": {"type": "integer", "minimum": 1}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    apply(kube_cluster, crd)
    kube_cluster.wait_established(f"widgets.{GROUP}")

    widget: dict[str, Any] = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "default"},
        "spec": {"disks": 3},
    }
    apply(kube_cluster, widget)
    got = kubectl_json(kube_cluster, "get", f"widgets.{GROUP}", "w1", "-n", "default")
    assert got["spec"] == {"disks": 3}

    # The schema is enforced by the real apiserver.
    bad_widget = {**widget, "metadata": {"name": "w-bad", "namespace": "default"}}
    bad_widget["spec"] = {"disks": 0}
    bad = kube_cluster.kubectl("apply", "-f", "-", input=json.dumps(bad_widget))
    assert bad.returncode != 0
    assert "spec.disks" in bad.stderr


def test_server_side_dry_run_stores_nothing(kube_cluster: KubeCluster) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "dry-run-only", "namespace": "default"},
        "data": {"k": "v"},
    }
    out = apply(kube_cluster, manifest, "--dry-run=server")
    assert "(server dry run)" in out
    missing = kube_cluster.kubectl("get", "configmap", "dry-run-only", "-n", "default")
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr
