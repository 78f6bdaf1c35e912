"""The composition root: everything one broker process owns, wired together.

:class:`Broker` makes the storage (``LogManager``), replication (``ReplicaManager``, the
fetchers), the log-dir moves, the request-memory pool, the controller channel, the Kafka
listener and the metrics, and runs their background duties; the HTTP server
(:mod:`~jbod_broker.server`) and the Kafka listener drive it. Those it makes see it through
the Protocols in :mod:`~jbod_broker.served`, never through this module, so nothing below
imports it (Kafka's ``KafkaServer`` / ``BrokerServer`` is the same kind of root).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable

from . import wire
from .config import BrokerConfig
from .controller_channel import ControllerChannel
from .fetcher import FetcherManager
from .kafka.listener import KafkaListener
from .loop_slice import settle_long_lived
from .metrics import BrokerMetrics
from .moves import MoveService
from .producer_ids import ProducerIdManager
from .replica_manager import ReplicaManager
from .request_memory import RequestMemoryPool
from .storage.handles import FileHandles, raise_open_file_limit
from .storage.log_manager import LogManager, StartupReport
from .storage.names import TopicPartition
from .throttle import LeaderThrottle

log = logging.getLogger(__name__)


class Broker:
    """Everything one broker process owns, wired together; the aiohttp app drives it."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.token = config.read_token()
        # Compared with every request's bearer token: encoded once, not per request.
        self.token_bytes = self.token.encode() if self.token is not None else None
        # Issue 14: as many descriptors as the process may have, and the storage's share of
        # them said once; replicas hold none while idle (storage.handles).
        self.open_files = raise_open_file_limit()
        log.info(
            "open-file budget",
            extra={
                "event": "open_file_budget",
                "limit": self.open_files.limit,
                "hard_limit": self.open_files.hard_limit,
                "limit_at_start": self.open_files.limit_at_start,
                "log_handles_max": self.open_files.log_handles,
            },
        )
        self.logs = LogManager(
            config.log_dirs,
            broker_id=config.broker_id,
            cluster_id=config.cluster_id,
            default_config=config.log_config(),
            headroom=config.headroom,
            handles=FileHandles(self.open_files.log_handles),
        )
        self.replicas = ReplicaManager(config, self.logs)
        self.fetchers = FetcherManager(self.replicas)
        self.moves = MoveService(self.logs, config)
        self.request_memory = RequestMemoryPool(config.queued_max_request_bytes)
        self.body_timeouts = 0
        """Requests answered 408 because their body was slower than request.body.timeout.ms."""
        self.slow_bodies = 0
        """Request bodies refused (HTTP 408, Kafka: connection closed) for arriving slower than
        request.body.min.bytes.per.second, on either listener."""
        self.metrics = BrokerMetrics(self)
        self.controller: ControllerChannel | None = None
        self.producer_ids = ProducerIdManager(self._producer_id_block)
        """InitProducerId (issue 18): the protocol listener calls ``init_producer_id()``."""
        self.startup_report: StartupReport | None = None
        self.ready = False
        self.halted: str | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.leader_throttle = LeaderThrottle(config.leader_replication_throttled_rate)
        self.kafka: KafkaListener | None = (
            KafkaListener(self) if config.kafka_listeners is not None else None
        )
        """The Kafka protocol listener (issue 18), when ``kafka.listeners`` is set."""

    @property
    def kafka_endpoint(self) -> str | None:
        """``HOST:PORT`` Kafka clients are told to reach this broker at (Metadata, and the
        controller through heartbeats); ``None`` until the listener is bound, or without one.
        An advertised port 0 means the port the listener was given."""
        adv = self.config.kafka_advertised
        if adv is None or self.kafka is None or not self.kafka.port:
            return None
        host, port = adv
        host = f"[{host}]" if ":" in host else host
        return f"{host}:{port or self.kafka.port}"

    async def _producer_id_block(self) -> tuple[int, int]:
        """A block of producer ids from the controller (see ``producer_ids``)."""
        if self.controller is None:
            raise RuntimeError("no controller.url: producer ids come from the controller")
        block = await self.controller.allocate_producer_ids()
        return block.first_producer_id, block.count

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._warn_if_open()
        self.logs.on_no_live_dirs(self._halt)
        self.logs.add_offline_listener(self._dir_offline)
        self.startup_report = await self._loop.run_in_executor(None, self.moves.start_storage)
        if self.kafka is not None:
            # Bound before the first heartbeat, which tells the controller where it is.
            await self.kafka.start()
        if self.config.controller_url:
            self.controller = ControllerChannel(
                self.config.controller_url,
                broker_id=self.config.broker_id,
                token=self.token,
                on_alter_partition=self.replicas.alter_partition_done,
                still_pending=self.replicas.alter_partition_pending,
                backoff_ms=self.config.controller_retry_backoff_ms,
                backoff_max_ms=self.config.controller_retry_backoff_max_ms,
                heartbeat_interval_ms=self.config.broker_heartbeat_interval_ms,
                offline_dirs=lambda: sorted(self.logs.offline_dirs()),
                kafka_endpoint=lambda: self.kafka_endpoint,
            )
            self.controller.start()
            self.replicas.send_alter_partition = self.controller.alter_partition
            for d, reason in self.logs.offline_dirs().items():
                self.controller.log_dir_failed(
                    wire.LogDirEvent(
                        broker=self.config.broker_id, log_dir=d, reason=reason, offline_replicas=[]
                    )
                )
        self.moves.start()
        c = self.config
        self._every(max(c.replica_lag_time_max_ms // 2, 50), self.replicas.shrink_isr_pass)
        self._every(c.log_flush_interval_ms, self._blocking(self.logs.flush_all))
        self._every(c.checkpoint_interval_ms, self._blocking(self.logs.checkpoint))
        self._every(c.log_retention_check_interval_ms, self._blocking(self.logs.cleanup))
        self._every(1000, self._blocking(self.moves.run_deletions))
        # What start-up built (modules, the loaded logs' indexes and state) lives as long as
        # the process: out of the collector's sight, a full collection walks only what came
        # since. Without it each full collection held the loop 30-56 ms on this machine, and
        # readiness missed its 100 ms under load (issue 14).
        settle_long_lived()
        self.ready = True
        log.info("broker started", extra={"event": "broker_started", "broker": c.broker_id})

    def _warn_if_open(self) -> None:
        """Say loudly at start what anyone reaching the port may do without a token."""
        if self.token is None:
            log.warning(
                "auth.disabled=true and no token.file: every endpoint, admin and controller "
                "included, is open to anyone who reaches the port",
                extra={"event": "auth_open", "paths": "all"},
            )
        elif not self.config.data_auth_required:
            log.warning(
                "data.auth.required=false: produce, fetch, list-offsets and metadata need no "
                "token; anyone who reaches the port can write to every topic and make the "
                "broker read bodies of up to socket.request.max.bytes",
                extra={"event": "auth_open", "paths": "/v1/data/"},
            )

    def _blocking(self, fn: Callable[[], object]) -> Callable[[], Awaitable[object]]:
        async def run() -> object:
            assert self._loop is not None
            return await self._loop.run_in_executor(None, fn)

        return run

    def _every(self, interval_ms: int, fn: Callable[[], object]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                try:
                    res = fn()
                    if asyncio.iscoroutine(res):
                        await res
                except Exception:
                    log.exception(
                        "periodic task failed", extra={"task": getattr(fn, "__name__", "")}
                    )

        self._tasks.append(asyncio.get_running_loop().create_task(loop()))

    async def stop(self) -> None:
        """Graceful shutdown: stop fetching and moving, flush, checkpoint, mark clean."""
        self.ready = False
        if self.kafka is not None:
            await self.kafka.stop()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.fetchers.close()
        assert self._loop is not None
        await self._loop.run_in_executor(None, self.moves.shutdown)
        if self.controller is not None:
            await self.controller.close()
        await self._loop.run_in_executor(None, self.logs.shutdown)
        log.info("broker stopped", extra={"event": "broker_stopped"})

    def _halt(self, reason: str) -> None:
        """KIP-112: a broker with no live log directory stops."""
        self.halted = reason
        self.ready = False
        log.critical("no live log directory; stopping", extra={"event": "halt", "reason": reason})
        if self._loop is not None and self.startup_report is not None:  # not during start-up
            self._loop.call_soon_threadsafe(lambda: os.kill(os.getpid(), signal.SIGTERM))

    def _dir_offline(self, d: str, reason: str, tps: list[TopicPartition]) -> None:
        def on_loop() -> None:
            self.replicas.replicas_offline(tps)
            if self.controller is not None:
                self.controller.log_dir_failed(
                    wire.LogDirEvent(
                        broker=self.config.broker_id,
                        log_dir=d,
                        reason=reason,
                        offline_replicas=[
                            wire.ReplicaRef(topic=tp.topic, partition=tp.partition) for tp in tps
                        ],
                    )
                )

        if self._loop is not None:
            self._loop.call_soon_threadsafe(on_loop)
