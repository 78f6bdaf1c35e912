"""All log directories of one broker: loading, placement, moves, failure isolation, describe.

Kafka's ``LogManager``. Owns the maps of current logs, future logs (the destination copies of
KIP-113 moves), offline replicas, preferred directories and cordoned directories; they are
private and read or changed only through its methods. The move engine (``jbod_broker.move``)
copies bytes and asks this class for everything else: creating, finding and abandoning future
logs, remembering a preferred directory, and the swap itself
(:meth:`LogManager.replace_current_with_future_log`).

Start-up follows KIP-112 and KIP-113: a directory that cannot be read is offline from the start;
a ``-future`` folder is resumed, renamed into place, or left alone depending on whether its
source exists and whether any directory is bad; ``-delete`` folders are deleted; two current
copies of one replica are resolved by the recovery checkpoints instead of refusing to start.

A full disk never strands a directory at start-up: loading needs no new space for what a
directory holds (KAFKA-13773; see :meth:`Log.load`), and a ``-future`` copy that cannot be
loaded, or whose move cannot be finished, for lack of space is deleted when its source is
intact, which gives the directory its space back.

Thread-safety: thread-safe. One reentrant lock (Kafka's log-creation-or-deletion lock) guards
the maps and serialises creation, deletion and swaps; it is held briefly, never across a copy.
Per-log work happens under each log's own lock. Lock order: this manager's lock, then a source
log's lock, then a future log's lock; a thread holding a log's lock never waits for the
manager's (the swap takes the two with a back-off, see :meth:`_swap_locks`). Offline listeners
run on the failure channel's thread holding no lock.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NoReturn

from .checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    format_offsets,
    format_properties,
    read_offsets,
    read_properties,
)
from .diskio import LogDirFailureChannel, fsync_dir, is_space_error, write_atomically
from .errors import (
    InsufficientSpaceError,
    InvalidLogDirError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NoLiveLogDirError,
    ReplicaNotAvailableError,
    ResourceShortageError,
)
from .handles import FileHandles, current_open_file_limit, log_handles_for
from .log import Log, LogConfig
from .names import (
    CLEANED_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    MAX_NAME_BYTES,
    SWAP_SUFFIX,
    DirKind,
    TopicPartition,
    delete_dir_name,
    future_dir_name,
    log_dir_name,
    parse_dir_name,
    parse_segment_file,
    stray_dir_name,
)
from .placement import DirState, rank_log_dirs
from .room import DirSpace, Headroom, RoomVerdict, check_room, remaining_to_write

log = logging.getLogger(__name__)

OfflineReplicasListener = Callable[[str, str, list[TopicPartition]], None]


class SwapPoint(StrEnum):
    """The moments of :meth:`LogManager.replace_current_with_future_log` its caller is told of.

    The values that are also move hook points (``jbod_broker.move.hooks``) have the same names,
    so a crash test can stop the process at them.
    """

    COMMIT = "commit"
    """Everything is carried over and synced, nothing renamed: the caller's last chance to
    refuse (by raising). After this the swap is committed."""
    BEFORE_RENAMES = "before_renames"
    """Committed; the destination's checkpoints already name the future log."""
    SOURCE_RENAMED = "source_renamed"
    """The source folder is ``-delete`` (not yet synced): from here until ``AFTER_RENAMES`` or
    ``SOURCE_RESTORED`` a failure leaves both folders for start-up recovery."""
    BETWEEN_RENAMES = "between_renames"
    """The source's rename is synced; the future still has its ``-future`` name."""
    SOURCE_RESTORED = "source_restored"
    """The future could not be renamed and the source has its name back (then it raises)."""
    AFTER_RENAMES = "after_renames"
    """Both renamed and synced; the maps still name the source as current."""


SwapCallback = Callable[[SwapPoint], None]

_TRANSIENT_SUFFIXES = (".tmp", CLEANED_SUFFIX, SWAP_SUFFIX, ".deleted")
MAX_PREFERRED_DIRS = 100_000
"""Log dirs remembered for replicas not here yet (KIP-113): bounded, so requests for replicas
that never arrive cannot grow the broker's memory without end (issue 14). An entry is
forgotten when its replica is created or the request is withdrawn ("any")."""
_SWAP_LOCK_BACKOFF_S = 0.001
_SWAP_LOCK_TRY_S = 0.05


class _LogMap(dict[TopicPartition, Log]):
    """Logs by replica, also counted by directory as they come and go.

    Placement asks for every dir's replica count once per new replica: counting by a pass
    over the map made one LeaderAndIsr of 10,000 new partitions quadratic (issue 14). Only
    the mutations the manager uses are kept in step (item assignment, ``del``, ``pop``); the
    others would bypass the count and are refused. Guarded by the manager's lock.
    """

    def __init__(self) -> None:
        super().__init__()
        self.per_dir: Counter[str] = Counter()

    def __setitem__(self, tp: TopicPartition, lg: Log) -> None:
        old = self.get(tp)
        if old is not None:
            self.per_dir[old.log_dir] -= 1
        super().__setitem__(tp, lg)
        self.per_dir[lg.log_dir] += 1

    def __delitem__(self, tp: TopicPartition) -> None:
        lg = self[tp]
        super().__delitem__(tp)
        self.per_dir[lg.log_dir] -= 1

    def pop(self, tp: TopicPartition, default: Log | None = None) -> Log | None:  # type: ignore[override]
        lg = super().pop(tp, None)
        if lg is None:
            return default
        self.per_dir[lg.log_dir] -= 1
        return lg

    def _refused(self, *args: object, **kwargs: object) -> NoReturn:
        # A guard, not a gap: these would change the map without the per-dir counts.
        raise TypeError("_LogMap keeps per-dir counts: change it with [], del or pop only")

    update = setdefault = popitem = clear = __ior__ = _refused


@dataclass(frozen=True, slots=True)
class LogDirSpec:
    path: str
    capacity_bytes: int | None = None
    """The size of the disk as provisioned (the PVC size); caps usable bytes on shared disks."""


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    path: str
    is_live: bool
    error: str | None
    total_bytes: int
    usable_bytes: int
    cordoned: bool
    replicas: list[ReplicaInfo] = field(default_factory=list)
    reserved_bytes: int = 0
    """What moves in flight to this dir still have to write."""
    headroom_bytes: int = 0
    """What the broker keeps free here (its headroom applied to the capacity)."""


@dataclass(frozen=True, slots=True)
class _UnloadedFuture:
    """A ``-future`` folder whose load stopped for lack of space. What becomes of it is
    decided once every directory is read, when it is known whether its source survived."""

    tp: TopicPartition
    path: str
    log_dir: str
    reason: str


@dataclass
class StartupReport:
    actions: list[str] = field(default_factory=list)
    resumable_moves: dict[TopicPartition, str] = field(default_factory=dict)

    def note(self, message: str) -> None:
        log.warning(message, extra={"event": "log_startup_action"})
        self.actions.append(message)


class LogManager:
    """Every log directory of one broker and the replicas in them (Kafka's ``LogManager``).

    Thread-safe (see the module's doc for the lock order). The maps are private: callers get
    copies or single entries, and change them only through the methods below.
    """

    def __init__(
        self,
        log_dirs: Sequence[LogDirSpec | str],
        *,
        broker_id: int,
        cluster_id: str | None = None,
        default_config: LogConfig | None = None,
        channel: LogDirFailureChannel | None = None,
        headroom: Headroom | None = None,
        handles: FileHandles | None = None,
    ) -> None:
        """``handles``: the open segment files every log of the broker shares (issue 14); by
        default sized from the process's open-file limit."""
        specs = [d if isinstance(d, LogDirSpec) else LogDirSpec(d) for d in log_dirs]
        if not specs:
            raise ValueError("log.dirs must name at least one directory")
        self._specs: dict[str, LogDirSpec] = {}
        for spec in specs:
            if not os.path.isabs(spec.path):
                raise ValueError(f"log dir {spec.path!r} must be an absolute path")
            path = os.path.normpath(spec.path)
            if path in self._specs:
                raise ValueError(f"log dir {path} is listed twice")
            self._specs[path] = LogDirSpec(path, spec.capacity_bytes)
        self.dirs = list(self._specs)
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.default_config = default_config or LogConfig()
        self.channel = channel or LogDirFailureChannel()
        self.handles = (
            handles
            if handles is not None
            else FileHandles(log_handles_for(current_open_file_limit()))
        )
        self._lock = threading.RLock()
        self._current_logs = _LogMap()
        self._future_logs = _LogMap()
        self._offline_replicas: dict[TopicPartition, str] = {}
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self._cordoned: set[str] = set()
        self.headroom = headroom or Headroom()
        # Room promised to moves in flight: replica -> destination dir. The amount is computed
        # when asked (what the move still has to write), so a copy in progress holds exactly
        # its remainder and a source that grows holds more (issue 13, storage.room).
        self._reservations: dict[TopicPartition, str] = {}
        self._directory_ids: dict[str, str] = {}
        self._pending_deletes: list[str] = []
        self._listeners: list[OfflineReplicasListener] = []
        self._halt: Callable[[str], None] | None = None
        self._halted = False
        self._starting = False
        self._recovery_checkpoint_cache: dict[str, set[TopicPartition]] = {}
        self._unloaded_futures: list[_UnloadedFuture] = []
        # Checkpoint files are rewritten from several threads (the periodic checkpoint, the move
        # engine's swaps): one writer at a time, and never an older snapshot over a newer one.
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_seq = 0
        self._checkpoint_written: dict[str, int] = {}
        self.channel.add_listener(self._on_dir_offline)

    # -- listeners ------------------------------------------------------------------------

    def add_offline_listener(self, listener: OfflineReplicasListener) -> None:
        """``listener(dir, reason, replicas)``: the server reports these to the controller."""
        self._listeners.append(listener)

    def on_no_live_dirs(self, halt: Callable[[str], None]) -> None:
        self._halt = halt

    # -- start-up -------------------------------------------------------------------------

    def startup(self) -> StartupReport:
        self._starting = True
        try:
            return self._startup()
        finally:
            self._starting = False

    def _startup(self) -> StartupReport:
        report = StartupReport()
        loaded: dict[str, list[Log]] = {}
        for d in self.dirs:
            try:
                loaded[d] = self._load_dir(d, report)
            except KafkaStorageError as e:
                report.note(f"log dir {d} is offline at start-up: {e}")
        self._resolve_duplicates(loaded, report)
        self._resolve_futures(report)
        self._check_live()
        return report

    def _prepare_dir(self, d: str) -> None:
        os.makedirs(d, exist_ok=True)
        if not os.path.isdir(d):
            raise NotADirectoryError(20, "log dir is not a directory", d)
        os.listdir(d)  # raises when the directory cannot be read (chmod 000, dead disk)
        props = read_properties(os.path.join(d, META_PROPERTIES))
        if props is None:
            props = {"version": "1", "broker.id": str(self.broker_id)}
            if self.cluster_id:
                props["cluster.id"] = self.cluster_id
            props["directory.id"] = uuid.uuid4().hex
            write_atomically(os.path.join(d, META_PROPERTIES), format_properties(props))
        owner = props.get("broker.id")
        cluster = props.get("cluster.id")
        if owner is not None and owner != str(self.broker_id):
            self.channel.mark_offline(
                d, f"meta.properties says it belongs to broker {owner}, not {self.broker_id}"
            )
        elif self.cluster_id and cluster is not None and cluster != self.cluster_id:
            # Kafka refuses to start on a dir of another cluster (InconsistentClusterIdException);
            # here only that dir goes offline, as for another broker's dir (KIP-112).
            self.channel.mark_offline(
                d, f"meta.properties says it belongs to cluster {cluster}, not {self.cluster_id}"
            )
        elif self.cluster_id and cluster is None:
            # A dir from before the cluster had an id: it is ours (broker.id says so), and from
            # now on it says which cluster it belongs to.
            props["cluster.id"] = self.cluster_id
            write_atomically(os.path.join(d, META_PROPERTIES), format_properties(props))
        self._directory_ids[d] = props.get("directory.id", "")

    def _load_dir(self, d: str, report: StartupReport) -> list[Log]:
        with self.channel.guard(d, "open log dir"):
            self._prepare_dir(d)
        self.channel.check(d)
        with self.channel.guard(d, "read checkpoints"):
            clean = os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
            try:
                recovery = read_offsets(os.path.join(d, RECOVERY_POINT_CHECKPOINT))
                starts = read_offsets(os.path.join(d, LOG_START_OFFSET_CHECKPOINT))
                hws = read_offsets(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT))
            except CheckpointError as e:
                report.note(f"{e}; recovering every log in {d}")
                recovery, starts, hws, clean = {}, {}, {}, False
            entries = sorted(os.listdir(d))
        logs: list[Log] = []
        for name in entries:
            parsed = parse_dir_name(name)
            path = os.path.join(d, name)
            if parsed is None or not os.path.isdir(path):
                continue
            if parsed.kind is DirKind.DELETE:
                self._pending_deletes.append(path)
                continue
            if parsed.kind is DirKind.STRAY:
                report.note(f"left quarantined replica folder {path} in place")
                continue
            tp = parsed.tp
            is_future = parsed.kind is DirKind.FUTURE
            try:
                lg = Log.load(
                    path,
                    tp,
                    self.default_config,
                    self.channel,
                    log_dir=d,
                    is_future=is_future,
                    handles=self.handles,
                    recovery_point=recovery.get(tp, 0),
                    log_start_offset=starts.get(tp, 0),
                    high_watermark=hws.get(tp, 0),
                    clean_shutdown=clean and tp in recovery,
                    no_space_ok=is_future,  # a copy: dropped rather than strand the directory
                )
            except InsufficientSpaceError as e:
                self._unloaded_futures.append(_UnloadedFuture(tp, path, d, str(e)))
                continue
            logs.append(lg)
        with self.channel.guard(d, "remove clean-shutdown marker"):
            if clean:
                os.unlink(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        self._recovery_checkpoint_cache[d] = set(recovery)
        return logs

    def _resolve_duplicates(self, loaded: dict[str, list[Log]], report: StartupReport) -> None:
        vouched = dict(self._recovery_checkpoint_cache)
        self._recovery_checkpoint_cache = {}
        for logs in loaded.values():
            for lg in logs:
                if lg.is_future:
                    if lg.tp in self._future_logs:
                        self._quarantine(lg, report, "a second future copy")
                    else:
                        self._future_logs[lg.tp] = lg
                    continue
                other = self._current_logs.get(lg.tp)
                if other is None:
                    self._current_logs[lg.tp] = lg
                    continue
                keep, drop = self._pick_duplicate(other, lg, vouched)
                self._current_logs[lg.tp] = keep
                why = (
                    "named by its recovery checkpoint"
                    if keep.tp in vouched.get(keep.log_dir, set())
                    else "the longer log"
                )
                self._quarantine(drop, report, f"a duplicate of {keep.dir_path} (kept: {why})")

    @staticmethod
    def _pick_duplicate(a: Log, b: Log, vouched: dict[str, set[TopicPartition]]) -> tuple[Log, Log]:
        va = a.tp in vouched.get(a.log_dir, set())
        vb = b.tp in vouched.get(b.log_dir, set())
        if va != vb:
            return (a, b) if va else (b, a)
        if (a.log_end_offset, a.size) >= (b.log_end_offset, b.size):
            return a, b
        return b, a

    def _quarantine(self, lg: Log, report: StartupReport, why: str) -> None:
        target = os.path.join(lg.log_dir, stray_dir_name(lg.tp))
        with lg.lock:
            lg.close_quietly()  # nothing to write: it was just read, and it is set aside
            try:
                lg.rename_dir(target)
            except KafkaStorageError:
                return
        report.note(f"quarantined {lg.tp} as {target}: {why}")

    def _resolve_futures(self, report: StartupReport) -> None:
        self._settle_unloaded_futures(report)
        offline = self.channel.offline_dirs()
        with_source: list[tuple[Log, Log]] = []
        for tp, fut in list(self._future_logs.items()):
            source = self._current_logs.get(tp)
            if source is not None:
                with_source.append((fut, source))
                continue
            if offline:
                # The source may be on the bad disk: never promote a possibly stale copy
                # over it (KAFKA-16082). The replica is offline; the future is left alone.
                del self._future_logs[tp]
                fut.close_quietly()
                self._offline_replicas[tp] = next(iter(offline))
                report.note(
                    f"{tp}: only a future copy exists ({fut.dir_path}) and log dirs "
                    f"{sorted(offline)} are offline; replica offline, future left in place"
                )
                continue
            del self._future_logs[tp]
            final = os.path.join(fut.log_dir, log_dir_name(tp))
            with fut.lock:
                fut.rename_dir(final)
                fut.is_future = False
            with self.channel.guard(fut.log_dir, "fsync after rename"):
                fsync_dir(fut.log_dir)
            self._current_logs[tp] = fut
            report.note(f"{tp}: renamed the finished future copy into place at {final}")
        self._resume_or_drop(with_source, report)

    def _settle_unloaded_futures(self, report: StartupReport) -> None:
        """Decide on the ``-future`` folders that could not be loaded for lack of space.

        With its source loaded, such a copy is redundant: it is deleted, which gives the
        directory its space back, and the directory stays online. Beside another future copy
        that loaded, it is quarantined like any second copy. Otherwise it may be the
        only copy: if another directory is offline the source may be there (the replica is
        offline, the folder left alone, as for any lone future); otherwise the directory
        cannot be loaded without losing data and goes offline, as before.
        """
        unloaded, self._unloaded_futures = self._unloaded_futures, []
        for u in unloaded:
            if self.channel.is_offline(u.log_dir):
                continue  # gone with its directory, like the logs loaded beside it
            source = self._current_logs.get(u.tp)
            offline = self.channel.offline_dirs()
            if source is not None:
                if self._remove_future_folder(u.tp, u.path, u.log_dir):
                    report.note(
                        f"{u.tp}: dropped the future copy {u.path}, which cannot be loaded for "
                        f"lack of space ({u.reason}); its source {source.dir_path} is intact"
                    )
            elif u.tp in self._future_logs:
                self._set_aside(u, report)
            elif offline:
                self._offline_replicas[u.tp] = next(iter(offline))
                report.note(
                    f"{u.tp}: only a future copy exists ({u.path}), it cannot be loaded for lack "
                    f"of space and log dirs {sorted(offline)} are offline; replica offline, "
                    "future left in place"
                )
            else:
                self.channel.mark_offline(u.log_dir, u.reason)
                report.note(
                    f"{u.tp}: the only copy ({u.path}) cannot be loaded for lack of space; "
                    f"log dir {u.log_dir} is offline: {u.reason}"
                )

    def _set_aside(self, u: _UnloadedFuture, report: StartupReport) -> None:
        """Quarantine an unloaded second future copy (as :meth:`_quarantine` does a loaded one)."""
        target = os.path.join(u.log_dir, stray_dir_name(u.tp))
        try:
            with self.channel.guard(u.log_dir, f"quarantine {u.tp}"):
                os.rename(u.path, target)
        except KafkaStorageError:
            return
        report.note(f"quarantined {u.tp} as {target}: a second future copy ({u.reason})")

    def _resume_or_drop(self, moves: list[tuple[Log, Log]], report: StartupReport) -> None:
        """Resume the interrupted moves whose destination has room for the rest of the copy
        (KIP-113); drop the other future copies, whose sources are intact.

        Resuming a move into a full disk would fill it again, and KIP-112 would then take every
        replica on it offline: a copy that cannot be finished is worth less than the room it
        takes. The rule is the one every move passes (:meth:`reserve_room`: room.py's, with the
        broker's headroom), taken in replica order, each resumed move's remainder reserved.
        """
        for fut, src in sorted(moves, key=lambda m: m[0].tp):
            tp = fut.tp
            if self.channel.is_offline(fut.log_dir):
                continue  # offline now: its futures go with it
            try:
                self.reserve_room(tp, fut.log_dir)
            except InsufficientSpaceError as e:
                why = str(e)
            except KafkaStorageError:
                continue
            else:
                report.resumable_moves[tp] = fut.log_dir
                continue
            with self._lock:
                if self._future_logs.get(tp) is fut:
                    del self._future_logs[tp]
            fut.close_quietly()
            path = fut.dir_path
            if self._remove_future_folder(tp, path, fut.log_dir):
                report.note(
                    f"{tp}: dropped the future copy {path}: the move cannot be resumed, "
                    f"{why}; its source {src.dir_path} is intact"
                )

    def _remove_future_folder(self, tp: TopicPartition, path: str, d: str) -> bool:
        """Delete a dropped ``-future`` folder now (the directory needs the space); ``False``
        if that failed (the directory is then offline).

        Renamed to ``-delete`` first, so a crash part-way through leaves a folder the next
        start deletes rather than a future with holes; with no room even for that (a longer
        name may need a new directory block), it is deleted where it is.
        """
        try:
            with self.channel.guard(d, f"drop the future copy of {tp}"):
                target = os.path.join(d, delete_dir_name(tp))
                try:
                    os.rename(path, target)
                except OSError as e:
                    if not is_space_error(e):
                        raise
                    target = path
                else:
                    fsync_dir(d)
                shutil.rmtree(target)
        except KafkaStorageError:
            return False
        return True

    def _check_live(self) -> None:
        self.channel.drain()
        if not self.live_dirs():
            reason = "every log directory is offline: " + "; ".join(
                f"{d}: {r}" for d, r in self.channel.offline_dirs().items()
            )
            self._halt_once(reason)
            raise NoLiveLogDirError(reason)

    # -- directory state ------------------------------------------------------------------

    def live_dirs(self) -> list[str]:
        return [d for d in self.dirs if not self.channel.is_offline(d)]

    def offline_dirs(self) -> dict[str, str]:
        return self.channel.offline_dirs()

    @property
    def offline_log_dir_count(self) -> int:
        return len(self.channel.offline_dirs())

    @property
    def offline_replica_count(self) -> int:
        return len(self._offline_replicas)

    def resolve_dir(self, path: str) -> str:
        """The configured directory ``path`` names, or a clear error (no traversal, no links)."""
        if not isinstance(path, str) or not path:
            raise InvalidLogDirError("log dir must be a non-empty string")
        if "\x00" in path:
            raise InvalidLogDirError("log dir contains a NUL byte")
        if not os.path.isabs(path):
            raise InvalidLogDirError(f"log dir {path!r} must be an absolute path")
        norm = os.path.normpath(path)
        if norm != path.rstrip("/") or ".." in path.split("/"):
            raise InvalidLogDirError(f"log dir {path!r} is not in canonical form")
        if norm in self._specs:
            real = os.path.realpath(norm)
            if real != norm and os.path.realpath(real) not in {
                os.path.realpath(d) for d in self.dirs
            }:
                raise InvalidLogDirError(f"log dir {path!r} leads elsewhere through a link")
            return norm
        raise InvalidLogDirError(
            f"{path!r} is not a log dir of broker {self.broker_id} (configured: {self.dirs})"
        )

    def dir_usage(self, d: str) -> tuple[int, int]:
        """(total, usable) bytes of a live directory, capped by its provisioned capacity."""
        st = os.statvfs(d)
        total = st.f_blocks * st.f_frsize
        usable = st.f_bavail * st.f_frsize
        cap = self._specs[d].capacity_bytes
        if cap is not None:
            used = sum(lg.size for lg in self._logs_in(d))
            total = cap
            usable = max(0, min(usable, cap - used))
        return total, usable

    def _logs_in(self, d: str) -> list[Log]:
        with self._lock:
            return [
                lg
                for lg in (*self._current_logs.values(), *self._future_logs.values())
                if lg.log_dir == d
            ]

    def dir_states(self) -> list[DirState]:
        with self._lock:
            counts = self._current_logs.per_dir + self._future_logs.per_dir
        out = []
        for d in self.dirs:
            live = not self.channel.is_offline(d)
            usable = 0
            if live:
                try:
                    with self.channel.guard(d, "statvfs"):
                        usable = self.dir_usage(d)[1]
                except KafkaStorageError:
                    live = False
            out.append(DirState(d, live, usable, counts[d] if live else 0, d in self._cordoned))
        return out

    def set_cordoned(self, d: str, cordoned: bool) -> None:
        d = self.resolve_dir(d)
        with self._lock:
            if cordoned:
                self._cordoned.add(d)
            else:
                self._cordoned.discard(d)

    # -- room (issue 13: a move never fills a disk) ----------------------------------------

    def dir_space(self, d: str, *, excluding: TopicPartition | None = None) -> DirSpace:
        """A live directory's space and what moves in flight to it still have to write."""
        with self.channel.guard(d, "statvfs"):
            total, usable = self.dir_usage(d)
        return DirSpace(d, total, usable, self.reserved_bytes(d, excluding=excluding))

    def reserved_bytes(self, d: str, *, excluding: TopicPartition | None = None) -> int:
        """What the moves in flight to ``d`` (but ``excluding``'s) still have to write."""
        with self._lock:
            return sum(
                self._still_to_write(tp, dest)
                for tp, dest in self._reservations.items()
                if dest == d and tp != excluding
            )

    def _still_to_write(self, tp: TopicPartition, dest: str) -> int:
        """What moving ``tp`` to ``dest`` still has to write (0 once it lives there)."""
        src = self._current_logs.get(tp)
        if src is None or src.log_dir == dest:
            return 0
        fut = self._future_logs.get(tp)
        copied = fut.size if fut is not None and fut.log_dir == dest else 0
        return remaining_to_write(src.size, copied)

    def room_for_move(self, tp: TopicPartition, dest: str) -> RoomVerdict:
        """Whether moving ``tp`` to ``dest`` fits now, beside the moves already reserved."""
        with self._lock:
            need = self._still_to_write(tp, dest)
            return check_room(self.dir_space(dest, excluding=tp), need, self.headroom)

    def reserve_room(self, tp: TopicPartition, dest: str) -> None:
        """Promise ``dest`` the room ``tp``'s move still needs, or refuse saying why.

        Check and promise are one step under the manager's lock, so two moves that each fit
        alone but not together are never both accepted: the second sees the first's
        reservation. Released by :meth:`release_room` when the move ends, whatever the end.
        """
        with self._lock:
            verdict = self.room_for_move(tp, dest)
            if not verdict.fits:
                raise InsufficientSpaceError(f"cannot move {tp}: {verdict.reason}")
            self._reservations[tp] = dest

    def release_room(self, tp: TopicPartition, dest: str) -> None:
        """The move of ``tp`` to ``dest`` ended; a newer move of ``tp`` elsewhere keeps its own."""
        with self._lock:
            if self._reservations.get(tp) == dest:
                del self._reservations[tp]

    # -- logs -----------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._current_logs.get(tp)

    def get_future_log(self, tp: TopicPartition) -> Log | None:
        return self._future_logs.get(tp)

    def current_logs(self) -> dict[TopicPartition, Log]:
        """A copy of the map of current logs (changes to it change nothing here)."""
        with self._lock:
            return dict(self._current_logs)

    def future_logs(self) -> dict[TopicPartition, Log]:
        """A copy of the map of future logs (moves in progress, KIP-113)."""
        with self._lock:
            return dict(self._future_logs)

    def snapshot_logs(self) -> tuple[dict[TopicPartition, Log], dict[TopicPartition, Log]]:
        """Copies of both maps taken together, so a swap is seen entirely or not at all."""
        with self._lock:
            return dict(self._current_logs), dict(self._future_logs)

    def offline_replicas(self) -> dict[TopicPartition, str]:
        """Replicas on failed directories, with the directory each was on."""
        with self._lock:
            return dict(self._offline_replicas)

    def offline_replica_dir(self, tp: TopicPartition) -> str | None:
        """The failed directory ``tp`` was on, or ``None`` if it is not offline."""
        return self._offline_replicas.get(tp)

    def directory_ids(self) -> dict[str, str]:
        """``directory.id`` of each directory read at start-up (from ``meta.properties``)."""
        with self._lock:
            return dict(self._directory_ids)

    # -- preferred directories (KIP-113: a move requested before the replica exists) -------

    def preferred_dir(self, tp: TopicPartition) -> str | None:
        return self._preferred_dirs.get(tp)

    def set_preferred_dir(self, tp: TopicPartition, d: str) -> None:
        """Create ``tp`` in ``d`` when it is created (placement then ignores usage)."""
        with self._lock:
            self._preferred_dirs[tp] = d

    def clear_preferred_dir(self, tp: TopicPartition) -> None:
        with self._lock:
            self._preferred_dirs.pop(tp, None)

    def current_log_or_prefer(self, tp: TopicPartition, d: str) -> Log:
        """The first step of AlterReplicaLogDirs for ``tp`` to ``d`` (Kafka's
        ``maybeUpdatePreferredLogDir`` and the replica lookup, under one lock).

        Returns the current log, forgetting any preferred directory (the move takes over). A
        replica on a failed directory raises KafkaStorageError. A replica not here yet raises
        ReplicaNotAvailableError after remembering ``d``: it is created there when it arrives.
        """
        with self._lock:
            source = self._current_logs.get(tp)
            if source is not None:
                self._preferred_dirs.pop(tp, None)
                return source
            offline = self._offline_replicas.get(tp)
            if offline is not None:
                raise KafkaStorageError(f"replica {tp} is offline: log directory {offline} failed")
            if tp not in self._preferred_dirs and len(self._preferred_dirs) >= MAX_PREFERRED_DIRS:
                raise InvalidRequestError(
                    f"cannot remember {d} for {tp}: {MAX_PREFERRED_DIRS} replicas not on broker "
                    f"{self.broker_id} yet already have a log dir waiting (create them, or "
                    "withdraw with log dir 'any')"
                )
            self._preferred_dirs[tp] = d
            raise ReplicaNotAvailableError(
                f"replica {tp} is not on broker {self.broker_id} yet; it will be created "
                f"in {d} when it arrives"
            )

    def log_or_error(self, tp: TopicPartition) -> Log:
        lg = self._current_logs.get(tp)
        if lg is not None:
            return lg
        d = self._offline_replicas.get(tp)
        if d is not None:
            raise KafkaStorageError(f"replica {tp} is offline: log directory {d} failed")
        raise ReplicaNotAvailableError(f"replica {tp} is not on broker {self.broker_id}")

    def get_or_create_log(
        self,
        tp: TopicPartition,
        *,
        is_new: bool,
        config: LogConfig | None = None,
        topic_id: str | None = None,
    ) -> Log:
        """KIP-112: never re-create a replica that may sit on a bad disk unless it is new.

        KIP-516: with ``topic_id``, an existing replica's id is checked first (another id
        raises :class:`InconsistentTopicIdError` before anything changes, its config included)
        or recorded when it has none; a new replica is created with it."""
        name = log_dir_name(tp)
        if len(name.encode()) > MAX_NAME_BYTES:
            raise InvalidTopicError(
                f"cannot create a log for {tp}: its folder name would be {len(name.encode())} "
                f"bytes, over the {MAX_NAME_BYTES}-byte limit"
            )
        with self._lock:
            existing = self._current_logs.get(tp)
            if existing is not None:
                if topic_id is not None:
                    existing.assign_topic_id(topic_id)
                if config is not None:
                    existing.config = config
                return existing
            if tp in self._offline_replicas:
                raise KafkaStorageError(
                    f"replica {tp} is on offline log directory {self._offline_replicas[tp]}"
                )
            offline = self.channel.offline_dirs()
            if not is_new and offline:
                raise KafkaStorageError(
                    f"cannot create log for {tp}: it is not new and log directories "
                    f"{sorted(offline)} are offline, so it may exist there (KIP-112)"
                )
            preferred = self._preferred_dirs.get(tp)
            last_error: Exception | None = None
            for d in self._dirs_with_room_for_new_replica(tp, preferred):
                try:
                    lg = Log.create(
                        os.path.join(d, log_dir_name(tp)),
                        tp,
                        config or self.default_config,
                        self.channel,
                        log_dir=d,
                        handles=self.handles,
                        topic_id=topic_id,
                    )
                except KafkaStorageError as e:
                    last_error = e  # that directory just went offline: try the next (KAFKA-8526)
                    continue
                self._current_logs[tp] = lg
                self._preferred_dirs.pop(tp, None)
                log.info(
                    "created log",
                    extra={"event": "log_created", "partition": str(tp), "log_dir": d},
                )
                return lg
            raise KafkaStorageError(f"cannot create log for {tp}: {last_error}")

    def _dirs_with_room_for_new_replica(
        self, tp: TopicPartition, preferred: str | None
    ) -> list[str]:
        """Candidates for a new replica, best first, leaving out dirs without room (issue 13).

        A dir at or under its headroom gets no new replica, even when named ahead of time:
        the replica would fill it. When no live dir has room the creation is refused with
        each dir's figures; the dirs stay online.
        """
        states = self.dir_states()
        verdicts = (
            check_room(self.dir_space(st.path), 0, self.headroom) for st in states if st.live
        )
        full = {v.space.path: v.reason for v in verdicts if not v.fits}
        try:
            return rank_log_dirs(states, preferred=preferred, exclude=full)
        except KafkaStorageError:
            if not full:
                raise
            reasons = "; ".join(full.values())
            raise InsufficientSpaceError(f"cannot create a log for {tp}: {reasons}") from None

    def create_future_log(self, tp: TopicPartition, dest: str) -> Log:
        """The destination copy of a move (``<tp>.<uuid>-future`` on ``dest``)."""
        with self._lock:
            if tp in self._future_logs:
                return self._future_logs[tp]
            src = self.log_or_error(tp)
            lg = Log.create(
                os.path.join(dest, future_dir_name(tp)),
                tp,
                src.config,
                self.channel,
                log_dir=dest,
                is_future=True,
                start_offset=src.log_start_offset,
                handles=self.handles,
                topic_id=src.topic_id,
            )
            self._future_logs[tp] = lg
            return lg

    def delete_log(self, tp: TopicPartition) -> None:
        """StopReplica(delete=true): rename to ``-delete`` now, remove the bytes later."""
        with self._lock:
            if tp in self._offline_replicas:
                raise KafkaStorageError(
                    f"replica {tp} is on offline log directory {self._offline_replicas[tp]}; "
                    "it will be deleted when the directory is replaced"
                )
            self._preferred_dirs.pop(tp, None)
            fut = self._future_logs.pop(tp, None)
            if fut is not None:
                self._retire(fut)
            lg = self._current_logs.pop(tp, None)
            if lg is not None:
                self._retire(lg)

    def _retire(self, lg: Log) -> None:
        with lg.lock:
            if lg.offline:
                lg.close_quietly()
                return
            target = os.path.join(lg.log_dir, delete_dir_name(lg.tp))
            lg.rename_dir(target)
            with self.channel.guard(lg.log_dir, "fsync after rename"):
                fsync_dir(lg.log_dir)
            lg.close_quietly()
            lg.offline = True  # nothing may touch a retired log again
        self._pending_deletes.append(target)

    def run_deletions(self) -> int:
        """Delete queued ``-delete`` folders; returns how many went."""
        done = 0
        while True:
            try:
                path = self._pending_deletes.pop()
            except IndexError:  # empty, or another thread (scheduler, move worker) took it
                break
            d = os.path.dirname(path)
            if self.channel.is_offline(d):
                continue
            try:
                with self.channel.guard(d, "delete folder"):
                    shutil.rmtree(path)
                done += 1
            except KafkaStorageError:
                continue
        return done

    @property
    def pending_deletes(self) -> list[str]:
        return list(self._pending_deletes)

    # -- replica moves (KIP-113): used by jbod_broker.move ---------------------------------

    def resolve_live_dir(self, path: str) -> str:
        """A move's destination: a configured directory (:meth:`resolve_dir`) that is live,
        is not another configured directory under a second name, and is still the directory
        loaded at start-up (its ``meta.properties`` names the same ``directory.id``), so a
        symlink changed to lead elsewhere is refused."""
        d = self.resolve_dir(path)
        reason = self.channel.reason(d)
        if reason is not None:
            raise KafkaStorageError(f"log dir {d} is offline: {reason}")
        real = os.path.realpath(d)
        for other in self.dirs:
            if other != d and os.path.realpath(other) == real:
                raise InvalidLogDirError(
                    f"log dir {path!r} leads to the same directory as log dir {other} ({real})"
                )
        expected = self._directory_ids.get(d)
        if expected:
            with self.channel.guard(d, "check log dir identity"):
                props = read_properties(os.path.join(d, META_PROPERTIES))
            found = (props or {}).get("directory.id")
            if found != expected:
                raise InvalidLogDirError(
                    f"log dir {path!r} leads elsewhere ({real}): its directory.id is {found!r}, "
                    f"not {expected!r} as at start-up"
                )
        return d

    def queue_deletion(self, path: str) -> None:
        """Queue a ``-delete`` folder for :meth:`run_deletions`."""
        self._pending_deletes.append(path)

    def write_dir_checkpoints(self, d: str, extra: Iterable[Log] = ()) -> None:
        """Write ``d``'s three offset checkpoints now, for its current logs plus ``extra``.

        The move engine lists the future log it is about to swap in, so that a crash between
        the swap's renames keeps its log start offset, recovery point and high watermark
        (KAFKA-9263). Unlike :meth:`checkpoint`, a failure raises (and takes ``d`` offline).
        Writers are serialised, and a snapshot older than one already written is dropped.
        """
        self.channel.check(d)
        with self._lock:
            logs = [lg for lg in self._current_logs.values() if lg.log_dir == d]
            logs += [lg for lg in extra if lg.log_dir == d and lg not in logs]
            files = [
                (RECOVERY_POINT_CHECKPOINT, {lg.tp: lg.recovery_point for lg in logs}),
                (LOG_START_OFFSET_CHECKPOINT, {lg.tp: lg.log_start_offset for lg in logs}),
                (REPLICATION_OFFSET_CHECKPOINT, {lg.tp: lg.high_watermark for lg in logs}),
            ]
            self._checkpoint_seq += 1
            seq = self._checkpoint_seq
        error: OSError | None = None
        with self._checkpoint_lock:
            if seq < self._checkpoint_written.get(d, 0):
                return
            try:
                for name, offsets in files:
                    write_atomically(os.path.join(d, name), format_offsets(offsets))
                self._checkpoint_written[d] = seq
            except OSError as e:
                error = e
        if error is not None:
            # Reported outside the checkpoint lock: the offline listeners take other locks.
            with self.channel.guard(d, "write checkpoints"):
                raise error

    def abandon_future_log(self, tp: TopicPartition, future: Log) -> str | None:
        """Remove a failed or cancelled move's future folder (KAFKA-14824: no leaked copies).

        Works even when the future was taken offline because its *source* directory failed:
        what matters is whether the future's own directory is live. Returns the ``-delete``
        path queued for deletion, or ``None`` when there is nothing to remove (the directory is
        offline, or the folder is already gone or queued).
        """
        with self._lock:
            if self._future_logs.get(tp) is future:
                del self._future_logs[tp]
            with future.lock:
                future.close_quietly()
                parsed = parse_dir_name(os.path.basename(future.dir_path))
                if (
                    self.channel.is_offline(future.log_dir)
                    or future.successor is not None
                    or parsed is None
                    or parsed.kind is not DirKind.FUTURE
                ):
                    return None
                target = os.path.join(future.log_dir, delete_dir_name(tp))
                with self.channel.guard(future.log_dir, f"discard future copy of {tp}"):
                    if not os.path.isdir(future.dir_path):
                        return None
                    os.rename(future.dir_path, target)
                    fsync_dir(future.log_dir)
                future.dir_path = target
                future.offline = True  # nothing may touch it again
            self._pending_deletes.append(target)
            return target

    def replace_current_with_future_log(
        self,
        tp: TopicPartition,
        source: Log,
        future: Log,
        *,
        catch_up: Callable[[], None],
        on_point: SwapCallback | None = None,
    ) -> bool:
        """Swap a finished move's future log in for the current one (KIP-113; Kafka's
        ``replaceCurrentWithFutureLog``). Returns ``False``, changing nothing, when the future
        has not caught up with the source; raises the error of a failed step.

        One function in a fixed order, so a crash at any point leaves what start-up recovery
        expects (a source with its future, or only a complete future, or only the new log):

        1. flush the future and sync its folder (the bulk, while appends still run);
        2. take this manager's lock, the source's append lock and the future's lock;
        3. ``catch_up()``: the caller copies the last bytes (appends are held now);
        4. the caught-up check: both logs end at the same offset, else return ``False``;
        5. carry the replica's state over: log start offset, high watermark, leader epochs,
           config (the recovery point is the future's own, as it was flushed), and the other
           per-replica files (KAFKA-9263, KAFKA-15608); flush, sync both folders;
        6. ``COMMIT``: the caller may still refuse by raising; then the destination's
           checkpoints are written naming the future, so a crash between the renames keeps
           its offsets;
        7. rename the source to ``-delete`` and sync, then the future to the replica's name and
           sync (if that fails, the source gets its name back before the error is raised);
        8. the future becomes the current log, the source's ``successor`` points at it (holders
           of the old object are redirected), the source is closed and its folder queued for
           deletion in the background (:meth:`run_deletions`).

        ``on_point`` hears each :class:`SwapPoint` as it is passed (the move engine keeps its
        task's state and fires its crash hooks there). Both callbacks run under the locks.
        """
        point = on_point if on_point is not None else _ignore_point
        dest, src_dir = future.log_dir, source.log_dir
        future.flush()
        with self.channel.guard(dest, f"sync future folder of {tp}"):
            fsync_dir(future.dir_path)
        with self._swap_locks(source), future.lock:
            catch_up()
            if self._current_logs.get(tp) is not source or self._future_logs.get(tp) is not future:
                raise InvalidRequestError(
                    f"cannot swap {tp}: {source.dir_path} and {future.dir_path} are not its "
                    "current and future logs"
                )
            if future.log_end_offset != source.log_end_offset:
                return False
            future.adopt_replica_state(
                log_start_offset=source.log_start_offset,
                high_watermark=source.high_watermark,
                epochs=source.epochs.entries(),
                config=source.config,
                producers=source.producers,
                topic_id=source.topic_id,
            )
            self._carry_replica_files(tp, source, future)
            future.flush()
            with self.channel.guard(dest, f"sync future folder of {tp}"):
                fsync_dir(future.dir_path)
            with self.channel.guard(src_dir, f"sync folder of {tp}"):
                fsync_dir(source.dir_path)  # also proves the source can still be renamed
            point(SwapPoint.COMMIT)
            self.write_dir_checkpoints(dest, [future])
            point(SwapPoint.BEFORE_RENAMES)
            original = source.dir_path
            trash = os.path.join(src_dir, delete_dir_name(tp))
            source.rename_dir(trash)
            point(SwapPoint.SOURCE_RENAMED)
            with self.channel.guard(src_dir, f"sync after renaming {tp}"):
                fsync_dir(src_dir)
            point(SwapPoint.BETWEEN_RENAMES)
            try:
                future.rename_dir(os.path.join(dest, log_dir_name(tp)))
                with self.channel.guard(dest, f"sync after renaming {tp}"):
                    fsync_dir(dest)
            except KafkaError:
                if self._undo_rename(tp, source, original):
                    point(SwapPoint.SOURCE_RESTORED)
                raise
            point(SwapPoint.AFTER_RENAMES)
            future.is_future = False
            self._current_logs[tp] = future
            if self._future_logs.get(tp) is future:
                del self._future_logs[tp]
            source.successor = future
            source.close_quietly()
            self._pending_deletes.append(trash)
        return True

    @contextmanager
    def _swap_locks(self, source: Log) -> Iterator[None]:
        """This manager's lock, then the source's append lock, without ever waiting for the
        second while holding the first (a failing append takes the manager's lock too)."""
        while True:
            self._lock.acquire()
            if source.lock.acquire(timeout=_SWAP_LOCK_TRY_S):
                break
            self._lock.release()
            time.sleep(_SWAP_LOCK_BACKOFF_S)
        try:
            yield
        finally:
            source.lock.release()
            self._lock.release()

    def _undo_rename(self, tp: TopicPartition, source: Log, original: str) -> bool:
        """Give the source its name back after the future's rename failed; ``False`` (logged)
        if that fails too: both folders then stay for start-up recovery."""
        try:
            source.rename_dir(original)
            with self.channel.guard(source.log_dir, f"sync after renaming {tp} back"):
                fsync_dir(source.log_dir)
        except KafkaError as e:
            log.error(
                "could not rename %s back to %s: %s",
                source.dir_path,
                original,
                e,
                extra={"event": "replica_move_stranded", "partition": str(tp)},
            )
            return False
        return True

    def _carry_replica_files(self, tp: TopicPartition, source: Log, future: Log) -> None:
        """Per-replica files other than segments and the epoch checkpoint (which the future
        writes itself): ``partition.metadata``, producer snapshots... must move too."""
        with self.channel.guard(source.log_dir, f"list {tp} for a move"):
            files: dict[str, bytes] = {}
            for name in sorted(os.listdir(source.dir_path)):
                if (
                    name == LEADER_EPOCH_CHECKPOINT
                    or parse_segment_file(name) is not None
                    or name.endswith(_TRANSIENT_SUFFIXES)
                    or not os.path.isfile(os.path.join(source.dir_path, name))
                ):
                    continue
                with open(os.path.join(source.dir_path, name), "rb") as f:
                    files[name] = f.read()
        with self.channel.guard(future.log_dir, f"copy {tp} replica files"):
            for name, data in files.items():
                write_atomically(os.path.join(future.dir_path, name), data)

    # -- failure --------------------------------------------------------------------------

    def _on_dir_offline(self, d: str, reason: str) -> None:
        """Runs on the failure channel's handler thread, holding no other lock."""
        retired: list[Log] = []
        with self._lock:
            gone: list[TopicPartition] = []
            for tp, lg in list(self._current_logs.items()):
                if lg.log_dir == d:
                    lg.mark_offline()
                    del self._current_logs[tp]
                    self._offline_replicas[tp] = d
                    gone.append(tp)
                    retired.append(lg)
            for tp, lg in list(self._future_logs.items()):
                if lg.log_dir == d:
                    lg.mark_offline()
                    del self._future_logs[tp]
                    retired.append(lg)
            for tp, lg in self._future_logs.items():
                if tp in self._offline_replicas:
                    lg.mark_offline()  # its source is gone: the move cannot finish
        # Release the failed disk's descriptors (so it can be unmounted and replaced);
        # each under its log's lock, never while holding the manager's.
        for lg in retired:
            lg.close_quietly()
        for listener in self._listeners:
            try:
                listener(d, reason, gone)
            except Exception:
                log.exception("offline replica listener failed")
        if not self.live_dirs() and not self._starting:
            # During start-up the verdict, naming every directory, comes from _check_live.
            self._halt_once(f"every log directory is offline (last: {d}: {reason})")

    def _halt_once(self, reason: str) -> None:
        if self._halted:
            return
        self._halted = True
        if self._halt is not None:
            self._halt(reason)

    # -- describe -------------------------------------------------------------------------

    def describe_log_dirs(
        self, topics: Iterable[str] | None = None, dirs: Iterable[str] | None = None
    ) -> list[LogDirInfo]:
        want_topics = set(topics) if topics is not None else None
        want_dirs = {os.path.normpath(d) for d in dirs} if dirs is not None else None
        out: list[LogDirInfo] = []
        for d in self.dirs:
            if want_dirs is not None and d not in want_dirs:
                continue
            reason = self.channel.reason(d)
            if reason is not None:
                out.append(LogDirInfo(d, False, reason, 0, 0, d in self._cordoned))
                continue
            try:
                with self.channel.guard(d, "statvfs"):
                    total, usable = self.dir_usage(d)
            except KafkaStorageError as e:
                out.append(LogDirInfo(d, False, str(e), 0, 0, d in self._cordoned))
                continue
            replicas: list[ReplicaInfo] = []
            with self._lock:
                pairs = [(lg, False) for lg in self._current_logs.values() if lg.log_dir == d]
                pairs += [(lg, True) for lg in self._future_logs.values() if lg.log_dir == d]
            for lg, is_future in sorted(pairs, key=lambda p: (p[0].tp, p[1])):
                if want_topics is not None and lg.tp.topic not in want_topics:
                    continue
                snap = lg.snapshot()
                lag = 0
                if is_future:
                    cur = self._current_logs.get(lg.tp)
                    lag = max(0, cur.log_end_offset - snap.log_end_offset) if cur else 0
                replicas.append(
                    ReplicaInfo(
                        lg.tp.topic,
                        lg.tp.partition,
                        snap.size,
                        lag,
                        is_future,
                        snap.log_end_offset,
                    )
                )
            out.append(
                LogDirInfo(
                    d,
                    True,
                    None,
                    total,
                    usable,
                    d in self._cordoned,
                    replicas,
                    reserved_bytes=self.reserved_bytes(d),
                    headroom_bytes=self.headroom.of(total),
                )
            )
        return out

    # -- periodic work and shutdown -------------------------------------------------------

    # The periodic duties go on past one log's failure: a failed directory's (reported by
    # the failure channel) or the process's shortage of open files (issue 14: the next round
    # retries it).

    def checkpoint(self, d: str | None = None) -> None:
        """Write the three offset checkpoints of each live directory."""
        for dd in [d] if d else self.live_dirs():
            try:
                self.write_dir_checkpoints(dd)
            except (KafkaStorageError, ResourceShortageError):
                continue

    def flush_all(self) -> None:
        for lg in list(self._current_logs.values()) + list(self._future_logs.values()):
            try:
                if lg.recovery_point < lg.log_end_offset:
                    lg.flush()
            except (KafkaStorageError, ResourceShortageError):
                continue

    def cleanup(self, now: int | None = None) -> int:
        """Retention over every current log; returns the bytes deleted."""
        total = 0
        for lg in list(self._current_logs.values()):
            try:
                total += lg.delete_old_segments(now)
            except (KafkaStorageError, ResourceShortageError):
                continue
        return total

    def shutdown(self) -> None:
        """Flush, checkpoint, and mark each live directory cleanly shut down."""
        with self._lock:
            logs = list(self._current_logs.values()) + list(self._future_logs.values())
        for lg in logs:
            try:
                lg.close()
            except (KafkaStorageError, ResourceShortageError):
                lg.close_quietly()
        for d in self.live_dirs():
            self.checkpoint(d)
            try:
                with self.channel.guard(d, "write clean-shutdown marker"):
                    write_atomically(os.path.join(d, CLEAN_SHUTDOWN_FILE), b"")
            except KafkaStorageError:
                continue


def _ignore_point(point: SwapPoint) -> None:
    """The default :data:`SwapCallback`: a caller with nothing to do at the swap's points."""
