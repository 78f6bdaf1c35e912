"""The server's view of the log-dir move engine: wire types in, wire types out.

The engine (``jbod_broker.move``) is thread-based and knows nothing of HTTP; this adapter builds
it from the broker's settings (:class:`~jbod_broker.config.BrokerConfig`), owns its lifetime
inside the broker (start-up through :func:`~jbod_broker.move.recovery.start_storage`) and
translates its descriptions into the API's models.

Thread-safety: used from the event loop (blocking calls go to an executor); the engine's end
listener runs on a move worker and only hands the news to each waiter's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from . import wire
from .config import BrokerConfig
from .move.engine import ReplicaMoveEngine
from .move.recovery import start_storage
from .storage.log_manager import LogManager, StartupReport
from .storage.names import TopicPartition
from .wire import MoveState


class MoveService:
    def __init__(self, logs: LogManager, config: BrokerConfig) -> None:
        self._logs = logs
        self.engine = ReplicaMoveEngine(
            logs,
            threads=config.move_threads,
            throttle_rate=config.intra_broker_throttled_rate or None,
            start=False,
        )
        self._waiters: list[_Waiter] = []
        self.engine.add_end_listener(self._on_end)

    def start_storage(self) -> StartupReport:
        """Open the log dirs and queue the moves found on disk (:func:`start_storage`, the one
        start-up path); they run once :meth:`start` starts the workers. Leftover ``-delete``
        folders are left to the broker's periodic :meth:`run_deletions`."""
        return start_storage(self._logs, self.engine, run_deletions=False)

    def start(self) -> None:
        self.engine.start()

    def shutdown(self) -> None:
        self.engine.shutdown()

    def alter(self, tp: TopicPartition, log_dir: str) -> str:
        """Raises the engine's StorageErrors (bad path, offline dir, replica not here yet)."""
        return self.engine.alter_replica_log_dir(tp, log_dir).value

    def forget(self, tp: TopicPartition) -> None:
        """The replica is being stopped or deleted: cancel its move first."""
        self.engine.cancel(tp)

    def describe(self, tps: Iterable[TopicPartition] | None) -> list[wire.ReplicaLogDirInfo]:
        return [
            wire.ReplicaLogDirInfo(
                topic=i.topic,
                partition=i.partition,
                current_log_dir=i.current_dir,
                future_log_dir=i.future_dir,
                future_offset_lag=i.future_offset_lag,
                bytes_copied=i.bytes_copied,
                bytes_total=i.bytes_total,
                state=wire.MoveState.NONE if i.state is None else i.state,
                error=i.error,
                rate_bytes_per_sec=round(i.rate_bytes_per_sec, 1),
                eta_seconds=None if i.eta_seconds is None else round(i.eta_seconds, 1),
            )
            for i in self.engine.describe(tps)
        ]

    async def wait_for_end(self, tps: list[TopicPartition] | None, timeout: float) -> None:
        """Return when one of ``tps`` (any replica if None) is not moving, or after ``timeout``.

        The long poll behind describe-replica-log-dirs ``wait_ms``: the operator learns that a
        move ended when it ends, instead of on its next poll. A replica that is not moving now
        (done, failed, unknown to the engine) ends the wait at once.
        """
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, loop.create_future(), None if tps is None else set(tps))
        self._waiters.append(waiter)  # before the check: a move ending now still wakes us
        try:
            if any(i.state is None or i.state.finished for i in self.engine.describe(tps)):
                return
            await asyncio.wait_for(asyncio.shield(waiter.future), timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters.remove(waiter)

    def _on_end(self, tp: TopicPartition, state: MoveState) -> None:
        # The engine's thread, under its lock: only hand the news to each waiter's loop.
        for w in list(self._waiters):
            if w.tps is None or tp in w.tps:
                w.loop.call_soon_threadsafe(_wake, w.future)

    def set_rate(self, rate: int) -> None:
        self.engine.set_throttle_rate(rate or None)

    @property
    def rate(self) -> int:
        return self.engine.throttle_rate or 0

    def run_deletions(self) -> int:
        return self.engine.run_deletions()

    @property
    def bytes_copied(self) -> int:
        return sum(self.engine.bytes_by_method.values())

    def _running(self) -> list[float]:
        return [
            i.rate_bytes_per_sec
            for i in self.engine.describe()
            if i.state is not None and not i.state.finished
        ]

    @property
    def current_rate(self) -> float:
        return sum(self._running())

    @property
    def in_progress(self) -> int:
        return len(self._running())


@dataclass(slots=True)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    tps: set[TopicPartition] | None


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


__all__ = ["MoveService"]
