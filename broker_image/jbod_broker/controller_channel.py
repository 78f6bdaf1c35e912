"""Requests from the broker to the controller: AlterPartition and log dir failure events.

Both are retried with exponential backoff until the controller acknowledges; the broker keeps
serving meanwhile (a pending ISR change keeps the *maximal* ISR for the high watermark). A log
dir failure event is never dropped: KIP-112's controller must learn which replicas went offline.
An AlterPartition is retried only while its partition still waits on that proposal
(``still_pending``, as Kafka's ``Partition`` retries only while its state is the proposed
one): one a LeaderAndIsr overtook is dropped, not sent to be refused.

Heartbeats tell the controller the broker is alive. ``controller.url`` may list several
addresses (comma-separated); a standby operator answers 503, and the channel moves on to the
next address until it finds the active one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable

import aiohttp

from . import wire

log = logging.getLogger(__name__)

ALTER_PARTITION = "/v1/controller/alter-partition"
LOG_DIR_EVENT = "/v1/controller/log-dir-event"
HEARTBEAT = "/v1/controller/heartbeat"
ALLOCATE_PRODUCER_IDS = "/v1/controller/allocate-producer-ids"


class ControllerChannel:
    def __init__(
        self,
        url: str,
        *,
        broker_id: int,
        token: str | None,
        on_alter_partition: Callable[[wire.AlterPartitionResult], None],
        backoff_ms: int = 200,
        backoff_max_ms: int = 5000,
        heartbeat_interval_ms: int = 1000,
        offline_dirs: Callable[[], list[str]] = list,
        kafka_endpoint: Callable[[], str | None] = lambda: None,
        still_pending: Callable[[wire.AlterPartitionItem], bool] = lambda item: True,
    ) -> None:
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        self._current = 0
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.offline_dirs = offline_dirs
        self.kafka_endpoint = kafka_endpoint
        """The broker's advertised Kafka listener, sent with every heartbeat (issue 18)."""
        self.heartbeats_sent = 0
        self.broker_id = broker_id
        self.token = token
        self.on_alter_partition = on_alter_partition
        self.still_pending = still_pending
        self.backoff_ms = backoff_ms
        self.backoff_max_ms = backoff_max_ms
        self._isr: dict[tuple[str, int], wire.AlterPartitionItem] = {}
        self._events: list[wire.LogDirEvent] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._beat: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self.sent_events = 0
        self.incarnation = uuid.uuid4().hex
        """Drawn once per process (``BrokerHeartbeat.incarnation``)."""

    @property
    def url(self) -> str:
        return self.urls[self._current % len(self.urls)]

    def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        self._beat = loop.create_task(self._heartbeats())

    async def _heartbeats(self) -> None:
        while True:
            try:
                await self._post(
                    HEARTBEAT,
                    wire.BrokerHeartbeat(
                        broker_id=self.broker_id,
                        offline_log_dirs=self.offline_dirs(),
                        kafka_endpoint=self.kafka_endpoint(),
                        incarnation=self.incarnation,
                    ),
                )
                self.heartbeats_sent += 1
            except asyncio.CancelledError:
                raise
            except Exception:
                pass
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)

    async def close(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._beat
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._session is not None:
            await self._session.close()

    def alter_partition(self, item: wire.AlterPartitionItem) -> None:
        self._isr[(item.topic, item.partition)] = item  # the newest proposal replaces older
        self._wake.set()

    def _drop_overtaken(self) -> None:
        """Before each send (a retry included), re-read each proposal's partition: one no
        longer pending as proposed is dropped."""
        for key, item in list(self._isr.items()):
            if not self.still_pending(item):
                del self._isr[key]

    def log_dir_failed(self, event: wire.LogDirEvent) -> None:
        self._events.append(event)
        self._wake.set()

    async def allocate_producer_ids(self) -> wire.AllocateProducerIdsResponse:
        """One block of producer ids from the active controller (one attempt per address).

        Not queued like AlterPartition: InitProducerId waits for it, and a failure is answered
        COORDINATOR_LOAD_IN_PROGRESS (retriable) by the caller, as Kafka does.
        """
        req = wire.AllocateProducerIdsRequest(broker_id=self.broker_id)
        last: Exception | None = None
        for _ in self.urls:
            try:
                data = await self._post(ALLOCATE_PRODUCER_IDS, req)
                return wire.AllocateProducerIdsResponse.model_validate_json(data)
            except (aiohttp.ClientError, TimeoutError, RuntimeError, ValueError) as e:
                last = e
        raise RuntimeError(f"no producer-id block from the controller: {last}")

    @property
    def pending(self) -> int:
        return len(self._isr) + len(self._events)

    async def _post(self, path: str, body: wire.Model) -> bytes:
        assert self._session is not None
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = self.url
        try:
            async with self._session.post(
                url + path, data=body.model_dump_json().encode(), headers=headers
            ) as resp:
                data = await resp.read()
                if resp.status == 503:
                    raise RuntimeError(f"{url} is not the active controller")
                if resp.status >= 400:
                    raise RuntimeError(f"controller answered {resp.status}: {data[:300]!r}")
                return data
        except (aiohttp.ClientError, TimeoutError, RuntimeError):
            if self.urls[self._current % len(self.urls)] == url:
                self._current += 1  # try the next address next time
            raise

    async def _run(self) -> None:
        delay = self.backoff_ms
        while True:
            if not self._isr and not self._events:
                self._wake.clear()
                await self._wake.wait()
            self._drop_overtaken()
            try:
                while self._events:
                    await self._post(LOG_DIR_EVENT, self._events[0])
                    self._events.pop(0)
                    self.sent_events += 1
                if self._isr:
                    items = list(self._isr.values())
                    req = wire.AlterPartitionRequest(broker_id=self.broker_id, partitions=items)
                    data = await self._post(ALTER_PARTITION, req)
                    resp = wire.AlterPartitionResponse.model_validate_json(data)
                    for item in items:
                        if self._isr.get((item.topic, item.partition)) is item:
                            del self._isr[(item.topic, item.partition)]
                    for res in resp.partitions:
                        self.on_alter_partition(res)
                delay = self.backoff_ms
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning(
                    "controller request failed; will retry",
                    extra={"event": "controller_retry", "error": str(e), "delay_ms": delay},
                )
                await asyncio.sleep(delay / 1000)
                delay = min(delay * 2, self.backoff_max_ms)
