"""Kafka's DescribeCluster and DescribeLogDirs read as the plans' observed models, pure: the
one reading both Kafka adapters (``control.kafka_log_dir_moves``,
``control.kafka_reassignments``) use, so a LogDirMove and a PartitionReassignment see a Kafka
dir alike."""

from __future__ import annotations

from collections.abc import Iterable

from jbod_broker import wire

from .kafka_types import BrokerLogDirs, LogDir
from .logdirmove import BrokerDirs, Dir


def kafka_dir(d: LogDir) -> Dir:
    """One Kafka log dir as the plan sees a dir. Kafka reports no reservation nor headroom
    (its free bytes already count what the copies wrote); a broker older than KIP-1066
    reports no cordon (``None``): not cordoned, and it cannot be."""
    return Dir(
        name=wire.log_dir_short_name(d.path),
        path=d.path,
        live=d.error is None,
        cordoned=bool(d.cordoned),
        usable_bytes=d.usable_bytes or 0,
        replicas={(r.topic, r.partition): r.size_bytes for r in d.replicas if not r.is_future},
        futures=frozenset((r.topic, r.partition) for r in d.replicas if r.is_future),
        total_bytes=d.total_bytes or 0,
        can_cordon=d.cordoned is not None,
    )


def kafka_broker_dirs(read: BrokerLogDirs) -> BrokerDirs:
    """One broker's DescribeLogDirs answer as the plans read a broker's dirs."""
    return BrokerDirs(read.broker_id, tuple(kafka_dir(d) for d in read.dirs))


def cluster_size_of(brokers: Iterable[int]) -> int:
    """The plans' cluster size for Kafka's broker ids (not dense from 0 as ours are): ids up
    to the highest pass the plans' range checks; a missing one is never live, so a step or a
    move to it waits and says so."""
    return max(brokers, default=-1) + 1
