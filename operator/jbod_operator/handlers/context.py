"""What every handler shares while the operator runs: settings, the API and broker clients,
the Lease elector, the controllers (one per BrokerCluster) and per-object locks.

Built once by ``main.startup`` (:func:`open_context`) and closed by ``main.cleanup``; handlers
get it from kopf's memo. Also the one helper every waiting handler uses to give way to kopf's
stop flag (:func:`unless_stopped`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf

from ..clients.brokers import BrokerPool
from ..clients.kafka_admin import KafkaAdmin
from ..clients.kube import KubeClient
from ..clients.planning_jobs import JobLauncher, make_launcher
from ..control.cluster_controller import ClusterController
from ..control.endpoint import ControllerEndpoint
from ..control.leadership import LeaseElector
from ..settings import OperatorSettings

T = TypeVar("T")


@dataclass
class Ctx:
    settings: OperatorSettings
    kube: KubeClient
    pool: BrokerPool
    elector: LeaseElector
    endpoint: ControllerEndpoint | None = None
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    controllers: dict[tuple[str, str], ClusterController] = field(default_factory=dict)
    detectors: dict[tuple[str, str], Any] = field(default_factory=dict)
    """Continuous detection's state per cluster (``handlers.balance.Detector``)."""
    planning: JobLauncher | None = None
    """Where Rebalances' planning jobs run (made on first use, from the settings)."""
    kafka_admins: dict[tuple[str, str], KafkaAdmin] = field(default_factory=dict)
    """One Admin API client per KafkaCluster (``handlers.kafka_clusters``)."""

    def launcher(self) -> JobLauncher:
        if self.planning is None:
            self.planning = make_launcher(self.settings, self.kube)
        return self.planning

    def lock(self, body: Any) -> asyncio.Lock:
        """One lock per object: a change handler and a periodic pass never interleave."""
        return self.locks.setdefault(body["metadata"]["uid"], asyncio.Lock())

    def forget(self, body: Any) -> None:
        self.locks.pop(body["metadata"]["uid"], None)

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


async def open_context(cfg: OperatorSettings) -> Ctx:
    """Clients, the Lease elector and the brokers' endpoint, started."""
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
    elector.start()
    return ctx


async def close_context(ctx: Ctx) -> None:
    await ctx.deposed()
    for admin in ctx.kafka_admins.values():
        await admin.close()
    ctx.kafka_admins.clear()
    if ctx.planning is not None:
        await ctx.planning.close()
    await ctx.elector.stop(release=True)
    if ctx.endpoint is not None:
        await ctx.endpoint.stop()
    await ctx.pool.close()
    await ctx.kube.close()


def post_events(body: Any, events: Any) -> None:
    """kopf Events from (type, reason, message) triples."""
    for type_, reason, message in events:
        kopf.event(body, type=type_, reason=reason, message=message)


async def unless_stopped(aw: Awaitable[T], stopped: kopf.DaemonStopped | None) -> T | None:
    """``aw``'s result, or None as soon as kopf asks the daemon to stop (deletion, exit)."""
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
