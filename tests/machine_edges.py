"""Edges a state machine's pure pass really takes, for the transition-table tests.

A table checked against itself (each allowed edge passes ``transition``, each named in a map)
says nothing about the machine: an edge no pass can take stays green. The machines' scenario
tests drive the pass (``advance``, ``decide``) from an observation with ``transition``
recorded; :func:`edges_taken_by` runs one such test again with its own recorder, every
parametrized case of it, and returns the edges it took, so a test can show each allowed edge
taken by the pass its map names.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import pytest

from jbod_operator.plan import machine

Edge = tuple[Any, Any]


def recorder(*into: list[Edge]) -> Callable[[Mapping[Edge, str], Any, Any], Any]:
    """``machine.transition`` that also appends each change of state to each list given."""

    def recording(table: Mapping[Edge, str], a: Any, b: Any) -> Any:
        out = machine.transition(table, a, b)
        if a != b:
            for taken in into:
                taken.append((a, b))
        return out

    return recording


def edges_taken_by(test: Callable[..., None], plan: ModuleType) -> set[Edge]:
    """Run the scenario ``test`` (its only fixture: ``edges``) once per parametrized case with
    ``plan.transition`` recorded, and return every edge the pass took."""
    taken: list[Edge] = []
    for case in _cases(test):
        edges: list[Edge] = []  # the test's own record, as its fixture gives it (it may clear it)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(plan, "transition", recorder(edges, taken))
            test(**case, edges=edges)
    return set(taken)


def _cases(test: Callable[..., None]) -> list[dict[str, Any]]:
    """The keyword arguments of each parametrized case of ``test`` (one empty case if none)."""
    cases: list[dict[str, Any]] = [{}]
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = [_row(v, len(names)) for v in values]
        cases = [{**c, **dict(zip(names, r, strict=True))} for c in cases for r in rows]
    params = set(inspect.signature(test).parameters) - {"edges"}
    assert all(set(c) == params for c in cases), f"{test.__name__}: fixtures other than edges"
    return cases


def _row(value: Any, width: int) -> tuple[Any, ...]:
    """One parametrize value as a row of arguments (a ``pytest.param`` gives its values)."""
    if type(value).__name__ == "ParameterSet":
        return tuple(value.values)
    return (value,) if width == 1 else tuple(value)
