"""The broker's two clocks, named for what they measure (one home for each).

- :func:`wall_ms`: the wall clock, comparable with record timestamps. Segment roll by time,
  time-based retention and the time index use it (Kafka's ``time.milliseconds()``).
- :func:`monotonic_ms`: never goes back. Durations use it: a follower's lag time against
  ``replica.lag.time.max.ms``, request deadlines. A wall clock stepped by NTP must not shrink
  an ISR or expire a request.
"""

from __future__ import annotations

import time


def wall_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)
