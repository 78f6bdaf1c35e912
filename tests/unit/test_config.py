"""Broker configuration: properties file, JBOD_* overrides, aliases, refusals naming the setting."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jbod_broker.config import ALIASES, BrokerConfig, ConfigError, load_config
from jbod_broker.storage.log import LogConfig

TOKEN = "t" * 32


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    p = tmp_path / "token"
    p.write_text(TOKEN + "\n", encoding="utf-8")
    return p


def write_props(tmp_path: Path, props: dict[str, str], name: str = "server.properties") -> str:
    p = tmp_path / name
    p.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return str(p)


def base_props(tmp_path: Path, token_file: Path) -> dict[str, str]:
    return {
        "broker.id": "1",
        "log.dirs": f"{tmp_path / 'data-0'},{tmp_path / 'data-1'}",
        "token.file": str(token_file),
    }


def load(tmp_path: Path, props: dict[str, str], env: dict[str, str] | None = None) -> BrokerConfig:
    # env={} by default: the test process's own JBOD_* variables must not leak in.
    return load_config(write_props(tmp_path, props), env=env or {})


def refused(tmp_path: Path, props: dict[str, str], env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, props, env)
    return str(info.value)


# -- loading --------------------------------------------------------------------------------


def test_properties_file_with_comments_and_spaces(tmp_path: Path, token_file: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a Kafka-style file\n"
        "\n"
        "broker.id = 4\n"
        f"log.dirs = {tmp_path / 'a'} , {tmp_path / 'b'}\n"
        "listeners=http://0.0.0.0:19092\n"
        "advertised.url=http://broker-4.jbod:19092\n"
        f"token.file={token_file}\n"
        "broker.rack=rack-b\n"
        "replica.lag.time.max.ms=2000\n"
        "min.insync.replicas=2\n"
        "log.retention.bytes=-1\n"
        "log.flush.interval.messages=10\n"
        "data.auth.required=TRUE\n",
        encoding="utf-8",
    )
    cfg = load_config(str(path), env={})
    assert cfg.broker_id == 4
    assert cfg.log_dirs == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert (cfg.host, cfg.port) == ("0.0.0.0", 19092)
    assert cfg.url == "http://broker-4.jbod:19092"
    assert cfg.broker_rack == "rack-b"
    assert cfg.replica_lag_time_max_ms == 2000
    assert cfg.min_insync_replicas == 2
    assert cfg.log_retention_bytes == -1
    assert cfg.log_flush_interval_messages == 10
    assert cfg.data_auth_required is True
    assert cfg.auth_disabled is False
    assert cfg.read_token() == TOKEN
    assert cfg.move_threads == 2  # one per log dir unless set


def test_defaults(tmp_path: Path, token_file: Path) -> None:
    cfg = load(tmp_path, base_props(tmp_path, token_file))
    assert cfg.listeners == "http://127.0.0.1:9092"
    assert cfg.url == cfg.listeners
    assert cfg.controller_url is None
    assert cfg.intra_broker_throttled_rate == 0
    assert cfg.log_flush_interval_messages is None
    assert cfg.min_insync_replicas == 1
    assert cfg.num_replica_alter_log_dirs_threads is None
    # Issue 14: the data path needs the token; bodies share a 256 MiB pool and must arrive
    # within 30 s; a connection without a complete request head for 60 s is closed.
    assert cfg.data_auth_required is True
    assert cfg.auth_disabled is False
    assert cfg.queued_max_request_bytes == 256 * 1024 * 1024
    assert cfg.queued_max_request_bytes > cfg.socket_request_max_bytes
    assert cfg.request_body_timeout_ms == 30_000
    assert cfg.connections_max_idle_ms == 60_000


def test_request_memory_and_timeouts_from_the_file_and_the_environment(
    tmp_path: Path, token_file: Path
) -> None:
    props = {
        **base_props(tmp_path, token_file),
        "queued.max.request.bytes": str(128 * 1024 * 1024),
        "request.body.timeout.ms": "1000",
        "connections.max.idle.ms": "2000",
        "data.auth.required": "false",
    }
    cfg = load(tmp_path, props)
    assert cfg.queued_max_request_bytes == 128 * 1024 * 1024
    assert (cfg.request_body_timeout_ms, cfg.connections_max_idle_ms) == (1000, 2000)
    assert cfg.data_auth_required is False
    env = {
        "JBOD_QUEUED_MAX_REQUEST_BYTES": "1048576",
        "JBOD_REQUEST_BODY_TIMEOUT_MS": "500",
        "JBOD_CONNECTIONS_MAX_IDLE_MS": "700",
        "JBOD_DATA_AUTH_REQUIRED": "true",
    }
    cfg = load(tmp_path, props, env)
    assert cfg.queued_max_request_bytes == 1048576
    assert (cfg.request_body_timeout_ms, cfg.connections_max_idle_ms) == (500, 700)
    assert cfg.data_auth_required is True


def test_a_pool_smaller_than_the_largest_request_is_allowed(
    tmp_path: Path, token_file: Path
) -> None:
    """Bodies between the two sizes are refused one by one (413 naming the pool), as a
    body over socket.request.max.bytes is: a small pool is a choice, not a broken config."""
    props = {**base_props(tmp_path, token_file), "queued.max.request.bytes": "1048576"}
    cfg = load(tmp_path, props)
    assert cfg.queued_max_request_bytes < cfg.socket_request_max_bytes


def test_env_overrides_the_file(tmp_path: Path, token_file: Path) -> None:
    props = {**base_props(tmp_path, token_file), "replica.lag.time.max.ms": "30000"}
    env = {
        "JBOD_BROKER_ID": "7",
        "JBOD_LOG_DIRS": str(tmp_path / "env-dir"),
        "JBOD_REPLICA_LAG_TIME_MAX_MS": "1500",
        "JBOD_AUTH_DISABLED": "false",
        "PATH": "/usr/bin",  # not JBOD_*: ignored
        "KAFKA_BROKER_ID": "99",
    }
    cfg = load(tmp_path, props, env)
    assert cfg.broker_id == 7
    assert cfg.log_dirs == [str(tmp_path / "env-dir")]
    assert cfg.replica_lag_time_max_ms == 1500


def test_env_alone_is_enough(tmp_path: Path) -> None:
    env = {
        "JBOD_BROKER_ID": "3",
        "JBOD_LOG_DIRS": f"{tmp_path / 'x'},{tmp_path / 'y'}",
        "JBOD_AUTH_DISABLED": "true",
        "JBOD_LISTENERS": "http://127.0.0.1:9999",
    }
    cfg = load_config(None, env=env)
    assert (cfg.broker_id, cfg.port, cfg.auth_disabled) == (3, 9999, True)
    assert cfg.read_token() is None


def test_env_value_is_validated_like_the_file(tmp_path: Path, token_file: Path) -> None:
    msg = refused(tmp_path, base_props(tmp_path, token_file), {"JBOD_BROKER_ID": "-3"})
    assert "broker.id" in msg


def test_unknown_env_setting_is_refused(tmp_path: Path, token_file: Path) -> None:
    msg = refused(tmp_path, base_props(tmp_path, token_file), {"JBOD_NO_SUCH_THING": "1"})
    assert "unknown setting" in msg
    assert "no.such.thing" in msg


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_aliases_map_to_the_canonical_setting(tmp_path: Path, token_file: Path, alias: str) -> None:
    cfg = load(tmp_path, {**base_props(tmp_path, token_file), alias: "5000"})
    field = next(n for n, f in BrokerConfig.model_fields.items() if f.alias == ALIASES[alias])
    assert getattr(cfg, field) == 5000


def test_kafka_move_throttle_alias(tmp_path: Path, token_file: Path) -> None:
    name = "replica.alter.log.dirs.io.max.bytes.per.second"
    assert ALIASES[name] == "intra.broker.throttled.rate"
    cfg = load(tmp_path, {**base_props(tmp_path, token_file), name: "20000000"})
    assert cfg.intra_broker_throttled_rate == 20_000_000
    # A bad value is refused with the alias's canonical name.
    msg = refused(tmp_path, {**base_props(tmp_path, token_file), name: "-1"})
    assert "intra.broker.throttled.rate" in msg


def test_alias_by_env(tmp_path: Path, token_file: Path) -> None:
    env = {"JBOD_REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND": "1234"}
    cfg = load(tmp_path, base_props(tmp_path, token_file), env)
    assert cfg.intra_broker_throttled_rate == 1234


def test_auth_disabled_needs_no_token(tmp_path: Path) -> None:
    props = {"broker.id": "0", "log.dirs": str(tmp_path / "d"), "auth.disabled": "true"}
    cfg = load(tmp_path, props)
    assert cfg.auth_disabled is True
    assert cfg.token_file is None


def test_config_is_frozen(tmp_path: Path, token_file: Path) -> None:
    cfg = load(tmp_path, base_props(tmp_path, token_file))
    with pytest.raises(ValueError):
        cfg.broker_id = 9


# -- the move engine's settings (KIP-113) ---------------------------------------------------

THREADS = "num.replica.alter.log.dirs.threads"
RATE = "intra.broker.throttled.rate"
RATE_ALIAS = "replica.alter.log.dirs.io.max.bytes.per.second"
RATE_ALIAS_ENV = "JBOD_REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND"


def test_move_defaults_follow_kip_113(tmp_path: Path, token_file: Path) -> None:
    cfg = load(tmp_path, base_props(tmp_path, token_file))
    assert cfg.move_threads == len(cfg.log_dirs) == 2  # one worker per log dir
    assert cfg.intra_broker_throttled_rate == 0  # unlimited


def test_move_explicit_values_and_digit_separators(tmp_path: Path, token_file: Path) -> None:
    cfg = load(tmp_path, {**base_props(tmp_path, token_file), THREADS: "3", RATE: "20_000_000"})
    assert cfg.move_threads == 3
    assert cfg.intra_broker_throttled_rate == 20_000_000


@pytest.mark.parametrize("value", ["0", str(2**63 - 1), str(2**63)])
def test_move_throttle_unlimited(tmp_path: Path, token_file: Path, value: str) -> None:
    # 0 is unlimited here; Kafka's default, Long.MAX_VALUE, means the same.
    cfg = load(tmp_path, {**base_props(tmp_path, token_file), RATE: value})
    assert cfg.intra_broker_throttled_rate == 0


def test_move_throttle_under_both_names_must_agree(tmp_path: Path, token_file: Path) -> None:
    base = base_props(tmp_path, token_file)
    assert load(tmp_path, {**base, RATE: "7", RATE_ALIAS: "7"}).intra_broker_throttled_rate == 7
    msg = refused(tmp_path, {**base, RATE: "1", RATE_ALIAS: "2"})
    assert "disagree" in msg and RATE in msg and RATE_ALIAS in msg
    env = {
        "JBOD_INTRA_BROKER_THROTTLED_RATE": "1",
        "JBOD_" + RATE_ALIAS.upper().replace(".", "_"): "2",
    }
    assert "disagree" in refused(tmp_path, base, env)


def test_move_throttle_env_alias_overrides_the_file(tmp_path: Path, token_file: Path) -> None:
    env = {RATE_ALIAS_ENV: "2000"}
    cfg = load(tmp_path, {**base_props(tmp_path, token_file), RATE: "1000"}, env)
    assert cfg.intra_broker_throttled_rate == 2000


@pytest.mark.parametrize(
    ("change", "setting"),
    [
        ({THREADS: "0"}, THREADS),
        ({THREADS: "257"}, THREADS),
        ({THREADS: "many"}, THREADS),
        ({THREADS: "true"}, THREADS),
        ({RATE: "-5"}, RATE),
        ({RATE_ALIAS: "fast"}, RATE),  # named by the setting the alias stands for
    ],
)
def test_bad_move_setting_is_refused(
    tmp_path: Path, token_file: Path, change: dict[str, str], setting: str
) -> None:
    assert setting in refused(tmp_path, {**base_props(tmp_path, token_file), **change})


# -- refusals: every message names the setting ---------------------------------------------


@pytest.mark.parametrize(
    ("change", "setting", "detail"),
    [
        ({"no.such.setting": "1"}, "no.such.setting", "unknown setting"),
        ({"num.replica.fetchers": "four"}, "num.replica.fetchers", "integer"),
        ({"broker.id": "1.5"}, "broker.id", "integer"),
        ({"num.replica.alter.log.dirs.threads": "x"}, "num.replica.alter.log.dirs.threads", ""),
        ({"broker.id": "-1"}, "broker.id", "greater than or equal"),
        ({"broker.id": str(2**31)}, "broker.id", "less than or equal"),
        ({"intra.broker.throttled.rate": "-5"}, "intra.broker.throttled.rate", ""),
        ({"leader.replication.throttled.rate": "-1"}, "leader.replication.throttled.rate", ""),
        ({"log.retention.bytes": "-2"}, "log.retention.bytes", ""),
        ({"num.replica.fetchers": "0"}, "num.replica.fetchers", ""),
        ({"min.insync.replicas": "0"}, "min.insync.replicas", ""),
        ({"log.segment.bytes": "100"}, "log.segment.bytes", ""),
        ({"replica.fetch.wait.max.ms": "60001"}, "replica.fetch.wait.max.ms", ""),
        ({"log.dirs": "data-0"}, "log.dirs", "absolute"),
        ({"log.dirs": "/abs/ok,relative/dir"}, "log.dirs", "absolute"),
        ({"log.dirs": "/data/a,/data/a"}, "log.dirs", "twice"),
        ({"log.dirs": " , "}, "log.dirs", ""),
        ({"listeners": "https://0.0.0.0:9092"}, "listeners", "http://HOST:PORT"),
        ({"listeners": "http://broker"}, "listeners", "http://HOST:PORT"),
        ({"listeners": "0.0.0.0:9092"}, "listeners", "http://HOST:PORT"),
        ({"listeners": "http://:9092"}, "listeners", "http://HOST:PORT"),
        ({"auth.disabled": "yes"}, "auth.disabled", "true or false"),
        ({"data.auth.required": "1"}, "data.auth.required", "true or false"),
        ({"log.dir.headroom.bytes": "-1"}, "log.dir.headroom.bytes", ""),
        ({"log.dir.headroom.bytes": "1GB"}, "log.dir.headroom.bytes", "integer"),
        ({"log.dir.headroom.percent": "-0.5"}, "log.dir.headroom.percent", ""),
        ({"log.dir.headroom.percent": "51"}, "log.dir.headroom.percent", ""),
        ({"log.dir.headroom.percent": "nan"}, "log.dir.headroom.percent", ""),
        ({"log.dir.headroom.percent": "five"}, "log.dir.headroom.percent", "number"),
        ({"queued.max.request.bytes": "0"}, "queued.max.request.bytes", "greater than"),
        ({"queued.max.request.bytes": "-1"}, "queued.max.request.bytes", "greater than"),
        ({"queued.max.request.bytes": "256MiB"}, "queued.max.request.bytes", "integer"),
        ({"request.body.timeout.ms": "0"}, "request.body.timeout.ms", "greater than"),
        ({"request.body.timeout.ms": "1.5"}, "request.body.timeout.ms", "integer"),
        ({"connections.max.idle.ms": "0"}, "connections.max.idle.ms", "greater than"),
        ({"connections.max.idle.ms": "soon"}, "connections.max.idle.ms", "integer"),
    ],
)
def test_bad_value_names_the_setting(
    tmp_path: Path, token_file: Path, change: dict[str, str], setting: str, detail: str
) -> None:
    msg = refused(tmp_path, {**base_props(tmp_path, token_file), **change})
    assert setting in msg
    assert detail in msg


def test_missing_required_settings(tmp_path: Path, token_file: Path) -> None:
    props = base_props(tmp_path, token_file)
    assert "broker.id" in refused(tmp_path, {k: v for k, v in props.items() if k != "broker.id"})
    assert "log.dirs" in refused(tmp_path, {k: v for k, v in props.items() if k != "log.dirs"})


def test_token_file_required_unless_auth_disabled(tmp_path: Path) -> None:
    props = {"broker.id": "0", "log.dirs": str(tmp_path / "d")}
    msg = refused(tmp_path, props)
    assert "token.file" in msg
    assert "auth.disabled=true" in msg
    assert "token.file" in refused(tmp_path, {**props, "auth.disabled": "false"})


def test_short_token_is_refused(tmp_path: Path, token_file: Path) -> None:
    token_file.write_text("short-token\n", encoding="utf-8")
    msg = refused(tmp_path, base_props(tmp_path, token_file))
    assert "token.file" in msg
    assert "shorter than 16" in msg


def test_whitespace_around_the_token_does_not_count(tmp_path: Path, token_file: Path) -> None:
    token_file.write_text("   " + "a" * 15 + "   \n\n", encoding="utf-8")
    assert "shorter than 16" in refused(tmp_path, base_props(tmp_path, token_file))
    token_file.write_text("\n" + "a" * 16 + "\n", encoding="utf-8")
    assert load(tmp_path, base_props(tmp_path, token_file)).read_token() == "a" * 16


def test_unreadable_token_file_is_refused(tmp_path: Path, token_file: Path) -> None:
    props = {**base_props(tmp_path, token_file), "token.file": str(tmp_path / "missing")}
    msg = refused(tmp_path, props)
    assert "token.file" in msg
    assert str(tmp_path / "missing") in msg


def test_missing_config_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(str(tmp_path / "nope.properties"), env={})


# -- topic-level settings -------------------------------------------------------------------


def test_log_config_broker_defaults(tmp_path: Path, token_file: Path) -> None:
    props = {
        **base_props(tmp_path, token_file),
        "log.segment.bytes": "1048576",
        "log.roll.ms": "60000",  # alias of log.segment.ms
        "log.retention.bytes": "123456789",
        "log.retention.ms": "3600000",
        "log.index.interval.bytes": "8192",
        "message.max.bytes": "500000",
        "log.flush.interval.messages": "100",
    }
    cfg = load(tmp_path, props)
    assert cfg.log_config() == LogConfig(
        segment_bytes=1048576,
        segment_ms=60000,
        retention_bytes=123456789,
        retention_ms=3600000,
        index_interval_bytes=8192,
        max_message_bytes=500000,
        flush_messages=100,
    )


def test_log_config_topic_overrides_win(tmp_path: Path, token_file: Path) -> None:
    cfg = load(tmp_path, {**base_props(tmp_path, token_file), "log.segment.bytes": "1048576"})
    lc = cfg.log_config(
        {
            "segment.bytes": "4096",
            "segment.ms": "1000",
            "retention.bytes": "-1",
            "retention.ms": "-1",
            "index.interval.bytes": "0",
            "max.message.bytes": "2048",
            "flush.messages": "1",
            "cleanup.policy": "delete",  # what this broker does anyway: accepted
        }
    )
    assert lc == LogConfig(
        segment_bytes=4096,
        segment_ms=1000,
        retention_bytes=-1,
        retention_ms=-1,
        index_interval_bytes=0,
        max_message_bytes=2048,
        flush_messages=1,
    )
    # Settings the topic does not override keep the broker's value.
    assert cfg.log_config({"retention.ms": "5"}).segment_bytes == 1048576


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"segment.bytes": "big"}, "segment.bytes"),
        ({"segment.bytes": "10"}, "segment.bytes"),
        ({"segment.ms": "0"}, "segment.ms"),
        ({"retention.ms": "1h"}, "retention.ms"),
        ({"index.interval.bytes": "-1"}, "index.interval.bytes"),
        ({"max.message.bytes": "1"}, "max.message.bytes"),
        # Issue 14 (6): accepted before (a negative retention, an unknown key ignored).
        ({"retention.ms": "-5"}, "retention.ms"),
        ({"retension.ms": "1000"}, "retension.ms"),
        ({"cleanup.policy": "compact"}, "cleanup.policy"),
    ],
)
def test_bad_topic_config_names_the_setting(
    tmp_path: Path, token_file: Path, overrides: dict[str, str], setting: str
) -> None:
    cfg = load(tmp_path, base_props(tmp_path, token_file))
    with pytest.raises(ConfigError, match=re.escape(setting)):
        cfg.log_config(overrides)


def test_bad_topic_flush_messages_names_the_setting(tmp_path: Path, token_file: Path) -> None:
    cfg = load(tmp_path, base_props(tmp_path, token_file))
    with pytest.raises(ConfigError, match=re.escape("flush.messages")):
        cfg.log_config({"flush.messages": "often"})


@pytest.mark.parametrize("var", ["JBOD_CONFIG", "JBOD_LOG_LEVEL"])
def test_entry_point_variables_are_not_settings(tmp_path: Path, token_file: Path, var: str) -> None:
    path = write_props(tmp_path, base_props(tmp_path, token_file))
    cfg = load_config(path, env={var: path if var == "JBOD_CONFIG" else "DEBUG"})
    assert cfg.broker_id == 1


@pytest.mark.parametrize("value", ["0", "-5"])
def test_topic_flush_messages_below_one_is_refused(
    tmp_path: Path, token_file: Path, value: str
) -> None:
    cfg = load(tmp_path, base_props(tmp_path, token_file))
    with pytest.raises(ConfigError, match=re.escape("flush.messages")):
        cfg.log_config({"flush.messages": value})


def test_operator_variables_are_not_settings(tmp_path: Path, token_file: Path) -> None:
    env = {"JBOD_OPERATOR_NAMESPACE": "kafka", "JBOD_BROKER_ID": "2"}
    assert load(tmp_path, base_props(tmp_path, token_file), env).broker_id == 2


def test_headroom_defaults_and_settings(tmp_path: Path, token_file: Path) -> None:
    cfg = load(tmp_path, base_props(tmp_path, token_file))
    assert cfg.headroom.of(1_000_000) == 10_000  # 1% of capacity by default
    cfg = load(
        tmp_path,
        {
            **base_props(tmp_path, token_file),
            "log.dir.headroom.bytes": "50000",
            "log.dir.headroom.percent": "2.5",
        },
    )
    assert cfg.headroom.of(1_000_000) == 50_000  # the larger of the two
    assert cfg.headroom.of(10_000_000) == 250_000
    env = {"JBOD_LOG_DIR_HEADROOM_PERCENT": "0"}
    assert load(tmp_path, base_props(tmp_path, token_file), env).headroom.of(10**9) == 0
