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


_NAME_SAMPLES = [
    *(".", "..", "...", "a", ".a", "..a", "a.", "a..", "-", "_", "._", "a b", "a/b", "ä", ""),
    *("t" * 249, "t" * 250, "." * 249, "my.topic_1-2", "a\n", "\u00a0"),
]


@pytest.mark.parametrize("name", _NAME_SAMPLES)
def test_one_topic_rule_three_readers(name: str) -> None:
    """The broker's check, the wire model and the CRD's pattern say the same of every name
    (issue 38: the rule was written three times and could drift)."""
    import re

    from pydantic import TypeAdapter, ValidationError

    from jbod_broker import wire
    from jbod_broker.storage.names import MAX_TOPIC_LENGTH, TOPIC_NAME_PATTERN, validate_topic
    from jbod_operator.models.common import TopicName

    try:
        validate_topic(name)
        broker = True
    except InvalidTopicError:
        broker = False
    pattern = bool(re.fullmatch(TOPIC_NAME_PATTERN, name)) and len(name) <= MAX_TOPIC_LENGTH
    verdicts = set()
    for kind in (wire.Topic, TopicName):
        try:
            TypeAdapter(kind).validate_python(name)
            verdicts.add(True)
        except ValidationError:
            verdicts.add(False)
    assert verdicts == {broker} and pattern == broker, name
