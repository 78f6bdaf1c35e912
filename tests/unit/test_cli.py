"""jbod-ctl on plain data: describe answers → KIP-113 JSON, reassignment JSON → manifests, input
validation messages, the progress bar, and the wait loop against a fake kubectl."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jbod_broker import wire
from jbod_operator.models import LogDirMoveSpec, PartitionReassignmentSpec
from jbod_operator.models.common import human_bytes
from jbod_operator.plan import partition_shards
from jbod_operator.tools import cli
from jbod_operator.tools.cli import kubectl, log_dirs, logdirmove, progress, reassignment
from jbod_operator.tools.cli.common import CliError
from jbod_operator.tools.cli.kubectl import Kubectl, KubectlError
from jbod_operator.tools.cli.log_dirs import describe_to_kip, record_placements
from jbod_operator.tools.cli.progress import format_progress
from jbod_operator.tools.cli.reassignment import (
    CurrentPartition,
    build_manifests,
    current_from_assignments,
    current_from_topics,
    parse_reassignment,
)

# ---------------------------------------------------------------------------------------------
# log-dirs describe
# ---------------------------------------------------------------------------------------------


def rep(topic: str, p: int, size: int, *, future: bool = False, lag: int = 0) -> Any:
    return wire.ReplicaDescription(
        topic=topic, partition=p, size=size, offset_lag=lag, is_future=future, log_end_offset=7
    )


def ldir(path: str, *parts: Any, live: bool = True) -> Any:
    return wire.LogDirDescription(
        path=path,
        is_live=live,
        error=None if live else "KafkaStorageError: disk gone",
        total_bytes=100 if live else 0,
        usable_bytes=50 if live else 0,
        reserved_bytes=20 if live else 0,
        headroom_bytes=1 if live else 0,
        cordoned=False,
        partitions=list(parts),
    )


def responses() -> list[wire.DescribeLogDirsResponse]:
    return [
        wire.DescribeLogDirsResponse(
            broker_id=1,
            log_dirs=[
                ldir("/d/1/data-a", rep("t", 1, 300), rep("t", 0, 100)),
                ldir("/d/1/data-b", rep("t", 0, 40, future=True, lag=5), rep("u", 0, 9)),
            ],
        ),
        wire.DescribeLogDirsResponse(
            broker_id=0,
            log_dirs=[ldir("/d/0/data-a", rep("t", 1, 300)), ldir("/d/0/data-b", live=False)],
        ),
    ]


SPACE_LIVE = {"total_bytes": 100, "usable_bytes": 50, "reserved_bytes": 20, "headroom_bytes": 1}
SPACE_OFFLINE = {"total_bytes": 0, "usable_bytes": 0, "reserved_bytes": 0, "headroom_bytes": 0}


def test_describe_to_kip_has_kip113_shape() -> None:
    doc = describe_to_kip(responses())
    assert doc == {
        "version": 1,
        "brokers": [
            {
                "broker": 0,
                "log dirs": [
                    {
                        "is_live": True,
                        "path": "/d/0/data-a",
                        "partitions": [
                            {
                                "topic": "t",
                                "partition": 1,
                                "size": 300,
                                "offset_lag": 0,
                                "is_temporary": False,
                            }
                        ],
                        **SPACE_LIVE,
                    },
                    {
                        "is_live": False,
                        "path": "/d/0/data-b",
                        "partitions": [],
                        **SPACE_OFFLINE,
                    },
                ],
            },
            {
                "broker": 1,
                "log dirs": [
                    {
                        "is_live": True,
                        "path": "/d/1/data-a",
                        "partitions": [
                            {
                                "topic": "t",
                                "partition": 0,
                                "size": 100,
                                "offset_lag": 0,
                                "is_temporary": False,
                            },
                            {
                                "topic": "t",
                                "partition": 1,
                                "size": 300,
                                "offset_lag": 0,
                                "is_temporary": False,
                            },
                        ],
                        **SPACE_LIVE,
                    },
                    {
                        "is_live": True,
                        "path": "/d/1/data-b",
                        "partitions": [
                            {
                                "topic": "t",
                                "partition": 0,
                                "size": 40,
                                "offset_lag": 5,
                                "is_temporary": True,
                            },
                            {
                                "topic": "u",
                                "partition": 0,
                                "size": 9,
                                "offset_lag": 0,
                                "is_temporary": False,
                            },
                        ],
                        **SPACE_LIVE,
                    },
                ],
            },
        ],
    }
    json.dumps(doc)  # plain JSON


def test_describe_to_kip_says_which_replicas_the_state_of_record_puts_there() -> None:
    """Topics as kubectl returns them (a Topic and its PartitionShard), joined as the operator
    reads them: broker 1 holds t-0 in data-a by the record (its copy in data-b is a move's
    future), t-1 anywhere (no dir named); u-0 is in no record."""
    topic = {
        "metadata": {"name": "t", "namespace": "ns", "uid": "u1"},
        "spec": {"clusterName": "c", "partitions": 2, "replicationFactor": 1},
        "status": {},
    }
    states = [
        {"partition": 0, "replicas": [{"brokerId": 1, "logDir": "/d/1/data-a"}], "leader": 1,
         "leaderEpoch": 0, "isr": [1]},
        {"partition": 1, "replicas": [{"brokerId": 1}, {"brokerId": 0, "logDir": "/d/0/data-b"}],
         "leader": 1, "leaderEpoch": 0, "isr": [1, 0]},
    ]  # fmt: skip
    shard = partition_shards.shard_body(topic, 0, states)
    placements = record_placements(partition_shards.join_all([topic], [shard]), "c")
    doc = describe_to_kip(responses(), placements=placements)
    got = {
        (b["broker"], d["path"], p["topic"], p["partition"], p["is_temporary"]): p["in_record"]
        for b in doc["brokers"]
        for d in b["log dirs"]
        for p in d["partitions"]
    }
    assert got == {
        (0, "/d/0/data-a", "t", 1, False): False,  # the record has it in data-b
        (1, "/d/1/data-a", "t", 0, False): True,
        (1, "/d/1/data-a", "t", 1, False): True,
        (1, "/d/1/data-b", "t", 0, True): False,
        (1, "/d/1/data-b", "u", 0, False): False,
    }
    assert (
        "in_record"
        not in describe_to_kip(responses())["brokers"][0]["log dirs"][0]["partitions"][0]
    )


def test_describe_to_kip_filters_brokers_and_topics() -> None:
    doc = describe_to_kip(responses(), brokers=[1], topics=["u"])
    assert [b["broker"] for b in doc["brokers"]] == [1]
    parts = [p for d in doc["brokers"][0]["log dirs"] for p in d["partitions"]]
    assert [(p["topic"], p["partition"]) for p in parts] == [("u", 0)]
    # Directories stay listed (empty) so a reader sees every disk of the broker.
    assert len(doc["brokers"][0]["log dirs"]) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0,1", [0, 1]), (" 2 , 0 ", [2, 0]), ("5,", [5])],
)
def test_parse_id_list(text: str, expected: list[int]) -> None:
    assert log_dirs.parse_id_list(text) == expected


@pytest.mark.parametrize("text", ["a", "-1", "1.5", ","])
def test_parse_id_list_refuses(text: str) -> None:
    with pytest.raises(Exception, match="broker id"):
        log_dirs.parse_id_list(text)


# ---------------------------------------------------------------------------------------------
# reassignment JSON: validation
# ---------------------------------------------------------------------------------------------


def doc(*parts: Any, version: Any = 1) -> str:
    return json.dumps({"version": version, "partitions": list(parts)})


def p(topic: str, part: int, replicas: list[Any], dirs: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"topic": topic, "partition": part, "replicas": replicas}
    if dirs is not None:
        out["log_dirs"] = dirs
    return out


def test_parse_reassignment_reads_kafka_format() -> None:
    got = parse_reassignment(doc(p("t", 0, [1, 2], ["any", "/d/x"]), p("t", 1, [2])), "f.json")
    assert [(a.topic, a.partition, a.replicas, a.log_dirs) for a in got] == [
        ("t", 0, (1, 2), ("any", "/d/x")),
        ("t", 1, (2,), None),
    ]
    assert got[0].where == "partitions[0] (t-0)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"f\.json: not valid JSON \(line 1, column 2"),
        ("[1, 2]", "the top level must be an object"),
        ('{"partitions": []}', 'missing "version"'),
        (doc(p("t", 0, [1]), version=2), "unknown version 2: only version 1 is supported"),
        (doc(p("t", 0, [1]), version="1"), "unknown version '1'"),
        (doc(p("t", 0, [1]), version=True), "unknown version True"),
        ('{"version": 1}', 'missing "partitions"'),
        ('{"version": 1, "partitions": {}}', '"partitions" must be a list'),
        (doc(), '"partitions" is empty: nothing to reassign'),
        (doc("x"), r"partitions\[0\] must be an object"),
        (doc({"partition": 0, "replicas": [1]}), r'partitions\[0\]: "topic" must be a non-empty'),
        (doc(p("t", -1, [1])), r'"partition" must be an integer >= 0 \(got -1\)'),
        (doc({"topic": "t", "replicas": [1]}), r'"partition" must be an integer >= 0 \(missing\)'),
        (doc({"topic": "t", "partition": 0}), r'partitions\[0\] \(t-0\): missing "replicas"'),
        (doc(p("t", 0, [])), '"replicas" must be a non-empty list of broker ids'),
        (doc(p("t", 0, [1, -2])), r"replicas\[1\] is a negative broker id \(-2\)"),
        (doc(p("t", 0, [1, "2"])), r"replicas\[1\] must be an integer broker id, got '2'"),
        (doc(p("t", 0, [1, 1])), "broker 1 is listed twice in replicas"),
        (
            doc(p("t", 0, [1, 2], ["any"])),
            r"log_dirs has 1 entries but replicas has 2: give one directory \(or \"any\"\)",
        ),
        (doc(p("t", 0, [1], "any")), '"log_dirs" must be a list'),
        (doc(p("t", 0, [1], ["relative/dir"])), r"log_dirs\[0\] must be \"any\", an absolute"),
        (doc(p("t", 0, [1], [7])), r"log_dirs\[0\] must be .* got 7"),
        (doc(p("t", 0, [1]), p("t", 0, [2])), r"t-0 is listed twice \(also partitions\[0\]"),
    ],
)
def test_parse_reassignment_refuses_with_clear_message(text: str, message: str) -> None:
    with pytest.raises(CliError, match=message):
        parse_reassignment(text, "f.json")


def test_parse_reassignment_reports_every_problem_at_once() -> None:
    with pytest.raises(CliError) as e:
        parse_reassignment(doc(p("t", 0, [-1]), p("t", 1, [1, 2], ["a"]), p("u", 0, [3])), "f")
    text = str(e.value)
    assert text.startswith("f: 2 problems:")
    assert "partitions[0] (t-0)" in text and "partitions[1] (t-1)" in text


def test_parse_current_may_be_empty() -> None:
    assert parse_reassignment('{"version": 1, "partitions": []}', allow_empty=True) == []


# ---------------------------------------------------------------------------------------------
# reassignment JSON → manifests
# ---------------------------------------------------------------------------------------------


CURRENT = {
    ("clicks", 0): CurrentPartition((0, 1), ("/k/0/data-a", "/k/1/data-b")),
    ("clicks", 1): CurrentPartition((1, 2), ("/k/1/data-a", "/k/2/data-a")),
    ("orders", 0): CurrentPartition((2, 0), ("/k/2/data-c", "/k/0/data-c")),
}


def build(*parts: dict[str, Any], **kw: Any) -> reassignment.ManifestResult:
    kw.setdefault("cluster", "kip")
    return build_manifests(parse_reassignment(doc(*parts)), CURRENT, **kw)


def test_same_replicas_with_dirs_become_one_logdirmove() -> None:
    res = build(
        p("clicks", 0, [0, 1], ["c", "any"]),
        p("clicks", 1, [1, 2], ["/k/1/data-c", "b"]),
        name_prefix="even",
        throttle=1048576,
    )
    assert len(res.manifests) == 1
    m = res.manifests[0]
    assert m["apiVersion"] == "jbod.io/v1alpha1" and m["kind"] == "LogDirMove"
    assert m["metadata"] == {"name": "even-dirs", "labels": {"jbod.io/cluster": "kip"}}
    assert m["spec"] == {
        "clusterName": "kip",
        "moves": [
            {"brokerId": 0, "topic": "clicks", "partition": 0, "logDir": "c"},
            {"brokerId": 1, "topic": "clicks", "partition": 1, "logDir": "/k/1/data-c"},
            {"brokerId": 2, "topic": "clicks", "partition": 1, "logDir": "b"},
        ],
        "throttleBytesPerSecond": 1048576,
    }
    LogDirMoveSpec.model_validate(m["spec"])


def test_changed_replicas_become_one_partitionreassignment() -> None:
    res = build(
        p("clicks", 0, [0, 2], ["any", "/k/2/data-b"]),  # 1 → 2, new replica's dir named
        p("clicks", 1, [1, 0]),  # 2 → 0, no dirs
        p("orders", 0, [2, 0], ["a", "any"]),  # same replicas: a LogDirMove
        name_prefix="mix",
        namespace="prod",
    )
    kinds = [(m["kind"], m["metadata"]["name"]) for m in res.manifests]
    assert kinds == [("PartitionReassignment", "mix-brokers"), ("LogDirMove", "mix-dirs")]
    pr = res.manifests[0]
    assert pr["metadata"]["namespace"] == "prod"
    assert pr["spec"] == {
        "clusterName": "kip",
        "partitions": [
            {
                "topic": "clicks",
                "partition": 0,
                "replicas": [0, 2],
                "logDirs": ["any", "/k/2/data-b"],
            },
            {"topic": "clicks", "partition": 1, "replicas": [1, 0]},
        ],
    }
    PartitionReassignmentSpec.model_validate(pr["spec"])
    assert res.manifests[1]["spec"]["moves"] == [
        {"brokerId": 2, "topic": "orders", "partition": 0, "logDir": "a"}
    ]
    # Every partition in exactly one resource.
    in_pr = {(x["topic"], x["partition"]) for x in pr["spec"]["partitions"]}
    in_ldm = {(x["topic"], x["partition"]) for x in res.manifests[1]["spec"]["moves"]}
    assert not in_pr & in_ldm


def test_new_order_is_a_reassignment_with_a_note() -> None:
    res = build(p("clicks", 0, [1, 0]), name_prefix="x")
    assert [m["kind"] for m in res.manifests] == ["PartitionReassignment"]
    assert any("preferred leader 1" in n for n in res.notes)


def test_unchanged_and_already_placed_replicas_are_skipped() -> None:
    res = build(
        p("clicks", 0, [0, 1]),
        p("clicks", 1, [1, 2], ["a", "/k/2/data-a"]),  # both already there (name and path)
        p("orders", 0, [2, 0], ["data-c", "any"]),  # the folder name works too
        name_prefix="x",
    )
    assert res.manifests == []
    assert any("clicks-0: unchanged" in n for n in res.notes)
    assert any("clicks-1 on broker 2 is already in /k/2/data-a" in n for n in res.notes)
    assert any("orders-0 on broker 2 is already in data-c" in n for n in res.notes)


def test_partition_missing_from_current_is_an_error() -> None:
    with pytest.raises(CliError, match=r"partitions\[1\] \(clicks-9\): clicks-9 is not in --c"):
        build(
            p("clicks", 0, [0, 1], ["b", "any"]),
            p("clicks", 9, [0]),
            current_source="--current cur.json",
        )


def test_unknown_broker_is_an_error() -> None:
    with pytest.raises(CliError, match="broker 5 does not exist in cluster kip"):
        build(p("clicks", 0, [0, 5]), broker_count=3)


def test_pydantic_validation_names_the_input_entry() -> None:
    cur = {("bad topic!", 0): CurrentPartition((0,), (None,))}
    targets = parse_reassignment(doc(p("bad topic!", 0, [0], ["b"])))
    with pytest.raises(CliError) as e:
        build_manifests(targets, cur, cluster="kip", name_prefix="x")
    text = str(e.value)
    assert text.startswith("LogDirMove x-dirs would be refused:")
    assert "partitions[0] (bad topic!-0): topic: String should match pattern" in text


def test_bad_cluster_or_prefix_names_are_refused() -> None:
    with pytest.raises(CliError, match="--name 'Bad_Name'"):
        build(p("clicks", 0, [0, 1], ["b", "any"]), name_prefix="Bad_Name")
    with pytest.raises(CliError, match="clusterName"):
        build(p("clicks", 0, [0, 1], ["b", "any"]), cluster="Not-Valid", name_prefix="x")


def test_default_names_are_deterministic() -> None:
    a = build(p("clicks", 0, [0, 1], ["b", "any"])).manifests[0]["metadata"]["name"]
    b = build(p("clicks", 0, [0, 1], ["b", "any"])).manifests[0]["metadata"]["name"]
    c = build(p("clicks", 0, [0, 1], ["c", "any"])).manifests[0]["metadata"]["name"]
    assert a == b != c and a.startswith("kip-reassign-") and a.endswith("-dirs")


def test_large_inputs_are_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reassignment, "MAX_MOVES", 2)
    res = build(
        p("clicks", 0, [0, 1], ["b", "a"]),
        p("clicks", 1, [1, 2], ["b", "b"]),
        name_prefix="big",
    )
    assert [m["metadata"]["name"] for m in res.manifests] == ["big-dirs-0", "big-dirs-1"]
    assert [len(m["spec"]["moves"]) for m in res.manifests] == [2, 2]


def test_manifests_yaml_is_multi_document() -> None:
    res = build(p("clicks", 0, [0, 2]), p("orders", 0, [2, 0], ["a", "b"]), name_prefix="y")
    docs = list(yaml.safe_load_all(reassignment.manifests_yaml(res.manifests)))
    assert docs == res.manifests


def test_current_from_topics_reads_statuses() -> None:
    topics: list[dict[str, Any]] = [
        {
            "metadata": {"name": "clicks-res"},
            "spec": {"clusterName": "kip", "topicName": "clicks"},
            "status": {
                "topicName": "clicks",
                "partitions": [
                    {
                        "partition": 0,
                        "replicas": [
                            {"brokerId": 2, "logDir": "/k/2/data-a"},
                            {"brokerId": 0},
                        ],
                        "leader": 2,
                        "leaderEpoch": 0,
                        "isr": [2, 0],
                    }
                ],
            },
        },
        {"metadata": {"name": "other"}, "spec": {"clusterName": "elsewhere"}, "status": {}},
        {"metadata": {"name": "fresh"}, "spec": {"clusterName": "kip"}},
    ]
    assert current_from_topics(topics, "kip") == {
        ("clicks", 0): CurrentPartition((2, 0), ("/k/2/data-a", None))
    }


def test_current_from_assignments() -> None:
    cur = current_from_assignments(parse_reassignment(doc(p("t", 0, [1, 0], ["/x", "any"]))))
    assert cur == {("t", 0): CurrentPartition((1, 0), ("/x", None))}


@pytest.mark.parametrize(
    ("target", "current", "same"),
    [
        ("a", "/k/0/data-a", True),
        ("data-a", "/k/0/data-a", True),
        ("/k/0/data-a/", "/k/0/data-a", True),
        ("b", "/k/0/data-a", False),
        ("a", None, False),
    ],
)
def test_same_dir(target: str, current: str | None, same: bool) -> None:
    assert reassignment.same_dir(target, current) is same


# ---------------------------------------------------------------------------------------------
# progress
# ---------------------------------------------------------------------------------------------


def test_progress_line_example() -> None:
    st = {
        "phase": "Moving",
        "progressPercent": 42,
        "rateBytesPerSecond": int(12.3 * 1024 * 1024),
        "etaSeconds": 9,
        "bytesCopied": 42 * 1024 * 1024,
        "bytesTotal": 100 * 1024 * 1024,
        "replicas": [{"state": "Succeeded"}, {"state": "Moving"}, {"state": "Pending"}],
    }
    assert format_progress(st) == (
        "[########------------]  42%  12.3 MiB/s  ETA 9s  Moving  1/3 replicas  "
        "42.0 MiB of 100.0 MiB"
    )


def test_progress_line_edges() -> None:
    assert format_progress(None) == "[--------------------]   0%  0 B/s  ETA -  Pending"
    done = format_progress({"phase": "Succeeded", "progressPercent": 100, "etaSeconds": 3})
    assert done.startswith("[####################] 100%") and "ETA -" in done
    assert "ETA <1s" in format_progress({"phase": "Moving", "etaSeconds": 0})
    assert "ETA 2m05s" in format_progress({"phase": "Moving", "etaSeconds": 125})
    assert format_progress({"progressPercent": 250}).startswith("[####################] 100%")
    assert "[#####-----]  50%" in format_progress({"progressPercent": 50}, width=10)


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536 * 1024, "1.5 MiB"),
        (5 << 30, "5.0 GiB"),
    ],
)
def test_human_bytes(n: int, text: str) -> None:
    assert human_bytes(n) == text


@pytest.mark.parametrize(("s", "text"), [(0, "0s"), (59, "59s"), (61, "1m01s"), (3725, "1h02m")])
def test_human_duration(s: int, text: str) -> None:
    assert progress.human_duration(s) == text


def test_progress_view_redraws_in_place_on_a_tty() -> None:
    out = io.StringIO()
    view = progress.ProgressView(out, "m", tty=True)
    view.update({"phase": "Moving", "progressPercent": 10}, 0)
    view.update({"phase": "Moving", "progressPercent": 20}, 1)
    assert "\n" not in out.getvalue() and out.getvalue().count("\r") == 2
    assert "\x1b[K" in out.getvalue()
    view.close()
    assert out.getvalue().endswith("\n")


def test_progress_view_prints_plain_lines_on_change_otherwise() -> None:
    out = io.StringIO()
    view = progress.ProgressView(out, "m", tty=False)
    view.update({"phase": "Moving", "progressPercent": 10}, 0)
    view.update({"phase": "Moving", "progressPercent": 10}, 1)  # same: nothing new
    view.update({"phase": "Moving", "progressPercent": 30}, 2)
    view.update({"phase": "Moving", "progressPercent": 30}, 13)  # a heartbeat after 10 s
    view.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in out.getvalue()
    assert lines[0].startswith("m: [##") and "10%" in lines[0]


# ---------------------------------------------------------------------------------------------
# wait, against a fake kubectl and a fake clock
# ---------------------------------------------------------------------------------------------


class FakeKubectl(Kubectl):
    def __init__(self, statuses: list[dict[str, Any] | Exception]) -> None:
        super().__init__("kubectl", None, "ns")
        self.statuses: Iterator[dict[str, Any] | Exception] = iter(statuses)
        self.last: dict[str, Any] | Exception = {}
        self.calls: list[tuple[str, ...]] = []

    def get_json(self, *args: str) -> dict[str, Any]:
        self.calls.append(args)
        self.last = next(self.statuses, self.last)
        if isinstance(self.last, Exception):
            raise self.last
        return {"status": self.last}


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def cond(type_: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": "True", "message": message}


def wait(kube: FakeKubectl, timeout: float = 60) -> tuple[int, dict[str, Any], str]:
    clock = Clock()
    out = io.StringIO()
    code, summary = logdirmove.wait_for_move(
        kube, "m", timeout_s=timeout, out=out, clock=clock, sleep=clock.sleep, tty=False
    )
    return code, summary, out.getvalue()


def test_wait_succeeds() -> None:
    kube = FakeKubectl(
        [
            {},
            {"phase": "Moving", "progressPercent": 50, "replicas": [{"state": "Moving"}]},
            {
                "phase": "Succeeded",
                "progressPercent": 100,
                "bytesCopied": 10,
                "bytesTotal": 10,
                "replicas": [{"state": "Succeeded"}],
                "conditions": [cond("Succeeded", "1 replicas moved and verified")],
            },
        ]
    )
    code, summary, text = wait(kube)
    assert code == 0
    assert summary["phase"] == "Succeeded" and summary["replicas"] == {"Succeeded": 1}
    assert summary["message"] == "1 replicas moved and verified"
    assert summary["elapsedSeconds"] == 1.0  # three polls, 0.5 s apart
    assert kube.calls[0] == ("logdirmoves.jbod.io", "m")
    assert "LogDirMove m: Succeeded: 1 replicas moved and verified" in text
    assert "50%" in text


@pytest.mark.parametrize("phase", ["Failed", "Cancelled"])
def test_wait_fails_with_the_message(phase: str) -> None:
    kube = FakeKubectl(
        [
            {
                "phase": phase,
                "conditions": [
                    cond("Progressing", "ignored"),
                    cond(phase, "broker 1: log dir /d/1/data-b is offline"),
                ],
            }
        ]
    )
    code, summary, text = wait(kube)
    assert code == 1 and summary["phase"] == phase
    assert f"LogDirMove m: {phase}: broker 1: log dir /d/1/data-b is offline" in text


def test_wait_times_out() -> None:
    kube = FakeKubectl([{"phase": "Moving", "progressPercent": 7}])
    code, summary, text = wait(kube, timeout=3)
    assert code == 1 and summary["timedOut"] is True
    assert "timed out after 3 s in phase Moving at 7%" in text


def test_wait_keeps_polling_through_api_errors() -> None:
    kube = FakeKubectl(
        [
            KubectlError(["get"], "Unable to connect to the server: EOF"),
            {"phase": "Succeeded", "conditions": [cond("Succeeded", "done")]},
        ]
    )
    assert wait(kube)[0] == 0


def test_wait_for_a_missing_move_is_an_error() -> None:
    kube = FakeKubectl(
        [KubectlError(["get"], 'Error from server (NotFound): logdirmoves "m" not found')]
    )
    with pytest.raises(CliError, match="LogDirMove m not found in namespace ns"):
        wait(kube)


# ---------------------------------------------------------------------------------------------
# main: exit codes and streams
# ---------------------------------------------------------------------------------------------


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        [],
        ["log-dirs", "describe"],
        ["log-dirs", "describe", "--cluster", "x", "--bootstrap-url", "http://h:1"],
        ["log-dirs", "describe", "--bootstrap-url", "http://h:1", "--broker-list", "a"],
        ["reassignment", "to-manifests", "f.json"],
        ["reassignment", "to-manifests", "f.json", "--cluster", "k", "--throttle", "-5"],
        ["logdirmove", "wait", "m", "--timeout", "0"],
    ):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2, argv
    assert "usage: jbod-ctl" in capsys.readouterr().err


def test_to_manifests_with_current_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plan.json").write_text(
        doc(p("clicks", 0, [0, 1], ["b", "any"]), p("clicks", 1, [2, 0]))
    )
    (tmp_path / "cur.json").write_text(doc(p("clicks", 0, [0, 1]), p("clicks", 1, [1, 2])))
    code = cli.main(
        [
            "reassignment",
            "to-manifests",
            str(tmp_path / "plan.json"),
            "--cluster",
            "kip",
            "--current",
            str(tmp_path / "cur.json"),
            "--name",
            "p1",
            "--throttle",
            "1000",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("PartitionReassignment", "p1-brokers"),
        ("LogDirMove", "p1-dirs"),
    ]
    assert all(d["spec"]["throttleBytesPerSecond"] == 1000 for d in docs)
    assert "2 manifest(s)" in err


def test_cli_errors_exit_1_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plan.json").write_text(doc(p("t", 0, [1, 2], ["/a"])))
    (tmp_path / "cur.json").write_text(doc(p("t", 0, [1, 2])))
    code = cli.main(
        [
            "reassignment",
            "to-manifests",
            str(tmp_path / "plan.json"),
            "--cluster",
            "kip",
            "--current",
            str(tmp_path / "cur.json"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.startswith("jbod-ctl: error: ") and "log_dirs has 1 entries" in err
    code = cli.main(["reassignment", "to-manifests", str(tmp_path / "nope.json"), "--cluster", "k"])
    assert code == 1
    assert "cannot read reassignment file" in capsys.readouterr().err


DEEP = 100_000  # far past Python's recursion limit (1000 by default)


@pytest.mark.parametrize(
    "text",
    [
        "[" * DEEP + "]" * DEEP,
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1], '
        '"log_dirs": [' + "[" * DEEP + "]" * DEEP + "]}]}",
    ],
    ids=["top-level", "inside-an-entry"],
)
@pytest.mark.parametrize("which", ["FILE", "--current"])
def test_deeply_nested_json_exits_1_on_stderr(
    text: str, which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A RecursionError from the JSON decoder is bad input like any other: one line, no
    traceback, exit 1."""
    deep, ok = tmp_path / "deep.json", tmp_path / "ok.json"
    deep.write_text(text)
    ok.write_text(doc(p("t", 0, [1])))
    plan, cur = (deep, ok) if which == "FILE" else (ok, deep)
    code = cli.main(
        ["reassignment", "to-manifests", str(plan), "--cluster", "kip", "--current", str(cur)]
    )
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err == (
        f"jbod-ctl: error: {deep}: nested too deeply: a reassignment file is an object "
        "holding a list of flat partition entries\n"
    )


def test_nothing_to_do_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "same.json").write_text(doc(p("t", 0, [1, 2])))
    code = cli.main(
        [
            "reassignment",
            "to-manifests",
            str(tmp_path / "same.json"),
            "--cluster",
            "kip",
            "--current",
            str(tmp_path / "same.json"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0 and out == "" and "nothing to do" in err


def test_describe_unreachable_broker_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from jbod_broker.local import free_port

    url = f"http://127.0.0.1:{free_port()}"
    code = cli.main(["log-dirs", "describe", "--bootstrap-url", url, "--timeout", "2"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert f"describe-log-dirs failed on {url}: BrokerUnavailableError" in err


def test_missing_kubectl_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECTL", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    with pytest.raises(CliError, match="kubectl not found: run `make setup`"):
        kubectl.find_kubectl(None)
