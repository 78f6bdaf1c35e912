"""The replica move engine: moves a replica's log to another directory of the same broker while
the partition keeps taking appends (KIP-113, Kafka's ``ReplicaAlterLogDirsThread``).

A move, step by step:

1. :meth:`ReplicaMoveEngine.alter_replica_log_dir` checks the destination, creates the future
   log (``<tp>.<uuid>-future`` on the destination) and queues the move.
2. A worker (``num.replica.alter.log.dirs.threads`` of them, one partition each at a time)
   copies the source's segments into the future: a sealed segment whole, with its two indexes;
   the active one batch-aligned, from where the future ends. Bytes move with the kernel's
   zero-copy calls (:mod:`.copy`) through the one shared :class:`~.throttle.Throttle`. Source
   files are opened while the source log's lock is held, so retention deleting a segment
   cannot break a copy in flight; then the lock is released and appends go on.
3. Before each step the future is reconciled with the source by offsets and batch identity,
   never by segment layout (KAFKA-8002): a source that was truncated, got a new leader epoch
   (KAFKA-9654) or moved its log start offset makes the engine cut or restart the future, not
   fail the move.
4. Once the future is within ``swap_lag_bytes`` of the source, the worker takes the manager's
   lock and the partition's append lock (the source log's lock), copies the last bytes, carries
   the per-replica state over (log start offset, high watermark, leader epochs, other files:
   KAFKA-9263, KAFKA-15608), flushes, renames the source to ``-delete``, renames the future to
   the replica's name, fsyncs both directories, points the partition at the new log and sets
   the old one's ``successor`` (anyone still holding it is redirected), and releases.
5. ``-delete`` folders are removed in the background (:meth:`LogManager.run_deletions`).

States (:class:`MoveState`)::

    Queued -> Copying -> CatchingUp -> Swapping -> Done
       any unfinished state -> Failed | Cancelled | Interrupted (engine shut down)

A failure of either directory stops that move only, with a reason naming the directory; its
future folder is removed if its directory is still alive and the move is not retried
(KAFKA-14824). Start-up recovery is :func:`jbod_broker.move.recovery.start_storage`.

Thread-safe. Lock order: the engine's submission lock, then the log manager's lock, then a
source log's lock, then a future log's lock. The engine's state lock (``_lock``) is only ever
held briefly and never while taking another lock.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from ..storage.errors import (
    KafkaError,
    KafkaStorageError,
)
from ..storage.log import Log, LogSnapshot
from ..storage.log_manager import LogManager, SwapPoint
from ..storage.names import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TopicPartition,
    segment_file_name,
)
from ..storage.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, BatchHeader, parse_header
from ..storage.segment import BatchMeta, LogSegment
from ..wire import MoveState
from . import hooks as hk
from .copy import ALL_METHODS, CopyIOError, CopyMethod, FileCopier
from .hooks import MoveHooks
from .throttle import MAX_CHUNK, Throttle

log = logging.getLogger(__name__)

ANY = "any"
"""The destination that cancels a move (KIP-113): the broker may keep the replica anywhere."""

DEFAULT_SWAP_LAG_BYTES = 0
_MAX_STEP_BYTES = 64 * 1024 * 1024
_HEADER_WINDOW = 4096
_MAX_RECONCILE_ROUNDS = 10_000
_MAX_STALLED_STEPS = 200
_SWAP_CATCH_UP_STEPS = 1000
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
_TRANSIENT_SUFFIXES = (".tmp", CLEANED_SUFFIX, SWAP_SUFFIX, ".deleted")

StopKind = Literal["cancel", "fail", "shutdown"]


class AlterResult(StrEnum):
    """What an alter-replica-log-dir request did (the errors are raised instead)."""

    STARTED = "Started"
    RESUMED = "Resumed"
    """A future copy already on the destination (after a restart) is carried on."""
    IN_PROGRESS = "InProgress"
    """The same move is already running; nothing was changed (KAFKA-9087)."""
    NOTHING_TO_DO = "NothingToDo"
    CANCELLED = "Cancelled"


class MoveEngineStoppedError(KafkaError):
    kafka_error = "KAFKA_STORAGE_ERROR"


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


class _Stop(Exception):
    def __init__(self, kind: StopKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: StopKind = kind
        self.reason = reason


@dataclass(eq=False)
class _Task:
    tp: TopicPartition
    dest: str
    source_dir: str
    future: Log
    resumed: bool
    copier: FileCopier
    state: MoveState = MoveState.QUEUED
    error: str | None = None
    stop_kind: StopKind | None = None
    stop_reason: str | None = None
    committed: bool = False
    source_renamed: bool = False
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    copied_base: int = 0
    inflight: int = 0
    behind: int = 0
    moved: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def request_stop(self, kind: StopKind, reason: str) -> None:
        if self.stop_kind is None and not self.committed:
            self.stop_reason = reason
            self.stop_kind = kind

    def stopping(self) -> bool:
        return self.stop_kind is not None

    @property
    def copied(self) -> int:
        return self.copied_base + self.inflight

    @property
    def remaining(self) -> int:
        return max(0, self.behind - self.inflight)


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


class ReplicaMoveEngine:
    def __init__(
        self,
        log_manager: LogManager,
        *,
        threads: int | None = None,
        throttle_rate: int | None = None,
        throttle: Throttle | None = None,
        hooks: MoveHooks | None = None,
        copy_methods: Iterable[CopyMethod] = ALL_METHODS,
        swap_lag_bytes: int = DEFAULT_SWAP_LAG_BYTES,
        background_deletions: bool = True,
        start: bool = True,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1")
        self._lm = log_manager
        self.threads = threads if threads is not None else max(1, len(log_manager.dirs))
        self.throttle = throttle if throttle is not None else Throttle(throttle_rate)
        self.hooks = hooks if hooks is not None else MoveHooks.from_env()
        self._copy_methods = tuple(copy_methods)
        self.swap_lag_bytes = swap_lag_bytes
        self.background_deletions = background_deletions
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._submit_lock = threading.RLock()
        self._delete_lock = threading.Lock()
        self._tasks: dict[TopicPartition, _Task] = {}
        self._queue: deque[_Task] = deque()
        self._workers: list[threading.Thread] = []
        self._stopping = False
        self.bytes_by_method: dict[str, int] = {m.value: 0 for m in ALL_METHODS}
        self._end_listeners: list[Callable[[TopicPartition, MoveState], None]] = []
        log_manager.channel.add_listener(self._on_dir_offline)
        if start:
            self.start()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        with self._cv:
            if self._workers or self._stopping:
                return
            for i in range(self.threads):
                t = threading.Thread(target=self._worker, name=f"replica-move-{i}", daemon=True)
                t.start()
                self._workers.append(t)

    def shutdown(self, timeout: float | None = 30.0) -> None:
        """Stop the workers. Running copies stop at their next chunk and keep their future
        folders, which the next start resumes (the swap itself is never interrupted)."""
        with self._cv:
            if self._stopping:
                workers: list[threading.Thread] = []
            else:
                self._stopping = True
                for task in self._queue:
                    self._finish_locked(
                        task, MoveState.INTERRUPTED, "the move engine shut down before it started"
                    )
                self._queue.clear()
                for task in self._tasks.values():
                    if not task.state.finished:
                        task.request_stop(
                            "shutdown",
                            "the move engine shut down; the copy resumes at the next start",
                        )
                self._cv.notify_all()
                workers = list(self._workers)
        self.throttle.wake()
        for w in workers:
            w.join(timeout)

    @property
    def throttle_rate(self) -> int | None:
        return self.throttle.rate

    def set_throttle_rate(self, rate: int | None) -> None:
        """``intra.broker.throttled.rate`` changed: applies to moves already running."""
        self.throttle.set_rate(rate)

    # -- requests -------------------------------------------------------------------------

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str) -> AlterResult:
        """Move ``tp`` to ``log_dir`` (an absolute path of a live log dir), or ``"any"`` to
        cancel a move. Raises :class:`InvalidLogDirError` (bad path), KafkaStorageError
        (offline directory or replica) or ReplicaNotAvailableError (the replica is not here
        yet: the destination is remembered and the replica will be created there)."""
        lm = self._lm
        if log_dir == ANY:
            with self._submit_lock:
                lm.clear_preferred_dir(tp)
                cancelled = self._cancel_locked(tp, 30.0)
            return AlterResult.CANCELLED if cancelled else AlterResult.NOTHING_TO_DO
        dest = lm.resolve_live_dir(log_dir)
        with self._submit_lock:
            if self._stopping:
                raise MoveEngineStoppedError("the replica move engine is shut down")
            source = lm.current_log_or_prefer(tp, dest)
            task = self._active_task(tp)
            if task is not None:
                if task.dest == dest:
                    return AlterResult.IN_PROGRESS  # KAFKA-9087: never reset a running copy
                self._cancel_locked(tp, 30.0)  # a new destination replaces the old move
                now = lm.get_log(tp)
                if now is None:
                    raise KafkaStorageError(f"replica {tp} went offline during the request")
                source = now
            future = lm.get_future_log(tp)
            if source.log_dir == dest:
                if future is not None:
                    lm.abandon_future_log(tp, future)
                    self.run_deletions()
                return AlterResult.NOTHING_TO_DO
            if future is not None and (future.log_dir != dest or future.offline):
                lm.abandon_future_log(tp, future)
                self.run_deletions()
                future = None
            resumed = future is not None
            if future is None:
                future = lm.create_future_log(tp, dest)
            self._enqueue(tp, dest, source.log_dir, future, resumed)
            log.info(
                "replica move queued",
                extra={
                    "event": "replica_move_queued",
                    "partition": str(tp),
                    "source_dir": source.log_dir,
                    "dest_dir": dest,
                    "resumed": resumed,
                },
            )
            return AlterResult.RESUMED if resumed else AlterResult.STARTED

    submit = alter_replica_log_dir

    def alter_replica_log_dirs(
        self, assignments: Mapping[TopicPartition, str]
    ) -> dict[TopicPartition, AlterResult | KafkaError]:
        """AlterReplicaLogDirs: each partition on its own, an error per partition."""
        out: dict[TopicPartition, AlterResult | KafkaError] = {}
        for tp, d in assignments.items():
            try:
                out[tp] = self.alter_replica_log_dir(tp, d)
            except KafkaError as e:
                out[tp] = e
        return out

    def cancel(self, tp: TopicPartition, *, timeout: float | None = 30.0) -> bool:
        """Cancel the move of ``tp`` and remove its future folder; ``False`` if there was
        none, or it had already reached the swap's renames (it then completes)."""
        with self._submit_lock:
            return self._cancel_locked(tp, timeout)

    def resume(self, moves: Mapping[TopicPartition, str]) -> list[TopicPartition]:
        """Carry on moves found at start-up (:attr:`StartupReport.resumable_moves`)."""
        resumed: list[TopicPartition] = []
        lm = self._lm
        with self._submit_lock:
            for tp in sorted(moves):
                source, future = lm.get_log(tp), lm.get_future_log(tp)
                if source is None or future is None or self._active_task(tp) is not None:
                    continue
                self._enqueue(tp, future.log_dir, source.log_dir, future, True)
                resumed.append(tp)
                log.warning(
                    "resuming replica move",
                    extra={
                        "event": "replica_move_resumed",
                        "partition": str(tp),
                        "dest_dir": future.log_dir,
                    },
                )
        return resumed

    def wait(self, tp: TopicPartition, timeout: float | None = None) -> ReplicaLogDirInfo:
        """Wait until the latest move of ``tp`` has finished; TimeoutError otherwise."""
        with self._lock:
            task = self._tasks.get(tp)
        if task is not None and not task.done.wait(timeout):
            raise TimeoutError(f"the move of {tp} has not finished after {timeout}s")
        return self.describe([tp])[0]

    def wait_all(self, timeout: float | None = None) -> list[ReplicaLogDirInfo]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            tasks = list(self._tasks.values())
        for task in tasks:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not task.done.wait(left):
                raise TimeoutError(f"the move of {task.tp} has not finished after {timeout}s")
        return self.describe([t.tp for t in tasks])

    def run_deletions(self) -> int:
        """Delete queued ``-delete`` folders (serialised: the manager's queue is not)."""
        with self._delete_lock:
            try:
                return self._lm.run_deletions()
            except IndexError:  # someone else emptied the queue at the same time
                return 0

    # -- describe -------------------------------------------------------------------------

    def describe(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> list[ReplicaLogDirInfo]:
        """Current and future directory, lag, progress and state of each replica."""
        lm = self._lm
        with self._lock:
            tasks = dict(self._tasks)
        currents, futures = lm.snapshot_logs()
        if partitions is None:
            wanted = sorted(set(currents) | set(futures) | set(tasks))
        else:
            wanted = sorted(set(partitions))
        now = time.time()
        out: list[ReplicaLogDirInfo] = []
        for tp in wanted:
            cur, fut, task = currents.get(tp), futures.get(tp), tasks.get(tp)
            cs, fs = _snapshot(cur), _snapshot(fut)
            lag = max(0, cs.log_end_offset - fs.log_end_offset) if cs and fs else 0
            if task is not None:
                copied = task.copied
                total = copied + task.remaining
                if task.state is MoveState.DONE:
                    copied = total = max(copied, cs.size if cs else 0)
                elapsed = (task.finished_at or now) - (task.started_at or now)
                rate = task.moved / elapsed if elapsed > 0 else 0.0
                eta: float | None = None
                if not task.state.finished and rate > 0:
                    eta = task.remaining / rate
                out.append(
                    ReplicaLogDirInfo(
                        tp.topic,
                        tp.partition,
                        cur.log_dir if cur else None,
                        fut.log_dir if fut else None,
                        lag,
                        copied,
                        total,
                        task.state,
                        task.error,
                        rate,
                        eta,
                        task.started_at,
                        task.finished_at,
                        task.copier.method.value if task.started_at else None,
                    )
                )
                continue
            out.append(
                ReplicaLogDirInfo(
                    tp.topic,
                    tp.partition,
                    cur.log_dir if cur else None,
                    fut.log_dir if fut else None,
                    lag,
                    fs.size if fs else 0,
                    cs.size if cs else 0,
                    None,
                    None,
                    0.0,
                    None,
                    None,
                    None,
                    None,
                )
            )
        return out

    def status(self, tp: TopicPartition) -> ReplicaLogDirInfo:
        return self.describe([tp])[0]

    # -- internals: queue -----------------------------------------------------------------

    def _active_task(self, tp: TopicPartition) -> _Task | None:
        with self._lock:
            task = self._tasks.get(tp)
            return task if task is not None and not task.state.finished else None

    def _enqueue(
        self, tp: TopicPartition, dest: str, source_dir: str, future: Log, resumed: bool
    ) -> None:
        task = _Task(tp, dest, source_dir, future, resumed, FileCopier(self._copy_methods))
        with self._cv:
            if self._stopping:
                raise MoveEngineStoppedError("the replica move engine is shut down")
            self._tasks[tp] = task
            self._queue.append(task)
            self._cv.notify()

    def _cancel_locked(self, tp: TopicPartition, timeout: float | None) -> bool:
        lm = self._lm
        with self._lock:
            task = self._tasks.get(tp)
            running = task is not None and not task.state.finished
            queued = running and task is not None and task.state is MoveState.QUEUED
            if task is not None and queued:
                self._queue.remove(task)
            elif task is not None and running:
                task.request_stop("cancel", "cancelled by request")
        if task is not None and running and not queued:
            self.throttle.wake()
            if not task.done.wait(timeout):
                raise TimeoutError(f"the move of {tp} did not stop within {timeout}s")
            return task.state is MoveState.CANCELLED
        future = lm.get_future_log(tp)
        if future is not None:
            lm.abandon_future_log(tp, future)
            self.run_deletions()
        if task is not None and queued:
            with self._lock:
                self._finish_locked(task, MoveState.CANCELLED, "cancelled before it started")
            log.info(
                "replica move cancelled",
                extra={"event": "replica_move_cancelled", "partition": str(tp)},
            )
        return queued or future is not None

    def _finish_locked(self, task: _Task, state: MoveState, error: str | None) -> None:
        task.state = state
        task.error = error
        task.finished_at = time.time()
        task.inflight = 0
        for method, n in task.copier.bytes_by_method.items():
            self.bytes_by_method[method.value] += n
        task.copier.bytes_by_method = dict.fromkeys(ALL_METHODS, 0)
        task.done.set()
        for fn in self._end_listeners:
            try:
                fn(task.tp, state)
            except Exception:  # a listener must not break the engine
                log.exception("move end listener failed")

    def add_end_listener(self, fn: Callable[[TopicPartition, MoveState], None]) -> None:
        """Call ``fn(tp, state)`` whenever a move ends (any finished state).

        It runs in the engine's thread under the engine's lock: it must only hand the news on
        (for instance with ``loop.call_soon_threadsafe``).
        """
        self._end_listeners.append(fn)

    def _set_state(self, task: _Task, state: MoveState) -> None:
        if task.state is not state:
            with self._lock:
                task.state = state

    def _on_dir_offline(self, d: str, reason: str) -> None:
        # Runs in the failing thread, maybe under a log's lock: only the engine's own lock here.
        with self._lock:
            for task in self._tasks.values():
                if task.state.finished:
                    continue
                if task.source_dir == d:
                    task.request_stop("fail", f"source log dir {d} failed: {reason}")
                elif task.dest == d:
                    task.request_stop("fail", f"destination log dir {d} failed: {reason}")
        self.throttle.wake()

    def _worker(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                task = self._queue.popleft()
                task.state = MoveState.COPYING
                task.started_at = time.time()
            self._run(task)

    # -- internals: one move --------------------------------------------------------------

    def _run(self, task: _Task) -> None:
        tp = task.tp
        kind: StopKind | None = None
        reason: str | None = None
        try:
            source = self._lm.get_log(tp)
            if source is None or source.log_dir != task.source_dir:
                raise _Stop("cancel", f"replica {tp} is no longer in {task.source_dir}")
            self._copy_loop(task, source, task.future)
            self._swap(task, source, task.future)
        except _Stop as s:
            kind, reason = s.kind, s.reason
        except KafkaError as e:
            kind, reason = self._explain(task, e)
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
            if task.committed and self._lm.channel.is_offline(task.source_dir):
                # The source died during the swap, after the future had caught up and been
                # flushed: that copy is now the only whole one. Start-up recovery decides.
                log.error(
                    "source of %s failed during the swap; keeping its complete copy %s",
                    tp,
                    task.future.dir_path,
                    extra={"event": "replica_move_kept_future", "partition": str(tp)},
                )
            else:
                self._drop_future(task, reason or "")
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
        if state is not MoveState.DONE and self.background_deletions:
            self.run_deletions()  # a cancelled move's future folder is gone when cancel returns
        with self._lock:
            if state is MoveState.DONE:
                task.copied_base = task.future.size
                task.behind = 0
            self._finish_locked(task, state, reason)
        if state is MoveState.DONE:
            # Not on the swap's path: the destination's checkpoints already name the new log
            # (written before the renames); these bring both directories up to date.
            for d in (task.dest, task.source_dir):
                with contextlib.suppress(KafkaError):
                    self._lm.write_dir_checkpoints(d)
            if self.background_deletions:
                self.run_deletions()

    def _drop_future(self, task: _Task, reason: str) -> None:
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
            self._lm.abandon_future_log(task.tp, task.future)
        except KafkaError as e:
            log.warning(
                "could not remove future folder of %s after '%s': %s",
                task.tp,
                reason,
                e,
                extra={"event": "replica_move_cleanup_failed", "partition": str(task.tp)},
            )

    def _explain(self, task: _Task, e: Exception) -> tuple[StopKind, str]:
        """Name the directory that failed; a replica deleted under the move is a cancel."""
        lm = self._lm
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

    def _guard(self, d: str, what: str) -> contextlib.AbstractContextManager[None]:
        return self._lm.channel.guard(d, what)

    def _check(self, task: _Task, source: Log, future: Log) -> None:
        if task.stop_kind is not None:
            raise _Stop(task.stop_kind, task.stop_reason or task.stop_kind)
        lm = self._lm
        for d, side in ((task.source_dir, "source"), (task.dest, "destination")):
            r = lm.channel.reason(d)
            if r is not None:
                raise _Stop("fail", f"{side} log dir {d} failed: {r}")
        if source.successor is not None or lm.get_log(task.tp) is not source:
            raise _Stop("cancel", f"replica {task.tp} was deleted or replaced during the move")
        if lm.get_future_log(task.tp) is not future or future.offline:
            raise _Stop("cancel", f"the future log of {task.tp} was removed during the move")

    def _copy_loop(self, task: _Task, source: Log, future: Log) -> None:
        stalled = 0
        last = (-1, -1)
        while True:
            self._check(task, source, future)
            behind = self._step(task, source, future, throttled=True)
            if behind <= self.swap_lag_bytes:
                return
            mark = (future.log_end_offset, future.size)
            stalled = stalled + 1 if mark == last else 0
            last = mark
            if stalled >= _MAX_STALLED_STEPS:
                raise _Stop("fail", f"the copy of {task.tp} makes no progress")

    def _step(self, task: _Task, source: Log, future: Log, *, throttled: bool) -> int:
        """Copy the next piece; returns the source bytes still beyond the future's end."""
        self._reconcile(task, source, future)
        limit = self.throttle.chunk_size() if throttled else _MAX_STEP_BYTES
        plan = self._plan(task, source, future, limit)
        if plan is None:
            task.behind = 0
            return 0
        task.behind = plan.behind
        try:
            if plan.whole:
                copied = self._copy_whole(task, source, future, plan, throttled)
            else:
                copied = self._copy_tail(task, future, plan, throttled)
        finally:
            for fd in plan.fds.values():
                os.close(fd)
            with future.lock:
                task.copied_base = future.size
            task.inflight = 0
        task.behind = max(0, plan.behind - copied)
        return task.behind

    # -- reconcile: the future must be a prefix of the source -----------------------------

    def _reconcile(self, task: _Task, source: Log, future: Log) -> None:
        """Cut or restart the future until it is a prefix of the source, by offsets and batch
        identity (KAFKA-8002, KAFKA-9654): a truncated source, a new leader epoch or a moved
        log start offset adjusts the copy instead of failing it."""
        tp = task.tp
        for _ in range(_MAX_RECONCILE_ROUNDS):
            with future.lock:
                self._check(task, source, future)
                with self._guard(task.dest, f"read future log of {tp}"):
                    f_last = _last_batch(future)
                f_leo, f_size, f_segs = future.log_end_offset, future.size, len(future.segments)
            with source.lock:
                self._check(task, source, future)
                with self._guard(task.source_dir, f"read {tp} for a move"):
                    s_lso, s_leo = source.log_start_offset, source.log_end_offset
                    if f_size == 0 or f_leo <= s_lso:
                        start = _segment_holding(source, s_lso).base_offset
                        if f_size == 0 and f_segs == 1 and f_leo == start:
                            return
                        action, offset = "restart", start
                    elif f_leo > s_leo:
                        action, offset = "truncate", s_leo
                    else:
                        assert f_last is not None
                        if _same(_batch_containing(source, f_last.last_offset), f_last):
                            return
                        # Jump to where the source's log for that epoch ends (KIP-101), then
                        # check batch by batch from there.
                        action, offset = "truncate", f_last.base_offset
                        epoch, end = source.epochs.end_offset_for(
                            f_last.partition_leader_epoch, s_leo
                        )
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
        raise _Stop("fail", f"the future log of {tp} cannot be reconciled with its source")

    # -- plan: what to copy next, with source descriptors opened under the lock -----------

    def _plan(self, task: _Task, source: Log, future: Log, limit: int) -> _Plan | None:
        """What to copy next: a whole sealed segment, or up to ``limit`` bytes of batches
        from where the future ends; ``None`` when the future has caught up."""
        tp = task.tp
        while True:
            with future.lock:
                fa = future.active
                f_leo, f_base, f_pos = fa.next_offset, fa.base_offset, fa.size
                f_only = len(future.segments) == 1
            with source.lock:
                self._check(task, source, future)
                with self._guard(task.source_dir, f"open {tp} for a move"):
                    if f_leo >= source.log_end_offset:
                        return None
                    seg = _segment_holding(source, f_leo)
                    if f_pos > 0 and seg.base_offset == f_leo:
                        plan = None  # mirror the source's roll first, then plan again
                    else:
                        plan = self._open_plan(source, seg, f_leo, f_base, f_pos, f_only)
                        if not plan.whole:
                            # At least one whole batch per step: a batch larger than the
                            # throttle's chunk would otherwise never be copied (the partial
                            # bytes are cut off again when the future adopts whole batches).
                            first = seg.find_batch(f_leo)
                            first_end = first[0] + first[1].size_in_bytes if first else plan.end
                            plan.end = min(plan.end, max(plan.start + limit, first_end))
                        if task.state in (MoveState.COPYING, MoveState.CATCHING_UP):
                            self._set_state(
                                task, MoveState.COPYING if plan.whole else MoveState.CATCHING_UP
                            )
                        return plan
            future.roll()

    def _open_plan(
        self, source: Log, seg: LogSegment, f_leo: int, f_base: int, f_pos: int, f_only: bool
    ) -> _Plan:
        segs = source.segments
        after = sum(s.size for s in segs[segs.index(seg) + 1 :])
        sealed = seg is not segs[-1]
        whole = (
            sealed
            and f_pos == 0
            and (
                seg.base_offset == f_base or (f_only and seg.base_offset < f_base < seg.next_offset)
            )
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

    # -- copy -----------------------------------------------------------------------------

    def _copy_range(
        self,
        task: _Task,
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
            if task.stop_kind is not None:
                raise _Stop(task.stop_kind, task.stop_reason or task.stop_kind)
            n = min(length - done, self.throttle.chunk_size() if throttled else MAX_CHUNK)
            if throttled:
                if not self.throttle.acquire(n, task.stopping):
                    continue  # stopped while waiting: raised above
            else:
                self.throttle.charge(n)
            try:
                got = task.copier.copy(src_fd, dst_fd, src_off + done, dst_off + done, n)
            except CopyIOError as e:
                d = task.source_dir if e.side == "source" else task.dest
                with self._guard(d, f"copy {task.tp} ({e.side} side)"):
                    raise e.error from None
            done += got
            task.moved += got
            if progress:
                task.inflight += got
            if throttled:  # not in the swap, which holds the append lock
                self.hooks.reach(hk.MID_COPY, task.tp)
            if got < n:
                break  # the source file ended early: it was truncated under us
        return done

    def _copy_whole(
        self, task: _Task, source: Log, future: Log, plan: _Plan, throttled: bool
    ) -> int:
        tp = task.tp
        staged: dict[str, str] = {}
        try:
            for suffix in _SEGMENT_SUFFIXES:
                # Under the future's lock: a deletion of the replica renames its folder.
                with future.lock:
                    self._check(task, source, future)
                    tmp = os.path.join(
                        future.dir_path, segment_file_name(plan.base_offset, suffix) + ".tmp"
                    )
                    with self._guard(task.dest, f"create copy of {tp} segment"):
                        dst = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
                staged[suffix] = tmp
                try:
                    size = plan.sizes[suffix]
                    n = self._copy_range(
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
                        with self._guard(task.dest, f"check copy of {tp} segment"):
                            head = os.pread(dst, BATCH_HEADER_SIZE, plan.last_pos)
                        if len(head) < BATCH_HEADER_SIZE or not _same(
                            parse_header(head), plan.last
                        ):
                            return 0
                finally:
                    os.close(dst)
            # The source must still hold the last batch copied: if it was truncated and
            # rewritten during the copy, the bytes may be a mix (plan again).
            with source.lock:
                self._check(task, source, future)
                assert plan.last is not None
                with self._guard(task.source_dir, f"check {tp} after a copy"):
                    intact = _same(_batch_containing(source, plan.last.last_offset), plan.last)
            if not intact:
                return 0
            future.attach_copied_segment(plan.base_offset, staged)
            staged = {}
            return plan.sizes[LOG_SUFFIX]
        finally:
            if staged and not self._lm.channel.is_offline(task.dest):
                for tmp in staged.values():
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)

    def _copy_tail(self, task: _Task, future: Log, plan: _Plan, throttled: bool) -> int:
        tp = task.tp
        with future.lock:
            fa = future.active
            if fa.base_offset != plan.future_base or fa.size != plan.future_pos:
                return 0
            if self._lm.get_future_log(tp) is not future or future.offline:
                raise _Stop("cancel", f"the future log of {tp} was removed during the move")
            with self._guard(task.dest, f"open future segment of {tp}"):
                dst = os.open(fa.log_path, os.O_RDWR)
        try:
            n = self._copy_range(
                task,
                plan.fds[LOG_SUFFIX],
                dst,
                plan.start,
                plan.future_pos,
                plan.end - plan.start,
                throttled=throttled,
                progress=True,
            )
            with self._guard(task.dest, f"read back copied batches of {tp}"):
                metas = _read_batch_metas(dst, plan.future_pos, plan.future_pos + n)
        finally:
            os.close(dst)
        return future.adopt_copied_batches(plan.future_base, plan.future_pos, metas)

    # -- swap -----------------------------------------------------------------------------

    def _swap(self, task: _Task, source: Log, future: Log) -> None:
        """The log manager swaps (:meth:`LogManager.replace_current_with_future_log`); the
        engine copies the last bytes under its locks and follows its points."""
        tp = task.tp

        def catch_up() -> None:
            self._set_state(task, MoveState.SWAPPING)
            self.hooks.reach(hk.AFTER_LOCK, tp)
            self._check(task, source, future)
            for _ in range(_SWAP_CATCH_UP_STEPS):
                if self._step(task, source, future, throttled=False) == 0:
                    break
            self._reconcile(task, source, future)

        def on_point(point: SwapPoint) -> None:
            if point is SwapPoint.COMMIT:
                self._check(task, source, future)  # the last point where a cancel wins
            elif point is SwapPoint.BEFORE_RENAMES:
                with self._lock:
                    task.committed = True
                self.hooks.reach(hk.BEFORE_RENAMES, tp)
            elif point is SwapPoint.SOURCE_RENAMED:
                task.source_renamed = True
            elif point is SwapPoint.BETWEEN_RENAMES:
                self.hooks.reach(hk.BETWEEN_RENAMES, tp)
            elif point is SwapPoint.SOURCE_RESTORED:
                task.source_renamed = False
            elif point is SwapPoint.AFTER_RENAMES:
                task.source_renamed = False
                self.hooks.reach(hk.AFTER_RENAMES, tp)

        if not self._lm.replace_current_with_future_log(
            tp, source, future, catch_up=catch_up, on_point=on_point
        ):
            raise _Stop("fail", f"the future log of {tp} could not catch up under the lock")
        log.info(
            "replica moved",
            extra={
                "event": "replica_moved",
                "partition": str(tp),
                "source_dir": task.source_dir,
                "dest_dir": task.dest,
            },
        )
        self.hooks.reach(hk.AFTER_SWAP, tp)


# -- helpers (callers hold the log's lock and its directory's guard) ---------------------------


def _snapshot(lg: Log | None) -> LogSnapshot | None:
    return lg.snapshot() if lg is not None else None


def _segment_holding(lg: Log, offset: int) -> LogSegment:
    """The segment whose offsets include ``offset`` (or the first after it: a gap)."""
    segs = lg.segments
    i = max(0, bisect.bisect_right(segs, offset, key=lambda s: s.base_offset) - 1)
    if segs[i].next_offset <= offset and i + 1 < len(segs):
        i += 1
    return segs[i]


def _batch_containing(lg: Log, offset: int) -> BatchHeader | None:
    seg = _segment_holding(lg, offset)
    found = seg.find_batch(offset)
    if found is None or found[1].base_offset > offset:
        return None
    return found[1]


def _last_batch(lg: Log) -> BatchHeader | None:
    for seg in reversed(lg.segments):
        if seg.size == 0:
            continue
        last = None
        for _pos, hdr in seg.scan(seg.index.last_position):
            last = hdr
        return last
    return None


def _same(a: BatchHeader | None, b: BatchHeader | None) -> bool:
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
