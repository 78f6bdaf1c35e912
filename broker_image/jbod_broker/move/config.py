"""The broker settings of the move engine, parsed and checked once.

``num.replica.alter.log.dirs.threads``
    move workers; default: the number of log directories (KIP-113).
``intra.broker.throttled.rate``
    bytes/s shared by every worker; default unlimited. KIP-113 named it so; Kafka shipped it as
    ``replica.alter.log.dirs.io.max.bytes.per.second``, accepted here as an alias. Kafka's
    default, ``Long.MAX_VALUE`` (9223372036854775807), also means unlimited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

THREADS = "num.replica.alter.log.dirs.threads"
THROTTLED_RATE = "intra.broker.throttled.rate"
THROTTLED_RATE_ALIAS = "replica.alter.log.dirs.io.max.bytes.per.second"
UNLIMITED = 2**63 - 1
_MAX_THREADS = 1024


class MoveConfigError(ValueError):
    """A move setting that cannot work; the message names the setting."""


@dataclass(frozen=True, slots=True)
class MoveConfig:
    threads: int
    throttled_rate: int | None
    """bytes/s, or ``None`` for unlimited."""


def _int(key: str, value: object) -> int:
    if isinstance(value, bool):
        raise MoveConfigError(f"{key} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip().replace("_", ""))
        except ValueError:
            pass
    raise MoveConfigError(f"{key} must be an integer, got {value!r}")


def parse_throttled_rate(key: str, value: object) -> int | None:
    rate = _int(key, value)
    if rate >= UNLIMITED:
        return None
    if rate <= 0:
        raise MoveConfigError(f"{key} must be a positive number of bytes/s, got {rate}")
    return rate


def parse_move_config(props: Mapping[str, object], *, log_dir_count: int) -> MoveConfig:
    """Read the move settings from broker properties (unknown keys are ignored)."""
    if log_dir_count < 1:
        raise MoveConfigError("there must be at least one log directory")
    threads = log_dir_count
    if THREADS in props:
        threads = _int(THREADS, props[THREADS])
        if not 1 <= threads <= _MAX_THREADS:
            raise MoveConfigError(f"{THREADS} must be between 1 and {_MAX_THREADS}, got {threads}")
    rate: int | None = None
    given = [k for k in (THROTTLED_RATE, THROTTLED_RATE_ALIAS) if k in props]
    if given:
        rates = {k: parse_throttled_rate(k, props[k]) for k in given}
        if len(set(rates.values())) > 1:
            raise MoveConfigError(
                f"{THROTTLED_RATE} and its alias {THROTTLED_RATE_ALIAS} disagree: "
                f"{props[THROTTLED_RATE]!r} vs {props[THROTTLED_RATE_ALIAS]!r}"
            )
        rate = rates[given[0]]
    return MoveConfig(threads=threads, throttled_rate=rate)
