"""kopf registrations only: each decorator delegates to ``handlers.<resource>``.

Handlers reconcile from observed state (kopf #641): a change handler and a periodic pass call
the same idempotent reconcile, serialised per object, so a missed or reordered event is
repaired by the next pass. The running context (clients, elector, controllers) lives in
``handlers.context``; settings come from the typed ``settings.OperatorSettings``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Iterator
from typing import Any

import kopf

from .handlers import (
    balance,
    clusters,
    kafka_clusters,
    logdirmoves,
    reassignments,
    rebalances,
    topics,
)
from .handlers.context import Ctx, close_context, open_context
from .models import GROUP, VERSION
from .settings import load_settings

SETTINGS = load_settings()
"""Validated once: ``__main__`` loaded them before importing this module, and stops with a
message naming the variable when one is wrong. kopf needs the intervals at registration."""
INTERVAL = SETTINGS.reconcile_interval_seconds
MOVE_INTERVAL = SETTINGS.move_poll_seconds
REASSIGN_INTERVAL = SETTINGS.reassignment_poll_seconds
REBALANCE_INTERVAL = SETTINGS.rebalance_poll_seconds


class ApiRetryDelays:
    """kopf's delays between retries of a failed API request, without end.

    kopf gives up after its last delay (about a minute) and stops the operator, so a missing
    RBAC verb on a watched resource would be a crash loop. Retrying forever logs the forbidden
    request (verb, resource, the API server's message) at error level every minute instead,
    and the operator recovers by itself once the Role is fixed. A fresh iterator per request.
    """

    def __iter__(self) -> Iterator[float]:
        return itertools.chain((1, 1, 2, 3, 5, 8, 13, 21), itertools.repeat(60))


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Progress and diff-base in annotations under our prefix: a strict status schema would
    # prune kopf's own status fields.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = f"{GROUP}/finalizer"
    settings.posting.level = logging.INFO
    # Re-list at least every minute, so a watch that silently stalls costs a minute at most.
    settings.watching.server_timeout = 60
    settings.watching.client_timeout = 90
    # kopf waits this long after an object's last event before it handles it (0.1 s by
    # default), to fold bursts; handlers reconcile from observed state, so start sooner.
    settings.batching.batch_window = 0.005
    # A deletion waits for the object's daemons to exit: the LogDirMove daemon long-polls but
    # gives way at once to kopf's stop flag; give it a second, then look again soon.
    settings.background.instant_exit_timeout = 1.0
    settings.background.cancellation_polling = 2
    # Forbidden or failing API calls are retried and logged forever, never fatal.
    settings.networking.error_backoffs = ApiRetryDelays()
    memo["ctx"] = await open_context(SETTINGS)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    ctx: Ctx | None = memo.get("ctx")
    if ctx is not None:
        await close_context(ctx)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_with_kubeconfig(**kwargs) or kopf.login_with_service_account(**kwargs)


# -- BrokerCluster ------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "brokerclusters", backoff=5)
@kopf.on.create(GROUP, VERSION, "brokerclusters", backoff=5)
@kopf.on.update(GROUP, VERSION, "brokerclusters", backoff=5, field="spec")
async def cluster_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await clusters.on_cluster(memo["ctx"], body)


@kopf.on.delete(GROUP, VERSION, "brokerclusters", optional=True)
async def cluster_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await clusters.on_cluster_deleted(memo["ctx"], body)


@kopf.timer(GROUP, VERSION, "brokerclusters", interval=INTERVAL, initial_delay=INTERVAL, backoff=5)
async def cluster_observe(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    # A TemporaryError is retried by the change handler; the next tick observes again.
    with contextlib.suppress(kopf.TemporaryError):
        await clusters.on_cluster(memo["ctx"], body)


@kopf.daemon(GROUP, VERSION, "brokerclusters", backoff=5, cancellation_timeout=5)
async def cluster_balance(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Continuous detection for each BrokerCluster (``handlers.balance.follow``)."""
    await balance.follow(memo["ctx"], body, stopped)


@kopf.daemon(GROUP, VERSION, "kafkaclusters", backoff=5, cancellation_timeout=5)
async def kafka_cluster_balance(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Continuous detection for each KafkaCluster, the same loop (``handlers.balance.follow``)."""
    await balance.follow(memo["ctx"], body, stopped)


# -- Topic --------------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "topics", backoff=5)
@kopf.on.create(GROUP, VERSION, "topics", backoff=5)
@kopf.on.update(GROUP, VERSION, "topics", backoff=5, field="spec")
async def topic_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await topics.on_topic(memo["ctx"], body)


@kopf.timer(GROUP, VERSION, "topics", interval=INTERVAL, initial_delay=INTERVAL, backoff=5)
async def topic_observe(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    # A TemporaryError here is already in the Ready condition; the next tick tries again.
    with contextlib.suppress(kopf.TemporaryError):
        await topics.on_topic(memo["ctx"], body)


@kopf.on.delete(GROUP, VERSION, "topics", backoff=5)
async def topic_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await topics.on_topic_deleted(memo["ctx"], body)


@kopf.on.event(GROUP, VERSION, "partitionshards")
async def shard_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """The watch that keeps the partition state of record in memory current
    (``clients.partition_store``): what other writers did, seen without a list."""
    topics.on_shard_event(memo["ctx"], event)


# -- LogDirMove ---------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "logdirmoves", backoff=2)
@kopf.on.create(GROUP, VERSION, "logdirmoves", backoff=2)
@kopf.on.update(GROUP, VERSION, "logdirmoves", backoff=2, field="spec")
async def move_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await logdirmoves.run_pass(memo["ctx"], body)


@kopf.daemon(GROUP, VERSION, "logdirmoves", backoff=2, cancellation_timeout=5)
async def move_follow(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Follow each LogDirMove while it lives (``handlers.logdirmoves.follow``)."""
    await logdirmoves.follow(memo["ctx"], body, stopped, MOVE_INTERVAL)


@kopf.on.delete(GROUP, VERSION, "logdirmoves", backoff=2)
async def move_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await logdirmoves.on_move_deleted(memo["ctx"], body)


# -- PartitionReassignment ----------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "partitionreassignments", backoff=2)
@kopf.on.create(GROUP, VERSION, "partitionreassignments", backoff=2)
@kopf.on.update(GROUP, VERSION, "partitionreassignments", backoff=2, field="spec")
async def reassignment_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await reassignments.run_pass(memo["ctx"], body)


@kopf.daemon(GROUP, VERSION, "partitionreassignments", backoff=2, cancellation_timeout=5)
async def reassignment_follow(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Follow each PartitionReassignment while it lives (``handlers.reassignments.follow``)."""
    await reassignments.follow(memo["ctx"], body, stopped, REASSIGN_INTERVAL)


@kopf.on.delete(GROUP, VERSION, "partitionreassignments", backoff=1)
async def reassignment_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await reassignments.on_deleted(memo["ctx"], body)


# -- Rebalance ----------------------------------------------------------------------------


@kopf.on.resume(GROUP, VERSION, "rebalances", backoff=2)
@kopf.on.create(GROUP, VERSION, "rebalances", backoff=2)
async def rebalance_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await rebalances.run_pass(memo["ctx"], body)


@kopf.daemon(GROUP, VERSION, "rebalances", backoff=2, cancellation_timeout=5)
async def rebalance_follow(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Follow each Rebalance while it lives (``handlers.rebalances.follow``): the command
    annotation, the planning job and the children are read by its passes."""
    await rebalances.follow(memo["ctx"], body, stopped, REBALANCE_INTERVAL)


# -- KafkaCluster -------------------------------------------------------------------------


@kopf.daemon(GROUP, VERSION, "kafkaclusters", backoff=5, cancellation_timeout=5)
async def kafka_cluster_follow(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Refresh each KafkaCluster's status while it lives (``handlers.kafka_clusters``)."""
    await kafka_clusters.follow(memo["ctx"], body, stopped)
