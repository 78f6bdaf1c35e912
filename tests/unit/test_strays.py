"""plan.strays: which replicas a broker holds outside the partitions' state of record (Kafka's
``LogManager.isStrayKraftReplica`` over the Topics' status), and what the BrokerCluster's
status lists until they are deleted."""

from __future__ import annotations

from typing import Any

from jbod_broker import wire
from jbod_operator.models.common import StrayReplica
from jbod_operator.models.reassignment import MAX_DETAIL, PartitionReassignmentStatus
from jbod_operator.plan.conditions import iso
from jbod_operator.plan.strays import Stray, find_strays, pending, record_index, still_there

A, B = "/data-a", "/data-b"
T0 = 1_800_000_000.0


def topic(
    name: str,
    parts: dict[int, list[int]],
    *,
    spec_partitions: int | None = None,
    deleting: bool = False,
    kafka_name: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"clusterName": "kip", "partitions": spec_partitions or len(parts)}
    if kafka_name:
        spec["topicName"] = kafka_name
    return {
        "metadata": meta,
        "spec": spec,
        "status": {
            "partitions": [
                {"partition": p, "replicas": [{"brokerId": b} for b in rs]}
                for p, rs in parts.items()
            ]
        },
    }


def dirs(
    *held: tuple[str, str, int, bool], offline: str | None = None
) -> wire.DescribeLogDirsResponse:
    """A describe-log-dirs of broker 2 with ``held`` = (dir, topic, partition, is_future)."""
    out = []
    for path in (A, B):
        out.append(
            wire.LogDirDescription(
                path=path,
                is_live=path != offline,
                error="KAFKA_STORAGE_ERROR" if path == offline else None,
                total_bytes=1,
                usable_bytes=1,
                cordoned=False,
                partitions=[
                    wire.ReplicaDescription(
                        topic=t, partition=p, size=0, offset_lag=0, is_future=f, log_end_offset=0
                    )
                    for d, t, p, f in held
                    if d == path
                ],
            )
        )
    return wire.DescribeLogDirsResponse(broker_id=2, log_dirs=out)


def keys(found: list[Stray]) -> list[tuple[str, int, str]]:
    return [(s.topic, s.partition, s.log_dir) for s in found]


def test_a_replica_the_record_places_on_the_broker_is_no_stray() -> None:
    topics = [topic("t", {0: [0, 1, 2], 1: [0, 1, 3]})]
    assert keys(find_strays(2, dirs((A, "t", 0, False)), record_index(topics))) == []


def test_a_dropped_replica_is_a_stray_even_while_listed_in_removing_replicas() -> None:
    t = topic("t", {0: [0, 1, 3]})
    t["status"]["partitions"][0]["removingReplicas"] = [2]  # shrunk: outside replicas
    assert keys(find_strays(2, dirs((B, "t", 0, False)), record_index([t]))) == [("t", 0, B)]


def test_a_replica_a_step_adds_or_is_about_to_drop_is_no_stray() -> None:
    t = topic("t", {0: [0, 1, 3, 2]})
    t["status"]["partitions"][0]["addingReplicas"] = [2]  # adding ones are in replicas
    assert find_strays(2, dirs((A, "t", 0, False)), record_index([t])) == []
    u = topic("u", {0: [2, 0, 1]})
    u["status"]["partitions"][0]["removingReplicas"] = [2]  # not shrunk yet: still a replica
    assert find_strays(2, dirs((A, "u", 0, False)), record_index([u])) == []


def test_replicas_of_a_topic_deleted_or_being_deleted_are_strays() -> None:
    topics = [topic("gone-soon", {0: [2, 0, 1]}, deleting=True)]
    held = dirs((A, "gone", 3, False), (B, "gone-soon", 0, False))
    found = find_strays(2, held, record_index(topics))
    assert keys(found) == [("gone", 3, A), ("gone-soon", 0, B)]


def test_a_partition_the_topic_is_creating_is_no_stray_one_it_cannot_have_is() -> None:
    # spec says 4; entries 0-1 written so far: 2 and 3 are being created (never strays), 7 is
    # an older topic's of the same name (partitions never decrease).
    topics = [topic("t", {0: [0, 1, 3], 1: [0, 1, 3]}, spec_partitions=4)]
    held = dirs((A, "t", 2, False), (A, "t", 3, False), (B, "t", 7, False))
    assert keys(find_strays(2, held, record_index(topics))) == [("t", 7, B)]
    # A Topic with no partitions written at all is being created too.
    fresh = topic("n", {}, spec_partitions=3)
    assert find_strays(2, dirs((A, "n", 0, False)), record_index([fresh])) == []


def test_a_future_copy_goes_with_its_replica() -> None:
    topics = [topic("t", {0: [2, 0, 1], 1: [0, 1, 3]})]
    # A move of a placed replica: no stray. A dropped one's future copy: stray, reported at
    # its current copy's dir, once.
    held = dirs((A, "t", 0, False), (B, "t", 0, True), (B, "t", 1, True), (A, "t", 1, False))
    assert keys(find_strays(2, held, record_index(topics))) == [("t", 1, A)]
    # Only a future copy left (its current copy deleted): stray, at the future's dir.
    assert keys(find_strays(2, dirs((B, "t", 1, True)), record_index(topics))) == [("t", 1, B)]


def test_an_offline_dir_is_not_judged() -> None:
    held = dirs((A, "gone", 0, False), (B, "gone", 1, False), offline=B)
    assert keys(find_strays(2, held, record_index([]))) == [("gone", 0, A)]


def test_the_kafka_name_is_the_topics_name_and_a_refused_twin_is_not_the_record() -> None:
    named = topic("res-name", {0: [2, 0, 1]}, kafka_name="Orders.v1")
    twin = topic("other", {}, spec_partitions=1, kafka_name="Orders.v1")  # refused: no entries
    held = dirs((A, "Orders.v1", 0, False), (B, "res-name", 0, False))
    assert keys(find_strays(2, held, record_index([twin, named]))) == [("res-name", 0, B)]


def test_still_there_is_what_describe_log_dirs_lists_after_the_deletion() -> None:
    found = [Stray(2, "t", 0, A), Stray(2, "t", 1, B)]
    assert still_there(found, dirs((A, "t", 1, False))) == [Stray(2, "t", 1, B)]
    assert still_there(found, dirs()) == []
    assert still_there(found, None) == found  # no answer: not confirmed


def left(b: int, t: str, p: int, at: float) -> StrayReplica:
    return StrayReplica(broker_id=b, topic=t, partition=p, since=iso(at))


def test_a_left_replica_is_pending_until_its_broker_is_checked_after_it() -> None:
    entries = [left(1, "t", 0, T0), left(2, "t", 1, T0)]
    # Broker 1 down (never checked), broker 2 checked in the same second: both pending.
    assert pending(entries, [], {2: T0 + 0.9}, 5) == entries
    # Broker 2 checked a second later: done (what it still holds is in ``undeleted``).
    assert pending(entries, [], {2: T0 + 1}, 5) == entries[:1]
    still = StrayReplica(broker_id=2, topic="t", partition=1, log_dir=A)
    assert pending(entries, [still], {2: T0 + 1}, 5) == [entries[0], still]


def test_a_broker_beyond_the_cluster_holds_nothing_pending() -> None:
    assert pending([left(7, "t", 0, T0)], [], {}, 5) == []


def test_the_reassignment_status_records_each_left_replica_once_latest_kept() -> None:
    st = PartitionReassignmentStatus()
    st = st.with_stray(2, "t", 0, iso(T0)).with_stray(2, "t", 0, iso(T0 + 5))
    assert [(s.broker_id, s.since) for s in st.stray_replicas] == [(2, iso(T0 + 5))]
    for p in range(MAX_DETAIL + 5):
        st = st.with_stray(1, "u", p, iso(T0))
    assert len(st.stray_replicas) == MAX_DETAIL
    assert st.stray_replicas[-1].partition == MAX_DETAIL + 4
