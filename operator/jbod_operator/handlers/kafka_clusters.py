"""KafkaCluster: read an Apache Kafka cluster the operator does not run, on a timer.

Each refresh observes (the Secrets the spec names, DescribeCluster, DescribeLogDirs of every
unfenced broker, one broker at a time so one broker's failure is its own), decides the status
(``plan.kafka_cluster.decide_status``, pure) and writes it once. Only the operator holding the
Lease refreshes: a standby would write the same status twice.

One :class:`KafkaAdmin` per KafkaCluster lives in ``ctx.kafka_admins``, built from the spec
and the Secrets' values; it is closed and rebuilt when they change (a rotated password is
picked up on the next refresh) and closed when the resource goes away. Nothing here writes to
Kafka: the status is only what the Admin API reports.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any

import kopf
from pydantic import ValidationError

from ..clients.kafka_admin import KafkaAdmin, KafkaAdminError, KafkaConnection
from ..clients.kube import KAFKA_CLUSTERS, SECRETS, KubeClient
from ..control.kafka_reads import read_log_dirs
from ..models.kafka_cluster import FromSecret, KafkaCluster, KafkaClusterSpec
from ..plan.conditions import iso
from ..plan.kafka_cluster import KafkaObservation, decide_status
from ..plan.kafka_types import BrokerLogDirs
from .context import Ctx, unless_stopped

log = logging.getLogger(__name__)


class CredentialsMissing(Exception):
    """A Secret or key the spec names is not there (the message names which, never a value)."""


async def secret_value(kube: KubeClient, namespace: str, ref: FromSecret) -> str:
    sel = ref.secret_key_ref
    secret = await kube.get(SECRETS, namespace, sel.name)
    if secret is None:
        raise CredentialsMissing(f"Secret {namespace}/{sel.name} not found")
    data = secret.get("data") or {}
    if sel.key not in data:
        raise CredentialsMissing(f"Secret {namespace}/{sel.name} has no key {sel.key!r}")
    return base64.b64decode(data[sel.key]).decode("utf-8")


async def connection_for(
    kube: KubeClient, namespace: str, spec: KafkaClusterSpec
) -> KafkaConnection:
    """The spec with its Secrets' values: what a :class:`KafkaAdmin` is built from."""
    values: dict[str, Any] = {}
    if spec.sasl is not None:
        values["sasl_mechanism"] = spec.sasl.mechanism.value
        values["sasl_username"] = await secret_value(kube, namespace, spec.sasl.username)
        values["sasl_password"] = await secret_value(kube, namespace, spec.sasl.password)
    if spec.tls is not None:
        values["verify_hostname"] = spec.tls.verify_hostname
        for name, ref in (
            ("ca_pem", spec.tls.ca),
            ("cert_pem", spec.tls.certificate),
            ("key_pem", spec.tls.key),
        ):
            if ref is not None:
                values[name] = await secret_value(kube, namespace, ref)
    return KafkaConnection(
        bootstrap_servers=tuple(spec.bootstrap_servers),
        security_protocol=spec.security_protocol.value,
        **values,
    )


async def admin_for(ctx: Ctx, key: tuple[str, str], conn: KafkaConnection) -> KafkaAdmin:
    """The cluster's client, rebuilt when its connection settings changed."""
    admin = ctx.kafka_admins.get(key)
    if admin is not None and admin.connection != conn:
        await admin.close()
        admin = None
    if admin is None:
        admin = KafkaAdmin(conn)
        ctx.kafka_admins[key] = admin
    return admin


async def forget_admin(ctx: Ctx, key: tuple[str, str]) -> None:
    admin = ctx.kafka_admins.pop(key, None)
    if admin is not None:
        await admin.close()


async def observe(ctx: Ctx, key: tuple[str, str], spec: KafkaClusterSpec) -> KafkaObservation:
    bootstrap = ",".join(spec.bootstrap_servers)
    try:
        conn = await connection_for(ctx.kube, key[0], spec)
    except CredentialsMissing as exc:
        await forget_admin(ctx, key)
        return KafkaObservation(
            bootstrap=bootstrap, credentials_error=str(exc), time=iso(time.time())
        )
    admin = await admin_for(ctx, key, conn)
    try:
        cluster = await admin.describe_cluster()
    except KafkaAdminError as exc:
        # A client that never connected keeps retrying its bootstrap: start afresh next time.
        await forget_admin(ctx, key)
        return KafkaObservation(
            bootstrap=bootstrap,
            cluster_error=exc.error,
            cluster_message=exc.message,
            time=iso(time.time()),
        )
    dirs: dict[int, BrokerLogDirs | str] = {}
    for broker in cluster.brokers:
        if broker.fenced:
            continue
        try:
            dirs[broker.broker_id] = await read_log_dirs(admin, broker.broker_id)
        except KafkaAdminError as exc:
            dirs[broker.broker_id] = exc.error
    return KafkaObservation(
        bootstrap=bootstrap, cluster=cluster, log_dirs=dirs, time=iso(time.time())
    )


async def refresh(ctx: Ctx, body: kopf.Body) -> None:
    """Observe, decide, write the status once."""
    async with ctx.lock(body):
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        fresh = await ctx.kube.get(KAFKA_CLUSTERS, ns, name)
        if fresh is None or fresh["metadata"].get("deletionTimestamp"):
            return
        try:
            kc = KafkaCluster.model_validate(fresh)
        except ValidationError as exc:
            # The CRD refuses what the model refuses; a stored object that does not parse is
            # a bug to see in the log, not a reason to write anything.
            log.error("KafkaCluster %s/%s does not parse: %s", ns, name, exc)
            return
        obs = await observe(ctx, (ns, name), kc.spec)
        status = decide_status(obs, kc.status, kc.metadata.generation, now=time.time())
        # status.balance is continuous detection's (handlers.balance): a refresh that read
        # the object before a sample must not put an older one back, nor remove it.
        before = {k: v for k, v in (fresh.get("status") or {}).items() if k != "balance"}
        after = {k: v for k, v in status.dump().items() if k != "balance"}
        await ctx.kube.write_status(KAFKA_CLUSTERS, ns, name, before, after)


async def follow(ctx: Ctx, body: kopf.Body, stopped: kopf.DaemonStopped) -> None:
    """Refresh one KafkaCluster every ``spec.refreshIntervalSeconds`` while it lives (the
    body is kopf's live view, so a changed interval or connection applies at the next tick)."""
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    try:
        while not stopped:
            if ctx.elector.is_leader:
                try:
                    await refresh(ctx, body)
                except Exception:
                    log.exception("KafkaCluster refresh failed", extra={"name": key[1]})
            interval = (body.get("spec") or {}).get("refreshIntervalSeconds", 30)
            await unless_stopped(asyncio.sleep(float(interval)), stopped)
    finally:
        await forget_admin(ctx, key)
        ctx.forget(body)
