"""plan.cluster_reconcile: the BrokerCluster reconcile's storage plan, conditions, Events and
status, decided from an observation (no client, no clock)."""

from __future__ import annotations

from typing import Any

from jbod_broker import wire
from jbod_operator.models import BrokerCluster, LogDir
from jbod_operator.plan import cluster_reconcile as cr
from jbod_operator.plan.conditions import iso
from jbod_operator.plan.scale_down import ScaleDecision

NOW = 1_767_225_600.0
"""The time of the pass (2026-01-01): every condition that changes is stamped with it."""
LATER = NOW + 60


def cluster(dirs: tuple[str, ...] = ("a", "b"), replicas: int = 2, **spec: Any) -> BrokerCluster:
    return BrokerCluster.model_validate(
        {
            "apiVersion": "jbod.io/v1alpha1",
            "kind": "BrokerCluster",
            "metadata": {"name": "demo", "namespace": "ns", "uid": "u-1", "generation": 4},
            "spec": {
                "replicas": replicas,
                "logDirs": [{"name": n, "size": "1Gi"} for n in dirs],
                **spec,
            },
        }
    )


def ld(name: str, size: str = "1Gi") -> LogDir:
    return LogDir(name=name, size=size)


def rep(topic: str, partition: int) -> wire.ReplicaDescription:
    return wire.ReplicaDescription(
        topic=topic, partition=partition, size=10, offset_lag=0, is_future=False, log_end_offset=1
    )


def ldir(
    broker: int, name: str, *replicas: wire.ReplicaDescription, live: bool = True
) -> wire.LogDirDescription:
    return wire.LogDirDescription(
        path=f"/var/lib/jbod/data-{name}",
        is_live=live,
        error=None if live else "KafkaStorageException",
        total_bytes=1000,
        usable_bytes=750,
        cordoned=False,
        partitions=list(replicas),
    )


def answers(
    holding: dict[str, list[wire.ReplicaDescription]] | None = None,
    dirs: tuple[str, ...] = ("a", "b"),
    brokers: tuple[int, ...] = (0, 1),
    offline: tuple[tuple[int, str], ...] = (),
) -> dict[int, wire.DescribeLogDirsResponse | None]:
    """Every broker's describe-log-dirs; broker 0's ``holding`` dirs hold those replicas."""
    held = holding or {}
    return {
        b: wire.DescribeLogDirsResponse(
            broker_id=b,
            log_dirs=[
                ldir(b, n, *(held.get(n, []) if b == 0 else []), live=(b, n) not in offline)
                for n in dirs
            ],
        )
        for b in brokers
    }


def observe(
    bc: BrokerCluster,
    *,
    current: tuple[str, ...] | None = ("a", "b"),
    describes: dict[int, wire.DescribeLogDirsResponse | None] | None = None,
    scale: ScaleDecision | None = None,
    status: dict[str, Any] | None = None,
    now: float = NOW,
) -> cr.ClusterObservation:
    scale = scale or ScaleDecision(bc.spec.replicas)
    return cr.ClusterObservation(
        cluster=bc,
        status=status or {},
        current_log_dirs=None if current is None else [ld(n) for n in current],
        scale=scale,
        describes=answers() if describes is None else describes,
        urls={b: f"http://demo-broker-{b}:9000" for b in range(scale.replicas)},
        now=now,
    )


def conds(d: cr.ClusterDecision) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in d.status["conditions"]}


def test_a_new_cluster_applies_its_spec_and_is_ready_when_every_broker_answers() -> None:
    d = cr.decide(observe(cluster(), current=None))
    assert [x.name for x in d.effective.spec.log_dirs] == ["a", "b"]
    assert not d.recreate and d.refusals == () and d.offline == ()
    assert conds(d) == {
        "Ready": ("True", "AllBrokersReady", "2/2 brokers answer"),
        "Degraded": ("False", "Healthy", "every log dir is live"),
        "Progressing": ("False", "Stable", ""),
    }
    assert [c["type"] for c in d.status["conditions"]] == ["Ready", "Degraded", "Progressing"]
    assert {c["lastTransitionTime"] for c in d.status["conditions"]} == {iso(NOW)}
    assert {c["observedGeneration"] for c in d.status["conditions"]} == {4}
    assert d.status["observedGeneration"] == 4 and d.status["readyBrokers"] == 2
    assert d.status["logDirs"] == ["a", "b"] and d.changed
    (b0, _b1) = d.status["brokers"]
    assert b0["url"] == "http://demo-broker-0:9000" and b0["live"]
    assert b0["logDirs"][0] == {
        "name": "a",
        "path": "/var/lib/jbod/data-a",
        "live": True,
        "usedPercent": 25,
        "cordoned": False,
        "replicas": 0,
    }


def test_a_pass_that_finds_nothing_new_writes_nothing() -> None:
    first = cr.decide(observe(cluster()))
    again = cr.decide(observe(cluster(), status=first.status, now=LATER))
    assert again.status == first.status and not again.changed
    assert again.refusals == () and again.offline == ()


def test_other_writers_fields_are_neither_written_nor_compared() -> None:
    first = cr.decide(observe(cluster()))
    stored = {**first.status, "balance": {"samples": 3}, "strayReplicas": []}
    again = cr.decide(observe(cluster(), status=stored))
    assert "balance" not in again.status and "strayReplicas" not in again.status
    assert not again.changed


def test_an_added_log_dir_recreates_the_statefulset() -> None:
    d = cr.decide(observe(cluster(("a", "b", "c")), describes=answers()))
    assert d.recreate and d.refusals == ()
    assert d.status["logDirs"] == ["a", "b", "c"]
    assert conds(d)["Ready"][:2] == ("True", "AllBrokersReady")


def test_removing_a_dir_in_use_is_refused_keeping_its_template_and_said_once() -> None:
    bc = cluster(("b",))
    holding = answers({"a": [rep("orders", 3)]})
    d = cr.decide(observe(bc, describes=holding))
    # The current templates stay as they are: nothing to recreate.
    assert [x.name for x in d.effective.spec.log_dirs] == ["a", "b"] and not d.recreate
    assert d.status["logDirs"] == ["a", "b"]
    got = conds(d)
    blocked = got[cr.REMOVAL_BLOCKED]
    assert blocked[:2] == ("True", "LogDirsHoldReplicas")
    assert "log dir 'a' still holds 1 replica(s) (broker 0: orders-3)" in blocked[2]
    assert got["Ready"] == ("False", cr.REMOVAL_BLOCKED, blocked[2])
    assert got["Degraded"] == ("True", "StorageChangeRefused", blocked[2])
    assert d.refusals == (("Warning", "StorageChangeRefused", blocked[2]),)
    assert [c["type"] for c in d.status["conditions"]] == [
        "Ready",
        cr.REMOVAL_BLOCKED,
        "Degraded",
        "Progressing",
    ]
    # The next periodic pass finds the same refusal: the condition says it, no second Event.
    again = cr.decide(observe(bc, describes=holding, status=d.status, now=LATER))
    assert again.refusals == () and not again.changed
    # Drained: the removal goes ahead, and the condition says the way is clear.
    drained = cr.decide(observe(bc, status=d.status, describes=answers(), now=LATER))
    assert drained.recreate and drained.refusals == ()
    assert [x.name for x in drained.effective.spec.log_dirs] == ["b"]
    assert conds(drained)[cr.REMOVAL_BLOCKED] == (
        "False",
        "NoLogDirToEmpty",
        "no log dir removed from the spec holds a replica",
    )
    assert conds(drained)["Ready"][:2] == ("True", "AllBrokersReady")
    stamps = {c["type"]: c["lastTransitionTime"] for c in drained.status["conditions"]}
    assert stamps[cr.REMOVAL_BLOCKED] == iso(LATER) and stamps["Progressing"] == iso(NOW)


def test_a_broker_that_does_not_answer_may_hold_the_dir() -> None:
    describes = {**answers(), 1: None}
    d = cr.decide(observe(cluster(("b",)), describes=describes))
    assert "broker 1 did not answer" in conds(d)[cr.REMOVAL_BLOCKED][2]
    # Not answering comes first in Ready's reason; Progressing waits for it.
    assert conds(d)["Ready"][:2] == ("False", "BrokersNotReady")
    assert conds(d)["Progressing"] == ("True", "WaitingForBrokers", "1 brokers not answering yet")
    assert d.status["readyBrokers"] == 1 and d.status["brokers"][1]["live"] is False


def test_a_resize_is_refused_on_every_pass_with_the_current_template_kept() -> None:
    spec = cluster().spec.model_copy(update={"log_dirs": [ld("a", "2Gi"), ld("b")]})
    bc = cluster().model_copy(update={"spec": spec})
    d = cr.decide(observe(bc))
    assert [(x.name, x.size) for x in d.effective.spec.log_dirs] == [("a", "1Gi"), ("b", "1Gi")]
    assert not d.recreate
    ((kind, reason, message),) = d.refusals
    assert (kind, reason) == ("Warning", "StorageChangeRefused") and "cannot grow" in message
    assert conds(d)["Ready"] == ("False", "StorageChangeRefused", message)
    assert cr.REMOVAL_BLOCKED not in conds(d)
    # Not a blocked removal: no condition of its own holds it, so the Event is posted again.
    again = cr.decide(observe(bc, status=d.status))
    assert again.refusals == d.refusals


def test_a_blocked_scale_down_keeps_the_broker_count_and_is_said_once() -> None:
    bc = cluster(replicas=1)
    scale = ScaleDecision(2, {1: 5}, "broker 1 holds 5 replicas")
    d = cr.decide(observe(bc, scale=scale))
    assert d.effective.spec.replicas == 2 and len(d.status["brokers"]) == 2
    assert d.refusals == (("Warning", "ScaleDownRefused", "broker 1 holds 5 replicas"),)
    assert conds(d)["ScaleDownBlocked"] == (
        "True",
        "BrokersHoldReplicas",
        "broker 1 holds 5 replicas",
    )
    assert conds(d)["Ready"] == ("False", "ScaleDownBlocked", "broker 1 holds 5 replicas")
    again = cr.decide(observe(bc, scale=scale, status=d.status))
    assert again.refusals == ()
    gone = cr.decide(observe(bc, status=d.status, describes=answers(brokers=(0,))))
    assert gone.effective.spec.replicas == 1
    assert conds(gone)["ScaleDownBlocked"][:2] == ("False", "NoBrokerToEmpty")


def test_a_dir_going_offline_is_one_event_and_degraded() -> None:
    first = cr.decide(observe(cluster()))
    broken = answers(offline=((1, "b"),))
    d = cr.decide(observe(cluster(), describes=broken, status=first.status))
    assert d.offline == (("Warning", "LogDirOffline", "broker 1: log dir b is offline"),)
    assert conds(d)["Degraded"] == ("True", "LogDirOffline", "broker 1: b")
    assert d.status["brokers"][1]["offlineLogDirs"] == ["b"]
    assert d.status["brokers"][1]["logDirs"][1]["error"] == "KafkaStorageException"
    assert cr.decide(observe(cluster(), describes=broken, status=d.status)).offline == ()


def test_racks_are_given_round_robin() -> None:
    d = cr.decide(observe(cluster(replicas=3, racks=["r1", "r2"]), describes=answers()))
    assert [b.get("rack") for b in d.status["brokers"]] == ["r1", "r2", "r1"]
    assert [b["live"] for b in d.status["brokers"]] == [True, True, False]


def test_ready_reason_names_the_first_that_applies() -> None:
    refused = cr.StoragePlan((), refused="r", removal_blocked="r")
    scale = ScaleDecision(2, {1: 1}, "s")
    assert cr.ready_reason(1, 2, refused, scale) == "BrokersNotReady"
    assert cr.ready_reason(2, 2, refused, scale) == "ScaleDownBlocked"
    assert cr.ready_reason(2, 2, refused, ScaleDecision(2)) == cr.REMOVAL_BLOCKED
    resized = cr.StoragePlan((), refused="r")
    assert cr.ready_reason(2, 2, resized, ScaleDecision(2)) == "StorageChangeRefused"
    assert cr.ready_reason(2, 2, cr.StoragePlan(()), ScaleDecision(2)) == "AllBrokersReady"


def test_nonempty_dirs_names_every_replica_and_every_silent_broker() -> None:
    describes = {**answers({"a": [rep("t", 0), rep("t", 1)]}), 1: None}
    assert cr.nonempty_dirs(describes, ["a", "b"]) == {
        "a": ["broker 0: t-0", "broker 0: t-1", "broker 1 did not answer"],
        "b": ["broker 1 did not answer"],
    }
