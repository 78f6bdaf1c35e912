"""The controller's endpoint for brokers: AlterPartition and log dir failure events.

Each cluster's brokers post to ``/clusters/<namespace>/<name>/v1/controller/...`` with that
cluster's bearer token. AlterPartition is validated against the partition state of record
(the Topic's status: leader, leader epoch, partition epoch) and persisted with the status'
resourceVersion (a concurrent writer makes us re-read, never overwrite); stale requests are
refused and change nothing.
"""

from __future__ import annotations

import datetime as dt
import hmac
import logging
import uuid
from typing import Any, TypeVar

from aiohttp import web
from pydantic import ValidationError

from jbod_broker import wire

from .brokers import BrokerPool
from .kube import EVENTS, TOPICS, ApiError, KubeClient

log = logging.getLogger(__name__)

CTX: web.AppKey[ControllerEndpoint] = web.AppKey("ctx")
M = TypeVar("M", bound=wire.Model)


class ControllerEndpoint:
    def __init__(self, kube: KubeClient, pool: BrokerPool) -> None:
        self.kube = kube
        self.pool = pool
        self.log_dir_events: list[tuple[str, str, wire.LogDirEvent]] = []
        self._runner: web.AppRunner | None = None

    async def start(self, host: str, port: int) -> int:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app[CTX] = self
        base = "/clusters/{namespace}/{name}/v1/controller"
        app.router.add_post(base + "/alter-partition", alter_partition)
        app.router.add_post(base + "/log-dir-event", log_dir_event)
        app.router.add_get("/healthz", healthz)
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
        ns, name = request.match_info["namespace"], request.match_info["name"]
        token = await self.pool.token(ns, name)
        header = request.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        if token is None or not given or not hmac.compare_digest(given, token):
            raise web.HTTPUnauthorized(reason="missing or wrong bearer token")
        return ns, name

    async def find_topic(self, ns: str, cluster: str, topic: str) -> dict[str, Any] | None:
        for t in await self.kube.list(TOPICS, ns):
            spec, status = t.get("spec", {}), t.get("status") or {}
            name = status.get("topicName") or spec.get("topicName") or t["metadata"]["name"]
            if spec.get("clusterName") == cluster and name == topic:
                return t
        return None

    async def apply_isr(
        self, ns: str, cluster: str, broker: int, item: wire.AlterPartitionItem
    ) -> wire.AlterPartitionResult:
        for _attempt in range(5):
            t = await self.find_topic(ns, cluster, item.topic)
            states = (t or {}).get("status", {}).get("partitions") or []
            st = next((s for s in states if s["partition"] == item.partition), None)
            if t is None or st is None:
                return wire.AlterPartitionResult(
                    topic=item.topic, partition=item.partition, error="UNKNOWN_TOPIC_OR_PARTITION"
                )
            replicas = [r["brokerId"] for r in st["replicas"]]
            err = None
            if broker != st["leader"] or item.leader_epoch != st["leaderEpoch"]:
                err = "FENCED_LEADER_EPOCH"
            elif item.partition_epoch != st.get("partitionEpoch", 0):
                err = "INVALID_UPDATE_VERSION"
            elif not set(item.new_isr) <= set(replicas) or st["leader"] not in item.new_isr:
                err = "INVALID_REQUEST"
            if err is None:
                st["isr"] = list(item.new_isr)
                st["partitionEpoch"] = st.get("partitionEpoch", 0) + 1
                try:
                    await self.kube.replace_status(TOPICS, ns, t)
                except ApiError as e:
                    if e.status == 409:
                        continue  # someone wrote the status since we read it: read again
                    raise
                log.info(
                    "ISR changed",
                    extra={
                        "event": "isr_change",
                        "topic": item.topic,
                        "partition": item.partition,
                        "isr": item.new_isr,
                    },
                )
            return wire.AlterPartitionResult(
                topic=item.topic,
                partition=item.partition,
                error=err,
                leader=st["leader"],
                leader_epoch=st["leaderEpoch"],
                isr=list(st["isr"]),
                partition_epoch=st.get("partitionEpoch", 0),
            )
        return wire.AlterPartitionResult(
            topic=item.topic, partition=item.partition, error="CONCURRENT_TRANSACTIONS"
        )

    async def post_event(
        self, ns: str, cluster: str, reason: str, message: str, type_: str = "Warning"
    ) -> None:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{cluster}.{uuid.uuid4().hex[:12]}", "namespace": ns},
            "involvedObject": {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "BrokerCluster",
                "name": cluster,
                "namespace": ns,
            },
            "reason": reason,
            "message": message[:1000],
            "type": type_,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": "jbod-operator"},
        }
        try:
            await self.kube.create(EVENTS, ns, body)
        except ApiError as e:
            log.warning("could not post event", extra={"error": str(e)})


async def healthz(_request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _body(request: web.Request, model: type[M]) -> M:
    try:
        return model.model_validate_json(await request.read())
    except ValidationError as e:
        raise web.HTTPBadRequest(reason=f"invalid {model.__name__}: {e.errors()[0]['msg']}") from e


async def alter_partition(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ns, cluster = await ctx.authorize(request)
    req = await _body(request, wire.AlterPartitionRequest)
    results = [await ctx.apply_isr(ns, cluster, req.broker_id, item) for item in req.partitions]
    return web.Response(
        body=wire.AlterPartitionResponse(partitions=results).model_dump_json(),
        content_type="application/json",
    )


async def log_dir_event(request: web.Request) -> web.Response:
    ctx = request.app[CTX]
    ns, cluster = await ctx.authorize(request)
    ev = await _body(request, wire.LogDirEvent)
    ctx.log_dir_events.append((ns, cluster, ev))
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
