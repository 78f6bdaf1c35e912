"""The planning job's drivers in pods, on the real API server (no kubelet, no Spark Operator,
no Job controller: a test writes what those would).

- A SparkApplication built from the operator's model is accepted, field for field, by the API
  server with the Spark Operator's own v1beta2 CRD (tests/fixtures, vendored); owned by the
  Rebalance; its state followed through ``status.applicationState`` as the Spark Operator
  writes it (``tests/spark_operator_stub.py``, which runs the application's own driver
  arguments locally, here a stand-in script writing the outputs into the shared folder), the
  outputs read from the folder, and the application deleted on cleanup.
- A batch/v1 Job likewise, its status written the way the Job controller writes it.
- ``auto`` asks discovery whether the Spark Operator's API is served.
"""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jbod_operator.clients.kube import JOBS, SPARK_APPLICATIONS, KubeClient, Resource
from jbod_operator.clients.planning_jobs import (
    AutoDriver,
    BatchJobDriver,
    JobRef,
    PlanningJobs,
    SparkApplicationDriver,
)
from jbod_operator.models.spark_application import build_spark_application
from jbod_operator.plan.rebalance import JobState, JobView
from jbod_operator.settings import OperatorSettings, load_settings
from tests.kube_cluster import KubeCluster
from tests.spark_operator_stub import SparkOperatorStub
from tests.waiting import wait_async

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SPARK_CRD = REPO / "tests" / "fixtures" / "sparkoperator.k8s.io_sparkapplications.yaml"
NS = "planning-jobs"
OWNER = {
    "apiVersion": "jbod.io/v1alpha1",
    "kind": "Rebalance",
    "name": "rb",
    "uid": "0b5e1c9e-0000-4000-8000-000000000001",
    "controller": True,
}

DRIVER = """#!/bin/sh
# The stand-in job: called as DRIVER -m jbod_spark.job --snapshot S --out O ARGS...
out="$6"
case "$(cat "$4")" in
  ok) echo '{"plan": 1}' > "$out/report.json"; echo '{}' > "$out/manifests.json"; exit 0 ;;
  infeasible) echo '{"plan": 2}' > "$out/report.json"; exit 2 ;;
  fail) echo "java.lang.OutOfMemoryError: Java heap space" >&2; exit 1 ;;
esac
"""


def settings(work: Path, launcher: str) -> OperatorSettings:
    return load_settings(
        {
            "JBOD_OPERATOR_REBALANCE_LAUNCHER": launcher,
            "JBOD_OPERATOR_REBALANCE_WORK_DIR": str(work),
            "JBOD_OPERATOR_REBALANCE_DATA_CLAIM": "plans",
            "JBOD_OPERATOR_REBALANCE_IMAGE": "ghcr.io/jbod-operator/spark:test",
            "JBOD_OPERATOR_REBALANCE_SERVICE_ACCOUNT": "jbod-spark",
            "JBOD_OPERATOR_REBALANCE_DRIVER_MEMORY": "2g",
        }
    )


@pytest.fixture(scope="module")
def spark_crd(kube_cluster: KubeCluster) -> None:
    kube_cluster.kubectl("apply", "-f", str(SPARK_CRD), check=True)
    kube_cluster.wait_established("sparkapplications.sparkoperator.k8s.io")
    kube_cluster.kubectl("create", "namespace", NS, check=False)


@pytest.fixture
async def kube(kube_cluster: KubeCluster, spark_crd: None) -> AsyncIterator[KubeClient]:
    client = KubeClient.from_env(str(kube_cluster.kubeconfig))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def driver_script(tmp_path: Path) -> str:
    path = tmp_path / "driver.sh"
    path.write_text(DRIVER)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def until(launcher: PlanningJobs, job: JobRef, *states: JobState) -> JobView:
    """The job's view once it is in one of ``states`` (the stand-in moves it on its own)."""

    async def there() -> JobView | None:
        view = await launcher.state(job)
        return view if view.state in states else None

    return await wait_async(there, f"job {job} in {states}", 60)


async def test_a_spark_application_is_accepted_as_built_and_followed_to_its_plan(
    kube: KubeClient, tmp_path: Path, driver_script: str
) -> None:
    work = tmp_path / "volume"
    launcher = PlanningJobs(work, SparkApplicationDriver(kube, settings(work, "sparkapplication")))
    job = JobRef(NS, "rb-1", OWNER)
    stub = SparkOperatorStub(kube, NS, work, python=driver_script, log_dir=tmp_path)
    await launcher.start(job, b"ok", ["--mode", "dirs-only"])
    assert (await launcher.state(job)).message == (
        "SparkApplication waiting for the Spark Operator to submit it"
    )

    stored = await kube.get(SPARK_APPLICATIONS, NS, "rb-1")
    assert stored is not None
    assert stored["metadata"]["ownerReferences"] == [OWNER]
    spec = stored["spec"]
    # Accepted field for field: the CRD's structural schema pruned nothing that was sent.
    s = settings(work, "sparkapplication")
    assert s.rebalance_image and s.rebalance_service_account
    sent = build_spark_application(
        name="rb-1",
        namespace=NS,
        image=s.rebalance_image,
        service_account=s.rebalance_service_account,
        data_claim="plans",
        snapshot="/data/planning-jobs/rb-1/snapshot.json",
        out="/data/planning-jobs/rb-1/out",
        job_args=["--mode", "dirs-only"],
        driver_memory="2g",
        executor_memory=s.rebalance_executor_memory,
        executors=s.rebalance_executors,
        owner_references=[OWNER],
    ).dump()
    assert spec == sent["spec"] and stored["metadata"]["labels"] == sent["metadata"]["labels"]
    assert spec["driver"]["serviceAccount"] == "jbod-spark"
    assert spec["arguments"] == [
        "--snapshot",
        "/data/planning-jobs/rb-1/snapshot.json",
        "--out",
        "/data/planning-jobs/rb-1/out",
        "--mode",
        "dirs-only",
        "--master",
        "",
    ]
    assert spec["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "plans"}}]
    assert spec["driver"]["memory"] == "2g" and spec["image"] == "ghcr.io/jbod-operator/spark:test"

    stub.start()
    try:
        await until(launcher, job, JobState.SUCCEEDED)
        assert stub.history["rb-1"] == ["SUBMITTED", "RUNNING", "COMPLETED"]
        assert stub.seen[0]["spec"] == spec
        assert await launcher.outputs(job) == {
            "report.json": b'{"plan": 1}\n',
            "manifests.json": b"{}\n",
        }
        await launcher.cleanup(job)
        assert await kube.get(SPARK_APPLICATIONS, NS, "rb-1") is None
        assert not launcher.job_dir(job).exists()
        assert (await launcher.state(job)).state == JobState.UNKNOWN
    finally:
        await stub.aclose()


async def test_a_failed_spark_application_says_why_and_an_infeasible_plan_is_a_plan(
    kube: KubeClient, tmp_path: Path, driver_script: str
) -> None:
    work = tmp_path / "volume"
    launcher = PlanningJobs(work, SparkApplicationDriver(kube, settings(work, "sparkapplication")))
    failing, infeasible = JobRef(NS, "rb-fail-1", OWNER), JobRef(NS, "rb-inf-1", OWNER)
    stub = SparkOperatorStub(kube, NS, work, python=driver_script, log_dir=tmp_path).start()
    try:
        await launcher.start(failing, b"fail", [])
        await launcher.start(infeasible, b"infeasible", [])
        view = await until(launcher, failing, JobState.FAILED, JobState.SUCCEEDED)
        assert view == JobView(
            "rb-fail-1",
            JobState.FAILED,
            "SparkApplication FAILED (driver pod rb-fail-1-driver): driver container failed "
            "with ExitCode: 1, Reason: Error",
        )
        # Exit 2 is FAILED to the Spark Operator; the report says infeasible, read all the same.
        assert (await until(launcher, infeasible, JobState.SUCCEEDED, JobState.FAILED)).state == (
            JobState.SUCCEEDED
        )
        app = await kube.get(SPARK_APPLICATIONS, NS, "rb-inf-1")
        assert app is not None and app["status"]["applicationState"]["state"] == "FAILED"
    finally:
        await stub.aclose()
        for job in (failing, infeasible):
            await launcher.cleanup(job)


async def _job_status(kube: KubeClient, name: str, status: dict[str, Any]) -> None:
    await kube.patch_status(JOBS, NS, name, status)


async def test_a_batch_job_is_accepted_and_followed_by_its_conditions(
    kube: KubeClient, tmp_path: Path
) -> None:
    """What the Job controller would write: the pod active, then FailureTarget and Failed
    (the driver exited 2 after writing its report: infeasible, a plan all the same), or
    SuccessCriteriaMet and Complete."""
    work = tmp_path / "volume"
    launcher = PlanningJobs(work, BatchJobDriver(kube, settings(work, "job")))
    job = JobRef(NS, "rb-job-1", OWNER)
    await launcher.start(job, b"{}", ["--mode", "full"])
    stored = await kube.get(JOBS, NS, "rb-job-1")
    assert stored is not None and stored["metadata"]["ownerReferences"] == [OWNER]
    (c,) = stored["spec"]["template"]["spec"]["containers"]
    assert c["args"][:4] == [
        "--snapshot",
        "/data/planning-jobs/rb-job-1/snapshot.json",
        "--out",
        "/data/planning-jobs/rb-job-1/out",
    ]
    assert c["args"][-4:] == ["--master", "local[*]", "--driver-memory", "2g"]
    assert (await launcher.state(job)).message == "Job waiting for its pod"

    started = "2026-01-01T00:00:00Z"
    await _job_status(kube, "rb-job-1", {"startTime": started, "active": 1})
    assert await launcher.state(job) == JobView("rb-job-1", JobState.RUNNING, "Job running")

    (launcher.job_dir(job) / "out" / "report.json").write_text('{"plan": 3}')
    reason, text = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    failed = [
        {"type": t, "status": "True", "reason": reason, "message": text}
        for t in ("FailureTarget", "Failed")
    ]
    await _job_status(
        kube, "rb-job-1", {"startTime": started, "active": 0, "failed": 1, "conditions": failed}
    )
    assert (await launcher.state(job)).state == JobState.SUCCEEDED
    assert await launcher.outputs(job) == {"report.json": b'{"plan": 3}'}
    (launcher.job_dir(job) / "out" / "report.json").unlink()
    assert await launcher.state(job) == JobView(
        "rb-job-1", JobState.FAILED, f"Job failed: {reason}: {text}"
    )
    await launcher.cleanup(job)
    stored = await kube.get(JOBS, NS, "rb-job-1")
    assert stored is None or stored["metadata"].get("deletionTimestamp")
    assert (await launcher.state(job)).state == JobState.UNKNOWN


async def test_auto_asks_discovery_for_the_spark_operators_api(
    kube: KubeClient, tmp_path: Path
) -> None:
    assert await kube.served(SPARK_APPLICATIONS)
    assert await kube.served(JOBS)
    assert not await kube.served(Resource("nothing.example.com", "v1", "things", "Thing"))
    assert not await kube.served(Resource("batch", "v1", "things", "Thing"))
    auto = AutoDriver(kube, settings(tmp_path, "auto"))
    assert await auto.observe(JobRef(NS, "none"), tmp_path) is None
    assert isinstance(auto.chosen, SparkApplicationDriver)
