"""A deposed operator creating a Topic's partitions (issue 38).

The Topic handler sent its own LeaderAndIsr and UpdateMetadata and caught ``KafkaError``, which
swallowed ``StaleControllerEpochError``: an operator whose Lease the standby had taken (it has
not noticed yet) wrote the partitions into the Topic's status, had them refused by every
broker, marked the Topic Ready and went on as the controller. Here the operator's own Lease
elector, context and Topic handler run against the real API server and real broker processes;
the standby takes the Lease (epoch 2) and, as the controller stub, tells the brokers first.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf
import pytest

from jbod_broker.errors import StaleControllerEpochError
from jbod_broker.local import LocalCluster
from jbod_operator.clients.brokers import BrokerPool
from jbod_operator.clients.kube import BROKER_CLUSTERS, LEASES, SECRETS, TOPICS, KubeClient
from jbod_operator.control.leadership import LeaseElector
from jbod_operator.handlers.context import Ctx, close_context
from jbod_operator.handlers.topics import on_topic
from jbod_operator.settings import OperatorSettings
from tests.integration.controller_stub import ControllerStub
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NS = "deposed-it"
LEASE = "deposed-it-leader"
DIRS = ["a", "b", "c"]


@dataclass
class Setup:
    api: KubeClient
    ctx: Ctx
    brokers: LocalCluster
    stub: ControllerStub
    elected: asyncio.Event
    """Set once the operator under test became the active one (its ``on_elected``)."""


def _write_endpoints(path: Path, brokers: LocalCluster) -> None:
    path.write_text(json.dumps({f"{NS}/demo": brokers.endpoints()}))


async def _objects(api: KubeClient, token: str) -> None:
    """The token Secret and the BrokerCluster the operator would have made (no operator
    process runs here: only the handler under test writes)."""
    await api.create(
        SECRETS,
        NS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "demo-broker-token"},
            "data": {"token": base64.b64encode(token.encode()).decode()},
        },
    )
    await api.create(
        BROKER_CLUSTERS,
        NS,
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "BrokerCluster",
            "metadata": {"name": "demo"},
            "spec": {"replicas": 3, "logDirs": [{"name": d, "size": "1Gi"} for d in DIRS]},
        },
    )


@pytest.fixture
async def setup(kube_cluster: KubeCluster, tmp_path: Path) -> AsyncIterator[Setup]:
    kube_cluster.kubectl("apply", "-f", str(REPO / "crds"), check=True)
    kube_cluster.wait_established()
    kube_cluster.kubectl("create", "namespace", NS, check=False)
    stub = ControllerStub()
    await stub.start()
    brokers = LocalCluster(
        str(tmp_path / "brokers"), size=3, controller_url=stub.url, dir_names=DIRS
    )
    stub.cluster = brokers
    endpoints = tmp_path / "broker-endpoints.json"
    _write_endpoints(endpoints, brokers)
    api = KubeClient.from_env(str(kube_cluster.kubeconfig))
    settings = OperatorSettings(
        namespace=NS, broker_endpoints_file=str(endpoints), broker_timeout_seconds=5
    )
    elector = LeaseElector(api, NS, LEASE, identity="deposed", lease_seconds=60, renew_seconds=60)
    ctx = Ctx(settings, api, BrokerPool(settings, api), elector)
    elected = asyncio.Event()

    async def on_elected(epoch: int) -> None:
        await ctx.elected(epoch)
        elected.set()

    elector.on_elected, elector.on_deposed = on_elected, ctx.deposed
    try:
        await _objects(api, brokers.token)
        await asyncio.to_thread(brokers.start)
        yield Setup(api, ctx, brokers, stub, elected)
    finally:
        await close_context(ctx)
        await asyncio.to_thread(brokers.stop)
        await stub.stop()
        kube_cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)


def _folders(brokers: LocalCluster, topic: str) -> list[str]:
    return sorted(
        n
        for b in brokers.brokers
        for d in b.log_dirs
        if os.path.isdir(d)
        for n in os.listdir(d)
        if n.startswith(f"{topic}-")
    )


async def _the_standby_takes_over(s: Setup) -> int:
    """The Lease expires for the others (its holder stalled past it) and the standby takes
    it, with the next epoch; as the controller it tells every broker first."""
    lease: dict[str, Any] | None = await s.api.get(LEASES, NS, LEASE)
    assert lease is not None
    lease["spec"]["renewTime"] = "1970-01-01T00:00:00.000000Z"
    await s.api.replace(LEASES, NS, lease)
    standby = LeaseElector(s.api, NS, LEASE, identity="standby")
    assert await standby.try_acquire_or_renew()
    s.stub.epoch = standby.epoch
    await s.stub.update_metadata()
    return standby.epoch


async def test_a_deposed_operator_creating_partitions_steps_down_and_writes_nothing(
    setup: Setup,
) -> None:
    s = setup
    s.ctx.elector.start()
    await asyncio.wait_for(s.elected.wait(), 30)
    assert s.ctx.pool.controller_epoch == 1
    assert await _the_standby_takes_over(s) == 2
    s.ctx.require_leader()  # the deposed operator has not noticed yet (it would raise)
    await s.api.create(
        TOPICS,
        NS,
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "Topic",
            "metadata": {"name": "orders"},
            "spec": {"clusterName": "demo", "partitions": 3, "replicationFactor": 3},
        },
    )
    body = await s.api.get(TOPICS, NS, "orders")
    assert body is not None

    with pytest.raises(kopf.TemporaryError) as raised:
        await on_topic(s.ctx, body)  # type: ignore[arg-type]
    assert isinstance(raised.value.__cause__, StaleControllerEpochError)
    # It stopped acting as the controller...
    assert not s.ctx.elector.is_leader
    assert s.ctx.controller_for(NS, "demo") is None
    with pytest.raises(kopf.TemporaryError, match="standby"):
        await on_topic(s.ctx, body)  # type: ignore[arg-type]
    # ...wrote nothing into the Topic (no partitions of record, no Ready), and no broker
    # holds a replica of it.
    after = await s.api.get(TOPICS, NS, "orders")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
    assert not after.get("status"), after.get("status")
    assert _folders(s.brokers, "orders") == []
