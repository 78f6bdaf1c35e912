"""The Helm chart (charts/jbod-operator), rendered with `helm template` and read as YAML.

Covers `helm lint --strict`, the values files under ci/, the CRDs (equal to crds/), the strict
values schema, and every value that changes what is rendered: replicas, image overrides,
watchNamespace (Role vs ClusterRole), the token Secret (generated, given, or existing), the
monitors, the BrokerCluster and the Spark placement job. The RBAC rules are compared with
what the operator's code calls (tests/chart_rbac.py).
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from jbod_operator.clients.kube import KubeClient
from jbod_operator.models import BrokerCluster
from jbod_operator.plan import builders
from jbod_operator.settings import load_settings
from tests import chart_rbac

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "jbod-operator"
HELM = REPO / ".venv" / "bin" / "helm"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))
RELEASE, NAMESPACE = "rel", "jbod-system"
FULLNAME = f"{RELEASE}-jbod-operator"
SPARK_API = "sparkoperator.k8s.io/v1beta2/SparkApplication"

Doc = dict[str, Any]


# -- rendering ------------------------------------------------------------------------------


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    if not HELM.exists():
        pytest.fail(f"missing {HELM}: run `make setup` (kubectl-bins)", pytrace=False)
    proc = subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{proc.stderr}")
    return proc


@functools.lru_cache(maxsize=64)
def _render(values_json: str, files: tuple[str, ...], api_versions: tuple[str, ...]) -> str:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for f in files:
        args += ["-f", f]
    for a in api_versions:
        args += ["--api-versions", a]
    args += ["--values", "-"]
    proc = subprocess.run(
        [str(HELM), *args], input=values_json, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        raise RenderError(proc.stderr)
    return proc.stdout


class RenderError(AssertionError):
    pass


def render(
    values: dict[str, Any] | None = None,
    *,
    files: Iterable[Path] = (),
    api_versions: Iterable[str] = (),
) -> list[Doc]:
    if not HELM.exists():
        pytest.fail(f"missing {HELM}: run `make setup` (kubectl-bins)", pytrace=False)
    text = _render(
        json.dumps(values or {}, sort_keys=True),
        tuple(str(f) for f in files),
        tuple(api_versions),
    )
    return [d for d in yaml.safe_load_all(text) if d]


def of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    found = [d for d in of_kind(docs, kind) if name is None or d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def container(docs: list[Doc]) -> Doc:
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    return dict(c)


def env_of(docs: list[Doc]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(docs).get("env", [])}


# -- lint, ci values, schema ----------------------------------------------------------------


def test_helm_lint_strict_with_defaults_and_every_ci_values_file() -> None:
    assert len(CI_VALUES) >= 3, "the chart should ship at least three ci/ values files"
    for extra in [[], *(["-f", str(f)] for f in CI_VALUES)]:
        proc = helm("lint", "--strict", str(CHART), *extra, check=False)
        assert proc.returncode == 0, f"helm lint --strict {extra}:\n{proc.stdout}{proc.stderr}"
        assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("values_file", CI_VALUES, ids=lambda p: p.name)
def test_every_ci_values_file_renders(values_file: Path) -> None:
    docs = render(files=[values_file], api_versions=[SPARK_API])
    assert one(docs, "Deployment") and one(docs, "Service", FULLNAME)
    assert load_settings(env_of(docs)), "the operator would refuse its environment"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCont": 2}, "replicaCont"),
        ({"image": {"tagg": "x"}}, "tagg"),
        ({"replicaCount": 0}, "replicaCount"),
        ({"replicaCount": "2"}, "replicaCount"),
        ({"brokerCluster": {"spec": {"replica": 3}}}, "replica"),
        ({"brokerCluster": {"spec": {"logDirs": [{"name": "A", "size": "1Gi"}]}}}, "name"),
        ({"brokerCluster": {"tokenSecret": {"token": "short"}}}, "token"),
        ({"metrics": {"podMonitor": {"interval": "often"}}}, "interval"),
        ({"spark": {"restartPolicy": {"type": "Sometimes"}}}, "type"),
        ({"leaderElection": {"leaseSeconds": 1}}, "leaseSeconds"),
        ({"image": {"digest": "latest"}}, "digest"),
        ({"operator": {"logLevel": "LOUD"}}, "logLevel"),
    ],
)
def test_values_schema_refuses_typos_and_bad_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(RenderError) as err:
        render(values)
    assert "schema" in str(err.value) and message in str(err.value), str(err.value)


def _walk_schema(node: Any, path: str = "$") -> Iterable[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk_schema(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk_schema(v, f"{path}[{i}]")


def test_values_schema_is_strict_everywhere() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    loose = [
        path
        for path, node in _walk_schema(schema)
        if "properties" in node and node.get("additionalProperties") is not False
    ]
    assert not loose, f"objects in values.schema.json that accept unknown keys: {loose}"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) <= set(schema["properties"]), set(values) - set(schema["properties"])


def test_every_value_has_a_comment() -> None:
    """Every leaf of values.yaml has a comment line (or block) right above it."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    missing = []
    list_indent: int | None = None
    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if list_indent is not None and indent > list_indent:
            continue  # inside a list value
        list_indent = None
        if line.lstrip().startswith("- "):
            list_indent = indent - 1
            continue
        m = re.match(r"^\s*([A-Za-z0-9_.-]+):(.*)$", line)
        assert m, f"values.yaml:{i + 1}: unexpected line {line!r}"
        rest = m.group(2).strip()
        nxt = next((x for x in lines[i + 1 :] if x.strip() and not x.lstrip().startswith("#")), "")
        nxt_indent = len(nxt) - len(nxt.lstrip())
        is_leaf = bool(rest) or nxt_indent <= indent or nxt.lstrip().startswith("- ")
        if nxt.lstrip().startswith("- ") and nxt_indent > indent:
            is_leaf = True
        if not is_leaf:
            continue
        above = lines[i - 1].strip() if i else ""
        if not above.startswith("#") and "#" not in rest:
            missing.append(f"values.yaml:{i + 1}: {m.group(1)}")
    assert not missing, "values without a comment:\n" + "\n".join(missing)


# -- CRDs -----------------------------------------------------------------------------------


def _load_sync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sync_crds", REPO / "charts" / "sync_crds.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["sync_crds"] = module
    spec.loader.exec_module(module)
    return module


def test_chart_copy_of_the_crds_and_spec_schema_are_in_sync() -> None:
    problems = _load_sync().problems()
    assert not problems, "\n".join(problems) + "\nrun: .venv/bin/python charts/sync_crds.py"


def _strict_equal(a: Any, b: Any) -> bool:
    """Equal with types (a CRD maximum must stay an integer, not become 2.1e+09)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_rendered_crds_equal_the_repository_crds() -> None:
    rendered = {d["metadata"]["name"]: d for d in of_kind(render(), "CustomResourceDefinition")}
    expected = {}
    for path in sorted((REPO / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        expected[crd["metadata"]["name"]] = crd
    assert rendered.keys() == expected.keys()
    for name, crd in expected.items():
        got = rendered[name]
        assert got["apiVersion"] == crd["apiVersion"] and got["kind"] == crd["kind"]
        assert _strict_equal(got["spec"], crd["spec"]), f"{name}: the rendered spec differs"
        assert got["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert got["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_crds_can_be_left_out_or_not_kept() -> None:
    assert not of_kind(render({"crds": {"install": False}}), "CustomResourceDefinition")
    crds = of_kind(render({"crds": {"keep": False}}), "CustomResourceDefinition")
    assert len(crds) == 7  # one per kind in crds/
    assert all("annotations" not in c["metadata"] for c in crds)


# -- the Deployment -------------------------------------------------------------------------


def test_deployment_defaults() -> None:
    docs = render()
    dep = one(docs, "Deployment", FULLNAME)
    spec = dep["spec"]
    assert spec["replicas"] == 2
    # Ready = active: a rollout must not wait for standbys to become Ready.
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": "100%"}
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == FULLNAME
    assert pod["enableServiceLinks"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    c = container(docs)
    assert c["securityContext"] == {
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/tmp"}
    (port,) = c["ports"]
    assert port == {"name": "http", "containerPort": 8080, "protocol": "TCP"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["failureThreshold"] == 1


def test_deployment_environment_is_valid_operator_settings() -> None:
    for values in ({}, {"watchNamespace": "kafka", "operator": {"brokerUrlTemplate": "x{id}"}}):
        env = env_of(render(values))
        settings = load_settings(env)  # an unknown JBOD_OPERATOR_* would stop the operator
        assert settings.lease_namespace == NAMESPACE
        assert settings.lease_name == f"{FULLNAME}-leader"
        assert settings.controller_listen_port == 8080
        assert settings.controller_url == f"http://{FULLNAME}.{NAMESPACE}.svc:8080"
        assert settings.namespace == (values.get("watchNamespace") or None)
        assert settings.log_level_name == "INFO"
    env = env_of(render())
    assert "JBOD_OPERATOR_NAMESPACE" not in env  # every namespace


def test_extra_env_adds_or_replaces_without_duplicates() -> None:
    extra = [
        {"name": "JBOD_OPERATOR_BROKER_TIMEOUT_SECONDS", "value": "9"},
        {"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
    ]
    entries = container(render({"operator": {"extraEnv": extra}}))["env"]
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names)), names
    env = {e["name"]: e["value"] for e in entries}
    assert env["JBOD_OPERATOR_BROKER_TIMEOUT_SECONDS"] == "9"
    assert env["HTTPS_PROXY"] == "http://proxy:3128"
    fractional = env_of(render({"leaderElection": {"leaseSeconds": 7.5, "renewSeconds": 0.5}}))
    assert load_settings(fractional).lease_renew_seconds == 0.5


def test_controller_url_is_the_service() -> None:
    docs = render({"service": {"port": 9000}, "operator": {"port": 8181}})
    svc = one(docs, "Service", FULLNAME)
    pod = one(docs, "Deployment")["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["ports"] == [
        {"name": "http", "port": 9000, "targetPort": "http", "protocol": "TCP"}
    ]
    assert container(docs)["ports"][0]["containerPort"] == 8181
    env = env_of(docs)
    assert env["JBOD_OPERATOR_CONTROLLER_URL"] == f"http://{FULLNAME}.{NAMESPACE}.svc:9000"
    assert env["JBOD_OPERATOR_CONTROLLER_LISTEN_PORT"] == "8181"


@pytest.mark.parametrize("replicas", [1, 3])
def test_replicas(replicas: int) -> None:
    assert one(render({"replicaCount": replicas}), "Deployment")["spec"]["replicas"] == replicas


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ({}, "ghcr.io/jbod-operator/operator:0.1.0"),
        ({"tag": "1.2.3"}, "ghcr.io/jbod-operator/operator:1.2.3"),
        ({"repository": "reg.example/op", "tag": "dev"}, "reg.example/op:dev"),
        (
            {"digest": "sha256:" + "ab" * 32, "tag": "ignored"},
            "ghcr.io/jbod-operator/operator@sha256:" + "ab" * 32,
        ),
    ],
)
def test_image_overrides(image: dict[str, str], expected: str) -> None:
    docs = render({"image": image, "imagePullSecrets": [{"name": "regcred"}]})
    assert container(docs)["image"] == expected
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert container(render({"image": {"pullPolicy": "Always"}}))["imagePullPolicy"] == "Always"


def test_chart_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    from importlib.metadata import version

    assert chart["appVersion"] == version("jbod-operator")


def test_existing_service_account_and_platform_chosen_uid() -> None:
    docs = render(
        {
            "serviceAccount": {"create": False, "name": "platform-sa"},
            "securityContext": {"runAsUser": None, "runAsGroup": None},
        }
    )
    assert not of_kind(docs, "ServiceAccount")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "platform-sa"
    assert "runAsUser" not in pod["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for binding in of_kind(docs, "ClusterRoleBinding") + of_kind(docs, "RoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "platform-sa", "namespace": NAMESPACE}
        ]
    with pytest.raises(RenderError, match=r"serviceAccount\.name is required"):
        render({"serviceAccount": {"create": False}})


# -- RBAC -----------------------------------------------------------------------------------


def roles(docs: list[Doc]) -> dict[str, set[chart_rbac.Rule]]:
    """The chart's roles by purpose: workload, leader-election, kopf."""
    out: dict[str, set[chart_rbac.Rule]] = {}
    for d in of_kind(docs, "ClusterRole") + of_kind(docs, "Role"):
        name = d["metadata"]["name"]
        key = {
            FULLNAME: "workload",
            f"{FULLNAME}-leader-election": "leader-election",
            f"{FULLNAME}-kopf": "kopf",
        }.get(name)
        if key:
            assert key not in out, f"two roles for {key}"
            out[key] = chart_rbac.rules_of(d)
    return out


def _rbac_diff(got: dict[str, set[chart_rbac.Rule]], want: dict[str, set[chart_rbac.Rule]]) -> str:
    parts = []
    for key in sorted(want.keys() | got.keys()):
        extra = got.get(key, set()) - want.get(key, set())
        missing = want.get(key, set()) - got.get(key, set())
        if extra:
            parts.append(
                f"{key}: granted but never used by the code:\n{chart_rbac.describe(extra)}"
            )
        if missing:
            parts.append(
                f"{key}: used by the code but not granted:\n{chart_rbac.describe(missing)}"
            )
    return "\n".join(parts)


def test_kube_client_methods_are_all_mapped_to_verbs() -> None:
    """The static analysis knows every KubeClient method, with the verb KubeClient records."""
    assert chart_rbac.kube_client_methods() == set(chart_rbac.KUBE_CLIENT_VERBS)


async def test_verb_map_matches_what_kube_client_records() -> None:
    from jbod_operator.clients.kube import TOPICS, Credentials

    class Response:
        status = 200

        async def __aenter__(self) -> Response:
            return self

        async def __aexit__(self, *_: object) -> None:
            return None

        async def read(self) -> bytes:
            return b'{"items": []}'

    class Session:
        def request(self, *_: object, **__: object) -> Response:
            return Response()

    client = KubeClient(Credentials(server="http://kube.invalid"))
    client._session = Session()  # type: ignore[assignment]
    obj = {"metadata": {"name": "t"}}
    calls = {
        "get": client.get(TOPICS, "ns", "t"),
        "list": client.list(TOPICS, "ns"),
        "create": client.create(TOPICS, "ns", obj),
        "apply": client.apply(TOPICS, "ns", obj),
        "patch": client.patch(TOPICS, "ns", "t", {}),
        "patch_status": client.patch_status(TOPICS, "ns", "t", {}),
        "write_status": client.write_status(TOPICS, "ns", "t", {}, {"phase": "x"}),
        "replace": client.replace(TOPICS, "ns", obj),
        "replace_status": client.replace_status(TOPICS, "ns", obj),
        "delete": client.delete(TOPICS, "ns", "t"),
    }
    assert calls.keys() == chart_rbac.KUBE_CLIENT_VERBS.keys()
    for method, coro in calls.items():
        client.calls.clear()
        await coro
        sub = "/status" if method in chart_rbac.STATUS_METHODS else ""
        first_verb = chart_rbac.KUBE_CLIENT_VERBS[method][0]
        assert client.calls == {(first_verb, "jbod.io", "topics" + sub)}, method


def test_static_analysis_resolves_every_kube_call() -> None:
    static = chart_rbac.kube_client_calls()
    assert not static.unresolved, "\n".join(static.unresolved)
    assert static.rules, "found no KubeClient call at all"
    assert chart_rbac.kopf_served_resources(), "found no kopf handler at all"


@pytest.mark.parametrize(
    ("values", "namespaced"),
    [({}, False), ({"watchNamespace": "kafka"}, True)],
    ids=["cluster-wide", "one-namespace"],
)
def test_rbac_rules_equal_what_the_code_calls(values: dict[str, Any], namespaced: bool) -> None:
    got = roles(render(values))
    want = chart_rbac.required_rules(namespaced=namespaced)
    assert got == want, _rbac_diff(got, want)


def test_cluster_wide_rbac() -> None:
    docs = render()
    workload = one(docs, "ClusterRole", FULLNAME)
    binding = one(docs, "ClusterRoleBinding", FULLNAME)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": workload["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}
    ]
    assert [r["metadata"]["name"] for r in of_kind(docs, "Role")] == [f"{FULLNAME}-leader-election"]


def test_one_namespace_rbac() -> None:
    docs = render({"watchNamespace": "kafka"})
    assert [r["metadata"]["name"] for r in of_kind(docs, "ClusterRole")] == [f"{FULLNAME}-kopf"]
    role = one(docs, "Role", FULLNAME)
    assert role["metadata"]["namespace"] == "kafka"
    binding = one(docs, "RoleBinding", FULLNAME)
    assert binding["metadata"]["namespace"] == "kafka"
    assert binding["roleRef"]["kind"] == "Role"
    assert binding["subjects"][0]["namespace"] == NAMESPACE
    assert env_of(docs)["JBOD_OPERATOR_NAMESPACE"] == "kafka"
    kopf_rules = chart_rbac.rules_of(one(docs, "ClusterRole", f"{FULLNAME}-kopf"))
    assert ("", "namespaces", "watch") in kopf_rules


def test_leader_election_role_is_limited_to_the_lease() -> None:
    docs = render({"leaderElection": {"leaseName": "my-lease"}})
    role = one(docs, "Role", f"{FULLNAME}-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["my-lease"],
            "verbs": ["get", "update"],
        }
    ]
    assert env_of(docs)["JBOD_OPERATOR_LEASE_NAME"] == "my-lease"


def test_rbac_can_be_left_to_the_platform() -> None:
    docs = render({"rbac": {"create": False}})
    for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
        assert not of_kind(docs, kind), kind
    assert not roles(render({"rbac": {"kopfObservation": False}})).get("kopf")


# -- monitors -------------------------------------------------------------------------------


def test_monitors_off_by_default() -> None:
    docs = render()
    assert not of_kind(docs, "ServiceMonitor") and not of_kind(docs, "PodMonitor")


@pytest.mark.parametrize("kind", ["ServiceMonitor", "PodMonitor"])
def test_monitors_select_the_brokers_built_by_the_operator(kind: str) -> None:
    key = "serviceMonitor" if kind == "ServiceMonitor" else "podMonitor"
    docs = render({"metrics": {key: {"enabled": True, "labels": {"release": "prom"}}}})
    assert len(of_kind(docs, "ServiceMonitor") + of_kind(docs, "PodMonitor")) == 1
    mon = one(docs, kind)
    assert mon["apiVersion"] == "monitoring.coreos.com/v1"
    assert mon["metadata"]["labels"]["release"] == "prom"
    sample = BrokerCluster.model_validate(
        {
            "metadata": {"name": "x", "namespace": "ns", "uid": "u"},
            "spec": {"replicas": 1, "logDirs": [{"name": "a", "size": "1Gi"}]},
        }
    )
    built = builders.build_statefulset(sample, controller_url="http://c", token_secret="t")
    pod_labels = built["spec"]["template"]["metadata"]["labels"]
    service = builders.build_headless_service(sample)
    target_labels = pod_labels if kind == "PodMonitor" else service["metadata"]["labels"]
    assert mon["spec"]["selector"]["matchLabels"].items() <= target_labels.items()
    (endpoint,) = mon["spec"]["podMetricsEndpoints" if kind == "PodMonitor" else "endpoints"]
    port_names = [p["name"] for p in built["spec"]["template"]["spec"]["containers"][0]["ports"]]
    assert endpoint["port"] in port_names
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
    assert endpoint["path"] == "/metrics"
    assert mon["spec"]["namespaceSelector"] == {"any": True}
    scoped = render({"watchNamespace": "kafka", "metrics": {key: {"enabled": True}}})
    assert one(scoped, kind)["spec"]["namespaceSelector"] == {"matchNames": ["kafka"]}


# -- the BrokerCluster and its token Secret -------------------------------------------------


def test_broker_cluster_off_by_default() -> None:
    docs = render()
    assert not of_kind(docs, "BrokerCluster") and not of_kind(docs, "Secret")


def test_broker_cluster_from_values_is_valid_for_the_operator() -> None:
    docs = render({"brokerCluster": {"enabled": True, "name": "events"}})
    bc = one(docs, "BrokerCluster", "events")
    assert bc["apiVersion"] == "jbod.io/v1alpha1"
    assert bc["metadata"]["namespace"] == NAMESPACE
    model = BrokerCluster.model_validate({**bc, "metadata": {**bc["metadata"], "uid": "u"}})
    assert builders.spec_problems(model) == []
    assert [d.name for d in model.spec.log_dirs] == ["a", "b", "c"]
    secret = one(docs, "Secret", "events-broker-token")
    assert secret["metadata"]["namespace"] == NAMESPACE
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert len(token) == 48 and token.isalnum()
    assert builders.token_secret_name(model) == secret["metadata"]["name"]
    # The operator's own check of a token (length, whitespace) accepts it.
    assert builders.build_token_secret(model, token)["stringData"]["token"] == token


def test_broker_cluster_token_given_or_existing() -> None:
    given = render({"brokerCluster": {"enabled": True, "tokenSecret": {"token": "t" * 20}}})
    secret = one(given, "Secret", "jbod-broker-token")
    assert base64.b64decode(secret["data"]["token"]).decode() == "t" * 20
    existing = render({"brokerCluster": {"enabled": True, "tokenSecret": {"create": False}}})
    assert not of_kind(existing, "Secret")
    assert one(existing, "BrokerCluster", "jbod")


def test_broker_cluster_namespace_follows_the_watched_one() -> None:
    docs = render({"watchNamespace": "kafka", "brokerCluster": {"enabled": True}})
    assert one(docs, "BrokerCluster")["metadata"]["namespace"] == "kafka"
    assert one(docs, "Secret")["metadata"]["namespace"] == "kafka"
    with pytest.raises(RenderError, match="is not watched"):
        render(
            {"watchNamespace": "kafka", "brokerCluster": {"enabled": True, "namespace": "other"}}
        )


# -- the Spark placement job ----------------------------------------------------------------


def test_spark_off_by_default() -> None:
    docs = render(api_versions=[SPARK_API])
    assert not of_kind(docs, "SparkApplication")
    assert not [d for d in docs if "spark" in d["metadata"]["name"]]


def test_spark_rbac_without_the_spark_operator_and_the_application_with_it() -> None:
    values = {"spark": {"enabled": True}}
    without = render(values)
    assert not of_kind(without, "SparkApplication")
    sa = one(without, "ServiceAccount", f"{FULLNAME}-spark")
    role = one(without, "Role", f"{FULLNAME}-spark-driver")
    assert chart_rbac.rules_of(role) >= {
        ("", "pods", "create"),
        ("", "pods", "watch"),
        ("", "pods", "delete"),
        ("", "services", "create"),
        ("", "configmaps", "create"),
    }
    assert not {r for r in chart_rbac.rules_of(role) if r[0] != ""}, "core resources only"
    binding = one(without, "RoleBinding", f"{FULLNAME}-spark-driver")
    assert binding["subjects"][0]["name"] == sa["metadata"]["name"]
    assert not of_kind(without, "PersistentVolumeClaim")

    app = one(render(values, api_versions=[SPARK_API]), "SparkApplication", f"{FULLNAME}-placement")
    assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert app["spec"]["driver"]["serviceAccount"] == sa["metadata"]["name"]
    assert "serviceAccount" not in app["spec"]["executor"]


def test_spark_enabled_lets_the_operator_launch_planning_jobs_in_pods() -> None:
    """The operator's launcher settings come from the same values as the template (image,
    driver ServiceAccount, claim, memory), and it mounts the claim where its settings say the
    jobs' folders are; without spark.enabled it keeps the local launcher and mounts nothing."""
    values = {
        "spark": {
            "enabled": True,
            "launcher": "job",
            "image": {"repository": "reg/spark", "tag": "x", "pullPolicy": "Always"},
            "data": {"claimName": "plans"},
            "driver": {"memory": "2G"},
            "executor": {"instances": 3, "memory": "3g"},
        }
    }
    docs = render(values)
    settings = load_settings(env_of(docs))
    assert settings.rebalance_launcher == "job"
    assert settings.rebalance_image == "reg/spark:x"
    assert settings.rebalance_image_pull_policy == "Always"
    assert settings.rebalance_service_account == f"{FULLNAME}-spark"
    assert settings.rebalance_data_claim == "plans"
    assert settings.rebalance_driver_memory == "2g"
    assert (settings.rebalance_executor_memory, settings.rebalance_executors) == ("3g", 3)
    c = container(docs)
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["plans"] == settings.rebalance_work_dir
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    claims = {v["name"]: v.get("persistentVolumeClaim") for v in pod["volumes"]}
    assert claims["plans"] == {"claimName": "plans"}
    assert load_settings(env_of(render({"spark": {"enabled": True}}))).rebalance_launcher == "auto"
    off = render()
    assert load_settings(env_of(off)).rebalance_launcher == "local"
    assert {m["name"] for m in container(off)["volumeMounts"]} == {"tmp"}


def test_spark_application_runs_the_job_as_jbod_spark_builds_it() -> None:
    """Same manifest as jbod_spark.k8s.render_spark_application (the job's source of truth),
    for the same parameters; only names, image and labels are the chart's."""
    k8s = pytest.importorskip("jbod_spark.k8s")
    spark = {
        "enabled": True,
        "image": {"repository": "reg/spark", "tag": "x"},
        "data": {"claimName": "plans"},
        "snapshot": "/data/s.json",
        "planOut": "/data/out",
        "mode": "dirs-only",
        "extraArguments": ["--min-move-bytes", "1000"],
        "driver": {"memory": "2g"},
        "executor": {"instances": 3, "memory": "3g"},
    }
    app = one(render({"spark": spark}, api_versions=[SPARK_API]), "SparkApplication")
    want = k8s.render_spark_application(
        name=app["metadata"]["name"],
        namespace=NAMESPACE,
        image="reg/spark:x",
        service_account=f"{FULLNAME}-spark",
        data_claim="plans",
        snapshot="/data/s.json",
        out="/data/out",
        mode="dirs-only",
        driver_memory="2g",
        executor_memory="3g",
        executors=3,
        extra_args=["--min-move-bytes", "1000"],
    )

    def comparable(spec: dict[str, Any]) -> dict[str, Any]:
        spec = json.loads(json.dumps(spec))
        for role in ("driver", "executor"):
            spec[role].pop("labels")
        return spec

    assert comparable(app["spec"]) == comparable(want["spec"])
    for role in ("driver", "executor"):
        assert want["spec"][role]["labels"].items() <= app["spec"][role]["labels"].items()


def test_spark_overrides() -> None:
    docs = render(
        {
            "spark": {
                "enabled": True,
                "name": "plan-now",
                "mainApplicationFile": "local:///app/job.py",
                "restartPolicy": {"type": "OnFailure", "onFailureRetries": 3},
                "timeToLiveSeconds": 600,
                "serviceAccount": {"create": False, "name": "spark"},
                "rbac": {"create": False},
                "data": {"create": True, "size": "5Gi", "storageClassName": "nfs"},
                "executor": {"labels": {"a": "b"}},
            }
        },
        api_versions=[SPARK_API],
    )
    app = one(docs, "SparkApplication", "plan-now")
    assert app["spec"]["mainApplicationFile"] == "local:///app/job.py"
    assert app["spec"]["restartPolicy"] == {"type": "OnFailure", "onFailureRetries": 3}
    assert app["spec"]["timeToLiveSeconds"] == 600
    assert app["spec"]["driver"]["serviceAccount"] == "spark"
    assert app["spec"]["executor"]["labels"]["a"] == "b"
    spark_rbac = [
        d
        for d in docs
        if d["kind"] in ("Role", "RoleBinding", "ServiceAccount")
        and "spark" in d["metadata"]["name"]
    ]
    assert not spark_rbac
    pvc = one(docs, "PersistentVolumeClaim", "jbod-plans")
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert pvc["spec"]["storageClassName"] == "nfs"
    assert pvc["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    claim = app["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == pvc["metadata"]["name"]


def test_one_resource_per_template_file() -> None:
    everything = {
        "brokerCluster": {"enabled": True},
        "spark": {"enabled": True, "data": {"create": True}},
        "metrics": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}},
    }
    seen: set[str] = set()
    for watch in ("", "kafka"):
        text = _render(json.dumps({**everything, "watchNamespace": watch}), (), (SPARK_API,))
        sources: dict[str, int] = {}
        for m in re.finditer(r"^# Source: \S+/templates/(\S+)$", text, re.MULTILINE):
            sources[m.group(1)] = sources.get(m.group(1), 0) + 1
        assert sources and max(sources.values()) == 1, sources
        seen |= sources.keys()
    assert seen == {p.name for p in (CHART / "templates").glob("*.yaml")}


def test_notes_tell_what_to_do_next() -> None:
    def notes(*sets: str) -> str:
        args = ["install", RELEASE, str(CHART), "--dry-run=client", "--namespace", NAMESPACE]
        for s in sets:
            args += ["--set", s]
        out = helm(*args).stdout
        return out[out.index("NOTES:") :]

    default = notes()
    assert f"get lease {FULLNAME}-leader" in default
    assert "kind: BrokerCluster" in default and "kind: Topic" in default
    assert f"http://{FULLNAME}.{NAMESPACE}.svc:8080" in default
    scoped = notes("watchNamespace=kafka", "brokerCluster.enabled=true", "spark.enabled=true")
    assert "-n kafka get brokercluster jbod" in scoped
    assert "Spark Operator is not installed" in scoped
    assert "scraped twice" in notes(
        "metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true"
    )
