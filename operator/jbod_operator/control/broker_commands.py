"""The one sender of the controller's commands to a BrokerCluster's brokers.

LeaderAndIsr (to one broker, with the partitions it holds), UpdateMetadata (to every live
broker) and StopReplica, each with this operator's controller epoch (the Lease's, which the pool
carries). The cluster controller's passes and partition creation, a PartitionReassignment's
steps and a Topic's deletion all send through here, so one rule holds for every command:

- a broker that is down or refuses is logged and passed over: every command is idempotent and
  a later pass sends the state of record again;
- a :class:`StaleControllerEpochError` (a broker follows a newer controller: the standby took
  the Lease) is always re-raised, so the operator steps down instead of carrying on as the
  controller (KIP-112 scenario 6). A sender that swallowed it, as the Topic handler's did,
  kept a deposed operator writing states nobody else would follow.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import KafkaError, StaleControllerEpochError

from ..clients.brokers import BrokerPool

log = logging.getLogger(__name__)

T = TypeVar("T")

CONTROLLER_ID = 0
"""The id every controller request carries: the operator is not a broker; the epoch fences."""
SLICE = 2000
"""Partitions in one LeaderAndIsr or UpdateMetadata: a broker parses a request before it can
slice its work (``jbod_broker.loop_slice``), so a request of 100,000 partitions would hold its
loop for the parse; longer lists go out as several requests, in order (issue 39)."""
SENDS_AT_ONCE = 16
"""Brokers an UpdateMetadata goes to at the same time."""


def slices(items: Sequence[T]) -> list[Sequence[T]]:
    """``items`` in runs of at most :data:`SLICE` (one empty run for an empty list: a request
    naming nothing still confirms the epoch)."""
    return [items[i : i + SLICE] for i in range(0, len(items), SLICE)] or [items[:0]]


class BrokerCommands:
    """The commands of one BrokerCluster's controller. Holds no state but where to send: the
    epoch is read from the pool at each send, so one taken over later is the one sent."""

    def __init__(self, pool: BrokerPool, namespace: str, cluster: str) -> None:
        self.pool, self.namespace, self.cluster = pool, namespace, cluster

    async def send(
        self, broker: int, what: str, call: Callable[[BrokerClient], Awaitable[T]]
    ) -> T | None:
        """``call`` on broker ``broker``'s client; None when the broker is down or refused
        (logged as ``<what>_failed``). A stale controller epoch is re-raised, always."""
        try:
            client = await self.pool.client(self.namespace, self.cluster, broker)
            return await call(client)
        except StaleControllerEpochError:
            raise
        except KafkaError as e:
            log.warning(
                "broker request failed",
                extra={"event": f"{what}_failed", "broker": broker, "error": str(e)},
            )
            return None

    def endpoints(self, live: Iterable[int]) -> list[wire.BrokerEndpoint]:
        return self.pool.endpoints(self.namespace, self.cluster, sorted(live))

    async def leader_and_isr(
        self, broker: int, partitions: Sequence[wire.LeaderAndIsrPartition], live: Iterable[int]
    ) -> wire.LeaderAndIsrResponse | None:
        """The partitions' states to one of their replicas, in slices; ``live``: the brokers
        whose endpoints it gets (the leaders it may follow). The answers joined, or None when
        a slice was not delivered (the ones after it are not sent)."""
        leaders = self.endpoints(live)
        answers: list[wire.PartitionResult] = []
        for part in slices(partitions):
            req = wire.LeaderAndIsrRequest(
                controller_id=CONTROLLER_ID,
                controller_epoch=self.pool.controller_epoch,
                partitions=list(part),
                live_leaders=leaders,
            )
            resp = await self.send(broker, "leader_and_isr", _call_leader_and_isr(req))
            if resp is None:
                return None
            answers += resp.partitions
        return wire.LeaderAndIsrResponse(partitions=answers)

    async def confirm_epoch(self, brokers: Iterable[int]) -> None:
        """A LeaderAndIsr naming no partition to each of ``brokers``: it changes nothing but
        raises :class:`StaleControllerEpochError` if one follows a newer controller. Sent
        before a write of the state of record that brokers are told of next: Kafka fences a
        deposed controller's ZooKeeper writes by the controller epoch's version
        (``KafkaZkClient``'s controller epoch check); the API server cannot check our epoch,
        the brokers can."""
        live = sorted(brokers)
        for b in live:
            await self.leader_and_isr(b, [], live)

    async def update_metadata(
        self, partitions: Sequence[wire.PartitionMetadata], live: Iterable[int]
    ) -> None:
        """The partitions' metadata to every live broker (the live ones are its brokers)."""
        await self.update_metadata_to(partitions, live, live)

    async def update_metadata_to(
        self,
        partitions: Sequence[wire.PartitionMetadata],
        brokers: Iterable[int],
        live: Iterable[int],
    ) -> set[int]:
        """The partitions' metadata to ``brokers``, in slices each serialised once for all of
        them (at 200,000 partitions and 50 brokers, encoding per broker was most of a pass),
        a few brokers at a time. Returns the brokers that took every slice."""
        ids, endpoints = sorted(brokers), self.endpoints(sorted(live))
        bodies = [
            wire.UpdateMetadataRequest(
                controller_id=CONTROLLER_ID,
                controller_epoch=self.pool.controller_epoch,
                live_brokers=endpoints,
                partitions=list(part),
            )
            .model_dump_json()
            .encode()
            for part in slices(partitions)
        ]
        gate = asyncio.Semaphore(SENDS_AT_ONCE)

        async def one(b: int) -> bool:
            async with gate:
                for body in bodies:
                    sent = await self.send(b, "update_metadata", _call_update_metadata(body))
                    if sent is None:
                        return False
                return True

        took = await asyncio.gather(*(one(b) for b in ids))
        return {b for b, ok in zip(ids, took, strict=True) if ok}

    async def stop_replica(
        self,
        broker: int,
        partitions: Sequence[wire.StopReplicaPartition],
        what: str = "stop_replica",
    ) -> wire.StopReplicaResponse | None:
        """StopReplica to one broker; None when it was not delivered."""
        req = wire.StopReplicaRequest(
            controller_id=CONTROLLER_ID,
            controller_epoch=self.pool.controller_epoch,
            partitions=list(partitions),
        )
        return await self.send(broker, what, lambda c: c.stop_replica(req))


def _call_leader_and_isr(
    req: wire.LeaderAndIsrRequest,
) -> Callable[[BrokerClient], Awaitable[wire.LeaderAndIsrResponse]]:
    return lambda c: c.leader_and_isr(req)


def _call_update_metadata(body: bytes) -> Callable[[BrokerClient], Awaitable[bool]]:
    return lambda c: c.update_metadata_body(body)
