"""Snapshots: the JSON model, the collector's pure part, the columnar and table forms."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from jbod_broker import wire
from jbod_operator.models.snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo
from jbod_operator.plan.snapshot import build_snapshot, quantity_bytes
from jbod_spark.arrays import from_snapshot
from jbod_spark.frames import (
    arrays_from_coded,
    arrays_from_tables,
    coded_frames,
    tables_from_arrays,
)
from jbod_spark.synthetic import synthetic_cluster, to_snapshot

GB = 10**9


def small() -> ClusterSnapshot:
    return ClusterSnapshot(
        cluster_name="c",
        brokers=[BrokerInfo(id=2, rack="b"), BrokerInfo(id=1, rack="a")],
        log_dirs=[
            LogDirInfo(broker_id=2, name="y", path="/v/y", capacity_bytes=100, used_bytes=50),
            LogDirInfo(broker_id=1, name="x", path="/v/x", capacity_bytes=100, used_bytes=10),
            LogDirInfo(broker_id=2, name="w", path="/v/w", capacity_bytes=100, used_bytes=0),
        ],
        replicas=[
            ReplicaInfo(topic="t", partition=1, broker_id=2, log_dir="/v/y", size_bytes=20),
            ReplicaInfo(
                topic="t", partition=1, broker_id=1, log_dir="x", size_bytes=10, leader=True
            ),
            ReplicaInfo(topic="s", partition=0, broker_id=2, log_dir="y", size_bytes=5),
        ],
    )


def test_json_round_trip_is_camel_case() -> None:
    s = small()
    text = s.dump_json()
    assert '"capacityBytes"' in text and '"brokerId"' in text
    assert ClusterSnapshot.model_validate_json(text) == s


@pytest.mark.parametrize(
    "change, message",
    [
        ({"brokers": [BrokerInfo(id=1), BrokerInfo(id=1)]}, "unique"),
        (
            {
                "replicas": [
                    ReplicaInfo(topic="t", partition=0, broker_id=1, log_dir="/nope", size_bytes=1)
                ]
            },
            "no log dir",
        ),
        (
            {
                "replicas": [
                    ReplicaInfo(topic="t", partition=0, broker_id=2, log_dir="y", size_bytes=1),
                    ReplicaInfo(topic="t", partition=0, broker_id=2, log_dir="w", size_bytes=1),
                ]
            },
            "two replicas",
        ),
        (
            {
                "replicas": [
                    ReplicaInfo(
                        topic="t", partition=0, broker_id=2, log_dir="y", size_bytes=1, leader=True
                    ),
                    ReplicaInfo(
                        topic="t", partition=0, broker_id=1, log_dir="x", size_bytes=1, leader=True
                    ),
                ]
            },
            "two leaders",
        ),
    ],
)
def test_inconsistent_snapshots_are_refused(change: dict[str, Any], message: str) -> None:
    data = {**small().model_dump(), **change}
    with pytest.raises(ValidationError, match=message):
        ClusterSnapshot.model_validate(data)


def test_arrays_are_canonical() -> None:
    a = from_snapshot(small())
    assert a.broker_ids.tolist() == [1, 2]
    assert a.rack_names == ("a", "b")
    assert a.dir_path == ("/v/x", "/v/w", "/v/y")
    assert list(zip(a.part_topic, a.part_num.tolist(), strict=True)) == [("s", 0), ("t", 1)]
    # t-1 keeps its list order: broker 2 first, then broker 1 (the leader)
    assert a.rep_broker.tolist() == [1, 1, 0]
    assert a.rep_leader.tolist() == [False, False, True]
    # bytes on a volume that are not replicas
    assert a.dir_other.tolist() == [0, 0, 25]
    assert a.dir_used().tolist() == [10, 0, 50]


def test_tables_and_coded_frames_round_trip() -> None:
    a = synthetic_cluster(5, 6, 3, 600)
    t = tables_from_arrays(a)
    b = arrays_from_tables(
        a.cluster, t["brokers"], t["log_dirs"], t["replicas"].sample(frac=1.0, random_state=3)
    )
    for f in (
        "broker_ids",
        "broker_rack",
        "dir_broker",
        "dir_capacity",
        "dir_other",
        "rep_part",
        "rep_broker",
        "rep_dir",
        "rep_size",
        "rep_leader",
        "part_num",
    ):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert a.part_topic == b.part_topic and a.dir_path == b.dir_path
    topo, reps = coded_frames(a)
    c = arrays_from_coded(a.cluster, topo.iloc[::-1], reps.iloc[::-1])
    for f in ("broker_ids", "dir_broker", "dir_capacity", "rep_part", "rep_dir", "rep_size"):
        assert np.array_equal(getattr(a, f), getattr(c, f)), f
    assert from_snapshot(to_snapshot(a)).rep_dir.tolist() == a.rep_dir.tolist()


def test_synthetic_clusters_are_reproducible_and_skewed() -> None:
    a = synthetic_cluster(1, 12, 4, 6000)
    b = synthetic_cluster(1, 12, 4, 6000)
    assert np.array_equal(a.rep_size, b.rep_size) and np.array_equal(a.rep_dir, b.rep_dir)
    util = a.dir_used() / a.dir_capacity
    assert util.max() - util.min() > 0.3
    sizes = np.sort(a.rep_size[::3])
    assert sizes[-1] > 10 * np.median(sizes)  # heavy tail
    # one replica per rack per partition
    racks = a.broker_rack[a.rep_broker].reshape(-1, 3)
    assert (np.sort(racks, axis=1) == [0, 1, 2]).all()


# -- the collector's pure part ---------------------------------------------------------------


def describe(
    broker: int, dirs: list[tuple[str, bool, list[tuple[str, int, int]]]]
) -> wire.DescribeLogDirsResponse:
    return wire.DescribeLogDirsResponse(
        broker_id=broker,
        log_dirs=[
            wire.LogDirDescription(
                path=path,
                is_live=live,
                error=None if live else "KafkaStorageException",
                total_bytes=100 * GB,
                usable_bytes=100 * GB - sum(s for _, _, s in parts) - GB,
                cordoned=False,
                partitions=[
                    wire.ReplicaDescription(
                        topic=t,
                        partition=p,
                        size=s,
                        offset_lag=0,
                        is_future=False,
                        log_end_offset=0,
                    )
                    for t, p, s in parts
                ],
            )
            for path, live, parts in dirs
        ],
    )


def test_build_snapshot_from_describe_log_dirs_and_topic_status() -> None:
    bc = {
        "metadata": {"name": "demo"},
        "spec": {
            "replicas": 3,
            "logDirs": [{"name": "a", "size": "100Gi"}, {"name": "b", "size": "100Gi"}],
            "racks": ["r0", "r1"],
        },
        "status": {
            "brokers": [
                {"id": 0, "rack": "r0", "live": True, "url": "http://b0"},
                {"id": 1, "rack": "r1", "live": True, "url": "http://b1"},
                {
                    "id": 2,
                    "live": False,
                    "logDirs": [
                        {"name": "a", "path": "/var/lib/jbod/data-a", "live": False},
                        {"name": "b", "path": "/var/lib/jbod/data-b", "live": False},
                    ],
                },
            ]
        },
    }
    topic: dict[str, Any] = {
        "metadata": {"name": "orders"},
        "spec": {"clusterName": "demo", "partitions": 1, "replicationFactor": 3},
        "status": {
            "partitions": [
                {
                    "partition": 0,
                    "leader": 1,
                    "leaderEpoch": 3,
                    "isr": [1, 0],
                    "replicas": [
                        {"brokerId": 1, "logDir": "/var/lib/jbod/data-a"},
                        # status says a, broker 0 has it on b (a move finished): observed state wins
                        {"brokerId": 0, "logDir": "/var/lib/jbod/data-a"},
                        {"brokerId": 2, "logDir": "/var/lib/jbod/data-b"},
                    ],
                }
            ]
        },
    }
    other_cluster = {**topic, "spec": {**topic["spec"], "clusterName": "else"}}
    d0 = describe(
        0,
        [
            ("/var/lib/jbod/data-a", True, []),
            ("/var/lib/jbod/data-b", True, [("orders", 0, 7 * GB)]),
        ],
    )
    d1 = describe(
        1,
        [
            ("/var/lib/jbod/data-a", True, [("orders", 0, 8 * GB)]),
            ("/var/lib/jbod/data-b", False, []),
        ],
    )
    s = build_snapshot("demo", bc, [topic, other_cluster], {0: d0, 1: d1}, namespace="kafka")
    assert [(b.id, b.rack, b.live) for b in s.brokers] == [
        (0, "r0", True),
        (1, "r1", True),
        (2, "r0", False),
    ]
    b1b = next(d for d in s.log_dirs if d.broker_id == 1 and d.name == "b")
    assert not b1b.live
    b0b = next(d for d in s.log_dirs if d.broker_id == 0 and d.name == "b")
    assert b0b.used_bytes == 8 * GB and b0b.capacity_bytes == 100 * GB
    dead = [d for d in s.log_dirs if d.broker_id == 2]
    assert {d.capacity_bytes for d in dead} == {quantity_bytes("100Gi")} == {100 * 2**30}
    reps = [(r.broker_id, r.log_dir, r.size_bytes, r.leader) for r in s.replicas]
    assert reps == [
        (1, "/var/lib/jbod/data-a", 8 * GB, True),
        (0, "/var/lib/jbod/data-b", 7 * GB, False),
        (2, "/var/lib/jbod/data-b", 8 * GB, False),  # dead: the largest sibling's size
    ]
    a = from_snapshot(s)
    assert a.n_replicas == 3 and not a.broker_live[2]


def test_dirs_sharing_one_filesystem_use_spec_sizes_and_replica_bytes() -> None:
    # a demo on one disk: both dirs report the whole disk, figures that say nothing per dir
    bc = {
        "spec": {
            "replicas": 1,
            "logDirs": [{"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}],
        },
        "status": {"brokers": [{"id": 0, "live": True, "url": "http://b0"}]},
    }
    parts = [("t", 0, 300 * 2**20), ("t", 1, 100 * 2**20)]
    d = wire.DescribeLogDirsResponse(
        broker_id=0,
        log_dirs=[
            wire.LogDirDescription(
                path=f"/var/lib/jbod/data-{n}",
                is_live=True,
                error=None,
                total_bytes=500 * GB,
                usable_bytes=200 * GB,
                cordoned=False,
                partitions=[
                    wire.ReplicaDescription(
                        topic=t,
                        partition=p,
                        size=s,
                        offset_lag=0,
                        is_future=False,
                        log_end_offset=0,
                    )
                    for t, p, s in (parts if n == "a" else [])
                ],
            )
            for n in ("a", "b")
        ],
    )
    s = build_snapshot("demo", bc, [], {0: d})
    assert [(x.name, x.capacity_bytes, x.used_bytes) for x in s.log_dirs] == [
        ("a", 2**30, 400 * 2**20),
        ("b", 2**30, 0),
    ]


def test_dirs_of_a_filesystem_written_to_meanwhile_still_share_it() -> None:
    # the demo's snapshot with a producer running: the broker reads each dir's figures in turn,
    # so the shared filesystem's usable bytes differ a little from one dir to the next; each dir
    # is still a 1Gi dir of that filesystem, never a 500 GB disk filled by all of it
    bc = {
        "spec": {
            "replicas": 1,
            "logDirs": [{"name": "a", "size": "1Gi"}, {"name": "b", "size": "1Gi"}],
        },
        "status": {"brokers": [{"id": 0, "live": True, "url": "http://b0"}]},
    }
    d = wire.DescribeLogDirsResponse(
        broker_id=0,
        log_dirs=[
            wire.LogDirDescription(
                path=f"/var/lib/jbod/data-{n}",
                is_live=True,
                error=None,
                total_bytes=500 * GB,
                usable_bytes=200 * GB - i * 4096,
                cordoned=False,
                partitions=[
                    wire.ReplicaDescription(
                        topic="t",
                        partition=i,
                        size=(i + 1) * 2**20,
                        offset_lag=0,
                        is_future=False,
                        log_end_offset=0,
                    )
                ],
            )
            for i, n in enumerate(("a", "b"))
        ],
    )
    s = build_snapshot("demo", bc, [], {0: d})
    assert [(x.name, x.capacity_bytes, x.used_bytes) for x in s.log_dirs] == [
        ("a", 2**30, 2**20),
        ("b", 2**30, 2 * 2**20),
    ]


def test_disks_of_their_claims_size_are_their_own_even_when_equal() -> None:
    # two volumes of one size (the usual PVCs): the same total, different use; each keeps its
    # observed figures, the sharing rule leaves them alone
    bc = {
        "spec": {
            "replicas": 1,
            "logDirs": [{"name": "a", "size": "100Gi"}, {"name": "b", "size": "100Gi"}],
        },
        "status": {"brokers": [{"id": 0, "live": True, "url": "http://b0"}]},
    }
    d = wire.DescribeLogDirsResponse(
        broker_id=0,
        log_dirs=[
            wire.LogDirDescription(
                path=f"/var/lib/jbod/data-{n}",
                is_live=True,
                error=None,
                total_bytes=100 * 2**30,
                usable_bytes=(90 - 10 * i) * 2**30,
                cordoned=False,
                partitions=[],
            )
            for i, n in enumerate(("a", "b"))
        ],
    )
    s = build_snapshot("demo", bc, [], {0: d})
    assert [(x.name, x.capacity_bytes, x.used_bytes) for x in s.log_dirs] == [
        ("a", 100 * 2**30, 10 * 2**30),
        ("b", 100 * 2**30, 20 * 2**30),
    ]
