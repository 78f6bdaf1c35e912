"""The local launcher of a Rebalance's planning job (``clients.planning_jobs.LocalLauncher``)
with real processes: a stand-in driver (a script given as the launcher's python) that writes
the job's outputs, fails, or runs until it is stopped; the real Spark job is the e2e's."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from jbod_operator.clients.planning_jobs import LocalLauncher
from jbod_operator.plan.rebalance import JobState

pytestmark = pytest.mark.integration

DRIVER = """#!/bin/sh
# called as: DRIVER -m jbod_spark.job --snapshot S --out O ARGS...
out="$6"
echo "args: $*"
case "$(cat "$4")" in
  ok) echo '{"plan": 1}' > "$out/report.json"; echo '{}' > "$out/manifests.json"; exit 2 ;;
  fail) echo "java.lang.OutOfMemoryError: Java heap space" >&2; exit 1 ;;
  hang) sleep 600 & echo $! > "$out/../pid"; exec sleep 600 ;;
esac
"""


@pytest.fixture
def launcher(tmp_path: Path) -> LocalLauncher:
    driver = tmp_path / "driver.sh"
    driver.write_text(DRIVER)
    driver.chmod(driver.stat().st_mode | stat.S_IXUSR)
    return LocalLauncher(tmp_path / "jobs", python=str(driver))


def alive(pid: int) -> bool:
    """Running: a process that was killed but not reaped yet (a zombie) is not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def ended(launcher: LocalLauncher, job: str) -> JobState:
    proc = launcher._procs[job]
    await proc.wait()
    return (await launcher.state(job)).state


async def test_a_job_that_wrote_its_report_succeeded_and_its_outputs_are_read(
    launcher: LocalLauncher,
) -> None:
    await launcher.start("rb-1", b"ok", ["--mode", "dirs-only"])
    assert await ended(launcher, "rb-1") == JobState.SUCCEEDED  # exit 2: a plan all the same
    out = await launcher.outputs("rb-1")
    assert out == {"report.json": b'{"plan": 1}\n', "manifests.json": b"{}\n"}
    log = (launcher.work_dir / "rb-1" / "driver.log").read_text()
    assert "--mode dirs-only --master local[*] --driver-memory 1g" in log
    await launcher.cleanup("rb-1")
    assert not (launcher.work_dir / "rb-1").exists()
    assert (await launcher.state("rb-1")).state == JobState.UNKNOWN


async def test_a_failed_job_says_why_from_its_log(launcher: LocalLauncher) -> None:
    await launcher.start("rb-1", b"fail", [])
    assert await ended(launcher, "rb-1") == JobState.FAILED
    view = await launcher.state("rb-1")
    assert view.message.startswith("exit 1: ") and "OutOfMemoryError" in view.message


async def test_cleanup_stops_a_running_job_and_its_children(launcher: LocalLauncher) -> None:
    await launcher.start("rb-1", b"hang", [])
    pid_file = launcher.work_dir / "rb-1" / "pid"
    while not pid_file.exists():
        await asyncio.sleep(0.05)
    assert (await launcher.state("rb-1")).state == JobState.RUNNING
    pid = int(pid_file.read_text())
    await launcher.cleanup("rb-1")
    assert not alive(pid)  # the driver's own child (Spark's JVM) went with the group
    assert (await launcher.state("rb-1")).state == JobState.UNKNOWN


async def test_a_job_unknown_to_the_launcher_is_unknown(launcher: LocalLauncher) -> None:
    assert (await launcher.state("never")).state == JobState.UNKNOWN
