"""An in-memory API server for the partition state of record (issue 39): PartitionShards and
Topics with resourceVersions, for unit tests of the store and the controller."""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

from jbod_operator.clients.kube import ApiError
from jbod_operator.models import PartitionShard
from jbod_operator.models.topic import LOG_DIR_LENGTH, MAX_ENTRY_REPLICAS


def state(p: int, epoch: int = 0, brokers: tuple[int, ...] = (0, 1, 2)) -> dict[str, Any]:
    """A partition state: replicas ``brokers``, the first leading, all in sync."""
    return {
        "partition": p,
        "replicas": [{"brokerId": b, "logDir": f"/var/lib/jbod/data-d{b % 2}"} for b in brokers],
        "leader": brokers[0],
        "leaderEpoch": epoch,
        "isr": list(brokers),
        "partitionEpoch": 0,
    }


def largest_state(p: int) -> dict[str, Any]:
    """A partition state at every schema limit at once: every list full (all replicas
    offline, a reassignment adding and removing at the same time), 255-character dirs, the
    largest ids and epochs, a 253-character reassignedBy."""
    ids = [1_000_000 - i for i in range(MAX_ENTRY_REPLICAS)]
    return {
        "partition": p,
        "replicas": [{"brokerId": b, "logDir": "/" + "p" * (LOG_DIR_LENGTH - 1)} for b in ids],
        "leader": 1_000_000,
        "leaderEpoch": 2**31 - 1,
        "isr": ids,
        "partitionEpoch": 2**31 - 1,
        "offlineReplicas": ids,
        "diskOfflineReplicas": ids,
        "addingReplicas": ids,
        "removingReplicas": ids,
        "targetReplicas": ids,
        "reassignedBy": "r" * 253,
    }


def topic(name: str = "orders", uid: str = "uid-1", legacy: list[Any] | None = None) -> Any:
    """A Topic as the API server returns it (of cluster ``c``)."""
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "1"},
        "spec": {"clusterName": "c", "partitions": 1, "replicationFactor": 3},
        "status": {"partitions": legacy} if legacy is not None else {},
    }


class FakeApi:
    """PartitionShards and one Topic with resourceVersions, as the API server keeps them: a
    create of an existing name or a replace at an old version is 409. Each call yields to the
    event loop first (``rng`` decides how often), so concurrent writers interleave."""

    def __init__(self, rng: random.Random, t: dict[str, Any] | None = None) -> None:
        self.rng = rng
        self.objs: dict[str, dict[str, Any]] = {}
        self.topic = t or topic()
        self.rv = 10
        self.fail_after: int | None = None

    async def _turn(self) -> None:
        for _ in range(self.rng.randrange(3)):
            await asyncio.sleep(0)

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return obj

    async def list(self, res: Any, ns: str, **_: Any) -> list[dict[str, Any]]:
        await self._turn()
        if res.plural == "topics":
            return [copy.deepcopy(self.topic)]
        if res.plural == "partitionshards":
            return [copy.deepcopy(o) for o in self.objs.values()]
        return []

    async def patch_status(self, res: Any, ns: str, name: str, status: Any) -> None:
        """Statuses other than the state of record (the BrokerCluster's strays) are not kept."""

    async def get(self, res: Any, ns: str, name: str) -> dict[str, Any] | None:
        await self._turn()
        if res.plural == "topics":
            return copy.deepcopy(self.topic)
        o = self.objs.get(name)
        return copy.deepcopy(o) if o is not None else None

    def _maybe_crash(self) -> None:
        if self.fail_after is not None:
            if self.fail_after == 0:
                raise ConnectionError("the operator died here")
            self.fail_after -= 1

    async def create(self, res: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._turn()
        self._maybe_crash()
        name = body["metadata"]["name"]
        if name in self.objs:
            raise ApiError(409, "AlreadyExists", name, "POST", name)
        PartitionShard.model_validate(body)
        self.objs[name] = self._bump(body)
        return copy.deepcopy(self.objs[name])

    async def replace(self, res: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._turn()
        self._maybe_crash()
        name = body["metadata"]["name"]
        old = self.objs.get(name)
        if old is None or old["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", name, "PUT", name)
        PartitionShard.model_validate(body)
        self.objs[name] = self._bump(body)
        return copy.deepcopy(self.objs[name])

    async def replace_status(self, res: Any, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        await self._turn()
        self._maybe_crash()
        if body["metadata"]["resourceVersion"] != self.topic["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "topic", "PUT", "topic")
        self.topic = self._bump({**self.topic, "status": body["status"]})
        return copy.deepcopy(self.topic)
