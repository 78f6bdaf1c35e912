"""Where a Rebalance's planning job runs: the Spark driver of ``python -m jbod_spark.job``.

One interface, :class:`JobLauncher` (start / state / outputs / cleanup), so the controller has
one code path whatever launches the driver: the snapshot goes in as bytes, the plan comes out
as the job's output files, the state is one of :class:`~jbod_operator.plan.rebalance.JobState`.
The setting ``JBOD_OPERATOR_REBALANCE_LAUNCHER`` picks the implementation
(:func:`make_launcher`); ``local`` runs the driver as a local process on ``local[*]`` (tests,
the demo, a machine without a kubelet).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from ..plan.rebalance import JobState, JobView
from ..settings import OperatorSettings, RebalanceLauncher

OUTPUT_FILES = ("manifests.json", "reassignment.json", "report.json", "report.txt", "plot.png")
"""What the job writes into its output folder (``plot.png`` only when it can draw)."""
LOG_TAIL = 2000
"""Characters of the driver's log kept in a failed job's message."""


class JobLauncher(Protocol):
    async def start(self, job: str, snapshot: bytes, args: Sequence[str]) -> None:
        """Start job ``job`` on ``snapshot`` (a ClusterSnapshot's JSON) with the job's
        arguments after ``--snapshot``/``--out``; a job of that name is replaced."""

    async def state(self, job: str) -> JobView:
        """Running, Succeeded (the driver ended and wrote its report), Failed (with the end of
        its log), or Unknown (not a job this launcher knows)."""

    async def outputs(self, job: str) -> dict[str, bytes]:
        """The output files of a job that succeeded, by name."""

    async def cleanup(self, job: str) -> None:
        """Stop the job if it runs, and forget it and its files."""

    async def close(self) -> None:
        """Stop every job (the operator stops)."""


class LocalLauncher:
    """The driver as a child process of the operator, in its own process group (Spark starts a
    JVM under it: cancelling stops both). Each job has a folder under ``work_dir``:
    ``snapshot.json``, ``out/`` and ``driver.log``."""

    def __init__(
        self, work_dir: Path, *, driver_memory: str = "1g", python: str = sys.executable
    ) -> None:
        self.work_dir = work_dir
        self.driver_memory = driver_memory
        self.python = python
        self._procs: dict[str, asyncio.subprocess.Process] = {}

    def _dir(self, job: str) -> Path:
        return self.work_dir / job

    async def start(self, job: str, snapshot: bytes, args: Sequence[str]) -> None:
        await self.cleanup(job)
        d = self._dir(job)
        (d / "out").mkdir(parents=True)
        (d / "snapshot.json").write_bytes(snapshot)
        with open(d / "driver.log", "wb") as log:
            self._procs[job] = await asyncio.create_subprocess_exec(
                self.python,
                "-m",
                "jbod_spark.job",
                "--snapshot",
                str(d / "snapshot.json"),
                "--out",
                str(d / "out"),
                *args,
                "--master",
                "local[*]",
                "--driver-memory",
                self.driver_memory,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                cwd=str(d),
                start_new_session=True,
            )

    async def state(self, job: str) -> JobView:
        proc = self._procs.get(job)
        if proc is None:
            return JobView(job, JobState.UNKNOWN)
        if proc.returncode is None:
            return JobView(job, JobState.RUNNING)
        # The job exits 2 when the plan misses a constraint: a plan all the same, which the
        # controller reports as infeasible from the report.
        if proc.returncode in (0, 2) and (self._dir(job) / "out" / "report.json").exists():
            return JobView(job, JobState.SUCCEEDED)
        return JobView(job, JobState.FAILED, f"exit {proc.returncode}: {self._tail(job)}")

    def _tail(self, job: str) -> str:
        try:
            text = (self._dir(job) / "driver.log").read_text(errors="replace")
        except OSError:
            return "no driver log"
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        return " | ".join(lines[-5:])[-LOG_TAIL:]

    async def outputs(self, job: str) -> dict[str, bytes]:
        out = self._dir(job) / "out"
        return {n: (out / n).read_bytes() for n in OUTPUT_FILES if (out / n).is_file()}

    async def cleanup(self, job: str) -> None:
        proc = self._procs.pop(job, None)
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        shutil.rmtree(self._dir(job), ignore_errors=True)

    async def close(self) -> None:
        for job in list(self._procs):
            await self.cleanup(job)


def make_launcher(settings: OperatorSettings) -> JobLauncher:
    """The launcher the settings name."""
    if settings.rebalance_launcher == RebalanceLauncher.LOCAL:
        work = settings.rebalance_work_dir or os.path.join(tempfile.gettempdir(), "jbod-rebalance")
        return LocalLauncher(Path(work), driver_memory=settings.rebalance_driver_memory)
    raise ValueError(f"unknown rebalance launcher {settings.rebalance_launcher}")
