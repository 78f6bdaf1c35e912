"""PartitionReassignment: move replicas across brokers in KIP-435 batches.

A pass resolves who executes the steps on the cluster it names (``handlers.executors``, a
``plan.execution.ReassignmentExecutor``: today our brokers, of which the operator is the
controller, ``control.our_brokers``), observes through it (the cluster, each broker's dirs,
the partition state of record) and the API (the cluster's LogDirMoves and other
PartitionReassignments), lets ``plan.reassignment`` decide every transition, carries the
actions out through the executor in order and writes the status once. On our brokers the
partition state of record is each Topic's status, written first and under the cluster
controller's lock (the one writer of leader and ISR), so a pass never interleaves with an
election or an AlterPartition, and an operator killed anywhere resumes from what was written.
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

from jbod_broker.errors import StaleControllerEpochError

from ..clients.kube import LOG_DIR_MOVES, REASSIGNMENTS, KubeClient
from ..models import LogDirMove, PartitionReassignment
from ..models.log_dir_move import ENDED_REPLICA_STATES, ReplicaState
from ..models.reassignment import ENDED_PHASES, PartitionReassignmentStatus
from ..plan.execution import ActionFailed, ClusterUnusable, ReassignmentExecutor, RecordChanged
from ..plan.port_types import (
    TP,
    ClusterSeen,
    Delete,
    PreferDir,
    RecordDirs,
    Tell,
    Throttle,
    TopicView,
    WritePartition,
)
from ..plan.reassignment import (
    Action,
    Decision,
    Observed,
    advance,
    recorded_first,
)
from ..plan.reassignment_throttles import throttles_to_lift
from . import failpoints
from .context import Ctx, post_events, unless_stopped
from .executors import reassignments_on

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)
    active: bool = False
    progressed: bool = False
    """The pass wrote a partition's state of record (a step started, shrunk or ended)."""


async def reconcile_reassignment(
    kube: KubeClient, ex: ReassignmentExecutor, body: Mapping[str, Any]
) -> Outcome:
    """One pass: observe (through ``ex`` and the API), decide, act through ``ex``, write
    status once (and the acceptance before the acts, when this pass accepts the resource
    and starts its first steps: ``plan.reassignment.recorded_first``)."""
    pr = PartitionReassignment.model_validate(body)
    if (
        pr.status is not None
        and pr.status.phase in ENDED_PHASES
        and not pr.spec.rollback
        and not throttles_to_lift(pr.status)
    ):
        return Outcome(pr.status.dump())
    problem: ClusterUnusable | None = None
    try:
        seen = await ex.cluster()
    except ClusterUnusable as why:
        seen, problem = None, why
    async with ex.serialized():
        obs = await observe(kube, ex, pr, seen, problem)
        decision = advance(obs)
        first = recorded_first(pr.status, decision)
        if first is not None:
            pr = await _record_first(kube, pr, first)
        try:
            await run_actions(ex, decision.actions)
        except (RecordChanged, ActionFailed) as e:
            # The pass stops unrecorded; the next one decides again from what is there.
            if isinstance(e, ActionFailed):
                log.warning(
                    "reassignment pass stopped: an action did not take",
                    extra={"resource": pr.metadata.name, "error": str(e)},
                )
            return Outcome(pr.status.dump() if pr.status else {}, [], True)
    await _write_status(kube, pr, decision)
    if any(isinstance(a, WritePartition) and a.view.adding for a in decision.actions):
        failpoints.hit("reassignment-step-recorded")
    return Outcome(
        decision.status.dump(),
        list(decision.events),
        decision.active,
        progressed=any(isinstance(a, WritePartition) for a in decision.actions),
    )


async def observe(
    kube: KubeClient,
    ex: ReassignmentExecutor,
    pr: PartitionReassignment,
    seen: ClusterSeen | None,
    problem: ClusterUnusable | None = None,
) -> Observed:
    """Everything a pass decides from: the partitions as recorded, read fresh through ``ex``
    under its lock, and the claims of the cluster's LogDirMoves and other
    PartitionReassignments, read from the API (the same for every adapter)."""
    now = time.time()
    if seen is None:
        why = None if problem is None else (problem.reason, problem.message)
        return Observed(pr, now, cluster_size=None, cluster_problem=why)
    ns, cluster, me = pr.metadata.namespace or "default", pr.spec.cluster_name, pr.metadata.name
    parts = await ex.partitions(pr)
    busy: dict[int, int] = defaultdict(int, parts.busy)
    claims: dict[TP, str] = dict(parts.claims)
    await _claims_of_moves(kube, ns, cluster, busy, claims)
    if pr.status is None or pr.status.phase is None:
        await _claims_of_reassignments(kube, ns, cluster, me, claims)
    live, liveness_known = await ex.liveness()
    throttles = await ex.throttles(sorted(_brokers_of(pr, parts.topics) & live))
    return Observed(
        pr,
        now,
        cluster_size=seen.size,
        broker_ids=seen.broker_ids,
        live=live,
        topics=parts.topics,
        brokers=seen.brokers,
        busy=dict(busy),
        claims=claims,
        cluster_dirs=seen.dir_names,
        others_in_flight=parts.others_in_flight,
        throttles=throttles,
        liveness_known=liveness_known,
    )


async def _claims_of_moves(
    kube: KubeClient, ns: str, cluster: str, busy: dict[int, int], claims: dict[TP, str]
) -> None:
    """The cluster's LogDirMoves: the partitions their unfinished replicas claim, and per
    broker the moves running on it (``busy``)."""
    for m in await kube.list(LOG_DIR_MOVES, ns):
        if (m.get("spec") or {}).get("clusterName") != cluster:
            continue
        move = LogDirMove.model_validate(m)
        for r in (move.status.replicas if move.status else None) or []:
            if r.state in ENDED_REPLICA_STATES:
                continue
            if r.state == ReplicaState.MOVING:
                busy[r.broker_id] += 1
            claims.setdefault((r.topic, r.partition), f"LogDirMove {move.metadata.name}")


async def _claims_of_reassignments(
    kube: KubeClient, ns: str, cluster: str, me: str, claims: dict[TP, str]
) -> None:
    """The partitions the cluster's other accepted, unfinished PartitionReassignments name
    (read only before this one is accepted: afterwards its own claims stand)."""
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


def _brokers_of(pr: PartitionReassignment, topics: Mapping[str, TopicView]) -> set[int]:
    """Every broker a pass of ``pr`` could have throttled: those its partitions are on now,
    were on (the originals) or go to, and those its status lists."""
    out = set(pr.status.throttled_brokers) if pr.status is not None else set()
    for t in pr.spec.partitions:
        out.update(t.replicas)
        tv = topics.get(t.topic)
        pv = tv.partitions.get(t.partition) if tv is not None else None
        if pv is not None:
            out.update(pv.replicas)
    for o in (pr.status.original if pr.status is not None else None) or []:
        out.update(o.replicas)
    return out


async def run_actions(ex: ReassignmentExecutor, actions: Iterable[Action]) -> None:
    """A decision's actions in order: the throttles, then the partition state of record (and
    the dirs it catches up on), the dirs named, the brokers told, the dropped replicas
    deleted, the metadata.

    In a pass that starts steps under a throttle (a rate above 0) the throttles come first, so
    that a step's copy is throttled from its first byte: on Kafka, writing the step is
    submitting it, and its new replicas start fetching at once (Kafka's own tool sets the
    throttles before it executes too). In any other pass they come right after the writes: a
    cancel's pass lifts the throttle of the steps it cancels, and lifted first, the new
    replicas fetched unthrottled until the cancel reached Kafka, long enough to finish a step
    the user had stopped. Without a rate there is nothing to hold back (the lists only say
    which replication is a reassignment's, for the brokers' metrics), and on Kafka each config
    written first delayed every batch's start by its round trip through Kafka's controller
    (about 70 ms here, four times that on the first pass, bench/kafka_reassignment.py).

    A throttle that did not take (:class:`ActionFailed`) before the writes stops the pass
    there: nothing of it happened. After the writes it is raised only once the rest of the
    pass ran: the partitions are already recorded, and on our brokers a step ended in the
    record but never told to them, or its dropped replicas never deleted, would be left so
    (the next pass starts from the record). The pass stays unrecorded either way, as after a
    crash at that point, and the next one sets or lifts the throttle again."""
    actions = list(actions)
    throttles = [a for a in actions if isinstance(a, Throttle)]
    writes = [a for a in actions if isinstance(a, WritePartition)]
    starting = any(w.view.adding for w in writes)
    first = starting and any(t.rate > 0 for t in throttles)
    if throttles and first:
        await ex.throttle(throttles)
    await ex.write_partitions(writes)
    records = [a for a in actions if isinstance(a, RecordDirs)]
    if records:
        await ex.record_dirs(records)
    not_taken: ActionFailed | None = None
    if throttles and not first:
        try:
            await ex.throttle(throttles)
        except ActionFailed as e:
            not_taken = e
    if starting:
        failpoints.hit("reassignment-step-written")
    if any(not w.view.adding and w.view.removing for w in writes):
        failpoints.hit("reassignment-shrink-written")
    await ex.prefer_dirs([a for a in actions if isinstance(a, PreferDir)])
    await ex.tell([a for a in actions if isinstance(a, Tell)])
    if starting:
        failpoints.hit("reassignment-step-told")
    await ex.delete([a for a in actions if isinstance(a, Delete)])
    if writes:
        await ex.announce()
    if not_taken is not None:
        raise not_taken


async def _record_first(
    kube: KubeClient, pr: PartitionReassignment, status: PartitionReassignmentStatus
) -> PartitionReassignment:
    """``status`` written before the pass acts (``plan.reassignment.recorded_first``); the
    resource as it now is, so that the pass' own status write patches from it."""
    before = pr.status.dump() if pr.status else {}
    await kube.write_status(
        REASSIGNMENTS, pr.metadata.namespace, pr.metadata.name, before, status.dump()
    )
    return pr.model_copy(update={"status": status})


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
        ex = await reassignments_on(ctx, ns, fresh["spec"]["clusterName"])
        out = await reconcile_reassignment(ctx.kube, ex, fresh)
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
                log.exception(
                    "reassignment pass failed", extra={"resource": body["metadata"]["name"]}
                )
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
                cancel = {**fresh, "spec": {**fresh["spec"], "cancel": True, "rollback": False}}
                ex = await reassignments_on(ctx, meta["namespace"], pr.spec.cluster_name)
                out = await reconcile_reassignment(ctx.kube, ex, cancel)
                post_events(body, out.events)
                ended = out.status.get("phase") in {p.value for p in ENDED_PHASES}
                if out.active and not ended:
                    raise kopf.TemporaryError("undoing the steps in flight", delay=1)
                if out.active:
                    # Ended, with brokers whose throttle no lift reached (not live): the
                    # deletion does not wait for a broker that may never return.
                    log.warning(
                        "reassignment deleted with throttles left on brokers not live",
                        extra={
                            "resource": meta["name"],
                            "brokers": out.status.get("throttledBrokers"),
                        },
                    )
    ctx.forget(body)
