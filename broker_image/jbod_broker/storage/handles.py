"""The descriptors the storage keeps open, and the process's open-file budget (issue 14).

A replica used to hold three descriptors for as long as it lived (its active segment's
``.log``, ``.index`` and ``.timeindex``), and one more per sealed segment, so the number of
replicas a broker could hold was bounded by its open-file limit: past it, EMFILE was taken for
a disk failure and the broker stopped. Now, as Kafka opens indexes lazily:

- index files are opened only for the moment they are read or written (their entries live in
  memory, see ``index.py``);
- a segment's ``.log`` is opened on demand through :class:`FileHandles`, one bounded set for
  the whole broker: at most ``capacity`` open, the least recently used idle one closed first
  when another is needed, and reopened (by its current path) on its next use. An idle replica
  holds no descriptor, so replicas are bounded by disk, not by descriptors.

The capacity is a share of the process's limit (:func:`log_handles_for`); the rest is for
sockets (clients, followers, the controller), moves' copies and files opened for a moment. A
call that needs one more handle while every one is in use is refused with
:class:`ResourceShortageError` (the hard budget), and so is one whose open meets EMFILE even
after the idle handles were closed: the process's shortage, never the disk's.

:func:`raise_open_file_limit` raises the soft limit to the hard one at start-up (as Kafka's
packaging asks of its operators) and says what the budget is.

An active segment takes its handle on a *lease* (:meth:`FileHandles.lease`) instead of a pin
per call: appends come one after another, and a pin and an LRU touch on each cost as much as
the rest of the storage append (docs/benchmarks.md, "Record validation made cheap"). A lease is
a pin that its owner gives back when the segment stops being active (a roll), is closed or
deleted (a failed disk's logs are closed), and that the budget takes back when it needs room
and no handle is idle: the owner's ``give_back`` says whether it could let go now (the segment
takes its log's lock without waiting; a log in the middle of an append keeps its lease). So a
leased handle still counts in the budget, and the replicas a broker holds stay bounded by disk,
not by descriptors.

Thread-safety: :class:`FileHandles` is thread-safe; a handle in use (between
:meth:`FileHandles.acquire` and :meth:`FileHandles.release`, or leased and not given back) is
never closed under its user.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from .errors import ResourceShortageError

MIN_LOG_HANDLES = 16
"""The fewest segment files the storage keeps open, however low the process's limit."""

DEFAULT_NR_OPEN = 1 << 20
"""The kernel's default ceiling (``fs.nr_open``) for an unlimited hard limit."""


def log_handles_for(limit: int) -> int:
    """How many segment files the storage may keep open under an open-file limit of ``limit``:
    half of it. The other half is for sockets, moves' copies and the files opened for a moment
    (indexes, checkpoints), so a broker that holds every handle it may still serves clients."""
    return max(MIN_LOG_HANDLES, limit // 2)


@dataclass(frozen=True, slots=True)
class OpenFileBudget:
    """The open-file limit as found and as raised at start-up, and the storage's share of it."""

    limit: int
    """The soft limit in force (RLIMIT_NOFILE) after raising it."""
    hard_limit: int
    """The hard limit (the most the soft one may be raised to); -1 when unlimited."""
    limit_at_start: int
    """The soft limit the process was started with."""
    log_handles: int
    """Segment files the storage may keep open (:func:`log_handles_for`)."""


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return DEFAULT_NR_OPEN


def current_open_file_limit() -> int:
    """The soft RLIMIT_NOFILE in force (the kernel's ceiling when it is unlimited)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _nr_open() if soft == resource.RLIM_INFINITY else soft


def raise_open_file_limit() -> OpenFileBudget:
    """Raise RLIMIT_NOFILE's soft limit to its hard limit and return the budget.

    An unlimited hard limit is raised to the kernel's ceiling (``fs.nr_open``: the soft limit
    cannot be infinite). A refusal (a sandbox) keeps the limit the process has.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _nr_open() if hard == resource.RLIM_INFINITY else hard
    limit = soft
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            limit = target
    if limit == resource.RLIM_INFINITY:
        limit = _nr_open()
    return OpenFileBudget(
        limit=limit,
        hard_limit=-1 if hard == resource.RLIM_INFINITY else hard,
        limit_at_start=soft,
        log_handles=log_handles_for(limit),
    )


def open_file_count() -> int:
    """Descriptors the process has open now (-1 where ``/proc`` cannot tell)."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself opened
    except OSError:
        return -1


class _Handle:
    __slots__ = ("doomed", "fd", "give_back", "pins")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pins = 1
        self.doomed = False
        self.give_back: Callable[[], bool] | None = None
        """Set while the handle is leased (the lease holds one of ``pins``)."""


class FileHandles:
    """A bounded set of open segment files, keyed by their owner (a segment), LRU first out.

    The owner, not the path, is the key: a replica folder renamed by a move or a deletion keeps
    its descriptors valid, and a closed one is reopened by the path its owner gives then.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._open: OrderedDict[object, _Handle] = OrderedDict()
        self._opening = 0
        self.opens = 0
        """Files opened, reopens included: far above the replicas used, the budget is short."""

    @property
    def open_count(self) -> int:
        return len(self._open)

    def acquire(self, owner: object, path: str, *, create: bool = False) -> int:
        """The open descriptor of ``owner``'s file, opening ``path`` if it has none; pinned
        (never closed by another caller) until :meth:`release`. Calls may nest.

        ``create`` makes the file if it is missing (a new segment); otherwise a missing file is
        an error, as it would be for a descriptor that stayed open. An ``OSError`` of the open
        propagates (the caller's failure guard judges it); all handles in use raises
        :class:`ResourceShortageError`.
        """
        with self._lock:
            h = self._open.get(owner)
            if h is not None:
                h.pins += 1
                self._open.move_to_end(owner)
                return h.fd
            victims = self._make_room_locked()
            self._opening += 1
        try:
            _close_all(victims)
            fd = self._open_file(path, create)
        except BaseException:
            with self._lock:
                self._opening -= 1
            raise
        with self._lock:
            self._opening -= 1
            self.opens += 1
            h = self._open.get(owner)
            if h is None:
                self._open[owner] = _Handle(fd)
                return fd
            h.pins += 1  # another thread opened it meanwhile: use theirs
            self._open.move_to_end(owner)
            mine, fd = fd, h.fd
        os.close(mine)
        return fd

    def lease(self, owner: object, path: str, give_back: Callable[[], bool]) -> int:
        """``owner``'s descriptor, pinned until :meth:`end_lease` or :meth:`close`, or until
        the budget, short of room, calls ``give_back`` and it returns True.

        ``give_back`` runs while this set's lock is held: it must not call back into it, and
        must not wait (the owner answers whether it can stop using the descriptor at once,
        and forgets it if so). Leasing a handle already leased changes nothing.
        """
        fd = self.acquire(owner, path)
        with self._lock:
            h = self._open[owner]  # pinned by the acquire: still there
            if h.give_back is None:
                h.give_back = give_back
                return fd
        self.release(owner)  # leased already: that lease's pin is enough
        return fd

    def end_lease(self, owner: object) -> None:
        """Give ``owner``'s lease back (its handle becomes idle, most recently used)."""
        with self._lock:
            h = self._open.get(owner)
            if h is None or h.give_back is None:
                return
            h.give_back = None
        self.release(owner)

    def release(self, owner: object) -> None:
        """Unpin ``owner``'s handle (it stays open, most recently used, until evicted)."""
        with self._lock:
            h = self._open.get(owner)
            if h is None:
                return
            h.pins -= 1
            if h.pins > 0 or not h.doomed:
                return
            del self._open[owner]
        _close_all([h.fd])

    def close(self, owner: object) -> None:
        """Close ``owner``'s descriptor now (its file is closed, deleted or on a failed disk);
        if it is in use, as soon as the last user releases it. A lease ends here."""
        with self._lock:
            h = self._open.get(owner)
            if h is None:
                return
            if h.give_back is not None:
                h.give_back = None
                h.pins -= 1
            if h.pins > 0:
                h.doomed = True
                return
            del self._open[owner]
        _close_all([h.fd])

    def close_idle(self) -> int:
        """Close every handle not in use (leases given back where their owners can); returns
        how many were closed."""
        with self._lock:
            for h in self._open.values():
                self._take_back_locked(h)
            idle = [k for k, h in self._open.items() if h.pins == 0]
            fds = [self._open.pop(k).fd for k in idle]
        _close_all(fds)
        return len(fds)

    @staticmethod
    def _take_back_locked(h: _Handle) -> bool:
        """End ``h``'s lease if its owner can let go now and nothing else pins it."""
        give_back = h.give_back
        if give_back is None or h.pins != 1 or not give_back():
            return False
        h.give_back = None
        h.pins = 0
        return True

    def _make_room_locked(self) -> list[int]:
        """Take idle handles out, oldest first, until one more fits; with none idle, the
        oldest lease its owner can give back. Their descriptors are closed by the caller
        outside the lock. All in use: the hard budget refuses."""
        victims: list[int] = []
        while len(self._open) + self._opening >= self.capacity:
            idle = next((k for k, h in self._open.items() if h.pins == 0), None)
            if idle is None:
                idle = next((k for k, h in self._open.items() if self._take_back_locked(h)), None)
                if idle is None:
                    break
            victims.append(self._open.pop(idle).fd)
        else:
            return victims
        _close_all(victims)
        raise ResourceShortageError(
            f"all {self.capacity} log file handles of the broker are in use (open files: "
            "the storage's share of the process's RLIMIT_NOFILE); refused, no log dir is "
            "affected"
        )

    def _open_file(self, path: str, create: bool) -> int:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            # Sockets or other files took the rest of the process's descriptors: give back the
            # idle handles and try once more; a second EMFILE goes to the caller's guard.
            if e.errno not in (errno.EMFILE, errno.ENFILE) or not self.close_idle():
                raise
            fd = os.open(path, flags, 0o644)
        # Consumers and followers read a segment front to back: ask for the larger readahead
        # window (a hint only; a filesystem without it reads as before).
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        return fd


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
