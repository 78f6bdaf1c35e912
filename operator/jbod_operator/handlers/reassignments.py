"""PartitionReassignment: move replicas across brokers in KIP-435 batches, the operator acting
as Kafka's controller.

A pass observes (the BrokerCluster, every broker's describe-log-dirs, the cluster's Topics,
LogDirMoves and other PartitionReassignments), lets ``plan.reassignment`` decide every
transition, carries out the actions in order and writes the status once. The partition state
of record is each Topic's status, written first and under the cluster controller's lock (the
one writer of leader and ISR), so a pass never interleaves with an election or an
AlterPartition, and an operator killed anywhere resumes from what was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from jbod_broker import wire
from jbod_broker.errors import KafkaError, StaleControllerEpochError

from ..clients.brokers import BrokerPool
from ..clients.kube import (
    BROKER_CLUSTERS,
    LOG_DIR_MOVES,
    REASSIGNMENTS,
    TOPICS,
    ApiError,
    KubeClient,
)
from ..control.cluster_controller import ClusterController
from ..models import (
    BrokerCluster,
    LogDirMove,
    PartitionReassignment,
    kafka_topic_name,
    topic_id_of,
)
from ..models.log_dir_move import FINAL_REPLICA_STATES, ReplicaState
from ..models.reassignment import ENDED_PHASES
from ..plan import partition_state, topic_spec
from ..plan.logdirmove import BrokerDirs, broker_dirs
from ..plan.reassignment import (
    TP,
    Action,
    Decision,
    Delete,
    Observed,
    PartView,
    PreferDir,
    Tell,
    Throttle,
    TopicView,
    WritePartition,
    advance,
)
from . import failpoints
from .context import Ctx, post_events, unless_stopped

log = logging.getLogger(__name__)


class TopicWriteConflict(Exception):
    """A Topic's status changed since this pass read it: nothing more is done in this pass."""


@dataclass
class Outcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)
    active: bool = False
    progressed: bool = False
    """The pass wrote a partition's state of record (a step started, shrunk or ended)."""


async def reconcile_reassignment(
    kube: KubeClient, pool: BrokerPool, ctrl: ClusterController, body: Mapping[str, Any]
) -> Outcome:
    """One pass: observe, decide, act, write status once."""
    pr = PartitionReassignment.model_validate(body)
    ns = pr.metadata.namespace or "default"
    if pr.status is not None and pr.status.phase in ENDED_PHASES and not pr.spec.rollback:
        return Outcome(pr.status.dump())
    bc_raw = await kube.get(BROKER_CLUSTERS, ns, pr.spec.cluster_name)
    bc = BrokerCluster.model_validate(bc_raw) if bc_raw is not None else None
    describes: dict[int, wire.DescribeLogDirsResponse | None] = {}
    if bc is not None:
        describes = await pool.describe(ns, bc.metadata.name, list(range(bc.broker_count)))
    async with ctrl.lock:
        obs, raw_topics = await observe(kube, ctrl, pr, bc, describes)
        decision = advance(obs)
        try:
            await _Acts(kube, pool, ctrl, pr, raw_topics).run(decision.actions)
        except TopicWriteConflict:
            return Outcome(pr.status.dump() if pr.status else {}, [], True)
    await _write_status(kube, pr, decision)
    return Outcome(
        decision.status.dump(),
        list(decision.events),
        decision.active,
        progressed=any(isinstance(a, WritePartition) for a in decision.actions),
    )


async def observe(
    kube: KubeClient,
    ctrl: ClusterController,
    pr: PartitionReassignment,
    bc: BrokerCluster | None,
    describes: Mapping[int, wire.DescribeLogDirsResponse | None],
) -> tuple[Observed, dict[str, dict[str, Any]]]:
    """Everything a pass decides from; Topics read fresh under the controller's lock."""
    now = time.time()
    if bc is None:
        return Observed(pr, now, cluster_size=None), {}
    ns, cluster, me = pr.metadata.namespace or "default", bc.metadata.name, pr.metadata.name
    wanted = {t.topic for t in pr.spec.partitions}
    raw: dict[str, dict[str, Any]] = {}
    topics: dict[str, TopicView] = {}
    busy: dict[int, int] = defaultdict(int)
    claims: dict[TP, str] = {}
    for t in await kube.list(TOPICS, ns):
        if (t.get("spec") or {}).get("clusterName") != cluster:
            continue
        name = kafka_topic_name(t)
        parts = {}
        for s in (t.get("status") or {}).get("partitions") or []:
            pv = PartView.from_status(name, s)
            parts[pv.partition] = pv
            if pv.reassigned_by and pv.reassigned_by != me:
                claims[pv.key] = f"PartitionReassignment {pv.reassigned_by}"
                for b in {*pv.adding, *pv.removing}:
                    busy[b] += 1
        if name in wanted:
            raw[name] = t
            topics[name] = TopicView(
                resource=t["metadata"]["name"],
                name=name,
                min_isr=topic_spec.min_insync_replicas(topic_spec.configs_in_force(t)),
                partitions=parts,
                deleting=bool(t["metadata"].get("deletionTimestamp")),
            )
    for m in await kube.list(LOG_DIR_MOVES, ns):
        if (m.get("spec") or {}).get("clusterName") != cluster:
            continue
        move = LogDirMove.model_validate(m)
        for r in (move.status.replicas if move.status else None) or []:
            if r.state in FINAL_REPLICA_STATES:
                continue
            if r.state == ReplicaState.MOVING:
                busy[r.broker_id] += 1
            claims.setdefault((r.topic, r.partition), f"LogDirMove {move.metadata.name}")
    if pr.status is None or pr.status.phase is None:
        for o in await kube.list(REASSIGNMENTS, ns):
            other = PartitionReassignment.model_validate(o)
            if (
                other.spec.cluster_name != cluster
                or other.metadata.name == me
                or other.status is None
                or other.status.phase is None
                or other.status.phase in ENDED_PHASES
            ):
                continue
            for target in other.spec.partitions:
                claims.setdefault(
                    (target.topic, target.partition),
                    f"PartitionReassignment {other.metadata.name}",
                )
    brokers: dict[int, BrokerDirs | None] = {
        b: broker_dirs(b, d) if d is not None else None for b, d in describes.items()
    }
    obs = Observed(
        pr,
        now,
        cluster_size=bc.spec.replicas,
        live=frozenset(ctrl.live()),
        topics=topics,
        brokers=brokers,
        busy=dict(busy),
        claims=claims,
        cluster_dirs=tuple(d.name for d in bc.spec.log_dirs),
        liveness_known=ctrl.liveness_known(),
    )
    return obs, raw


class _Acts:
    """Carries out a decision's actions in order: Topic statuses first, then brokers."""

    def __init__(
        self,
        kube: KubeClient,
        pool: BrokerPool,
        ctrl: ClusterController,
        pr: PartitionReassignment,
        raw_topics: dict[str, dict[str, Any]],
    ) -> None:
        self.kube = kube
        self.pool = pool
        self.ctrl = ctrl
        self.ns = pr.metadata.namespace or "default"
        self.cluster = pr.spec.cluster_name
        self.raw = raw_topics

    async def run(self, actions: Iterable[Action]) -> None:
        actions = list(actions)
        writes = [a for a in actions if isinstance(a, WritePartition)]
        await self._write(writes)
        if any(w.view.adding for w in writes):
            failpoints.hit("reassignment-step-written")
        if any(not w.view.adding and w.view.removing for w in writes):
            failpoints.hit("reassignment-shrink-written")
        prefer: dict[int, list[tuple[str, int, str]]] = defaultdict(list)
        for a in actions:
            if isinstance(a, PreferDir):
                prefer[a.broker].append((a.topic, a.partition, a.log_dir))
        for b, moves in sorted(prefer.items()):
            await self._broker(
                b, "alter_replica_log_dirs", lambda c, m=moves: c.alter_replica_log_dirs(m)
            )
        await self._tell([a for a in actions if isinstance(a, Tell)])
        if any(w.view.adding for w in writes):
            failpoints.hit("reassignment-step-told")
        await self._delete([a for a in actions if isinstance(a, Delete)])
        for a in actions:
            if isinstance(a, Throttle):
                await self._throttle(a)
        if any(isinstance(a, WritePartition) for a in actions):
            await self._update_metadata()

    async def _write(self, writes: list[WritePartition]) -> None:
        """Each Topic's status once, with the resourceVersion read (409: stop this pass)."""
        by_topic: dict[str, list[PartView]] = defaultdict(list)
        for w in writes:
            by_topic[w.view.topic].append(w.view)
        for name, views in sorted(by_topic.items()):
            t = self.raw[name]
            changed = {v.partition: v for v in views}
            t["status"]["partitions"] = [
                changed[s["partition"]].to_status(s) if s["partition"] in changed else s
                for s in t["status"]["partitions"]
            ]
            try:
                out = await self.kube.replace_status(TOPICS, self.ns, t)
            except ApiError as e:
                if e.status == 409:
                    raise TopicWriteConflict(name) from e
                raise
            if isinstance(out, dict):
                self.raw[name] = out

    def _entry(self, topic: str, partition: int) -> dict[str, Any]:
        t = self.raw[topic]
        return next(s for s in t["status"]["partitions"] if s["partition"] == partition)

    async def _tell(self, tells: list[Tell]) -> None:
        per_broker: dict[int, list[wire.LeaderAndIsrPartition]] = defaultdict(list)
        for a in tells:
            # The configs in force, never the spec's (issue 14): see plan.topic_spec.
            configs = topic_spec.configs_in_force(self.raw[a.topic])
            s = self._entry(a.topic, a.partition)
            for b in sorted(a.brokers):
                per_broker[b].append(
                    partition_state.leader_and_isr(
                        a.topic,
                        s,
                        is_new=b in a.new,
                        min_isr=topic_spec.min_insync_replicas(configs),
                        configs=configs,
                        topic_id=topic_id_of(self.raw[a.topic]),
                    )
                )
        live = sorted(self.ctrl.live())
        endpoints = self.pool.endpoints(self.ns, self.cluster, live)
        for b, states in sorted(per_broker.items()):
            req = wire.LeaderAndIsrRequest(
                controller_id=0,
                controller_epoch=self.pool.controller_epoch,
                partitions=states,
                live_leaders=endpoints,
            )
            await self._broker(b, "leader_and_isr", lambda c, r=req: c.leader_and_isr(r))

    async def _delete(self, deletes: list[Delete]) -> None:
        per_broker: dict[int, list[wire.StopReplicaPartition]] = defaultdict(list)
        for a in deletes:
            s = self._entry(a.topic, a.partition)
            per_broker[a.broker].append(
                wire.StopReplicaPartition(
                    topic=a.topic,
                    partition=a.partition,
                    delete=True,
                    leader_epoch=int(s["leaderEpoch"]),
                )
            )
        for b, parts in sorted(per_broker.items()):
            req = wire.StopReplicaRequest(
                controller_id=0, controller_epoch=self.pool.controller_epoch, partitions=parts
            )
            await self._broker(b, "stop_replica", lambda c, r=req: c.stop_replica(r))

    async def _throttle(self, a: Throttle) -> None:
        cfg = wire.ThrottleConfig(
            leader_replication_throttled_rate=a.rate,
            follower_replication_throttled_rate=a.rate,
            leader_replication_throttled_replicas=[
                wire.ReplicaRef(topic=t, partition=p) for t, p in sorted(a.leader_replicas)
            ],
            follower_replication_throttled_replicas=[
                wire.ReplicaRef(topic=t, partition=p) for t, p in sorted(a.follower_replicas)
            ],
        )
        await self._broker(a.broker, "set_configs", lambda c: c.set_configs(cfg))

    async def _update_metadata(self) -> None:
        live = sorted(self.ctrl.live())
        req = wire.UpdateMetadataRequest(
            controller_id=0,
            controller_epoch=self.pool.controller_epoch,
            live_brokers=self.pool.endpoints(self.ns, self.cluster, live),
            partitions=[
                partition_state.metadata(name, s, topic_id=topic_id_of(t))
                for name, t in sorted(self.raw.items())
                for s in (t.get("status") or {}).get("partitions") or []
            ],
        )
        for b in live:
            await self._broker(b, "update_metadata", lambda c: c.update_metadata(req))

    async def _broker(self, b: int, what: str, call: Any) -> Any:
        """One request to broker ``b``; a broker that is down or refuses is retried by a later
        pass (every request here is idempotent). A newer controller stops us."""
        try:
            client = await self.pool.client(self.ns, self.cluster, b)
            return await call(client)
        except StaleControllerEpochError:
            raise
        except KafkaError as e:
            log.warning(
                "broker request failed",
                extra={"event": f"{what}_failed", "broker": b, "error": str(e)},
            )
            return None


async def _write_status(kube: KubeClient, pr: PartitionReassignment, d: Decision) -> None:
    """The status once, only when it changed."""
    before = pr.status.dump() if pr.status else {}
    await kube.write_status(
        REASSIGNMENTS, pr.metadata.namespace, pr.metadata.name, before, d.status.dump()
    )


# -- kopf's side ------------------------------------------------------------------------------


async def run_pass(ctx: Ctx, body: kopf.Body | Mapping[str, Any]) -> Outcome | None:
    """A pass on the freshly read object (the body an event carried may be stale)."""
    ctx.require_leader()
    meta = body["metadata"]
    ns = meta["namespace"]
    async with ctx.lock(body):
        fresh = await ctx.kube.get(REASSIGNMENTS, ns, meta["name"])
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            return None
        ctrl = ctx.ensure_controller(ns, fresh["spec"]["clusterName"])
        out = await reconcile_reassignment(ctx.kube, ctx.pool, ctrl, fresh)
    post_events(body, out.events)
    return out


MAX_PASSES_AT_ONCE = 10
"""Passes in a row without a pause while each one moves a partition on; a bound in case a
transition ever repeated itself, so a bug could not spin the operator."""


async def follow(ctx: Ctx, body: kopf.Body, stopped: kopf.DaemonStopped, interval: float) -> None:
    """Follow one PartitionReassignment while it is active.

    A pass that moved a partition on (a step started, shrunk or ended) is followed by another
    at once: the next transition (the next batch once a shrink ended a step, a deletion seen
    done) does not wait for anything, and waiting an interval for each of them made an RF 1
    move spend 2.2 s after its new replica was in sync (bench/reassignment.py). Otherwise the
    next pass comes after ``interval`` or as soon as the cluster's controller records an ISR
    change, whichever is first: a new replica joining the ISR is what a step waits for.
    """
    at_once = 0
    while not stopped:
        out: Outcome | None = None
        isr_changed = _isr_signal(ctx, body)  # taken before the pass: a change during it counts
        if ctx.elector.is_leader:
            try:
                out = await run_pass(ctx, body)
            except kopf.TemporaryError:
                out = None
            except StaleControllerEpochError:
                await ctx.elector.step_down()
            except Exception:
                log.exception("reassignment pass failed", extra={"name": body["metadata"]["name"]})
        if out is not None and not out.active:
            at_once = 0
            await unless_stopped(_wait_for_change(ctx, body, interval), stopped)
            continue
        if out is not None and out.progressed and at_once < MAX_PASSES_AT_ONCE:
            at_once += 1
            continue
        at_once = 0
        await unless_stopped(_next_look(isr_changed, interval), stopped)


def _isr_signal(ctx: Ctx, body: kopf.Body) -> asyncio.Event | None:
    ctrl = ctx.controller_for(body["metadata"]["namespace"], body["spec"]["clusterName"])
    return ctrl.isr_changed if ctrl is not None else None


async def _next_look(isr_changed: asyncio.Event | None, interval: float) -> None:
    """``interval``, or less when the ISR of a partition of the cluster changed."""
    if isr_changed is None:
        await asyncio.sleep(interval)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(isr_changed.wait(), interval)


async def _wait_for_change(ctx: Ctx, body: kopf.Body, interval: float) -> None:
    """An ended reassignment is looked at again only when its spec asks for a rollback."""
    while True:
        await asyncio.sleep(max(interval, 1.0))
        fresh = await ctx.kube.get(
            REASSIGNMENTS, body["metadata"]["namespace"], body["metadata"]["name"]
        )
        if fresh is None or (fresh.get("spec") or {}).get("rollback"):
            return


async def on_deleted(ctx: Ctx, body: kopf.Body) -> None:
    """Deletion is a cancel that must end before the finalizer goes: steps whose new replicas
    are not in sync are undone and deleted, finished ones kept, every claim on a partition
    released and the throttles lifted. Retried (the finalizer holds) until nothing is in
    flight."""
    ctx.require_leader()
    meta = body["metadata"]
    async with ctx.lock(body):
        fresh = await ctx.kube.get(REASSIGNMENTS, meta["namespace"], meta["name"])
        if fresh is not None:
            pr = PartitionReassignment.model_validate(fresh)
            if pr.status is not None and pr.status.phase is not None:
                ctrl = ctx.ensure_controller(meta["namespace"], pr.spec.cluster_name)
                cancel = {**fresh, "spec": {**fresh["spec"], "cancel": True, "rollback": False}}
                out = await reconcile_reassignment(ctx.kube, ctx.pool, ctrl, cancel)
                post_events(body, out.events)
                if out.active:
                    raise kopf.TemporaryError("undoing the steps in flight", delay=1)
    ctx.forget(body)
