"""File-name rules: Kafka's topic rules and the 255-byte limit on folder names."""

from __future__ import annotations

import pytest

from jbod_broker.storage.errors import InvalidTopicError
from jbod_broker.storage.names import (
    DirKind,
    TopicPartition,
    delete_dir_name,
    future_dir_name,
    log_dir_name,
    parse_dir_name,
    parse_segment_file,
    segment_file_name,
    validate_partition,
    validate_topic,
)


@pytest.mark.parametrize("topic", ["a", "orders", "a.b_c-D9", "x" * 249, "__consumer_offsets"])
def test_valid_topics(topic: str) -> None:
    validate_topic(topic)


@pytest.mark.parametrize(
    ("topic", "why"),
    [
        ("", "empty"),
        (".", "cannot be"),
        ("..", "cannot be"),
        ("x" * 250, "249"),
        ("a/b", "characters"),
        ("../etc", "characters"),
        ("a b", "characters"),
        ("ünïcode", "characters"),
        ("a\x00b", "characters"),
    ],
)
def test_invalid_topics(topic: str, why: str) -> None:
    with pytest.raises(InvalidTopicError, match=why):
        validate_topic(topic)


@pytest.mark.parametrize("partition", [-1, 2**31, True, 1.5])
def test_invalid_partitions(partition: object) -> None:
    with pytest.raises(InvalidTopicError):
        validate_partition(partition)  # type: ignore[arg-type]


def test_segment_names_sort_by_offset() -> None:
    names = [segment_file_name(o, ".log") for o in (0, 9, 10, 12345678901234)]
    assert names == sorted(names)
    assert names[1] == "00000000000000000009.log"
    assert parse_segment_file("00000000000000000010.index") == (10, ".index")
    assert parse_segment_file("10.log") is None
    assert parse_segment_file("00000000000000000010.log.deleted") is None


def test_dir_names_round_trip() -> None:
    tp = TopicPartition("my.topic-1", 7)
    assert parse_dir_name(log_dir_name(tp)) == parse_dir_name("my.topic-1-7")
    parsed = parse_dir_name(log_dir_name(tp))
    assert parsed is not None and parsed.tp == tp and parsed.kind is DirKind.CURRENT
    fut = parse_dir_name(future_dir_name(tp))
    assert fut is not None and fut.tp == tp and fut.kind is DirKind.FUTURE
    dele = parse_dir_name(delete_dir_name(tp))
    assert dele is not None and dele.tp == tp and dele.kind is DirKind.DELETE
    assert parse_dir_name("lost+found") is None
    assert parse_dir_name("meta.properties") is None


def test_future_name_must_fit_255_bytes() -> None:
    # 249-character topics are legal, but their future folder name would not fit.
    long_tp = TopicPartition("t" * 249, 0)
    with pytest.raises(InvalidTopicError, match="255"):
        future_dir_name(long_tp)
    # The longest topic whose future name fits: 255 - len("-0.<32 hex>-future") = 213.
    ok = TopicPartition("t" * 213, 0)
    assert len(future_dir_name(ok).encode()) == 255
    with pytest.raises(InvalidTopicError):
        future_dir_name(TopicPartition("t" * 214, 0))


def test_delete_name_always_fits() -> None:
    name = delete_dir_name(TopicPartition("t" * 249, 123))
    assert len(name.encode()) <= 255
    assert name.endswith("-delete")
