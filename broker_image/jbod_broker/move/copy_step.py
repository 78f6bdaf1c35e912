"""The copy step of a move: plan the next piece, copy it with the kernel, adopt it.

Each step first reconciles the future with the source (:mod:`.reconcile`), then plans under
the source's lock what to copy next: a sealed segment whole, with its two indexes (when the
future ends exactly where it starts), or else batches of the segment holding the future's end,
up to the throttle's chunk (at least one whole batch). The source's files are opened while its
lock is held, so retention deleting a segment cannot break a copy in flight; the lock is then
released and appends go on while the bytes move (:class:`~.copy.FileCopier`: zero-copy calls
through the one shared :class:`~.throttle.Throttle`). The future adopts what was copied
(:meth:`Log.attach_copied_segment`, :meth:`Log.adopt_copied_batches`) only after checking
that the source still holds the last batch copied, so bytes of a source truncated during the
copy never stay.

Thread-safety: functions of one move, run by its worker (and by the swap, which calls
:func:`step` unthrottled while holding the source's and the future's locks). Locks are taken
one at a time, future's before source's when both are needed in turn.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from ..storage.diskio import preallocate
from ..storage.errors import KafkaStorageError
from ..storage.log import Log
from ..storage.names import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name
from ..storage.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, BatchHeader, parse_header
from ..storage.segment import BatchMeta, LogSegment
from ..wire import MoveState
from . import hooks as hk
from .copy import CopyIOError
from .reconcile import batch_containing, reconcile, same_batch, segment_holding
from .task import MoveContext, MoveStopped, MoveTask
from .throttle import MAX_CHUNK

MAX_STEP_BYTES = 64 * 1024 * 1024
"""An unthrottled step (the swap's catch-up) copies at most this much at a time."""
_HEADER_WINDOW = 4096
_MAX_STALLED_STEPS = 200
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


@dataclass(slots=True)
class _Plan:
    whole: bool
    base_offset: int
    fds: dict[str, int]
    sizes: dict[str, int]
    start: int
    end: int
    last: BatchHeader | None
    last_pos: int
    behind: int
    future_base: int
    future_pos: int


def copy_loop(
    ctx: MoveContext, task: MoveTask, source: Log, future: Log, *, swap_lag_bytes: int
) -> None:
    """Copy, step after throttled step, until the future is within ``swap_lag_bytes`` of the
    source (then the swap copies the rest with appends held); a copy that stops advancing
    fails instead of spinning."""
    stalled = 0
    last = (-1, -1)
    while True:
        ctx.check(task, source, future)
        behind = step(ctx, task, source, future, throttled=True)
        if behind <= swap_lag_bytes:
            return
        mark = (future.log_end_offset, future.size)
        stalled = stalled + 1 if mark == last else 0
        last = mark
        if stalled >= _MAX_STALLED_STEPS:
            raise MoveStopped("fail", f"the copy of {task.tp} makes no progress")


def step(ctx: MoveContext, task: MoveTask, source: Log, future: Log, *, throttled: bool) -> int:
    """Copy the next piece; returns the source bytes still beyond the future's end."""
    reconcile(ctx, task, source, future)
    limit = ctx.throttle.chunk_size() if throttled else MAX_STEP_BYTES
    plan = _plan(ctx, task, source, future, limit)
    if plan is None:
        task.behind = 0
        return 0
    task.behind = plan.behind
    try:
        if plan.whole:
            copied = _copy_whole(ctx, task, source, future, plan, throttled)
        else:
            copied = _copy_tail(ctx, task, future, plan, throttled)
    finally:
        for fd in plan.fds.values():
            os.close(fd)
        with future.lock:
            task.copied_base = future.size
        task.inflight = 0
    task.behind = max(0, plan.behind - copied)
    return task.behind


def _plan(ctx: MoveContext, task: MoveTask, source: Log, future: Log, limit: int) -> _Plan | None:
    """What to copy next: a whole sealed segment, or up to ``limit`` bytes of batches
    from where the future ends; ``None`` when the future has caught up."""
    tp = task.tp
    while True:
        with future.lock:
            fa = future.active
            f_leo, f_base, f_pos = fa.next_offset, fa.base_offset, fa.size
            f_only = len(future.segments) == 1
        with source.lock:
            ctx.check(task, source, future)
            with ctx.guard(task.source_dir, f"open {tp} for a move"):
                if f_leo >= source.log_end_offset:
                    return None
                seg = segment_holding(source, f_leo)
                if f_pos > 0 and seg.base_offset == f_leo:
                    plan = None  # mirror the source's roll first, then plan again
                else:
                    plan = _open_plan(source, seg, f_leo, f_base, f_pos, f_only)
                    if not plan.whole:
                        # At least one whole batch per step: a batch larger than the
                        # throttle's chunk would otherwise never be copied (the partial
                        # bytes are cut off again when the future adopts whole batches).
                        first = seg.find_batch(f_leo)
                        first_end = first[0] + first[1].size_in_bytes if first else plan.end
                        plan.end = min(plan.end, max(plan.start + limit, first_end))
                    if task.state in (MoveState.COPYING, MoveState.CATCHING_UP):
                        ctx.set_state(
                            task, MoveState.COPYING if plan.whole else MoveState.CATCHING_UP
                        )
                    return plan
        future.roll()


def _open_plan(
    source: Log, seg: LogSegment, f_leo: int, f_base: int, f_pos: int, f_only: bool
) -> _Plan:
    segs = source.segments
    after = sum(s.size for s in segs[segs.index(seg) + 1 :])
    sealed = seg is not segs[-1]
    whole = (
        sealed
        and f_pos == 0
        and (seg.base_offset == f_base or (f_only and seg.base_offset < f_base < seg.next_offset))
    )
    fds: dict[str, int] = {}
    try:
        if whole:
            last_pos, last = -1, None
            for p, h in seg.scan(seg.index.last_position):
                last_pos, last = p, h
            # Index entries may still wait in memory (they are written in bulk): put them
            # in the files now, so the copy's indexes are whole.
            seg.index.write_pending()
            seg.time_index.write_pending()
            sizes: dict[str, int] = {}
            for suffix, path in zip(_SEGMENT_SUFFIXES, seg.file_paths(), strict=True):
                fds[suffix] = os.open(path, os.O_RDONLY)
                sizes[suffix] = os.fstat(fds[suffix]).st_size
            sizes[LOG_SUFFIX] = seg.size
            if last is None:
                raise KafkaStorageError(f"sealed segment {seg.log_path} has no batch")
            return _Plan(
                True, seg.base_offset, fds, sizes, 0, seg.size, last, last_pos,
                after + seg.size, f_base, f_pos,
            )  # fmt: skip
        found = seg.find_batch(f_leo)
        start = found[0] if found is not None else seg.size
        fds[LOG_SUFFIX] = os.open(seg.log_path, os.O_RDONLY)
        return _Plan(
            False, seg.base_offset, fds, {LOG_SUFFIX: seg.size}, start, seg.size, None, -1,
            after + seg.size - start, f_base, f_pos,
        )  # fmt: skip
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise


def _copy_range(
    ctx: MoveContext,
    task: MoveTask,
    src_fd: int,
    dst_fd: int,
    src_off: int,
    dst_off: int,
    length: int,
    *,
    throttled: bool,
    progress: bool,
) -> int:
    done = 0
    while done < length:
        task.raise_if_stopped()
        n = min(length - done, ctx.throttle.chunk_size() if throttled else MAX_CHUNK)
        if throttled:
            if not ctx.throttle.acquire(n, task.stopping):
                continue  # stopped while waiting: raised above
        else:
            ctx.throttle.charge(n)
        try:
            got = task.copier.copy(src_fd, dst_fd, src_off + done, dst_off + done, n)
        except CopyIOError as e:
            what = f"copy {task.tp} ({e.side} side)"
            side = ctx.guard(task.source_dir, what) if e.side == "source" else None
            with side or ctx.guard_dest(task, what):
                raise e.error from None
        done += got
        task.moved += got
        if progress:
            task.inflight += got
        if throttled:  # not in the swap, which holds the append lock
            ctx.hooks.reach(hk.MID_COPY, task.tp)
        if got < n:
            break  # the source file ended early: it was truncated under us
    return done


def _copy_whole(
    ctx: MoveContext, task: MoveTask, source: Log, future: Log, plan: _Plan, throttled: bool
) -> int:
    tp = task.tp
    staged: dict[str, str] = {}
    try:
        for suffix in _SEGMENT_SUFFIXES:
            # Under the future's lock: a deletion of the replica renames its folder.
            with future.lock:
                ctx.check(task, source, future)
                tmp = os.path.join(
                    future.dir_path, segment_file_name(plan.base_offset, suffix) + ".tmp"
                )
                with ctx.guard_dest(task, f"create copy of {tp} segment"):
                    dst = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            staged[suffix] = tmp
            try:
                size = plan.sizes[suffix]
                # Blocks first, bytes after: a shortage shows before any data lands (issue 13).
                with ctx.guard_dest(task, f"allocate copy of {tp} segment"):
                    preallocate(dst, size)
                n = _copy_range(
                    ctx,
                    task,
                    plan.fds[suffix],
                    dst,
                    0,
                    0,
                    size,
                    throttled=throttled,
                    progress=suffix == LOG_SUFFIX,
                )
                if n != size:
                    return 0  # cut short by a truncation: plan again
                if suffix == LOG_SUFFIX:
                    with ctx.guard_dest(task, f"check copy of {tp} segment"):
                        head = os.pread(dst, BATCH_HEADER_SIZE, plan.last_pos)
                    if len(head) < BATCH_HEADER_SIZE or not same_batch(
                        parse_header(head), plan.last
                    ):
                        return 0
            finally:
                os.close(dst)
        # The source must still hold the last batch copied: if it was truncated and
        # rewritten during the copy, the bytes may be a mix (plan again).
        with source.lock:
            ctx.check(task, source, future)
            assert plan.last is not None
            with ctx.guard(task.source_dir, f"check {tp} after a copy"):
                intact = same_batch(batch_containing(source, plan.last.last_offset), plan.last)
        if not intact:
            return 0
        future.attach_copied_segment(plan.base_offset, staged)
        staged = {}
        return plan.sizes[LOG_SUFFIX]
    finally:
        if staged and not ctx.lm.channel.is_offline(task.dest):
            for tmp in staged.values():
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def _copy_tail(ctx: MoveContext, task: MoveTask, future: Log, plan: _Plan, throttled: bool) -> int:
    tp = task.tp
    with future.lock:
        fa = future.active
        if fa.base_offset != plan.future_base or fa.size != plan.future_pos:
            return 0
        if ctx.lm.get_future_log(tp) is not future or future.offline:
            raise MoveStopped("cancel", f"the future log of {tp} was removed during the move")
        with ctx.guard_dest(task, f"open future segment of {tp}"):
            dst = os.open(fa.log_path, os.O_RDWR)
    try:
        n = _copy_range(
            ctx,
            task,
            plan.fds[LOG_SUFFIX],
            dst,
            plan.start,
            plan.future_pos,
            plan.end - plan.start,
            throttled=throttled,
            progress=True,
        )
        with ctx.guard_dest(task, f"read back copied batches of {tp}"):
            metas = _read_batch_metas(dst, plan.future_pos, plan.future_pos + n)
    finally:
        os.close(dst)
    return future.adopt_copied_batches(plan.future_base, plan.future_pos, metas)


def _read_batch_metas(fd: int, start: int, end: int) -> list[BatchMeta]:
    """Index data of the whole batches between two positions, reading only their headers.

    Reads a small window at each batch start and jumps over the body, so a copy of large
    batches costs one small read per batch. Stops at the first thing that is not a batch.
    """
    metas: list[BatchMeta] = []
    pos = start
    while pos + BATCH_HEADER_SIZE <= end:
        buf = os.pread(fd, min(_HEADER_WINDOW, end - pos), pos)
        off = 0
        while len(buf) - off >= BATCH_HEADER_SIZE:
            hdr = parse_header(buf, off)
            size = hdr.batch_length + LOG_OVERHEAD
            if (
                hdr.magic != MAGIC_V2
                or hdr.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD
                or pos + off + size > end
                or hdr.last_offset_delta < 0
            ):
                return metas
            metas.append((hdr.last_offset, size, hdr.max_timestamp))
            off += size
        if off == 0:
            return metas
        pos += off
    return metas
