"""How a planning job's launcher reports it (``jbod_operator.plan.planning_job``): each Spark
Operator state and each batch/v1 Job condition mapped to the driver's view, and the job's state
decided from that view and the outputs (the same rule for every launcher); the Job's manifest,
names that fit Kubernetes' limits, and the settings a driver in a pod needs."""

from __future__ import annotations

from typing import Any

import pytest

from jbod_operator.models.spark_application import (
    ENDED_STATES,
    ApplicationState,
    build_spark_application,
    job_file,
    plan_paths,
)
from jbod_operator.plan.planning_job import (
    DriverView,
    batch_job,
    batch_job_driver,
    job_view,
    object_name,
    pod_memory,
    spark_application_driver,
)
from jbod_operator.plan.rebalance import JobState
from jbod_operator.settings import SettingsError, load_settings


def app(state: str | None, error: str = "", pod: str = "rb-1-driver") -> dict[str, Any]:
    """A SparkApplication as the Spark Operator leaves it (no status before it picks it up)."""
    if state is None:
        return {"metadata": {"name": "rb-1"}}
    st: dict[str, Any] = {"applicationState": {"state": state}, "driverInfo": {"podName": pod}}
    if error:
        st["applicationState"]["errorMessage"] = error
    return {"metadata": {"name": "rb-1"}, "status": st}


def spark_state(state: str | None, *, report: bool, error: str = "") -> tuple[JobState, str]:
    v = job_view("rb-1", spark_application_driver(app(state, error)), report)
    return v.state, v.message


# -- the SparkApplication's states --------------------------------------------------------------


@pytest.mark.parametrize("state", [s for s in ApplicationState if s not in ENDED_STATES])
def test_every_state_short_of_the_end_is_running_whatever_the_folder_holds(state: str) -> None:
    """SUBMITTED, RUNNING, PENDING_RERUN, SUCCEEDING, FAILING, ... : the driver may still
    write (a report seen while SUCCEEDING is not taken before COMPLETED)."""
    for report in (False, True):
        got, message = spark_state(state, report=report)
        assert got == JobState.RUNNING, (state, report)
        assert message


def test_no_status_yet_waits_for_the_spark_operator() -> None:
    got, message = spark_state(None, report=False)
    assert got == JobState.RUNNING
    assert "waiting for the Spark Operator" in message


def test_completed_with_its_report_succeeded() -> None:
    assert spark_state("COMPLETED", report=True) == (JobState.SUCCEEDED, "")


def test_completed_without_a_report_failed() -> None:
    got, message = spark_state("COMPLETED", report=False)
    assert got == JobState.FAILED
    assert message == "SparkApplication COMPLETED (driver pod rb-1-driver) but wrote no report"


def test_failed_says_why_with_the_spark_operators_error_message() -> None:
    error = "driver container failed with ExitCode: 1, Reason: Error"
    got, message = spark_state("FAILED", report=False, error=error)
    assert got == JobState.FAILED
    assert message == f"SparkApplication FAILED (driver pod rb-1-driver): {error}"


def test_failed_with_a_report_is_an_infeasible_plan_all_the_same() -> None:
    """The job exits 2 when its plan misses a constraint; the Spark Operator calls that
    FAILED. The report is there: the Rebalance reads the verdict from it."""
    error = "driver container failed with ExitCode: 2, Reason: Error"
    assert spark_state("FAILED", report=True, error=error) == (JobState.SUCCEEDED, "")


def test_submission_failed_is_the_end_with_its_message() -> None:
    error = 'failed to run spark-submit: pods "rb-1-driver" is forbidden'
    got, message = spark_state("SUBMISSION_FAILED", report=False, error=error)
    assert got == JobState.FAILED
    assert message.startswith("SparkApplication SUBMISSION_FAILED") and error in message


def test_a_terminal_state_without_an_error_message_says_so() -> None:
    assert spark_state("FAILED", report=False)[1].endswith(": no error message")


def test_a_state_this_operator_does_not_know_is_not_taken_for_an_end() -> None:
    got, message = spark_state("ARCHIVING", report=True)
    assert got == JobState.RUNNING and "ARCHIVING" in message


def test_the_terminal_states_are_the_spark_operators_three() -> None:
    assert {s.value for s in ENDED_STATES} == {"COMPLETED", "FAILED", "SUBMISSION_FAILED"}


# -- the rule every launcher shares --------------------------------------------------------


def test_no_driver_is_unknown_and_a_running_one_is_running() -> None:
    assert job_view("j", None, True).state == JobState.UNKNOWN
    for report in (False, True):
        assert job_view("j", DriverView(False, "x"), report).state == JobState.RUNNING


def test_an_ended_driver_without_a_message_still_says_what_is_missing() -> None:
    v = job_view("j", DriverView(True), False)
    assert v.state == JobState.FAILED and "without a report" in v.message


# -- the batch/v1 Job's conditions ---------------------------------------------------------


def job_obj(*conditions: tuple[str, str, str], active: int = 0) -> dict[str, Any]:
    st: dict[str, Any] = {
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": m} for t, r, m in conditions
        ]
    }
    if active:
        st["active"] = active
    return {"metadata": {"name": "rb-1"}, "status": st}


def test_a_job_waiting_for_its_pod_then_running() -> None:
    assert batch_job_driver({"metadata": {"name": "x"}}) == DriverView(
        False, "Job waiting for its pod"
    )
    assert batch_job_driver(job_obj(active=1)) == DriverView(False, "Job running")


def test_a_complete_job_ended() -> None:
    v = batch_job_driver(job_obj(("Complete", "", "")))
    assert v.ended
    assert job_view("rb-1", v, True).state == JobState.SUCCEEDED
    assert job_view("rb-1", v, False).state == JobState.FAILED


def test_a_failed_job_says_the_job_controllers_reason() -> None:
    v = batch_job_driver(
        job_obj(("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
    )
    assert v == DriverView(
        True, "Job failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
    )
    assert job_view("rb-1", v, True).state == JobState.SUCCEEDED  # exit 2, the report written


def test_failure_target_alone_is_not_the_end_the_pod_may_still_run() -> None:
    v = batch_job_driver(job_obj(("FailureTarget", "BackoffLimitExceeded", ""), active=1))
    assert not v.ended


def test_a_condition_that_is_not_true_does_not_count() -> None:
    obj = {"status": {"conditions": [{"type": "Complete", "status": "False"}], "active": 1}}
    assert not batch_job_driver(obj).ended


# -- manifests and names ---------------------------------------------------------------------


def test_the_job_runs_the_driver_on_local_with_the_data_claim() -> None:
    snapshot, out = plan_paths("ns/rb-1")
    assert (snapshot, out) == ("/data/ns/rb-1/snapshot.json", "/data/ns/rb-1/out")
    # The metric history travels the same way, beside the snapshot.
    assert job_file("ns/rb-1", "metrics.jsonl") == "/data/ns/rb-1/metrics.jsonl"
    owner = {"apiVersion": "jbod.io/v1alpha1", "kind": "Rebalance", "name": "rb", "uid": "u"}
    job = batch_job(
        name="rb-1",
        namespace="ns",
        image="reg/spark:1",
        data_claim="plans",
        snapshot=snapshot,
        out=out,
        job_args=["--mode", "dirs-only"],
        driver_memory="2g",
        owner_references=[owner],
    )
    assert job["metadata"]["ownerReferences"] == [owner]
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    assert c["command"] == ["python3", "-m", "jbod_spark.job"]
    assert c["args"] == [
        "--snapshot",
        "/data/ns/rb-1/snapshot.json",
        "--out",
        "/data/ns/rb-1/out",
        "--mode",
        "dirs-only",
        "--master",
        "local[*]",
        "--driver-memory",
        "2g",
    ]
    assert c["resources"]["limits"]["memory"] == "2867Mi"  # 2 GiB and Spark's 40 % overhead
    assert c["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "plans"}}]


def test_the_spark_application_puts_the_jobs_arguments_between_paths_and_master() -> None:
    a = build_spark_application(
        name="rb-1",
        namespace="ns",
        image="i",
        service_account="sa",
        data_claim="plans",
        snapshot="/data/s.json",
        out="/data/o",
        job_args=["--mode", "full"],
        driver_memory="1g",
        executor_memory="1g",
        executors=1,
    ).dump()
    assert a["spec"]["arguments"] == [
        "--snapshot",
        "/data/s.json",
        "--out",
        "/data/o",
        "--mode",
        "full",
        "--master",
        "",
    ]
    assert a["spec"]["restartPolicy"] == {"type": "Never"}
    assert "ownerReferences" not in a["metadata"]


def test_pod_memory_in_spark_units() -> None:
    assert pod_memory("1g") == "1434Mi"
    assert pod_memory("512m", overhead=0) == "512Mi"
    with pytest.raises(ValueError):
        pod_memory("1.5g")


def test_object_names_fit_in_63_characters_and_stay_distinct() -> None:
    assert object_name("rb-1") == "rb-1"
    long = "x" * 63
    a, b = object_name(long + "-1"), object_name(long + "-2")
    assert len(a) <= 63 and len(b) <= 63 and a != b
    assert object_name(long) == long


# -- settings ------------------------------------------------------------------------------


def test_a_driver_in_a_pod_needs_its_image_claim_and_mount() -> None:
    with pytest.raises(SettingsError) as e:
        load_settings({"JBOD_OPERATOR_REBALANCE_LAUNCHER": "job"})
    for var in ("REBALANCE_IMAGE", "REBALANCE_DATA_CLAIM", "REBALANCE_WORK_DIR"):
        assert f"JBOD_OPERATOR_{var}" in str(e.value)
    assert "SERVICE_ACCOUNT" not in str(e.value)
    env = {
        "JBOD_OPERATOR_REBALANCE_LAUNCHER": "sparkapplication",
        "JBOD_OPERATOR_REBALANCE_IMAGE": "i",
        "JBOD_OPERATOR_REBALANCE_DATA_CLAIM": "plans",
        "JBOD_OPERATOR_REBALANCE_WORK_DIR": "/plans",
    }
    with pytest.raises(SettingsError, match="JBOD_OPERATOR_REBALANCE_SERVICE_ACCOUNT"):
        load_settings(env)
    s = load_settings({**env, "JBOD_OPERATOR_REBALANCE_SERVICE_ACCOUNT": "spark"})
    assert s.rebalance_launcher == "sparkapplication"
    assert load_settings({}).rebalance_launcher == "local"
