"""Apache Kafka's Admin API for a cluster the operator does not run (issue 22).

kafka-python's ``KafkaAdminClient`` is synchronous (its I/O runs on its own thread and each
call blocks until the answer), so every call goes through :func:`asyncio.to_thread`, one at a
time per client (a lock: the handlers of one KafkaCluster never interleave requests on one
connection). One :class:`KafkaAdmin` per KafkaCluster; the handler closes it when the resource
is deleted or its connection settings change.

Results are the typed values of :mod:`jbod_operator.plan.kafka_types`, so the pure decisions
never see the client's dicts. Every failure is a :class:`KafkaAdminError` carrying Kafka's
error name (``NOT_CONTROLLER``, ``KAFKA_STORAGE_ERROR``...) or, for failures on this side of
the wire, the client's (``KafkaTimeoutError``, ``NoBrokersAvailable``). Calls that act per
partition or replica report each one's error name instead of raising, since a partly done
request is normal (a replica that does not exist yet on its broker, a cancel of a partition
with nothing in flight): the caller decides.

Secrets (SASL password, TLS key) pass from the Secret's data into the client's configuration
and an in-memory SSL context, never into a log line, an error message or a file left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import ssl
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

with warnings.catch_warnings():
    # kafka-python 3.0 loads its message schemas at import with importlib.resources.read_text,
    # which Python 3.11 deprecates: a warning about the library, not about our use of it.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_errors
    from kafka import TopicPartition
    from kafka.admin import (
        AlterConfigOp,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
    )

from ..plan.kafka_types import (
    BrokerLogDirs,
    ClusterDescription,
    ConfigEntry,
    ConfigKind,
    KafkaBroker,
    KafkaErrorName,
    LogDir,
    LogDirReplica,
    OngoingReassignment,
    PartitionMetadata,
    ReplicaKey,
    TopicMetadata,
    TopicPartitionKey,
)

T = TypeVar("T")

PREFERRED_ELECTION = 0
"""ElectLeaders' election type for the preferred (first) replica."""

CONFIG_REWRITE_S = 30.0
"""How long :meth:`KafkaAdmin.ensure_configs` takes a config this client wrote as still set:
after that it writes it again, so a change made by someone else is undone within this time."""

# AlterConfigs answers each resource with "OK" or the text of Kafka's error class, e.g.
# "[Error 42] InvalidRequestError: ..."; the code is what names the error.
_ERROR_TEXT = re.compile(r"^\[Error (?P<code>-?\d+)\]")


class KafkaAdminError(RuntimeError):
    """A Kafka Admin API call failed. ``error`` is Kafka's error name where Kafka answered
    (``POLICY_VIOLATION``), else the client's exception name (``KafkaTimeoutError``)."""

    def __init__(self, call: str, error: str, message: str = "") -> None:
        self.call = call
        self.error = error
        self.message = message
        super().__init__(f"{call}: {error}" + (f": {message}" if message else ""))

    @property
    def unreachable(self) -> bool:
        """Nothing answered: no broker reachable, a timeout, a closed connection."""
        return self.error in {
            "NoBrokersAvailable",
            "KafkaTimeoutError",
            "KafkaConnectionError",
            "NodeNotReadyError",
            "RequestTimedOutError",
            KafkaErrorName.REQUEST_TIMED_OUT.value,
        }


def error_name(exc: BaseException) -> str:
    """Kafka's name for a broker's error (its protocol name), the class name for the rest."""
    message = getattr(type(exc), "message", None)
    if isinstance(exc, kafka_errors.BrokerResponseError) and isinstance(message, str):
        return message
    return type(exc).__name__


def _error_of(cls: type[Exception] | None) -> str | None:
    """A per-item error class from the client as Kafka's name (``None`` for success)."""
    if cls is None or cls is kafka_errors.NoError:
        return None
    name = getattr(cls, "message", None)
    return name if isinstance(name, str) else cls.__name__


def _code_name(code: int) -> str | None:
    return None if code == 0 else _error_of(kafka_errors.for_code(code))


@dataclass(frozen=True)
class KafkaConnection:
    """How to reach one cluster: the KafkaCluster's spec with its Secrets' values filled in
    (``handlers.kafka_clusters`` reads them). Its ``repr`` shows no secret."""

    bootstrap_servers: tuple[str, ...]
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = field(default=None, repr=False)
    sasl_password: str | None = field(default=None, repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    cert_pem: str | None = field(default=None, repr=False)
    key_pem: str | None = field(default=None, repr=False)
    verify_hostname: bool = True
    request_timeout_s: float = 10.0

    def ssl_context(self) -> ssl.SSLContext | None:
        """An SSL context from the PEMs, or ``None`` without TLS. The client key is loaded
        through a private temporary file (``ssl`` reads keys only from files), removed at once."""
        if not self.security_protocol.endswith("SSL"):
            return None
        ctx = ssl.create_default_context(cadata=self.ca_pem) if self.ca_pem else None
        if ctx is None:
            ctx = ssl.create_default_context()
        ctx.check_hostname = self.verify_hostname
        if self.cert_pem and self.key_pem:
            fd, path = tempfile.mkstemp(prefix="kafka-client-", suffix=".pem")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(self.cert_pem.rstrip("\n") + "\n" + self.key_pem)
                ctx.load_cert_chain(path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        return ctx

    def client_config(self) -> dict[str, Any]:
        """kafka-python's keyword arguments."""
        ms = int(self.request_timeout_s * 1000)
        cfg: dict[str, Any] = {
            "bootstrap_servers": list(self.bootstrap_servers),
            "client_id": "jbod-operator",
            "security_protocol": self.security_protocol,
            "request_timeout_ms": ms,
            "bootstrap_timeout_ms": ms,
            # Give up on a dead address soon: a refresh is retried on the next tick anyway.
            "reconnect_backoff_max_ms": 1000,
        }
        if self.security_protocol.startswith("SASL_"):
            cfg["sasl_mechanism"] = self.sasl_mechanism
            cfg["sasl_plain_username"] = self.sasl_username
            cfg["sasl_plain_password"] = self.sasl_password
        ctx = self.ssl_context()
        if ctx is not None:
            cfg["ssl_context"] = ctx
        return cfg


class _ClosingAdminClient(KafkaAdminClient):  # type: ignore[misc]
    """kafka-python's client, closed when its constructor fails: it starts its I/O thread
    before it bootstraps, and a bootstrap that times out (a wrong address) would leave that
    thread running, one more on every refresh of an unreachable cluster. (The sockets of the
    refused dials it leaves to the garbage collector.)"""

    def __init__(self, **configs: Any) -> None:
        self._closed = False
        try:
            super().__init__(**configs)
        except BaseException:
            if hasattr(self, "_net"):
                self.close()
            raise


class KafkaAdmin:
    """The Admin API calls issue 22 needs, async and typed. The client connects on the first
    call (kafka-python bootstraps eagerly, blocking), so building one never does I/O."""

    def __init__(
        self,
        connection: KafkaConnection,
        *,
        factory: Callable[..., Any] = _ClosingAdminClient,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.connection = connection
        self._factory = factory
        self._clock = clock
        self._client: Any = None
        self._lock = asyncio.Lock()
        self._written: dict[tuple[ConfigKind, str, str], tuple[str | None, float]] = {}
        """What :meth:`ensure_configs` wrote and Kafka took: (kind, name, key) → (value, when)."""

    # -- plumbing ---------------------------------------------------------------------------

    def _connected(self) -> Any:
        if self._client is None:
            self._client = self._factory(**self.connection.client_config())
        return self._client

    async def _call(self, name: str, fn: Callable[[Any], T]) -> T:
        def run() -> T:
            try:
                return fn(self._connected())
            except kafka_errors.UnknownBrokerIdError as exc:
                # The client's broker list is missing one the cluster has: it was read while
                # that broker was down, and kafka-python reads it again only every 5 minutes
                # (metadata.max.age.ms), so until then every request to that broker fails
                # here, without a try. A client started afresh reads the list now.
                self._drop_client()
                raise KafkaAdminError(name, error_name(exc), _safe_message(exc)) from None
            except kafka_errors.KafkaError as exc:
                raise KafkaAdminError(name, error_name(exc), _safe_message(exc)) from None
            except ValueError as exc:  # the client's own checks of our arguments
                raise KafkaAdminError(name, "InvalidArgument", str(exc)) from None

        async with self._lock:
            return await asyncio.to_thread(run)

    def _drop_client(self) -> None:
        """Close the client (blocking: on the calling thread); the next call starts another.
        What it wrote is no longer taken as set: a client dropped after a failure may have
        been talking to a cluster that changed under it."""
        client, self._client = self._client, None
        self._written.clear()
        if client is not None:
            client.close()

    async def close(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self._drop_client)

    # -- the cluster ------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        raw = await self._call("DescribeCluster", lambda c: c.describe_cluster())
        controller = raw.get("controller_id")
        return ClusterDescription(
            cluster_id=str(raw.get("cluster_id") or ""),
            controller_id=None if controller is None or controller < 0 else int(controller),
            brokers=tuple(
                sorted(
                    (
                        KafkaBroker(
                            broker_id=int(b["broker_id"]),
                            host=str(b["host"]),
                            port=int(b["port"]),
                            rack=b.get("rack"),
                            fenced=b.get("is_fenced"),
                        )
                        for b in raw["brokers"]
                    ),
                    key=lambda b: b.broker_id,
                )
            ),
        )

    async def describe_log_dirs(self, brokers: Iterable[int] | None = None) -> list[BrokerLogDirs]:
        """Every log dir of ``brokers`` (all registered brokers when ``None``), with every
        replica in it (current and future). A broker that cannot answer raises."""
        ids = None if brokers is None else list(brokers)
        raw = await self._call("DescribeLogDirs", lambda c: c.describe_log_dirs(brokers=ids))
        return sorted((_broker_log_dirs(r) for r in raw), key=lambda b: b.broker_id)

    async def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicMetadata]:
        """Metadata of ``topics`` (all when ``None``): each partition's replicas in order, ISR,
        leader and offline replicas."""
        names = None if topics is None else list(topics)
        raw = await self._call("Metadata", lambda c: c.describe_topics(names))
        return sorted((_topic(t) for t in raw), key=lambda t: t.name)

    # -- moving replicas --------------------------------------------------------------------

    async def alter_replica_log_dirs(
        self, assignments: Mapping[ReplicaKey, str]
    ) -> dict[ReplicaKey, str | None]:
        """Put each replica ``(topic, partition, broker)`` in the log dir at that path (a
        move when it exists there already, the dir it will be created in otherwise). Per
        replica: ``None``, or Kafka's error name (``REPLICA_NOT_AVAILABLE`` while the broker
        does not host it yet: Kafka's tool retries; ``LOG_DIR_NOT_FOUND``...)."""
        request = dict(assignments)
        raw = await self._call("AlterReplicaLogDirs", lambda c: c.alter_replica_log_dirs(request))
        return {
            (tpr.topic, int(tpr.partition), int(tpr.broker_id)): _error_of(err)
            for tpr, err in raw.items()
        }

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartitionKey, list[int] | None]
    ) -> dict[TopicPartitionKey, str | None]:
        """Reassign each partition to its replica list (in preference order), or cancel its
        reassignment with ``None`` (Kafka reverts it to the replicas before it). Per partition:
        ``None`` or Kafka's error name (``NO_REASSIGNMENT_IN_PROGRESS`` for a cancel of
        nothing, ``INVALID_REPLICA_ASSIGNMENT``...)."""
        request = {
            TopicPartition(t, p): (None if r is None else list(r)) for (t, p), r in targets.items()
        }
        raw = await self._call(
            "AlterPartitionReassignments", lambda c: c.alter_partition_reassignments(request)
        )
        return {(tp.topic, int(tp.partition)): _error_of(err) for tp, err in raw.items()}

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartitionKey] | None = None
    ) -> list[OngoingReassignment]:
        """The reassignments in flight (``partitions`` only, or all of them, whoever started
        them)."""
        request = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        raw = await self._call(
            "ListPartitionReassignments", lambda c: c.list_partition_reassignments(request)
        )
        return sorted(
            (
                OngoingReassignment(
                    topic=tp.topic,
                    partition=int(tp.partition),
                    replicas=tuple(r["replicas"]),
                    adding=tuple(r["adding_replicas"]),
                    removing=tuple(r["removing_replicas"]),
                )
                for tp, r in raw.items()
            ),
            key=lambda o: (o.topic, o.partition),
        )

    async def elect_leaders(
        self, partitions: Iterable[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, str | None]:
        """A preferred-leader election (the first replica) for each partition. Per partition:
        ``None`` (elected, or already the leader) or Kafka's error name
        (``PREFERRED_LEADER_NOT_AVAILABLE`` while it is out of the ISR...)."""
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        if not by_topic:
            return {}
        response = await self._call(
            "ElectLeaders",
            lambda c: c.elect_leaders(PREFERRED_ELECTION, by_topic, raise_errors=False),
        )
        top = int(getattr(response, "error_code", 0) or 0)
        if top:
            raise KafkaAdminError("ElectLeaders", _code_name(top) or str(top))
        out: dict[TopicPartitionKey, str | None] = {}
        for result in response.replica_election_results:
            for part in result.partition_result:
                name = _code_name(int(part.error_code))
                out[(result.topic, int(part.partition_id))] = (
                    None if name == KafkaErrorName.ELECTION_NOT_NEEDED else name
                )
        return out

    # -- configs ----------------------------------------------------------------------------

    async def incremental_alter_configs(
        self, kind: ConfigKind, name: str, changes: Mapping[str, str | None]
    ) -> None:
        """Set (a value) or delete (``None``: back to the default) configs of one broker (its
        id) or topic, with IncrementalAlterConfigs. The client's own check of the keys is off:
        it refuses the broker throttle keys (``leader.replication.throttled.rate`` and the
        others are not in the dynamic configs it reads back), and the broker checks anyway."""
        configs: dict[str, Any] = {
            key: (AlterConfigOp.DELETE, None) if value is None else (AlterConfigOp.SET, value)
            for key, value in changes.items()
        }
        await self._alter_one(kind, name, configs)

    async def ensure_configs(
        self, kind: ConfigKind, name: str, changes: Mapping[str, str | None]
    ) -> None:
        """:meth:`incremental_alter_configs` of only the ``changes`` this client has not
        written, with Kafka taking them, in the last :data:`CONFIG_REWRITE_S`; no request
        when that leaves none.

        For configs a controller sets on every pass (a reassignment's throttle rates on each
        broker involved): each write goes through Kafka's controller and cost 40-400 ms on a
        loaded machine, more than half of a reassignment pass on Kafka, and so most of the
        time between one batch ending and the next starting (bench/kafka_reassignment.py).
        A failed write is not remembered, so the next call writes it again."""
        now = self._clock()
        due = {
            key: value
            for key, value in changes.items()
            if not self._fresh((kind, name, key), value, now)
        }
        if not due:
            return
        await self.incremental_alter_configs(kind, name, due)
        for key, value in due.items():
            self._written[(kind, name, key)] = (value, now)

    def _fresh(self, at: tuple[ConfigKind, str, str], value: str | None, now: float) -> bool:
        written = self._written.get(at)
        return written is not None and written[0] == value and now - written[1] < CONFIG_REWRITE_S

    async def describe_configs(
        self, kind: ConfigKind, name: str, keys: Iterable[str] | None = None
    ) -> dict[str, ConfigEntry]:
        """One broker's or topic's configs: the ``keys`` asked for (whatever their source), or
        with ``keys=None`` only those set away from their defaults (what a cleanup checks)."""
        wanted = None if keys is None else list(keys)
        resource = ConfigResource(ConfigResourceType[kind.value], name, wanted)
        config_filter = "modified" if wanted is None else "all"
        raw = await self._call(
            "DescribeConfigs",
            lambda c: c.describe_configs([resource], config_filter=config_filter),
        )
        entries = raw.get(kind.value.lower(), {}).get(name, {})
        return {
            key: ConfigEntry(
                name=key,
                value=None if e.get("is_sensitive") else e.get("value"),
                source=str(e.get("config_source", "UNKNOWN")),
                read_only=bool(e.get("read_only", False)),
                sensitive=bool(e.get("is_sensitive", False)),
            )
            for key, e in entries.items()
        }

    # -- added for the LogDirMove adapter (issue 22) ----------------------------------------

    async def alter_list_config(
        self,
        kind: ConfigKind,
        name: str,
        key: str,
        *,
        append: Iterable[str] = (),
        subtract: Iterable[str] = (),
    ) -> None:
        """Add entries to, or remove them from, a list config (``cordoned.log.dirs``) with
        IncrementalAlterConfigs' APPEND and SUBTRACT: the broker edits its list, so nothing
        set by someone else between a read and a write is lost."""
        add, drop = ",".join(append), ",".join(subtract)
        for op, value in ((AlterConfigOp.APPEND, add), (AlterConfigOp.SUBTRACT, drop)):
            if value:
                await self._alter_one(kind, name, {key: (op, value)})

    async def _alter_one(self, kind: ConfigKind, name: str, configs: dict[str, Any]) -> None:
        """One IncrementalAlterConfigs of ``configs`` (key → (op, value)); a refusal raises
        with Kafka's error name (the one home of that answer's reading)."""
        resource = ConfigResource(ConfigResourceType[kind.value], name, configs)
        raw = await self._call(
            "IncrementalAlterConfigs",
            lambda c: c.alter_configs([resource], raise_on_unknown=False, incremental=True),
        )
        answer = raw.get(kind.value.lower(), {}).get(name)
        if answer != "OK":
            m = _ERROR_TEXT.match(str(answer or ""))
            error = _code_name(int(m.group("code"))) if m else None
            raise KafkaAdminError("IncrementalAlterConfigs", error or "UNKNOWN", str(answer))


def _safe_message(exc: BaseException) -> str:
    """The exception's own text, bounded: Kafka's messages name topics and brokers, never the
    client's credentials (an authentication failure says the mechanism and the user at most)."""
    text = " ".join(str(a) for a in exc.args if a is not None)
    return text[:500]


def _broker_log_dirs(raw: Mapping[str, Any]) -> BrokerLogDirs:
    dirs = []
    for d in raw["log_dirs"]:
        total = d.get("total_bytes")
        usable = d.get("usable_bytes")
        dirs.append(
            LogDir(
                path=str(d["log_dir"]),
                error=_code_name(int(d.get("error_code", 0))),
                total_bytes=None if total is None or total < 0 else int(total),
                usable_bytes=None if usable is None or usable < 0 else int(usable),
                cordoned=d.get("is_cordoned"),
                replicas=tuple(
                    LogDirReplica(
                        topic=str(t["name"]),
                        partition=int(p["partition_index"]),
                        size_bytes=int(p["partition_size"]),
                        offset_lag=int(p["offset_lag"]),
                        is_future=bool(p["is_future_key"]),
                    )
                    for t in d.get("topics") or ()
                    for p in t["partitions"]
                ),
            )
        )
    return BrokerLogDirs(broker_id=int(raw["broker"]), dirs=tuple(dirs))


def _topic(raw: Mapping[str, Any]) -> TopicMetadata:
    topic_id = raw.get("topic_id")
    name = str(raw["name"])
    return TopicMetadata(
        name=name,
        topic_id=None if topic_id is None or topic_id == uuid.UUID(int=0) else str(topic_id),
        internal=bool(raw.get("is_internal", False)),
        error=_code_name(int(raw.get("error_code", 0))),
        partitions=tuple(
            sorted(
                (
                    PartitionMetadata(
                        topic=name,
                        partition=int(p["partition_index"]),
                        leader=None if p["leader_id"] < 0 else int(p["leader_id"]),
                        replicas=tuple(p["replica_nodes"]),
                        isr=tuple(p["isr_nodes"]),
                        offline_replicas=tuple(p.get("offline_replicas") or ()),
                        error=_code_name(int(p.get("error_code", 0))),
                    )
                    for p in raw["partitions"]
                ),
                key=lambda p: p.partition,
            )
        ),
    )
