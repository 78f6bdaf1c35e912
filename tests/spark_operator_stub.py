"""The Kubeflow Spark Operator's part, played on a real API server that runs no Spark Operator
and no kubelet: what it writes into a SparkApplication's status as the application goes, with
the driver run as a local process standing in for the driver pod.

Its status writes follow the Spark Operator's (v2, ``internal/controller/sparkapplication``):
``SUBMITTED`` once spark-submit created the driver pod (``driverInfo.podName``
``<name>-driver``, a submission attempt and its time), ``RUNNING`` once the driver runs (an
execution attempt), then ``COMPLETED`` when the driver container exits 0, or ``FAILED`` with
``errorMessage`` "driver container failed with ExitCode: N, Reason: Error" (and
``terminationTime``); an application it cannot submit ends ``SUBMISSION_FAILED``. Every status
carries ``driverInfo`` (the CRD requires it).

The driver is the application's own: ``spec.arguments`` run as ``python -m jbod_spark.job``
(what ``mainApplicationFile`` runs), with the data volume mounted by mapping ``/data`` to a
local folder (the operator's work dir: the same volume) and ``--master ""`` given the master
spark-submit would have given, here ``local[*]``; ``spec.driver.memory`` is the driver's.
A ``python`` other than the interpreter stands in for the job itself (a script), as in the
local launcher's tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jbod_operator.clients.kube import SPARK_APPLICATIONS, ApiError, KubeClient
from jbod_operator.models.spark_application import DATA_MOUNT


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _App:
    uid: str
    proc: asyncio.subprocess.Process | None = None
    states: list[str] = field(default_factory=list)


class SparkOperatorStub:
    """Watch (by polling) the SparkApplications of ``namespace`` and run each once."""

    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        volume: Path,
        *,
        python: str = sys.executable,
        log_dir: Path | None = None,
        poll_seconds: float = 0.2,
    ) -> None:
        self.kube = kube
        self.ns = namespace
        self.volume = volume
        self.python = python
        self.log_dir = log_dir or volume
        self.poll_seconds = poll_seconds
        self.apps: dict[str, _App] = {}
        self.seen: list[dict[str, Any]] = []
        """Every SparkApplication as first seen (what the operator created)."""
        self.history: dict[str, list[str]] = {}
        """The states written to each application, kept after it is deleted."""
        self.api_errors: list[str] = []
        """Transient API errors the loop retried (429, 5xx)."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> SparkOperatorStub:
        """Start watching (in the running event loop); :meth:`aclose` stops."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def aclose(self) -> None:
        """Stop watching and stop every driver still running."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for app in self.apps.values():
            _kill(app.proc)
            if app.proc is not None:
                await app.proc.wait()

    async def _run(self) -> None:
        while True:
            try:
                await self.step()
            except ApiError as e:
                # What a controller's informer retries: the API server throttling or not ready
                # (429 "storage is (re)initializing" just after the CRD is created), or failing.
                # In a full run (session 33) the stub's first list got that 429 and its loop
                # died, so the Rebalance waited in PendingProposal for a job nothing ran.
                if e.status != 429 and e.status < 500:
                    raise
                self.api_errors.append(str(e))
            await asyncio.sleep(self.poll_seconds)

    async def step(self) -> None:
        """One look: submit what is new, report drivers that ended, stop deleted ones."""
        items = await self.kube.list(SPARK_APPLICATIONS, self.ns)
        live = {i["metadata"]["name"]: i for i in items}
        for name, known in list(self.apps.items()):
            obj = live.get(name)
            if obj is None or obj["metadata"]["uid"] != known.uid:
                _kill(known.proc)  # deleted: its driver pod goes with it
                del self.apps[name]
        for name, obj in live.items():
            found = self.apps.get(name)
            if found is None:
                self.seen.append(obj)
                self.apps[name] = app = _App(obj["metadata"]["uid"])
                self.history[name] = app.states
                await self._submit(obj, app)
                continue
            app = found
            if app.proc is None or not app.states:
                continue
            elif app.states[-1] == "SUBMITTED":
                await self._status(name, app, "RUNNING")
            elif app.states[-1] == "RUNNING" and app.proc.returncode is not None:
                rc = app.proc.returncode
                if rc == 0:
                    await self._status(name, app, "COMPLETED", terminated=True)
                else:
                    error = f"driver container failed with ExitCode: {rc}, Reason: Error"
                    await self._status(name, app, "FAILED", error, terminated=True)

    def driver_command(self, obj: dict[str, Any]) -> list[str]:
        """The driver as the pod would run it: ``/data`` is the volume, the master is ours."""
        spec = obj["spec"]
        args = [self._local(a) for a in spec.get("arguments") or []]
        if "--master" in args:
            args[args.index("--master") + 1] = "local[*]"
        memory = str(spec["driver"].get("memory") or "1g")
        return [self.python, "-m", "jbod_spark.job", *args, "--driver-memory", memory]

    def _local(self, arg: str) -> str:
        if arg == DATA_MOUNT or arg.startswith(DATA_MOUNT + "/"):
            return str(self.volume) + arg[len(DATA_MOUNT) :]
        return arg

    async def _submit(self, obj: dict[str, Any], app: _App) -> None:
        name = obj["metadata"]["name"]
        claims = [
            v["persistentVolumeClaim"]["claimName"]
            for v in obj["spec"].get("volumes") or []
            if "persistentVolumeClaim" in v
        ]
        if not claims:
            await self._status(
                name, app, "SUBMISSION_FAILED", "no data volume to mount", terminated=True
            )
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}-driver.log", "wb") as log:
            app.proc = await asyncio.create_subprocess_exec(
                *self.driver_command(obj),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        await self._status(name, app, "SUBMITTED")

    async def _status(
        self, name: str, app: _App, state: str, error: str = "", *, terminated: bool = False
    ) -> None:
        app_state: dict[str, Any] = {"state": state}
        if error:
            app_state["errorMessage"] = error
        status: dict[str, Any] = {
            "applicationState": app_state,
            "driverInfo": {"podName": f"{name}-driver"},
            "submissionAttempts": 1,
            "lastSubmissionAttemptTime": _now(),
        }
        if state != "SUBMITTED":
            status["executionAttempts"] = 1
        if terminated:
            status["terminationTime"] = _now()
        try:
            await self.kube.patch_status(SPARK_APPLICATIONS, self.ns, name, status)
        except ApiError as e:
            if e.status != 404:  # deleted meanwhile
                raise
        app.states.append(state)


def _kill(proc: asyncio.subprocess.Process | None) -> None:
    if proc is not None and proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
