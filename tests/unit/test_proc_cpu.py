"""The /proc reading the benches' CPU figures rest on."""

from __future__ import annotations

import os

from tests.proc_cpu import CpuTimes, cpu_times, parse_stat, total_cpu_times


def test_a_stat_line_whose_command_holds_parentheses_and_spaces_parses() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    fields = ["S", *["0"] * 10, str(3 * tick), str(tick), *["0"] * 30]
    line = "4242 (python (x) y) " + " ".join(fields)
    assert parse_stat(line) == CpuTimes(3.0, 1.0)
    assert parse_stat(line).total == 4.0


def test_a_difference_keeps_user_and_kernel_apart() -> None:
    assert CpuTimes(5.0, 2.5) - CpuTimes(1.0, 0.5) == CpuTimes(4.0, 2.0)


def test_this_process_has_times_and_a_gone_one_has_none() -> None:
    mine = cpu_times(os.getpid())
    assert mine.user >= 0 and mine.kernel >= 0
    assert cpu_times(2**22 + 1) == CpuTimes(0.0, 0.0)  # above pid_max's default: no process
    assert total_cpu_times([os.getpid(), 2**22 + 1]).total >= mine.total
