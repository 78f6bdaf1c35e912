"""Where a Rebalance's planning job runs: the Spark driver of ``python -m jbod_spark.job``.

One interface, :class:`JobLauncher` (start / state / outputs / cleanup), and one
implementation of it, :class:`PlanningJobs`, so the controller has one code path whatever runs
the driver. What differs is only how the driver is launched, a :class:`Driver`:

- :class:`LocalDriver`: a child process on ``local[*]`` (tests, the demo, no kubelet);
- :class:`BatchJobDriver`: a batch/v1 Job running the planning image on ``local[*]``;
- :class:`SparkApplicationDriver`: a SparkApplication (Kubeflow Spark Operator, v1beta2),
  followed through ``status.applicationState``;
- :class:`AutoDriver`: a SparkApplication when the API server serves the Spark Operator's CRD,
  else a Job.

The snapshot in and the plan out travel the same way through all of them: files in the job's
folder ``<work_dir>/<namespace>/<job>/`` (``snapshot.json``, ``out/``). For a driver in a pod
that folder is on a PersistentVolumeClaim the operator mounts at ``work_dir`` and the driver at
``/data`` (why a volume: docs/architecture.md, "Snapshot in, plan out"). The job's state is
decided from the driver's view and the outputs alike for all of them
(``plan.planning_job.job_view``). The setting ``JBOD_OPERATOR_REBALANCE_LAUNCHER`` picks the
driver (:func:`make_launcher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..models.spark_application import build_spark_application, job_file, plan_paths
from ..plan.planning_job import (
    DriverView,
    batch_job,
    batch_job_driver,
    job_view,
    object_name,
    spark_application_driver,
)
from ..plan.rebalance import JobView
from ..settings import OperatorSettings, RebalanceLauncher
from .kube import JOBS, SPARK_APPLICATIONS, KubeClient

log = logging.getLogger(__name__)

OUTPUT_FILES = ("manifests.json", "reassignment.json", "report.json", "report.txt", "plot.png")
"""What the job writes into its output folder (``plot.png`` only when it can draw)."""
REPORT = "report.json"
METRICS_FILE = "metrics.jsonl"
"""The detector's metric history in a job's folder (JSON lines: the job reads ``.jsonl``)."""
"""The output whose presence says the driver wrote its plan (``plan.planning_job``)."""
LOG_TAIL = 2000
"""Characters of the local driver's log kept in a failed job's message."""


@dataclass(frozen=True)
class JobRef:
    """A planning job: its name (``plan.rebalance.job_name``), the Rebalance's namespace,
    and the Rebalance's owner reference (a job in a pod is owned by it, so deleting the
    Rebalance deletes its job)."""

    namespace: str
    name: str
    owner: Mapping[str, Any] | None = None

    @property
    def folder(self) -> str:
        """The job's folder, relative to the work dir (or the data volume)."""
        return f"{self.namespace}/{self.name}"


class JobLauncher(Protocol):
    async def start(
        self, job: JobRef, snapshot: bytes, args: Sequence[str], metrics: bytes = b""
    ) -> None:
        """Start ``job`` on ``snapshot`` (a ClusterSnapshot's JSON) with the job's arguments
        after ``--snapshot``/``--out``, and ``metrics`` (the detector's history as JSON lines,
        the job's ``--metrics``) when there is any; a job of that name is replaced."""

    async def state(self, job: JobRef) -> JobView:
        """Running, Succeeded (the driver ended and wrote its report), Failed (with why), or
        Unknown (no driver of that name)."""

    async def outputs(self, job: JobRef) -> dict[str, bytes]:
        """The output files of a job that succeeded, by name."""

    async def cleanup(self, job: JobRef) -> None:
        """Stop the job if it runs, and forget it and its files."""

    async def close(self) -> None:
        """The operator stops."""


class Driver(Protocol):
    """How the driver is launched: the one thing that differs between launchers."""

    async def launch(self, job: JobRef, local_dir: Path, args: Sequence[str]) -> None:
        """Run the driver on ``snapshot.json`` in the job's folder, writing into ``out/``
        (``local_dir`` is the folder as the operator sees it)."""

    def file_path(self, job: JobRef, local_dir: Path, name: str) -> str:
        """A file of the job's folder as the driver sees it (an argument it is given)."""

    async def observe(self, job: JobRef, local_dir: Path) -> DriverView | None:
        """How the driver is doing; None when there is no driver of that name."""

    async def stop(self, job: JobRef) -> None:
        """Stop and forget the driver (nothing to do when there is none)."""

    async def close(self) -> None:
        """The operator stops."""


class PlanningJobs:
    """The :class:`JobLauncher`: the job's folder (snapshot in, outputs out) and its state,
    the same for every :class:`Driver`."""

    def __init__(self, work_dir: Path, driver: Driver) -> None:
        self.work_dir = work_dir
        self.driver = driver

    def job_dir(self, job: JobRef) -> Path:
        return self.work_dir / job.folder

    async def start(
        self, job: JobRef, snapshot: bytes, args: Sequence[str], metrics: bytes = b""
    ) -> None:
        await self.cleanup(job)
        d = self.job_dir(job)
        (d / "out").mkdir(parents=True)
        # ~150 MB at a million replicas: off the event loop.
        await asyncio.to_thread((d / "snapshot.json").write_bytes, snapshot)
        if metrics:
            # Beside the snapshot, on the same volume: it travels the way the snapshot does.
            await asyncio.to_thread((d / METRICS_FILE).write_bytes, metrics)
            args = [*args, "--metrics", self.driver.file_path(job, d, METRICS_FILE)]
        await self.driver.launch(job, d, args)

    async def state(self, job: JobRef) -> JobView:
        d = self.job_dir(job)
        view = await self.driver.observe(job, d)
        return job_view(job.name, view, (d / "out" / REPORT).is_file())

    async def outputs(self, job: JobRef) -> dict[str, bytes]:
        return await asyncio.to_thread(_read_outputs, self.job_dir(job) / "out")

    async def cleanup(self, job: JobRef) -> None:
        await self.driver.stop(job)
        await asyncio.to_thread(shutil.rmtree, self.job_dir(job), ignore_errors=True)

    async def close(self) -> None:
        await self.driver.close()


def _read_outputs(out: Path) -> dict[str, bytes]:
    return {n: (out / n).read_bytes() for n in OUTPUT_FILES if (out / n).is_file()}


class LocalDriver:
    """The driver as a child process of the operator, in its own process group (Spark starts a
    JVM under it: stopping stops both), logging to ``driver.log`` in the job's folder. Lost
    with the operator: a restarted one sees no driver (Unknown) and plans again."""

    def __init__(self, *, driver_memory: str = "1g", python: str = sys.executable) -> None:
        self.driver_memory = driver_memory
        self.python = python
        self._procs: dict[tuple[str, str], asyncio.subprocess.Process] = {}

    async def launch(self, job: JobRef, local_dir: Path, args: Sequence[str]) -> None:
        with open(local_dir / "driver.log", "wb") as log_file:
            self._procs[(job.namespace, job.name)] = await asyncio.create_subprocess_exec(
                self.python,
                "-m",
                "jbod_spark.job",
                "--snapshot",
                str(local_dir / "snapshot.json"),
                "--out",
                str(local_dir / "out"),
                *args,
                "--master",
                "local[*]",
                "--driver-memory",
                self.driver_memory,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=asyncio.subprocess.STDOUT,
                cwd=str(local_dir),
                start_new_session=True,
            )

    def file_path(self, job: JobRef, local_dir: Path, name: str) -> str:
        return str(local_dir / name)

    def process(self, job: JobRef) -> asyncio.subprocess.Process | None:
        return self._procs.get((job.namespace, job.name))

    async def observe(self, job: JobRef, local_dir: Path) -> DriverView | None:
        proc = self.process(job)
        if proc is None:
            return None
        if proc.returncode is None:
            return DriverView(False)
        return DriverView(True, f"exit {proc.returncode}: {_tail(local_dir / 'driver.log')}")

    async def stop(self, job: JobRef) -> None:
        proc = self._procs.pop((job.namespace, job.name), None)
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        # The driver gone, whatever of its group outlived it (a JVM slower to take the
        # SIGTERM, or deaf to it) is killed too: nothing of the job runs on.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    async def close(self) -> None:
        for ns, name in list(self._procs):
            await self.stop(JobRef(ns, name))


def _tail(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "no driver log"
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-5:])[-LOG_TAIL:]


def _owner(job: JobRef) -> list[dict[str, Any]] | None:
    return [dict(job.owner)] if job.owner else None


class SparkApplicationDriver:
    """The driver as a SparkApplication owned by the Rebalance, built from the operator's
    model (``models.spark_application``), followed through its ``status.applicationState``
    as the Spark Operator writes it. It runs on when the operator stops: the next operator
    follows the same application (its state in the API server, its outputs on the volume)."""

    def __init__(self, kube: KubeClient, settings: OperatorSettings) -> None:
        self.kube = kube
        self.settings = settings

    async def launch(self, job: JobRef, local_dir: Path, args: Sequence[str]) -> None:
        s = self.settings
        assert s.rebalance_image and s.rebalance_data_claim and s.rebalance_service_account
        snapshot, out = plan_paths(job.folder)
        app = build_spark_application(
            name=object_name(job.name),
            namespace=job.namespace,
            image=s.rebalance_image,
            image_pull_policy=s.rebalance_image_pull_policy,
            service_account=s.rebalance_service_account,
            data_claim=s.rebalance_data_claim,
            snapshot=snapshot,
            out=out,
            job_args=list(args),
            driver_memory=s.rebalance_driver_memory,
            executor_memory=s.rebalance_executor_memory,
            executors=s.rebalance_executors,
            owner_references=_owner(job),
        )
        await self.kube.create(SPARK_APPLICATIONS, job.namespace, app.dump())

    def file_path(self, job: JobRef, local_dir: Path, name: str) -> str:
        return job_file(job.folder, name)

    async def observe(self, job: JobRef, local_dir: Path) -> DriverView | None:
        obj = await self.kube.get(SPARK_APPLICATIONS, job.namespace, object_name(job.name))
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return None
        return spark_application_driver(obj)

    async def stop(self, job: JobRef) -> None:
        await self.kube.delete(SPARK_APPLICATIONS, job.namespace, object_name(job.name))

    async def close(self) -> None:
        return None


class BatchJobDriver:
    """The driver as a batch/v1 Job (``plan.planning_job.batch_job``) owned by the Rebalance:
    the planning image on ``local[*]``, where the Spark Operator is not installed. Runs on when
    the operator stops, like a SparkApplication."""

    def __init__(self, kube: KubeClient, settings: OperatorSettings) -> None:
        self.kube = kube
        self.settings = settings

    async def launch(self, job: JobRef, local_dir: Path, args: Sequence[str]) -> None:
        s = self.settings
        assert s.rebalance_image and s.rebalance_data_claim
        snapshot, out = plan_paths(job.folder)
        body = batch_job(
            name=object_name(job.name),
            namespace=job.namespace,
            image=s.rebalance_image,
            image_pull_policy=s.rebalance_image_pull_policy,
            data_claim=s.rebalance_data_claim,
            snapshot=snapshot,
            out=out,
            job_args=list(args),
            driver_memory=s.rebalance_driver_memory,
            owner_references=_owner(job),
        )
        await self.kube.create(JOBS, job.namespace, body)

    def file_path(self, job: JobRef, local_dir: Path, name: str) -> str:
        return job_file(job.folder, name)

    async def observe(self, job: JobRef, local_dir: Path) -> DriverView | None:
        obj = await self.kube.get(JOBS, job.namespace, object_name(job.name))
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            return None
        return batch_job_driver(obj)

    async def stop(self, job: JobRef) -> None:
        # A Job deleted through the API orphans its pods unless told otherwise.
        await self.kube.delete(JOBS, job.namespace, object_name(job.name), propagation="Background")

    async def close(self) -> None:
        return None


class AutoDriver:
    """A SparkApplication when the API server serves ``sparkapplications.sparkoperator.k8s.io``,
    else a Job: asked once, on first use (a Spark Operator installed later is used after the
    operator restarts)."""

    def __init__(self, kube: KubeClient, settings: OperatorSettings) -> None:
        self.kube = kube
        self.settings = settings
        self.chosen: SparkApplicationDriver | BatchJobDriver | None = None

    async def _driver(self) -> SparkApplicationDriver | BatchJobDriver:
        if self.chosen is None:
            if await self.kube.served(SPARK_APPLICATIONS):
                self.chosen = SparkApplicationDriver(self.kube, self.settings)
            else:
                self.chosen = BatchJobDriver(self.kube, self.settings)
            log.info("planning jobs run as %s", type(self.chosen).__name__)
        return self.chosen

    async def launch(self, job: JobRef, local_dir: Path, args: Sequence[str]) -> None:
        await (await self._driver()).launch(job, local_dir, args)

    def file_path(self, job: JobRef, local_dir: Path, name: str) -> str:
        # Both pod drivers see the job's folder on the data volume the same way.
        return job_file(job.folder, name)

    async def observe(self, job: JobRef, local_dir: Path) -> DriverView | None:
        return await (await self._driver()).observe(job, local_dir)

    async def stop(self, job: JobRef) -> None:
        await (await self._driver()).stop(job)

    async def close(self) -> None:
        return None


def make_driver(settings: OperatorSettings, kube: KubeClient) -> Driver:
    """The driver the settings name."""
    kind = settings.rebalance_launcher
    if kind == RebalanceLauncher.LOCAL:
        return LocalDriver(driver_memory=settings.rebalance_driver_memory)
    if kind == RebalanceLauncher.JOB:
        return BatchJobDriver(kube, settings)
    if kind == RebalanceLauncher.SPARK_APPLICATION:
        return SparkApplicationDriver(kube, settings)
    if kind == RebalanceLauncher.AUTO:
        return AutoDriver(kube, settings)
    raise ValueError(f"unknown rebalance launcher {kind}")


def make_launcher(settings: OperatorSettings, kube: KubeClient) -> PlanningJobs:
    """The launcher the settings name: one :class:`PlanningJobs` over the driver."""
    work = settings.rebalance_work_dir or os.path.join(tempfile.gettempdir(), "jbod-rebalance")
    return PlanningJobs(Path(work), make_driver(settings, kube))
