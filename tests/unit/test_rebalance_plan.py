"""The pure parts of the Rebalance handler (``jbod_operator.plan.rebalance``): the cluster's
fingerprint, the proposal's moves against its snapshot, their waves under the capacity
threshold, the children built per wave, and the proposal summary."""

from __future__ import annotations

from typing import Any

from jbod_operator.control.our_brokers import cluster_record
from jbod_operator.models.rebalance import Rebalance
from jbod_operator.models.snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo
from jbod_operator.plan import rebalance as rp
from jbod_operator.plan.scale_down import replicas_per_broker
from tests.unit.test_rebalance_machine import report

MIB = 2**20


def topic(name: str, parts: list[list[tuple[int, str]]], leader: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"clusterName": "kip", "partitions": len(parts)},
        "status": {
            "partitions": [
                {
                    "partition": i,
                    "replicas": [{"brokerId": b, "logDir": d} for b, d in reps],
                    "leader": leader,
                    "isr": [b for b, _ in reps],
                }
                for i, reps in enumerate(parts)
            ]
        },
    }


BC: dict[str, Any] = {
    "metadata": {"name": "kip"},
    "spec": {"replicas": 2, "logDirs": [{"name": "a"}]},
}


def test_the_fingerprint_ignores_leaders_and_isr_but_not_where_replicas_are() -> None:
    base = rp.cluster_fingerprint(BC, [topic("orders", [[(0, "a"), (1, "a")]])])
    assert set(base) == {"BrokerCluster/kip", "Topic/orders"}
    led = rp.cluster_fingerprint(BC, [topic("orders", [[(0, "a"), (1, "a")]], leader=1)])
    assert led == base
    moved = rp.cluster_fingerprint(BC, [topic("orders", [[(0, "b"), (1, "a")]])])
    assert rp.stale(base, moved) == ["Topic/orders changed"]
    grown = {**BC, "spec": {**BC["spec"], "replicas": 3}}
    assert rp.stale(base, rp.cluster_fingerprint(grown, [topic("orders", [[(0, "a"), (1, "a")]])]))


def snap(used_a: int = 40 * MIB) -> ClusterSnapshot:
    dirs = [
        LogDirInfo(
            broker_id=b, name=n, path=f"/d/{b}/data-{n}", capacity_bytes=100 * MIB, used_bytes=u
        )
        for b in (0, 1)
        for n, u in (("a", used_a), ("b", 0))
    ]
    reps = [
        ReplicaInfo(
            topic="t",
            partition=p,
            broker_id=0,
            log_dir="/d/0/data-a",
            size_bytes=10 * MIB,
            leader=True,
        )
        for p in range(4)
    ]
    return ClusterSnapshot(
        cluster_name="kip",
        brokers=[BrokerInfo(id=0), BrokerInfo(id=1)],
        log_dirs=dirs,
        replicas=reps,
    )


KAFKA = {
    "partitions": [
        {"topic": "t", "partition": 0, "replicas": [0], "log_dirs": ["/d/0/data-b"]},
        {"topic": "t", "partition": 1, "replicas": [1], "log_dirs": ["/d/1/data-a"]},
    ]
}


def test_planned_moves_between_disks_and_between_brokers() -> None:
    assert rp.planned_moves(snap(), KAFKA) == [
        rp.PlannedMove("t", 0, 0, "/d/0/data-a", 0, "/d/0/data-b", 10 * MIB),
        rp.PlannedMove("t", 1, 0, "/d/0/data-a", 1, "/d/1/data-a", 10 * MIB),
    ]


def test_waves_keep_every_disk_under_the_threshold() -> None:
    moves = rp.planned_moves(snap(), KAFKA)
    doc = rp.waves_document(moves, snap(), 0.8)
    assert doc["waves"] == 1 and doc["unplaced"] == []
    assert {(e["partition"], e["wave"], e["bytes"]) for e in doc["partitions"]} == {
        (0, 1, 10 * MIB),
        (1, 1, 10 * MIB),
    }
    # A destination already at 75 % of 100 MiB cannot take 10 MiB under 80 %: never run.
    full = snap()
    full = full.model_copy(
        update={
            "log_dirs": [
                d.model_copy(update={"used_bytes": 75 * MIB}) if d.path == "/d/0/data-b" else d
                for d in full.log_dirs
            ]
        }
    )
    doc = rp.waves_document(rp.planned_moves(full, KAFKA), full, 0.8)
    assert [e["partition"] for e in doc["partitions"]] == [1]
    assert doc["unplaced"] and doc["unplaced"][0].startswith("t-0: ")


def rebalance(**spec: Any) -> Rebalance:
    return Rebalance.model_validate(
        {
            "metadata": {"name": "even", "namespace": "kafka", "uid": "u1"},
            "spec": {"clusterName": "kip", "mode": "full", **spec},
        }
    )


MANIFESTS = {
    "items": [
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "PartitionReassignment",
            "metadata": {"name": "even-1-brokers-0", "labels": {"jbod.io/plan": "p"}},
            "spec": {
                "clusterName": "kip",
                "partitions": [
                    {"topic": "t", "partition": 1, "replicas": [1], "logDirs": ["a"]},
                    {"topic": "t", "partition": 2, "replicas": [1], "logDirs": ["b"]},
                ],
            },
        },
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "LogDirMove",
            "metadata": {"name": "even-1-dirs-0"},
            "spec": {
                "clusterName": "kip",
                "moves": [{"brokerId": 0, "topic": "t", "partition": 0, "logDir": "b"}],
            },
        },
    ]
}
WAVES: dict[str, Any] = {
    "waves": 2,
    "partitions": [
        {"topic": "t", "partition": 0, "wave": 1, "bytes": 10},
        {"topic": "t", "partition": 1, "wave": 1, "bytes": 20},
        {"topic": "t", "partition": 2, "wave": 2, "bytes": 30},
    ],
}


def test_children_are_split_by_wave_with_the_rebalance_s_limits_and_label() -> None:
    r = rebalance(
        maxConcurrentPartitionMovements=7, maxConcurrentMovesPerBroker=3, throttleBytesPerSecond=9
    )
    kids, waves = rp.plan_children(r, MANIFESTS, WAVES)
    assert waves == 2
    assert [(k.plan.kind, k.plan.name, k.plan.wave, k.plan.bytes_planned) for k in kids] == [
        ("PartitionReassignment", "even-1-brokers-0-w1", 1, 20),
        ("PartitionReassignment", "even-1-brokers-0-w2", 2, 30),
        ("LogDirMove", "even-1-dirs-0-w1", 1, 10),
    ]
    pr = kids[0].body
    assert pr["spec"]["maxConcurrentPartitionMovements"] == 7
    assert (
        pr["spec"]["maxConcurrentMovesPerBroker"] == 3 and pr["spec"]["throttleBytesPerSecond"] == 9
    )
    assert [p["partition"] for p in pr["spec"]["partitions"]] == [1]
    assert pr["metadata"]["labels"] == {
        "jbod.io/plan": "p",
        "jbod.io/rebalance": "even",
        "jbod.io/cluster": "kip",
    }
    ldm = kids[2].body["spec"]
    assert "maxConcurrentPartitionMovements" not in ldm and ldm["maxConcurrentMovesPerBroker"] == 3


def test_one_wave_keeps_the_job_s_names() -> None:
    one = {"waves": 1, "partitions": [{**e, "wave": 1} for e in WAVES["partitions"]]}
    kids, _ = rp.plan_children(rebalance(), MANIFESTS, one)
    assert [k.plan.name for k in kids] == ["even-1-brokers-0", "even-1-dirs-0"]


def test_moves_no_wave_can_take_make_the_proposal_infeasible() -> None:
    s = rp.summarise(report(), 1, ["t-0: no room on broker 0 dir /d/0/data-b"])
    assert not s.feasible
    assert s.problems == [
        "no order keeps the disks under the threshold for t-0: no room on broker 0 dir /d/0/data-b"
    ]
    assert rp.summarise(report(), 1).feasible


def test_disks_being_emptied_are_outside_the_band() -> None:
    r = rebalance(mode="remove-disks", logDirs=[{"brokerId": 0, "logDir": "a"}])
    uses = rp.disk_uses(snap(), r)
    assert [(u.broker_id, u.name, u.counted) for u in uses] == [
        (0, "a", False),
        (0, "b", True),
        (1, "a", True),
        (1, "b", True),
    ]


def test_what_a_remove_mode_left_behind_is_named() -> None:
    """remove-disks: the replicas still in a drained disk, by where the brokers have them;
    remove-brokers: every partition a Topic status still names the broker for (a replica, or
    one a reassignment adds or moves to); the other modes empty nothing."""
    disks = rebalance(mode="remove-disks", logDirs=[{"brokerId": 0, "logDir": "a"}])
    assert rp.left_behind(disks, {}, snap()) == [
        "log dir a of broker 0 still holds 4 replicas (t-0, t-1, t-2, t-3)"
    ]
    assert rp.left_behind(disks, {}, snap().model_copy(update={"replicas": []})) == []
    other = rebalance(mode="remove-disks", logDirs=[{"brokerId": 1, "logDir": "data-a"}])
    assert rp.left_behind(other, {}, snap()) == []

    brokers = rebalance(mode="remove-brokers", brokers=[1])
    held = topic("orders", [[(0, "a"), (1, "a")], [(0, "b")]])
    assert rp.left_behind(brokers, replicas_per_broker([held]), snap()) == [
        "broker 1 still holds 1 replica"
    ]
    adding = topic("orders", [[(0, "a")]])
    adding["status"]["partitions"][0]["addingReplicas"] = [1]
    assert rp.left_behind(brokers, replicas_per_broker([adding]), snap()) == [
        "broker 1 still holds 1 replica"
    ]
    assert (
        rp.left_behind(brokers, replicas_per_broker([topic("orders", [[(0, "a")]])]), snap()) == []
    )
    assert rp.left_behind(rebalance(mode="full"), replicas_per_broker([held]), snap()) == []


def test_a_scale_down_that_waits_leaves_its_brokers_to_a_remove_brokers_rebalance() -> None:
    """spec.replicas lowered from 3 to 2 while broker 2 holds replicas: the scale-down waits
    and names a remove-brokers Rebalance of broker 2 as the remedy, so that Rebalance must see
    broker 2 (every broker the status lists), not be refused as naming a broker that is gone."""
    bc = {
        "metadata": {"name": "kip", "namespace": "kafka"},
        "spec": {"replicas": 2, "logDirs": [{"name": "a", "size": "1Gi"}]},
        "status": {"brokers": [{"id": b, "live": True, "logDirs": []} for b in range(3)]},
    }
    rec = cluster_record(bc, [])
    view = rp.cluster_view(rec.size, rec.dir_names, None)
    assert view.size == 3 and view.dirs[2] == (("a", "a"),)
    assert rp.check_spec(rebalance(mode="remove-brokers", brokers=[2]), view) == []
    assert rp.check_spec(rebalance(mode="remove-brokers", brokers=[3]), view) == [
        "broker 3 does not exist (brokers 0-2)"
    ]


def test_a_kafka_cluster_s_missing_broker_is_refused_whatever_its_id() -> None:
    """Issue 38: a KafkaCluster of brokers 1-4 has no broker 0; a Rebalance naming it is
    refused as naming 9 is, and the message names the brokers there are (the spec checks
    counted 0 to the highest id, so 0 passed and messages said "brokers 0-4")."""
    view = rp.cluster_view(5, ["a", "b"], None, frozenset({1, 2, 3, 4}))
    assert 0 not in view.dirs and view.dirs[4] == (("a", "a"), ("b", "b"))
    for b in (0, 9):
        assert rp.check_spec(rebalance(mode="add-brokers", brokers=[b]), view) == [
            f"broker {b} does not exist (brokers 1-4)"
        ]
    assert rp.check_spec(rebalance(mode="remove-brokers", brokers=[1, 2, 3, 4]), view) == [
        "remove-brokers would remove every broker"
    ]
    assert rp.check_spec(rebalance(mode="remove-brokers", brokers=[1]), view) == []
