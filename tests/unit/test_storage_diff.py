"""StorageDiff: every classification of a log dir change, recreation, and removal blockers."""

from __future__ import annotations

from fractions import Fraction

import pytest

from jbod_operator.models import BrokerCluster, LogDir
from jbod_operator.plan import builders
from jbod_operator.plan.storage_diff import (
    diff_log_dirs,
    log_dirs_from_statefulset,
    parse_quantity,
    removal_blockers,
)


def ld(name: str, size: str = "10Gi", sc: str | None = None) -> LogDir:
    return LogDir(name=name, size=size, storage_class_name=sc)


def names(dirs: tuple[LogDir, ...]) -> list[str]:
    return [d.name for d in dirs]


def test_nothing_changed() -> None:
    d = diff_log_dirs([ld("0"), ld("1", sc="fast")], [ld("0"), ld("1", sc="fast")])
    assert names(d.unchanged) == ["0", "1"]
    assert not d.added and not d.removed and not d.resized and not d.storage_class_changed
    assert d.allowed
    assert not d.changed
    assert not d.recreate_statefulset
    assert d.refused_messages() == []


def test_added_dir_recreates_the_statefulset() -> None:
    d = diff_log_dirs([ld("0")], [ld("0"), ld("1")])
    assert names(d.added) == ["1"]
    assert names(d.unchanged) == ["0"]
    assert d.allowed and d.changed
    assert d.recreate_statefulset


def test_removed_dir_recreates_the_statefulset() -> None:
    d = diff_log_dirs([ld("0"), ld("1")], [ld("1")])
    assert names(d.removed) == ["0"]
    assert names(d.unchanged) == ["1"]
    assert d.recreate_statefulset


def test_reorder_changes_the_templates() -> None:
    d = diff_log_dirs([ld("0"), ld("1")], [ld("1"), ld("0")])
    assert names(d.unchanged) == ["1", "0"]
    assert d.reordered
    assert d.recreate_statefulset
    assert not diff_log_dirs([ld("0"), ld("1")], [ld("0"), ld("2"), ld("1")]).reordered


def test_no_statefulset_yet_is_a_plain_create() -> None:
    d = diff_log_dirs([], [ld("0"), ld("1")])
    assert names(d.added) == ["0", "1"]
    assert not d.recreate_statefulset


@pytest.mark.parametrize(
    ("old", "new", "verb"), [("10Gi", "20Gi", "grow"), ("10Gi", "5Gi", "shrink")]
)
def test_resize_is_refused(old: str, new: str, verb: str) -> None:
    d = diff_log_dirs([ld("0", old), ld("1")], [ld("0", new), ld("1"), ld("2")])
    assert [c.name for c in d.resized] == ["0"]
    assert d.resized[0].current.size == old and d.resized[0].desired.size == new
    assert names(d.added) == ["2"]
    assert not d.allowed
    assert d.changed
    assert not d.recreate_statefulset  # nothing is applied while a change is refused
    (msg,) = d.refused_messages()
    assert f"log dir '0': cannot {verb} from {old} to {new}" in msg
    assert "not supported" in msg


def test_equal_quantities_in_other_units_are_unchanged() -> None:
    d = diff_log_dirs([ld("0", "10240Mi")], [ld("0", "10Gi")])
    assert names(d.unchanged) == ["0"]
    assert d.allowed


@pytest.mark.parametrize(("old", "new"), [("slow", "fast"), (None, "fast"), ("fast", None)])
def test_storage_class_change_is_refused(old: str | None, new: str | None) -> None:
    d = diff_log_dirs([ld("0", sc=old)], [ld("0", sc=new)])
    assert [c.name for c in d.storage_class_changed] == ["0"]
    assert not d.unchanged and not d.resized
    assert not d.allowed
    (msg,) = d.refused_messages()
    assert "cannot change storageClassName" in msg
    assert (old or "(default)") in msg and (new or "(default)") in msg


def test_resize_and_class_change_together_are_both_reported() -> None:
    d = diff_log_dirs([ld("0", "1Gi", "a")], [ld("0", "2Gi", "b")])
    assert [c.name for c in d.resized] == ["0"]
    assert [c.name for c in d.storage_class_changed] == ["0"]
    assert len(d.refused_messages()) == 2


def test_duplicate_names_are_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        diff_log_dirs([ld("0"), ld("0")], [ld("0")])


@pytest.mark.parametrize(
    ("q", "value"),
    [
        ("10Gi", Fraction(10 * 2**30)),
        ("10240Mi", Fraction(10 * 2**30)),
        ("1.5Ti", Fraction(3 * 2**39)),
        ("500M", Fraction(500 * 10**6)),
        ("1e9", Fraction(10**9)),
        ("100m", Fraction(1, 10)),
        ("42", Fraction(42)),
    ],
)
def test_parse_quantity(q: str, value: Fraction) -> None:
    assert parse_quantity(q) == value


@pytest.mark.parametrize("q", ["", "Gi", "10 Gi", "10GB", "-1Gi"])
def test_parse_quantity_rejects(q: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        parse_quantity(q)


def test_log_dirs_round_trip_through_the_statefulset() -> None:
    bc = BrokerCluster.model_validate(
        {
            "metadata": {"name": "main", "namespace": "ns", "uid": "u"},
            "spec": {
                "replicas": 1,
                "logDirs": [
                    {"name": "b", "size": "1Gi", "storageClassName": "fast"},
                    {"name": "a", "size": "2Gi"},
                ],
            },
        }
    )
    sts = builders.build_statefulset(bc, controller_url="http://c", token_secret="t")
    sts["spec"]["volumeClaimTemplates"].append({"metadata": {"name": "scratch"}, "spec": {}})
    assert log_dirs_from_statefulset(sts) == list(bc.spec.log_dirs)
    assert diff_log_dirs(log_dirs_from_statefulset(sts), list(bc.spec.log_dirs)).allowed
    assert log_dirs_from_statefulset({}) == []


def test_blockers_name_each_nonempty_removed_dir() -> None:
    nonempty = {
        "0": ["broker 0: orders-1", "broker 2: orders-4"],
        "1": [],
        builders.mount_path("2"): ["broker 1: t-0"],
    }
    msgs = removal_blockers([ld("0"), ld("1"), "2", "3"], nonempty)
    assert len(msgs) == 2
    assert (
        "log dir '0' still holds 2 replica(s) (broker 0: orders-1, broker 2: orders-4)" in (msgs[0])
    )
    assert "LogDirMove" in msgs[0] and "spec.drain" in msgs[0]
    assert "Rebalance (mode: remove-disks, logDirs: '0' of each broker)" in msgs[0]
    assert "log dir '2' still holds 1 replica(s) (broker 1: t-0)" in msgs[1]


def test_blockers_cut_long_lists() -> None:
    held = [f"broker 0: t-{i}" for i in range(12)]
    (msg,) = removal_blockers(["x"], {"x": held})
    assert "12 replica(s)" in msg
    assert "t-4 and 7 more" in msg
    assert "t-5" not in msg


def test_no_blockers_when_drained() -> None:
    assert removal_blockers([ld("0")], {}) == []
    assert removal_blockers([], {"0": ["broker 0: a-0"]}) == []
