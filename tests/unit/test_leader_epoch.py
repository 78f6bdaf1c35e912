"""Leader-epoch cache rules (KIP-101) and the checkpoint file format."""

from __future__ import annotations

import pytest

from jbod_broker.storage.checkpoints import (
    CheckpointError,
    format_epochs,
    format_offsets,
    parse_epochs,
    parse_offsets,
)
from jbod_broker.storage.leader_epoch import LeaderEpochCache
from jbod_broker.storage.names import TopicPartition


def cache(entries: list[tuple[int, int]]) -> tuple[LeaderEpochCache, list[bytes]]:
    writes: list[bytes] = []
    return LeaderEpochCache(entries, writes.append), writes


def test_assign_only_newer_epochs() -> None:
    c, writes = cache([])
    c.assign(1, 0)
    c.assign(1, 5)  # same epoch: no-op
    c.assign(0, 9)  # older: no-op
    c.assign(3, 10)
    assert c.entries() == [(1, 0), (3, 10)]
    assert parse_epochs(writes[-1], "x") == [(1, 0), (3, 10)]


def test_end_offset_for_epoch() -> None:
    c, _ = cache([(1, 0), (3, 10), (4, 20)])
    assert c.end_offset_for(1, 30) == (1, 10)
    assert c.end_offset_for(2, 30) == (1, 10)  # unknown epoch: the largest below it
    assert c.end_offset_for(4, 30) == (4, 30)
    assert c.end_offset_for(9, 30) == (4, 30)
    assert c.end_offset_for(0, 30) == (-1, -1)


def test_truncation_from_both_ends() -> None:
    c, _ = cache([(1, 0), (3, 10), (4, 20)])
    c.truncate_from_end(15)
    assert c.entries() == [(1, 0), (3, 10)]
    c.truncate_from_start(12)
    assert c.entries() == [(3, 12)]


def test_checkpoint_formats_round_trip() -> None:
    offsets = {TopicPartition("b", 1): 5, TopicPartition("a", 0): 7}
    raw = format_offsets(offsets)
    assert raw == b"0\n2\na 0 7\nb 1 5\n"
    assert parse_offsets(raw, "x") == offsets
    assert format_epochs([(0, 0), (2, 9)]) == b"0\n2\n0 0\n2 9\n"


@pytest.mark.parametrize("raw", [b"", b"1\n0\n", b"0\n2\na 0 1\n", b"0\n1\na zero 1\n"])
def test_bad_checkpoints_are_refused(raw: bytes) -> None:
    with pytest.raises(CheckpointError):
        parse_offsets(raw, "file")
