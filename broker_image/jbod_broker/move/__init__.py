"""Moving replicas between the log directories of one broker (KIP-113).

The public API: :class:`ReplicaMoveEngine` (alter, cancel, describe, wait, resume, shutdown),
the shared :class:`Throttle`, the zero-copy :class:`FileCopier`, the settings parser
:func:`parse_move_config` and the start-up glue :func:`start_storage`.
"""

from __future__ import annotations

from ..wire import MoveState
from .config import (
    THREADS,
    THROTTLED_RATE,
    THROTTLED_RATE_ALIAS,
    MoveConfig,
    MoveConfigError,
    parse_move_config,
)
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
    "THREADS",
    "THROTTLED_RATE",
    "THROTTLED_RATE_ALIAS",
    "AlterResult",
    "CopyIOError",
    "CopyMethod",
    "FileCopier",
    "MoveConfig",
    "MoveConfigError",
    "MoveEngineStoppedError",
    "MoveHooks",
    "MoveState",
    "ReplicaLogDirInfo",
    "ReplicaMoveEngine",
    "Throttle",
    "parse_move_config",
    "start_storage",
]
