"""jbod-ctl cluster bootstrap-servers against a fake kubectl (issue 18)."""

from __future__ import annotations

import pytest

from jbod_operator.tools.cli import app, cluster
from tests.unit.test_builders import cluster as broker_cluster
from tests.unit.test_cli_rebalance import FakeKubectl


def test_prints_every_broker_kafka_listener(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = broker_cluster().model_dump(mode="json", by_alias=True, exclude_none=True)
    kube = FakeKubectl({(cluster.RESOURCE, "main"): raw})
    monkeypatch.setattr(cluster, "kubectl_from_args", lambda ns: kube)
    assert app.main(["cluster", "bootstrap-servers", "main", "-n", "kafka"]) == 0
    assert capsys.readouterr().out.strip() == ",".join(
        f"main-broker-{i}.main-brokers.kafka.svc:9093" for i in range(3)
    )


def test_an_unknown_cluster_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cluster, "kubectl_from_args", lambda ns: FakeKubectl({}))
    assert app.main(["cluster", "bootstrap-servers", "nope"]) == 1
    assert "BrokerCluster nope not found in namespace ns" in capsys.readouterr().err
