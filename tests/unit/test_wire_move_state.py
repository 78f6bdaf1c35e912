"""The move state on the wire: one enum, the same JSON strings as before it was one."""

from __future__ import annotations

import json

import pytest

from jbod_broker import wire
from jbod_broker.move import MoveState as EngineMoveState
from jbod_broker.wire import MoveState


def info(state: MoveState) -> wire.ReplicaLogDirInfo:
    return wire.ReplicaLogDirInfo(
        topic="t",
        partition=0,
        current_log_dir="/d0",
        future_log_dir=None,
        future_offset_lag=0,
        bytes_copied=0,
        bytes_total=0,
        state=state,
    )


def test_values_are_the_strings_the_operator_reads() -> None:
    assert [s.value for s in MoveState] == [
        "None",
        "Queued",
        "Copying",
        "CatchingUp",
        "Swapping",
        "Done",
        "Failed",
        "Cancelled",
        "Interrupted",
    ]


def test_the_engine_uses_the_wire_enum() -> None:
    assert EngineMoveState is MoveState


@pytest.mark.parametrize("state", list(MoveState))
def test_json_round_trip_keeps_the_plain_string(state: MoveState) -> None:
    raw = info(state).model_dump_json()
    assert json.loads(raw)["state"] == state.value
    back = wire.ReplicaLogDirInfo.model_validate_json(raw)
    assert back.state is state
    # What the operator does with it today: compare with plain strings.
    assert back.state == state.value
    assert (back.state in ("None", "Cancelled", "Interrupted")) == (
        state.value in ("None", "Cancelled", "Interrupted")
    )


def test_an_unknown_state_is_refused() -> None:
    raw = info(MoveState.DONE).model_dump_json().replace('"Done"', '"Sleeping"')
    with pytest.raises(ValueError, match="state"):
        wire.ReplicaLogDirInfo.model_validate_json(raw)


def test_finished_states() -> None:
    assert {s for s in MoveState if s.finished} == {
        MoveState.DONE,
        MoveState.FAILED,
        MoveState.CANCELLED,
        MoveState.INTERRUPTED,
    }
