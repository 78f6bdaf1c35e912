"""Move settings: defaults, Kafka's alias for the throttle, refusals that name the setting."""

from __future__ import annotations

import pytest

from jbod_broker.move.config import (
    THREADS,
    THROTTLED_RATE,
    THROTTLED_RATE_ALIAS,
    UNLIMITED,
    MoveConfig,
    MoveConfigError,
    parse_move_config,
)


def test_defaults_follow_kip_113() -> None:
    assert parse_move_config({}, log_dir_count=3) == MoveConfig(threads=3, throttled_rate=None)


def test_explicit_values_and_strings() -> None:
    cfg = parse_move_config({THREADS: "2", THROTTLED_RATE: "20_000_000"}, log_dir_count=4)
    assert cfg == MoveConfig(threads=2, throttled_rate=20_000_000)


def test_kafka_shipped_name_is_an_alias() -> None:
    cfg = parse_move_config({THROTTLED_RATE_ALIAS: 50_000_000}, log_dir_count=1)
    assert cfg.throttled_rate == 50_000_000
    both = {THROTTLED_RATE: 7, THROTTLED_RATE_ALIAS: "7"}
    assert parse_move_config(both, log_dir_count=1).throttled_rate == 7


def test_alias_disagreeing_is_refused() -> None:
    with pytest.raises(MoveConfigError, match="disagree"):
        parse_move_config({THROTTLED_RATE: 1, THROTTLED_RATE_ALIAS: 2}, log_dir_count=1)


def test_long_max_value_means_unlimited() -> None:
    assert parse_move_config({THROTTLED_RATE: UNLIMITED}, log_dir_count=1).throttled_rate is None


@pytest.mark.parametrize(
    ("props", "name"),
    [
        ({THREADS: 0}, THREADS),
        ({THREADS: "many"}, THREADS),
        ({THREADS: True}, THREADS),
        ({THROTTLED_RATE: 0}, THROTTLED_RATE),
        ({THROTTLED_RATE: -5}, THROTTLED_RATE),
        ({THROTTLED_RATE_ALIAS: "fast"}, THROTTLED_RATE_ALIAS),
    ],
)
def test_bad_values_name_the_setting(props: dict[str, object], name: str) -> None:
    with pytest.raises(MoveConfigError, match=name.replace(".", r"\.")):
        parse_move_config(props, log_dir_count=2)
