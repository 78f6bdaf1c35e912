"""Follower fetchers: one task per leader broker pulls the partitions this broker follows.

Kafka's ``ReplicaFetcherThread``, over Kafka's own protocol (issue 18): the follower talks to
the leader's Kafka listener (its advertised endpoint, from the broker endpoints the controller
sends in LeaderAndIsr and UpdateMetadata) on one connection per leader, with kio's entities
(:mod:`.kafka.client`). Before fetching a partition whose leader changed, the follower sends
OffsetForLeaderEpoch for its own latest leader epoch and truncates at the answer, so the new
leader's log wins (KIP-101/KIP-279). Then Fetch requests carrying this broker's id as
``replica_id`` pull every followed partition in one request per round; the batches are
appended with their offsets as they came (``append_as_follower``: no record is decoded). The
follower's high watermark is the leader's, capped by its own log end. The inter-broker
throttle (``follower.replication.throttled.rate``) applies only to throttled replicas, as in
Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from . import wire
from .errors import KafkaError
from .kafka import protocol
from .kafka.client import KafkaConnection
from .kafka.protocol import make, request_module
from .replica_manager import ReplicaManager
from .storage.errors import KafkaStorageError
from .storage.names import TopicPartition
from .throttle import AsyncThrottle, ReplicationTraffic

log = logging.getLogger(__name__)

FETCH_VERSION = protocol.SUPPORTED[protocol.FETCH][1]
OFFSET_FOR_LEADER_EPOCH_VERSION = protocol.SUPPORTED[protocol.OFFSET_FOR_LEADER_EPOCH][1]
"""The newest versions the listener serves: every broker runs the same code."""
REPLICA_FETCH_RESPONSE_MAX_BYTES = 16 * 1024 * 1024
"""A follower fetch's response ``max_bytes`` over all its partitions (each within
``replica.fetch.max.bytes``; the first batch always whole, KIP-74)."""
REQUEST_TIMEOUT_S = 30.0
"""How long an answer may take beyond a fetch's long poll before the connection is dropped."""
REFETCH_AFTER = (
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.not_leader_or_follower,
)
"""Partition errors after which the follower asks for epoch end offsets again (the leader's
view of the partition changed; the controller's LeaderAndIsr may be on its way)."""


@dataclass
class FetchState:
    needs_truncation: bool = True
    entry: Any = None
    """The partition's entry of the last Fetch built, reused while ``entry_key`` holds: a
    partition with nothing new keeps its offsets, and building the entry was a sixth of a
    follower's round."""
    entry_key: tuple[int, ...] = ()
    """(leader epoch, fetch offset, log start offset, max bytes) the entry was built for."""


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch response, as the follower applies it."""

    tp: TopicPartition
    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: bytes


class LeaderFetcher:
    """Fetches every followed partition led by one broker, in one request per round."""

    def __init__(self, manager: FetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, FetchState] = {}
        self.task: asyncio.Task[None] | None = None
        self.wakeup = asyncio.Event()
        self.connection: KafkaConnection | None = None
        """The one connection to the leader's Kafka listener (replaced if its endpoint
        changes)."""
        self._warned_no_endpoint = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        if self.connection is not None:
            await self.connection.close()

    async def _connection(self) -> KafkaConnection | None:
        """The connection to the leader's advertised Kafka listener; ``None`` while the
        controller has not said where that is (the leader has not heartbeated yet, or has no
        ``kafka.listeners``): the fetcher waits for the next LeaderAndIsr or UpdateMetadata."""
        rm = self.manager.replicas
        ep = rm.brokers.get(self.leader_id)
        if ep is None or ep.kafka_endpoint is None:
            if not self._warned_no_endpoint:
                self._warned_no_endpoint = True
                log.warning(
                    "no Kafka endpoint known for the leader; replication from it waits",
                    extra={"event": "leader_endpoint_unknown", "leader": self.leader_id},
                )
            return None
        self._warned_no_endpoint = False
        host, port = wire.split_kafka_endpoint(ep.kafka_endpoint)
        c = self.connection
        if c is not None and (c.host, c.port) != (host, port):
            await c.close()
            c = None
        if c is None:
            c = self.connection = KafkaConnection(
                host,
                port,
                client_id=f"replica-{rm.broker_id}",
                max_response_bytes=rm.config.socket_request_max_bytes,
            )
        return c

    async def _run(self) -> None:
        cfg = self.manager.replicas.config
        backoff = cfg.replica_fetch_backoff_ms / 1000
        while True:
            try:
                if not self.partitions:
                    self.wakeup.clear()
                    await self.wakeup.wait()
                    continue
                conn = await self._connection()
                if conn is None:
                    await asyncio.sleep(backoff)
                    continue
                await self._truncate(conn)
                progressed = await self._fetch_once(conn)
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

    async def _truncate(self, conn: KafkaConnection) -> None:
        rm = self.manager.replicas
        todo = [tp for tp, st in self.partitions.items() if st.needs_truncation]
        if not todo:
            return
        m = request_module(protocol.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION)
        by_topic: dict[str, list[Any]] = {}
        for tp in todo:
            p = rm.follower_state(tp)
            lg = rm.logs.get_log(tp)
            if p is None or lg is None:
                self.partitions.pop(tp, None)
                continue
            by_topic.setdefault(tp.topic, []).append(
                make(
                    m.OffsetForLeaderPartition,
                    partition=tp.partition,
                    current_leader_epoch=p.leader_epoch,
                    leader_epoch=lg.epochs.latest_epoch,
                )
            )
        if not by_topic:
            return
        resp = await conn.request(
            make(
                m.OffsetForLeaderEpochRequest,
                replica_id=rm.broker_id,
                topics=tuple(
                    make(m.OffsetForLeaderTopic, topic=t, partitions=tuple(ps))
                    for t, ps in by_topic.items()
                ),
            ),
            REQUEST_TIMEOUT_S,
        )
        for t in resp.topics:
            for res in t.partitions:
                tp = TopicPartition(t.topic, int(res.partition))
                lg = rm.logs.get_log(tp)
                if lg is None or tp not in self.partitions:
                    continue
                if res.error_code != ErrorCode.none:
                    continue  # leader not ready for this epoch yet: try again next round
                if res.leader_epoch < 0:
                    target = lg.high_watermark  # the leader knows none of our epochs
                else:
                    _, own_end = lg.epochs.end_offset_for(int(res.leader_epoch), lg.log_end_offset)
                    target = min(
                        int(res.end_offset), own_end if own_end >= 0 else lg.log_end_offset
                    )
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

    async def _fetch_once(self, conn: KafkaConnection) -> bool:
        rm = self.manager.replicas
        cfg = rm.config
        m = request_module(protocol.FETCH, FETCH_VERSION)
        by_topic: dict[str, list[Any]] = {}
        for tp, st in list(self.partitions.items()):
            if st.needs_truncation:
                continue
            p = rm.follower_state(tp)
            lg = rm.logs.get_log(tp)
            if p is None or lg is None:
                self.partitions.pop(tp, None)
                continue
            key = (
                p.leader_epoch,
                lg.log_end_offset,
                lg.log_start_offset,
                cfg.replica_fetch_max_bytes,
            )
            if st.entry_key != key:
                st.entry_key = key
                st.entry = make(
                    m.FetchPartition,
                    partition=tp.partition,
                    current_leader_epoch=p.leader_epoch,
                    fetch_offset=lg.log_end_offset,
                    last_fetched_epoch=-1,
                    log_start_offset=lg.log_start_offset,
                    partition_max_bytes=cfg.replica_fetch_max_bytes,
                )
            by_topic.setdefault(tp.topic, []).append(st.entry)
        if not by_topic:
            await asyncio.sleep(cfg.replica_fetch_backoff_ms / 1000)
            return False
        wait_ms = cfg.replica_fetch_wait_max_ms
        resp = await conn.request(
            make(
                m.FetchRequest,
                replica_id=rm.broker_id,
                max_wait=datetime.timedelta(milliseconds=wait_ms),
                min_bytes=1,
                max_bytes=REPLICA_FETCH_RESPONSE_MAX_BYTES,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,  # no fetch session: full fetches (KIP-227)
                topics=tuple(
                    make(m.FetchTopic, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
                ),
                forgotten_topics_data=(),
                rack_id="",
            ),
            wait_ms / 1000 + REQUEST_TIMEOUT_S,
        )
        if resp.error_code != ErrorCode.none:
            raise LeaderFetchError(f"leader {self.leader_id} answered Fetch with {resp.error_code}")
        parts = [
            FetchedPartition(
                tp=TopicPartition(t.topic, int(p.partition_index)),
                error=p.error_code,
                high_watermark=int(p.high_watermark),
                log_start_offset=int(p.log_start_offset),
                records=p.records or b"",
            )
            for t in resp.responses
            for p in t.partitions
        ]
        got = 0
        for part in parts:
            got += len(part.records)
            self._apply(part)
        if got:
            await self.manager.throttle_follower(parts)
        return got > 0

    def _apply(self, part: FetchedPartition) -> None:
        rm = self.manager.replicas
        tp = part.tp
        st = self.partitions.get(tp)
        lg = rm.logs.get_log(tp)
        if st is None or lg is None or rm.follower_state(tp) is None:
            return
        if part.error != ErrorCode.none:
            if part.error in REFETCH_AFTER:
                st.needs_truncation = True
            elif part.error == ErrorCode.offset_out_of_range:
                if part.log_start_offset > lg.log_end_offset:
                    lg.truncate_fully_and_start_at(part.log_start_offset)
                else:
                    st.needs_truncation = True
            return
        try:
            if part.records:
                lg.append_as_follower(part.records)
            # The log clamps the leader's HW to its own end, read under its lock on the log
            # that holds the data: ``lg`` may have been retired by a swap while the append
            # waited, and its end would lie below what was just appended (issue 14 item 2).
            lg.update_high_watermark(part.high_watermark)
        except KafkaStorageError:
            self.partitions.pop(tp, None)  # our directory failed; the log manager reports it
        except KafkaError as e:
            log.warning(
                "follower append failed",
                extra={"event": "follower_append_failed", "partition": str(tp), "error": str(e)},
            )
            st.needs_truncation = True


class LeaderFetchError(KafkaError):
    """The leader refused a whole Fetch (a top-level error code): back off and retry."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class FetcherManager:
    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        self.fetchers: dict[int, LeaderFetcher] = {}
        self.throttle = AsyncThrottle(replicas.config.follower_replication_throttled_rate)
        self.throttled_replicas: set[TopicPartition] = set()
        self.traffic = ReplicationTraffic()
        """The follower side of the reassignment and throttled byte counts (metrics)."""
        replicas.on_become_follower = self.add
        replicas.on_stop_following = self.remove

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

    async def throttle_follower(self, parts: list[FetchedPartition]) -> None:
        throttled = sum(len(p.records) for p in parts if p.tp in self.throttled_replicas)
        if throttled:
            # The follower-throttled replicas are the new replicas of a reassignment (the
            # controller lists them on their brokers): their bytes are reassignment traffic.
            self.traffic.follower_throttled_bytes += throttled
            self.traffic.reassignment_bytes_in += throttled
            await self.throttle.acquire(throttled)

    async def close(self) -> None:
        for f in self.fetchers.values():
            await f.stop()
