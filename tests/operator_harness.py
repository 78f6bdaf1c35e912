"""The operator as a real process against the test API server, with local broker processes.

``OperatorProcess`` runs ``python -m jbod_operator`` with the fixture's kubeconfig, a loopback
controller endpoint and a broker endpoints file; ``start_local_brokers`` starts brokers with the
token the operator put in the cluster's Secret, so every request crosses the same code path as
in a cluster.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from jbod_broker.local import LocalCluster, free_port
from tests.kube_cluster import KubeCluster

T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], timeout: float = 60, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # keep polling through transient errors, report the last
            last = e
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


class Kube:
    """kubectl with JSON in and out, for tests."""

    def __init__(self, cluster: KubeCluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace

    def run(self, *args: str, input: str | None = None, check: bool = True) -> str:
        p = self.cluster.kubectl(*args, input=input, check=False)
        if check and p.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {p.stderr}")
        return p.stdout if p.returncode == 0 else p.stderr

    def apply(self, obj: dict[str, Any]) -> str:
        return self.run("apply", "-n", self.namespace, "-f", "-", input=json.dumps(obj))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        p = self.cluster.kubectl("get", kind, name, "-n", self.namespace, "-o", "json", check=False)
        if p.returncode != 0:
            return None
        out: dict[str, Any] = json.loads(p.stdout)
        return out

    def condition(self, kind: str, name: str, type_: str) -> dict[str, Any] | None:
        obj = self.get(kind, name) or {}
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == type_:
                return dict(c)
        return None

    def finish_orphan_deletions(self, kind: str = "statefulset") -> None:
        """Play the garbage collector (this API server runs none): an object deleted with
        orphan propagation keeps its ``orphan`` finalizer until GC releases its dependents.
        There are no pods or PVC owners here, so releasing means dropping the finalizer."""
        out = json.loads(self.run("get", kind, "-n", self.namespace, "-o", "json"))
        for item in out.get("items", []):
            meta = item["metadata"]
            if meta.get("deletionTimestamp") and "orphan" in (meta.get("finalizers") or []):
                self.run(
                    "patch",
                    kind,
                    meta["name"],
                    "-n",
                    self.namespace,
                    "--type=json",
                    "-p",
                    '[{"op": "remove", "path": "/metadata/finalizers"}]',
                    check=False,
                )

    def secret_value(self, name: str, key: str) -> str | None:
        s = self.get("secret", name)
        if s is None or key not in s.get("data", {}):
            return None
        return base64.b64decode(s["data"][key]).decode().strip()


class OperatorProcess:
    def __init__(
        self,
        cluster: KubeCluster,
        namespace: str,
        workdir: str,
        *,
        interval: float = 2.0,
        name: str = "operator",
        endpoints_file: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.workdir = workdir
        self.port = free_port()
        self.endpoints_file = endpoints_file or os.path.join(workdir, "broker-endpoints.json")
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.interval = interval
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        if not os.path.exists(self.endpoints_file):
            with open(self.endpoints_file, "w", encoding="utf-8") as f:
                json.dump({}, f)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cluster_url(self, name: str) -> str:
        """What the brokers of BrokerCluster ``name`` use as controller.url."""
        return f"{self.url}/clusters/{self.namespace}/{name}"

    def set_endpoints(self, name: str, endpoints: dict[str, str]) -> None:
        with open(self.endpoints_file, encoding="utf-8") as f:
            data = json.load(f)
        data[f"{self.namespace}/{name}"] = endpoints
        tmp = self.endpoints_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, self.endpoints_file)

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JBOD_")}
        env.update(
            {
                "KUBECONFIG": self.cluster.kubeconfig,
                "JBOD_OPERATOR_NAMESPACE": self.namespace,
                "JBOD_OPERATOR_CONTROLLER_LISTEN_HOST": "127.0.0.1",
                "JBOD_OPERATOR_CONTROLLER_LISTEN_PORT": str(self.port),
                "JBOD_OPERATOR_CONTROLLER_URL": self.url,
                "JBOD_OPERATOR_BROKER_ENDPOINTS_FILE": self.endpoints_file,
                "JBOD_OPERATOR_RECONCILE_INTERVAL_SECONDS": str(self.interval),
                "JBOD_OPERATOR_BROKER_TIMEOUT_SECONDS": "3",
                **self.extra_env,
            }
        )
        logf = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jbod_operator"], stdout=logf, stderr=logf, env=env
        )
        logf.close()

    def tail(self, n: int = 40) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def start_local_brokers(
    op: OperatorProcess,
    kube: Kube,
    cluster_name: str,
    base_dir: str,
    *,
    size: int,
    dir_names: list[str],
    settings: dict[str, str] | None = None,
    standby: list[OperatorProcess] | None = None,
) -> LocalCluster:
    """Brokers 0..size-1 of BrokerCluster ``cluster_name`` as local processes. With standby
    operators, brokers get every operator's address (they find the active one)."""
    token = wait_for(
        lambda: kube.secret_value(f"{cluster_name}-broker-token", "token"),
        what=f"the token Secret of {cluster_name}",
    )
    urls = [o.cluster_url(cluster_name) for o in [op, *(standby or [])]]
    cl = LocalCluster(
        base_dir,
        size=size,
        controller_url=",".join(urls),
        settings=settings or {},
        token=token,
        dir_names=dir_names,
    )
    op.set_endpoints(cluster_name, cl.endpoints())
    cl.start()
    return cl
