"""Replication throttles for the event loop (the leader and follower rates of Kafka's
``--throttle``). A token bucket holding at most one second of the rate; 0 means unlimited.
The rate can change at any time and takes effect on the next call.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from .storage.names import TopicPartition


class AsyncThrottle:
    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._tokens = float(rate)
        self._stamp = time.monotonic()

    def set_rate(self, rate: int) -> None:
        self._refill()
        self.rate = rate
        self._tokens = min(self._tokens, float(rate))

    def _refill(self) -> None:
        now = time.monotonic()
        if self.rate > 0:
            self._tokens = min(float(self.rate), self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def exceeded(self) -> bool:
        """Leader side: Kafka returns no data for throttled replicas while over quota."""
        if self.rate <= 0:
            return False
        self._refill()
        return self._tokens <= 0

    def record(self, nbytes: int) -> None:
        if self.rate > 0:
            self._refill()
            self._tokens -= nbytes

    async def acquire(self, nbytes: int) -> None:
        """Follower side: account for bytes already fetched and wait off any debt."""
        if self.rate <= 0:
            return
        self.record(nbytes)
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)


@dataclass
class ReplicationTraffic:
    """Byte totals of the replication that reassignments cause, as Kafka's brokers count it.

    Kafka's ``BrokerTopicMetrics`` ReassignmentBytesInPerSec/ReassignmentBytesOutPerSec count
    the fetches of replicas a reassignment adds; its ``LeaderReplication`` and
    ``FollowerReplication`` quota ``byte-rate`` count the bytes of throttled replicas. Here the
    controller names a reassignment's moving partitions only through the throttled-replica
    lists (leader side: the partitions it leads that move; follower side: the new replicas it
    hosts), so those lists decide what is reassignment traffic:

    - out (leader): bytes served for a leader-throttled partition to a follower not in its
      ISR (a new replica catching up; in-sync followers replicate new writes as usual);
    - in (follower): bytes fetched for a follower-throttled partition.

    Totals (Prometheus counters: ``rate()`` gives Kafka's PerSec); only the event loop writes
    them.
    """

    reassignment_bytes_in: int = 0
    reassignment_bytes_out: int = 0
    leader_throttled_bytes: int = 0
    follower_throttled_bytes: int = 0


class LeaderThrottle:
    """The leader side of Kafka's replication throttle (``leader.replication.throttled.rate``
    over ``leader.replication.throttled.replicas``): the one rule for what a follower's fetch
    of a partition this broker leads may carry.

    A follower outside the ISR of a leader-throttled partition is a new replica of a
    reassignment catching up: its fetch gets no data while the rate is exceeded (Kafka never
    throttles in-sync followers, which replicate new writes as usual) and its bytes count as
    reassignment traffic. Every byte served for a throttled partition, in sync or not, is
    recorded against the rate, as Kafka's quota counts the throttled replicas' bytes.
    """

    def __init__(self, rate: int) -> None:
        self.bucket = AsyncThrottle(rate)
        self.replicas: set[TopicPartition] = set()

    @property
    def rate(self) -> int:
        return self.bucket.rate

    def reassignment(self, tp: TopicPartition, in_isr: bool) -> bool:
        """Whether a follower's fetch of ``tp`` is reassignment traffic (see the class)."""
        return tp in self.replicas and not in_isr

    def holds_back(self, reassignment: bool) -> bool:
        """Whether this fetch gets no data now: reassignment traffic over the rate."""
        return reassignment and self.bucket.exceeded()

    def served(
        self, tp: TopicPartition, reassignment: bool, nbytes: int, traffic: ReplicationTraffic
    ) -> None:
        """``nbytes`` of ``tp`` went to a follower: recorded against the rate and counted."""
        if tp not in self.replicas or not nbytes:
            return
        self.bucket.record(nbytes)
        traffic.leader_throttled_bytes += nbytes
        if reassignment:
            traffic.reassignment_bytes_out += nbytes
