"""The swap at the end of a move: thin, because the log manager owns it.

:meth:`LogManager.replace_current_with_future_log` does the swap in Kafka's fixed order and
calls back here twice: ``catch_up`` (under the manager's lock and both logs' locks, so appends
are held) copies the last bytes with unthrottled steps, and ``on_point`` hears each
:class:`~jbod_broker.storage.log_manager.SwapPoint`, where the task's ``committed`` and
``source_renamed`` flags are kept and the crash hooks (:mod:`.hooks`) fire, at the same points
as always: ``after_lock``, ``before_renames``, ``between_renames``, ``after_renames`` and,
after the locks are released, ``after_swap``.

Thread-safety: run by the move's worker; the callbacks run on the same thread.
"""

from __future__ import annotations

import logging

from ..storage.log import Log
from ..storage.log_manager import SwapPoint
from ..wire import MoveState
from . import hooks as hk
from .copy_step import step
from .reconcile import reconcile
from .task import MoveContext, MoveStopped, MoveTask

log = logging.getLogger(__name__)

_SWAP_CATCH_UP_STEPS = 1000


def swap(ctx: MoveContext, task: MoveTask, source: Log, future: Log) -> None:
    """Make ``future`` the replica's log; raises :class:`MoveStopped` or the failed step's
    error (nothing is swapped unless this returns)."""
    tp = task.tp

    def catch_up() -> None:
        ctx.set_state(task, MoveState.SWAPPING)
        ctx.hooks.reach(hk.AFTER_LOCK, tp)
        ctx.check(task, source, future)
        for _ in range(_SWAP_CATCH_UP_STEPS):
            if step(ctx, task, source, future, throttled=False) == 0:
                break
        reconcile(ctx, task, source, future)

    def on_point(point: SwapPoint) -> None:
        if point is SwapPoint.COMMIT:
            ctx.check(task, source, future)  # the last point where a cancel wins
        elif point is SwapPoint.BEFORE_RENAMES:
            ctx.mark_committed(task)
            ctx.hooks.reach(hk.BEFORE_RENAMES, tp)
        elif point is SwapPoint.SOURCE_RENAMED:
            task.source_renamed = True
        elif point is SwapPoint.BETWEEN_RENAMES:
            ctx.hooks.reach(hk.BETWEEN_RENAMES, tp)
        elif point is SwapPoint.SOURCE_RESTORED:
            task.source_renamed = False
        elif point is SwapPoint.AFTER_RENAMES:
            task.source_renamed = False
            ctx.hooks.reach(hk.AFTER_RENAMES, tp)

    if not ctx.lm.replace_current_with_future_log(
        tp, source, future, catch_up=catch_up, on_point=on_point
    ):
        raise MoveStopped("fail", f"the future log of {tp} could not catch up under the lock")
    log.info(
        "replica moved",
        extra={
            "event": "replica_moved",
            "partition": str(tp),
            "source_dir": task.source_dir,
            "dest_dir": task.dest,
        },
    )
    ctx.hooks.reach(hk.AFTER_SWAP, tp)
