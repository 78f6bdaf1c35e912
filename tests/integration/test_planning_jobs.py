"""The launcher of a Rebalance's planning job (``clients.planning_jobs.PlanningJobs``) with the
local driver and real processes: a stand-in driver (a script given as the driver's python) that
writes the job's outputs, fails, or runs until it is stopped; the real Spark job is the e2e's.
The drivers in pods (Job, SparkApplication) are ``test_planning_jobs_kube.py``'s."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from jbod_operator.clients.planning_jobs import JobRef, LocalDriver, PlanningJobs
from jbod_operator.plan.rebalance import JobState
from tests.waiting import wait_async

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


JOB = JobRef("ns", "rb-1")


@pytest.fixture
def launcher(tmp_path: Path) -> PlanningJobs:
    driver = tmp_path / "driver.sh"
    driver.write_text(DRIVER)
    driver.chmod(driver.stat().st_mode | stat.S_IXUSR)
    return PlanningJobs(tmp_path / "jobs", LocalDriver(python=str(driver)))


def alive(pid: int) -> bool:
    """Running: a process that was killed but not reaped yet (a zombie) is not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def ended(launcher: PlanningJobs, job: JobRef) -> JobState:
    assert isinstance(launcher.driver, LocalDriver)
    proc = launcher.driver.process(job)
    assert proc is not None
    await proc.wait()
    return (await launcher.state(job)).state


async def test_a_job_that_wrote_its_report_succeeded_and_its_outputs_are_read(
    launcher: PlanningJobs,
) -> None:
    await launcher.start(JOB, b"ok", ["--mode", "dirs-only"])
    assert await ended(launcher, JOB) == JobState.SUCCEEDED  # exit 2: a plan all the same
    out = await launcher.outputs(JOB)
    assert out == {"report.json": b'{"plan": 1}\n', "manifests.json": b"{}\n"}
    assert (launcher.work_dir / "ns" / "rb-1" / "snapshot.json").read_bytes() == b"ok"
    log = (launcher.job_dir(JOB) / "driver.log").read_text()
    assert "--mode dirs-only --master local[*] --driver-memory 1g" in log
    await launcher.cleanup(JOB)
    assert not (launcher.job_dir(JOB)).exists()
    assert (await launcher.state(JOB)).state == JobState.UNKNOWN


async def test_a_failed_job_says_why_from_its_log(launcher: PlanningJobs) -> None:
    await launcher.start(JOB, b"fail", [])
    assert await ended(launcher, JOB) == JobState.FAILED
    view = await launcher.state(JOB)
    assert view.message.startswith("exit 1: ") and "OutOfMemoryError" in view.message


async def test_cleanup_stops_a_running_job_and_its_children(launcher: PlanningJobs) -> None:
    await launcher.start(JOB, b"hang", [])
    pid_file = launcher.job_dir(JOB) / "pid"
    await wait_async(pid_file.exists, "the driver's pid file")
    assert (await launcher.state(JOB)).state == JobState.RUNNING
    pid = int(pid_file.read_text())
    await launcher.cleanup(JOB)
    # The driver's own child (Spark's JVM) goes with the group: killed, it is gone as soon
    # as the kernel has delivered the signal (a loaded machine showed it a moment later).
    await wait_async(lambda: not alive(pid), f"the driver's child {pid} gone", 10)
    assert (await launcher.state(JOB)).state == JobState.UNKNOWN


async def test_a_job_unknown_to_the_launcher_is_unknown(launcher: PlanningJobs) -> None:
    assert (await launcher.state(JobRef("ns", "never"))).state == JobState.UNKNOWN


async def test_the_detector_s_history_travels_beside_the_snapshot_as_the_job_s_metrics(
    launcher: PlanningJobs,
) -> None:
    """The sampled history (JSON lines) is written in the job's folder and named to the job
    with ``--metrics``; without history the job gets no ``--metrics`` at all."""
    history = b'{"broker_id": 0, "log_dir": "a", "ts": 1.0, "bytes": 5}\n'
    await launcher.start(JOB, b"ok", ["--mode", "dirs-only"], history)
    assert await ended(launcher, JOB) == JobState.SUCCEEDED
    path = launcher.job_dir(JOB) / "metrics.jsonl"
    assert path.read_bytes() == history
    log = (launcher.job_dir(JOB) / "driver.log").read_text()
    assert f"--mode dirs-only --metrics {path} --master local[*]" in log
    await launcher.start(JOB, b"ok", ["--mode", "dirs-only"])
    assert await ended(launcher, JOB) == JobState.SUCCEEDED
    assert not (launcher.job_dir(JOB) / "metrics.jsonl").exists()
    assert "--metrics" not in (launcher.job_dir(JOB) / "driver.log").read_text()
