"""The topic config rule the broker and the operator share (storage.topic_configs, issue 14):
Kafka's keys and ranges, refused rather than ignored."""

from __future__ import annotations

import pytest

from jbod_broker.storage import topic_configs
from jbod_broker.storage.log import LogConfig
from jbod_broker.storage.topic_configs import TopicConfigError, parse, problem, problems

ACCEPTED = [
    ("retention.ms", "-1", -1),
    ("retention.ms", "0", 0),
    ("retention.ms", "604800000", 604800000),
    ("retention.bytes", "-5", -5),  # Kafka: any value, negative means no size limit
    ("segment.bytes", "64", 64),
    ("segment.bytes", str(2**31 - 1), 2**31 - 1),
    ("segment.ms", "1", 1),
    ("index.interval.bytes", "0", 0),
    ("max.message.bytes", "64", 64),
    ("flush.messages", "1", 1),
    ("flush.messages", str(2**63 - 1), 2**63 - 1),
    ("min.insync.replicas", "1", 1),
    ("cleanup.policy", "delete", "delete"),
    ("compression.type", "producer", "producer"),
    ("message.timestamp.type", "CreateTime", "CreateTime"),
    ("unclean.leader.election.enable", "false", "false"),
]


@pytest.mark.parametrize(
    ("key", "raw", "value"), ACCEPTED, ids=[f"{k}={r}" for k, r, _ in ACCEPTED]
)
def test_accepted_values_parse_to_their_type(key: str, raw: str, value: int | str) -> None:
    assert problem(key, raw) is None
    assert parse({key: raw}) == {key: value}


REFUSED = [
    # Kafka's ranges (LogConfig's ConfigDef)
    ("retention.ms", "-5", "must be at least -1"),
    ("retention.ms", "-2", "must be at least -1"),
    ("segment.ms", "0", "must be at least 1"),
    ("index.interval.bytes", "-1", "must be at least 0"),
    ("flush.messages", "0", "must be at least 1"),
    ("min.insync.replicas", "0", "must be at least 1"),
    # this broker's floor above Kafka's, saying why
    ("segment.bytes", "14", "at least 64 (a segment holds at least one record batch)"),
    ("max.message.bytes", "0", "at least 64 (a record batch takes at least 61 bytes)"),
    # Java's INT and LONG
    ("segment.bytes", "2147483648", "is not a 32-bit integer"),
    ("retention.ms", str(2**63), "is not a 64-bit integer"),
    # strict integers: what int() would take is not one
    ("retention.ms", " 1000", "is not a 64-bit integer"),
    ("retention.ms", "+1000", "is not a 64-bit integer"),
    ("retention.ms", "1_000", "is not a 64-bit integer"),
    ("retention.ms", "\u0661\u0662", "is not a 64-bit integer"),
    ("retention.ms", "1h", "is not a 64-bit integer"),
    ("retention.ms", "", "is not a 64-bit integer"),
    # Kafka's value sets, and what this broker does not do
    ("cleanup.policy", "bogus", "Kafka allows compact, delete"),
    ("cleanup.policy", "compact", "not implemented by this broker"),
    ("cleanup.policy", "delete,compact", "not implemented by this broker"),
    ("compression.type", "gzip", "not implemented by this broker"),
    ("compression.type", "brotli", "Kafka allows"),
    ("message.timestamp.type", "LogAppendTime", "keeps the producer's timestamps"),
    ("unclean.leader.election.enable", "true", "from the ISR only"),
    ("unclean.leader.election.enable", "yes", "Kafka allows true, false"),
    # keys
    ("retension.ms", "1000", "unknown topic config 'retension.ms'"),
    ("log.retention.ms", "1000", "unknown topic config"),  # a broker setting, not a topic one
    ("min.compaction.lag.ms", "0", "a Kafka topic config this broker does not implement"),
    ("remote.storage.enable", "true", "does not implement"),
]


@pytest.mark.parametrize(
    ("key", "raw", "words"), REFUSED, ids=[f"{k}={r!r}" for k, r, _ in REFUSED]
)
def test_refused_values_name_the_key_and_the_rule(key: str, raw: str, words: str) -> None:
    found = problem(key, raw)
    assert found is not None and key in found and words in found, found
    with pytest.raises(TopicConfigError, match=key.replace(".", r"\.")):
        parse({key: raw})


def test_every_problem_is_listed_by_key() -> None:
    found = problems({"segment.ms": "0", "retention.ms": "-5", "nope": "1", "flush.messages": "2"})
    assert [p.split("=")[0].split(" ")[0] for p in found] == [
        "unknown",
        "retention.ms",
        "segment.ms",
    ]
    assert "'nope'" in found[0]


def test_known_and_kafka_only_keys_do_not_overlap() -> None:
    assert not set(topic_configs.TOPIC_CONFIGS) & topic_configs.KAFKA_ONLY


def test_log_config_floors_are_the_rule_s() -> None:
    """One home for the floors: the storage engine's own check uses the same constants."""
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        LogConfig(segment_bytes=topic_configs.MIN_SEGMENT_BYTES - 1)
    with pytest.raises(ValueError, match=r"max\.message\.bytes"):
        LogConfig(max_message_bytes=topic_configs.MIN_MAX_MESSAGE_BYTES - 1)
    LogConfig(
        segment_bytes=topic_configs.MIN_SEGMENT_BYTES,
        max_message_bytes=topic_configs.MIN_MAX_MESSAGE_BYTES,
    )
