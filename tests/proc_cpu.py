"""CPU seconds of a process from /proc, for the benches that report what a run cost whom.

One home for the reading (``bench/broker_throughput.py``, ``bench/kafka_protocol.py`` and
``bench/kafka_reassignment.py`` use it): utime + stime of every thread, the fields after the
command name, which may itself hold spaces and parentheses.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads); 0.0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def total_cpu_seconds(pids: Iterable[int]) -> float:
    return sum(cpu_seconds(p) for p in pids)
