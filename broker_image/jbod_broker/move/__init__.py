"""Moving replicas between the log directories of one broker (KIP-113).

The public API: :class:`ReplicaMoveEngine` (alter, cancel, describe, wait, resume, shutdown),
the shared :class:`Throttle`, the zero-copy :class:`FileCopier` and the start-up glue
:func:`start_storage`. Its settings are the broker's (:class:`jbod_broker.config.BrokerConfig`).
"""

from __future__ import annotations

from ..wire import MoveState
from .copy import CopyIOError, CopyMethod, FileCopier
from .engine import AlterResult, MoveEngineStoppedError, ReplicaMoveEngine
from .hooks import CRASH_ENV, PAUSE_ENV, MoveHooks
from .recovery import start_storage
from .task import TRANSITIONS, MoveTransitionError, ReplicaLogDirInfo, check_transition
from .throttle import Throttle

__all__ = [
    "CRASH_ENV",
    "PAUSE_ENV",
    "TRANSITIONS",
    "AlterResult",
    "CopyIOError",
    "CopyMethod",
    "FileCopier",
    "MoveEngineStoppedError",
    "MoveHooks",
    "MoveState",
    "MoveTransitionError",
    "ReplicaLogDirInfo",
    "ReplicaMoveEngine",
    "Throttle",
    "check_transition",
    "start_storage",
]
