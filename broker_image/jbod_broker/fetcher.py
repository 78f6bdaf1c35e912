"""Follower fetchers: one task per leader broker pulls the partitions this broker follows.

Kafka's ``ReplicaFetcherThread``. Before fetching a partition whose leader changed, the follower
asks the leader for the end offset of its own latest leader epoch and truncates there, so the
new leader's log wins (KIP-101/KIP-279). Fetched batches are appended with their offsets; the
follower's high watermark is the leader's, capped by its own log end. The inter-broker throttle
(``follower.replication.throttled.rate``) applies only to throttled replicas, as in Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from . import wire
from .client import BrokerClient
from .errors import (
    FencedLeaderEpochError,
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from .replica_manager import ReplicaManager
from .storage.errors import KafkaStorageError, OffsetOutOfRangeError
from .storage.names import TopicPartition
from .throttle import AsyncThrottle, ReplicationTraffic

log = logging.getLogger(__name__)


@dataclass
class FetchState:
    needs_truncation: bool = True


class LeaderFetcher:
    """Fetches every followed partition led by one broker, in one request per round."""

    def __init__(self, manager: FetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, FetchState] = {}
        self.task: asyncio.Task[None] | None = None
        self.wakeup = asyncio.Event()

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task

    def _client(self) -> BrokerClient | None:
        ep = self.manager.replicas.brokers.get(self.leader_id)
        if ep is None:
            return None
        return self.manager.client_for(ep.url)

    async def _run(self) -> None:
        cfg = self.manager.replicas.config
        backoff = cfg.replica_fetch_backoff_ms / 1000
        while True:
            try:
                if not self.partitions:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                client = self._client()
                if client is None:
                    await asyncio.sleep(backoff)
                    continue
                await self._truncate(client)
                progressed = await self._fetch_once(client)
                if not progressed:
                    await asyncio.sleep(0)
            except asyncio.CancelledError:
                raise
            except KafkaError as e:
                log.warning(
                    "fetch from leader failed",
                    extra={"event": "fetch_failed", "leader": self.leader_id, "error": str(e)},
                )
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("fetcher crashed; retrying", extra={"leader": self.leader_id})
                await asyncio.sleep(backoff)

    async def _truncate(self, client: BrokerClient) -> None:
        rm = self.manager.replicas
        todo = [tp for tp, st in self.partitions.items() if st.needs_truncation]
        if not todo:
            return
        reqs = []
        for tp in todo:
            p = rm.follower_state(tp)
            lg = rm.logs.get_log(tp)
            if p is None or lg is None:
                self.partitions.pop(tp, None)
                continue
            reqs.append(
                wire.EpochEndOffsetRequest(
                    topic=tp.topic,
                    partition=tp.partition,
                    current_leader_epoch=p.leader_epoch,
                    leader_epoch=lg.epochs.latest_epoch,
                )
            )
        if not reqs:
            return
        for res in await client.epoch_end_offsets(reqs):
            tp = TopicPartition(res.topic, res.partition)
            lg = rm.logs.get_log(tp)
            if lg is None or tp not in self.partitions:
                continue
            if res.error is not None:
                continue  # leader not ready for this epoch yet: try again next round
            if res.leader_epoch < 0:
                target = lg.high_watermark  # the leader knows none of our epochs
            else:
                _, own_end = lg.epochs.end_offset_for(res.leader_epoch, lg.log_end_offset)
                target = min(res.end_offset, own_end if own_end >= 0 else lg.log_end_offset)
            if target < lg.log_end_offset:
                log.info(
                    "truncating follower",
                    extra={
                        "event": "follower_truncate",
                        "partition": str(tp),
                        "from": lg.log_end_offset,
                        "to": target,
                    },
                )
                lg.truncate_to(target)
            self.partitions[tp].needs_truncation = False

    async def _fetch_once(self, client: BrokerClient) -> bool:
        rm = self.manager.replicas
        cfg = rm.config
        parts = []
        for tp, st in list(self.partitions.items()):
            if st.needs_truncation:
                continue
            p = rm.follower_state(tp)
            lg = rm.logs.get_log(tp)
            if p is None or lg is None:
                self.partitions.pop(tp, None)
                continue
            parts.append(
                wire.FetchPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    fetch_offset=lg.log_end_offset,
                    current_leader_epoch=p.leader_epoch,
                    max_bytes=cfg.replica_fetch_max_bytes,
                )
            )
        if not parts:
            await asyncio.sleep(cfg.replica_fetch_backoff_ms / 1000)
            return False
        resp = await client.replica_fetch(
            wire.ReplicaFetchRequest(
                replica_id=rm.broker_id,
                max_wait_ms=cfg.replica_fetch_wait_max_ms,
                partitions=parts,
            )
        )
        got = 0
        for hdr, data in resp:
            got += len(data)
            self._apply(hdr, data)
        if got:
            await self.manager.throttle_follower(got, resp)
        return got > 0

    def _apply(self, hdr: wire.FetchPartitionHeader, data: bytes) -> None:
        rm = self.manager.replicas
        tp = TopicPartition(hdr.topic, hdr.partition)
        st = self.partitions.get(tp)
        lg = rm.logs.get_log(tp)
        if st is None or lg is None or rm.follower_state(tp) is None:
            return
        if hdr.error is not None:
            if hdr.error in (
                FencedLeaderEpochError.kafka_error,
                UnknownLeaderEpochError.kafka_error,
                NotLeaderOrFollowerError.kafka_error,
            ):
                st.needs_truncation = True
            elif hdr.error == OffsetOutOfRangeError.kafka_error:
                if hdr.log_start_offset > lg.log_end_offset:
                    lg.truncate_fully_and_start_at(hdr.log_start_offset)
                else:
                    st.needs_truncation = True
            return
        try:
            if data:
                lg.append_as_follower(data)
            # The log clamps the leader's HW to its own end, read under its lock on the log
            # that holds the data: ``lg`` may have been retired by a swap while the append
            # waited, and its end would lie below what was just appended (issue 14 item 2).
            lg.update_high_watermark(hdr.high_watermark)
        except KafkaStorageError:
            self.partitions.pop(tp, None)  # our directory failed; the log manager reports it
        except KafkaError as e:
            log.warning(
                "follower append failed",
                extra={"event": "follower_append_failed", "partition": str(tp), "error": str(e)},
            )
            st.needs_truncation = True


class FetcherManager:
    def __init__(self, replicas: ReplicaManager, token: str | None) -> None:
        self.replicas = replicas
        self.token = token
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._clients: dict[str, BrokerClient] = {}
        self.throttle = AsyncThrottle(replicas.config.follower_replication_throttled_rate)
        self.throttled_replicas: set[TopicPartition] = set()
        self.traffic = ReplicationTraffic()
        """The follower side of the reassignment and throttled byte counts (metrics)."""
        replicas.on_become_follower = self.add
        replicas.on_stop_following = self.remove

    def client_for(self, url: str) -> BrokerClient:
        c = self._clients.get(url)
        if c is None:
            c = BrokerClient(url, token=self.token, timeout_s=60)
            self._clients[url] = c
        return c

    def add(self, tp: TopicPartition, leader_id: int) -> None:
        self.remove(tp)
        f = self.fetchers.get(leader_id)
        if f is None:
            f = LeaderFetcher(self, leader_id)
            self.fetchers[leader_id] = f
            f.start()
        f.partitions[tp] = FetchState()
        f.wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        for f in self.fetchers.values():
            f.partitions.pop(tp, None)

    def followed(self) -> dict[TopicPartition, int]:
        return {tp: lid for lid, f in self.fetchers.items() for tp in f.partitions}

    async def throttle_follower(
        self, nbytes: int, resp: list[tuple[wire.FetchPartitionHeader, bytes]]
    ) -> None:
        throttled = sum(
            len(d)
            for h, d in resp
            if TopicPartition(h.topic, h.partition) in self.throttled_replicas
        )
        if throttled:
            # The follower-throttled replicas are the new replicas of a reassignment (the
            # controller lists them on their brokers): their bytes are reassignment traffic.
            self.traffic.follower_throttled_bytes += throttled
            self.traffic.reassignment_bytes_in += throttled
            await self.throttle.acquire(throttled)

    async def close(self) -> None:
        for f in self.fetchers.values():
            await f.stop()
        for c in self._clients.values():
            await c.close()
