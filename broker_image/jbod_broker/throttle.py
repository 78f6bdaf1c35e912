"""Replication throttles for the event loop (the leader and follower rates of Kafka's
``--throttle``). A token bucket holding at most one second of the rate; 0 means unlimited.
The rate can change at any time and takes effect on the next call.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


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
