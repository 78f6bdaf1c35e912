"""Prometheus metrics of one broker, on a registry of its own (tests run several in a process).

Names follow Kafka's JMX beans where one exists (OfflineLogDirectoryCount, OfflineReplicaCount,
UnderReplicatedPartitions, IsrShrinks/IsrExpands, BytesIn/BytesOut, ReassignmentBytesIn/Out and
the replication quotas' byte-rate) in Prometheus style: Kafka's PerSec meters are ``_total``
counters here, ``rate()`` gives the per-second figure.
Gauges are read at scrape time from the live objects, so they cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .storage.handles import open_file_count

if TYPE_CHECKING:
    from .served import MeasuredBroker


class BrokerMetrics:
    """The broker's metrics, registered group by group (each group reads one component)."""

    def __init__(self, broker: MeasuredBroker) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "jbod_request_seconds",
            "Request latency by route",
            ["route", "method", "status"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self._latency_children: dict[tuple[str, str, int], Histogram] = {}
        """``latency``'s labelled children by (route, method, status), as :meth:`observe`
        made them."""
        self._storage_and_partitions(broker)
        self._replication_traffic(broker)
        self._log_dir_moves(broker)
        self._request_memory(broker)
        self._open_files(broker)
        self._kafka_and_controller(broker)

    def _gauge(self, name: str, doc: str, fn: Callable[[], float]) -> None:
        g = Gauge(name, doc, registry=self.registry)
        g.set_function(fn)

    def _counter_fn(self, name: str, doc: str, fn: Callable[[], float]) -> None:
        """Monotonic totals kept by the components; exported as gauges of a counter's value
        (read at scrape time, they cannot drift from the component's own count)."""
        g = Gauge(name, doc, registry=self.registry)
        g.set_function(fn)

    def _storage_and_partitions(self, broker: MeasuredBroker) -> None:
        """KIP-112's offline counts, the partitions hosted and led, bytes and writes of produce."""
        rm = broker.replicas
        lm = broker.logs
        self._gauge(
            "jbod_offline_log_directory_count",
            "OfflineLogDirectoryCount (KIP-112)",
            lambda: lm.offline_log_dir_count,
        )
        self._gauge(
            "jbod_offline_replica_count",
            "OfflineReplicaCount (KIP-112)",
            lambda: lm.offline_replica_count,
        )
        self._gauge(
            "jbod_under_replicated_partitions",
            "Led partitions whose ISR is smaller than their replica set",
            lambda: rm.under_replicated,
        )
        self._gauge("jbod_partitions", "Partitions hosted", lambda: len(rm.partitions))
        self._gauge(
            "jbod_leader_partitions",
            "Partitions led",
            lambda: sum(1 for p in rm.partitions.values() if p.leader == rm.broker_id),
        )
        self._counter_fn(
            "jbod_bytes_in_total", "Bytes produced to this broker", lambda: rm.bytes_in
        )
        self._counter_fn(
            "jbod_bytes_out_total", "Bytes fetched from this broker", lambda: rm.bytes_out
        )
        self._counter_fn(
            "jbod_produce_writes_total",
            "Log writes made for produce requests (group commit: one per group)",
            lambda: rm.append_writes,
        )
        self._counter_fn(
            "jbod_produce_requests_appended_total",
            "Produce requests appended (divide by writes for the mean group size)",
            lambda: rm.append_requests,
        )

    def _replication_traffic(self, broker: MeasuredBroker) -> None:
        """Reassignment and throttled replication bytes (Kafka's quota byte-rates), the
        throttles in force, ISR changes."""
        rm = broker.replicas
        traffic = broker.fetchers.traffic
        self._counter_fn(
            "jbod_reassignment_bytes_in_total",
            "ReassignmentBytesInPerSec: bytes fetched for this broker's new replicas of a "
            "reassignment (its follower-throttled replicas)",
            lambda: traffic.reassignment_bytes_in,
        )
        self._counter_fn(
            "jbod_reassignment_bytes_out_total",
            "ReassignmentBytesOutPerSec: bytes served to new replicas of a reassignment "
            "(leader-throttled partitions, followers outside the ISR)",
            lambda: traffic.reassignment_bytes_out,
        )
        self._counter_fn(
            "jbod_leader_replication_throttled_bytes_total",
            "LeaderReplication byte-rate: bytes served for leader-throttled replicas, "
            "counted against leader.replication.throttled.rate",
            lambda: traffic.leader_throttled_bytes,
        )
        self._counter_fn(
            "jbod_follower_replication_throttled_bytes_total",
            "FollowerReplication byte-rate: bytes fetched for follower-throttled replicas, "
            "counted against follower.replication.throttled.rate",
            lambda: traffic.follower_throttled_bytes,
        )
        self._gauge(
            "jbod_leader_replication_throttled_rate_bytes",
            "leader.replication.throttled.rate (bytes/s; 0: unlimited)",
            lambda: broker.leader_throttle.rate,
        )
        self._gauge(
            "jbod_follower_replication_throttled_rate_bytes",
            "follower.replication.throttled.rate (bytes/s; 0: unlimited)",
            lambda: broker.fetchers.throttle.rate,
        )
        self._counter_fn("jbod_isr_shrinks_total", "ISR shrinks", lambda: rm.isr_shrinks)
        self._counter_fn("jbod_isr_expands_total", "ISR expands", lambda: rm.isr_expands)

    def _log_dir_moves(self, broker: MeasuredBroker) -> None:
        """Log-dir moves (KIP-113): bytes copied, rate, queue."""
        self._counter_fn(
            "jbod_log_dir_move_bytes_total",
            "Bytes copied by log-dir moves",
            lambda: broker.moves.bytes_copied,
        )
        self._gauge(
            "jbod_log_dir_move_rate_bytes",
            "Current log-dir move rate (bytes/s)",
            lambda: broker.moves.current_rate,
        )
        self._gauge(
            "jbod_log_dir_moves_in_progress",
            "Log-dir moves queued or running",
            lambda: broker.moves.in_progress,
        )

    def _request_memory(self, broker: MeasuredBroker) -> None:
        """The request-memory pool (queued.max.request.bytes) and the bodies refused for
        their pace (issue 14)."""
        pool = broker.request_memory
        self._gauge(
            "jbod_request_memory_used_bytes",
            "Request-memory pool (queued.max.request.bytes): bytes reserved by request bodies",
            lambda: pool.used,
        )
        self._gauge(
            "jbod_request_memory_available_bytes",
            "Request-memory pool: bytes free for request bodies",
            lambda: pool.available,
        )
        self._gauge(
            "jbod_request_memory_waiting_requests",
            "Requests waiting for the request-memory pool before their body is read",
            lambda: pool.waiting,
        )
        self._gauge(
            "jbod_request_memory_stalled",
            "1 while a request has waited for the request-memory pool for "
            "request_memory.STALLED_AFTER_S or longer (also in /readyz)",
            lambda: float(pool.stalled),
        )
        self._gauge(
            "jbod_request_memory_oldest_wait_seconds",
            "How long the oldest request waiting for the request-memory pool has waited",
            lambda: pool.oldest_wait_s,
        )
        self._counter_fn(
            "jbod_request_memory_depleted_seconds_total",
            "Time some request waited for the request-memory pool (Kafka's "
            "MemoryPoolDepletedTimeTotal)",
            lambda: pool.depleted_s,
        )
        self._counter_fn(
            "jbod_request_body_too_slow_total",
            "Request bodies refused for arriving slower than "
            "request.body.min.bytes.per.second (HTTP 408, Kafka: connection closed)",
            lambda: broker.slow_bodies,
        )
        self._counter_fn(
            "jbod_request_body_timeouts_total",
            "Requests answered 408: body slower than request.body.timeout.ms",
            lambda: broker.body_timeouts,
        )

    def _open_files(self, broker: MeasuredBroker) -> None:
        """Issue 14: the open-file budget (raised to the hard limit at start) and its use."""
        lm = broker.logs
        self._gauge(
            "jbod_open_file_limit",
            "RLIMIT_NOFILE in force (raised to the hard limit at start)",
            lambda: broker.open_files.limit,
        )
        self._gauge("jbod_open_files", "Descriptors the broker process has open", open_file_count)
        self._gauge(
            "jbod_log_file_handles_max",
            "Segment files the storage may keep open (its share of the limit)",
            lambda: lm.handles.capacity,
        )
        self._gauge(
            "jbod_log_file_handles_open",
            "Segment files open now (idle replicas hold none)",
            lambda: lm.handles.open_count,
        )
        self._counter_fn(
            "jbod_log_file_opens_total",
            "Segment files opened, reopens included (far above the replicas used: budget short)",
            lambda: lm.handles.opens,
        )

    def _kafka_and_controller(self, broker: MeasuredBroker) -> None:
        """Issue 18: the Kafka protocol listener (zero without one); the controller channel's
        backlog."""
        self._gauge(
            "jbod_kafka_connections",
            "Kafka protocol connections open now",
            lambda: broker.kafka.open_connections if broker.kafka else 0,
        )
        self._counter_fn(
            "jbod_kafka_requests_total",
            "Kafka protocol requests answered",
            lambda: sum(broker.kafka.requests.values()) if broker.kafka else 0,
        )
        self._counter_fn(
            "jbod_kafka_connections_closed_for_errors_total",
            "Kafka connections closed for what their client sent (kafka_protocol_error in the log)",
            lambda: broker.kafka.closed_for_errors if broker.kafka else 0,
        )
        self._gauge(
            "jbod_controller_requests_pending",
            "AlterPartition/log dir events not yet acknowledged",
            lambda: broker.controller.pending if broker.controller else 0,
        )

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        # Every request comes here: the labelled child is looked up once per label set (what
        # prometheus_client's labels() does costs a lock and its checks each time).
        key = (route, method, status)
        child = self._latency_children.get(key)
        if child is None:
            child = self._latency_children[key] = self.latency.labels(route, method, str(status))
        child.observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
