"""LogDirMove: drive the brokers' move engines (KIP-113) and report, so nobody reaches a
broker by hand.

A pass observes (the BrokerCluster, describe-log-dirs, describe-replica-log-dirs), lets
``plan.logdirmove`` decide every transition, carries out the decided actions and writes the
status once. The plan and every replica's state live in the status, so a restarted operator
resumes and never re-sends a finished move; a broker that restarted mid-move is asked again
(its engine resumes from the ``-future`` folder).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import kopf

from jbod_broker import wire
from jbod_broker.client import BrokerUnavailableError
from jbod_broker.errors import KafkaError, ReplicaNotAvailableError, error_by_name

from ..clients.brokers import BrokerPool
from ..clients.kube import BROKER_CLUSTERS, LOG_DIR_MOVES, TOPICS, ApiError, KubeClient
from ..models import LogDirMove, LogDirMoveStatus, kafka_topic_name
from ..models.log_dir_move import FINAL_PHASES, FINAL_REPLICA_STATES, Drain
from ..plan.logdirmove import (
    Action,
    BrokerDirs,
    CancelMoves,
    Cordon,
    Observed,
    RecordInTopic,
    ReplicaKey,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
    advance,
    broker_dirs,
    is_followed,
    moving_by_broker,
    settle,
)
from .context import Ctx, post_events, unless_stopped

log = logging.getLogger(__name__)


@dataclass
class MoveOutcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)
    active: bool = False


async def reconcile_log_dir_move(
    kube: KubeClient,
    pool: BrokerPool,
    body: dict[str, Any],
    *,
    topic_lock: asyncio.Lock | None = None,
) -> MoveOutcome:
    """One pass: observe, decide, act, write status once."""
    move = LogDirMove.model_validate(body)
    obs = await observe(kube, pool, move)
    decision = advance(obs)
    acts = _Acts(kube, pool, move, topic_lock)
    results = await acts.run(decision.actions)
    final = settle(obs, decision, results)
    await acts.run(final.actions[len(decision.actions) :])
    before = move.status.dump() if move.status else {}
    after = final.status.dump()
    if after != before:
        assert move.metadata.namespace is not None
        await kube.write_status(
            LOG_DIR_MOVES, move.metadata.namespace, move.metadata.name, before, after
        )
    return MoveOutcome(after, list(final.events), final.active)


async def observe(kube: KubeClient, pool: BrokerPool, move: LogDirMove) -> Observed:
    """Everything a pass decides from, read before anything is decided."""
    now = time.time()
    if move.status is not None and move.status.phase in FINAL_PHASES:
        return Observed(move, now, cluster_size=None)  # nothing left to observe
    ns, cluster = move.metadata.namespace or "", move.spec.cluster_name
    bc = await kube.get(BROKER_CLUSTERS, ns, cluster)
    if bc is None:
        return Observed(move, now, cluster_size=None)
    count = int(bc["spec"]["replicas"])
    describes = await pool.describe(ns, cluster, list(range(count)))
    brokers: dict[int, BrokerDirs | None] = {
        b: broker_dirs(b, d) if d is not None else None for b, d in describes.items()
    }
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
        for t in await kube.list(TOPICS, ns):
            if (t.get("spec") or {}).get("clusterName") != cluster:
                continue
            for s in (t.get("status") or {}).get("partitions") or []:
                if s.get("reassignedBy"):
                    reassigning[(kafka_topic_name(t), s["partition"])] = s["reassignedBy"]
    moves: dict[ReplicaKey, wire.ReplicaLogDirInfo] = {}
    for b, replicas in sorted(moving_by_broker(move.status).items()):
        if brokers.get(b) is not None:
            for info in await _describe_moves(pool, ns, cluster, b, replicas):
                moves[(b, info.topic, info.partition)] = info
    return Observed(move, now, count, brokers, moves, others, reassigning)


async def _describe_moves(
    pool: BrokerPool, ns: str, cluster: str, b: int, replicas: list[tuple[str, int]]
) -> list[wire.ReplicaLogDirInfo]:
    try:
        client = await pool.client(ns, cluster, b)
        return (await client.describe_replica_log_dirs(replicas)).partitions
    except KafkaError:
        return []


class _Acts:
    """Carries out a Decision's actions against the brokers and the Topic statuses."""

    def __init__(
        self, kube: KubeClient, pool: BrokerPool, move: LogDirMove, lock: asyncio.Lock | None
    ) -> None:
        self.kube, self.pool, self.move, self.lock = kube, pool, move, lock
        self.ns = move.metadata.namespace or ""
        self.cluster = move.spec.cluster_name

    async def run(self, actions: tuple[Action, ...]) -> list[StartResult]:
        """In order; a Start's answer is returned, the other actions are best effort."""
        results = []
        for a in actions:
            if isinstance(a, Start):
                results.append(await self.start(a))
            elif isinstance(a, Resend):
                await self.alter(a.replica, a.target)
            elif isinstance(a, SetThrottle):
                await throttle(self.pool, self.ns, self.cluster, a.brokers, a.rate)
            elif isinstance(a, Cordon):
                await cordon(self.pool, self.ns, self.cluster, a.drain, a.on)
            elif isinstance(a, CancelMoves):
                await cancel_moves(self.pool, self.ns, self.cluster, a.replicas)
            elif isinstance(a, RecordInTopic):
                await record_in_topic(self.kube, self.ns, self.cluster, a, self.lock)
        return results

    async def alter(self, replica: ReplicaKey, target: str) -> None:
        b, topic, partition = replica
        client = await self.pool.client(self.ns, self.cluster, b)
        resp = await client.alter_replica_log_dirs([(topic, partition, target)])
        r = resp.partitions[0]
        if r.error:
            raise error_by_name(r.error, r.message or r.error)

    async def start(self, a: Start) -> StartResult:
        try:
            await self.alter(a.replica, a.target)
        except BrokerUnavailableError:
            return StartResult(a.replica, StartAnswer.BROKER_AWAY)
        except ReplicaNotAvailableError:
            return StartResult(a.replica, StartAnswer.NOT_THERE_YET)
        except KafkaError as err:
            return StartResult(a.replica, StartAnswer.REFUSED, str(err))
        return StartResult(a.replica, StartAnswer.ACCEPTED)


async def wait_for_a_move_to_end(pool: BrokerPool, body: dict[str, Any], wait_s: float) -> bool:
    """Long-poll the brokers with moves running until one of the moves ends.

    True when a broker answered (a move ended, or ``wait_s`` passed); False when nothing is
    moving or no broker could be asked, so that the caller paces itself.

    The operator then verifies a finished move when it finishes, not on its next poll, which
    is most of what it would otherwise add to a short move.
    """
    move = LogDirMove.model_validate(body)
    ns, cluster = move.metadata.namespace or "", move.spec.cluster_name
    by_broker = moving_by_broker(move.status)
    if not by_broker:
        return False

    async def poll(b: int, replicas: list[tuple[str, int]]) -> None:
        client = await pool.client(ns, cluster, b)
        await client.describe_replica_log_dirs(replicas, wait_ms=int(wait_s * 1000))

    tasks = [asyncio.create_task(poll(b, r)) for b, r in sorted(by_broker.items())]
    return await _first_answer(tasks, wait_s + 5)


async def _first_answer(tasks: list[asyncio.Task[None]], timeout_s: float) -> bool:
    """Whether one of ``tasks`` succeeded before ``timeout_s``; one that fails does not
    count. Every task is cancelled and awaited before this returns."""
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[None]] = set(tasks)
    answered = False
    deadline = loop.time() + timeout_s
    try:
        while pending and not answered:
            timeout = deadline - loop.time()
            if timeout <= 0:
                break
            done, pending = await asyncio.wait(
                pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            answered = any(not t.cancelled() and t.exception() is None for t in done)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return answered


async def cancel_moves(
    pool: BrokerPool, ns: str, cluster: str, replicas: tuple[ReplicaKey, ...]
) -> None:
    """Destination "any": the broker stops the copy and removes the future folder."""
    for b, topic, partition in replicas:
        try:
            client = await pool.client(ns, cluster, b)
            await client.alter_replica_log_dirs([(topic, partition, wire.ANY_LOG_DIR)])
        except KafkaError as err:
            log.warning("cancel not delivered", extra={"broker": b, "error": str(err)})


async def throttle(
    pool: BrokerPool, ns: str, cluster: str, brokers: tuple[int, ...], rate: int
) -> None:
    for b in brokers:
        try:
            client = await pool.client(ns, cluster, b)
            await client.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=rate))
        except KafkaError:
            continue


async def cordon(pool: BrokerPool, ns: str, cluster: str, drain: Drain, on: bool) -> None:
    b = drain.broker_id
    try:
        client = await pool.client(ns, cluster, b)
        d = broker_dirs(b, await client.describe_log_dirs()).find(drain.log_dir)
        if d is not None and d.cordoned != on:
            await client.cordon_log_dir(d.path, on)
    except KafkaError:
        return


async def record_in_topic(
    kube: KubeClient, ns: str, cluster: str, a: RecordInTopic, lock: asyncio.Lock | None
) -> None:
    """The Topic's status says where each replica lives: keep it true after a move."""
    broker, topic, partition = a.replica
    async with lock or asyncio.Lock():
        for _ in range(5):
            t = next(
                (
                    t
                    for t in await kube.list(TOPICS, ns)
                    if (t.get("spec") or {}).get("clusterName") == cluster
                    and kafka_topic_name(t) == topic
                ),
                None,
            )
            if t is None:
                return
            for p in (t.get("status") or {}).get("partitions") or []:
                if p["partition"] == partition:
                    for r in p["replicas"]:
                        if r["brokerId"] == broker:
                            r["logDir"] = a.path
            try:
                await kube.replace_status(TOPICS, ns, t)
                return
            except ApiError as e:
                if e.status != 409:
                    raise


async def delete_log_dir_move(kube: KubeClient, pool: BrokerPool, body: dict[str, Any]) -> None:
    """Deleting a LogDirMove cancels what still runs and lifts its throttle and cordon."""
    move = LogDirMove.model_validate(body)
    ns, cluster = move.metadata.namespace or "", move.spec.cluster_name
    status = move.status or LogDirMoveStatus()
    if status.phase not in FINAL_PHASES:
        running = tuple(
            (e.broker_id, e.topic, e.partition)
            for e in status.replicas or []
            if e.state not in FINAL_REPLICA_STATES
        )
        await cancel_moves(pool, ns, cluster, running)
        if move.spec.throttle_bytes_per_second:
            brokers = tuple(sorted({e.broker_id for e in status.replicas or []}))
            await throttle(pool, ns, cluster, brokers, 0)
    if move.spec.drain is not None:
        await cordon(pool, ns, cluster, move.spec.drain, False)


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
    ctrl = ctx.ensure_controller(ns, body["spec"]["clusterName"])
    if wait_s > 0 and not await _wait_for_news(ctx, ns, name, wait_s, stopped):
        return None
    async with ctx.lock(body):
        # The body kopf handed us may predate a pass that held the lock before us.
        current = await ctx.kube.get(LOG_DIR_MOVES, ns, name)
        if current is None or current["metadata"].get("deletionTimestamp"):
            return None
        outcome = await reconcile_log_dir_move(ctx.kube, ctx.pool, current, topic_lock=ctrl.lock)
    post_events(body, outcome.events)
    return outcome


async def _wait_for_news(
    ctx: Ctx, ns: str, name: str, wait_s: float, stopped: kopf.DaemonStopped | None
) -> bool:
    """Wait (outside the lock, so a cancel or a deletion is not held up) until one of the
    moves ends, or ``wait_s`` when nothing is moving. False: gone, or stopped."""
    current = await ctx.kube.get(LOG_DIR_MOVES, ns, name)
    if current is None or current["metadata"].get("deletionTimestamp"):
        return False
    answered = await unless_stopped(wait_for_a_move_to_end(ctx.pool, current, wait_s), stopped)
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
        await delete_log_dir_move(ctx.kube, ctx.pool, dict(body))
    ctx.forget(body)
