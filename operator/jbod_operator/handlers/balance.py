"""Continuous detection (issue 16): a daemon per BrokerCluster and per KafkaCluster samples
the cluster every ``spec.balance.sampleIntervalSeconds``, keeps the bounded history in memory,
writes its summary to ``status.balance`` and creates a Rebalance when
``plan.balance_trigger.decide`` says so. A sample is the snapshot a Rebalance of the cluster
would plan from, read through the adapter ``handlers.executors.snapshots_of`` picks (our
brokers' describe-log-dirs, or Kafka's DescribeLogDirs and Metadata), so both kinds are
sampled, measured and decided alike.

A daemon rather than a kopf timer: the interval is the cluster's own setting and can change
with its spec (a timer's is fixed when it is registered), as the LogDirMove daemon re-reads
its resource on every round. Only the active operator samples; a standby, or a cluster whose
detection is off, looks again after the reconcile interval. The history lives in
``Ctx.detectors`` (it is also the Spark job's metric history: :func:`metric_history`), and is
lost when the operator restarts: a restarted operator starts a new window, while what must
survive (the brokers and dirs accounted for, the last triggered Rebalance, the cooldown)
is read back from ``status.balance`` and from the Rebalances themselves.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf

from ..clients.kube import BROKER_CLUSTERS, KAFKA_CLUSTERS, REBALANCES, ApiError
from ..models import BrokerCluster
from ..models.kafka_cluster import KafkaCluster
from ..plan import balance_objects
from ..plan.balance_trigger import (
    Decision,
    History,
    TriggerConfig,
    decide,
    metric_history_rows,
)
from ..plan.conditions import iso
from ..plan.execution import ClusterUnusable
from ..plan.topic_spec import Event
from .context import Ctx, post_events
from .executors import snapshots_of

log = logging.getLogger(__name__)


@dataclass
class Detector:
    """One cluster's detection state in memory."""

    history: History = field(default_factory=lambda: History(2))

    def reset(self) -> None:
        self.history.clear()


def detector_for(ctx: Ctx, ns: str, name: str) -> Detector:
    d = ctx.detectors.get((ns, name))
    if not isinstance(d, Detector):
        d = Detector()
        ctx.detectors[(ns, name)] = d
    return d


def metric_history(ctx: Ctx, ns: str, name: str) -> str:
    """The cluster's history as JSON lines in the Spark job's metric-history columns
    (``python -m jbod_spark.job --metrics FILE.jsonl``); empty when nothing was sampled."""
    d = ctx.detectors.get((ns, name))
    if not isinstance(d, Detector):
        return ""
    rows = metric_history_rows(d.history, name)
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)


async def _rebalances(ctx: Ctx, ns: str, cluster: str) -> list[dict[str, Any]]:
    try:
        items = await ctx.kube.list(REBALANCES, ns)
    except ApiError as e:
        if e.status == 404:  # the Rebalance CRD is not installed: nothing can be running
            return []
        raise
    return [r for r in items if (r.get("spec") or {}).get("clusterName") == cluster]


def _is_kafka(body: Mapping[str, Any]) -> bool:
    """A KafkaCluster's body, else a BrokerCluster's."""
    return body.get("kind") == KafkaCluster.kind


async def _get(ctx: Ctx, kafka: bool, ns: str, name: str) -> dict[str, Any] | None:
    # One call per kind: the chart's RBAC is derived from the kube.py constant of each call.
    if kafka:
        return await ctx.kube.get(KAFKA_CLUSTERS, ns, name)
    return await ctx.kube.get(BROKER_CLUSTERS, ns, name)


async def _patch_status(
    ctx: Ctx, kafka: bool, ns: str | None, name: str, patch: dict[str, Any]
) -> None:
    if kafka:
        await ctx.kube.patch_status(KAFKA_CLUSTERS, ns, name, patch)
    else:
        await ctx.kube.patch_status(BROKER_CLUSTERS, ns, name, patch)


async def sample_and_decide(ctx: Ctx, body: dict[str, Any], now: float | None = None) -> None:
    """One round: sample, decide, create the Rebalance if due, write ``status.balance``."""
    kafka = _is_kafka(body)
    bc: BrokerCluster | KafkaCluster = (
        KafkaCluster.model_validate(body) if kafka else BrokerCluster.model_validate(body)
    )
    balance = bc.spec.balance
    ns = bc.metadata.namespace or "default"
    det = detector_for(ctx, ns, bc.metadata.name)
    if balance is None or not balance.enabled:
        det.reset()
        return
    det.history.resize(balance.history_samples)
    taken = await _sample(ctx, det, ns, bc.metadata.name, now)
    if taken is None:
        return
    status_balance: dict[str, Any] = dict((body.get("status") or {}).get("balance") or {})
    cfg = TriggerConfig.from_spec(balance, slack_s=ctx.settings.broker_timeout_seconds)
    decision = decide(
        det.history.samples(),
        cfg,
        taken,
        balance_objects.known_from_status(status_balance),
        [balance_objects.rebalance_view(r) for r in await _rebalances(ctx, ns, bc.metadata.name)],
        balance_objects.last_triggered_at(status_balance),
    )
    decision, last, events = await _create(ctx, bc, decision, cfg, taken)
    new_status = balance_objects.balance_status(
        decision,
        samples=len(det.history),
        last_sample_time=taken,
        last_triggered=last or status_balance.get("lastTriggered"),
    )
    await _patch_status(ctx, kafka, ns, bc.metadata.name, {"balance": new_status})
    post_events(body, events)


async def _sample(ctx: Ctx, det: Detector, ns: str, name: str, now: float | None) -> float | None:
    """Add a sample of the cluster to ``det``'s history; its time, or None when none was
    taken (the cluster cannot be read now, or the wall clock stepped back)."""
    source = await snapshots_of(ctx, ns, name)
    try:
        if await source.record() is None:
            return None
        snap = await source.snapshot(iso(time.time()))
    except ClusterUnusable as why:
        # Not sampled: a hole in the history, which no window spans (balance_trigger).
        log.info("balance sample skipped", extra={"cluster": name, "reason": why.message})
        return None
    taken = time.time() if now is None else now
    if len(det.history) and taken <= det.history.samples()[-1].time:
        return None  # the wall clock stepped back: wait for it rather than reorder the history
    det.history.add(balance_objects.sample_from_snapshot(taken, snap))
    return taken


async def _create(
    ctx: Ctx,
    bc: BrokerCluster | KafkaCluster,
    decision: Decision,
    cfg: TriggerConfig,
    taken: float,
) -> tuple[Decision, dict[str, Any] | None, list[Event]]:
    """Create the Rebalance ``decision`` asks for, if any: the decision the status reports,
    the new ``lastTriggered`` (None: unchanged) and the Events."""
    if decision.create is None:
        return decision, None, []
    name = bc.metadata.name
    manifest = balance_objects.build_rebalance(bc, decision.create, taken)
    rb_name = manifest["metadata"]["name"]
    try:
        await ctx.kube.create(REBALANCES, bc.metadata.namespace or "default", manifest)
    except ApiError as e:
        if e.status != 409:  # 409: this very decision, made before a crash
            log.warning(
                "could not create a Rebalance",
                extra={"cluster": name, "rebalance": rb_name, "error": str(e)},
            )
            return balance_objects.after_refused(decision, rb_name, str(e)), None, []
    auto = bool(bc.spec.balance and bc.spec.balance.auto_approve)
    done = balance_objects.after_created(decision, manifest, taken, cfg.cooldown_s, auto)
    log.info(
        "Rebalance created by continuous detection",
        extra={"cluster": name, "rebalance": rb_name, "reason": decision.create.reason},
    )
    return done.decision, done.last_triggered, [done.event]


OFF = "continuous detection is off (spec.balance.enabled)"


async def _say_off(ctx: Ctx, body: dict[str, Any]) -> None:
    """A summary left from when detection was on no longer claims to watch: its window and
    message go (what was accounted for stays, for when it is turned on again)."""
    balance = (body.get("status") or {}).get("balance")
    if balance and balance.get("message") != OFF:
        meta = body["metadata"]
        await _patch_status(
            ctx,
            _is_kafka(body),
            meta.get("namespace"),
            meta["name"],
            {"balance": {"message": OFF, "sustainedSince": None, "samples": 0}},
        )


async def follow(ctx: Ctx, body: kopf.Body, stopped: kopf.DaemonStopped) -> None:
    """Sample one BrokerCluster or KafkaCluster while it lives (the daemons
    ``main.cluster_balance``, ``main.kafka_cluster_balance``)."""
    kafka = _is_kafka(body)
    meta = body["metadata"]
    ns, name = meta.get("namespace") or "default", meta["name"]
    idle = ctx.settings.reconcile_interval_seconds
    try:
        while not stopped:
            started = time.monotonic()
            wait = idle
            try:
                fresh = await _get(ctx, kafka, ns, name)
                if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                    return
                spec = (fresh.get("spec") or {}).get("balance") or {}
                if ctx.elector.is_leader and spec.get("enabled"):
                    wait = float(spec.get("sampleIntervalSeconds") or idle)
                    await sample_and_decide(ctx, fresh)
                else:
                    detector_for(ctx, ns, name).reset()
                    if ctx.elector.is_leader:
                        await _say_off(ctx, fresh)
            except Exception:
                log.exception("balance sample failed", extra={"cluster": name})
            pause = wait - (time.monotonic() - started)
            if pause > 0:
                await stopped.wait(pause)
    finally:
        if stopped:
            ctx.detectors.pop((ns, name), None)
