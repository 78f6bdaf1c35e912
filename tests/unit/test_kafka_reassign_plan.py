"""The plan file of Kafka's reassignment tool, as issue 22's bench writes it."""

from __future__ import annotations

import pytest

from tests.kafka_reassign import tool_plan


def test_tool_plan_is_kafkas_json_with_log_dirs_in_replica_order() -> None:
    plan = tool_plan({("t", 1): [3, 4], ("t", 0): [4, 3]}, log_dirs={("t", 1): ["/d/a", "any"]})
    assert plan == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [4, 3]},
            {"topic": "t", "partition": 1, "replicas": [3, 4], "log_dirs": ["/d/a", "any"]},
        ],
    }
    with pytest.raises(ValueError, match="1 log dirs for 2 replicas"):
        tool_plan({("t", 0): [1, 2]}, log_dirs={("t", 0): ["any"]})
