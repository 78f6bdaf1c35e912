"""A real kube-apiserver + etcd on loopback, for integration and e2e tests.

The binaries come from ``make kube-bins`` (see mk/kube.mk and docs/kube-apiserver.md); kubectl
from ``make kubectl-bins``. Nothing here needs Docker, a kubelet or any network but 127.0.0.1:
there are no nodes, so Pods are stored but never run. Usage::

    from tests.kube_cluster import KubeCluster

    with KubeCluster() as kube:
        kube.kubectl("get", "namespaces", check=True)

The helper is dependency-free (stdlib + the openssl CLI, or ``cryptography`` when installed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
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
from typing import IO

REPO_ROOT = Path(__file__).resolve().parents[1]
KUBE_TOOLS_GO_MOD = REPO_ROOT / "e2e" / "tools" / "kube" / "go.mod"
DEFAULT_KUBECTL = REPO_ROOT / ".venv" / "bin" / "kubectl"
START_TIMEOUT_S = 90.0
LOG_TAIL_LINES = 40
RSA_2048 = ("-pkeyopt", "rsa_keygen_bits:2048")


class KubeBinariesMissing(RuntimeError):
    """kube-apiserver/etcd (or kubectl) are not built: the message says which make target to run."""


def pinned_kube_version() -> str:
    """The k8s.io/kubernetes tag that e2e/tools/kube/go.mod pins, e.g. ``v1.33.13``."""
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        return subprocess.run(
            cmd, input=input, capture_output=True, text=True, check=check, timeout=timeout
        )

    def require_kubectl(self) -> Path:
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


__all__ = [
    "KubeBinariesMissing",
    "KubeCluster",
    "default_bin_dir",
    "find_binaries",
    "pinned_kube_version",
]


if __name__ == "__main__":  # manual smoke test: python -m tests.kube_cluster
    with KubeCluster() as cluster, contextlib.suppress(KeyboardInterrupt, EOFError):
        print(cluster.kubectl("version").stdout)
        print(f"server {cluster.server}\nexport KUBECONFIG={cluster.kubeconfig}")
        input("Enter stops the cluster ")
