"""Moving replicas between the log directories of one broker (KIP-113).

The public API: :class:`ReplicaMoveEngine` (alter, cancel, describe, wait, resume, shutdown),
the shared :class:`Throttle`, the zero-copy :class:`FileCopier` and the start-up glue
:func:`start_storage`. Its settings are the broker's (:class:`jbod_broker.config.BrokerConfig`).
"""

from __future__ import annotations

from ..wire import MoveState
from .copy import CopyIOError, CopyMethod, FileCopier
from .engine import (
    ANY,
    AlterResult,
    MoveEngineStoppedError,
    ReplicaLogDirInfo,
    ReplicaMoveEngine,
)
from .hooks import CRASH_ENV, PAUSE_ENV, MoveHooks
from .recovery import start_storage
from .throttle import Throttle

__all__ = [
    "ANY",
    "CRASH_ENV",
    "PAUSE_ENV",
    "AlterResult",
    "CopyIOError",
    "CopyMethod",
    "FileCopier",
    "MoveEngineStoppedError",
    "MoveHooks",
    "MoveState",
    "ReplicaLogDirInfo",
    "ReplicaMoveEngine",
    "Throttle",
    "start_storage",
]
