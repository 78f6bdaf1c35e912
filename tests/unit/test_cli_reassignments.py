"""jbod-ctl reassignments on plain data: Kafka's --list text from Topic statuses, KIP-240's
describe from fixtures of what the brokers answer, --verify's sentences and exit decision, the
PartitionReassignment progress bar, and the wait loop's outcomes against a fake kubectl."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from jbod_broker import wire
from jbod_operator.tools import cli
from jbod_operator.tools.cli import reassignments
from jbod_operator.tools.cli.common import CliError
from jbod_operator.tools.cli.kubectl import Kubectl, KubectlError
from jbod_operator.tools.cli.progress import format_reassignment_progress
from jbod_operator.tools.cli.reassignment import is_kafka_json
from jbod_operator.tools.cli.reassignments_view import (
    BrokerView,
    ReplicaOnBroker,
    active_batches,
    describe_document,
    format_describe,
    format_list,
    format_verify,
    list_document,
    partition_records,
    verify_document,
)

# ---------------------------------------------------------------------------------------------
# fixtures: Topic and PartitionReassignment objects as kubectl returns them
# ---------------------------------------------------------------------------------------------


def part(
    p: int,
    replicas: list[int],
    *,
    dirs: list[str] | None = None,
    isr: list[int] | None = None,
    adding: list[int] | None = None,
    removing: list[int] | None = None,
    target: list[int] | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partition": p,
        "replicas": [
            {"brokerId": b, **({"logDir": dirs[i]} if dirs else {})} for i, b in enumerate(replicas)
        ],
        "leader": replicas[0],
        "leaderEpoch": 3,
        "isr": isr if isr is not None else list(replicas),
        "addingReplicas": adding or [],
        "removingReplicas": removing or [],
        "targetReplicas": target or [],
    }
    if by:
        out["reassignedBy"] = by
    return out


def topic(name: str, *parts: dict[str, Any], cluster: str = "kip") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"clusterName": cluster, "partitions": len(parts), "replicationFactor": 3},
        "status": {"partitions": list(parts)},
    }


def pr(
    name: str,
    targets: list[dict[str, Any]],
    status: dict[str, Any] | None = None,
    cluster: str = "kip",
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "kafka", "generation": 1},
        "spec": {"clusterName": cluster, "partitions": targets},
        "status": status or {},
    }


TOPICS = [
    topic(
        "foo",
        part(0, [0, 1, 2, 4], isr=[0, 1, 2], adding=[4], target=[0, 1, 4], removing=[2], by="r1"),
        part(1, [4, 5, 3], removing=[1, 2], by="r1"),  # shrunk: 1 and 2 being deleted
        part(2, [0, 1, 2]),
    ),
    topic("bar", part(0, [2, 3, 0], isr=[2, 3, 0], removing=[0], target=[2, 3], by="r2")),
]

RUNNING = pr(
    "r1",
    [{"topic": "foo", "partition": 0, "replicas": [0, 1, 4]}],
    {
        "phase": "Running",
        "batch": 2,
        "batchesPlanned": 3,
        "currentBatch": [
            {
                "topic": "foo",
                "partition": 0,
                "currentBrokers": [0, 1, 2],
                "targetBrokers": [0, 1, 4],
            }
        ],
    },
)
DONE = pr("old", [{"topic": "foo", "partition": 2, "replicas": [0, 1, 2]}], {"phase": "Succeeded"})


# ---------------------------------------------------------------------------------------------
# list
# ---------------------------------------------------------------------------------------------


def test_list_prints_kafkas_shape_then_the_current_batches() -> None:
    doc = list_document(partition_records(TOPICS), active_batches([DONE, RUNNING]))
    # Kafka's own --list lines, sorted by topic then partition (its compareTopicPartitions),
    # then the batch of every PartitionReassignment that has not ended.
    assert format_list(doc) == "\n".join(
        [
            "Current partition reassignments:",
            "bar-0: replicas: 2,3,0. removing: 0.",
            "foo-0: replicas: 0,1,2,4. adding: 4. removing: 2.",
            "foo-1: replicas: 4,5,3. removing: 1,2.",
            "",
            "PartitionReassignment r1 (cluster kip): Running, batch 2 (3 more planned)",
            "  foo-0: current brokers: 0,1,2. target brokers: 0,1,4.",
        ]
    )
    assert doc["partitions"][1] == {
        "clusterName": "kip",
        "topic": "foo",
        "partition": 0,
        "replicas": [0, 1, 2, 4],
        "addingReplicas": [4],
        "removingReplicas": [2],
        "targetReplicas": [0, 1, 4],
        "reassignedBy": "r1",
    }
    assert [r["name"] for r in doc["reassignments"]] == ["r1"]


def test_list_with_nothing_in_flight_says_so_as_kafka_does() -> None:
    quiet = [topic("foo", part(0, [0, 1, 2]))]
    paused = pr("p", [], {"phase": "Paused", "batch": 1})
    new = pr("n", [], None)
    doc = list_document(partition_records(quiet), active_batches([paused, new]))
    assert format_list(doc) == "\n".join(
        [
            "No partition reassignments found.",
            "",
            "PartitionReassignment n (cluster kip): not accepted yet, no batch yet",
            "  no partition in flight",
            "",
            "PartitionReassignment p (cluster kip): Paused, batch 1",
            "  no partition in flight",
        ]
    )


def test_list_separates_clusters_and_filters_by_cluster() -> None:
    topics = [
        topic("foo", part(0, [0, 1], adding=[1], target=[0, 1]), cluster="a"),
        topic("foo", part(0, [2, 3], removing=[3], target=[2]), cluster="b"),
    ]
    text = format_list(list_document(partition_records(topics), []))
    assert text == "\n".join(
        [
            "Current partition reassignments (cluster a):",
            "foo-0: replicas: 0,1. adding: 1.",
            "Current partition reassignments (cluster b):",
            "foo-0: replicas: 2,3. removing: 3.",
        ]
    )
    only_b = format_list(list_document(partition_records(topics, "b"), []))
    assert only_b == "Current partition reassignments:\nfoo-0: replicas: 2,3. removing: 3."


def test_partition_records_skip_entries_not_written_in_full() -> None:
    t = topic("foo", part(0, [0]), {"partition": 1, "replicas": []})  # no leader yet
    t["spec"]["topicName"] = "Foo.Kafka"  # the Kafka name, not metadata.name
    recs = partition_records([t])
    assert list(recs["kip"]) == [("Foo.Kafka", 0)]


# ---------------------------------------------------------------------------------------------
# describe
# ---------------------------------------------------------------------------------------------


def rep(path: str, leo: int, *, future: bool = False) -> ReplicaOnBroker:
    return ReplicaOnBroker(path=path, log_end_offset=leo, size=leo * 100, is_future=future)


def throttle(
    rate: int,
    *,
    leader: Sequence[tuple[str, int]] = (),
    follower: Sequence[tuple[str, int]] = (),
) -> wire.ThrottleConfig:
    return wire.ThrottleConfig(
        leader_replication_throttled_rate=rate,
        follower_replication_throttled_rate=rate,
        leader_replication_throttled_replicas=[
            wire.ReplicaRef(topic=t, partition=p) for t, p in leader
        ],
        follower_replication_throttled_replicas=[
            wire.ReplicaRef(topic=t, partition=p) for t, p in follower
        ],
    )


FOO0 = ("foo", 0)
MIB = 1 << 20

BROKERS = {
    0: BrokerView(0, {FOO0: (rep("/k/0/data-a", 5000),)}, throttle=throttle(MIB, leader=[FOO0])),
    1: BrokerView(1, {FOO0: (rep("/k/1/data-b", 4990),)}, throttle=throttle(MIB)),
    2: BrokerView(2, {FOO0: (rep("/k/2/data-a", 5000),)}, throttle=throttle(0)),
    4: BrokerView(4, {FOO0: (rep("/k/4/data-b", 3000),)}, throttle=throttle(MIB, follower=[FOO0])),
}

DESCRIBED = pr(
    "r1",
    [
        {"topic": "foo", "partition": 0, "replicas": [0, 1, 4]},
        {"topic": "foo", "partition": 2, "replicas": [0, 1, 2]},
    ],
    {
        "phase": "Running",
        "startTime": "2026-01-01T00:00:00Z",
        "batch": 2,
        "progressPercent": 50,
        "counts": {"Adding": 1, "Done": 1},
        "original": [
            {"topic": "foo", "partition": 0, "replicas": [0, 1, 2]},
            {"topic": "foo", "partition": 2, "replicas": [0, 1, 2]},
        ],
        "partitions": [
            {
                "topic": "foo",
                "partition": 0,
                "state": "Adding",
                "since": "2026-01-01T00:01:00Z",
                "message": "new replicas on brokers [4] catching up",
            }
        ],
    },
)


def test_describe_gives_kip240_fields_with_leo_and_lag() -> None:
    parts = partition_records(TOPICS)["kip"]
    doc = describe_document(DESCRIBED, parts, BROKERS)
    assert [(p["topic"], p["partition"]) for p in doc["partitions"]] == [FOO0]
    (p,) = doc["partitions"]
    assert p["currentLeader"] == 0
    assert p["leaderThrottle"] == MIB  # broker 0 leads foo-0 and throttles it
    assert p["newAssignedBrokers"] == [0, 1, 4]
    # Only broker 4 lists foo-0 as follower-throttled; broker 1's rate names other replicas.
    assert p["newAssignedThrottles"] == {"0": None, "1": None, "4": MIB}
    assert p["brokers"] == [
        {"broker": 0, "new": False, "logDir": "/k/0/data-a", "logEndOffset": 5000, "lag": 0},
        {"broker": 1, "new": False, "logDir": "/k/1/data-b", "logEndOffset": 4990, "lag": 10},
        {"broker": 4, "new": True, "logDir": "/k/4/data-b", "logEndOffset": 3000, "lag": 2000},
    ]
    assert (p["addingReplicas"], p["removingReplicas"]) == ([4], [2])
    assert format_describe(doc) == "\n".join(
        [
            "PartitionReassignment r1 (cluster kip): Running, batch 2, 50% (1 adding, 1 done), "
            "started 2026-01-01T00:00:00Z.",
            "foo-0: Adding since 2026-01-01T00:01:00Z: new replicas on brokers [4] catching up",
            "  start time: 2026-01-01T00:00:00Z. current leader: 0. leader throttle: 1.0 MiB/s.",
            "  replicas: 0,1,2,4. adding: 4. removing: 2.",
            "  new assigned brokers: 0,1,4. throttles: 0: none, 1: none, 4: 1.0 MiB/s.",
            "  broker 0: log end offset 5000, lag 0, in /k/0/data-a.",
            "  broker 1: log end offset 4990, lag 10, in /k/1/data-b.",
            "  broker 4 (new): log end offset 3000, lag 2000, in /k/4/data-b.",
        ]
    )


def test_describe_all_and_brokers_that_do_not_answer() -> None:
    parts = partition_records(TOPICS)["kip"]
    brokers = {
        **BROKERS,
        4: BrokerView(4, error="http://b4:9092: BrokerUnavailableError: refused"),
    }
    doc = describe_document(DESCRIBED, parts, brokers, all_partitions=True)
    assert [p["partition"] for p in doc["partitions"]] == [0, 2]
    assert doc["partitions"][1]["state"] == "Done"  # at its target, not listed by the operator
    # Without the operator's detail, the state comes from the record.
    bare = {**DESCRIBED, "status": {**DESCRIBED["status"], "partitions": []}}
    states = {
        (p["topic"], p["partition"]): p["state"]
        for p in describe_document(
            pr(
                "x",
                [
                    *bare["spec"]["partitions"],
                    {"topic": "foo", "partition": 1, "replicas": [4, 5, 3]},
                    {"topic": "baz", "partition": 0, "replicas": [3, 2]},
                ],
            ),
            parts,
            brokers,
            all_partitions=True,
        )["partitions"]
    }
    assert states == {
        FOO0: "Adding",
        ("foo", 1): "Removing",
        ("foo", 2): "Done",
        ("baz", 0): "Unknown",  # in no Topic status
    }
    b4 = doc["partitions"][0]["brokers"][2]
    assert b4 == {
        "broker": 4,
        "new": True,
        "error": "http://b4:9092: BrokerUnavailableError: refused",
    }
    assert doc["brokerErrors"] == {"4": "http://b4:9092: BrokerUnavailableError: refused"}
    text = format_describe(doc)
    assert "broker 4 did not answer: http://b4:9092" in text
    assert "  broker 4 (new): did not answer: http://b4:9092" in text
    # A replica not created yet on a broker that answers.
    brokers[4] = BrokerView(4, {}, throttle=None)
    doc = describe_document(DESCRIBED, parts, brokers)
    assert doc["partitions"][0]["brokers"][2] == {
        "broker": 4,
        "new": True,
        "logDir": None,
        "logEndOffset": None,
        "lag": None,
    }
    assert "  broker 4 (new): no replica yet" in format_describe(doc)


def test_describe_with_nothing_in_flight() -> None:
    quiet = pr("q", [{"topic": "foo", "partition": 2, "replicas": [0, 1, 2]}], {"phase": "Pending"})
    doc = describe_document(quiet, partition_records(TOPICS)["kip"], {})
    assert doc["partitions"] == []
    assert format_describe(doc) == "\n".join(
        [
            "PartitionReassignment q (cluster kip): Pending, not started.",
            "No partition in flight or in trouble (of 1; --all lists every one).",
        ]
    )


# ---------------------------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------------------------

DONE_TOPICS = [topic("foo", part(0, [0, 1, 4]), part(1, [4, 5, 3]), part(2, [1, 0, 2]))]


def verify_pr(dirs0: list[str] | None = None) -> dict[str, Any]:
    t0: dict[str, Any] = {"topic": "foo", "partition": 0, "replicas": [0, 1, 4]}
    if dirs0:
        t0["logDirs"] = dirs0
    return pr("r1", [t0, {"topic": "foo", "partition": 1, "replicas": [4, 5, 3]}])


def test_verify_complete_when_at_target_in_named_dirs() -> None:
    brokers = {
        0: BrokerView(0, {FOO0: (rep("/k/0/data-a", 10),)}, throttle=throttle(0)),
        4: BrokerView(4, {FOO0: (rep("/k/4/data-b", 10),)}, throttle=throttle(0)),
    }
    doc = verify_document(
        verify_pr(["any", "any", "b"]), partition_records(DONE_TOPICS)["kip"], brokers
    )
    assert doc["complete"] is True
    assert format_verify(doc) == "\n".join(
        [
            "Status of partition reassignment:",
            "Reassignment of partition foo-0 is completed.",
            "Reassignment of partition foo-1 is completed.",
            "Reassignment of replica foo-0-4 completed successfully.",
            "PartitionReassignment r1: every partition is at its target.",
        ]
    )


def test_verify_reports_each_thing_not_done_in_kafkas_words() -> None:
    topics = [
        topic(
            "foo",
            part(0, [0, 1, 4]),
            part(1, [1, 5, 3]),  # no step in flight, but not the target
            part(2, [0]),
        )
    ]
    t = [
        {"topic": "foo", "partition": 0, "replicas": [0, 1, 4], "logDirs": ["b", "b", "a"]},
        {"topic": "foo", "partition": 1, "replicas": [4, 5, 3], "logDirs": ["any", "a", "b"]},
        {"topic": "foo", "partition": 3, "replicas": [0]},
    ]
    ongoing = topic("foo", part(2, [0, 1], adding=[1], target=[0, 1]))
    topics[0]["status"]["partitions"].append(ongoing["status"]["partitions"][0])
    t.append({"topic": "foo", "partition": 2, "replicas": [0, 1]})
    brokers = {
        0: BrokerView(0, {FOO0: (rep("/k/0/data-a", 10),)}),  # in a, not b: no move
        1: BrokerView(1, {FOO0: (rep("/k/1/data-a", 10), rep("/k/1/data-b", 4, future=True))}),
        4: BrokerView(4, {FOO0: (rep("/k/4/data-b", 10), rep("/k/4/data-c", 4, future=True))}),
        5: BrokerView(5, {}, offline_dirs=("/k/5/data-b",)),
        3: BrokerView(3, error="timeout"),
    }
    doc = verify_document(pr("r1", t), partition_records(topics)["kip"], brokers)
    assert doc["complete"] is False
    assert format_verify(doc) == "\n".join(
        [
            "Status of partition reassignment:",
            "Reassignment of partition foo-0 is completed.",
            "There is no active reassignment of partition foo-1, but replica set is 1,5,3 "
            "rather than 4,5,3.",
            "Reassignment of partition foo-2 is still in progress.",
            "Partition foo-3 is not in any Topic status of the cluster.",
            "Partition foo-0 on broker 0 is not being moved from log dir /k/0/data-a to b.",
            "Reassignment of replica foo-0-1 is still in progress.",
            "Partition foo-0 on broker 4 is being moved to log dir /k/4/data-c instead of a.",
            "Partition foo-1 is not found in any live log dir on broker 5. There is likely an "
            "offline log directory on the broker.",
            "Broker 3 did not answer (timeout): cannot check replica foo-1-3.",
            "PartitionReassignment r1: 8 not at their target yet.",
        ]
    )


def test_verify_missing_replica_and_throttles_still_set() -> None:
    brokers = {
        0: BrokerView(0, {}, throttle=throttle(MIB, leader=[FOO0, ("other", 0)])),
        4: BrokerView(4, {FOO0: (rep("/k/4/data-b", 10),)}, throttle=throttle(0, follower=[FOO0])),
    }
    doc = verify_document(
        verify_pr(["a", "any", "b"]), partition_records(DONE_TOPICS)["kip"], brokers
    )
    assert doc["complete"] is False  # the missing replica; throttles alone never fail verify
    text = format_verify(doc)
    assert "Partition foo-0 cannot be found in any live log directory on broker 0." in text
    assert (
        "Throttle still set on broker 0: leader.replication.throttled.replicas names foo-0 "
        "(leader.replication.throttled.rate 1.0 MiB/s)." in text
    )
    assert (
        "Throttle still set on broker 4: follower.replication.throttled.replicas names foo-0 "
        "(follower.replication.throttled.rate none)." in text
    )
    assert [(t["broker"], t["side"], t["rate"]) for t in doc["throttles"]] == [
        (0, "leader", MIB),
        (4, "follower", None),
    ]
    brokers[0] = BrokerView(0, {FOO0: (rep("/k/0/data-a", 10),)}, throttle=throttle(MIB))
    doc = verify_document(
        verify_pr(["a", "any", "b"]), partition_records(DONE_TOPICS)["kip"], brokers
    )
    assert doc["complete"] is True and len(doc["throttles"]) == 1


# ---------------------------------------------------------------------------------------------
# progress and wait
# ---------------------------------------------------------------------------------------------


def test_reassignment_progress_line() -> None:
    st = {
        "phase": "Running",
        "progressPercent": 42,
        "rateBytesPerSecond": int(12.3 * MIB),
        "etaSeconds": 9,
        "batch": 3,
        "counts": {"Done": 4, "Gone": 1, "Adding": 2, "Pending": 5},
        "bytesMoved": 1288490188,
        "bytesToMove": 3 << 30,
    }
    assert format_reassignment_progress(st) == (
        "[########------------]  42%  12.3 MiB/s  ETA 9s  Running  batch 3  5/12 partitions  "
        "1.2 GiB of 3.0 GiB"
    )
    assert (
        format_reassignment_progress(None) == "[--------------------]   0%  0 B/s  ETA -  Pending"
    )
    ended = format_reassignment_progress({"phase": "RolledBack", "etaSeconds": 5})
    assert "ETA -" in ended and ended.endswith("RolledBack")


class FakeKubectl(Kubectl):
    """Returns the given objects in turn (the last one again once they run out)."""

    def __init__(self, objects: list[dict[str, Any] | Exception]) -> None:
        super().__init__("kubectl", None, "ns")
        self.objects: Iterator[dict[str, Any] | Exception] = iter(objects)
        self.last: dict[str, Any] | Exception = {}
        self.calls: list[tuple[str, ...]] = []

    def get_json(self, *args: str) -> dict[str, Any]:
        self.calls.append(args)
        self.last = next(self.objects, self.last)
        if isinstance(self.last, Exception):
            raise self.last
        return self.last


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def obj(status: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": "r", "generation": generation}, "status": status}


def ended(phase: str, message: str = "", generation: int = 1) -> dict[str, Any]:
    return obj(
        {
            "phase": phase,
            "observedGeneration": generation,
            "progressPercent": 100 if phase == "Succeeded" else 30,
            "counts": {"Done": 2},
            "conditions": [{"type": phase, "status": "True", "message": message}],
        },
        generation,
    )


def wait(kube: FakeKubectl, timeout: float = 60) -> tuple[int, dict[str, Any], str]:
    clock = Clock()
    out = io.StringIO()
    code, summary = reassignments.wait_for_reassignment(
        kube, "r", timeout_s=timeout, out=out, clock=clock, sleep=clock.sleep, tty=False
    )
    return code, summary, out.getvalue()


@pytest.mark.parametrize(
    ("phase", "code"), [("Succeeded", 0), ("Failed", 1), ("Cancelled", 3), ("RolledBack", 4)]
)
def test_wait_exit_code_is_the_outcome(phase: str, code: int) -> None:
    kube = FakeKubectl(
        [
            obj({}),
            obj({"phase": "Running", "observedGeneration": 1, "progressPercent": 30, "batch": 1}),
            ended(phase, f"it ended as {phase}"),
        ]
    )
    got, summary, text = wait(kube)
    assert got == code
    assert summary["phase"] == phase and summary["message"] == f"it ended as {phase}"
    assert summary["counts"] == {"Done": 2} and summary["elapsedSeconds"] == 1.0
    assert kube.calls[0] == ("partitionreassignments.jbod.io", "r")
    assert "r: [######--------------]  30%  0 B/s  ETA -  Running  batch 1" in text
    assert f"PartitionReassignment r: {phase}: it ended as {phase}" in text


def test_wait_ignores_an_end_the_operator_wrote_for_an_older_spec() -> None:
    # Applied again with rollback: true (generation 2): the old Succeeded is not the outcome.
    kube = FakeKubectl(
        [
            ended("Succeeded", generation=1) | {"metadata": {"name": "r", "generation": 2}},
            obj({"phase": "RollingBack", "observedGeneration": 2}, 2),
            ended("RolledBack", "back at the original replicas", generation=2),
        ]
    )
    code, summary, _ = wait(kube)
    assert code == 4 and summary["phase"] == "RolledBack"
    assert len(kube.calls) == 3


def test_wait_times_out_with_its_own_code() -> None:
    kube = FakeKubectl([obj({"phase": "Paused", "observedGeneration": 1, "progressPercent": 7})])
    code, summary, text = wait(kube, timeout=2)
    assert code == 5 and summary["timedOut"] is True
    assert "PartitionReassignment r: timed out after 2 s in phase Paused at 7%" in text


def test_wait_for_a_missing_reassignment_is_an_error() -> None:
    kube = FakeKubectl([KubectlError(["get"], 'Error from server (NotFound): "r" not found')])
    with pytest.raises(CliError, match="PartitionReassignment r not found in namespace ns"):
        wait(kube)


# ---------------------------------------------------------------------------------------------
# apply input and usage
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kafka"),
    [
        ('{"version": 1, "partitions": []}', True),
        ('{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}', True),
        ('{"kind": "PartitionReassignment", "spec": {"partitions": []}}', False),
        ("kind: PartitionReassignment\n", False),
        ("[1, 2]", False),
        ("[" * 100_000, False),
    ],
)
def test_is_kafka_json(text: str, kafka: bool) -> None:
    assert is_kafka_json(text) is kafka


def test_apply_of_a_kafka_file_needs_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECTL", "/bin/false")  # never reached
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}'
    )
    assert cli.main(["reassignments", "apply", str(plan)]) == 1
    err = capsys.readouterr().err
    assert "is a kafka-reassign-partitions file: --cluster names the cluster" in err
    manifest = tmp_path / "m.yaml"
    manifest.write_text("kind: PartitionReassignment\n")
    assert cli.main(["reassignments", "apply", str(manifest), "--throttle", "5"]) == 1
    assert "--name and --throttle apply to a kafka-reassign-partitions file only" in (
        capsys.readouterr().err
    )


def test_reassignments_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["reassignments"],
        ["reassignments", "describe"],
        ["reassignments", "verify"],
        ["reassignments", "apply"],
        ["reassignments", "apply", "f", "--timeout", "0"],
        ["reassignments", "wait", "r", "--timeout", "-1"],
        ["reassignments", "describe", "r", "--timeout", "x"],
    ):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2, argv
    assert "usage: jbod-ctl" in capsys.readouterr().err
