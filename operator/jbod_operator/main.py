"""kopf registrations only: each decorator delegates to ``handlers.<resource>``.

Handlers reconcile from observed state (kopf #641): a change handler and a periodic timer call
the same idempotent reconcile, serialised per object, so a missed or reordered event is
repaired by the next pass. ``TopicNotReady`` ("not yet") becomes a kopf.TemporaryError.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf

from .clients.brokers import BrokerPool
from .clients.kube import LOG_DIR_MOVES, KubeClient
from .control.cluster_controller import ClusterController
from .control.endpoint import ControllerEndpoint
from .control.leadership import LeaseElector
from .handlers import clusters, logdirmoves, topics
from .models import GROUP, VERSION, LogDirMove
from .plan.logdirmove import is_followed
from .settings import OperatorSettings, load_settings

T = TypeVar("T")

SETTINGS = load_settings()
"""Validated once: ``__main__`` loaded them before importing this module, and stops with a
message naming the variable when one is wrong. kopf needs the intervals at registration."""
INTERVAL = SETTINGS.reconcile_interval_seconds
MOVE_INTERVAL = SETTINGS.move_poll_seconds


@dataclass
class Ctx:
    settings: OperatorSettings
    kube: KubeClient
    pool: BrokerPool
    elector: LeaseElector
    endpoint: ControllerEndpoint | None = None
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    controllers: dict[tuple[str, str], ClusterController] = field(default_factory=dict)

    def lock(self, body: Any) -> asyncio.Lock:
        return self.locks.setdefault(body["metadata"]["uid"], asyncio.Lock())

    def controller_for(self, ns: str, name: str) -> ClusterController | None:
        if not self.elector.is_leader:
            return None
        return self.controllers.get((ns, name))

    def ensure_controller(self, ns: str, name: str) -> ClusterController:
        c = self.controllers.get((ns, name))
        if c is None:
            c = ClusterController(
                ns,
                name,
                self.kube,
                self.pool,
                session_timeout_s=self.settings.session_timeout_seconds,
                preferred_election=self.settings.preferred_leader_election,
                on_fenced=self.elector.step_down,
            )
            self.controllers[(ns, name)] = c
            if self.elector.is_leader:
                c.start()
        return c

    async def elected(self, epoch: int) -> None:
        self.pool.controller_epoch = epoch
        for c in self.controllers.values():
            c.start()  # a fresh view: every broker is probed as it heartbeats (scenario 6)

    async def deposed(self) -> None:
        for c in self.controllers.values():
            await c.stop()

    def require_leader(self) -> None:
        if not self.elector.is_leader:
            raise kopf.TemporaryError("standby: another operator holds the Lease", delay=5)


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
    # A deletion waits for the object's timers to exit: the LogDirMove timer long-polls but
    # gives way at once to kopf's stop flag; give it a second, then look again soon.
    settings.background.instant_exit_timeout = 1.0
    settings.background.cancellation_polling = 2
    # Forbidden or failing API calls are retried and logged forever, never fatal.
    settings.networking.error_backoffs = ApiRetryDelays()
    cfg = SETTINGS
    kube = KubeClient.from_env()
    pool = BrokerPool(cfg, kube)
    elector = LeaseElector(
        kube,
        cfg.lease_namespace or cfg.namespace or "default",
        cfg.lease_name,
        lease_seconds=cfg.lease_seconds,
        renew_seconds=cfg.lease_renew_seconds,
        margin_seconds=min(cfg.lease_renew_seconds, cfg.lease_seconds / 3),
    )
    ctx = Ctx(cfg, kube, pool, elector)
    elector.on_elected = ctx.elected
    elector.on_deposed = ctx.deposed
    ctx.endpoint = ControllerEndpoint(
        kube, pool, controllers=ctx.controller_for, is_leader=lambda: elector.is_leader
    )
    await ctx.endpoint.start(cfg.controller_listen_host, cfg.controller_listen_port)
    memo["ctx"] = ctx
    elector.start()


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    ctx: Ctx | None = memo.get("ctx")
    if ctx is not None:
        await ctx.deposed()
        await ctx.elector.stop(release=True)
        if ctx.endpoint is not None:
            await ctx.endpoint.stop()
        await ctx.pool.close()
        await ctx.kube.close()


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_with_kubeconfig(**kwargs) or kopf.login_with_service_account(**kwargs)


# -- BrokerCluster ------------------------------------------------------------------------


async def _cluster(body: kopf.Body, memo: kopf.Memo) -> None:
    ctx: Ctx = memo["ctx"]
    if body.get("metadata", {}).get("deletionTimestamp"):
        return
    ctx.ensure_controller(body["metadata"]["namespace"], body["metadata"]["name"])
    ctx.require_leader()
    async with ctx.lock(body):
        try:
            outcome = await clusters.reconcile_cluster(ctx.kube, ctx.pool, ctx.settings, dict(body))
        except clusters.StatefulSetTerminating as e:
            for type_, reason, message in e.events:
                kopf.event(body, type=type_, reason=reason, message=message)
            raise kopf.TemporaryError(str(e), delay=2) from e
    for type_, reason, message in outcome.events:
        kopf.event(body, type=type_, reason=reason, message=message)


@kopf.on.resume(GROUP, VERSION, "brokerclusters", backoff=5)
@kopf.on.create(GROUP, VERSION, "brokerclusters", backoff=5)
@kopf.on.update(GROUP, VERSION, "brokerclusters", backoff=5, field="spec")
async def cluster_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await _cluster(body, memo)


@kopf.on.delete(GROUP, VERSION, "brokerclusters", optional=True)
async def cluster_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    ctx: Ctx = memo["ctx"]
    c = ctx.controllers.pop((body["metadata"]["namespace"], body["metadata"]["name"]), None)
    if c is not None:
        await c.stop()


@kopf.timer(GROUP, VERSION, "brokerclusters", interval=INTERVAL, initial_delay=INTERVAL, backoff=5)
async def cluster_observe(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    # A TemporaryError is retried by the change handler; the next tick observes again.
    with contextlib.suppress(kopf.TemporaryError):
        await _cluster(body, memo)


# -- Topic --------------------------------------------------------------------------------


async def _topic(body: kopf.Body, memo: kopf.Memo) -> None:
    ctx: Ctx = memo["ctx"]
    if body.get("metadata", {}).get("deletionTimestamp"):
        return
    ctx.require_leader()
    ns = body["metadata"]["namespace"]
    ctrl = ctx.ensure_controller(ns, body["spec"]["clusterName"])
    async with ctx.lock(body):
        try:
            await topics.reconcile_topic(ctx.kube, ctx.pool, dict(body), ctrl.lock)
        except topics.TopicNotReady as e:
            raise kopf.TemporaryError(str(e), delay=e.delay) from e


@kopf.on.resume(GROUP, VERSION, "topics", backoff=5)
@kopf.on.create(GROUP, VERSION, "topics", backoff=5)
@kopf.on.update(GROUP, VERSION, "topics", backoff=5, field="spec")
async def topic_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await _topic(body, memo)


@kopf.timer(GROUP, VERSION, "topics", interval=INTERVAL, initial_delay=INTERVAL, backoff=5)
async def topic_observe(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    # A TemporaryError here is already in the Ready condition; the next tick tries again.
    with contextlib.suppress(kopf.TemporaryError):
        await _topic(body, memo)


@kopf.on.delete(GROUP, VERSION, "topics", backoff=5)
async def topic_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    ctx: Ctx = memo["ctx"]
    ctx.require_leader()
    async with ctx.lock(body):
        await topics.delete_topic(ctx.kube, ctx.pool, dict(body))
    ctx.locks.pop(body["metadata"]["uid"], None)


# -- LogDirMove ---------------------------------------------------------------------------


async def _unless_stopped(aw: Awaitable[T], stopped: kopf.DaemonStopped | None) -> T | None:
    """``aw``'s result, or None as soon as kopf asks the timer to stop (deletion, exit)."""
    if stopped is None:
        return await aw
    if stopped:
        if asyncio.iscoroutine(aw):
            aw.close()  # never started: close it rather than leave it un-awaited
        return None

    async def stop() -> None:
        await stopped.wait()

    task = asyncio.ensure_future(aw)
    halt = asyncio.ensure_future(stop())
    try:
        await asyncio.wait({task, halt}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, halt):
            t.cancel()
        await asyncio.gather(task, halt, return_exceptions=True)
    if task.cancelled() or (halt.done() and not halt.cancelled()):
        return None
    return task.result()


async def _move(
    body: kopf.Body,
    memo: kopf.Memo,
    *,
    wait_s: float = 0.0,
    stopped: kopf.DaemonStopped | None = None,
) -> logdirmoves.MoveOutcome | None:
    """One pass over a LogDirMove; with ``wait_s``, first wait for one of its moves to end.

    The wait gives way to ``stopped``: kopf holds a deletion until its timers have exited.
    """
    ctx: Ctx = memo["ctx"]
    if body.get("metadata", {}).get("deletionTimestamp"):
        return None
    if not is_followed(LogDirMove.model_validate(body)):
        return None
    ctx.require_leader()
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    ctrl = ctx.ensure_controller(ns, body["spec"]["clusterName"])
    if wait_s > 0:
        # Outside the lock: a spec change (cancel) or deletion is not held up by the wait.
        current = await ctx.kube.get(LOG_DIR_MOVES, ns, name)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return None
        answered = await _unless_stopped(
            logdirmoves.wait_for_a_move_to_end(ctx.pool, current, wait_s), stopped
        )
        if answered is None:
            return None  # stopped
        # Nothing to wait on: pace like a plain poll.
        if not answered and await _unless_stopped(asyncio.sleep(wait_s, True), stopped) is None:
            return None
    async with ctx.lock(body):
        # The body kopf handed us may predate a pass that held the lock before us.
        current = await ctx.kube.get(LOG_DIR_MOVES, ns, name)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return None
        outcome = await logdirmoves.reconcile_log_dir_move(
            ctx.kube, ctx.pool, current, topic_lock=ctrl.lock
        )
    for type_, reason, message in outcome.events:
        kopf.event(body, type=type_, reason=reason, message=message)
    return outcome


@kopf.on.resume(GROUP, VERSION, "logdirmoves", backoff=2)
@kopf.on.create(GROUP, VERSION, "logdirmoves", backoff=2)
@kopf.on.update(GROUP, VERSION, "logdirmoves", backoff=2, field="spec")
async def move_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await _move(body, memo)


@kopf.daemon(GROUP, VERSION, "logdirmoves", backoff=2, cancellation_timeout=5)
async def move_follow(
    body: kopf.Body, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Follow a LogDirMove while it lives: wait for one of its moves to end, verify, repeat.

    Each round long-polls the brokers (at most one poll interval), so a move is verified when
    it ends rather than on the next tick; rounds are at least a quarter interval apart. A
    standby, a pass that failed, and a finished drain (its dir stays cordoned) look again after
    a poll interval. It ends when the LogDirMove is final or deleted, or kopf stops it: every
    wait gives way to ``stopped`` (kopf holds a deletion until its daemons have exited).
    """
    loop = asyncio.get_running_loop()
    while not stopped:
        started = loop.time()
        try:
            outcome = await _move(body, memo, wait_s=MOVE_INTERVAL, stopped=stopped)
        except kopf.TemporaryError:
            await stopped.wait(MOVE_INTERVAL)  # standby: the active operator follows it
            continue
        if outcome is None:
            return
        pause = MOVE_INTERVAL if not outcome.active else started + MOVE_INTERVAL / 4 - loop.time()
        if pause > 0:
            await stopped.wait(pause)


@kopf.on.delete(GROUP, VERSION, "logdirmoves", backoff=2)
async def move_deleted(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    ctx: Ctx = memo["ctx"]
    ctx.require_leader()
    async with ctx.lock(body):
        await logdirmoves.delete_log_dir_move(ctx.kube, ctx.pool, dict(body))
    ctx.locks.pop(body["metadata"]["uid"], None)
