"""A move's state machine: every edge of TRANSITIONS is taken, every other one is refused.

The table is the one ``jbod_broker.wire.MoveState``'s docstring draws; the engine changes a
task's state only through :meth:`MoveTask.transition` (that is, :func:`check_transition`).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, cast

import pytest

from jbod_broker.move.copy import FileCopier
from jbod_broker.move.task import (
    TRANSITIONS,
    MoveTask,
    MoveTransitionError,
    check_transition,
)
from jbod_broker.storage.names import TopicPartition
from jbod_broker.wire import MoveState

EDGES = sorted((old, new) for old, targets in TRANSITIONS.items() for new in targets)
NON_EDGES = sorted(
    (old, new) for old in MoveState for new in MoveState if new not in TRANSITIONS[old]
)


def new_task() -> MoveTask:
    # The state machine does not look at the logs: a placeholder stands in for the future.
    future = cast(Any, None)
    return MoveTask(TopicPartition("t", 0), "/dest", "/src", future, False, FileCopier())


def path_to(state: MoveState) -> list[MoveState]:
    """The shortest list of allowed steps from Queued (where every task starts) to ``state``."""
    paths: dict[MoveState, list[MoveState]] = {MoveState.QUEUED: []}
    todo = deque([MoveState.QUEUED])
    while todo:
        s = todo.popleft()
        for nxt in sorted(TRANSITIONS[s]):
            if nxt not in paths:
                paths[nxt] = [*paths[s], nxt]
                todo.append(nxt)
    return paths[state]


def task_in(state: MoveState) -> MoveTask:
    task = new_task()
    for step in path_to(state):
        task.transition(step)
    assert task.state is state
    return task


def test_a_task_starts_queued() -> None:
    assert new_task().state is MoveState.QUEUED


@pytest.mark.parametrize(("old", "new"), EDGES, ids=[f"{a}->{b}" for a, b in EDGES])
def test_each_allowed_transition(old: MoveState, new: MoveState) -> None:
    check_transition(old, new)
    task = task_in(old)
    task.transition(new)
    assert task.state is new


@pytest.mark.parametrize(("old", "new"), NON_EDGES, ids=[f"{a}->{b}" for a, b in NON_EDGES])
def test_an_edge_not_in_the_table_is_refused(old: MoveState, new: MoveState) -> None:
    with pytest.raises(MoveTransitionError, match=f"from {old} to {new}"):
        check_transition(old, new)
    if old is MoveState.NONE:
        return  # no task is ever in None (describe's answer for a replica with no move)
    task = task_in(old)
    with pytest.raises(MoveTransitionError):
        task.transition(new)
    assert task.state is old


def test_every_state_but_none_is_reachable_and_only_done_after_a_swap() -> None:
    for state in set(MoveState) - {MoveState.NONE}:
        assert task_in(state).state is state  # path_to raises KeyError for an unreachable one
    assert {old for old, new in EDGES if new is MoveState.DONE} == {MoveState.SWAPPING}


def test_final_states_have_no_way_out() -> None:
    for state in MoveState:
        assert (TRANSITIONS[state] == frozenset()) is (state.finished or state is MoveState.NONE)


def test_the_wire_docstring_draws_this_table() -> None:
    doc = MoveState.__doc__ or ""
    drawn: dict[MoveState, frozenset[MoveState]] = {}
    for line in doc.splitlines():
        m = re.fullmatch(r"\s*(\w+)\s*->\s*(.+)", line)
        if m:
            targets = frozenset(MoveState(t.strip()) for t in m.group(2).split("|"))
            drawn[MoveState(m.group(1))] = targets
    assert drawn == {s: t for s, t in TRANSITIONS.items() if t}
