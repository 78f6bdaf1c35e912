"""Kubernetes on this machine without Docker: a real kube-apiserver + etcd on loopback, and the
operator as a local process driving brokers that run as local processes.

``make demo`` runs on this, and so do the integration and e2e tests (``tests/kube_cluster.py``
and ``tests/operator_harness.py`` re-export it), so the demo shows exactly the set-up the tests
check. The binaries come from ``make kube-bins`` (see ``mk/kube.mk``): etcd and kube-apiserver
built once from the Go modules in ``e2e/tools/`` into a cache outside the repository; kubectl
from ``make kubectl-bins``. Nothing here needs Docker, a kubelet or any network but 127.0.0.1:
there are no nodes, so Pods are stored but never run, which is why the brokers of a
BrokerCluster are started here as local processes and reached through the operator's endpoints
file instead of in-cluster DNS names. Everything else is the code path of a real cluster.

It runs from a source checkout (the pinned Kubernetes tag is read from
``e2e/tools/kube/go.mod``, kubectl is looked for in the checkout's ``.venv/bin``), which is why
it is a tool next to ``jbod-ctl`` and never imported by the operator itself. Usage::

    from jbod_operator.tools.localkube import KubeCluster

    with KubeCluster() as kube:
        kube.kubectl("get", "namespaces", check=True)

``python -m jbod_operator.tools.localkube`` starts one by hand and prints the ``KUBECONFIG``.
Apart from :mod:`jbod_broker.local` for the brokers it needs only the standard library and the
openssl CLI (or ``cryptography`` when installed).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

from jbod_broker.local import LocalCluster, free_port

from ..models.partition_shard import TOPIC_UID_LABEL
from ..plan import partition_shards

REPO_ROOT = Path(__file__).resolve().parents[3]
KUBE_TOOLS_GO_MOD = REPO_ROOT / "e2e" / "tools" / "kube" / "go.mod"
DEFAULT_KUBECTL = REPO_ROOT / ".venv" / "bin" / "kubectl"
START_TIMEOUT_S = 90.0
LOG_TAIL_LINES = 40
RSA_2048 = ("-pkeyopt", "rsa_keygen_bits:2048")

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# The binaries
# ---------------------------------------------------------------------------------------------


class KubectlError(subprocess.CalledProcessError):
    """A kubectl run with ``check`` that failed; its message ends with what kubectl printed
    on stderr."""

    def __str__(self) -> str:
        return f"{super().__str__()}: {(self.stderr or '').strip()[-2000:]}"


class KubeBinariesMissing(RuntimeError):
    """kube-apiserver/etcd (or kubectl) are not built: the message says which make target to run."""


def pinned_kube_version() -> str:
    """The k8s.io/kubernetes tag that e2e/tools/kube/go.mod pins, e.g. ``v1.33.13``: the one
    place the version is written, so the cache directory and the server agree with the build."""
    match = re.search(
        r"^require\s+k8s\.io/kubernetes\s+(v\S+)", KUBE_TOOLS_GO_MOD.read_text(), re.MULTILINE
    )
    if match is None:
        raise RuntimeError(f"no 'require k8s.io/kubernetes vX.Y.Z' line in {KUBE_TOOLS_GO_MOD}")
    return match.group(1)


def default_bin_dir() -> Path:
    """KUBE_BIN_DIR if set, else the cache directory mk/kube.mk builds into."""
    env = os.environ.get("KUBE_BIN_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".cache" / "jbod-operator" / f"kube-{pinned_kube_version()}" / "bin"


def find_binaries(bin_dir: Path | None = None) -> tuple[Path, Path]:
    """(etcd, kube-apiserver), or KubeBinariesMissing telling to run ``make kube-bins``."""
    directory = bin_dir if bin_dir is not None else default_bin_dir()
    etcd, apiserver = directory / "etcd", directory / "kube-apiserver"
    missing = [str(p) for p in (etcd, apiserver) if not os.access(p, os.X_OK)]
    if missing:
        raise KubeBinariesMissing(
            f"missing {', '.join(missing)}: run `make kube-bins` first "
            "(builds kube-apiserver and etcd once into that cache; KUBE_BIN_DIR overrides it)"
        )
    return etcd, apiserver


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def _write_service_account_key(path: Path) -> None:
    """An RSA private key (PKCS#8 PEM) that signs and verifies service-account tokens."""
    try:
        from cryptography.hazmat.primitives import serialization  # type: ignore[import-not-found,unused-ignore]
        from cryptography.hazmat.primitives.asymmetric import rsa  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RuntimeError("need the `cryptography` package or the openssl CLI") from None
        subprocess.run(
            [openssl, "genpkey", "-algorithm", "RSA", "-out", str(path), *RSA_2048],
            check=True,
            capture_output=True,
        )
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    path.chmod(0o600)


# ---------------------------------------------------------------------------------------------
# The API server
# ---------------------------------------------------------------------------------------------


class KubeCluster:
    """etcd + kube-apiserver on free loopback ports, in a temp dir removed by :meth:`stop`.

    Attributes set by :meth:`start`: ``server`` (https URL), ``token`` (admin bearer token, user
    ``admin`` in group ``system:masters``), ``ca_file`` (the apiserver's self-signed CA),
    ``kubeconfig`` (path), ``workdir`` (temp dir with ``etcd.log`` and ``kube-apiserver.log``).
    """

    def __init__(
        self,
        bin_dir: Path | None = None,
        kubectl: Path | None = None,
        extra_apiserver_args: Sequence[str] = (),
        start_timeout: float = START_TIMEOUT_S,
        keep_workdir: bool = False,
    ) -> None:
        self.bin_dir = bin_dir
        self.kubectl_path = kubectl or Path(os.environ.get("KUBECTL", str(DEFAULT_KUBECTL)))
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.start_timeout = start_timeout
        self.keep_workdir = keep_workdir
        self.version = pinned_kube_version()
        self.workdir: Path | None = None
        self.server = ""
        self.token = ""
        self.ca_file: Path | None = None
        self.kubeconfig: Path | None = None
        self.etcd_url = ""
        self._procs: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = []

    @property
    def pids(self) -> dict[str, int]:
        """The running processes by name (``etcd``, ``kube-apiserver``): what a bench charges
        the API server's CPU to."""
        return {name: proc.pid for name, proc, _log in self._procs if proc.poll() is None}

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> KubeCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> KubeCluster:
        """Start both, or stop what started and raise with the last lines of their logs."""
        etcd_bin, apiserver_bin = find_binaries(self.bin_dir)
        self.workdir = Path(tempfile.mkdtemp(prefix="kube-cluster-"))
        try:
            self._start(etcd_bin, apiserver_bin)
        except BaseException as exc:
            report = self._logs_report()
            print(report, file=sys.stderr)
            exc.add_note(report)
            self.stop()
            raise
        return self

    def _start(self, etcd_bin: Path, apiserver_bin: Path) -> None:
        assert self.workdir is not None
        work = self.workdir
        deadline = time.monotonic() + self.start_timeout

        client_port, peer_port = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        data_dir = work / "etcd-data"
        data_dir.mkdir(mode=0o700)
        self._spawn(
            "etcd",
            [
                str(etcd_bin),
                "--name=default",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",  # throwaway data: no fsync makes writes far faster
                "--log-level=warn",
            ],
        )
        self._wait_until(deadline, "etcd /health", self._etcd_healthy)

        sa_key = work / "sa.key"
        _write_service_account_key(sa_key)
        self.token = uuid.uuid4().hex
        token_file = work / "tokens.csv"
        token_file.write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        token_file.chmod(0o600)
        cert_dir = work / "certs"
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        self._spawn(
            "kube-apiserver",
            [
                str(apiserver_bin),
                "--advertise-address=127.0.0.1",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={cert_dir}",  # self-signed serving cert + CA, written there
                f"--etcd-servers={self.etcd_url}",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--token-auth-file={token_file}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--enable-priority-and-fairness=false",
                # A loopback address is not a valid Endpoints address: keep the reconciler off.
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                *self.extra_apiserver_args,
            ],
        )
        self._wait_until(deadline, "kube-apiserver /readyz", self._apiserver_ready)

        # The self-signed serving cert file holds the leaf cert followed by its CA.
        self.ca_file = cert_dir / "apiserver.crt"
        self.kubeconfig = work / "kubeconfig"
        self.kubeconfig.write_text(json.dumps(self.kubeconfig_dict(), indent=2))
        self.kubeconfig.chmod(0o600)

    def stop(self) -> None:
        """Terminate both processes (apiserver first) and remove the temp dir. Idempotent."""
        while self._procs:
            _name, proc, log = self._procs.pop()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()
        if self.workdir is not None and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    # -- use -------------------------------------------------------------------------------
    def kubeconfig_dict(self) -> dict[str, object]:
        """The admin kubeconfig: the static token, and the self-signed CA so TLS is verified."""
        assert self.ca_file is not None
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "loopback",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "admin", "context": {"cluster": "loopback", "user": "admin"}}],
            "current-context": "admin",
        }

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = False,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; stdout/stderr captured as text."""
        if self.kubeconfig is None or self.workdir is None:
            raise RuntimeError("KubeCluster is not started")
        self.require_kubectl()
        cmd = [
            str(self.kubectl_path),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.workdir / 'kubectl-cache'}",
            *args,
        ]
        done = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            # What kubectl said is the reason; CalledProcessError alone would not show it.
            raise KubectlError(done.returncode, cmd, done.stdout, done.stderr)
        return done

    def wait_established(self, *crds: str, timeout: float = 60.0) -> None:
        """Until every named CRD (``sparkapplications.sparkoperator.k8s.io``; none named: all
        there are) reports Established. ``kubectl wait --for=condition=Established`` is not
        enough: on a CRD the API server has not given a status yet it fails at once
        ("<nil> is of the type <nil>") instead of waiting (a make test run saw it)."""

        def established() -> bool:
            done = self.kubectl("get", "crd", *crds, "-o", "json", check=True)
            doc = json.loads(done.stdout)
            items = doc.get("items", [doc]) if doc.get("kind") == "List" else [doc]
            return bool(items) and all(
                any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in (i.get("status") or {}).get("conditions") or []
                )
                for i in items
            )

        wait_for(established, timeout, f"CRDs {', '.join(crds) or '(all)'} to be Established")

    def require_kubectl(self) -> Path:
        """kubectl's path, or KubeBinariesMissing naming the make target that installs it."""
        if not os.access(self.kubectl_path, os.X_OK):
            raise KubeBinariesMissing(
                f"missing {self.kubectl_path}: run `make setup kubectl-bins` first"
            )
        return self.kubectl_path

    def api_get(self, path: str, timeout: float = 5.0) -> tuple[int, bytes]:
        """GET ``path`` on the apiserver as admin, verifying TLS against its CA once known."""
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self._ssl()) as resp:
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as err:
            with err:
                return int(err.code), err.read()

    def log_path(self, name: str) -> Path:
        assert self.workdir is not None
        return self.workdir / f"{name}.log"

    # -- internals -------------------------------------------------------------------------
    def _ssl(self) -> ssl.SSLContext:
        if self.ca_file is not None and self.ca_file.exists():
            return ssl.create_default_context(cafile=str(self.ca_file))
        # Before the CA is known (start-up polling only): encrypted but unverified.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = self.log_path(name).open("wb")
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # a Ctrl-C to pytest does not race our SIGTERM
            )
        except BaseException:
            log.close()
            raise
        self._procs.append((name, proc, log))

    def _check_alive(self) -> None:
        for name, proc, _log in self._procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with code {proc.returncode} during start-up")

    def _wait_until(self, deadline: float, what: str, probe: Callable[[], bool]) -> None:
        while True:
            self._check_alive()
            if probe():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not ready within {self.start_timeout:.0f}s")
            time.sleep(0.2)

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _apiserver_ready(self) -> bool:
        try:
            status, _body = self.api_get("/readyz", timeout=2)
        except OSError:
            return False
        return status == 200

    def _logs_report(self) -> str:
        parts = [f"KubeCluster start-up failed; work dir {self.workdir}"]
        for name in ("etcd", "kube-apiserver"):
            path = self.log_path(name)
            if path.exists():
                parts.append(f"---- last {LOG_TAIL_LINES} lines of {path} ----\n{_tail(path)}")
        return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# The operator and its brokers as local processes
# ---------------------------------------------------------------------------------------------


def wait_for(
    fn: Callable[[], T | None],
    timeout: float = 60,
    what: str = "condition",
    *,
    interval: float = 0.2,
) -> T:
    """Poll ``fn`` every ``interval`` seconds until it returns something truthy, which is
    returned. The API server and the operator are eventually consistent, so errors while
    polling are retried; a timeout names ``what`` was awaited and the last result or error."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = fn()
            if result:
                return result
            last = result
        except Exception as e:  # keep polling through transient errors, report the last
            last = e
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


class Kube:
    """kubectl on one namespace of a :class:`KubeCluster`, with JSON in and out."""

    def __init__(self, cluster: KubeCluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace

    def run(self, *args: str, input: str | None = None, check: bool = True) -> str:
        """kubectl's stdout; with ``check=False`` a failure returns its stderr instead."""
        p = self.cluster.kubectl(*args, input=input, check=False)
        if check and p.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {p.stderr}")
        return p.stdout if p.returncode == 0 else p.stderr

    def apply(self, obj: dict[str, Any]) -> str:
        return self.run("apply", "-n", self.namespace, "-f", "-", input=json.dumps(obj))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist (or cannot be read)."""
        p = self.cluster.kubectl("get", kind, name, "-n", self.namespace, "-o", "json", check=False)
        if p.returncode != 0:
            return None
        out: dict[str, Any] = json.loads(p.stdout)
        return out

    def topic(self, name: str) -> dict[str, Any] | None:
        """Topic ``name`` with its partition state of record (``status.partitions``) joined
        from its PartitionShards, as the operator reads it; None if it does not exist."""
        t = self.get("topic", name)
        if t is None:
            return None
        p = self.cluster.kubectl(
            "get",
            "partitionshards",
            "-n",
            self.namespace,
            "-o",
            "json",
            "-l",
            f"{TOPIC_UID_LABEL}={t['metadata']['uid']}",
            check=False,
        )
        shards = json.loads(p.stdout).get("items") or [] if p.returncode == 0 else []
        return partition_shards.join(t, shards)

    def topics(self) -> list[dict[str, Any]]:
        """Every Topic of the namespace, each with its partition state of record joined."""
        ns = ("-n", self.namespace)
        topics = json.loads(self.run("get", "topics", *ns, "-o", "json"))["items"]
        shards = json.loads(self.run("get", "partitionshards", *ns, "-o", "json"))["items"]
        return partition_shards.join_all(topics, shards)

    def partitions(self, name: str) -> list[dict[str, Any]]:
        """Topic ``name``'s partition states (empty if it has none, or does not exist)."""
        t = self.topic(name)
        return list(t["status"]["partitions"]) if t is not None else []

    def condition(self, kind: str, name: str, type_: str) -> dict[str, Any] | None:
        """The object's status condition of type ``type_``, if it has one."""
        obj = self.get(kind, name) or {}
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == type_:
                return dict(c)
        return None

    def finish_orphan_deletions(self, kind: str = "statefulset") -> None:
        """Play the garbage collector (this API server runs none): an object deleted with
        orphan propagation keeps its ``orphan`` finalizer until GC releases its dependents.
        There are no pods or PVC owners here, so releasing means dropping the finalizer. The
        operator deletes its StatefulSet that way when the log dirs change (claim templates
        are immutable), so the demo's added disk and the tests need this."""
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
        """One key of a Secret, decoded (None until the Secret and the key exist)."""
        s = self.get("secret", name)
        if s is None or key not in s.get("data", {}):
            return None
        return base64.b64decode(s["data"][key]).decode().strip()


class OperatorProcess:
    """``python -m jbod_operator`` against a :class:`KubeCluster`, with its controller endpoint
    on a free loopback port and a broker endpoints file (no in-cluster DNS here), logging to
    ``<workdir>/<name>.log``. The environment's ``JBOD_*`` variables are dropped so that only
    what is given here (and in ``env``) configures it."""

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
        """Tell the operator where the brokers of BrokerCluster ``name`` listen (replacing the
        file atomically: the operator may read it at any time)."""
        with open(self.endpoints_file, encoding="utf-8") as f:
            data = json.load(f)
        data[f"{self.namespace}/{name}"] = endpoints
        tmp = self.endpoints_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, self.endpoints_file)

    def start(self) -> None:
        if self.cluster.kubeconfig is None:
            raise RuntimeError("KubeCluster is not started")
        env = {k: v for k, v in os.environ.items() if not k.startswith("JBOD_")}
        env.update(
            {
                "KUBECONFIG": str(self.cluster.kubeconfig),
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
        """The last ``n`` lines of the operator's log (empty when there is none yet)."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM (the operator releases its Lease), SIGKILL after 15 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: a crash, for failover scenarios."""
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
    """Brokers 0..size-1 of BrokerCluster ``cluster_name`` as local processes, with the token
    the operator put in the cluster's Secret, so every request crosses the same code path as in
    a cluster. With standby operators, brokers get every operator's address (they find the
    active one)."""
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


__all__ = [
    "Kube",
    "KubeBinariesMissing",
    "KubeCluster",
    "OperatorProcess",
    "default_bin_dir",
    "find_binaries",
    "main",
    "pinned_kube_version",
    "start_local_brokers",
    "wait_for",
]


def main() -> None:
    """Start one by hand (``python -m jbod_operator.tools.localkube``), print the
    ``KUBECONFIG`` to use, and stop it on Enter or Ctrl-C."""
    with KubeCluster() as cluster, contextlib.suppress(KeyboardInterrupt, EOFError):
        print(cluster.kubectl("version").stdout)
        print(f"server {cluster.server}\nexport KUBECONFIG={cluster.kubeconfig}")
        input("Enter stops the cluster ")


if __name__ == "__main__":
    main()
