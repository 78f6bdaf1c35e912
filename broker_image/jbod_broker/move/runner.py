"""Running one move to its end: copy, swap, and what a stop means for the future folder.

:func:`run_move` is what a worker does with a task it took from the queue. It copies
(:mod:`.copy_step`) until the future is close enough, swaps (:mod:`.swap`), and turns whatever
stopped it into the move's final state and reason: a :class:`~.task.MoveStopped` says so
itself; a storage error is explained by the directory that failed, or is a cancel when the
replica or its future was removed under the move; anything else is a bug that fails this move
only. A move that did not finish removes its future folder (KAFKA-14824) unless that copy is
the only complete one left (the source failed after the commit point, or the swap stopped
between its renames): start-up recovery then decides.

Thread-safety: runs on one worker thread per task; see :mod:`.task` for what others touch.
"""

from __future__ import annotations

import logging

from ..storage.errors import KafkaError
from ..wire import MoveState
from .copy_step import copy_loop
from .swap import swap
from .task import MoveContext, MoveStopped, MoveTask, StopKind

log = logging.getLogger(__name__)


def run_move(
    ctx: MoveContext, task: MoveTask, *, swap_lag_bytes: int
) -> tuple[MoveState, str | None]:
    """Run ``task`` until it is swapped or stopped; returns its final state and reason."""
    tp = task.tp
    kind: StopKind | None = None
    reason: str | None = None
    try:
        source = ctx.lm.get_log(tp)
        if source is None or source.log_dir != task.source_dir:
            raise MoveStopped("cancel", f"replica {tp} is no longer in {task.source_dir}")
        copy_loop(ctx, task, source, task.future, swap_lag_bytes=swap_lag_bytes)
        swap(ctx, task, source, task.future)
    except MoveStopped as s:
        kind, reason = s.kind, s.reason
    except KafkaError as e:
        kind, reason = _explain(ctx, task, e)
    except Exception as e:  # a bug must fail one move, not kill the worker
        log.exception("replica move failed", extra={"partition": str(tp)})
        kind, reason = "fail", f"unexpected error: {e!r}"
    if kind == "fail" and task.stop_kind == "fail" and task.stop_reason:
        reason = task.stop_reason  # the directory failure, as the failure channel said it
    state = MoveState.DONE
    if kind == "shutdown":
        state = MoveState.INTERRUPTED
    elif kind is not None:
        state = MoveState.CANCELLED if kind == "cancel" else MoveState.FAILED
        if task.committed and ctx.lm.channel.is_offline(task.source_dir):
            # The source died during the swap, after the future had caught up and been
            # flushed: that copy is now the only whole one. Start-up recovery decides.
            log.error(
                "source of %s failed during the swap; keeping its complete copy %s",
                tp,
                task.future.dir_path,
                extra={"event": "replica_move_kept_future", "partition": str(tp)},
            )
        else:
            _drop_future(ctx, task, reason or "")
    extra = {
        "event": "replica_move_finished",
        "partition": str(tp),
        "state": state.value,
        "source_dir": task.source_dir,
        "dest_dir": task.dest,
        "error": reason,
    }
    if state is MoveState.FAILED:
        log.error("replica move failed: %s", reason, extra=extra)
    else:
        log.info("replica move finished: %s", state.value, extra=extra)
    return state, reason


def _drop_future(ctx: MoveContext, task: MoveTask, reason: str) -> None:
    """KAFKA-14824: a stopped move must not leave its copy behind (unless it is the only
    complete copy: a swap whose first rename could not be undone)."""
    if task.source_renamed:
        log.error(
            "move of %s stopped between its renames and could not be undone; both folders "
            "are kept for start-up recovery",
            task.tp,
            extra={"event": "replica_move_stranded", "partition": str(task.tp)},
        )
        return
    try:
        ctx.lm.abandon_future_log(task.tp, task.future)
    except KafkaError as e:
        log.warning(
            "could not remove future folder of %s after '%s': %s",
            task.tp,
            reason,
            e,
            extra={"event": "replica_move_cleanup_failed", "partition": str(task.tp)},
        )


def _explain(ctx: MoveContext, task: MoveTask, e: Exception) -> tuple[StopKind, str]:
    """Name the directory that failed; a replica deleted under the move is a cancel."""
    lm = ctx.lm
    for d, side in ((task.source_dir, "source"), (task.dest, "destination")):
        r = lm.channel.reason(d)
        if r is not None:
            return "fail", f"{side} log dir {d} failed: {r}"
    current = lm.get_log(task.tp)
    if lm.get_future_log(task.tp) is not task.future and not task.committed:
        return "cancel", f"the future log of {task.tp} was removed during the move ({e})"
    if (current is None or current.log_dir != task.source_dir) and not task.committed:
        return "cancel", f"replica {task.tp} was deleted during the move ({e})"
    return "fail", str(e)
