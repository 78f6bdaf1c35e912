"""The one path every disk operation takes (Kafka's ``LogDirFailureChannel``).

KIP-112: an I/O error on a directory must not bring the broker down. Every call that touches a
log directory runs inside :meth:`LogDirFailureChannel.guard`; an ``OSError`` there marks the
directory offline (once), tells every listener, and surfaces to the caller as a
:class:`KafkaStorageError` that names the directory. Two kinds of ``OSError`` say nothing about
the disk and leave it online: the process's own shortage of open files or memory
(:data:`RESOURCE_SHORTAGE`, always: issue 14) and, where the caller says so, a full disk
(:data:`OUT_OF_SPACE`, a move's own writes: issue 13). Listeners (the log manager, the server)
take the replicas on that directory offline and report to the controller.

Thread-safe: guard() may be entered from request handlers, move workers and the scheduler.
The directory is offline the moment the error is seen (every later guard() refuses it), but
the listeners run on the channel's own handler thread, like Kafka's LogDirFailureHandler: the
failing thread may hold a log's lock, and a listener takes the log manager's lock, so running
listeners inline would invert the manager-then-log lock order and deadlock.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .errors import InsufficientSpaceError, KafkaStorageError, ResourceShortageError

log = logging.getLogger(__name__)

OfflineListener = Callable[[str, str], None]

OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errnos of a full filesystem (or a full quota)."""


RESOURCE_SHORTAGE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})
"""The errnos of a process (or host) out of open files or kernel memory: never a disk failure.

Issue 14: EMFILE taken for a broken disk took every log dir offline and stopped the broker, and
the restart, hitting it again while loading, stopped again. The disk is fine; the call that met
the shortage is refused (:class:`ResourceShortageError`) and may be retried."""

_RESOURCE_NAMES = {
    errno.EMFILE: "the broker process has too many open files (its RLIMIT_NOFILE is reached)",
    errno.ENFILE: "the host has too many open files (fs.file-max is reached)",
    errno.ENOMEM: "the kernel is out of memory",
}


def is_space_error(e: BaseException) -> bool:
    """Whether ``e`` says there is no room left (the disk is full, not broken)."""
    return isinstance(e, OSError) and e.errno in OUT_OF_SPACE


def is_resource_error(e: BaseException) -> bool:
    """Whether ``e`` says the process ran out of open files or memory (the disk is fine)."""
    return isinstance(e, OSError) and e.errno in RESOURCE_SHORTAGE


def resource_shortage(what: str, e: OSError) -> ResourceShortageError:
    """The refusal of one disk call that met the process's shortage; the directory stays online."""
    where = f" ({e.filename})" if e.filename else ""
    why = _RESOURCE_NAMES.get(e.errno or 0, os.strerror(e.errno or 0))
    return ResourceShortageError(
        f"{what}: {why}: {os.strerror(e.errno or 0)}{where}; refused, no log dir is affected"
    )


def shortage(dir_path: str, what: str, e: OSError) -> InsufficientSpaceError:
    """A move's own write ran out of space: that move's failure, not the directory's.

    Issue 13: an ENOSPC raised by a move's writes into its ``-future`` folder ends the move
    (the engine removes the folder) and leaves the directory online with its other replicas;
    only an ENOSPC on a current replica's write is a disk failure (KIP-112).
    """
    where = f" ({e.filename})" if e.filename else ""
    return InsufficientSpaceError(
        f"log dir {dir_path} ran out of space: {what}: {os.strerror(e.errno or 0)}{where}"
    )


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, str] = {}
        self._listeners: list[OfflineListener] = []
        self._events: queue.Queue[tuple[str, str]] = queue.Queue()
        self._handler: threading.Thread | None = None

    def add_listener(self, listener: OfflineListener) -> None:
        """``listener(dir_path, reason)`` runs once per directory, in the failing thread."""
        with self._lock:
            self._listeners.append(listener)

    def is_offline(self, dir_path: str) -> bool:
        return dir_path in self._offline

    def offline_dirs(self) -> dict[str, str]:
        with self._lock:
            return dict(self._offline)

    def reason(self, dir_path: str) -> str | None:
        return self._offline.get(dir_path)

    def mark_offline(self, dir_path: str, reason: str, *, wait: bool = True) -> None:
        """Take ``dir_path`` offline now; listeners run on the handler thread.

        ``wait`` blocks until they have run: only for callers that hold no log or manager
        lock (tests, start-up). The failure guard passes ``wait=False``.
        """
        with self._lock:
            if dir_path in self._offline:
                return
            self._offline[dir_path] = reason
            if self._handler is None:
                self._handler = threading.Thread(
                    target=self._handle, name="log-dir-failure-handler", daemon=True
                )
                self._handler.start()
        log.error(
            "log directory went offline",
            extra={"event": "log_dir_offline", "log_dir": dir_path, "reason": reason},
        )
        self._events.put((dir_path, reason))
        if wait and threading.current_thread() is not self._handler:
            self.drain()

    def drain(self, timeout: float | None = 30.0) -> None:
        """Wait until every queued failure has been handled by the listeners."""
        with self._events.all_tasks_done:
            while self._events.unfinished_tasks:
                if not self._events.all_tasks_done.wait(timeout):
                    raise TimeoutError("log dir failure listeners did not finish")

    def _handle(self) -> None:
        while True:
            dir_path, reason = self._events.get()
            with self._lock:
                listeners = list(self._listeners)
            for listener in listeners:
                try:
                    listener(dir_path, reason)
                except Exception:  # a listener bug must not hide the failure from the others
                    log.exception("log dir failure listener failed", extra={"log_dir": dir_path})
            self._events.task_done()

    def check(self, dir_path: str) -> None:
        reason = self._offline.get(dir_path)
        if reason is not None:
            raise KafkaStorageError(f"log directory {dir_path} is offline: {reason}")

    @contextmanager
    def guard(self, dir_path: str, what: str, *, shortage_fails_dir: bool = True) -> Iterator[None]:
        """Run a disk operation on ``dir_path``; an OSError takes that directory offline.

        Except the process's own shortage (:data:`RESOURCE_SHORTAGE`), which raises
        :func:`resource_shortage` and leaves the directory online. ``shortage_fails_dir=False``
        is for a move's writes into its future copy: running out of space there raises
        :func:`shortage` and the directory stays online.
        """
        self.check(dir_path)
        try:
            yield
        except OSError as e:
            if is_resource_error(e):
                raise resource_shortage(what, e) from e
            if not shortage_fails_dir and is_space_error(e):
                raise shortage(dir_path, what, e) from e
            reason = f"{what}: {os.strerror(e.errno) if e.errno else e}"
            if e.filename:
                reason += f" ({e.filename})"
            self.mark_offline(dir_path, reason, wait=False)
            raise KafkaStorageError(f"log directory {dir_path} is offline: {reason}") from e


def preallocate(fd: int, length: int) -> None:
    """Reserve ``length`` bytes of blocks for a file about to be written in full (its size
    becomes ``length``), so that a full disk fails here, before any byte is copied.
    Filesystems without fallocate (EOPNOTSUPP) skip it: the writes then meet the shortage."""
    if length <= 0:
        return
    try:
        os.posix_fallocate(fd, 0, length)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise


def fsync_dir(path: str) -> None:
    """Make a rename or a new file in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, pos: int) -> None:
    """``pwrite`` until every byte is written: a short write (a nearly full disk) is resumed,
    so the next one raises (ENOSPC) instead of the caller counting bytes that never landed."""
    if type(data) is not memoryview:
        # The usual case, one call that writes everything: no view to make and slice.
        n = os.pwrite(fd, data, pos)
        if n == len(data):
            return
        data = memoryview(data)[n:]
        pos += n
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, pos)
        view = view[n:]
        pos += n


def write_atomically(path: str, data: bytes) -> None:
    """Write-to-temp, fsync, rename, fsync the parent: a reader sees the old or the new file."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def write_or_remove(path: str, data: bytes) -> bool:
    """Replace ``path`` with ``data`` atomically; on a full disk remove ``path`` instead.

    For a file that is only a cache of what the log itself holds (the leader-epoch checkpoint
    is rebuilt from the batches when it is missing): a stale copy must not survive, and
    removing it needs no space, where writing a new one does. Returns whether it was written.
    Any other error is raised.
    """
    try:
        write_atomically(path, data)
        return True
    except OSError as e:
        if not is_space_error(e):
            raise
    for stale in (path + ".tmp", path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    fsync_dir(os.path.dirname(path) or ".")
    return False
