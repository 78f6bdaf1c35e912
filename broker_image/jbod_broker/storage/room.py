"""Whether a log directory has room for a replica: the one rule the broker (before it starts a
move or creates a replica), the operator (before it sends anything) and the planners share.

Pure: the caller brings what the directory reports (usable bytes, capacity) and what is already
promised to it (reservations of the moves and new replicas in flight). Kafka checks nothing
here: a move to a disk without room fills it, and KIP-112 then takes every other replica of the
disk offline. We refuse up front and say why.

    room = usable - reserved - headroom
    fits  ⇔  need <= room

``reserved`` counts what in-flight work still has to write (a move's remaining bytes, not its
total: what it copied is already out of ``usable``). ``headroom`` covers what nobody can
predict: a replica growing while it moves (appends continue), indexes, checkpoints, other
writers. It is the larger of a byte floor and a share of the directory's capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_PERCENT = 50
"""A headroom above half a disk would refuse nearly everything: a misconfiguration."""


class HeadroomError(ValueError):
    """A headroom setting out of range; the message names it."""


@dataclass(frozen=True, slots=True)
class Headroom:
    """Space kept free on every log dir: ``max(bytes, percent of capacity)``."""

    bytes: int = 0
    percent: float = 0.0

    def __post_init__(self) -> None:
        if self.bytes < 0:
            raise HeadroomError(f"headroom bytes must be >= 0, got {self.bytes}")
        if not 0 <= self.percent <= MAX_PERCENT or math.isnan(self.percent):
            raise HeadroomError(
                f"headroom percent must be between 0 and {MAX_PERCENT}, got {self.percent}"
            )

    def of(self, capacity_bytes: int) -> int:
        """Bytes kept free on a directory of ``capacity_bytes``."""
        return max(self.bytes, math.ceil(max(capacity_bytes, 0) * self.percent / 100))


@dataclass(frozen=True, slots=True)
class DirSpace:
    """What is known of one directory's space when the decision is made."""

    path: str
    capacity_bytes: int
    usable_bytes: int
    reserved_bytes: int = 0
    """What moves and new replicas in flight to it still have to write."""


@dataclass(frozen=True, slots=True)
class RoomVerdict:
    fits: bool
    room_bytes: int
    """usable - reserved - headroom (may be negative)."""
    need_bytes: int
    headroom_bytes: int
    space: DirSpace

    @property
    def reason(self) -> str:
        """Why it does not fit, naming the directory and every figure, or "" when it does."""
        if self.fits:
            return ""
        s = self.space
        return (
            f"log dir {s.path} has no room for {self.need_bytes} bytes: {s.usable_bytes} bytes "
            f"free, {s.reserved_bytes} reserved by moves and new replicas in flight, "
            f"{self.headroom_bytes} kept as headroom, so {max(self.room_bytes, 0)} available"
        )


def check_room(space: DirSpace, need_bytes: int, headroom: Headroom) -> RoomVerdict:
    """Whether ``need_bytes`` more fit on the directory now (see the module docstring)."""
    need = max(need_bytes, 0)
    kept = headroom.of(space.capacity_bytes)
    room = space.usable_bytes - max(space.reserved_bytes, 0) - kept
    return RoomVerdict(need <= room, room, need, kept, space)


def remaining_to_write(total_bytes: int, copied_bytes: int) -> int:
    """A running move's reservation: what it still has to write (never below zero)."""
    return max(total_bytes - copied_bytes, 0)
