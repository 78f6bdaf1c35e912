"""How the operator reaches the brokers of a cluster: endpoint resolution, token, clients.

The same code path in-cluster (DNS names from a template) and for local processes (a JSON file
of loopback URLs): only the URL differs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError

from ..settings import OperatorSettings
from .kube import SECRETS, KubeClient


def statefulset_name(cluster: str) -> str:
    return f"{cluster}-broker"


def service_name(cluster: str) -> str:
    return f"{cluster}-brokers"


def token_secret_name(cluster: str) -> str:
    return f"{cluster}-broker-token"


class BrokerPool:
    def __init__(self, settings: OperatorSettings, kube: KubeClient) -> None:
        self.settings = settings
        self.kube = kube
        self._clients: dict[tuple[str, str], BrokerClient] = {}
        self._tokens: dict[tuple[str, str], str] = {}
        self.controller_epoch = 0
        """Set from the Lease when this operator becomes active; sent with every request."""
        self.kafka_endpoints: dict[tuple[str, str], dict[int, str]] = {}
        """Each broker's advertised Kafka listener as its heartbeats last said (issue 18):
        passed on in every endpoint list, so brokers answer Kafka Metadata for each other."""

    def note_kafka_endpoint(
        self, namespace: str, cluster: str, broker_id: int, endpoint: str | None
    ) -> None:
        known = self.kafka_endpoints.setdefault((namespace, cluster), {})
        if endpoint is None:
            known.pop(broker_id, None)
        else:
            known[broker_id] = endpoint

    def _endpoints_file(self) -> dict[str, dict[str, str]]:
        path = self.settings.broker_endpoints_file
        if not path or not os.path.exists(path):
            return {}
        with open(path, encoding="utf-8") as f:
            data: dict[str, dict[str, str]] = json.load(f)
        return data

    def url(self, namespace: str, cluster: str, broker_id: int) -> str:
        mapped = self._endpoints_file().get(f"{namespace}/{cluster}", {}).get(str(broker_id))
        if mapped:
            return mapped
        return self.settings.broker_url_template.format(
            name=cluster,
            namespace=namespace,
            id=broker_id,
            sts=statefulset_name(cluster),
            service=service_name(cluster),
        )

    def endpoints(self, namespace: str, cluster: str, ids: list[int]) -> list[wire.BrokerEndpoint]:
        kafka = self.kafka_endpoints.get((namespace, cluster), {})
        return [
            wire.BrokerEndpoint(
                broker_id=i, url=self.url(namespace, cluster, i), kafka_endpoint=kafka.get(i)
            )
            for i in ids
        ]

    async def token(self, namespace: str, cluster: str) -> str | None:
        key = (namespace, cluster)
        if key not in self._tokens:
            secret = await self.kube.get(SECRETS, namespace, token_secret_name(cluster))
            if secret is None or "token" not in secret.get("data", {}):
                return None
            self._tokens[key] = base64.b64decode(secret["data"]["token"]).decode().strip()
        return self._tokens[key]

    def forget_token(self, namespace: str, cluster: str) -> None:
        self._tokens.pop((namespace, cluster), None)

    async def client(self, namespace: str, cluster: str, broker_id: int) -> BrokerClient:
        url = self.url(namespace, cluster, broker_id)
        token = await self.token(namespace, cluster)
        key = (url, token or "")
        c = self._clients.get(key)
        if c is None:
            c = BrokerClient(url, token=token, timeout_s=self.settings.broker_timeout_seconds)
            self._clients[key] = c
        return c

    async def describe(
        self, namespace: str, cluster: str, ids: list[int]
    ) -> dict[int, wire.DescribeLogDirsResponse | None]:
        """Each broker's log dirs, or ``None`` for a broker that does not answer (not live)."""

        async def one(i: int) -> wire.DescribeLogDirsResponse | None:
            try:
                c = await self.client(namespace, cluster, i)
                return await c.describe_log_dirs()
            except KafkaError:
                return None

        results = await asyncio.gather(*(one(i) for i in ids))
        return dict(zip(ids, results, strict=True))

    async def close(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()
