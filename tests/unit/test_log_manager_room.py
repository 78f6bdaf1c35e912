"""The log manager's room bookkeeping (issue 13): reservations, headroom, new replicas.

Space is bounded with provisioned capacities (``LogDirSpec.capacity_bytes``), which cap a
directory's usable bytes at ``capacity - what its logs hold``: deterministic on any disk. The
integration tier does the same on real full filesystems (tmpfs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jbod_broker.storage import log_manager
from jbod_broker.storage.errors import (
    InsufficientSpaceError,
    InvalidRequestError,
    ReplicaNotAvailableError,
)
from jbod_broker.storage.log_manager import LogDirSpec, LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from jbod_broker.storage.room import Headroom

A, B, C = TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("c", 0)


def manager(tmp_path: Path, dest_capacity: int, headroom: Headroom | None = None) -> LogManager:
    """Dir 0 is large and holds the sources; dir 1 is the small destination."""
    specs = [
        LogDirSpec(str(tmp_path / "big"), 100_000_000),
        LogDirSpec(str(tmp_path / "small"), dest_capacity),
    ]
    lm = LogManager(specs, broker_id=1, headroom=headroom)
    lm.startup()
    return lm


def source(lm: LogManager, tp: TopicPartition, kib: int) -> int:
    """A replica of about ``kib`` KiB on the big dir; returns its exact size."""
    lm.set_preferred_dir(tp, lm.dirs[0])
    lg = lm.get_or_create_log(tp, is_new=True)
    for _ in range(kib):
        lg.append_as_leader(build_batch([(None, b"x" * 1000)]), 0)
    return lg.size


def test_a_move_that_fits_is_reserved_and_released(tmp_path: Path) -> None:
    lm = manager(tmp_path, 200_000)
    size = source(lm, A, 50)
    small = lm.dirs[1]
    assert lm.reserved_bytes(small) == 0
    lm.reserve_room(A, small)
    assert lm.reserved_bytes(small) == size
    lm.release_room(A, lm.dirs[0])  # not the dir it reserved: nothing released
    assert lm.reserved_bytes(small) == size
    lm.release_room(A, small)
    assert lm.reserved_bytes(small) == 0


def test_a_move_without_room_is_refused_naming_every_figure(tmp_path: Path) -> None:
    lm = manager(tmp_path, 40_000)
    size = source(lm, A, 50)
    small = lm.dirs[1]
    with pytest.raises(InsufficientSpaceError) as e:
        lm.reserve_room(A, small)
    msg = str(e.value)
    assert small in msg and f"no room for {size} bytes" in msg and "40000 bytes free" in msg
    assert "0 reserved" in msg and "0 kept as headroom" in msg
    assert e.value.kafka_error == "POLICY_VIOLATION"
    assert lm.reserved_bytes(small) == 0 and not lm.offline_dirs()


def test_two_moves_that_fit_alone_but_not_together(tmp_path: Path) -> None:
    lm = manager(tmp_path, 100_000)
    size_a = source(lm, A, 60)
    source(lm, B, 60)
    small = lm.dirs[1]
    assert lm.room_for_move(A, small).fits and lm.room_for_move(B, small).fits
    lm.reserve_room(A, small)
    with pytest.raises(InsufficientSpaceError) as e:
        lm.reserve_room(B, small)
    assert f"{size_a} reserved by moves" in str(e.value)
    lm.release_room(A, small)  # the first move ended: the second now fits
    lm.reserve_room(B, small)


def test_reserving_again_for_the_same_replica_does_not_count_itself(tmp_path: Path) -> None:
    lm = manager(tmp_path, 80_000)
    source(lm, A, 60)
    small = lm.dirs[1]
    lm.reserve_room(A, small)
    lm.reserve_room(A, small)  # a resumed or re-sent move: its own promise is not in the way


def test_a_copy_in_progress_holds_only_its_remainder(tmp_path: Path) -> None:
    lm = manager(tmp_path, 200_000)
    size = source(lm, A, 50)
    small = lm.dirs[1]
    lm.reserve_room(A, small)
    src = lm.log_or_error(A)
    fut = lm.create_future_log(A, small)
    half = src.read(0, size // 2)
    fut.append_as_follower(half.data)
    assert 0 < lm.reserved_bytes(small) == size - fut.size < size


def test_a_source_that_grows_while_it_moves_reserves_more(tmp_path: Path) -> None:
    lm = manager(tmp_path, 200_000)
    size = source(lm, A, 50)
    small = lm.dirs[1]
    lm.reserve_room(A, small)
    lm.log_or_error(A).append_as_leader(build_batch([(None, b"y" * 5000)]), 0)
    assert lm.reserved_bytes(small) > size


def test_headroom_is_kept_free(tmp_path: Path) -> None:
    # 50 batches of ~1 kB: fits a 58 kB dir with no headroom; with 10% of it (5800 bytes) kept
    # free, it does not.
    lm = manager(tmp_path / "none", 58_000)
    assert 52_200 < source(lm, A, 50) <= 58_000
    lm.reserve_room(A, lm.dirs[1])
    lm2 = manager(tmp_path / "ten", 58_000, Headroom(percent=10))
    source(lm2, A, 50)
    with pytest.raises(InsufficientSpaceError, match="5800 kept as headroom"):
        lm2.reserve_room(A, lm2.dirs[1])


def test_describe_shows_reservations_and_headroom(tmp_path: Path) -> None:
    lm = manager(tmp_path, 200_000, Headroom(bytes=1234))
    size = source(lm, A, 20)
    lm.reserve_room(A, lm.dirs[1])
    infos = {i.path: i for i in lm.describe_log_dirs()}
    assert infos[lm.dirs[1]].reserved_bytes == size
    assert infos[lm.dirs[1]].headroom_bytes == 1234
    assert infos[lm.dirs[0]].reserved_bytes == 0


def test_a_new_replica_skips_a_dir_under_its_headroom(tmp_path: Path) -> None:
    lm = manager(tmp_path, 20_000, Headroom(bytes=30_000))
    # The small dir is the emptiest by count, but it cannot keep 30 kB free: never chosen,
    # even when named ahead of time.
    lm.set_preferred_dir(C, lm.dirs[1])
    assert lm.get_or_create_log(C, is_new=True).log_dir == lm.dirs[0]


def test_no_dir_with_room_refuses_a_new_replica_and_keeps_dirs_online(tmp_path: Path) -> None:
    specs = [LogDirSpec(str(tmp_path / "d0"), 10_000), LogDirSpec(str(tmp_path / "d1"), 10_000)]
    lm = LogManager(specs, broker_id=1, headroom=Headroom(bytes=20_000))
    lm.startup()
    with pytest.raises(InsufficientSpaceError) as e:
        lm.get_or_create_log(C, is_new=True)
    assert "cannot create a log for c-0" in str(e.value)
    assert all(d in str(e.value) for d in lm.dirs)
    assert not lm.offline_dirs()


def test_log_dirs_remembered_for_replicas_not_here_yet_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14 (4): requests for replicas that never arrive cannot grow memory without end."""
    monkeypatch.setattr(log_manager, "MAX_PREFERRED_DIRS", 3)
    lm = manager(tmp_path, 200_000)
    small = lm.dirs[1]
    ghosts = [TopicPartition("ghost", p) for p in range(4)]
    for tp in ghosts[:3]:
        with pytest.raises(ReplicaNotAvailableError, match="will be created"):
            lm.current_log_or_prefer(tp, small)
    with pytest.raises(InvalidRequestError, match="3 replicas not on broker 1 yet"):
        lm.current_log_or_prefer(ghosts[3], small)
    with pytest.raises(ReplicaNotAvailableError):  # the same one again takes no new slot
        lm.current_log_or_prefer(ghosts[0], small)
    lm.clear_preferred_dir(ghosts[0])  # withdrawn ("any"): its slot is free
    with pytest.raises(ReplicaNotAvailableError):
        lm.current_log_or_prefer(ghosts[3], small)
    assert lm.get_or_create_log(ghosts[3], is_new=True).log_dir == small  # created: forgotten
    assert lm.preferred_dir(ghosts[3]) is None
    with pytest.raises(ReplicaNotAvailableError):
        lm.current_log_or_prefer(ghosts[0], small)
