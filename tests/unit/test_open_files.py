"""Issue 14 (1): the process's shortage of open files or memory is never a disk failure.

- classification: EMFILE, ENFILE and ENOMEM (``diskio.RESOURCE_SHORTAGE``) raise
  :class:`ResourceShortageError` from the failure guard, and from the append path that inlines
  it, and the directory stays online; every other errno keeps its old meaning;
- :class:`FileHandles`: at most ``capacity`` segment files open, the least recently used idle
  one closed first, reopened on its next use (also after its folder was renamed); a handle in
  use is never closed; all in use refuses; an EMFILE from elsewhere is met by closing the idle
  ones and trying once more;
- a log and a log manager hold many more segments and replicas than descriptors, with the
  process's real limit lowered for the test;
- a creation refused for the shortage leaves nothing on disk, and LeaderAndIsr refuses just
  that partition, saying why;
- the active segment's lease: appends after the first touch the set no more; the lease ends
  when the segment rolls, closes, is deleted or its disk fails, and the budget takes it back
  when it needs room and the log is not busy, still refusing past capacity when it is.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jbod_broker.storage.segment as segment_mod
from jbod_broker import wire
from jbod_broker.config import BrokerConfig
from jbod_broker.errors import http_status
from jbod_broker.replica_manager import ReplicaManager
from jbod_broker.storage.diskio import (
    OUT_OF_SPACE,
    RESOURCE_SHORTAGE,
    LogDirFailureChannel,
    is_resource_error,
    is_space_error,
)
from jbod_broker.storage.errors import (
    InsufficientSpaceError,
    KafkaStorageError,
    ResourceShortageError,
)
from jbod_broker.storage.handles import (
    MIN_LOG_HANDLES,
    FileHandles,
    log_handles_for,
    raise_open_file_limit,
)
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition, log_dir_name
from jbod_broker.storage.records import build_batch, iter_batches
from jbod_broker.storage.segment import LogSegment

TP = TopicPartition("t", 0)

# -- classification ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "resource", "space"),
    [
        (OSError(errno.EMFILE, "Too many open files"), True, False),
        (OSError(errno.ENFILE, "Too many open files in system"), True, False),
        (OSError(errno.ENOMEM, "Cannot allocate memory"), True, False),
        (OSError(errno.ENOSPC, "No space left on device"), False, True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), False, True),
        (OSError(errno.EIO, "Input/output error"), False, False),
        (PermissionError(errno.EACCES, "Permission denied"), False, False),
        (FileExistsError(errno.EEXIST, "File exists"), False, False),
        (OSError("no errno"), False, False),
        (MemoryError(), False, False),
    ],
    ids=[
        "EMFILE",
        "ENFILE",
        "ENOMEM",
        "ENOSPC",
        "EDQUOT",
        "EIO",
        "EACCES",
        "EEXIST",
        "none",
        "mem",
    ],
)
def test_which_errors_are_the_processs_shortage(
    error: BaseException, resource: bool, space: bool
) -> None:
    assert is_resource_error(error) is resource
    assert is_space_error(error) is space


def test_the_two_shortages_do_not_overlap() -> None:
    assert {errno.EMFILE, errno.ENFILE, errno.ENOMEM} == RESOURCE_SHORTAGE
    assert not RESOURCE_SHORTAGE & OUT_OF_SPACE


@pytest.mark.parametrize("code", sorted(RESOURCE_SHORTAGE), ids=errno.errorcode.get)
@pytest.mark.parametrize("move", [False, True], ids=["replica", "move"])
def test_a_resource_shortage_leaves_the_dir_online(code: int, move: bool) -> None:
    ch = LogDirFailureChannel()
    with (
        pytest.raises(ResourceShortageError) as e,
        ch.guard("/d", "create log t-0", shortage_fails_dir=not move),
    ):
        raise OSError(code, os.strerror(code), "/d/t-0/00000000000000000000.index")
    ch.drain()
    assert not ch.is_offline("/d")
    assert ch.offline_dirs() == {}
    msg = str(e.value)
    assert "create log t-0" in msg and os.strerror(code) in msg and "/d/t-0/" in msg
    assert "no log dir is affected" in msg
    assert not isinstance(e.value, KafkaStorageError)
    with ch.guard("/d", "the next call"):
        pass  # still usable


def test_emfile_names_the_open_file_limit() -> None:
    ch = LogDirFailureChannel()
    with pytest.raises(ResourceShortageError) as e, ch.guard("/d", "open"):
        raise OSError(errno.EMFILE, "Too many open files")
    assert "too many open files" in str(e.value) and "RLIMIT_NOFILE" in str(e.value)


def test_the_shortage_has_its_own_code_not_a_storage_error() -> None:
    """A controller takes KAFKA_STORAGE_ERROR for an offline replica; this is retriable."""
    err = ResourceShortageError("x")
    assert err.kafka_error == "THROTTLING_QUOTA_EXCEEDED"
    assert http_status(err) == 503
    assert err.kafka_error not in (
        KafkaStorageError.kafka_error,
        InsufficientSpaceError.kafka_error,
    )


def test_other_errors_still_take_the_dir_offline() -> None:
    ch = LogDirFailureChannel()
    with pytest.raises(KafkaStorageError), ch.guard("/d", "append"):
        raise OSError(errno.EIO, "Input/output error")
    ch.drain()
    assert ch.is_offline("/d")


def _batch(i: int = 0) -> bytes:
    return build_batch([(None, b"value-%d" % i)])


def test_an_append_that_meets_emfile_is_refused_and_the_log_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append path inlines the guard (``Log._io_failed``): same rule there."""
    ch = LogDirFailureChannel()
    d = str(tmp_path)
    lg = Log.create(str(tmp_path / "t-0"), TP, LogConfig(), ch, log_dir=d)
    lg.append_as_leader(_batch(0), 0)

    def emfile(*_a: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(segment_mod, "pwrite_all", emfile)
    with pytest.raises(ResourceShortageError):
        lg.append_as_leader(_batch(1), 0)
    monkeypatch.undo()
    ch.drain()
    assert not ch.is_offline(d) and not lg.offline
    assert lg.append_as_leader(_batch(2), 0).first_offset == 1
    lg.close()


# -- the bounded set of open segment files ----------------------------------------------------


def _open_fds_under(path: Path) -> int:
    prefix = os.path.realpath(path) + os.sep
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(prefix):
                n += 1
        except OSError:
            continue
    return n


def _files(tmp_path: Path, n: int) -> list[str]:
    paths = [str(tmp_path / f"f{i}") for i in range(n)]
    for i, p in enumerate(paths):
        Path(p).write_bytes(b"file %d" % i)
    return paths


def test_at_most_capacity_are_open_and_the_oldest_idle_one_goes_first(tmp_path: Path) -> None:
    h = FileHandles(3)
    paths = _files(tmp_path, 5)
    owners = [object() for _ in paths]
    for i, (o, p) in enumerate(zip(owners, paths, strict=True)):
        fd = h.acquire(o, p)
        assert os.pread(fd, 6, 0) == b"file %d" % i
        h.release(o)
        assert h.open_count <= 3
    assert _open_fds_under(tmp_path) == 3
    # owners 2, 3, 4 are open; using 2 makes 3 the oldest, so 0's reopen closes 3.
    h.acquire(owners[2], paths[2])
    h.release(owners[2])
    opens = h.opens
    assert os.pread(h.acquire(owners[0], paths[0]), 6, 0) == b"file 0"
    h.release(owners[0])
    assert h.opens == opens + 1
    h.acquire(owners[2], paths[2])  # still open: no new open
    h.release(owners[2])
    assert h.opens == opens + 1
    h.acquire(owners[3], paths[3])  # was closed: reopened
    h.release(owners[3])
    assert h.opens == opens + 2
    assert _open_fds_under(tmp_path) == 3


def test_a_handle_in_use_is_never_closed_and_all_in_use_refuses(tmp_path: Path) -> None:
    h = FileHandles(2)
    paths = _files(tmp_path, 3)
    a, b, c = object(), object(), object()
    fa = h.acquire(a, paths[0])
    fb = h.acquire(b, paths[1])
    with pytest.raises(ResourceShortageError) as e:
        h.acquire(c, paths[2])
    assert "all 2 log file handles" in str(e.value) and "open files" in str(e.value)
    assert os.pread(fa, 6, 0) == b"file 0" and os.pread(fb, 6, 0) == b"file 1"
    h.release(a)
    assert os.pread(h.acquire(c, paths[2]), 6, 0) == b"file 2"  # a's went, b's stays
    assert os.pread(fb, 6, 0) == b"file 1"
    h.release(b)
    h.release(c)


def test_nested_use_of_one_owner_shares_its_descriptor(tmp_path: Path) -> None:
    h = FileHandles(1)
    (p,) = _files(tmp_path, 1)
    o = object()
    fd = h.acquire(o, p)
    assert h.acquire(o, p) == fd
    h.release(o)
    h.close(o)  # closed only when the last use ends
    assert os.pread(fd, 6, 0) == b"file 0"
    h.release(o)
    assert h.open_count == 0
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_missing_file_is_not_made_unless_asked(tmp_path: Path) -> None:
    h = FileHandles(4)
    with pytest.raises(FileNotFoundError):
        h.acquire(object(), str(tmp_path / "gone"))
    o = object()
    h.acquire(o, str(tmp_path / "new"), create=True)
    h.release(o)
    assert (tmp_path / "new").exists()
    assert h.open_count == 1


def test_emfile_from_elsewhere_closes_the_idle_handles_and_tries_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = FileHandles(8)
    paths = _files(tmp_path, 3)
    for i in range(2):
        o = object()
        h.acquire(o, paths[i])
        h.release(o)
    real_open = os.open
    calls: list[str] = []

    def once_emfile(path: str, flags: int, mode: int = 0o777) -> int:
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.EMFILE, "Too many open files", path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", once_emfile)
    o = object()
    assert os.pread(h.acquire(o, paths[2]), 6, 0) == b"file 2"
    assert calls == [paths[2], paths[2]]
    assert h.open_count == 1  # the two idle ones were given back


def test_a_second_emfile_reaches_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = FileHandles(8)
    (p,) = _files(tmp_path, 1)
    held = object()
    h.acquire(held, p)  # in use: nothing idle to give back

    def emfile(path: str, flags: int, mode: int = 0o777) -> int:
        raise OSError(errno.EMFILE, "Too many open files", path)

    monkeypatch.setattr(os, "open", emfile)
    with pytest.raises(OSError) as e:
        h.acquire(object(), p)
    assert e.value.errno == errno.EMFILE


def test_the_storage_takes_half_the_limit() -> None:
    assert log_handles_for(1024) == 512
    assert log_handles_for(1 << 20) == 1 << 19
    assert log_handles_for(10) == MIN_LOG_HANDLES


def test_the_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        lower = max(64, soft // 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))
        budget = raise_open_file_limit()
        assert budget.limit_at_start == lower
        assert budget.limit == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if hard != resource.RLIM_INFINITY:
            assert budget.limit == budget.hard_limit == hard
        assert budget.log_handles == log_handles_for(budget.limit)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- logs and the log manager under a low real limit ------------------------------------------


@pytest.fixture
def low_open_file_limit() -> Iterator[Callable[[int], int]]:
    """Lower this process's soft RLIMIT_NOFILE to what it has open now plus ``spare``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def lower(spare: int) -> int:
        limit = len(os.listdir("/proc/self/fd")) + spare
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
        return limit

    try:
        yield lower
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_log_with_more_segments_than_handles_reads_and_renames(tmp_path: Path) -> None:
    ch = LogDirFailureChannel()
    handles = FileHandles(2)
    cfg = LogConfig(segment_bytes=200)
    lg = Log.create(str(tmp_path / "t-0"), TP, cfg, ch, log_dir=str(tmp_path), handles=handles)
    for i in range(12):
        lg.append_as_leader(_batch(i), 0)
    assert len(lg.segments) >= 6
    assert handles.open_count <= 2
    lg.rename_dir(str(tmp_path / "t-0.renamed"))  # a closed handle reopens by the new path
    got = []
    offset = 0
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20).data
        for _pos, hdr in iter_batches(data):
            got.append(hdr.base_offset)
            offset = hdr.last_offset + 1
    assert got == list(range(12))
    lg.flush()
    lg.close()
    assert handles.open_count == 0
    again = Log.load(
        str(tmp_path / "t-0.renamed"), TP, cfg, ch, log_dir=str(tmp_path), handles=handles
    )
    assert again.log_end_offset == 12
    again.close()


def test_a_log_manager_holds_more_replicas_than_the_process_has_descriptors(
    tmp_path: Path, low_open_file_limit: Callable[[int], int]
) -> None:
    """Before the fix each replica held three descriptors: EMFILE came at about a third of
    the limit and took the directories offline. Now the replicas, their appends, a restart
    that loads them all and a flush all fit in a limit far below their count."""
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    n = 300
    limit = low_open_file_limit(64)
    lm = LogManager(dirs, broker_id=0, handles=FileHandles(16))
    lm.startup()
    for p in range(n):
        lg = lm.get_or_create_log(TopicPartition("t", p), is_new=True)
        lg.append_as_leader(_batch(p), 0)
    assert lm.offline_dirs() == {}
    assert len(lm.current_logs()) == n > limit
    lm.flush_all()
    lm.checkpoint()
    lm.shutdown()

    again = LogManager(dirs, broker_id=0, handles=FileHandles(16))
    again.startup()
    assert again.offline_dirs() == {}
    logs = again.current_logs()
    assert len(logs) == n
    assert all(lg.log_end_offset == 1 for lg in logs.values())
    assert again.handles.open_count <= 16
    again.shutdown()


def _refuse_index_creation(monkeypatch: pytest.MonkeyPatch) -> None:
    """EMFILE when the time index is made: the log's folder and first files exist by then."""
    real_open = os.open

    def refusing(path: str, flags: int, mode: int = 0o777) -> int:
        if path.endswith(".timeindex") and flags & os.O_CREAT:
            raise OSError(errno.EMFILE, "Too many open files", path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refusing)


def test_a_refused_creation_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    lm = LogManager(dirs, broker_id=0)
    lm.startup()
    tp = TopicPartition("t", 7)
    _refuse_index_creation(monkeypatch)
    with pytest.raises(ResourceShortageError) as e:
        lm.get_or_create_log(tp, is_new=True)
    assert "t-7" in str(e.value)
    assert lm.offline_dirs() == {}
    assert lm.get_log(tp) is None
    for d in dirs:
        assert not os.path.exists(os.path.join(d, log_dir_name(tp)))
    monkeypatch.undo()
    assert lm.get_or_create_log(tp, is_new=True).log_end_offset == 0
    lm.shutdown()


def test_leader_and_isr_refuses_only_the_partition_it_cannot_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = BrokerConfig.model_validate(
        {
            "broker.id": 1,
            "log.dirs": [str(tmp_path / "a"), str(tmp_path / "b")],
            "auth.disabled": True,
        }
    )
    lm = LogManager(cfg.log_dirs, broker_id=1, default_config=cfg.log_config())
    lm.startup()
    rm = ReplicaManager(cfg, lm)

    def state(p: int) -> wire.LeaderAndIsrPartition:
        return wire.LeaderAndIsrPartition(
            topic="t",
            partition=p,
            leader=1,
            leader_epoch=0,
            isr=[1],
            replicas=[1],
            is_new_replica=True,
        )

    real_open = os.open

    def refusing(path: str, flags: int, mode: int = 0o777) -> int:
        if "/t-1/" in path and flags & os.O_CREAT:
            raise OSError(errno.EMFILE, "Too many open files", path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refusing)
    resp = rm.leader_and_isr(
        wire.LeaderAndIsrRequest(
            controller_id=0, controller_epoch=1, partitions=[state(p) for p in range(3)]
        )
    )
    errors = {r.partition: (r.error, r.message) for r in resp.partitions}
    assert errors[0] == (None, None) and errors[2] == (None, None)
    code, message = errors[1]
    assert code == "THROTTLING_QUOTA_EXCEEDED"
    assert message is not None and "open files" in message and "t-1" in message
    assert lm.offline_dirs() == {}
    assert sorted(tp.partition for tp in lm.current_logs()) == [0, 2]
    assert TopicPartition("t", 1) not in rm.partitions
    assert not any(os.path.exists(os.path.join(d, "t-1")) for d in cfg.log_dirs)
    lm.shutdown()


# -- the active segment's lease ---------------------------------------------------------------


class _CountingHandles(FileHandles):
    """Counts the pins taken, leases included: appends on a lease take none."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self.acquires = 0

    def acquire(self, owner: object, path: str, *, create: bool = False) -> int:
        self.acquires += 1
        return super().acquire(owner, path, create=create)


def _fds_of(paths: list[str]) -> int:
    """How many of this process's descriptors are open on one of ``paths``."""
    targets = {os.path.realpath(p) for p in paths}
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") in targets
        except OSError:
            continue
    return n


class _Holder:
    """Holds locks in another thread until told to let go (a log busy elsewhere)."""

    def __init__(self, *locks: threading.RLock) -> None:
        self._held = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(locks,), daemon=True)
        self._thread.start()
        assert self._held.wait(10)

    def _run(self, locks: tuple[threading.RLock, ...]) -> None:
        for lock in locks:
            lock.acquire()
        self._held.set()
        self._done.wait(10)
        for lock in locks:
            lock.release()

    def let_go(self) -> None:
        self._done.set()
        self._thread.join(10)


def _log(tmp_path: Path, name: str, handles: FileHandles, **cfg: int) -> Log:
    return Log.create(
        str(tmp_path / name),
        TopicPartition(name.split("-")[0], 0),
        LogConfig(**cfg),
        LogDirFailureChannel(),
        log_dir=str(tmp_path),
        handles=handles,
    )


def test_appends_to_the_active_segment_write_through_a_lease(tmp_path: Path) -> None:
    """The hot path: no pin, no LRU touch, no reopen per append (it used to take both)."""
    handles = _CountingHandles(4)
    lg = _log(tmp_path, "t-0", handles)
    lg.append_as_leader(_batch(0), 0)
    assert lg.active.leased
    acquires, opens = handles.acquires, handles.opens
    for i in range(1, 20):
        lg.append_as_leader(_batch(i), 0)
    assert handles.acquires == acquires and handles.opens == opens
    assert lg.read(0, 1 << 20).data.count(b"value-19") == 1
    lg.close()
    assert handles.open_count == 0


def test_a_roll_ends_the_lease_and_the_sealed_handle_may_go(tmp_path: Path) -> None:
    handles = FileHandles(4)
    lg = _log(tmp_path, "t-0", handles, segment_bytes=200)
    while len(lg.segments) < 2:
        lg.append_as_leader(_batch(len(lg.segments)), 0)
    lg.append_as_leader(_batch(9), 0)
    old, new = lg.segments
    assert not old.leased and new.leased
    busy = _Holder(lg.lock)  # the log is busy elsewhere: only the idle, sealed one may go
    try:
        assert handles.close_idle() == 1
        assert _fds_of([old.log_path]) == 0 and _fds_of([new.log_path]) == 1
    finally:
        busy.let_go()
    assert lg.read(0, 1 << 20).data  # the sealed one reopens to be read
    lg.close()


def test_a_lease_ends_when_the_segment_closes_or_is_deleted(tmp_path: Path) -> None:
    handles = FileHandles(4)
    lg = _log(tmp_path, "t-0", handles)
    lg.append_as_leader(_batch(0), 0)
    seg = lg.active
    path = seg.log_path
    assert seg.leased and _fds_of([path]) == 1
    lg.close()
    assert not seg.leased and _fds_of([path]) == 0 and handles.open_count == 0

    lg = _log(tmp_path, "u-0", handles)
    lg.append_as_leader(_batch(0), 0)
    seg = lg.active
    path = seg.log_path
    lg.truncate_fully_and_start_at(5)  # deletes the leased segment
    assert not os.path.exists(path) and _fds_of([path]) == 0 and not seg.leased
    lg.append_as_leader(_batch(1), 0)
    assert lg.active.leased and lg.log_end_offset == 6
    lg.close()
    assert handles.open_count == 0


def test_a_failed_disk_releases_the_leased_handle(tmp_path: Path) -> None:
    handles = FileHandles(16)
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    lm = LogManager(dirs, broker_id=0, handles=handles)
    lm.startup()
    lm.set_preferred_dir(TP, dirs[0])
    lg = lm.get_or_create_log(TP, is_new=True)
    lg.append_as_leader(_batch(0), 0)
    seg = lg.active
    assert seg.leased and _fds_of([seg.log_path]) == 1
    lm.channel.mark_offline(dirs[0], "test: disk pulled")
    assert not seg.leased and _fds_of([seg.log_path]) == 0
    assert handles.open_count == 0
    lm.shutdown()


def test_the_budget_takes_back_an_idle_lease_and_refuses_past_capacity(tmp_path: Path) -> None:
    handles = FileHandles(2)
    a = _log(tmp_path, "a-0", handles)
    b = _log(tmp_path, "b-0", handles)
    a.append_as_leader(_batch(0), 0)
    b.append_as_leader(_batch(0), 0)
    assert a.active.leased and b.active.leased and handles.open_count == 2
    # Both logs busy elsewhere (mid-append): their leases stay, and a third file is refused.
    busy = _Holder(a.lock, b.lock)
    try:
        with pytest.raises(ResourceShortageError, match="all 2 log file handles"):
            _log(tmp_path, "c-0", handles)
        assert a.active.leased and b.active.leased and handles.open_count == 2
    finally:
        busy.let_go()
    assert not (tmp_path / "c-0").exists()  # nothing half-made
    # Not busy: the oldest lease is given back and its handle closed to make room.
    c = _log(tmp_path, "c-0", handles)
    assert not a.active.leased and b.active.leased and handles.open_count <= 2
    c.append_as_leader(_batch(0), 0)
    assert a.append_as_leader(_batch(1), 0).first_offset == 1  # leases again, by its path
    assert a.active.leased and handles.open_count <= 2
    assert a.read(0, 1 << 20).data.count(b"value-") == 2
    for lg in (a, b, c):
        lg.close()
    assert handles.open_count == 0


def test_a_segment_without_its_logs_lock_pins_per_append(tmp_path: Path) -> None:
    """Tools and tests that make a segment alone: no lease (nothing could take it back)."""
    handles = FileHandles(2)
    seg = LogSegment(str(tmp_path), 0, handles, create=True)
    data = _batch(0)
    seg.append(data, [(0, len(data), -1)])
    assert not seg.leased and handles.close_idle() == 1
    assert seg.read_bytes(0, len(data)) == data
    seg.close()
