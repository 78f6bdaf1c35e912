"""The controller's endpoint for brokers: AlterPartition, log dir failure events and
producer-id blocks (``plan.producer_ids``).

Each cluster's brokers post to ``/clusters/<namespace>/<name>/v1/controller/...`` with that
cluster's bearer token. AlterPartition and heartbeats go to that
cluster's ``ClusterController`` (which validates against the partition state of record);
only the active operator answers, a standby says 503.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import random
from collections.abc import Callable
from typing import TypeVar

from aiohttp import web
from pydantic import ValidationError

from jbod_broker import wire

from ..clients.brokers import BrokerPool
from ..clients.kube import CONFIGMAPS, ApiError, KubeClient
from ..plan import producer_ids
from .cluster_controller import ClusterController
from .stray_replicas import post_cluster_event

log = logging.getLogger(__name__)

CTX: web.AppKey[ControllerEndpoint] = web.AppKey("ctx")
_ALLOCATE_ATTEMPTS = 10
"""Conditional writes tried per block: only another operator (one losing its leadership) can
race this one's writes, so more than a couple of conflicts in a row is not expected."""
M = TypeVar("M", bound=wire.Model)


class ControllerEndpoint:
    def __init__(
        self,
        kube: KubeClient,
        pool: BrokerPool,
        *,
        controllers: Callable[[str, str], ClusterController | None] | None = None,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.kube = kube
        self.pool = pool
        self.controllers = controllers or (lambda _ns, _name: None)
        self.is_leader = is_leader
        self.log_dir_events: list[tuple[str, str, wire.LogDirEvent]] = []
        self._allocate_lock = asyncio.Lock()
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> int:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app[CTX] = self
        base = "/clusters/{namespace}/{name}/v1/controller"
        app.router.add_post(base + "/alter-partition", alter_partition)
        app.router.add_post(base + "/log-dir-event", log_dir_event)
        app.router.add_post(base + "/heartbeat", heartbeat)
        app.router.add_post(base + "/allocate-producer-ids", allocate_producer_ids)
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        return int(sockets[0].getsockname()[1]) if sockets else port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def authorize(self, request: web.Request) -> tuple[str, str]:
        if not self.is_leader():
            # Brokers move on to the next controller address (and a Service routes only to
            # the ready, i.e. active, operator).
            raise web.HTTPServiceUnavailable(reason="not the active controller")
        ns, name = request.match_info["namespace"], request.match_info["name"]
        token = await self.pool.token(ns, name)
        header = request.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        if token is None or not given or not hmac.compare_digest(given, token):
            raise web.HTTPUnauthorized(reason="missing or wrong bearer token")
        return ns, name

    async def allocate_producer_ids(self, ns: str, cluster: str) -> tuple[int, int]:
        """Take the cluster's next block of producer ids: ``(first id, count)``.

        Read the ConfigMap, then write the next block's start with the ``resourceVersion`` read
        as a precondition (or create it): a concurrent writer makes the write fail with 409 and
        the read is done again, so no block is ever given twice. The answer is sent only after
        the write succeeded, so a block handed out is durable in the API server before any
        broker uses it.
        """
        async with self._allocate_lock:  # this operator's requests one at a time
            return await self._allocate_block(ns, cluster)

    async def _allocate_block(self, ns: str, cluster: str) -> tuple[int, int]:
        name = producer_ids.config_map_name(cluster)
        for attempt in range(_ALLOCATE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(random.uniform(0, 0.01 * attempt))  # desynchronise writers
            cm = await self.kube.get(CONFIGMAPS, ns, name)
            first, nxt = producer_ids.take_block(producer_ids.next_block_start(cm))
            try:
                if cm is None:
                    body = producer_ids.config_map_body(ns, cluster, nxt)
                    await self.kube.create(CONFIGMAPS, ns, body)
                else:
                    precondition = {"resourceVersion": cm["metadata"]["resourceVersion"]}
                    await self.kube.patch(
                        CONFIGMAPS,
                        ns,
                        name,
                        {"metadata": precondition, "data": {producer_ids.NEXT_BLOCK_KEY: str(nxt)}},
                    )
            except ApiError as e:
                if e.status == 409:
                    continue  # another writer took a block in between: read again
                raise
            log.info(
                "producer-id block allocated",
                extra={"event": "producer_ids", "cluster": f"{ns}/{cluster}", "first": first},
            )
            return first, producer_ids.BLOCK_SIZE
        raise web.HTTPServiceUnavailable(reason="producer-id block: too many concurrent writers")

    async def post_event(
        self, ns: str, cluster: str, reason: str, message: str, type_: str = "Warning"
    ) -> None:
        await post_cluster_event(self.kube, ns, cluster, reason, message, type_)


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready means active: the Service in front of the operators routes brokers to it only."""
    if request.app[CTX].is_leader():
        return web.json_response({"status": "active"})
    return web.json_response({"status": "standby"}, status=503)


async def heartbeat(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ns, cluster = await ctx.authorize(request)
    hb = await _body(request, wire.BrokerHeartbeat)
    ctrl = ctx.controllers(ns, cluster)
    if ctrl is None:
        raise web.HTTPServiceUnavailable(reason=f"no controller for {ns}/{cluster} yet")
    ctx.pool.note_kafka_endpoint(ns, cluster, hb.broker_id, hb.kafka_endpoint)
    ctrl.heartbeat(hb.broker_id, hb.incarnation)
    return web.json_response({"controller_epoch": ctx.pool.controller_epoch})


async def _body(request: web.Request, model: type[M]) -> M:
    try:
        return model.model_validate_json(await request.read())
    except ValidationError as e:
        raise web.HTTPBadRequest(reason=f"invalid {model.__name__}: {e.errors()[0]['msg']}") from e


async def alter_partition(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ns, cluster = await ctx.authorize(request)
    req = await _body(request, wire.AlterPartitionRequest)
    ctrl = ctx.controllers(ns, cluster)
    if ctrl is None:
        raise web.HTTPServiceUnavailable(reason=f"no controller for {ns}/{cluster} yet")
    results = [await ctrl.alter_partition(req.broker_id, item) for item in req.partitions]
    return web.Response(
        body=wire.AlterPartitionResponse(partitions=results).model_dump_json(),
        content_type="application/json",
    )


async def log_dir_event(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ns, cluster = await ctx.authorize(request)
    ev = await _body(request, wire.LogDirEvent)
    ctx.log_dir_events.append((ns, cluster, ev))
    ctrl = ctx.controllers(ns, cluster)
    if ctrl is not None:
        ctrl.log_dir_failed(ev.broker)
    replicas = ", ".join(f"{r.topic}-{r.partition}" for r in ev.offline_replicas) or "none"
    await ctx.post_event(
        ns,
        cluster,
        "LogDirFailed",
        f"broker {ev.broker}: log dir {ev.log_dir} went offline ({ev.reason}); "
        f"offline replicas: {replicas}",
    )
    log.warning(
        "log dir failure reported",
        extra={"event": "log_dir_failure", "broker": ev.broker, "log_dir": ev.log_dir},
    )
    return web.json_response({"acknowledged": True})


async def allocate_producer_ids(request: web.Request) -> web.Response:
    """Kafka's AllocateProducerIds (KIP-730): a block for a broker's InitProducerId answers."""
    ctx = request.app[CTX]
    ns, cluster = await ctx.authorize(request)
    req = await _body(request, wire.AllocateProducerIdsRequest)
    try:
        first, count = await ctx.allocate_producer_ids(ns, cluster)
    except (ValueError, producer_ids.ProducerIdsExhausted) as e:
        # A damaged counter or no id left: never guess (a guess could repeat an id).
        raise web.HTTPInternalServerError(reason=f"producer-id block: {e}") from e
    except ApiError as e:
        raise web.HTTPServiceUnavailable(reason=f"producer-id block: {e}") from e
    log.info("producer ids for broker", extra={"broker": req.broker_id, "first": first})
    return web.Response(
        body=wire.AllocateProducerIdsResponse(
            first_producer_id=first, count=count
        ).model_dump_json(),
        content_type="application/json",
    )
