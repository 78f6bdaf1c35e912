"""The Helm chart against a real kube-apiserver: dry run, install, and the operator on its RBAC.

This module starts its own API server (tests/kube_cluster.py, ~4 s) instead of the shared
``kube_cluster`` fixture, for two flags the shared one does not have:

- an **audit log** of every request made by a service account, so that the RBAC-restricted run
  is compared call by call with the rules derived from the code (tests/chart_rbac.py);
- the **OwnerReferencesPermissionEnforcement** admission plugin (on in OpenShift and other
  hardened clusters), so that the owner references the operator sets are checked too.

It also keeps Helm's CRDs apart from the ones other tests apply with kubectl.

What runs: ``helm install`` of the default values; ``helm template`` of the default values and
of every ci/ values file accepted by ``kubectl apply --dry-run=server`` (our CRDs installed, a
minimal Prometheus Operator CRD and the Spark Operator CRD fixture too); the operator as a local
process with a token of the chart's ServiceAccount (``kubectl create token``), never the admin
one: a BrokerCluster reconciles to its StatefulSet, local brokers start, a Topic becomes Ready,
a log dir is added (the StatefulSet is deleted and created again) - with no 403 in the audit
log and every call covered by the derived rules; the same with the chart watching one namespace
(a Role, no ClusterRole for the workloads); a verb removed from the ClusterRole gives a clear
error in the log while the process stays up, and the operator recovers when it is restored;
``helm upgrade`` keeps the generated broker token; ``helm uninstall`` keeps the CRDs.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import chart_rbac
from tests.kube_cluster import KubeBinariesMissing, KubeCluster
from tests.operator_harness import Kube, OperatorProcess, start_local_brokers, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "jbod-operator"
HELM = REPO / ".venv" / "bin" / "helm"
SPARK_CRD = REPO / "tests" / "fixtures" / "sparkoperator.k8s.io_sparkapplications.yaml"
SPARK_API = "sparkoperator.k8s.io/v1beta2/SparkApplication"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))

RELEASE, RELEASE_NS = "jbod", "jbod-system"
FULLNAME = f"{RELEASE}-jbod-operator"
APPS_NS = "apps"
DIRS = ["a", "b", "c"]

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""


def _monitoring_crd(kind: str, endpoints_field: str, target_labels_field: str) -> dict[str, Any]:
    """A minimal structural CRD for a Prometheus Operator kind (monitoring.coreos.com/v1): the
    fields the chart renders are typed, the rest of spec is kept as it is."""
    endpoint = {
        "type": "object",
        "properties": {
            "port": {"type": "string"},
            "path": {"type": "string"},
            "interval": {
                "type": "string",
                "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?"
                "(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
            },
            "scrapeTimeout": {"type": "string"},
        },
        "x-kubernetes-preserve-unknown-fields": True,
    }
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["selector"],
                                    "x-kubernetes-preserve-unknown-fields": True,
                                    "properties": {
                                        "selector": {
                                            "type": "object",
                                            "properties": {
                                                "matchLabels": {
                                                    "type": "object",
                                                    "additionalProperties": {"type": "string"},
                                                }
                                            },
                                        },
                                        "namespaceSelector": {
                                            "type": "object",
                                            "properties": {
                                                "any": {"type": "boolean"},
                                                "matchNames": {
                                                    "type": "array",
                                                    "items": {"type": "string"},
                                                },
                                            },
                                        },
                                        target_labels_field: {
                                            "type": "array",
                                            "items": {"type": "string"},
                                        },
                                        endpoints_field: {"type": "array", "items": endpoint},
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


MONITORING_CRDS = [
    _monitoring_crd("ServiceMonitor", "endpoints", "targetLabels"),
    _monitoring_crd("PodMonitor", "podMetricsEndpoints", "podTargetLabels"),
]


# -- fixtures -------------------------------------------------------------------------------


@dataclass
class Env:
    cluster: KubeCluster
    audit_log: Path
    work: Path

    def kubectl(self, *args: str, input: str | None = None) -> str:
        p = self.cluster.kubectl(*args, input=input, check=False, timeout=120)
        assert p.returncode == 0, f"kubectl {' '.join(args)}:\n{p.stderr}"
        return p.stdout

    def helm(self, *args: str, input: str | None = None) -> str:
        assert self.cluster.kubeconfig is not None
        p = subprocess.run(
            [str(HELM), f"--kubeconfig={self.cluster.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert p.returncode == 0, f"helm {' '.join(args)}:\n{p.stdout}\n{p.stderr}"
        return p.stdout

    def get(self, *args: str) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json"))
        return out

    def service_account_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig with a token of the chart's ServiceAccount (TokenRequest API), same
        server and CA as the admin one: RBAC decides what the operator may do."""
        token = self.kubectl("create", "token", name, "-n", namespace, "--duration=1h").strip()
        config = self.cluster.kubeconfig_dict()
        config["users"] = [{"name": "admin", "user": {"token": token}}]
        path = self.work / f"{namespace}-{name}.kubeconfig"
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        return path

    def operator(
        self, release_ns: str, deployment: str, namespace: str, name: str
    ) -> OperatorProcess:
        """The operator with the installed Deployment's environment and its ServiceAccount."""
        dep = self.get("deployment", deployment, "-n", release_ns)
        pod = dep["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        # Only meaningful in a pod (the harness listens on loopback, brokers are local) or tuned
        # for a quick test.
        for local in (
            "JBOD_OPERATOR_CONTROLLER_URL",
            "JBOD_OPERATOR_CONTROLLER_LISTEN_PORT",
            "JBOD_OPERATOR_RECONCILE_INTERVAL_SECONDS",
            "JBOD_OPERATOR_BROKER_TIMEOUT_SECONDS",
        ):
            env.pop(local)
        env.setdefault("JBOD_OPERATOR_NAMESPACE", "")  # "": every namespace
        kubeconfig = self.service_account_kubeconfig(release_ns, pod["serviceAccountName"])
        env["KUBECONFIG"] = str(kubeconfig)
        work = self.work / name
        work.mkdir()
        return OperatorProcess(self.cluster, namespace, str(work), name=name, env=env)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if not HELM.exists():
        pytest.fail(f"missing {HELM}: run `make setup` (kubectl-bins)", pytrace=False)
    work = tmp_path_factory.mktemp("helm-chart")
    policy = work / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    audit_log = work / "audit.log"
    cluster = KubeCluster(
        extra_apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit_log}",
            "--audit-log-mode=blocking",
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
        ]
    )
    missing = ""
    try:
        cluster.require_kubectl()
        cluster.start()
    except KubeBinariesMissing as exc:
        missing = str(exc)
    if missing:
        pytest.fail(missing, pytrace=False)
    try:
        yield Env(cluster, audit_log, work)
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def installed(env: Env) -> Env:
    """`helm install` with the default values, as the README says."""
    env.helm("install", RELEASE, str(CHART), "-n", RELEASE_NS, "--create-namespace")
    env.cluster.wait_established()
    return env


# -- install and dry run --------------------------------------------------------------------


def test_install_creates_the_release(installed: Env) -> None:
    status = json.loads(installed.helm("status", RELEASE, "-n", RELEASE_NS, "-o", "json"))
    assert status["info"]["status"] == "deployed"
    crds = installed.get("crd", "-l", f"app.kubernetes.io/instance={RELEASE}")["items"]
    assert sorted(c["metadata"]["name"] for c in crds) == sorted(
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in (REPO / "crds").glob("*.yaml")
    )
    for crd in crds:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    dep = installed.get("deployment", FULLNAME, "-n", RELEASE_NS)
    assert dep["spec"]["replicas"] == 2
    installed.get("service", FULLNAME, "-n", RELEASE_NS)
    installed.get("serviceaccount", FULLNAME, "-n", RELEASE_NS)
    installed.get("clusterrole", FULLNAME)
    installed.get("role", f"{FULLNAME}-leader-election", "-n", RELEASE_NS)


@pytest.fixture(scope="module")
def dry_run_ready(installed: Env) -> Env:
    """Everything a rendered manifest refers to: our CRDs (installed), the Prometheus and Spark
    Operator CRDs, the namespaces the ci/ values use."""
    docs = [*MONITORING_CRDS, yaml.safe_load(SPARK_CRD.read_text())]
    installed.kubectl("apply", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs))
    installed.cluster.wait_established()
    for ns in ("dry", "kafka"):
        installed.kubectl("create", "namespace", ns)
    return installed


@pytest.mark.parametrize(
    "values_file", [None, *CI_VALUES], ids=lambda p: p.name if p else "defaults"
)
def test_rendered_manifests_pass_a_server_side_dry_run(
    dry_run_ready: Env, values_file: Path | None
) -> None:
    args = ["template", "dry", str(CHART), "-n", "dry", "--api-versions", SPARK_API]
    if values_file is not None:
        args += ["-f", str(values_file)]
    manifest = dry_run_ready.helm(*args)
    kinds = {d["kind"] for d in yaml.safe_load_all(manifest) if d}
    out = dry_run_ready.kubectl(
        "apply",
        "--dry-run=server",
        "--server-side",
        "--force-conflicts",  # the CRDs belong to the installed release
        "--field-manager=chart-dry-run",
        "--validate=strict",
        "-f",
        "-",
        input=manifest,
    )
    applied = [line for line in out.splitlines() if line.strip()]
    assert len(applied) == manifest.count("\nkind: "), out
    if values_file is not None and values_file.name.startswith("spark"):
        assert "SparkApplication" in kinds and "sparkapplication" in out.lower()
    if values_file is not None and values_file.name.startswith("monitoring"):
        assert {"ServiceMonitor", "PodMonitor"} <= kinds


def test_dry_run_refuses_a_broken_manifest(dry_run_ready: Env) -> None:
    """The dry run really validates: a BrokerCluster without log dirs is refused."""
    manifest = dry_run_ready.helm(
        "template", "dry", str(CHART), "-n", "dry", "--set", "brokerCluster.enabled=true"
    )
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    (bc,) = [d for d in docs if d["kind"] == "BrokerCluster"]
    del bc["spec"]["logDirs"]
    p = dry_run_ready.cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=json.dumps(bc), check=False
    )
    assert p.returncode != 0 and "logDirs" in p.stderr, p.stderr


# -- the operator with the chart's RBAC -----------------------------------------------------


def broker_cluster(name: str, dirs: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "BrokerCluster",
        "metadata": {"name": name},
        "spec": {
            "replicas": 3,
            "logDirs": [{"name": d, "size": "1Gi"} for d in dirs],
            "config": {"replica.lag.time.max.ms": "3000"},
        },
    }


def topic(name: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name},
        "spec": {
            "clusterName": cluster,
            "partitions": 3,
            "replicationFactor": 3,
            "minInsyncReplicas": 2,
        },
    }


def sa_user(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def installed_rules(env: Env, *objects: tuple[str, ...]) -> set[chart_rbac.Rule]:
    rules: set[chart_rbac.Rule] = set()
    for args in objects:
        rules |= chart_rbac.rules_of(env.get(*args))
    return rules


def check_audit(
    env: Env,
    user: str,
    *,
    namespaced: bool,
    workload: set[chart_rbac.Rule],
    lease_namespace: str,
) -> list[chart_rbac.AuditedCall]:
    """No call was forbidden, and each call is one the code analysis says the code makes (so
    the static derivation misses nothing the operator really does)."""
    calls = chart_rbac.audited_calls(env.audit_log, user)
    assert calls, f"no request by {user} in the audit log"
    forbidden = sorted(
        {
            f"{c.verb} {c.group}/{c.resource} in {c.namespace}: {c.message}"
            for c in calls
            if c.code == 403
        }
    )
    assert not forbidden, "forbidden with the chart's RBAC:\n" + "\n".join(forbidden)
    want = chart_rbac.required_rules(namespaced=namespaced)
    derived = set().union(*want.values())
    used = set().union(*(c.rules for c in calls))
    unexpected = used - derived
    assert not unexpected, "calls the code analysis does not know:\n" + chart_rbac.describe(
        unexpected
    )
    assert used & want["workload"] <= workload
    for c in calls:
        if c.group == "coordination.k8s.io":
            assert c.namespace == lease_namespace, c
    return calls


def test_operator_works_with_the_charts_service_account(installed: Env) -> None:
    env = installed
    env.kubectl("create", "namespace", APPS_NS)
    kube = Kube(env.cluster, APPS_NS)
    op = env.operator(RELEASE_NS, FULLNAME, APPS_NS, "operator-clusterwide")
    op.start()
    brokers = None
    started = time.monotonic()
    try:
        kube.apply(broker_cluster("demo", DIRS))
        sts = wait_for(lambda: kube.get("statefulset", "demo-broker"), what="the StatefulSet")
        assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == [
            "data-a",
            "data-b",
            "data-c",
        ]
        brokers = start_local_brokers(
            op,
            kube,
            "demo",
            str(Path(op.workdir) / "brokers"),
            size=3,
            dir_names=DIRS,
            settings={"replica.lag.time.max.ms": "3000"},
        )
        wait_for(
            lambda: (
                (c := kube.condition("brokercluster", "demo", "Ready")) and c["status"] == "True"
            ),
            what="BrokerCluster Ready",
        )
        kube.apply(topic("orders", "demo"))
        wait_for(
            lambda: (c := kube.condition("topic", "orders", "Ready")) and c["status"] == "True",
            what="Topic Ready",
        )
        # A new log dir: the StatefulSet is deleted (orphan) and created again (delete verb).
        kube.apply(broker_cluster("demo", [*DIRS, "d"]))

        def recreated() -> bool:
            kube.finish_orphan_deletions()  # this API server has no garbage collector
            s = kube.get("statefulset", "demo-broker")
            return s is not None and len(s["spec"]["volumeClaimTemplates"]) == 4

        wait_for(recreated, what="the StatefulSet with four claim templates")
        # A LogDirMove naming no existing cluster: kopf takes it (finalizer) and the handler
        # writes its status (Pending), which is all its rules are for.
        kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "LogDirMove",
                "metadata": {"name": "nowhere"},
                "spec": {
                    "clusterName": "nowhere",
                    "moves": [{"brokerId": 0, "topic": "orders", "partition": 0, "logDir": "b"}],
                },
            }
        )
        wait_for(
            lambda: (kube.get("logdirmove", "nowhere") or {}).get("status"),
            what="the LogDirMove's status",
        )
        assert op.proc is not None and op.proc.poll() is None, op.tail()
    finally:
        if brokers is not None:
            brokers.stop()
        op.stop()
        print(f"operator run {time.monotonic() - started:.1f}s\n{op.tail(20)}")
    workload = installed_rules(env, ("clusterrole", FULLNAME))
    calls = check_audit(
        env,
        sa_user(RELEASE_NS, FULLNAME),
        namespaced=False,
        workload=workload,
        lease_namespace=RELEASE_NS,
    )
    used = set().union(*(c.rules for c in calls))
    # The run exercised the heart of the rules: SSA creating objects, status writes, the lease.
    assert {
        ("apps", "statefulsets", "patch"),
        ("apps", "statefulsets", "create"),
        ("apps", "statefulsets", "delete"),
        ("", "secrets", "create"),
        ("jbod.io", "topics/status", "update"),
        ("jbod.io", "brokerclusters/status", "patch"),
        ("coordination.k8s.io", "leases", "update"),
        ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
    } <= used
    granted = workload | installed_rules(
        env,
        ("role", f"{FULLNAME}-leader-election", "-n", RELEASE_NS),
        ("clusterrole", f"{FULLNAME}-kopf"),
    )
    print("granted, not exercised by this run:\n" + chart_rbac.describe(granted - used))


def test_operator_watching_one_namespace_works_with_a_role(installed: Env) -> None:
    env = installed
    release, ns, watched = "scoped", "jbod-scoped", "team-a"
    fullname = f"{release}-jbod-operator"
    env.kubectl("create", "namespace", watched)
    env.helm(
        "install",
        release,
        str(CHART),
        "-n",
        ns,
        "--create-namespace",
        "--set",
        f"watchNamespace={watched}",
        "--set",
        "crds.install=false",
    )
    assert env.cluster.kubectl("get", "clusterrole", fullname).returncode != 0
    kube = Kube(env.cluster, watched)
    op = env.operator(ns, fullname, watched, "operator-scoped")
    assert op.extra_env["JBOD_OPERATOR_NAMESPACE"] == watched
    op.start()
    try:
        kube.apply(broker_cluster("solo", DIRS))
        wait_for(lambda: kube.get("statefulset", "solo-broker"), what="the StatefulSet")
        wait_for(lambda: kube.get("poddisruptionbudget", "solo-broker"), what="the PDB")
        kube.run("delete", "brokercluster", "solo", "-n", watched)
    finally:
        op.stop()
        print(op.tail(10))
    workload = installed_rules(env, ("role", fullname, "-n", watched))
    calls = check_audit(
        env, sa_user(ns, fullname), namespaced=True, workload=workload, lease_namespace=ns
    )
    assert {c.namespace for c in calls if c.group not in ("", "coordination.k8s.io")} <= {
        watched,
        None,  # kopf's CRD watch (cluster-scoped)
    }
    assert {c.namespace for c in calls if c.group == "jbod.io"} == {watched}
    assert ("", "namespaces", "watch") in {c.rule for c in calls}
    env.helm("uninstall", release, "-n", ns)


@pytest.mark.parametrize(
    ("resource", "verb", "failing_call", "reason"),
    [
        (
            "statefulsets",
            "patch",
            "PATCH /apis/apps/v1/namespaces/{ns}/statefulsets/{ns}-broker",
            'cannot patch resource \\"statefulsets\\" in API group \\"apps\\"',
        ),
        (
            # The OwnerReferencesPermissionEnforcement admission plugin (on here) checks it.
            "brokerclusters/finalizers",
            "update",
            "POST /api/v1/namespaces/{ns}/secrets",
            "cannot set blockOwnerDeletion",
        ),
    ],
    ids=["statefulsets-patch", "finalizers-update"],
)
def test_forbidden_call_is_a_clear_error_not_a_crash(
    installed: Env, resource: str, verb: str, failing_call: str, reason: str
) -> None:
    env = installed
    role = env.get("clusterrole", FULLNAME)
    original = json.dumps(role)
    (rule,) = [r for r in role["rules"] if r["resources"] == [resource]]
    rule["verbs"].remove(verb)
    if not rule["verbs"]:
        role["rules"].remove(rule)
    env.kubectl("replace", "-f", "-", input=json.dumps(role))
    ns = f"no-{verb}"
    env.kubectl("create", "namespace", ns)
    kube = Kube(env.cluster, ns)
    op = env.operator(RELEASE_NS, FULLNAME, ns, f"operator-without-{verb}")
    op.start()
    message = failing_call.format(ns=ns) + ": 403 Forbidden"

    def lines() -> list[str]:
        return [ln for ln in op.tail(400).splitlines() if message in ln]

    def restore() -> None:
        restored = json.loads(original)
        restored["metadata"].pop("resourceVersion", None)
        env.kubectl("replace", "-f", "-", input=json.dumps(restored))

    try:
        kube.apply(broker_cluster(ns, DIRS))
        wait_for(lines, what=f"the forbidden call in the log: {message}")
        first = len(lines())
        # kopf retries the handler (backoff 5 s): the process stays up, the error repeats.
        wait_for(lambda: len(lines()) > first, what="a retry", timeout=30)
        assert op.proc is not None and op.proc.poll() is None, op.tail()
        assert kube.get("statefulset", f"{ns}-broker") is None
        line = lines()[0]
        assert '"level": "error"' in line and reason in line, line
        # Restored RBAC: the next retry succeeds, without a restart.
        restore()
        wait_for(lambda: kube.get("statefulset", f"{ns}-broker"), what="the StatefulSet")
        assert op.proc.poll() is None
    finally:
        op.stop()
        print(op.tail(5))
        restore()
        kube.run("delete", "brokercluster", ns, "-n", ns, "--wait=false")


def test_upgrade_keeps_the_generated_token_and_uninstall_keeps_the_crds(installed: Env) -> None:
    env = installed
    values = [
        "--set",
        "brokerCluster.enabled=true",
        "--set",
        f"brokerCluster.namespace={APPS_NS}",
        "--set",
        "brokerCluster.name=charted",
    ]
    env.helm("upgrade", RELEASE, str(CHART), "-n", RELEASE_NS, *values)
    kube = Kube(env.cluster, APPS_NS)
    first = kube.secret_value("charted-broker-token", "token")
    assert first and len(first) == 48
    assert kube.get("brokercluster", "charted") is not None
    env.helm("upgrade", RELEASE, str(CHART), "-n", RELEASE_NS, *values)
    assert kube.secret_value("charted-broker-token", "token") == first, "token rotated by upgrade"

    out = env.helm("uninstall", RELEASE, "-n", RELEASE_NS)
    assert "kept due to the resource policy" in out, out
    assert env.cluster.kubectl("get", "deployment", FULLNAME, "-n", RELEASE_NS).returncode != 0
    crds = env.get("crd", "-l", f"app.kubernetes.io/instance={RELEASE}")["items"]
    assert len(crds) == len(list((REPO / "crds").glob("*.yaml"))), crds  # every one kept
    # The custom resources outlive the release with their CRDs.
    assert kube.get("topic", "orders") is not None
