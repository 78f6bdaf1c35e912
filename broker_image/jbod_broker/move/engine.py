"""The replica move engine: the queue of moves between the log dirs of one broker and the
workers that run them (KIP-113, Kafka's ``ReplicaAlterLogDirsManager``).

This module is the lifecycle only: requests (:meth:`ReplicaMoveEngine.alter_replica_log_dir`,
:meth:`~ReplicaMoveEngine.cancel`, :meth:`~ReplicaMoveEngine.resume`), the queue and its
``num.replica.alter.log.dirs.threads`` workers (one partition each at a time), describe and
wait, directory failures (a failed directory stops the moves that touch it, with a reason
naming it) and shutdown. What a worker does with a move is elsewhere:

* :mod:`.task`: the move's record and its state machine (:data:`~.task.TRANSITIONS`; every
  state change goes through :func:`~.task.check_transition`);
* :mod:`.runner`: one move to its end, and what a stop means for its future folder
  (KAFKA-14824: removed, unless it is the only complete copy);
* :mod:`.copy_step` and :mod:`.reconcile`: the copy, kept a prefix of the source;
* :mod:`.swap`: the last bytes and the swap, which the log manager owns;
* :mod:`.recovery`: start-up (:func:`~.recovery.start_storage`), resuming moves found on disk.

A request creates the future log (``<tp>.<uuid>-future`` on the destination) and queues a
:class:`~.task.MoveTask`; ``-delete`` folders left by swaps are removed in the background.

Thread-safe. Lock order: the engine's submission lock, then the log manager's lock, then a
source log's lock, then a future log's lock. The engine's state lock (``_lock``) is only ever
held briefly and never while taking another lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum

from ..storage.errors import InsufficientSpaceError, KafkaError, KafkaStorageError
from ..storage.log import Log
from ..storage.log_manager import LogManager
from ..storage.names import TopicPartition
from ..wire import ANY_LOG_DIR, MoveState
from .copy import ALL_METHODS, CopyMethod, FileCopier
from .hooks import MoveHooks
from .runner import run_move
from .task import MoveContext, MoveTask, ReplicaLogDirInfo, describe_replica
from .throttle import Throttle

log = logging.getLogger(__name__)

DEFAULT_SWAP_LAG_BYTES = 0
_CANCEL_TIMEOUT_S = 30.0


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


class ReplicaMoveEngine:
    """Queues replica moves and runs them on worker threads (see the module docstring)."""

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
        self._ctx = MoveContext(log_manager, self.throttle, self.hooks, self._lock)
        self._tasks: dict[TopicPartition, MoveTask] = {}
        self._queue: deque[MoveTask] = deque()
        self._workers: list[threading.Thread] = []
        self._stopping = False
        self.bytes_by_method: dict[str, int] = {m.value: 0 for m in ALL_METHODS}
        self._end_listeners: list[Callable[[TopicPartition, MoveState], None]] = []
        log_manager.channel.add_listener(self._on_dir_offline)
        if start:
            self.start()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers (moves queued before this wait for them)."""
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
            queued = list(self._queue)
            workers = [] if self._stopping else self._stop_locked()
        for task in queued:  # outside the engine's lock (lock order)
            self._lm.release_room(task.tp, task.dest)
        self.throttle.wake()
        for w in workers:
            w.join(timeout)

    def _stop_locked(self) -> list[threading.Thread]:
        """Interrupt queued moves, ask running ones to stop; returns the workers to join."""
        self._stopping = True
        for task in self._queue:
            self._finish_locked(
                task, MoveState.INTERRUPTED, "the move engine shut down before it started"
            )
        self._queue.clear()
        for task in self._tasks.values():
            if not task.state.finished:
                task.request_stop(
                    "shutdown", "the move engine shut down; the copy resumes at the next start"
                )
        self._cv.notify_all()
        return list(self._workers)

    @property
    def throttle_rate(self) -> int | None:
        return self.throttle.rate

    def set_throttle_rate(self, rate: int | None) -> None:
        """``intra.broker.throttled.rate`` changed: applies to moves already running."""
        self.throttle.set_rate(rate)

    def add_end_listener(self, fn: Callable[[TopicPartition, MoveState], None]) -> None:
        """Call ``fn(tp, state)`` whenever a move ends (any finished state).

        It runs in the engine's thread under the engine's lock: it must only hand the news on
        (for instance with ``loop.call_soon_threadsafe``).
        """
        self._end_listeners.append(fn)

    # -- requests -------------------------------------------------------------------------

    def alter_replica_log_dir(self, tp: TopicPartition, log_dir: str) -> AlterResult:
        """Move ``tp`` to ``log_dir`` (an absolute path of a live log dir), or
        :data:`~jbod_broker.wire.ANY_LOG_DIR` to cancel a move. Raises
        :class:`InvalidLogDirError` (bad path), KafkaStorageError (offline directory or
        replica) or ReplicaNotAvailableError (the replica is not here yet: the destination is
        remembered and the replica will be created there)."""
        if log_dir == ANY_LOG_DIR:
            with self._submit_lock:
                self._lm.clear_preferred_dir(tp)
                cancelled = self._cancel_locked(tp, _CANCEL_TIMEOUT_S)
            return AlterResult.CANCELLED if cancelled else AlterResult.NOTHING_TO_DO
        dest = self._lm.resolve_live_dir(log_dir)
        with self._submit_lock:
            if self._stopping:
                raise MoveEngineStoppedError("the replica move engine is shut down")
            return self._request_move(tp, dest)

    def cancel(self, tp: TopicPartition, *, timeout: float | None = _CANCEL_TIMEOUT_S) -> bool:
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
                try:
                    lm.reserve_room(tp, future.log_dir)
                except InsufficientSpaceError as e:
                    # Its source is intact: drop the copy (its space comes back) and say so.
                    log.warning(
                        "not resuming replica move: %s",
                        e,
                        extra={"event": "replica_move_not_resumed", "partition": str(tp)},
                    )
                    self._abandon(tp, future)
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

    def run_deletions(self) -> int:
        """Delete queued ``-delete`` folders (serialised: the manager's queue is not)."""
        with self._delete_lock:
            try:
                return self._lm.run_deletions()
            except IndexError:  # someone else emptied the queue at the same time
                return 0

    # -- describe and wait ----------------------------------------------------------------

    def describe(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> list[ReplicaLogDirInfo]:
        """Current and future directory, lag, progress and state of each replica."""
        with self._lock:
            tasks = dict(self._tasks)
        currents, futures = self._lm.snapshot_logs()
        if partitions is None:
            wanted = sorted(set(currents) | set(futures) | set(tasks))
        else:
            wanted = sorted(set(partitions))
        now = time.time()
        return [
            describe_replica(tp, currents.get(tp), futures.get(tp), tasks.get(tp), now)
            for tp in wanted
        ]

    def status(self, tp: TopicPartition) -> ReplicaLogDirInfo:
        return self.describe([tp])[0]

    def wait(self, tp: TopicPartition, timeout: float | None = None) -> ReplicaLogDirInfo:
        """Wait until the latest move of ``tp`` has finished; TimeoutError otherwise."""
        with self._lock:
            task = self._tasks.get(tp)
        if task is not None and not task.done.wait(timeout):
            raise TimeoutError(f"the move of {tp} has not finished after {timeout}s")
        return self.status(tp)

    def wait_all(self, timeout: float | None = None) -> list[ReplicaLogDirInfo]:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            tasks = list(self._tasks.values())
        for task in tasks:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not task.done.wait(left):
                raise TimeoutError(f"the move of {task.tp} has not finished after {timeout}s")
        return self.describe([t.tp for t in tasks])

    # -- internals: requests (callers hold the submission lock) ---------------------------

    def _request_move(self, tp: TopicPartition, dest: str) -> AlterResult:
        lm = self._lm
        source = lm.current_log_or_prefer(tp, dest)
        task = self._active_task(tp)
        if task is not None and task.dest == dest:
            return AlterResult.IN_PROGRESS  # KAFKA-9087: never reset a running copy
        if source.log_dir != dest:
            # Room first (issue 13): a refused move changes nothing, not even a running one.
            lm.reserve_room(tp, dest)
        try:
            return self._start_move(tp, dest, source, task)
        except BaseException:
            lm.release_room(tp, dest)
            raise

    def _start_move(
        self, tp: TopicPartition, dest: str, source: Log, running: MoveTask | None
    ) -> AlterResult:
        lm = self._lm
        if running is not None:
            source = self._cancel_for_new_destination(tp)
        future = lm.get_future_log(tp)
        if source.log_dir == dest:
            if future is not None:
                self._abandon(tp, future)
            return AlterResult.NOTHING_TO_DO
        if future is not None and (future.log_dir != dest or future.offline):
            self._abandon(tp, future)
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

    def _cancel_for_new_destination(self, tp: TopicPartition) -> Log:
        """A new destination replaces the running move; returns the replica's log after."""
        self._cancel_locked(tp, _CANCEL_TIMEOUT_S)
        source = self._lm.get_log(tp)
        if source is None:
            raise KafkaStorageError(f"replica {tp} went offline during the request")
        return source

    def _abandon(self, tp: TopicPartition, future: Log) -> None:
        self._lm.abandon_future_log(tp, future)
        self.run_deletions()

    def _active_task(self, tp: TopicPartition) -> MoveTask | None:
        with self._lock:
            task = self._tasks.get(tp)
            return task if task is not None and not task.state.finished else None

    def _enqueue(
        self, tp: TopicPartition, dest: str, source_dir: str, future: Log, resumed: bool
    ) -> None:
        task = MoveTask(tp, dest, source_dir, future, resumed, FileCopier(self._copy_methods))
        with self._cv:
            if self._stopping:
                raise MoveEngineStoppedError("the replica move engine is shut down")
            self._tasks[tp] = task
            self._queue.append(task)
            self._cv.notify()

    def _cancel_locked(self, tp: TopicPartition, timeout: float | None) -> bool:
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
        future = self._lm.get_future_log(tp)
        if future is not None:
            self._abandon(tp, future)
        if task is not None and queued:
            self._lm.release_room(tp, task.dest)
            with self._lock:
                self._finish_locked(task, MoveState.CANCELLED, "cancelled before it started")
            log.info(
                "replica move cancelled",
                extra={"event": "replica_move_cancelled", "partition": str(tp)},
            )
        return queued or future is not None

    # -- internals: workers ---------------------------------------------------------------

    def _worker(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                task = self._queue.popleft()
                task.transition(MoveState.COPYING)
                task.started_at = time.time()
            self._run(task)

    def _run(self, task: MoveTask) -> None:
        state, reason = run_move(self._ctx, task, swap_lag_bytes=self.swap_lag_bytes)
        if state is not MoveState.DONE and self.background_deletions:
            self.run_deletions()  # a cancelled move's future folder is gone when cancel returns
        self._lm.release_room(task.tp, task.dest)  # before the end is seen: waiters find it gone
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

    def _finish_locked(self, task: MoveTask, state: MoveState, error: str | None) -> None:
        """End ``task`` in ``state`` (an allowed edge, or MoveTransitionError); the caller
        holds the state lock."""
        task.transition(state)
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
