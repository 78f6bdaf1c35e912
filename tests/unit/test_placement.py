"""Directory choice for new replicas: most usable bytes, then fewest replicas, named dir wins."""

from __future__ import annotations

import pytest

from jbod_broker.storage.errors import KafkaStorageError
from jbod_broker.storage.placement import DirState, choose_log_dir, rank_log_dirs


def test_most_usable_bytes_wins_over_fewest_partitions() -> None:
    # Kafka would pick /a (fewest partitions); /b has far more room.
    dirs = [DirState("/a", True, 10, 1), DirState("/b", True, 1000, 50)]
    assert choose_log_dir(dirs) == "/b"


def test_ties_go_to_fewest_replicas_then_config_order() -> None:
    dirs = [
        DirState("/a", True, 100, 3),
        DirState("/b", True, 100, 2),
        DirState("/c", True, 100, 2),
    ]
    assert rank_log_dirs(dirs) == ["/b", "/c", "/a"]


def test_offline_and_cordoned_dirs_are_skipped() -> None:
    dirs = [
        DirState("/a", False, 10**9, 0),
        DirState("/b", True, 10**9, 0, cordoned=True),
        DirState("/c", True, 5, 9),
    ]
    assert rank_log_dirs(dirs) == ["/c"]


def test_named_dir_wins_when_live() -> None:
    dirs = [DirState("/a", True, 10, 0), DirState("/b", True, 1000, 0)]
    assert choose_log_dir(dirs, preferred="/a") == "/a"
    # An explicit request may target a cordoned dir; an offline one never.
    dirs_c = [DirState("/a", True, 10, 0, cordoned=True), DirState("/b", True, 1000, 0)]
    assert choose_log_dir(dirs_c, preferred="/a") == "/a"
    dirs_off = [DirState("/a", False, 10, 0), DirState("/b", True, 1000, 0)]
    assert choose_log_dir(dirs_off, preferred="/a") == "/b"


def test_no_live_dir_is_an_error() -> None:
    with pytest.raises(KafkaStorageError, match="no live log directory"):
        choose_log_dir([DirState("/a", False, 10, 0)])
    with pytest.raises(KafkaStorageError, match="cordoned"):
        choose_log_dir([DirState("/a", True, 10, 0, cordoned=True)])


def test_fallback_order_excludes_failed_dir() -> None:
    dirs = [DirState("/a", True, 100, 0), DirState("/b", True, 50, 0)]
    assert rank_log_dirs(dirs, exclude={"/a"}) == ["/b"]
