"""The SparkApplication path end to end: the operator (``JBOD_OPERATOR_REBALANCE_LAUNCHER=
sparkapplication``) plans a Rebalance by creating a SparkApplication, owned by the Rebalance
and accepted by the API server with the Spark Operator's own v1beta2 CRD; a stand-in plays the
Spark Operator (``tests/spark_operator_stub.py``): it writes SUBMITTED, RUNNING and COMPLETED
into the application's status the way the Spark Operator does while the application's own
driver (``python -m jbod_spark.job`` with its ``spec.arguments``) runs as a local process on
``local[*]``, the data volume being the operator's work dir. The Rebalance follows it to
ProposalReady, the same proposal as with the local launcher, and the application is deleted
once its plan is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.scenario import LeaderTracker, Scenario
from e2e.test_reassignment import closes_clients
from e2e.test_rebalance import PLAN_TIMEOUT, all_on_disk_a, phase, rb, rebalance
from jbod_operator.clients.kube import SPARK_APPLICATIONS, KubeClient
from tests.integration.counting import fill_bytes
from tests.kube_cluster import KubeCluster
from tests.spark_operator_stub import SparkOperatorStub

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
SPARK_CRD = REPO / "tests" / "fixtures" / "sparkoperator.k8s.io_sparkapplications.yaml"


@pytest.fixture
def sc(kube_cluster: KubeCluster, tmp_path: Path) -> Iterator[Scenario]:
    kube_cluster.kubectl("apply", "-f", str(SPARK_CRD), check=True)
    kube_cluster.wait_established("sparkapplications.sparkoperator.k8s.io")
    s = Scenario(
        kube_cluster,
        tmp_path,
        "rebalance-sparkapplication",
        brokers=3,
        dirs=("a", "b"),
        dir_size="64Mi",
        operator_env={
            "JBOD_OPERATOR_REBALANCE_LAUNCHER": "sparkapplication",
            "JBOD_OPERATOR_REBALANCE_WORK_DIR": str(tmp_path / "volume"),
            "JBOD_OPERATOR_REBALANCE_DATA_CLAIM": "jbod-plans",
            "JBOD_OPERATOR_REBALANCE_IMAGE": "ghcr.io/jbod-operator/spark:e2e",
            "JBOD_OPERATOR_REBALANCE_SERVICE_ACCOUNT": "jbod-spark",
            "JBOD_OPERATOR_REBALANCE_POLL_SECONDS": "0.5",
        },
    )
    with s:
        yield s


@pytest.mark.timeout(400)
@closes_clients
async def test_a_rebalance_follows_its_spark_application_to_a_proposal(
    sc: Scenario, kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    tps = sc.create_topic("orders", partitions=4, rf=3, min_isr=2)
    await all_on_disk_a(sc, tps, [0, 1, 2])
    tracker = LeaderTracker(sc, tps)
    await fill_bytes(tracker, tps, 2.5)
    await tracker.stop()

    kube = KubeClient.from_env(str(kube_cluster.kubeconfig))
    stub = SparkOperatorStub(kube, sc.ns, tmp_path / "volume", log_dir=tmp_path).start()
    try:
        sc.kube.apply(rebalance("even", mode="dirs-only"))
        st = await phase(sc, "even", "ProposalReady", timeout=PLAN_TIMEOUT)
        p = st["proposal"]
        assert p["feasible"] and p["movesBetweenDisks"] > 0, p
        assert p["worstSpreadBefore"] > 10 and p["worstSpreadAfter"] <= 4, p

        (app,) = stub.seen
        name = app["metadata"]["name"]
        assert name == st["job"] == "even-1"
        assert app["metadata"]["ownerReferences"][0]["uid"] == rb(sc, "even")["metadata"]["uid"]
        assert app["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "jbod-plans"
        assert stub.history[name] == ["SUBMITTED", "RUNNING", "COMPLETED"]
        # The plan was read and written to the proposal; the application and its folder went.
        assert await kube.get(SPARK_APPLICATIONS, sc.ns, name) is None
        assert not (tmp_path / "volume" / sc.ns / name).exists()
        cm = sc.kube.get("configmap", "even-proposal") or {}
        assert {"reassignment.json", "report.json", "manifests.json"} <= set(cm.get("data") or {})
    finally:
        await stub.aclose()
        await kube.close()
