"""LogDirMove: drive the move engines (KIP-113) and report, so nobody reaches a broker by
hand.

A pass resolves who executes the moves of the cluster it names (``handlers.executors``, a
``plan.execution.LogDirMoveExecutor``: today our brokers, ``control.our_brokers``), observes
through it (the brokers' dirs, the moves running) and the API (the cluster's other
LogDirMoves), lets ``plan.logdirmove`` decide every transition, carries the decided actions
out through the executor and writes the status once. The plan and every replica's state live
in the status, so a restarted operator resumes and never re-sends a finished move; a broker
that restarted mid-move is asked again (its engine resumes from the ``-future`` folder).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import kopf

from ..clients.kube import LOG_DIR_MOVES, KubeClient
from ..models import LogDirMove, LogDirMoveStatus
from ..models.log_dir_move import ENDED_PHASES, ENDED_REPLICA_STATES
from ..plan.execution import ActionFailed, ClusterUnusable, LogDirMoveExecutor
from ..plan.logdirmove import Action, Observed, advance, is_followed, moving_by_broker, settle
from ..plan.port_types import (
    BrokerDirs,
    CancelMoves,
    Cordon,
    RecordInTopic,
    Resend,
    SetThrottle,
    Start,
    StartResult,
)
from .context import Ctx, post_events, unless_stopped
from .executors import log_dir_moves_on

log = logging.getLogger(__name__)


@dataclass
class MoveOutcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)
    active: bool = False


async def reconcile_log_dir_move(
    kube: KubeClient, ex: LogDirMoveExecutor, body: dict[str, Any]
) -> MoveOutcome:
    """One pass: observe (through ``ex`` and the API), decide, act through ``ex``, write
    status once. An action that did not take and must not be recorded as done (a throttle
    Kafka keeps until it is lifted: :class:`ActionFailed`) stops the pass before the status
    is written; the move stays active and the next pass decides it again."""
    move = LogDirMove.model_validate(body)
    obs = await observe(kube, ex, move)
    decision = advance(obs)
    before = move.status.dump() if move.status else {}
    try:
        results = await run_actions(ex, decision.actions)
        final = settle(obs, decision, results)
        await run_actions(ex, final.actions[len(decision.actions) :])
    except ActionFailed as e:
        log.warning(
            "log dir move pass stopped: an action did not take",
            extra={"resource": move.metadata.name, "error": str(e)},
        )
        return MoveOutcome(before, [], True)
    after = final.status.dump()
    if after != before:
        assert move.metadata.namespace is not None
        await kube.write_status(
            LOG_DIR_MOVES, move.metadata.namespace, move.metadata.name, before, after
        )
    return MoveOutcome(after, list(final.events), final.active)


async def observe(kube: KubeClient, ex: LogDirMoveExecutor, move: LogDirMove) -> Observed:
    """Everything a pass decides from, read before anything is decided: the cluster through
    ``ex``, the cluster's other LogDirMoves from the API (the same for every adapter)."""
    now = time.time()
    if move.status is not None and move.status.phase in ENDED_PHASES:
        return Observed(move, now, cluster_size=None)  # nothing left to observe
    ns, cluster = move.metadata.namespace or "", move.spec.cluster_name
    try:
        count = await ex.cluster_size()
    except ClusterUnusable as why:
        return Observed(move, now, cluster_size=None, cluster_problem=(why.reason, why.message))
    if count is None:
        return Observed(move, now, cluster_size=None)
    brokers: dict[int, BrokerDirs | None] = dict(await ex.describe_dirs(list(range(count))))
    others: list[LogDirMove] = []
    if not (move.status and move.status.replicas):
        others = [
            LogDirMove.model_validate(o)
            for o in await kube.list(LOG_DIR_MOVES, ns)
            if (o.get("spec") or {}).get("clusterName") == cluster
            and o["metadata"]["name"] != move.metadata.name
        ]
    reassigning: dict[tuple[str, int], str] = {}
    if not (move.status and move.status.replicas):
        reassigning = dict(await ex.reassigning())
    moves = {}
    for b, replicas in sorted(moving_by_broker(move.status).items()):
        if brokers.get(b) is not None:
            for info in await ex.describe_moves(b, replicas):
                moves[(b, info.topic, info.partition)] = info
    return Observed(move, now, count, brokers, moves, others, reassigning)


async def run_actions(ex: LogDirMoveExecutor, actions: tuple[Action, ...]) -> list[StartResult]:
    """In order; a Start's answer is returned, the other actions are best effort."""
    results = []
    for a in actions:
        if isinstance(a, Start):
            results.append(await ex.start(a))
        elif isinstance(a, Resend):
            await ex.resend(a)
        elif isinstance(a, SetThrottle):
            await ex.set_throttle(a)
        elif isinstance(a, Cordon):
            await ex.cordon(a)
        elif isinstance(a, CancelMoves):
            await ex.cancel(a)
        elif isinstance(a, RecordInTopic):
            await ex.record_placement(a)
    return results


async def wait_for_a_move_to_end(
    ex: LogDirMoveExecutor, body: dict[str, Any], wait_s: float
) -> bool:
    """Wait until one of the LogDirMove's running moves ends (the adapter's long poll).

    True when a broker answered (a move ended, or ``wait_s`` passed); False when nothing is
    moving or no broker could be asked, so that the caller paces itself.
    """
    by_broker = moving_by_broker(LogDirMove.model_validate(body).status)
    if not by_broker:
        return False
    return await ex.wait_for_a_move_to_end(by_broker, wait_s)


async def delete_log_dir_move(ex: LogDirMoveExecutor, body: dict[str, Any]) -> None:
    """Deleting a LogDirMove cancels what still runs and lifts its throttle and cordon."""
    move = LogDirMove.model_validate(body)
    status = move.status or LogDirMoveStatus()
    if status.phase not in ENDED_PHASES:
        running = tuple(
            (e.broker_id, e.topic, e.partition)
            for e in status.replicas or []
            if e.state not in ENDED_REPLICA_STATES
        )
        await ex.cancel(CancelMoves(running))
        if move.spec.throttle_bytes_per_second:
            brokers = tuple(sorted({e.broker_id for e in status.replicas or []}))
            await ex.set_throttle(SetThrottle(brokers, 0))
    if move.spec.drain is not None:
        await ex.cordon(Cordon(move.spec.drain, False))


# -- kopf's side ------------------------------------------------------------------------------


async def run_pass(
    ctx: Ctx,
    body: kopf.Body,
    *,
    wait_s: float = 0.0,
    stopped: kopf.DaemonStopped | None = None,
) -> MoveOutcome | None:
    """One pass over a LogDirMove; with ``wait_s``, first wait for one of its moves to end.

    None when there is nothing to follow (deleted, final) or kopf asked to stop; the wait gives
    way to ``stopped`` (kopf holds a deletion until its daemons have exited).
    """
    if body.get("metadata", {}).get("deletionTimestamp"):
        return None
    if not is_followed(LogDirMove.model_validate(body)):
        return None
    ctx.require_leader()
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    ex = await log_dir_moves_on(ctx, ns, body["spec"]["clusterName"])
    if wait_s > 0 and not await _wait_for_news(ctx, ex, ns, name, wait_s, stopped):
        return None
    async with ctx.lock(body):
        # The body kopf handed us may predate a pass that held the lock before us.
        current = await ctx.kube.get(LOG_DIR_MOVES, ns, name)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return None
        outcome = await reconcile_log_dir_move(ctx.kube, ex, current)
    post_events(body, outcome.events)
    return outcome


async def _wait_for_news(
    ctx: Ctx,
    ex: LogDirMoveExecutor,
    ns: str,
    name: str,
    wait_s: float,
    stopped: kopf.DaemonStopped | None,
) -> bool:
    """Wait (outside the lock, so a cancel or a deletion is not held up) until one of the
    moves ends, or ``wait_s`` when nothing is moving. False: gone, or stopped."""
    current = await ctx.kube.get(LOG_DIR_MOVES, ns, name)
    if current is None or current["metadata"].get("deletionTimestamp"):
        return False
    answered = await unless_stopped(wait_for_a_move_to_end(ex, current, wait_s), stopped)
    if answered is None:
        return False
    # Nothing to wait on: pace like a plain poll.
    return answered or await unless_stopped(asyncio.sleep(wait_s, True), stopped) is not None


async def follow(ctx: Ctx, body: kopf.Body, stopped: kopf.DaemonStopped, interval: float) -> None:
    """Follow a LogDirMove while it lives: wait for one of its moves to end, verify, repeat.

    Each round long-polls the brokers (at most one ``interval``), so a move is verified when it
    ends rather than on the next tick; rounds are at least a quarter interval apart. A standby,
    and a finished drain (its dir stays cordoned), look again after an interval. It returns
    when the LogDirMove is final or deleted, or kopf stops it.
    """
    loop = asyncio.get_running_loop()
    while not stopped:
        started = loop.time()
        try:
            outcome = await run_pass(ctx, body, wait_s=interval, stopped=stopped)
        except kopf.TemporaryError:
            await stopped.wait(interval)  # standby: the active operator follows it
            continue
        if outcome is None:
            return
        pause = interval if not outcome.active else started + interval / 4 - loop.time()
        if pause > 0:
            await stopped.wait(pause)


async def on_move_deleted(ctx: Ctx, body: kopf.Body) -> None:
    ctx.require_leader()
    async with ctx.lock(body):
        ns, cluster = body["metadata"]["namespace"], body["spec"]["clusterName"]
        try:
            await delete_log_dir_move(await log_dir_moves_on(ctx, ns, cluster), dict(body))
        except ActionFailed as e:
            # The finalizer holds until the throttle is lifted: tried again shortly.
            raise kopf.TemporaryError(str(e), delay=1) from None
    ctx.forget(body)
