"""Brokers as local processes on loopback: for the demo, the tests and the benchmarks.

In Kubernetes each broker is a pod with one PVC per log dir; here each is a child process with
one directory per "disk" under a base folder. Same code path otherwise: the same config file
format, the same token file, the same HTTP API, and a Kafka listener on a loopback port
(:attr:`LocalCluster.bootstrap_servers`).
"""

from __future__ import annotations

import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from . import wire
from .client import BrokerClient
from .storage.names import new_topic_id

READY_TIMEOUT_S = 60.0
"""How long a started broker may take to answer ``/readyz``. A condition polled every 50 ms,
so a healthy start (a second or two) never waits for it; 30 s was once too short for a
process that imports its packages on a 2-core machine busy with five JVMs."""

_EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
_PICKABLE = (10000, 65535)
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands to ``bind(0)`` and to outgoing connections."""
    try:
        with open(_EPHEMERAL_RANGE_FILE, encoding="ascii") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


PORT_SLICE_ENV = "JBOD_PORT_SLICE"
"""``"i/n"``: pick only ports ``p`` with ``p % n == i``. Runs that share a machine (the test
tiers on several workers) each take their own slice, so no two of them pick the same port; child
processes inherit it."""


def _port_slice() -> tuple[int, int]:
    """``(i, n)`` from :data:`PORT_SLICE_ENV`, ``(0, 1)`` (every port) when unset."""
    raw = os.environ.get(PORT_SLICE_ENV, "")
    if not raw:
        return 0, 1
    i, _, n = raw.partition("/")
    try:
        index, count = int(i), int(n)
    except ValueError:
        raise ValueError(f"{PORT_SLICE_ENV}={raw!r}: expected i/n, e.g. 0/2") from None
    if not 0 <= index < count:
        raise ValueError(f"{PORT_SLICE_ENV}={raw!r}: i must be in 0..n-1")
    return index, count


def free_port() -> int:
    """A loopback port nothing listens on, for a process started later to bind.

    Picked outside the kernel's ephemeral range: a port taken from ``bind(0)`` and released is
    free for the kernel to give to the next outgoing connection, and with hundreds of client
    connections in a test run one did land on a broker's port before it bound (address already
    in use). Outside that range only another explicit pick can take it, and this process never
    hands the same port out twice. Another process picking at the same time is kept apart by
    :data:`PORT_SLICE_ENV`.
    """
    lo, hi = _ephemeral_range()
    index, count = _port_slice()
    rng = secrets.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(*_PICKABLE)
        port += (index - port) % count
        if port >= _PICKABLE[1] or lo <= port <= hi or port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port outside the ephemeral range {lo}-{hi}")


def write_token(path: str) -> str:
    token = secrets.token_hex(24)
    with open(path, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token


@dataclass
class LocalBroker:
    broker_id: int
    base_dir: str
    token_file: str
    num_dirs: int = 3
    port: int = field(default_factory=free_port)
    kafka_port: int = field(default_factory=free_port)
    """The Kafka protocol listener's port (issue 18); the same across restarts."""
    controller_url: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    dir_names: list[str] | None = None
    """Names of the log dirs (``data-<name>``, as in a BrokerCluster); default 0..num_dirs-1."""
    cluster_id: str | None = None
    """``cluster.id``: a :class:`LocalCluster` gives its brokers one, as the operator does."""
    open_file_limit: int | None = None
    """RLIMIT_NOFILE (soft and hard) of the broker process; ``None``: this process's own. A low
    one makes running out of descriptors cheap to reach in a test (issue 14)."""
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def kafka_endpoint(self) -> str:
        """``HOST:PORT`` of the broker's Kafka listener: what a Kafka client bootstraps from."""
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def home(self) -> str:
        return os.path.join(self.base_dir, f"broker-{self.broker_id}")

    @property
    def log_dirs(self) -> list[str]:
        names = self.dir_names or [str(i) for i in range(self.num_dirs)]
        return [os.path.join(self.home, wire.log_dir_folder(n)) for n in names]

    @property
    def config_path(self) -> str:
        return os.path.join(self.home, "server.properties")

    @property
    def log_path(self) -> str:
        return os.path.join(self.home, "broker.log")

    def write_config(self) -> None:
        os.makedirs(self.home, exist_ok=True)
        props = {
            "broker.id": str(self.broker_id),
            "log.dirs": ",".join(self.log_dirs),
            "listeners": self.url,
            "kafka.listeners": f"PLAINTEXT://{self.kafka_endpoint}",
            "token.file": self.token_file,
            **({"controller.url": self.controller_url} if self.controller_url else {}),
            **({"cluster.id": self.cluster_id} if self.cluster_id else {}),
            **self.settings,
        }
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())

    def start(self, *, wait: bool = True, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.write_config()
        env = {k: v for k, v in os.environ.items() if not k.startswith("JBOD_")}
        logf = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jbod_broker", "--config", self.config_path],
            stdout=logf,
            stderr=logf,
            env=env,
            preexec_fn=self._limit_open_files if self.open_file_limit is not None else None,
        )
        logf.close()
        if wait:
            self.wait_ready(timeout_s)

    def _limit_open_files(self) -> None:
        """Runs in the child between fork and exec: both limits, so the broker cannot raise it."""
        assert self.open_file_limit is not None
        n = self.open_file_limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"broker {self.broker_id} exited with {self.proc.returncode}:\n{self.tail()}"
                )
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise TimeoutError(f"broker {self.broker_id} not ready in {timeout_s}s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no flush, no checkpoint, no clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self, timeout_s: float = 20) -> int | None:
        """SIGTERM: a graceful shutdown that flushes and checkpoints."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@dataclass
class LocalCluster:
    base_dir: str
    size: int = 3
    num_dirs: int = 3
    controller_url: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    brokers: list[LocalBroker] = field(default_factory=list)
    token: str = ""
    """Given: the brokers use it (e.g. the operator's token Secret); empty: a new one."""
    dir_names: list[str] | None = None
    cluster_id: str = field(default_factory=new_topic_id)
    """The brokers' ``cluster.id`` (a Kafka Uuid, fresh per cluster, like ``kafka-storage
    random-uuid``): Kafka clients see it in Metadata."""

    def __post_init__(self) -> None:
        os.makedirs(self.base_dir, exist_ok=True)
        token_file = os.path.join(self.base_dir, "token")
        if self.token:
            with open(token_file, "w", encoding="utf-8") as f:
                f.write(self.token + "\n")
            os.chmod(token_file, 0o600)
        else:
            self.token = write_token(token_file)
        self.brokers = [
            LocalBroker(
                broker_id=i,
                base_dir=self.base_dir,
                token_file=token_file,
                num_dirs=self.num_dirs,
                controller_url=self.controller_url,
                settings=dict(self.settings),
                dir_names=self.dir_names,
                cluster_id=self.cluster_id,
            )
            for i in range(self.size)
        ]

    def start(self) -> None:
        """Start every broker and wait for all; if one fails, the others are stopped before the
        error is raised (nothing is left running for a fixture that never got the cluster)."""
        try:
            for b in self.brokers:
                b.start(wait=False)
            for b in self.brokers:
                b.wait_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for b in self.brokers:
            b.stop()

    def __getitem__(self, broker_id: int) -> LocalBroker:
        return self.brokers[broker_id]

    def add_broker(self) -> LocalBroker:
        """The next broker id, configured like the others (not started): what a StatefulSet
        scaled up by one creates as a new pod."""
        b = LocalBroker(
            broker_id=len(self.brokers),
            base_dir=self.base_dir,
            token_file=os.path.join(self.base_dir, "token"),
            num_dirs=self.num_dirs,
            controller_url=self.controller_url,
            settings=dict(self.settings),
            dir_names=self.dir_names,
            cluster_id=self.cluster_id,
        )
        self.brokers.append(b)
        self.size = len(self.brokers)
        return b

    def restart_with_dirs(self, broker_id: int, dir_names: list[str]) -> None:
        """Stop broker ``broker_id`` gracefully and start it again with ``dir_names`` as its
        log dirs: a pod rolled onto a template with another disk, since a broker reads
        ``log.dirs`` only at start (as Kafka does). New brokers get these dirs too."""
        self.dir_names = list(dir_names)
        b = self.brokers[broker_id]
        b.stop()
        b.dir_names = list(dir_names)
        b.start()

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's Kafka listener, as a Kafka client's ``bootstrap.servers``."""
        return ",".join(b.kafka_endpoint for b in self.brokers)

    def endpoints(self) -> dict[str, str]:
        """Broker id → URL, the shape of the operator's broker endpoints file."""
        return {str(b.broker_id): b.url for b in self.brokers}


async def lead_alone(
    client: BrokerClient, topic: str, partitions: int, *, broker_id: int = 0
) -> None:
    """Make the broker behind ``client`` the sole replica and leader of ``topic``'s partitions.

    What a controller would send for a new replication-factor-1 topic; tests and benchmarks
    that drive one broker without the operator use it in its place.
    """
    resp = await client.leader_and_isr(
        wire.LeaderAndIsrRequest(
            controller_id=0,
            controller_epoch=1,
            partitions=[
                wire.LeaderAndIsrPartition(
                    topic=topic,
                    partition=p,
                    leader=broker_id,
                    leader_epoch=0,
                    isr=[broker_id],
                    replicas=[broker_id],
                    is_new_replica=True,
                )
                for p in range(partitions)
            ],
        )
    )
    errors = [r for r in resp.partitions if r.error]
    if errors:
        raise RuntimeError(f"LeaderAndIsr refused: {errors}")
