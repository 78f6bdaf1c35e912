"""Apache Kafka's own code beside ours: its tools on our files, its broker as a yardstick.

The jars come from Maven Central (``make kafka-jars``, part of ``make setup``: the pom in
``mk/kafka/pom.xml`` pins the version) into a cache outside the repo. This module finds them,
runs a Kafka class as a JVM with a deadline, and starts Apache Kafka in KRaft mode on loopback
ports: combined (broker and controller in one process) for the tests that compare formats and
for the benches that compare throughput with the same tools, or one dedicated controller and
JBOD brokers (several log dirs each) for the operator's tests against a Kafka cluster it does
not run (issue 22)::

    with KafkaCluster(tmp_path) as kafka:          # one combined node; nodes=3 for RF 3
        run_class(TOPIC_COMMAND, "--bootstrap-server", kafka.bootstrap, "--create", ...)
    with KafkaCluster(tmp_path, nodes=4, controllers=1, log_dirs=2, heap="320m") as kafka:
        kafka.stop_broker(3); kafka.start_broker(3)

Missing jars are an error that names the make target, never a skip (as with the API server
binaries in ``tests/kube_cluster.py``).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from jbod_broker.local import free_port
from jbod_broker.storage.names import new_topic_id
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parent.parent
POM = REPO / "mk" / "kafka" / "pom.xml"

# Where Kafka 4.3 keeps the classes the tests run (several moved from core's Scala to
# org.apache.kafka.tools in 4.x; StorageTool and the broker's main are still in core).
KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"

STARTED_LINE = "Kafka Server started"
"""What ``KafkaRaftServer`` logs once its listeners accept requests."""


class KafkaJarsMissing(RuntimeError):
    """The jars are not in the cache: ``make kafka-jars`` (or ``make setup``) fetches them."""


def kafka_version() -> str:
    """The pinned version: the pom is its one home (``mk/kafka.mk`` reads it there too)."""
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text(encoding="utf-8"))
    if m is None:
        raise RuntimeError(f"no <kafka.version> in {POM}")
    return m.group(1)


def libs_dir() -> Path:
    """``$JBOD_KAFKA_LIBS`` when set, else the cache ``mk/kafka.mk`` fills."""
    env = os.environ.get("JBOD_KAFKA_LIBS")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "jbod-operator" / f"kafka-{kafka_version()}" / "libs"


def classpath() -> str:
    libs = libs_dir()
    jars = sorted(libs.glob("*.jar")) if libs.is_dir() else []
    if not any(j.name == f"kafka_2.13-{kafka_version()}.jar" for j in jars):
        raise KafkaJarsMissing(
            f"Apache Kafka {kafka_version()} jars are not in {libs}: run `make kafka-jars` "
            "(part of `make setup`)"
        )
    return os.pathsep.join(str(j) for j in jars)


QUICK_START_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""JVM options for tests, where a JVM's start matters and its peak speed does not: the client
compiler only (C1; C2's compile threads compete with everything else for 2 cores while a JVM
starts) and the serial collector. Measured on this machine (session 35, load about 1): the
test fixture's cluster (one controller, 4 brokers x 2 dirs) started in 33.7 s with Java 17's
defaults and 20.6 s with these; a source-launched test client (``CountingProducer.java``) in
2.2 s and 1.5 s. Benches leave them out: Kafka is their yardstick at its full speed."""


def java_command(
    main: str, args: Sequence[str], *, heap: str = "256m", jvm_options: Sequence[str] = ()
) -> list[str]:
    """A JVM for one Kafka class: our classpath, a bounded heap, no GC log files. slf4j-simple
    stamps each log line with the time of day, so a broker's or the controller's log can be
    laid beside the operator's when a test or a bench is read afterwards. ``jvm_options`` go
    before the class (tests pass :data:`QUICK_START_JVM`)."""
    return [
        "java",
        f"-Xmx{heap}",
        *jvm_options,
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
        "-cp",
        classpath(),
        main,
        *args,
    ]


def run_class(
    main: str,
    *args: str,
    timeout_s: float = 120,
    heap: str = "256m",
    check: bool = True,
    jvm_options: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run a Kafka tool to its end (stdout and stderr captured as text). ``check``: a non-zero
    exit raises with both streams, so a failing tool explains itself in the test output."""
    proc = subprocess.run(
        java_command(main, args, heap=heap, jvm_options=jvm_options),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{main} {' '.join(args)} exited with {proc.returncode}\n"
            f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
        )
    return proc


# -- Apache Kafka clusters in KRaft mode ----------------------------------------------------

DEDICATED_CONTROLLER_ID = 100
"""The first dedicated controller's node id: far from the brokers' 1..N, so broker ids read
the same in combined and dedicated mode (and as the issue's scenarios name them)."""


@dataclass
class KafkaNode:
    """One Kafka process on 127.0.0.1 (ports picked free): broker and controller in one
    (combined mode), or one of the two. A broker has ``dirs`` log dirs (JBOD)."""

    node_id: int
    home: Path
    roles: tuple[str, ...] = ("broker", "controller")
    dirs: int = 1
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_offset: int = 0
    """Where ``server.log`` ended when the current process was spawned: a restarted node's
    start is looked for after it."""

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def log_dirs(self) -> list[Path]:
        """``log.dirs`` in order. One dir keeps the name ``data`` (what the format tests read);
        several are ``data-0``, ``data-1``, ... A dedicated controller's holds the metadata log."""
        if not self.is_broker:
            return [self.home / "metadata"]
        if self.dirs == 1:
            return [self.home / "data"]
        return [self.home / f"data-{i}" for i in range(self.dirs)]

    @property
    def log_dir(self) -> Path:
        return self.log_dirs[0]

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"

    def tail(self, lines: int = 40) -> str:
        try:
            return "".join(self.log_path.read_text(errors="replace").splitlines(True)[-lines:])
        except OSError:
            return "(no log)"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def kraft_properties(
    node: KafkaNode, voters: Sequence[KafkaNode], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A node's ``server.properties`` on loopback: a static controller quorum
    (``controller.quorum.voters``, so formatting needs no ``--standalone`` bootstrap), the
    listeners its roles need, and internal topics sized to the brokers' count (at most 3) so a
    one-broker cluster can create them. ``voters`` are the controller-role nodes."""
    listeners = []
    if node.is_broker:
        listeners.append(f"PLAINTEXT://127.0.0.1:{node.port}")
    if node.is_controller:
        listeners.append(f"CONTROLLER://127.0.0.1:{node.controller_port}")
    props = {
        "process.roles": ",".join(node.roles),
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(
            f"{v.node_id}@127.0.0.1:{v.controller_port}" for v in voters
        ),
        "listeners": ",".join(listeners),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": ",".join(str(d) for d in node.log_dirs),
    }
    if node.is_broker:
        props.update(
            {
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
                "inter.broker.listener.name": "PLAINTEXT",
                "num.partitions": "1",
                "group.initial.rebalance.delay.ms": "0",
            }
        )
    props.update(extra or {})
    return props


def _internal_topic_settings(brokers: int) -> dict[str, str]:
    rf = str(min(3, brokers))
    return {
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": "1",
    }


def broker_registrations(bootstrap: str, *, timeout_s: float = 10) -> dict[int, bool]:
    """Broker id -> fenced, as the cluster reports it (DescribeCluster with fenced brokers,
    through kafka-python's admin client). Raises what the client raises while no broker
    answers."""
    with warnings.catch_warnings():  # kafka-python 3.0's import warns on Python 3.11
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.admin import KafkaAdminClient  # only the KRaft waits need it

    ms = int(timeout_s * 1000)
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=ms, bootstrap_timeout_ms=ms
    )
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    return {int(b["broker_id"]): bool(b.get("is_fenced", False)) for b in described["brokers"]}


class KafkaCluster:
    """Apache Kafka in KRaft mode on loopback, formatted and started on entering and stopped
    (SIGTERM, then SIGKILL after ``stop_timeout_s``) on leaving.

    ``controllers=0`` (the default): ``nodes`` combined processes, each broker and controller.
    ``controllers=C``: C dedicated controllers (ids from :data:`DEDICATED_CONTROLLER_ID`) and
    ``nodes`` brokers (ids 1..nodes), each broker with ``log_dirs`` log dirs: a JBOD cluster as
    platform teams run it. Started means every broker registered with the controller and is
    unfenced (DescribeCluster), not merely listening. :meth:`stop_broker` and
    :meth:`start_broker` take one broker down and bring it back (a target broker gone mid-step).
    """

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        *,
        nodes: int = 1,
        controllers: int = 0,
        log_dirs: int = 1,
        heap: str = "512m",
        settings: Mapping[str, str] | None = None,
        start_timeout_s: float = 120,
        stop_timeout_s: float = 30,
        jvm_options: Sequence[str] = (),
    ) -> None:
        self.base_dir = Path(base_dir)
        self.heap = heap
        self.jvm_options = tuple(jvm_options)
        """For every JVM of the cluster, the formatting ones included (tests:
        :data:`QUICK_START_JVM`; benches: none)."""
        self.settings = _internal_topic_settings(nodes) | dict(settings or {})
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.cluster_id = new_topic_id()  # a cluster id is a Kafka Uuid string too
        broker_roles = ("broker",) if controllers else ("broker", "controller")
        self.nodes = [
            KafkaNode(i + 1, self.base_dir / f"kafka-{i + 1}", broker_roles, log_dirs)
            for i in range(nodes)
        ]
        self.nodes += [
            KafkaNode(
                DEDICATED_CONTROLLER_ID + i,
                self.base_dir / f"controller-{DEDICATED_CONTROLLER_ID + i}",
                ("controller",),
            )
            for i in range(controllers)
        ]

    @property
    def brokers(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.is_controller]

    def broker(self, node_id: int) -> KafkaNode:
        return next(n for n in self.brokers if n.node_id == node_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.brokers)

    def __enter__(self) -> KafkaCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        for node in self.nodes:
            node.home.mkdir(parents=True, exist_ok=True)
            props = kraft_properties(node, self.controllers, self.settings)
            node.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        # Format: meta.properties with the cluster id and a directory id in every log dir, and
        # the bootstrap metadata (the latest stable metadata version) in the first. One JVM per
        # node, all at once: each is seconds of JVM start, most of a small cluster's start-up.
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            formatted = [
                pool.submit(
                    run_class,
                    STORAGE_TOOL,
                    "format",
                    "--cluster-id",
                    self.cluster_id,
                    "--config",
                    str(node.config_path),
                    timeout_s=self.start_timeout_s,
                    jvm_options=self.jvm_options,
                )
                for node in self.nodes
            ]
            for done in formatted:
                done.result()
        # Controllers first: brokers register with them as they come up.
        ordered = self.controllers + [n for n in self.brokers if not n.is_controller]
        for node in ordered:
            self._spawn(node)
        deadline = time.monotonic() + self.start_timeout_s
        for node in ordered:
            self._wait_started(node, deadline)
        self.wait_registered({n.node_id for n in self.brokers}, deadline=deadline)

    def _spawn(self, node: KafkaNode) -> None:
        node.log_offset = node.log_path.stat().st_size if node.log_path.exists() else 0
        with open(node.log_path, "ab") as logf:
            node.proc = subprocess.Popen(
                java_command(
                    KAFKA_MAIN,
                    [str(node.config_path)],
                    heap=self.heap,
                    jvm_options=self.jvm_options,
                ),
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_started(self, node: KafkaNode, deadline: float) -> None:
        """Until the node logged that it started and its listener accepts a connection (a
        condition, polled; the JVM's start takes seconds, so a short poll costs nothing)."""
        port = node.port if node.is_broker else node.controller_port

        def started() -> bool:
            if not node.alive:  # raised at once: it can no longer come
                raise RuntimeError(f"Kafka node {node.node_id} exited:\n{node.tail()}")
            with open(node.log_path, "rb") as f:
                f.seek(node.log_offset)
                if STARTED_LINE.encode() not in f.read():
                    return False
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True

        wait_for(
            started,
            lambda: f"Kafka node {node.node_id} to start:\n{node.tail()}",
            max(0.0, deadline - time.monotonic()),
            retry=OSError,
        )

    def wait_registered(
        self,
        unfenced: set[int],
        *,
        fenced: frozenset[int] | set[int] = frozenset(),
        deadline: float | None = None,
    ) -> None:
        """Until DescribeCluster lists every broker of ``unfenced`` unfenced and none of
        ``fenced`` unfenced (a stopped broker stays registered, fenced: KRaft keeps it)."""
        if deadline is None:
            deadline = time.monotonic() + self.start_timeout_s
        live = [n for n in self.brokers if n.alive]
        bootstrap = ",".join(n.bootstrap for n in live)

        seen: list[dict[int, bool]] = []

        def registered() -> bool:
            seen[:] = [broker_registrations(bootstrap, timeout_s=5)]
            up = {b for b, is_fenced in seen[0].items() if not is_fenced}
            return unfenced <= up and not (fenced & up)

        wait_for(
            registered,
            lambda: (
                f"brokers {sorted(unfenced)} registered and unfenced (and {sorted(fenced)} "
                f"fenced); DescribeCluster said {seen or 'nothing yet'}"
            ),
            max(0.0, deadline - time.monotonic()),
            retry=Exception,
        )

    def stop_broker(self, node_id: int) -> None:
        """Stop one broker cleanly (controlled shutdown) and wait until the controller has
        fenced it: from then on it is what a stopped target broker looks like to clients."""
        node = self.broker(node_id)
        self._stop_nodes([node])
        others = {n.node_id for n in self.brokers if n.alive}
        self.wait_registered(others, fenced={node_id})

    def start_broker(self, node_id: int) -> None:
        """Start a stopped broker again (its formatted dirs kept) and wait until it is
        registered and unfenced."""
        node = self.broker(node_id)
        if node.alive:
            raise RuntimeError(f"broker {node_id} is running")
        self._spawn(node)
        deadline = time.monotonic() + self.start_timeout_s
        self._wait_started(node, deadline)
        self.wait_registered({n.node_id for n in self.brokers if n.alive}, deadline=deadline)

    def stop(self) -> None:
        # Brokers before controllers: a broker's controlled shutdown needs its controller.
        self._stop_nodes(self.brokers)
        self._stop_nodes(self.controllers)

    def _stop_nodes(self, nodes: Sequence[KafkaNode]) -> None:
        for node in nodes:
            if node.alive:
                assert node.proc is not None
                node.proc.send_signal(signal.SIGTERM)
        for node in nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()


JAVA_SOURCES = REPO / "tests" / "kafka_java"
ASSIGNED_CONSUMER_PERFORMANCE = str(JAVA_SOURCES / "AssignedConsumerPerformance.java")
"""ConsumerPerformance's consumer and settings on assigned partitions (no consumer group, which
our brokers do not serve yet); it prints ConsumerPerformance's summary."""


def read_partition_metadata(replica_dir: str | os.PathLike[str]) -> tuple[int, str]:
    """A replica folder's ``partition.metadata`` as Kafka's own reader returns it: (version,
    topic id). Raises with Kafka's message when Kafka would refuse the file."""
    source = JAVA_SOURCES / "ReadPartitionMetadata.java"
    out = run_class(str(source), str(replica_dir)).stdout.split()
    return int(out[out.index("version") + 1]), out[out.index("topic_id") + 1]


# -- the performance tools' summaries ------------------------------------------------------

_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) (?P<steady>steady state )?records sent, (?P<records_s>[\d.]+) records/sec "
    r"\((?P<mb_s>[\d.]+) MB/sec\), (?P<avg_ms>[\d.]+) ms avg latency, "
    r"(?P<max_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, (?P<p95_ms>\d+) ms 95th, "
    r"(?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99\.9th\."
)


def parse_producer_performance(stdout: str) -> dict[str, float]:
    """ProducerPerformance's last summary (a line with percentiles; the periodic lines before
    it have none): with ``--warmup-records`` that is the steady-state one it prints after the
    whole run's, which is what a comparison wants (``steady_state`` is then 1.0). Figures:
    records, records/s, MB/s (Kafka's MB: 2**20 bytes), avg/max latency and the
    p50/p95/p99/p99.9 latencies in ms. ``ValueError`` when the run printed none, as a producer
    that failed does."""
    found = list(_PRODUCER_SUMMARY.finditer(stdout))
    if not found:
        raise ValueError(f"no ProducerPerformance summary in:\n{stdout[-2000:]}")
    fields = found[-1].groupdict()
    steady = fields.pop("steady") is not None
    return {k: float(v) for k, v in fields.items()} | {"steady_state": float(steady)}


CONSUMER_COLUMNS = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
"""ConsumerPerformance's summary header (without --show-detailed-stats)."""


def parse_consumer_performance(stdout: str) -> dict[str, float]:
    """ConsumerPerformance's summary: the CSV line after its header, by column name. Its start
    and end times are wall-clock strings or epoch ms (``--date-format``); they are kept out, the
    figures are numbers. ``ValueError`` without a header and a line of as many columns."""
    names = [c.strip() for c in CONSUMER_COLUMNS.split(",")]
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == CONSUMER_COLUMNS and i + 1 < len(lines):
            values = [v.strip() for v in lines[i + 1].split(",")]
            if len(values) == len(names):
                pairs = zip(names, values, strict=True)
                return {n: float(v) for n, v in pairs if n not in ("start.time", "end.time")}
    raise ValueError(f"no ConsumerPerformance summary in:\n{stdout[-2000:]}")
