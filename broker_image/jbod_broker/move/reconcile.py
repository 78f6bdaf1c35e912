"""Keeping a move's future log a prefix of its source (KAFKA-8002, KAFKA-9654).

The source keeps changing while it is copied: appends, retention moving its log start offset,
truncation after a leader change. Before each copy step the future is compared with the source
by offsets and batch identity, never by segment layout, and cut or restarted until it is a
prefix again; the copy then goes on from its end instead of failing the move.

Thread-safety: functions of one move, run by its worker. Each takes the future's lock, then
the source's, never both at once (the swap, which holds both, calls them too: the locks are
reentrant). The batch helpers expect their caller to hold the log's lock and its directory's
guard.
"""

from __future__ import annotations

import bisect
import logging

from ..storage.log import Log
from ..storage.records import BatchHeader
from ..storage.segment import LogSegment
from .task import MoveContext, MoveStopped, MoveTask

log = logging.getLogger(__name__)

_MAX_RECONCILE_ROUNDS = 10_000


def reconcile(ctx: MoveContext, task: MoveTask, source: Log, future: Log) -> None:
    """Cut or restart the future until it is a prefix of the source, by offsets and batch
    identity (KAFKA-8002, KAFKA-9654): a truncated source, a new leader epoch or a moved
    log start offset adjusts the copy instead of failing it."""
    tp = task.tp
    for _ in range(_MAX_RECONCILE_ROUNDS):
        with future.lock:
            ctx.check(task, source, future)
            with ctx.guard_dest(task, f"read future log of {tp}"):
                f_last = last_batch(future)
            f_leo, f_size, f_segs = future.log_end_offset, future.size, len(future.segments)
        with source.lock:
            ctx.check(task, source, future)
            with ctx.guard(task.source_dir, f"read {tp} for a move"):
                s_lso, s_leo = source.log_start_offset, source.log_end_offset
                if f_size == 0 or f_leo <= s_lso:
                    start = segment_holding(source, s_lso).base_offset
                    if f_size == 0 and f_segs == 1 and f_leo == start:
                        return
                    action, offset = "restart", start
                elif f_leo > s_leo:
                    action, offset = "truncate", s_leo
                else:
                    assert f_last is not None
                    if same_batch(batch_containing(source, f_last.last_offset), f_last):
                        return
                    # Jump to where the source's log for that epoch ends (KIP-101), then
                    # check batch by batch from there.
                    action, offset = "truncate", f_last.base_offset
                    epoch, end = source.epochs.end_offset_for(f_last.partition_leader_epoch, s_leo)
                    if epoch >= 0 and s_lso < end < offset:
                        offset = end
        log.info(
            "future log of %s diverged from its source: %s at %d",
            tp,
            action,
            offset,
            extra={"event": "replica_move_reconcile", "partition": str(tp)},
        )
        if action == "restart":
            future.truncate_fully_and_start_at(offset)
        else:
            future.truncate_to(offset)
    raise MoveStopped("fail", f"the future log of {tp} cannot be reconciled with its source")


# -- batch identity (callers hold the log's lock and its directory's guard) -------------------


def segment_holding(lg: Log, offset: int) -> LogSegment:
    """The segment whose offsets include ``offset`` (or the first after it: a gap)."""
    segs = lg.segments
    i = max(0, bisect.bisect_right(segs, offset, key=lambda s: s.base_offset) - 1)
    if segs[i].next_offset <= offset and i + 1 < len(segs):
        i += 1
    return segs[i]


def batch_containing(lg: Log, offset: int) -> BatchHeader | None:
    seg = segment_holding(lg, offset)
    found = seg.find_batch(offset)
    if found is None or found[1].base_offset > offset:
        return None
    return found[1]


def last_batch(lg: Log) -> BatchHeader | None:
    for seg in reversed(lg.segments):
        if seg.size == 0:
            continue
        last = None
        for _pos, hdr in seg.scan(seg.index.last_position):
            last = hdr
        return last
    return None


def same_batch(a: BatchHeader | None, b: BatchHeader | None) -> bool:
    """The same batch: offsets, length, CRC and leader epoch (log matching: then every batch
    before it is the same too)."""
    return (
        a is not None
        and b is not None
        and a.base_offset == b.base_offset
        and a.last_offset_delta == b.last_offset_delta
        and a.batch_length == b.batch_length
        and a.crc == b.crc
        and a.partition_leader_epoch == b.partition_leader_epoch
        and a.magic == b.magic
    )
