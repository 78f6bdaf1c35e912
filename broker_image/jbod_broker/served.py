"""What the broker's front ends see of the broker: small Protocols, not the composition root.

The Kafka listener, its API handlers and the metrics are made by
:class:`~jbod_broker.broker.Broker` and serve it, so typing them against ``Broker`` itself made
an import circle (broker <-> metrics, broker <-> kafka.listener <-> kafka.apis). They name
instead the few parts they use, as Kafka's ``KafkaApis`` is handed its ``ReplicaManager``,
``MetadataCache`` and quotas rather than ``KafkaServer``; ``Broker`` satisfies both Protocols
structurally, and these imports point only down the layers (see pyproject's contracts).
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from .config import BrokerConfig
from .controller_channel import ControllerChannel
from .fetcher import FetcherManager
from .moves import MoveService
from .producer_ids import ProducerIdManager
from .replica_manager import ReplicaManager
from .request_memory import RequestMemoryPool
from .storage.handles import OpenFileBudget
from .storage.log_manager import LogManager
from .throttle import LeaderThrottle


class ServedBroker(Protocol):
    """What the Kafka listener (:mod:`~jbod_broker.kafka.listener`) and its API handlers
    (:mod:`~jbod_broker.kafka.apis`) use of the broker they serve."""

    slow_bodies: int
    """Request bodies refused for arriving too slowly; the listener counts its own here."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def fetchers(self) -> FetcherManager: ...
    @property
    def leader_throttle(self) -> LeaderThrottle: ...
    @property
    def producer_ids(self) -> ProducerIdManager: ...
    @property
    def request_memory(self) -> RequestMemoryPool: ...
    @property
    def kafka_endpoint(self) -> str | None: ...


class ListenerStats(Protocol):
    """The Kafka listener's counts, as the metrics read them."""

    @property
    def requests(self) -> Counter[str]: ...
    @property
    def closed_for_errors(self) -> int: ...
    @property
    def open_connections(self) -> int: ...


class MeasuredBroker(ServedBroker, Protocol):
    """What :class:`~jbod_broker.metrics.BrokerMetrics` reads at scrape time, beyond what the
    Kafka side uses."""

    @property
    def moves(self) -> MoveService: ...
    @property
    def body_timeouts(self) -> int: ...
    @property
    def open_files(self) -> OpenFileBudget: ...
    @property
    def controller(self) -> ControllerChannel | None: ...
    @property
    def kafka(self) -> ListenerStats | None: ...
