"""One replica's move: its state machine, its progress, and what its steps share.

A :class:`MoveTask` is created by the engine when a move is queued and lives until the next
move of the same replica replaces it (describe reports the last one). Its state only changes
along :data:`TRANSITIONS`, the table the docstring of :class:`~jbod_broker.wire.MoveState`
draws; :func:`check_transition` refuses any other edge, so a bug shows as an error instead of a
move that reports, say, ``Done`` without having swapped.

Thread-safety: a task is written by the one worker running it, and its state, stop request and
``committed`` flag by other threads too (cancel, shutdown, a directory failure): those fields
change only under the engine's state lock (:attr:`MoveContext.state_lock`). Progress counters
are plain integers written by the worker and read without the lock by describe (a stale read
only shows a slightly older figure).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..storage.log import Log
from ..storage.log_manager import LogManager
from ..storage.names import TopicPartition
from ..wire import MoveState
from .copy import FileCopier
from .hooks import MoveHooks
from .throttle import Throttle

StopKind = Literal["cancel", "fail", "shutdown"]
"""Why a move stops early: it was cancelled, it failed, or the engine shut down."""

_FINAL: frozenset[MoveState] = frozenset()
_STOPPED = frozenset({MoveState.FAILED, MoveState.CANCELLED, MoveState.INTERRUPTED})

TRANSITIONS: Final[Mapping[MoveState, frozenset[MoveState]]] = {
    # A queued move has touched nothing yet: a worker starts it, or it is dropped.
    MoveState.QUEUED: frozenset({MoveState.COPYING, MoveState.CANCELLED, MoveState.INTERRUPTED}),
    # Sealed segments, then the active one; a roll of the source makes a whole segment to copy
    # again; a future that has nothing left to copy goes straight to the swap.
    MoveState.COPYING: frozenset({MoveState.CATCHING_UP, MoveState.SWAPPING}) | _STOPPED,
    MoveState.CATCHING_UP: frozenset({MoveState.COPYING, MoveState.SWAPPING}) | _STOPPED,
    # Only a swap ends in Done; until its commit point it can still be stopped.
    MoveState.SWAPPING: frozenset({MoveState.DONE}) | _STOPPED,
    MoveState.DONE: _FINAL,
    MoveState.FAILED: _FINAL,
    MoveState.CANCELLED: _FINAL,
    MoveState.INTERRUPTED: _FINAL,
    # "None" is describe's answer for a replica with no move; no task is ever in it.
    MoveState.NONE: _FINAL,
}
"""Every allowed edge of a move's state machine (staying in a state is not an edge)."""


class MoveTransitionError(RuntimeError):
    """A move was asked to change state along an edge :data:`TRANSITIONS` does not allow."""


def check_transition(old: MoveState, new: MoveState) -> None:
    """Raise :class:`MoveTransitionError` unless ``old -> new`` is in :data:`TRANSITIONS`."""
    if new not in TRANSITIONS[old]:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[old])) or "nothing (final)"
        raise MoveTransitionError(f"a move cannot go from {old} to {new} (allowed: {allowed})")


class MoveStopped(Exception):
    """Raised inside a move's steps to end it early; ``kind`` decides its final state."""

    def __init__(self, kind: StopKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: StopKind = kind
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ReplicaLogDirInfo:
    """One replica's directories and move progress (DescribeReplicaLogDirs, plus progress)."""

    topic: str
    partition: int
    current_dir: str | None
    future_dir: str | None
    """The destination directory while a future copy exists (KIP-113's temporary replica)."""
    future_offset_lag: int
    bytes_copied: int
    bytes_total: int
    state: MoveState | None
    """``None``: no move known for this replica (the wire says ``MoveState.NONE``)."""
    error: str | None
    rate_bytes_per_sec: float
    eta_seconds: float | None
    started_at: float | None
    finished_at: float | None
    copy_method: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "currentDir": self.current_dir,
            "futureDir": self.future_dir,
            "futureOffsetLag": self.future_offset_lag,
            "bytesCopied": self.bytes_copied,
            "bytesTotal": self.bytes_total,
            "state": self.state.value if self.state is not None else None,
            "error": self.error,
            "rateBytesPerSecond": round(self.rate_bytes_per_sec, 1),
            "etaSeconds": None if self.eta_seconds is None else round(self.eta_seconds, 1),
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "copyMethod": self.copy_method,
        }


@dataclass(eq=False)
class MoveTask:
    """One move of ``tp`` from ``source_dir`` into ``future`` on ``dest``."""

    tp: TopicPartition
    dest: str
    source_dir: str
    future: Log
    resumed: bool
    copier: FileCopier
    _state: MoveState = field(default=MoveState.QUEUED, init=False)
    error: str | None = None
    stop_kind: StopKind | None = None
    stop_reason: str | None = None
    committed: bool = False
    """Past the swap's commit point: a stop request is ignored from here on."""
    source_renamed: bool = False
    """The source is ``-delete`` and the future not yet renamed: a failure now keeps both."""
    started_at: float | None = None
    finished_at: float | None = None
    copied_base: int = 0
    """Bytes of the future log (as of the last step)."""
    inflight: int = 0
    """Bytes copied by the step in progress."""
    behind: int = 0
    """Source bytes beyond the future's end when the step in progress was planned."""
    moved: int = 0
    """Every byte copied, including copies thrown away (for the rate)."""
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def state(self) -> MoveState:
        return self._state

    def transition(self, new: MoveState) -> None:
        """Change state along an allowed edge; callers hold the engine's state lock."""
        check_transition(self._state, new)
        self._state = new

    def request_stop(self, kind: StopKind, reason: str) -> None:
        """Ask the worker to stop at its next check (the first request wins); callers hold the
        engine's state lock."""
        if self.stop_kind is None and not self.committed:
            self.stop_reason = reason
            self.stop_kind = kind

    def stopping(self) -> bool:
        return self.stop_kind is not None

    def raise_if_stopped(self) -> None:
        if self.stop_kind is not None:
            raise MoveStopped(self.stop_kind, self.stop_reason or self.stop_kind)

    @property
    def copied(self) -> int:
        return self.copied_base + self.inflight

    @property
    def remaining(self) -> int:
        return max(0, self.behind - self.inflight)


def describe_replica(
    tp: TopicPartition, current: Log | None, future: Log | None, task: MoveTask | None, now: float
) -> ReplicaLogDirInfo:
    """Describe's row for one replica: its logs as they are, and its last move if any."""
    cs = current.snapshot() if current is not None else None
    fs = future.snapshot() if future is not None else None
    lag = max(0, cs.log_end_offset - fs.log_end_offset) if cs and fs else 0
    current_dir = current.log_dir if current is not None else None
    future_dir = future.log_dir if future is not None else None
    if task is None:
        return ReplicaLogDirInfo(
            tp.topic, tp.partition, current_dir, future_dir, lag,
            fs.size if fs else 0, cs.size if cs else 0,
            None, None, 0.0, None, None, None, None,
        )  # fmt: skip
    copied = task.copied
    total = copied + task.remaining
    if task.state is MoveState.DONE:
        copied = total = max(copied, cs.size if cs else 0)
    elapsed = (task.finished_at or now) - (task.started_at or now)
    rate = task.moved / elapsed if elapsed > 0 else 0.0
    eta: float | None = None
    if not task.state.finished and rate > 0:
        eta = task.remaining / rate
    return ReplicaLogDirInfo(
        tp.topic, tp.partition, current_dir, future_dir, lag, copied, total,
        task.state, task.error, rate, eta, task.started_at, task.finished_at,
        task.copier.method.value if task.started_at else None,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class MoveContext:
    """What the steps of a move (copy, reconcile, swap) share with the engine running it."""

    lm: LogManager
    throttle: Throttle
    hooks: MoveHooks
    state_lock: threading.Lock
    """The engine's state lock: held briefly, never while taking another lock."""

    def set_state(self, task: MoveTask, state: MoveState) -> None:
        if task.state is not state:
            with self.state_lock:
                task.transition(state)

    def mark_committed(self, task: MoveTask) -> None:
        with self.state_lock:
            task.committed = True

    def guard(self, d: str, what: str) -> contextlib.AbstractContextManager[None]:
        """The failure channel's guard: an ``OSError`` takes directory ``d`` offline."""
        return self.lm.channel.guard(d, what)

    def guard_dest(self, task: MoveTask, what: str) -> contextlib.AbstractContextManager[None]:
        """The guard for writes into the move's future copy: running out of space there is
        the move's failure (InsufficientSpaceError), not the destination's (issue 13)."""
        return self.lm.channel.guard(task.dest, what, shortage_fails_dir=False)

    def check(self, task: MoveTask, source: Log, future: Log) -> None:
        """Raise :class:`MoveStopped` if the move must not go on: a stop was requested, a
        directory failed, or the replica's current or future log is no longer ours."""
        task.raise_if_stopped()
        lm = self.lm
        for d, side in ((task.source_dir, "source"), (task.dest, "destination")):
            r = lm.channel.reason(d)
            if r is not None:
                raise MoveStopped("fail", f"{side} log dir {d} failed: {r}")
        tp = task.tp
        if source.successor is not None or lm.get_log(tp) is not source:
            raise MoveStopped("cancel", f"replica {tp} was deleted or replaced during the move")
        if lm.get_future_log(tp) is not future or future.offline:
            raise MoveStopped("cancel", f"the future log of {tp} was removed during the move")
