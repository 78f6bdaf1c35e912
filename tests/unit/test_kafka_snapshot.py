"""A KafkaCluster's snapshot (``plan.kafka_dirs.kafka_snapshot``): Kafka's DescribeCluster,
DescribeLogDirs and Metadata made into the same ``ClusterSnapshot`` a BrokerCluster gives, so
the Spark job, the waves and the measure at the end read both alike."""

from __future__ import annotations

from jbod_operator.models import BalanceSpec
from jbod_operator.models.snapshot import ClusterSnapshot
from jbod_operator.plan import balance_objects as bo
from jbod_operator.plan import rebalance as rp
from jbod_operator.plan.balance_trigger import Known, TriggerConfig, decide
from jbod_operator.plan.kafka_dirs import kafka_broker_dirs, kafka_snapshot
from jbod_operator.plan.kafka_types import (
    BrokerLogDirs,
    ClusterDescription,
    KafkaBroker,
    LogDir,
    LogDirReplica,
    PartitionMetadata,
    TopicMetadata,
)

MIB = 2**20
GIB = 2**30
DISK = 500 * GIB
"""The filesystem every dir of the test cluster is on (one machine's disk)."""


def replica(topic: str, part: int, size: int, future: bool = False) -> LogDirReplica:
    return LogDirReplica(topic, part, size, 0, future)


def log_dir(broker: int, n: int, replicas: list[LogDirReplica], **kw: object) -> LogDir:
    fields: dict[str, object] = {
        "path": f"/kafka/{broker}/data-{n}",
        "error": None,
        "total_bytes": DISK,
        "usable_bytes": 200 * GIB,
        "cordoned": False,
        "replicas": tuple(replicas),
    }
    fields.update(kw)
    return LogDir(**fields)  # type: ignore[arg-type]


CLUSTER = ClusterDescription(
    "id",
    1,
    (
        KafkaBroker(1, "127.0.0.1", 9001, rack="r1"),
        KafkaBroker(2, "127.0.0.1", 9002, rack="r2"),
        KafkaBroker(3, "127.0.0.1", 9003, rack=None, fenced=True),
    ),
)
METADATA = [
    TopicMetadata(
        "orders",
        "tid",
        False,
        (
            PartitionMetadata("orders", 1, 2, (2, 1), (2, 1), ()),
            PartitionMetadata("orders", 0, 1, (1, 2, 3), (1, 2), ()),
        ),
    ),
    TopicMetadata(
        "__consumer_offsets",
        "cid",
        True,
        (PartitionMetadata("__consumer_offsets", 0, None, (1,), (1,), ()),),
    ),
    TopicMetadata("gone", None, False, (), error="UNKNOWN_TOPIC_OR_PARTITION"),
]


def dirs() -> dict[int, BrokerLogDirs]:
    return {
        1: BrokerLogDirs(
            1,
            (
                log_dir(
                    1,
                    0,
                    [
                        replica("orders", 0, 30 * MIB),
                        replica("orders", 1, 10 * MIB),
                        replica("orders", 1, 4 * MIB, future=True),
                    ],
                ),
                log_dir(
                    1,
                    1,
                    [replica("__consumer_offsets", 0, 1 * MIB)],
                    usable_bytes=200 * GIB - 4096,  # written to between the two readings
                ),
            ),
        ),
        2: BrokerLogDirs(
            2,
            (
                log_dir(2, 0, [replica("orders", 1, 10 * MIB)]),
                log_dir(2, 1, [replica("orders", 0, 29 * MIB)]),
            ),
        ),
    }


def snap(capacity: int = 256 * MIB) -> ClusterSnapshot:
    described = {b: kafka_broker_dirs(d) for b, d in dirs().items()}
    return kafka_snapshot(
        "kc", CLUSTER, {**described, 3: None}, METADATA, dir_capacity=capacity, namespace="ns"
    )


def test_kafka_reads_become_the_snapshot_a_broker_cluster_gives() -> None:
    s = snap()
    assert (s.cluster_name, s.namespace) == ("kc", "ns")
    # every broker DescribeCluster lists, by Kafka's ids; a fenced one is not live
    assert [(b.id, b.rack, b.live) for b in s.brokers] == [
        (1, "r1", True),
        (2, "r2", True),
        (3, None, False),
    ]
    # dirs on one filesystem: each counts as spec.logDirCapacity, used by its replicas' bytes
    # (a future copy being moved in is not counted); the broker that did not answer has none
    assert [(d.broker_id, d.name, d.capacity_bytes, d.used_bytes) for d in s.log_dirs] == [
        (1, "0", 256 * MIB, 40 * MIB),
        (1, "1", 256 * MIB, 1 * MIB),
        (2, "0", 256 * MIB, 10 * MIB),
        (2, "1", 256 * MIB, 29 * MIB),
    ]
    # Metadata's replica lists in order and leaders, internal topics too (their bytes are on
    # the disks); each replica in the dir DescribeLogDirs has it in; a replica of a broker
    # that did not answer has no dir to be in and is left out; a topic Metadata errs on too
    reps = [
        (r.topic, r.partition, r.broker_id, r.log_dir, r.size_bytes, r.leader) for r in s.replicas
    ]
    assert reps == [
        ("__consumer_offsets", 0, 1, "/kafka/1/data-1", 1 * MIB, False),
        ("orders", 0, 1, "/kafka/1/data-0", 30 * MIB, True),
        ("orders", 0, 2, "/kafka/2/data-1", 29 * MIB, False),
        ("orders", 1, 2, "/kafka/2/data-0", 10 * MIB, True),
        ("orders", 1, 1, "/kafka/1/data-0", 10 * MIB, False),
    ]


def test_without_a_capacity_each_dir_is_its_filesystem() -> None:
    s = snap(capacity=0)
    assert {(d.capacity_bytes, d.used_bytes) for d in s.log_dirs if d.broker_id == 2} == {
        (DISK, 300 * GIB)
    }


def test_an_offline_dir_is_not_live_and_keeps_no_replica() -> None:
    d = dirs()
    d[2] = BrokerLogDirs(
        2,
        (
            log_dir(2, 0, [replica("orders", 1, 10 * MIB)]),
            log_dir(2, 1, [], error="KAFKA_STORAGE_ERROR", total_bytes=None, usable_bytes=None),
        ),
    )
    s = kafka_snapshot(
        "kc",
        CLUSTER,
        {b: kafka_broker_dirs(x) for b, x in d.items()},
        METADATA,
        dir_capacity=256 * MIB,
    )
    off = next(x for x in s.log_dirs if x.broker_id == 2 and x.name == "1")
    assert not off.live
    # orders-0's replica on broker 2 was in the offline dir: the first dir of its broker
    # with the largest sibling's size (the same rule as for our brokers)
    r = next(r for r in s.replicas if (r.topic, r.partition, r.broker_id) == ("orders", 0, 2))
    assert (r.log_dir, r.size_bytes) == ("/kafka/2/data-0", 30 * MIB)


def test_the_fingerprint_follows_placement_not_sizes_or_leaders() -> None:
    base = rp.snapshot_fingerprint("KafkaCluster", snap())
    assert set(base) == {"KafkaCluster/kc", "Topic/orders", "Topic/__consumer_offsets"}
    grown = snap().model_copy(
        update={
            "replicas": [
                r.model_copy(update={"size_bytes": r.size_bytes * 2, "leader": False})
                for r in snap().replicas
            ]
        }
    )
    assert rp.stale(base, rp.snapshot_fingerprint("KafkaCluster", grown)) == []
    moved = snap().model_copy(
        update={
            "replicas": [
                r.model_copy(update={"log_dir": "/kafka/1/data-1"})
                if (r.topic, r.partition, r.broker_id) == ("orders", 0, 1)
                else r
                for r in snap().replicas
            ]
        }
    )
    assert rp.stale(base, rp.snapshot_fingerprint("KafkaCluster", moved)) == [
        "Topic/orders changed"
    ]


def test_the_spec_checks_read_kafka_ids() -> None:
    s = snap()
    view = rp.cluster_view(4, ("0", "1"), s)
    assert view.dirs[1] == (("0", "/kafka/1/data-0"), ("1", "/kafka/1/data-1"))
    assert view.dirs[3] == (("0", "0"), ("1", "1"))


def test_detection_on_a_kafka_cluster_triggers_a_dirs_only_rebalance() -> None:
    """The sampler's sample of a KafkaCluster is its snapshot: disks 15 points apart on
    broker 1 (40 MiB against 1 MiB of 256), held for the window, make a dirs-only Rebalance;
    a fenced broker breaks the window (it does not answer)."""
    cfg = TriggerConfig.from_spec(
        BalanceSpec(enabled=True, window_seconds=2, sample_interval_seconds=1, history_samples=30)
    )
    healthy = kafka_snapshot(
        "kc",
        ClusterDescription("id", 1, CLUSTER.brokers[:2]),
        {b: kafka_broker_dirs(d) for b, d in dirs().items()},
        METADATA,
        dir_capacity=256 * MIB,
    )
    samples = [bo.sample_from_snapshot(t, healthy) for t in (0.0, 1.0, 2.0, 3.0)]
    assert samples[0].expected_brokers == samples[0].answered == {1, 2}
    known = Known(frozenset({1, 2}), frozenset({"0", "1"}))
    d = decide(samples, cfg, 3.0, known)
    assert d.create is not None and d.create.mode.value == "dirs-only", d
    assert d.create.trigger.value == "disk-imbalance"

    fenced = [bo.sample_from_snapshot(t, snap()) for t in (0.0, 1.0, 2.0, 3.0)]
    assert fenced[0].expected_brokers == {1, 2, 3} and fenced[0].answered == {1, 2}
    assert decide(fenced, cfg, 3.0, known).create is None
