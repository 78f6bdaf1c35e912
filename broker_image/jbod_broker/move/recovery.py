"""Start-up: load the log directories, resume interrupted moves, delete leftovers.

:func:`start_storage` is the broker's one start-up path for its storage: the server calls it
(through :meth:`jbod_broker.moves.MoveService.start_storage`, before its workers start) and so
do the tests. :meth:`LogManager.startup` applies KIP-113's rules to what it finds on disk:

* a replica folder and its ``-future`` copy, both on good directories: the move resumes
  (:attr:`StartupReport.resumable_moves`, handed to :meth:`ReplicaMoveEngine.resume` here);
* only the ``-future`` copy and no bad directory: it is renamed into place (the crash came
  after the source became ``-delete``);
* only the ``-future`` copy while a directory is bad: the source may be on the bad one, so the
  replica is offline and the copy is left alone (never promote a stale copy, KAFKA-16082);
* ``-delete`` folders: deleted (here, or by the caller's background deletions);
* two current copies of one replica: the one the recovery checkpoints vouch for is kept, the
  other quarantined as ``-stray``, and the report says so.

Thread-safety: called once, before the broker serves; the engine's methods are thread-safe and
its workers may already run (resumed moves are queued either way).
"""

from __future__ import annotations

import logging

from ..storage.log_manager import LogManager, StartupReport
from .engine import ReplicaMoveEngine

log = logging.getLogger(__name__)


def start_storage(
    log_manager: LogManager, engine: ReplicaMoveEngine, *, run_deletions: bool = True
) -> StartupReport:
    """Start the log manager, queue the moves it found (noted in the report) and, unless
    ``run_deletions`` is false (a caller that deletes in the background), delete the
    ``-delete`` folders now."""
    report = log_manager.startup()
    for tp in engine.resume(report.resumable_moves):
        report.note(f"{tp}: resuming the move to {report.resumable_moves[tp]}")
    if run_deletions:
        deleted = engine.run_deletions()
        if deleted:
            log.info(
                "deleted leftover folders",
                extra={"event": "log_startup_deletions", "count": deleted},
            )
    return report
