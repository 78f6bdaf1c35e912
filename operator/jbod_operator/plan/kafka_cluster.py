"""A KafkaCluster's status from one reading of its Admin API. Pure.

``handlers.kafka_clusters`` observes (the Secrets, DescribeCluster, DescribeLogDirs of every
unfenced broker) into a :class:`KafkaObservation`; :func:`decide_status` turns it into the
status the handler writes, once. Three conditions:

- ``Reachable``: DescribeCluster answered. False with the reason the connection failed:
  ``CredentialsMissing`` (a Secret or key the spec names is not there: nothing was dialled),
  ``AuthenticationFailed``, ``AuthorizationFailed``, ``Unreachable`` (no broker answered in
  time), or ``KafkaError`` (anything else Kafka said, named in the message).
- ``Ready``: reachable, at least one broker, and every unfenced broker's log dirs read. What
  the controllers that act on a KafkaCluster wait for.
- ``Degraded``: True while a broker is fenced or a log dir is offline (the names in the
  message); a Ready cluster may be degraded (draining a failing disk is one reason to come).

A failed reading keeps the last known brokers and cluster id (with the time they were read in
``lastRefreshTime``): the conditions say they are stale, and a flapping connection does not
erase what was seen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..models.common import Condition
from ..models.kafka_cluster import (
    KafkaBrokerStatus,
    KafkaClusterStatus,
    KafkaLogDirStatus,
)
from .conditions import set_condition
from .kafka_types import BrokerLogDirs, ClusterDescription, KafkaErrorName

READY = "Ready"
REACHABLE = "Reachable"
DEGRADED = "Degraded"

AUTHENTICATION_ERRORS = frozenset(
    {
        KafkaErrorName.SASL_AUTHENTICATION_FAILED.value,
        KafkaErrorName.ILLEGAL_SASL_STATE.value,
        KafkaErrorName.UNSUPPORTED_SASL_MECHANISM.value,
    }
)
AUTHORIZATION_ERRORS = frozenset(
    {
        KafkaErrorName.CLUSTER_AUTHORIZATION_FAILED.value,
        KafkaErrorName.TOPIC_AUTHORIZATION_FAILED.value,
        KafkaErrorName.GROUP_AUTHORIZATION_FAILED.value,
    }
)
UNREACHABLE_ERRORS = frozenset(
    {
        "NoBrokersAvailable",
        "KafkaTimeoutError",
        "KafkaConnectionError",
        "NodeNotReadyError",
        KafkaErrorName.REQUEST_TIMED_OUT.value,
        "SSLError",
    }
)


@dataclass(frozen=True)
class KafkaObservation:
    """One reading. ``credentials_error``: why the connection could not even be configured
    (nothing dialled). ``cluster_error``: Kafka's (or the client's) error name when
    DescribeCluster failed, with ``cluster_message``. ``log_dirs``: per unfenced broker, its
    dirs or the error name its DescribeLogDirs failed with."""

    bootstrap: str
    cluster: ClusterDescription | None = None
    log_dirs: Mapping[int, BrokerLogDirs | str] = field(default_factory=dict)
    credentials_error: str | None = None
    cluster_error: str | None = None
    cluster_message: str = ""
    time: str = ""


def unreachable_reason(error: str) -> str:
    """The Reachable=False reason for the error DescribeCluster failed with."""
    if error in AUTHENTICATION_ERRORS:
        return "AuthenticationFailed"
    if error in AUTHORIZATION_ERRORS:
        return "AuthorizationFailed"
    if error in UNREACHABLE_ERRORS:
        return "Unreachable"
    return "KafkaError"


def broker_statuses(
    cluster: ClusterDescription, log_dirs: Mapping[int, BrokerLogDirs | str]
) -> list[KafkaBrokerStatus]:
    """Each broker as DescribeCluster lists it, with its dirs (when they were read)."""
    out = []
    for b in cluster.brokers:
        read = log_dirs.get(b.broker_id)
        dirs = None
        error = None
        if isinstance(read, str):
            error = read
        elif read is not None:
            dirs = [
                KafkaLogDirStatus(
                    path=d.path,
                    total_bytes=d.total_bytes,
                    usable_bytes=d.usable_bytes,
                    cordoned=d.cordoned,
                    offline=d.error is not None,
                    error=d.error,
                    replica_count=sum(1 for r in d.replicas if not r.is_future),
                    replica_bytes=d.replica_bytes,
                    future_replica_count=sum(1 for r in d.replicas if r.is_future),
                )
                for d in sorted(read.dirs, key=lambda d: d.path)
            ]
        out.append(
            KafkaBrokerStatus(
                id=b.broker_id,
                host=b.host,
                port=b.port,
                rack=b.rack,
                fenced=b.fenced,
                log_dirs=dirs,
                error=error,
            )
        )
    return out


def decide_status(
    obs: KafkaObservation,
    previous: KafkaClusterStatus | None,
    generation: int | None,
    *,
    now: float,
) -> KafkaClusterStatus:
    """The status to write for ``obs``; ``previous`` gives the conditions' transition times
    and the last known brokers when this reading failed; ``now`` is a changed condition's."""
    before = previous or KafkaClusterStatus()
    conditions: list[dict[str, Any]] = [c.dump() for c in before.conditions]

    def cond(type_: str, ok: bool | None, reason: str, message: str) -> None:
        nonlocal conditions
        conditions = set_condition(conditions, type_, ok, reason, message, generation, now=now)

    if obs.cluster is None:
        if obs.credentials_error is not None:
            reason, message = "CredentialsMissing", obs.credentials_error
        else:
            error = obs.cluster_error or "KafkaError"
            reason = unreachable_reason(error)
            detail = f": {obs.cluster_message}" if obs.cluster_message else ""
            message = f"DescribeCluster via {obs.bootstrap} failed with {error}{detail}"
        cond(REACHABLE, False, reason, message)
        cond(READY, False, reason, message)
        cond(DEGRADED, None, "NotRead", "the cluster could not be read")
        return before.model_copy(
            update={"observed_generation": generation, "conditions": _parsed(conditions)}
        )

    brokers = broker_statuses(obs.cluster, obs.log_dirs)
    cond(
        REACHABLE,
        True,
        "Connected",
        f"cluster {obs.cluster.cluster_id} answered via {obs.bootstrap}",
    )
    unread = [f"{b.id} ({b.error})" for b in brokers if b.error is not None]
    live = [b for b in brokers if not b.fenced]
    if not live:
        cond(READY, False, "NoBrokers", "DescribeCluster lists no unfenced broker")
    elif unread:
        cond(READY, False, "LogDirsUnreadable", f"DescribeLogDirs failed on broker {unread}")
    else:
        dirs = sum(len(b.log_dirs or ()) for b in live)
        cond(READY, True, "Ready", f"{len(live)} brokers, {dirs} log dirs read")
    fenced = [b.id for b in brokers if b.fenced]
    offline = [
        f"{b.id}:{d.path} ({d.error})" for b in brokers for d in b.log_dirs or () if d.offline
    ]
    problems = []
    if fenced:
        problems.append(f"fenced brokers {fenced}")
    if offline:
        problems.append(f"offline log dirs {offline}")
    if problems:
        cond(DEGRADED, True, "BrokersFenced" if fenced else "LogDirsOffline", "; ".join(problems))
    else:
        cond(DEGRADED, False, "AllHealthy", "every broker unfenced, every log dir online")
    return KafkaClusterStatus(
        observed_generation=generation,
        conditions=_parsed(conditions),
        cluster_id=obs.cluster.cluster_id,
        controller_id=obs.cluster.controller_id,
        brokers=brokers,
        broker_count=len(brokers),
        log_dir_count=sum(len(b.log_dirs or ()) for b in brokers),
        last_refresh_time=obs.time or None,
    )


def _parsed(conditions: list[dict[str, Any]]) -> list[Condition]:
    return [Condition.model_validate(c) for c in conditions]
