"""The one rule for log dir names (``jbod_broker.wire``): a dir ``a`` of the BrokerCluster is
the folder and volume ``data-a``; every component reads and writes names through it."""

from __future__ import annotations

import pytest

from jbod_broker import wire


def test_folder_of_a_name() -> None:
    assert wire.log_dir_folder("a") == "data-a"
    assert wire.log_dir_folder("ssd-1") == "data-ssd-1"


def test_short_name_strips_data_prefix_and_trailing_slash() -> None:
    assert wire.log_dir_short_name("/mnt/disk1/data-a") == "a"
    assert wire.log_dir_short_name("/mnt/disk1/data-a/") == "a"
    assert wire.log_dir_short_name("/mnt/disk1/kafka-logs") == "kafka-logs"


@pytest.mark.parametrize("name", ["a", "disk-7", "x1"])
def test_folder_and_short_name_are_inverse(name: str) -> None:
    assert wire.log_dir_short_name(f"/var/lib/jbod/{wire.log_dir_folder(name)}") == name


@pytest.mark.parametrize(
    "ref", ["b", "data-b", "/r/data-b", "/r/data-b/", "/r/./data-b", "/r/x/../data-b"]
)
def test_a_reference_by_name_folder_or_path(ref: str) -> None:
    assert wire.refers_to_log_dir(ref, "/r/data-b")


@pytest.mark.parametrize("ref", ["c", "data-c", "/elsewhere/data-b", "data/b", "b/", "/r"])
def test_other_references_do_not_match(ref: str) -> None:
    assert not wire.refers_to_log_dir(ref, "/r/data-b")
