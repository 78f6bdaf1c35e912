"""The partition state of record, read and written (issue 39): one store per operator process.

Where Kafka's controller follows its metadata log, ours keeps the PartitionShards
(``models.partition_shard``, rule in ``plan.partition_shards``) of each namespace in memory:
listed once, then kept current by its own writes (the API server's answer) and by the watch
kopf runs on PartitionShards (:meth:`PartitionStore.observe`). A read is then a join in
memory, not a list of every shard: at 200,000 partitions that is about 1,600 objects and
70 MB of JSON an event would otherwise re-read.

Every write replaces one shard with the resourceVersion it was read at, so a cache that is
behind can make a write fail (409, and the shard is read again) but never lose another
writer's update. Each partition whose state changed gets an offset (a counter of this
process, like an offset in KRaft's metadata log): the controller sends a broker only what
changed past the offset that broker last acknowledged.

The states handed out are the cache's own: read-only (a writer builds new entries and gives
them to :meth:`PartitionStore.put`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..models.partition_shard import MAX_OBJECT_BYTES
from ..plan import partition_shards as rule
from ..plan.partition_shards import State
from .kube import PARTITION_SHARDS, TOPICS, ApiError, KubeClient

log = logging.getLogger(__name__)

WRITES_AT_ONCE = 8
"""Shards written at the same time: a failover changes partitions in every shard (a broker's
partitions are spread over all of them), and one write after the other would make its time
the sum of the API server's answers."""

Key = tuple[str, int]
"""(the owning Topic's uid, partition): what an offset is kept for."""


class ShardTooLarge(ValueError):
    """A shard that would be over ``MAX_OBJECT_BYTES``: the schema's limits say it cannot."""


@dataclass
class StoreStats:
    """What this store did to the API server (the bench's figures)."""

    lists: int = 0
    gets: int = 0
    writes: int = 0
    bytes_written: int = 0
    largest_written: int = 0

    def wrote(self, body: Mapping[str, Any]) -> None:
        n = len(json.dumps(body, separators=(",", ":")))
        if n > MAX_OBJECT_BYTES:
            raise ShardTooLarge(f"{body['metadata']['name']}: {n} bytes")
        self.writes += 1
        self.bytes_written += n
        self.largest_written = max(self.largest_written, n)


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class PartitionStore:
    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self.offset = 0
        self.stats = StoreStats()
        self._shards: dict[str, dict[str, dict[str, Any]]] = {}
        self._changes: dict[str, dict[Key, int]] = {}
        self._loading: dict[str, asyncio.Lock] = {}
        self._loaded: set[str] = set()

    # -- reading ------------------------------------------------------------------------------

    async def shards(self, ns: str, *, fresh: bool = False) -> list[dict[str, Any]]:
        """The namespace's shards, listed the first time, from memory after; ``fresh``: listed
        again now (what another process created shows; nothing known is dropped, as a shard
        written since the list began may be newer than it)."""
        if fresh:
            self._loaded.discard(ns)
        if ns not in self._loaded:
            async with self._loading.setdefault(ns, asyncio.Lock()):
                if ns not in self._loaded:
                    listed = await self.kube.list(PARTITION_SHARDS, ns)
                    self.stats.lists += 1
                    for o in listed:
                        self.observe(o)
                    self._loaded.add(ns)
        return list(self._shards.get(ns, {}).values())

    async def topics(
        self, ns: str, cluster: str | None = None, *, fresh: bool = False
    ) -> list[dict[str, Any]]:
        """The namespace's Topics (of ``cluster``) read now, each joined with its states
        (``fresh``: the shards listed again too, as :meth:`shards`)."""
        topics = [
            t
            for t in await self.kube.list(TOPICS, ns)
            if cluster is None or (t.get("spec") or {}).get("clusterName") == cluster
        ]
        return rule.join_all(topics, await self.shards(ns, fresh=fresh))

    async def topic(self, ns: str, name: str) -> dict[str, Any] | None:
        """One Topic read now, joined with its states (None if it does not exist)."""
        t = await self.kube.get(TOPICS, ns, name)
        return None if t is None else rule.join(t, await self.shards(ns))

    def join(self, topic: Mapping[str, Any]) -> dict[str, Any]:
        """``topic`` (a body kopf handed over) joined with the states in memory; call
        :meth:`shards` for its namespace first."""
        ns = topic["metadata"].get("namespace") or "default"
        return rule.join(topic, self._shards.get(ns, {}).values())

    def changes_since(self, ns: str, offset: int) -> list[tuple[Key, int]]:
        """The partitions whose state changed after ``offset``, each with the offset of its
        last change (oldest first): a walk back from the newest, so as long as the answer."""
        out: list[tuple[Key, int]] = []
        for key, at in reversed(self._changes.get(ns, {}).items()):
            if at <= offset:
                break
            out.append((key, at))
        out.reverse()
        return out

    # -- the watch ----------------------------------------------------------------------------

    def observe(self, obj: Mapping[str, Any], *, deleted: bool = False) -> None:
        """A shard as the API server has it now (a watch event, a write's answer): kept if
        newer than the one in memory, and each partition it changed gets the next offset."""
        ns = obj["metadata"].get("namespace") or "default"
        cache = self._shards.setdefault(ns, {})
        name = obj["metadata"]["name"]
        old = cache.get(name)
        if deleted:
            if old is not None and _rv(old) <= _rv(obj):
                del cache[name]
            return
        if old is not None and _rv(old) >= _rv(obj) and _rv(obj):
            return
        cache[name] = dict(obj)
        self._note_changes(ns, old, obj)

    def _note_changes(self, ns: str, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        before = {int(s["partition"]): s for s in (old or {}).get("spec", {}).get("partitions", [])}
        uid = str(new["spec"].get("topicUid"))
        changes = self._changes.setdefault(ns, {})
        for s in new["spec"].get("partitions") or []:
            p = int(s["partition"])
            if before.get(p) != s:
                self.offset += 1
                key = (uid, p)
                changes.pop(key, None)
                changes[key] = self.offset

    def forget(self, ns: str, name: str) -> None:
        """Drop one cached shard (a write found it changed): the next read gets it again."""
        self._shards.get(ns, {}).pop(name, None)

    # -- writing ------------------------------------------------------------------------------

    async def put(self, topic: Mapping[str, Any], updates: Mapping[int, Mapping[str, Any]]) -> None:
        """Write ``updates`` (partition → its new state) into ``topic``'s shards, each with
        its resourceVersion, a few at a time. A conflict (409) raises :class:`ApiError` after
        the shard is read again, once every other shard was tried; the shards written stay
        written (each partition's state is whole in one shard, and the offsets say which
        changed)."""
        ns = topic["metadata"].get("namespace") or "default"
        await self.shards(ns)
        stored = rule.shards_of(topic, self._shards.get(ns, {}).values())
        legacy = rule.split(rule.legacy_states(topic))
        by_shard: dict[int, dict[int, Mapping[str, Any]]] = {}
        for p, s in updates.items():
            by_shard.setdefault(rule.shard_of(p), {})[p] = s
        gate = asyncio.Semaphore(WRITES_AT_ONCE)

        async def one(k: int, ups: Mapping[int, Mapping[str, Any]]) -> None:
            async with gate:
                await self._write_shard(topic, k, stored.get(k), legacy.get(k, []), ups)

        results = await asyncio.gather(
            *(one(k, ups) for k, ups in sorted(by_shard.items())), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def _write_shard(
        self,
        topic: Mapping[str, Any],
        k: int,
        stored: Mapping[str, Any] | None,
        legacy: list[State],
        updates: Mapping[int, Mapping[str, Any]],
    ) -> None:
        ns = topic["metadata"].get("namespace") or "default"
        base = stored["spec"]["partitions"] if stored is not None else legacy
        states = rule.apply(base, updates)
        rv = None if stored is None else stored["metadata"]["resourceVersion"]
        body = rule.shard_body(topic, k, states, resource_version=rv)
        self.stats.wrote(body)
        try:
            if stored is None:
                out = await self.kube.create(PARTITION_SHARDS, ns, body)
            else:
                out = await self.kube.replace(PARTITION_SHARDS, ns, body)
        except ApiError as e:
            if e.status == 409:
                await self._refresh(ns, body["metadata"]["name"])
            raise
        if isinstance(out, dict):
            self.observe(out)

    async def _refresh(self, ns: str, name: str) -> None:
        self.stats.gets += 1
        fresh = await self.kube.get(PARTITION_SHARDS, ns, name)
        if fresh is None:
            self.forget(ns, name)
        else:
            self.observe(fresh)

    async def migrate(self, topic: Mapping[str, Any]) -> bool:
        """Move a Topic's legacy ``status.partitions`` into shards, then drop them from its
        status (resourceVersion-checked). Whether the Topic holds no legacy entries now."""
        legacy = rule.split(rule.legacy_states(topic))
        if not legacy:
            return True
        ns = topic["metadata"].get("namespace") or "default"
        await self.shards(ns)
        stored = rule.shards_of(topic, self._shards.get(ns, {}).values())
        for k, states in sorted(legacy.items()):
            if k not in stored:
                try:
                    await self._write_shard(topic, k, None, states, {})
                except ApiError as e:
                    if e.status != 409:
                        raise  # 409: another writer created it first, from the same entries

        plain = {**topic, "status": {**(topic.get("status") or {}), "partitions": []}}
        try:
            await self.kube.replace_status(TOPICS, ns, plain)
        except ApiError as e:
            if e.status != 409:
                raise
            return False  # read again and done on the next pass; the shards are the record
        log.info("partition states moved into shards", extra={"topic": topic["metadata"]["name"]})
        return True

    async def delete(self, topic: Mapping[str, Any]) -> None:
        """Delete the Topic's shards (after its replicas: garbage collection would too, once
        the Topic is gone, but a re-created Topic should not wait for it)."""
        ns = topic["metadata"].get("namespace") or "default"
        await self.shards(ns)
        for _, o in sorted(rule.shards_of(topic, self._shards.get(ns, {}).values()).items()):
            await self.kube.delete(PARTITION_SHARDS, ns, o["metadata"]["name"])
            self.forget(ns, o["metadata"]["name"])


def updates_of(
    before: Iterable[Mapping[str, Any]], after: Iterable[Mapping[str, Any]]
) -> dict[int, Mapping[str, Any]]:
    """The entries of ``after`` that differ from ``before``'s (partition → new state)."""
    old = {int(s["partition"]): s for s in before}
    return {int(s["partition"]): s for s in after if old.get(int(s["partition"])) != s}


_STORES: weakref.WeakKeyDictionary[KubeClient, PartitionStore] = weakref.WeakKeyDictionary()


def store_of(kube: KubeClient) -> PartitionStore:
    """The store of ``kube``'s process: one per client, so the controller, the handlers and
    the adapters that share a client share one cache and one offset counter."""
    store = _STORES.get(kube)
    if store is None:
        store = _STORES[kube] = PartitionStore(kube)
    return store
