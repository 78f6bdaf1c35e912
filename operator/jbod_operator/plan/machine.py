"""What every controller's state machine shares: one checked way to change state. Pure.

Each controller keeps its transitions in a table (``{(from, to): cause}``) next to its state
enums; every state change goes through :func:`transition`, so an edge missing from the table
is caught where it is taken (a bug, never user input), and a test per table entry keeps the
enums' docstrings, the table and the decisions in agreement.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar


class IllegalTransitionError(ValueError):
    """A decision tried an edge that is not in the transition table: a bug, never user input."""


S = TypeVar("S", bound=StrEnum)


def transition(table: Mapping[tuple[Any, Any], str], current: S | None, new: S) -> S:
    """``new`` if ``current -> new`` is allowed (staying put always is), else raise."""
    if current == new or (current, new) in table:
        return new
    raise IllegalTransitionError(f"{current} -> {new} is not an allowed transition")
