"""Issue 18: producer-id blocks from the operator's controller endpoint, kept in the real API
server (kube-apiserver + etcd on loopback).

Two operators' endpoints (an old active one and a new one, as around a leadership change) and
many requests at once: every block is distinct, and a restarted endpoint goes on after the last
block given, because the counter lives in the API server with a conditional write per block.
Then the broker's side end to end over HTTP: its controller channel asks the endpoint (bearer
token from the cluster's Secret) and its InitProducerId hands out the ids of the block.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator

import pytest

from jbod_broker.controller_channel import ControllerChannel
from jbod_broker.producer_ids import ProducerIdManager
from jbod_operator.clients.brokers import BrokerPool, token_secret_name
from jbod_operator.clients.kube import CONFIGMAPS, SECRETS, Credentials, KubeClient
from jbod_operator.control.endpoint import ControllerEndpoint
from jbod_operator.plan import producer_ids as blocks
from jbod_operator.settings import OperatorSettings
from tests.kube_cluster import KubeCluster

pytestmark = pytest.mark.integration

NS = "pids"
CLUSTER = "kafka"


@pytest.fixture
async def kube(kube_cluster: KubeCluster) -> AsyncIterator[KubeClient]:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    kube_cluster.kubectl("apply", "-f", "-", input=json.dumps(ns), check=True)
    assert kube_cluster.ca_file is not None
    client = KubeClient(
        Credentials(
            server=kube_cluster.server, token=kube_cluster.token, ca_file=str(kube_cluster.ca_file)
        )
    )
    try:
        yield client
    finally:
        await client.delete(CONFIGMAPS, NS, blocks.config_map_name(CLUSTER))
        await client.close()


def endpoint(kube: KubeClient) -> ControllerEndpoint:
    return ControllerEndpoint(kube, BrokerPool(OperatorSettings(), kube))


async def test_blocks_are_unique_across_racing_endpoints_and_a_restart(kube: KubeClient) -> None:
    a, b = endpoint(kube), endpoint(kube)
    got = await asyncio.gather(
        *(ep.allocate_producer_ids(NS, CLUSTER) for _ in range(4) for ep in (a, b))
    )
    firsts = sorted(first for first, _ in got)
    assert all(count == blocks.BLOCK_SIZE for _, count in got)
    assert firsts == [i * blocks.BLOCK_SIZE for i in range(8)]  # distinct, none skipped

    restarted = endpoint(kube)  # a new operator process: nothing in memory
    assert await restarted.allocate_producer_ids(NS, CLUSTER) == (8000, blocks.BLOCK_SIZE)
    cm = await kube.get(CONFIGMAPS, NS, blocks.config_map_name(CLUSTER))
    assert cm is not None and cm["data"] == {blocks.NEXT_BLOCK_KEY: "9000"}


async def test_a_broker_gets_its_ids_through_the_controller_channel(kube: KubeClient) -> None:
    token = "t0ken"
    await kube.create(
        SECRETS,
        NS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": token_secret_name(CLUSTER), "namespace": NS},
            "data": {"token": base64.b64encode(token.encode()).decode()},
        },
    )
    ep = endpoint(kube)
    port = await ep.start("127.0.0.1", 0)
    channel = ControllerChannel(
        f"http://127.0.0.1:{port}/clusters/{NS}/{CLUSTER}",
        broker_id=3,
        token=token,
        on_alter_partition=lambda _r: None,
    )
    channel.start()
    try:

        async def block() -> tuple[int, int]:
            r = await channel.allocate_producer_ids()
            return r.first_producer_id, r.count

        ids = ProducerIdManager(block)
        got = [await ids.init_producer_id() for _ in range(3)]
        assert [g.producer_epoch for g in got] == [0, 0, 0]
        first = got[0].producer_id
        assert first % blocks.BLOCK_SIZE == 0
        assert [g.producer_id for g in got] == [first, first + 1, first + 2]
        # another broker's block does not overlap
        other = await ep.allocate_producer_ids(NS, CLUSTER)
        assert other[0] >= first + blocks.BLOCK_SIZE
    finally:
        await channel.close()
        await ep.stop()
        await kube.delete(SECRETS, NS, token_secret_name(CLUSTER))
