"""The proposal ConfigMap against a real API server: a large plan's files stored as they are
are refused (the 1 MiB limit that made ``plan.proposal_configmap`` necessary), the packed
layout is accepted and reads back byte for byte."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jbod_operator.clients.kube import CONFIGMAPS, ApiError, KubeClient
from jbod_operator.plan.proposal_configmap import CONFIGMAP_LIMIT, pack, read_text
from tests.kube_cluster import KubeCluster
from tests.unit.test_proposal_configmap import reassignment

pytestmark = pytest.mark.integration
NS = "default"


@pytest.fixture
async def kube(kube_cluster: KubeCluster) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_env(str(kube_cluster.kubeconfig))
    try:
        yield client
    finally:
        await client.close()


def configmap(name: str, data: dict[str, str], binary: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": data,
        "binaryData": binary,
    }


# The refused request is deliberately over 1 MiB: aiohttp warns about sending it in one piece.
@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
async def test_a_large_proposal_is_refused_plain_and_accepted_packed(kube: KubeClient) -> None:
    big = reassignment(20_000)
    assert len(big) > CONFIGMAP_LIMIT
    plain = {"reassignment.json": big.decode(), "report.txt": "summary"}
    with pytest.raises(ApiError) as refused:
        await kube.apply(CONFIGMAPS, NS, configmap("big-plain", plain, {}))
    assert refused.value.status in (413, 422), refused.value
    assert await kube.get(CONFIGMAPS, NS, "big-plain") is None

    data, binary = pack({"reassignment.json": big, "report.txt": b"summary"})
    await kube.apply(CONFIGMAPS, NS, configmap("big-packed", data, binary))
    stored = await kube.get(CONFIGMAPS, NS, "big-packed")
    assert stored is not None
    assert read_text(stored, "reassignment.json") == big.decode()
    assert read_text(stored, "report.txt") == "summary"
    await kube.delete(CONFIGMAPS, NS, "big-packed")
