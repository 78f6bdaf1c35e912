"""A LogDirMove on an Apache Kafka cluster, the pure part: Kafka's DescribeLogDirs and
AlterReplicaLogDirs answers as ``plan.logdirmove``'s observed models (how a move stands, its
rate), and the cordon's config change. The adapter (``control.kafka_log_dir_moves``) does the
I/O and hands each answer here, so each mapping is a unit test.

Progress: DescribeLogDirs lists a moving replica twice, the current copy and the future one
(``is_future``); the future's size against the current one's is the progress, and the rate
is the future's growth between two samples of one pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jbod_broker import wire

from .kafka_types import BrokerLogDirs, KafkaErrorName, LogDir
from .port_types import ReplicaKey, StartAnswer, StartResult

NOT_THERE_YET = KafkaErrorName.REPLICA_NOT_AVAILABLE
"""AlterReplicaLogDirs' answer for a replica its broker does not host (yet)."""

Sample = tuple[float, int]
"""(monotonic seconds, the future copy's bytes)."""


def move_progress(
    read: BrokerLogDirs,
    replicas: Sequence[tuple[str, int]],
    before: Mapping[tuple[str, int], Sample],
    now: float,
) -> list[wire.ReplicaLogDirInfo]:
    """How each replica's move stands on this broker, from one DescribeLogDirs.

    A future copy: Copying while smaller than the current one, CatchingUp once as large
    (Kafka swaps them when the future has caught up); Failed when its dir is offline. No future
    copy: no move (``NONE``; the plan verifies a replica already in its target dir before it
    looks here, and asks again otherwise). The rate is the future's growth since ``before``.
    """
    current: dict[tuple[str, int], tuple[str, int]] = {}
    future: dict[tuple[str, int], tuple[LogDir, int, int]] = {}
    for d in read.dirs:
        for r in d.replicas:
            key = (r.topic, r.partition)
            if r.is_future:
                future[key] = (d, r.size_bytes, r.offset_lag)
            else:
                current[key] = (d.path, r.size_bytes)
    out = []
    for key in replicas:
        cur_path, total = current.get(key, (None, 0))
        if key not in future:
            out.append(
                wire.ReplicaLogDirInfo(
                    topic=key[0],
                    partition=key[1],
                    current_log_dir=cur_path,
                    future_log_dir=None,
                    future_offset_lag=0,
                    bytes_copied=0,
                    bytes_total=total,
                    state=wire.MoveState.NONE,
                )
            )
            continue
        fdir, copied, lag = future[key]
        rate = 0.0
        if key in before and now > before[key][0]:
            rate = max(copied - before[key][1], 0) / (now - before[key][0])
        if fdir.error is not None:
            state, error = wire.MoveState.FAILED, f"log dir {fdir.path}: {fdir.error}"
        else:
            state = wire.MoveState.COPYING if copied < total else wire.MoveState.CATCHING_UP
            error = None
        out.append(
            wire.ReplicaLogDirInfo(
                topic=key[0],
                partition=key[1],
                current_log_dir=cur_path,
                future_log_dir=fdir.path,
                future_offset_lag=lag,
                bytes_copied=copied,
                bytes_total=max(total, copied),
                state=state,
                error=error,
                rate_bytes_per_sec=float(rate),
                eta_seconds=(max(total - copied, 0) / rate) if rate > 0 else None,
            )
        )
    return out


def futures_of(read: BrokerLogDirs) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the future copy's bytes, on this broker."""
    return {
        (r.topic, r.partition): r.size_bytes for d in read.dirs for r in d.replicas if r.is_future
    }


def start_answer(replica: ReplicaKey, error: str | None) -> StartResult:
    """AlterReplicaLogDirs' answer for one replica as the plan reads a start."""
    if error is None:
        return StartResult(replica, StartAnswer.ACCEPTED)
    if error == NOT_THERE_YET:
        return StartResult(replica, StartAnswer.NOT_THERE_YET)
    return StartResult(replica, StartAnswer.REFUSED, error)


def cordon_change(d: LogDir, on: bool) -> tuple[str, ...] | None:
    """What to append to (``on``) or subtract from ``cordoned.log.dirs``; None: nothing."""
    if d.cordoned is None or bool(d.cordoned) == on:
        return None
    return (d.path,)
