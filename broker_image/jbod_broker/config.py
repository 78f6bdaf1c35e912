"""Broker configuration: a Kafka-style properties file, overridden by the environment.

Names are Kafka's (``broker.id``, ``log.dirs``, ``replica.lag.time.max.ms``...), so a Kafka user
reads them without a glossary. ``JBOD_<NAME>`` environment variables override the file, with
dots as underscores and upper case (``JBOD_BROKER_ID`` for ``broker.id``). A few settings
also answer to a second name (:data:`ALIASES`); given under both names in one place, the two
values must agree. Everything is validated once at start-up; a bad value stops the broker with
a message naming the setting. This is the broker's only settings parser: the move engine, the
replica manager and the server take their values from :class:`BrokerConfig`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlparse

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from .storage import topic_configs
from .storage.checkpoints import parse_properties
from .storage.log import LogConfig
from .storage.names import parse_topic_id
from .storage.room import MAX_PERCENT as MAX_HEADROOM_PERCENT
from .storage.room import Headroom

ENV_PREFIX = "JBOD_"
ENTRY_POINT_VARS = frozenset({"JBOD_CONFIG", "JBOD_LOG_LEVEL"})
"""Read by ``python -m jbod_broker`` itself, not settings."""

ALIASES = {
    # Kafka's shipped name for the intra-broker move throttle; KIP-113 calls it the other one.
    "replica.alter.log.dirs.io.max.bytes.per.second": "intra.broker.throttled.rate",
    "log.roll.ms": "log.segment.ms",
}

KAFKA_UNLIMITED_RATE = 2**63 - 1
"""Kafka's default for a throttle rate (``Long.MAX_VALUE``): no limit, as 0 is here."""

PositiveInt = Annotated[int, Field(ge=1)]


class ConfigError(ValueError):
    """A setting that cannot work; the message names it."""


class BrokerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    broker_id: Annotated[int, Field(ge=0, le=2**31 - 1, alias="broker.id")]
    broker_rack: Annotated[str | None, Field(alias="broker.rack")] = None
    cluster_id: Annotated[str | None, Field(alias="cluster.id")] = None
    """The cluster's id in Kafka's ``Uuid`` form (what ``kafka-storage format --cluster-id``
    writes): kept in every log dir's ``meta.properties`` and answered in Metadata, so a dir
    from another cluster is never taken for one of ours. The operator derives it from the
    BrokerCluster's uid; unset, the dirs carry none and Metadata answers null."""
    log_dirs: Annotated[list[str], Field(alias="log.dirs", min_length=1)]
    listeners: Annotated[str, Field(alias="listeners")] = "http://127.0.0.1:9092"
    advertised_url: Annotated[str | None, Field(alias="advertised.url")] = None
    kafka_listeners: Annotated[str | None, Field(alias="kafka.listeners")] = None
    """The Kafka protocol listener (issue 18), in Kafka's ``listeners`` syntax:
    ``PLAINTEXT://HOST:PORT`` (an empty HOST or ``0.0.0.0`` binds every interface). Named apart
    from ``listeners``, which has always been the HTTP API's, so existing configs keep their
    meaning; unset, the broker speaks HTTP only."""
    kafka_advertised_listeners: Annotated[str | None, Field(alias="kafka.advertised.listeners")] = (
        None
    )
    """What clients are told to connect to (Metadata), as Kafka's ``advertised.listeners``;
    default: ``kafka.listeners``. In Kubernetes, the pod's name in the headless Service."""
    controller_url: Annotated[str | None, Field(alias="controller.url")] = None
    token_file: Annotated[str | None, Field(alias="token.file")] = None
    auth_disabled: Annotated[bool, Field(alias="auth.disabled")] = False
    """No token.file needed; without one every endpoint is open (local use only)."""
    data_auth_required: Annotated[bool, Field(alias="data.auth.required")] = True
    """The data path (``/v1/data/...``) needs the bearer token too (issue 14): an open one lets
    anyone who reaches the port make the broker read bodies of ``socket.request.max.bytes``.
    ``false`` opens it, and the broker says so in a warning at start."""
    intra_broker_throttled_rate: Annotated[
        int, Field(ge=0, alias="intra.broker.throttled.rate")
    ] = 0
    """Bytes/s shared by every log-dir move; 0 means unlimited, and so does Kafka's default
    (``Long.MAX_VALUE``, read as 0)."""
    leader_replication_throttled_rate: Annotated[
        int, Field(ge=0, alias="leader.replication.throttled.rate")
    ] = 0
    follower_replication_throttled_rate: Annotated[
        int, Field(ge=0, alias="follower.replication.throttled.rate")
    ] = 0
    num_replica_alter_log_dirs_threads: Annotated[
        int | None, Field(ge=1, le=256, alias="num.replica.alter.log.dirs.threads")
    ] = None
    log_dir_headroom_bytes: Annotated[int, Field(ge=0, alias="log.dir.headroom.bytes")] = 0
    """Bytes every log dir keeps free: no move or new replica may eat into them (issue 13)."""
    log_dir_headroom_percent: Annotated[
        float, Field(ge=0, le=MAX_HEADROOM_PERCENT, alias="log.dir.headroom.percent")
    ] = 1.0
    """The same as a share of each dir's capacity; the larger of the two applies. It covers
    what cannot be predicted: a replica growing while it moves, indexes, checkpoints."""
    num_replica_fetchers: Annotated[int, Field(ge=1, le=64, alias="num.replica.fetchers")] = 1
    log_segment_bytes: Annotated[int, Field(ge=1024, alias="log.segment.bytes")] = 1 << 30
    log_segment_ms: Annotated[int, Field(ge=1, alias="log.segment.ms")] = 7 * 24 * 3600 * 1000
    log_retention_bytes: Annotated[int, Field(ge=-1, alias="log.retention.bytes")] = -1
    log_retention_ms: Annotated[int, Field(ge=-1, alias="log.retention.ms")] = 7 * 24 * 3600 * 1000
    log_index_interval_bytes: Annotated[int, Field(ge=0, alias="log.index.interval.bytes")] = 4096
    message_max_bytes: Annotated[int, Field(ge=64, alias="message.max.bytes")] = 1048588
    log_flush_interval_messages: Annotated[
        int | None, Field(ge=1, alias="log.flush.interval.messages")
    ] = None
    log_flush_interval_ms: Annotated[
        PositiveInt, Field(alias="log.flush.scheduler.interval.ms")
    ] = 5000
    log_retention_check_interval_ms: Annotated[
        PositiveInt, Field(alias="log.retention.check.interval.ms")
    ] = 60_000
    checkpoint_interval_ms: Annotated[
        PositiveInt, Field(alias="replica.high.watermark.checkpoint.interval.ms")
    ] = 5000
    replica_lag_time_max_ms: Annotated[PositiveInt, Field(alias="replica.lag.time.max.ms")] = 30_000
    replica_fetch_max_bytes: Annotated[PositiveInt, Field(alias="replica.fetch.max.bytes")] = (
        1 << 20
    )
    replica_fetch_wait_max_ms: Annotated[
        int, Field(ge=0, le=60_000, alias="replica.fetch.wait.max.ms")
    ] = 500
    replica_fetch_backoff_ms: Annotated[int, Field(ge=0, alias="replica.fetch.backoff.ms")] = 200
    min_insync_replicas: Annotated[PositiveInt, Field(alias="min.insync.replicas")] = 1
    socket_request_max_bytes: Annotated[PositiveInt, Field(alias="socket.request.max.bytes")] = (
        100 * 1024 * 1024
    )
    queued_max_request_bytes: Annotated[PositiveInt, Field(alias="queued.max.request.bytes")] = (
        256 * 1024 * 1024
    )
    """The request-memory pool (Kafka's setting, issue 14): request bodies in memory at once,
    summed. A body reserves its size before it is read and keeps it until its request is
    answered, so concurrent bodies wait for each other instead of growing the heap; one larger
    than the whole pool is refused (413). Kafka's default is unbounded; 256 MiB holds two
    bodies of the largest size ``socket.request.max.bytes`` allows by default."""
    request_body_timeout_ms: Annotated[PositiveInt, Field(alias="request.body.timeout.ms")] = 30_000
    """How long a request body may take to arrive once the broker starts reading it (after
    its pool reservation); a slower one is answered 408 and its connection closed, so a body
    trickled at 1 byte/s holds neither a connection nor pool memory for longer (issue 14)."""
    request_body_min_bytes_per_second: Annotated[
        PositiveInt, Field(alias="request.body.min.bytes.per.second")
    ] = 1 << 20
    """The slowest a request body may arrive, on average from its first byte, after a grace
    of ``request_memory.BODY_GRACE_S`` (which is also the longest it may pause); a slower one
    is closed (HTTP: 408), on both listeners (issue 36). A body holds its whole size in the
    request-memory pool once it starts to arrive: without this, a client sending a byte a
    second kept 100 MiB of the pool for all of ``request.body.timeout.ms``. 1 MiB/s takes a
    default producer's 1 MiB request over a link of 8 Mbit/s or more (the name follows
    Kafka's ``replica.alter.log.dirs.io.max.bytes.per.second``; Kafka has no such bound)."""
    connections_max_idle_ms: Annotated[PositiveInt, Field(alias="connections.max.idle.ms")] = 60_000
    """A connection that sends no complete request head for this long is closed: idle
    keep-alive connections and request heads that trickle in alike (aiohttp's keep-alive
    timer). Kafka's name; its default is 10 minutes, this one stays under aiohttp's 75 s."""
    request_timeout_ms: Annotated[PositiveInt, Field(alias="request.timeout.ms")] = 30_000
    broker_heartbeat_interval_ms: Annotated[
        PositiveInt, Field(alias="broker.heartbeat.interval.ms")
    ] = 1000
    controller_retry_backoff_ms: Annotated[
        PositiveInt, Field(alias="controller.retry.backoff.ms")
    ] = 200
    controller_retry_backoff_max_ms: Annotated[
        PositiveInt, Field(alias="controller.retry.backoff.max.ms")
    ] = 5000

    @field_validator("log_dirs", mode="before")
    @classmethod
    def _split_dirs(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [p.strip() for p in v.split(",") if p.strip()]
        return v

    @field_validator("log_dirs")
    @classmethod
    def _absolute_dirs(cls, v: list[str]) -> list[str]:
        for p in v:
            if not os.path.isabs(p):
                raise ValueError(f"{p!r} is not an absolute path")
        if len(set(v)) != len(v):
            raise ValueError("a directory is listed twice")
        return v

    @field_validator("intra_broker_throttled_rate")
    @classmethod
    def _kafka_unlimited(cls, v: int) -> int:
        return 0 if v >= KAFKA_UNLIMITED_RATE else v

    @field_validator("listeners")
    @classmethod
    def _listener(cls, v: str) -> str:
        u = urlparse(v)
        if u.scheme not in ("http",) or not u.hostname or u.port is None:
            raise ValueError(f"{v!r} must look like http://HOST:PORT")
        return v

    @field_validator("cluster_id")
    @classmethod
    def _cluster_id(cls, v: str | None) -> str | None:
        if v is not None:
            parse_topic_id(v)  # a cluster id is a Kafka Uuid, like a topic id
        return v

    @field_validator("kafka_listeners", "kafka_advertised_listeners")
    @classmethod
    def _kafka_listener(cls, v: str | None) -> str | None:
        if v is not None:
            parse_kafka_listener(v)
        return v

    @model_validator(mode="after")
    def _advertisable(self) -> BrokerConfig:
        adv = self.kafka_advertised
        if adv is not None and adv[0] in ("", "0.0.0.0", "::"):
            raise ValueError(
                "kafka.advertised.listeners: clients cannot connect to a wildcard address; "
                "set it when kafka.listeners binds every interface"
            )
        if self.kafka_advertised_listeners is not None and self.kafka_listeners is None:
            raise ValueError("kafka.advertised.listeners is set but kafka.listeners is not")
        return self

    @property
    def kafka_bind(self) -> tuple[str, int] | None:
        """Where the Kafka listener binds; ``None``: no Kafka listener."""
        return None if self.kafka_listeners is None else parse_kafka_listener(self.kafka_listeners)

    @property
    def kafka_advertised(self) -> tuple[str, int] | None:
        """The ``(host, port)`` clients reach the Kafka listener at."""
        v = self.kafka_advertised_listeners or self.kafka_listeners
        return None if v is None else parse_kafka_listener(v)

    @property
    def host(self) -> str:
        return urlparse(self.listeners).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        port = urlparse(self.listeners).port
        return 9092 if port is None else port

    @property
    def url(self) -> str:
        return self.advertised_url or self.listeners

    @property
    def headroom(self) -> Headroom:
        return Headroom(bytes=self.log_dir_headroom_bytes, percent=self.log_dir_headroom_percent)

    @property
    def move_threads(self) -> int:
        return self.num_replica_alter_log_dirs_threads or len(self.log_dirs)

    def log_config(self, overrides: Mapping[str, str] | None = None) -> LogConfig:
        """Topic-level settings: broker defaults, overridden by the topic's configs.

        The configs are checked by the rule the operator checks Topics with
        (``storage.topic_configs``): an unknown key or a value out of Kafka's range is a
        ConfigError naming every bad entry, never silently ignored (issue 14).
        """
        try:
            o = topic_configs.parse(overrides or {})
        except topic_configs.TopicConfigError as e:
            raise ConfigError(f"invalid topic config: {e}") from e

        def pick(name: str, default: int) -> int:
            value = o.get(name, default)
            assert isinstance(value, int)
            return value

        flush = o.get("flush.messages", self.log_flush_interval_messages)
        assert flush is None or isinstance(flush, int)
        try:
            return LogConfig(
                segment_bytes=pick("segment.bytes", self.log_segment_bytes),
                segment_ms=pick("segment.ms", self.log_segment_ms),
                retention_bytes=pick("retention.bytes", self.log_retention_bytes),
                retention_ms=pick("retention.ms", self.log_retention_ms),
                index_interval_bytes=pick("index.interval.bytes", self.log_index_interval_bytes),
                max_message_bytes=pick("max.message.bytes", self.message_max_bytes),
                flush_messages=flush,
            )
        except ValueError as e:
            raise ConfigError(f"invalid topic config: {e}") from e

    def read_token(self) -> str | None:
        if self.token_file is None:
            return None
        try:
            with open(self.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        except UnicodeDecodeError as e:
            raise ConfigError(f"token.file {self.token_file}: not UTF-8 text") from e
        if len(token) < 16:
            raise ConfigError(f"token.file {self.token_file}: the token is shorter than 16 chars")
        return token


_KAFKA_LISTENER = re.compile(
    r"PLAINTEXT://(?P<host>[A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})"
)


def parse_kafka_listener(v: str) -> tuple[str, int]:
    """``PLAINTEXT://HOST:PORT`` as ``(HOST, PORT)``: Kafka's listener syntax, one PLAINTEXT
    listener (no TLS or SASL yet, so no other security protocol or listener name means
    anything here; refused rather than ignored)."""
    m = _KAFKA_LISTENER.fullmatch(v.strip())
    if m is None or not 0 <= int(m["port"]) <= 65535:
        raise ValueError(f"{v!r} must look like PLAINTEXT://HOST:PORT (one PLAINTEXT listener)")
    return m["host"].strip("[]"), int(m["port"])


def _field_name(loc: tuple[int | str, ...]) -> str:
    if not loc:
        return "(config)"
    first = loc[0]
    field = BrokerConfig.model_fields.get(str(first))
    return field.alias if field is not None and field.alias else str(first)


def _by_canonical_name(raw: Mapping[str, str]) -> dict[str, str]:
    """One source's settings under their canonical names; a setting given there under both
    its name and an alias must have one value (ConfigError otherwise)."""
    known = {f.alias for f in BrokerConfig.model_fields.values() if f.alias}
    out: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for key, value in raw.items():
        name = ALIASES.get(key, key)
        if name not in known:
            raise ConfigError(f"unknown setting {key!r}")
        if name in out and not _same_value(out[name], value):
            raise ConfigError(
                f"{spelled[name]} and {key} are the same setting ({name}) but disagree: "
                f"{out[name]!r} vs {value!r}"
            )
        out[name], spelled[name] = value, key
    return out


def _same_value(a: str, b: str) -> bool:
    try:
        return int(a) == int(b)
    except ValueError:
        return a.strip() == b.strip()


def load_config(path: str | None = None, env: Mapping[str, str] | None = None) -> BrokerConfig:
    """Read the file, apply ``JBOD_*`` overrides, validate; ConfigError names the setting."""
    from_file: dict[str, str] = {}
    if path is not None:
        try:
            with open(path, "rb") as f:
                from_file.update(parse_properties(f.read()))
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
    from_env: dict[str, str] = {}
    for key, value in (os.environ if env is None else env).items():
        if key in ENTRY_POINT_VARS or key.startswith("JBOD_OPERATOR_"):
            continue
        if key.startswith(ENV_PREFIX):
            from_env[key[len(ENV_PREFIX) :].lower().replace("_", ".")] = value
    # The environment overrides the file, whichever name (setting or alias) each one used.
    values: dict[str, Any] = {**_by_canonical_name(from_file), **_by_canonical_name(from_env)}
    for bool_key in ("auth.disabled", "data.auth.required"):
        if bool_key in values:
            v = str(values[bool_key]).lower()
            if v not in ("true", "false"):
                raise ConfigError(f"{bool_key} must be true or false, got {values[bool_key]!r}")
            values[bool_key] = v == "true"
    for key, value in list(values.items()):
        field = next(f for f in BrokerConfig.model_fields.values() if f.alias == key)
        if field.annotation in (int, int | None) and isinstance(value, str):
            try:
                values[key] = int(value)
            except ValueError as e:
                raise ConfigError(f"{key} must be an integer, got {value!r}") from e
        if field.annotation is float and isinstance(value, str):
            try:
                values[key] = float(value)
            except ValueError as e:
                raise ConfigError(f"{key} must be a number, got {value!r}") from e
    try:
        cfg = BrokerConfig.model_validate(values)
    except ValidationError as e:
        first = e.errors()[0]
        raise ConfigError(f"{_field_name(tuple(first['loc']))}: {first['msg']}") from e
    if cfg.token_file is None and not cfg.auth_disabled:
        raise ConfigError("token.file is required (or set auth.disabled=true for local use)")
    if cfg.token_file is not None:
        try:
            cfg.read_token()
        except OSError as e:
            raise ConfigError(f"token.file {cfg.token_file}: {e.strerror}") from e
    return cfg
