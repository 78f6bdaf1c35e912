"""CPU seconds of a process from /proc, for the benches that report what a run cost whom.

One home for the reading (``bench/broker_throughput.py``, ``bench/kafka_protocol.py`` and
``bench/kafka_reassignment.py`` use it): utime + stime of every thread, the fields after the
command name, which may itself hold spaces and parentheses. The kernel's share (stime) is kept
apart where a bench reports it: the bytes a broker moves through sockets and the page cache,
and each system call it makes, cost kernel time that making its Python code cheaper does not
remove, so it bounds what such a change alone can win.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import NamedTuple


class CpuTimes(NamedTuple):
    """CPU seconds spent in the process's own code (user) and in the kernel on its behalf."""

    user: float
    kernel: float

    @property
    def total(self) -> float:
        return self.user + self.kernel

    def __sub__(self, other: object) -> CpuTimes:
        if not isinstance(other, CpuTimes):
            return NotImplemented
        return CpuTimes(self.user - other.user, self.kernel - other.kernel)


def parse_stat(text: str) -> CpuTimes:
    """utime and stime of a ``/proc/<pid>/stat`` line, in seconds."""
    fields = text.rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return CpuTimes(int(fields[11]) / tick, int(fields[12]) / tick)


def cpu_times(pid: int) -> CpuTimes:
    """User and kernel CPU seconds of a process (all threads); zeros once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return parse_stat(f.read())
    except OSError:
        return CpuTimes(0.0, 0.0)


def total_cpu_times(pids: Iterable[int]) -> CpuTimes:
    times = [cpu_times(p) for p in pids]
    return CpuTimes(sum(t.user for t in times), sum(t.kernel for t in times))


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all threads); 0.0 once it is gone."""
    return cpu_times(pid).total


def total_cpu_seconds(pids: Iterable[int]) -> float:
    return total_cpu_times(pids).total
