"""Continuous detection's translations (plan/balance_objects.py): describe-log-dirs into a
sample, Rebalance objects into views, the Rebalance to create, status.balance."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jbod_broker import wire
from jbod_operator.models import BalanceTrigger, BrokerCluster
from jbod_operator.models.rebalance import (
    CLUSTER_LABEL,
    TRIGGER_LABEL,
    RebalanceMode,
    RebalanceSpec,
)
from jbod_operator.plan import balance_objects as bo
from jbod_operator.plan.balance_trigger import (
    Create,
    Decision,
    Known,
    PartitionSize,
    Spread,
)
from jbod_operator.plan.conditions import parse_iso
from jbod_operator.plan.snapshot import build_snapshot

KNOWN = Known(frozenset({0, 1}), frozenset({"a", "b"}))


def rep(topic: str, p: int, size: int, *, future: bool = False) -> wire.ReplicaDescription:
    return wire.ReplicaDescription(
        topic=topic, partition=p, size=size, offset_lag=0, is_future=future, log_end_offset=1
    )


def ldir(
    path: str, total: int, usable: int, *reps: wire.ReplicaDescription, live: bool = True
) -> wire.LogDirDescription:
    return wire.LogDirDescription(
        path=path,
        is_live=live,
        error=None if live else "KAFKA_STORAGE_ERROR",
        total_bytes=total,
        usable_bytes=usable,
        cordoned=False,
        partitions=list(reps),
    )


BC = {
    "metadata": {"name": "demo"},
    "spec": {
        "replicas": 3,
        "logDirs": [{"name": "a", "size": "1000"}, {"name": "b", "size": "500"}],
    },
}


def test_sample_from_a_snapshot() -> None:
    describes: dict[int, wire.DescribeLogDirsResponse | None] = {
        # Its own volumes: measured as the volumes report.
        0: wire.DescribeLogDirsResponse(
            broker_id=0,
            log_dirs=[
                ldir("/d0/data-a", 1000, 300, rep("t", 0, 500), rep("t", 1, 100)),
                # a future copy of t-1 being moved in: not a partition of its own
                ldir("/d0/data-b", 1000, 900, rep("t", 1, 40, future=True)),
            ],
        ),
        # Dirs on one filesystem (the same figures): their replicas over their spec size.
        1: wire.DescribeLogDirsResponse(
            broker_id=1,
            log_dirs=[
                ldir("/d1/data-a", 10**9, 5 * 10**8, rep("t", 0, 480)),
                ldir("/d1/data-b", 10**9, 5 * 10**8, rep("t", 2, 50)),
                ldir("/d1/data-c", 2000, 2000, live=False),
            ],
        ),
        2: None,
    }
    topic = {
        "metadata": {"name": "t"},
        "spec": {"clusterName": "demo"},
        "status": {
            "partitions": [
                {"partition": 0, "replicas": [{"brokerId": 0}, {"brokerId": 1}]},
                {"partition": 1, "replicas": [{"brokerId": 0}, {"brokerId": 2}]},
                {"partition": 2, "replicas": [{"brokerId": 1}]},
            ]
        },
    }
    answering = {b: d for b, d in describes.items() if d is not None}
    s = bo.sample_from_snapshot(50.0, build_snapshot("demo", BC, [topic], answering))
    assert s.time == 50.0
    assert s.expected_brokers == {0, 1, 2} and s.answered == {0, 1}
    assert [(d.broker_id, d.log_dir, d.used_bytes, d.capacity_bytes, d.live) for d in s.disks] == [
        (0, "a", 700, 1000, True),
        (0, "b", 100, 1000, True),
        (1, "a", 480, 1000, True),
        (1, "b", 50, 500, True),
        (1, "c", 0, 2000, False),
    ]
    assert s.partitions == (
        PartitionSize("t", 0, 500),
        PartitionSize("t", 1, 100),
        PartitionSize("t", 2, 50),
    )
    assert s.problem == "broker 2 did not answer"


def rb(
    name: str, phase: str | None, *, labels: dict[str, str] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-11-24T10:00:00Z",
            "labels": labels or {},
        },
        "status": {"phase": phase, **status} if phase else {},
    }


def test_rebalance_view_finished_at_completion_or_phase_condition() -> None:
    created = parse_iso("2026-11-24T10:00:00Z", 0)
    v = bo.rebalance_view(rb("r", "Ready", completionTime="2026-11-24T10:05:00Z"))
    assert (v.finished, v.finished_at, v.triggered) == (True, created + 300, False)
    cond = {"type": "Stopped", "status": "True", "lastTransitionTime": "2026-11-24T10:01:00Z"}
    v = bo.rebalance_view(rb("r", "Stopped", labels={TRIGGER_LABEL: "x"}, conditions=[cond]))
    assert (v.finished, v.finished_at, v.triggered) == (True, created + 60, True)
    for phase in ("PendingProposal", "ProposalReady", "Rebalancing", None):
        v = bo.rebalance_view(rb("r", phase))
        assert not v.finished and v.finished_at is None and v.created == created


def cluster(name: str = "demo", *, auto: bool = False) -> BrokerCluster:
    return BrokerCluster.model_validate(
        {
            "metadata": {"name": name, "namespace": "kafka", "uid": "u-1"},
            "spec": {
                "replicas": 3,
                "logDirs": [{"name": "a", "size": "1Gi"}],
                "balance": {"enabled": True, "autoApprove": auto},
            },
        }
    )


NOW = parse_iso("2026-11-24T19:50:07Z", 0)


def test_build_rebalance_add_brokers_is_a_valid_rebalance() -> None:
    c = Create(BalanceTrigger.BROKER_ADDED, RebalanceMode.ADD_BROKERS, (3, 4), "why", KNOWN)
    m = bo.build_rebalance(cluster(auto=True), c, NOW)
    assert m["metadata"]["name"] == "demo-broker-added-20261124-195007"
    assert m["metadata"]["labels"] == {TRIGGER_LABEL: "broker-added", CLUSTER_LABEL: "demo"}
    owner = m["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("BrokerCluster", "u-1", False)
    spec = RebalanceSpec.model_validate_json(json.dumps(m["spec"]), strict=True)
    assert (spec.cluster_name, spec.mode, spec.brokers, spec.auto_approve) == (
        "demo",
        RebalanceMode.ADD_BROKERS,
        [3, 4],
        True,
    )


def test_build_rebalance_long_cluster_names() -> None:
    c = Create(BalanceTrigger.DISK_IMBALANCE, RebalanceMode.DIRS_ONLY, (), "why", KNOWN)
    long = "c" * 70
    m = bo.build_rebalance(cluster(long), c, NOW)
    assert len(m["metadata"]["name"]) == bo.MAX_NAME
    assert m["metadata"]["name"].endswith("-disk-imbalance-20261124-195007")
    assert CLUSTER_LABEL not in m["metadata"]["labels"]  # a label value holds 63 at most
    assert m["spec"] == {"clusterName": long, "mode": "dirs-only", "autoApprove": False}


def test_balance_status_round_trips_what_a_restart_needs() -> None:
    d = Decision(
        create=None,
        known=KNOWN,
        spread=Spread(12.345, 1, 3.21),
        sustained_since=NOW - 30,
        cooldown_until=None,
        active=None,
        message="m",
    )
    c = Create(BalanceTrigger.DISK_ADDED, RebalanceMode.DIRS_ONLY, (), "log dir c added", KNOWN)
    last = bo.triggered_record({"metadata": {"name": "r1"}}, c, NOW - 100)
    st = bo.balance_status(d, samples=7, last_sample_time=NOW, last_triggered=last)
    assert st["diskSpreadPercent"] == 12.3 and st["brokerSpreadPercent"] == 3.2
    assert st["worstBroker"] == 1 and st["samples"] == 7
    assert st["sustainedSince"] == "2026-11-24T19:49:37Z"
    assert st["cooldownUntil"] is None  # removed by the merge patch
    assert bo.known_from_status(st) == KNOWN
    assert bo.last_triggered_at(st) == pytest.approx(NOW - 100)
    assert bo.known_from_status({}) is None and bo.last_triggered_at({}) is None
    # The status schema accepts it.
    from jbod_operator.models.broker_cluster import BalanceStatus

    BalanceStatus.model_validate({k: v for k, v in st.items() if v is not None})
