"""The counting rule (``jbod_broker.counting.verify``) refuses each way a log can be wrong:
an acknowledged value missing, a value read twice, a producer's values out of order; and it
raises even under ``python -O`` (explicit raises: the demo relies on it)."""

from __future__ import annotations

import pytest

from jbod_broker.counting import FILLER, verify
from jbod_broker.storage.names import TopicPartition

TP = TopicPartition("t", 0)


def values(tag: str, *seqs: int) -> list[bytes]:
    return [b"t-0-%s-%08d" % (tag.encode(), s) for s in seqs]


def test_every_acknowledged_value_read_once_in_order_passes() -> None:
    verify({TP: values("p", 1, 2)}, {TP: [FILLER + b"x", *values("p", 1, 2, 3)]})


@pytest.mark.parametrize(
    ("acked", "consumed", "says"),
    [
        (values("p", 1, 2), values("p", 1), "1 acknowledged values lost"),
        (values("p", 1), values("p", 1, 1), "1 duplicated values"),
        (values("p", 1, 2), values("p", 2, 1), "values of producer b'p' out of order"),
    ],
)
def test_each_broken_rule_is_named(acked: list[bytes], consumed: list[bytes], says: str) -> None:
    with pytest.raises(AssertionError, match=says):
        verify({TP: acked}, {TP: consumed})
