"""The log manager over several directories: start-up, placement, KIP-112 rules, describe.

Failures here are injected through the failure channel (the same path an OSError takes);
the integration tier fails real directories with chmod 000 and a full tmpfs.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from jbod_broker.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    parse_offsets,
    parse_properties,
)
from jbod_broker.storage.errors import (
    InvalidLogDirError,
    InvalidRequestError,
    KafkaStorageError,
    NoLiveLogDirError,
    ReplicaNotAvailableError,
)
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogDirSpec, LogManager
from jbod_broker.storage.names import TopicPartition, future_dir_name, log_dir_name
from jbod_broker.storage.records import build_batch
from jbod_broker.storage.room import Headroom
from jbod_broker.storage.segment import LogSegment


def dirs_of(tmp_path: Path, n: int = 3) -> list[str]:
    return [str(tmp_path / f"disk{i}") for i in range(n)]


def start(dirs: list[str] | list[LogDirSpec], broker_id: int = 1) -> LogManager:
    lm = LogManager(dirs, broker_id=broker_id)
    lm.startup()
    return lm


def fill(lm: LogManager, tp: TopicPartition, n: int, size: int = 1000) -> None:
    lg = lm.get_or_create_log(tp, is_new=True)
    for i in range(n):
        lg.append_as_leader(build_batch([(b"k", bytes([i % 256]) * size)]), 0)


def test_startup_writes_meta_properties(tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path)
    lm = start(dirs, broker_id=7)
    for d in dirs:
        with open(os.path.join(d, "meta.properties"), "rb") as f:
            props = parse_properties(f.read())
        assert props["broker.id"] == "7" and len(props["directory.id"]) == 32
    assert len(set(lm.directory_ids().values())) == 3


def test_dir_of_another_broker_is_offline(tmp_path: Path) -> None:
    dirs = dirs_of(tmp_path, 2)
    start(dirs, broker_id=1).shutdown()
    shutil.rmtree(dirs[1])
    lm = start(dirs, broker_id=2)  # dirs[0] still says broker 1
    assert list(lm.offline_dirs()) == [dirs[0]]
    assert "belongs to broker 1" in lm.offline_dirs()[dirs[0]]


CLUSTER_A = "D25MGopVThydUxwcb1-KEA"
CLUSTER_B = "x2Ps3FFxQ7G0yf0Y3Y2hKw"


def test_dir_of_another_cluster_is_offline_and_a_dir_without_one_is_claimed(
    tmp_path: Path,
) -> None:
    """Kafka's InconsistentClusterIdException, per dir (KIP-112): a retained volume of another
    cluster never mixes its replicas in; a dir written before the cluster had an id gets it."""
    dirs = dirs_of(tmp_path, 3)
    start(dirs[:1], broker_id=1).shutdown()  # no cluster id yet
    lm = LogManager(dirs[1:2], broker_id=1, cluster_id=CLUSTER_B)
    lm.startup()
    lm.shutdown()
    lm = LogManager(dirs, broker_id=1, cluster_id=CLUSTER_A)
    lm.startup()
    assert list(lm.offline_dirs()) == [dirs[1]]
    assert f"belongs to cluster {CLUSTER_B}, not {CLUSTER_A}" in lm.offline_dirs()[dirs[1]]
    for d in (dirs[0], dirs[2]):
        with open(os.path.join(d, "meta.properties"), "rb") as f:
            assert parse_properties(f.read())["cluster.id"] == CLUSTER_A


def test_placement_prefers_free_bytes_with_capacities(tmp_path: Path) -> None:
    d = dirs_of(tmp_path)
    specs = [LogDirSpec(d[0], 10_000_000), LogDirSpec(d[1], 50_000), LogDirSpec(d[2], 10_000_000)]
    lm = start(specs)
    fill(lm, TopicPartition("big", 0), 200)  # ~200 KB into the emptiest (d0: config order)
    placed = {lm.get_or_create_log(TopicPartition("t", p), is_new=True).log_dir for p in range(3)}
    # d1 is small; d0 holds 200 KB; so new replicas go to d2 until it is fuller than d0.
    assert placed == {d[2]}
    infos = {i.path: i for i in lm.describe_log_dirs()}
    assert infos[d[1]].total_bytes == 50_000 and infos[d[1]].usable_bytes == 50_000
    assert infos[d[0]].usable_bytes < 10_000_000 - 200_000


def test_named_dir_wins_and_is_forgotten_after_creation(tmp_path: Path) -> None:
    d = dirs_of(tmp_path)
    lm = start(d)
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, d[2])
    assert lm.get_or_create_log(tp, is_new=True).log_dir == d[2]
    assert lm.preferred_dir(tp) is None


def test_kip112_not_new_replica_is_not_recreated_while_a_dir_is_offline(tmp_path: Path) -> None:
    d = dirs_of(tmp_path)
    lm = start(d)
    lm.channel.mark_offline(d[0], "test: disk pulled")
    tp = TopicPartition("t", 0)
    with pytest.raises(KafkaStorageError, match="not new"):
        lm.get_or_create_log(tp, is_new=False)
    assert lm.get_log(tp) is None
    assert lm.get_or_create_log(tp, is_new=True).log_dir in d[1:]
    # With every dir healthy a missing replica is created even when not new (KIP-112 #4).
    lm2 = start(dirs_of(tmp_path / "other"))
    assert lm2.get_or_create_log(tp, is_new=False) is not None


def test_offline_replicas_are_counted_and_refused(tmp_path: Path) -> None:
    d = dirs_of(tmp_path)
    lm = start(d)
    seen: list[tuple[str, list[TopicPartition]]] = []
    lm.add_offline_listener(lambda dd, _r, tps: seen.append((dd, tps)))
    for p in range(6):
        lm.set_preferred_dir(TopicPartition("t", p), d[p % 3])
        fill(lm, TopicPartition("t", p), 3)
    old = lm.get_log(TopicPartition("t", 0))
    assert old is not None
    lm.channel.mark_offline(d[0], "test")
    assert lm.offline_log_dir_count == 1 and lm.offline_replica_count == 2
    assert seen == [(d[0], [TopicPartition("t", 0), TopicPartition("t", 3)])]
    with pytest.raises(KafkaStorageError, match=d[0]):
        lm.log_or_error(TopicPartition("t", 0))
    with pytest.raises(KafkaStorageError, match="offline"):
        old.append_as_leader(build_batch([(b"k", b"v")]), 0)  # a holder of the old object
    with pytest.raises(KafkaStorageError, match="offline"):
        lm.get_or_create_log(TopicPartition("t", 0), is_new=True)
    with pytest.raises(KafkaStorageError):
        lm.delete_log(TopicPartition("t", 0))  # KAFKA-7313: the same error each time
    with pytest.raises(KafkaStorageError):
        lm.delete_log(TopicPartition("t", 0))
    fill(lm, TopicPartition("t", 1), 3)  # other dirs keep serving
    with pytest.raises(ReplicaNotAvailableError):
        lm.log_or_error(TopicPartition("nope", 0))
    info = {i.path: i for i in lm.describe_log_dirs()}
    err = info[d[0]].error
    assert not info[d[0]].is_live and err and "test" in err


def test_all_dirs_offline_halts(tmp_path: Path) -> None:
    d = dirs_of(tmp_path, 2)
    lm = start(d)
    halted: list[str] = []
    lm.on_no_live_dirs(halted.append)
    lm.channel.mark_offline(d[0], "a")
    assert not halted
    lm.channel.mark_offline(d[1], "b")
    assert halted and "every log directory is offline" in halted[0]


def test_startup_with_no_usable_dir_raises(tmp_path: Path) -> None:
    f = tmp_path / "a-file"
    f.write_text("not a dir")
    with pytest.raises(NoLiveLogDirError, match="every log directory is offline"):
        start([str(f)])


def test_shutdown_writes_kafka_checkpoints_and_marker(tmp_path: Path) -> None:
    d = dirs_of(tmp_path, 1)
    lm = start(d)
    fill(lm, TopicPartition("t", 0), 5)
    fill(lm, TopicPartition("u", 3), 2)
    lm.shutdown()
    with open(os.path.join(d[0], RECOVERY_POINT_CHECKPOINT), "rb") as f:
        raw = f.read()
    assert raw == b"0\n2\nt 0 5\nu 3 2\n"
    assert parse_offsets(raw, "x") == {TopicPartition("t", 0): 5, TopicPartition("u", 3): 2}
    assert os.path.exists(os.path.join(d[0], CLEAN_SHUTDOWN_FILE))
    lm2 = start(d)
    assert not os.path.exists(os.path.join(d[0], CLEAN_SHUTDOWN_FILE))
    lg = lm2.get_log(TopicPartition("t", 0))
    assert lg is not None and lg.log_end_offset == 5


def test_delete_log_renames_then_deletes(tmp_path: Path) -> None:
    d = dirs_of(tmp_path, 1)
    lm = start(d)
    tp = TopicPartition("t", 0)
    fill(lm, tp, 3)
    lm.delete_log(tp)
    names = os.listdir(d[0])
    assert any(n.endswith("-delete") for n in names) and log_dir_name(tp) not in names
    assert lm.run_deletions() == 1
    assert not any(n.endswith("-delete") for n in os.listdir(d[0]))


def test_startup_deletes_leftover_delete_folders(tmp_path: Path) -> None:
    d = dirs_of(tmp_path, 1)
    lm = start(d)
    fill(lm, TopicPartition("t", 0), 3)
    lm.delete_log(TopicPartition("t", 0))
    lm.shutdown()  # crash before the background delete ran
    lm2 = start(d)
    assert len(lm2.pending_deletes) == 1
    lm2.run_deletions()
    assert not any(n.endswith("-delete") for n in os.listdir(d[0]))


def _make_future_only(tmp_path: Path) -> tuple[list[str], TopicPartition]:
    """A crash after the source became -delete but before the future was renamed."""
    d = dirs_of(tmp_path, 2)
    lm = start(d)
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, d[0])
    fill(lm, tp, 4)
    lm.shutdown()
    src = os.path.join(d[0], log_dir_name(tp))
    os.rename(src, os.path.join(d[1], future_dir_name(tp)))
    return d, tp


def test_future_only_with_healthy_dirs_is_renamed_into_place(tmp_path: Path) -> None:
    d, tp = _make_future_only(tmp_path)
    lm = LogManager(d, broker_id=1)
    report = lm.startup()
    lg = lm.get_log(tp)
    assert lg is not None and lg.log_dir == d[1] and lg.log_end_offset == 4
    assert os.path.isdir(os.path.join(d[1], log_dir_name(tp)))
    assert any("renamed" in a for a in report.actions)


def test_future_only_with_a_bad_dir_stays_offline_kafka_16082(tmp_path: Path) -> None:
    d, tp = _make_future_only(tmp_path)
    os.rename(d[0], d[0] + ".gone")
    with open(d[0], "w") as f:  # the first disk is now unusable
        f.write("x")
    lm = LogManager(d, broker_id=1)
    report = lm.startup()
    assert lm.get_log(tp) is None and tp in lm.offline_replicas()
    assert any(n.endswith("-future") for n in os.listdir(d[1]))  # left alone
    assert any("left in place" in a for a in report.actions)


def test_source_and_future_present_is_resumable(tmp_path: Path) -> None:
    d = dirs_of(tmp_path, 2)
    lm = start(d)
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, d[0])
    fill(lm, tp, 4)
    lm.create_future_log(tp, d[1])
    lm.shutdown()
    lm2 = LogManager(d, broker_id=1)
    report = lm2.startup()
    assert report.resumable_moves == {tp: d[1]}
    assert lm2.get_log(tp) is not None and lm2.get_future_log(tp) is not None


def test_duplicate_current_copies_are_resolved_not_fatal(tmp_path: Path) -> None:
    d = dirs_of(tmp_path, 2)
    lm = start(d)
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, d[0])
    fill(lm, tp, 6)
    lm.shutdown()
    shutil.copytree(os.path.join(d[0], log_dir_name(tp)), os.path.join(d[1], log_dir_name(tp)))
    lm2 = LogManager(d, broker_id=1)
    report = lm2.startup()
    lg = lm2.get_log(tp)
    assert lg is not None and lg.log_dir == d[0]  # the one its recovery checkpoint names
    assert any("quarantined" in a and "recovery checkpoint" in a for a in report.actions)
    assert any(n.endswith("-stray") for n in os.listdir(d[1]))


@pytest.mark.parametrize(
    "path",
    ["relative/dir", "", "/etc", "/tmp/../etc", "DISK0/../disk1", "DISK0/./", "DISK0\x00"],
)
def test_resolve_dir_refuses_anything_but_a_configured_dir(tmp_path: Path, path: str) -> None:
    d = dirs_of(tmp_path)
    lm = start(d)
    with pytest.raises(InvalidLogDirError):
        lm.resolve_dir(path.replace("DISK0", d[0]))


def test_resolve_dir_accepts_configured_dirs(tmp_path: Path) -> None:
    d = dirs_of(tmp_path)
    lm = start(d)
    assert lm.resolve_dir(d[1]) == d[1]


def test_describe_log_dirs_fields(tmp_path: Path) -> None:
    d = dirs_of(tmp_path, 2)
    lm = start(d)
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, d[0])
    fill(lm, tp, 5)
    fut = lm.create_future_log(tp, d[1])
    info = {i.path: i for i in lm.describe_log_dirs()}
    cur = info[d[0]].replicas[0]
    assert (cur.topic, cur.partition, cur.is_future, cur.log_end_offset) == ("t", 0, False, 5)
    assert cur.size > 5000
    f = info[d[1]].replicas[0]
    assert f.is_future and f.offset_lag == 5 and f.log_end_offset == 0
    assert fut.log_dir == d[1]
    assert lm.describe_log_dirs(topics=["other"])[0].replicas == []
    assert [i.path for i in lm.describe_log_dirs(dirs=[d[1]])] == [d[1]]


def test_kafka_13315_retention_running_into_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retention pass that reaches its logs only after shutdown closed them.

    In Kafka this sent the directory offline, and the next start ran a full recovery. Here the
    late pass finds the logs closed and does nothing: no directory goes offline, every directory
    keeps its clean-shutdown marker, and the next start trusts it and finds every record.
    """
    dirs = dirs_of(tmp_path, 2)
    cfg = LogConfig(segment_bytes=4096, retention_bytes=8192, retention_ms=-1)
    lm = LogManager(dirs, broker_id=1, default_config=cfg)
    lm.startup()
    tps = [TopicPartition("r", p) for p in range(2)]
    for i, tp in enumerate(tps):
        lm.set_preferred_dir(tp, dirs[i])
        lg = lm.get_or_create_log(tp, is_new=True)
        for _ in range(40):
            lg.append_as_leader(build_batch([(None, b"x" * 500)]), 1)
        lg.update_high_watermark(lg.log_end_offset)
    ends = {tp: lm.log_or_error(tp).log_end_offset for tp in tps}
    starts = {tp: lm.log_or_error(tp).log_start_offset for tp in tps}

    shut = threading.Event()
    real = Log.delete_old_segments

    def late(self: Log, now: int | None = None) -> int:
        assert shut.wait(10)
        return real(self, now)

    monkeypatch.setattr(Log, "delete_old_segments", late)
    retention = threading.Thread(target=lm.cleanup)
    retention.start()
    lm.shutdown()
    shut.set()
    retention.join(10)
    lm.channel.drain()
    assert lm.offline_dirs() == {}
    assert all(os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)) for d in dirs)
    monkeypatch.setattr(Log, "delete_old_segments", real)

    lm2 = LogManager(dirs, broker_id=1, default_config=cfg)
    report = lm2.startup()
    try:
        assert lm2.offline_dirs() == {}
        assert not any("recover" in a for a in report.actions), report.actions
        for tp in tps:
            lg = lm2.log_or_error(tp)
            assert lg.log_end_offset == ends[tp] and lg.log_start_offset == starts[tp]
    finally:
        lm2.shutdown()


# -- the maps behind methods, and the KIP-113 swap ------------------------------------------


def test_maps_are_read_as_copies(tmp_path: Path) -> None:
    lm = start(dirs_of(tmp_path))
    tp = TopicPartition("copies", 0)
    lg = lm.get_or_create_log(tp, is_new=True)
    future = lm.create_future_log(tp, next(d for d in lm.dirs if d != lg.log_dir))
    currents, futures = lm.snapshot_logs()
    assert currents == lm.current_logs() == {tp: lg}
    assert futures == lm.future_logs() == {tp: future}
    currents.clear()
    lm.future_logs().clear()
    lm.offline_replicas()[tp] = "/nowhere"
    assert lm.get_log(tp) is lg and lm.get_future_log(tp) is future
    assert lm.offline_replica_dir(tp) is None and lm.offline_replicas() == {}


def test_preferred_dir_set_and_cleared(tmp_path: Path) -> None:
    lm = start(dirs_of(tmp_path))
    tp = TopicPartition("pref", 0)
    assert lm.preferred_dir(tp) is None
    lm.set_preferred_dir(tp, lm.dirs[1])
    assert lm.preferred_dir(tp) == lm.dirs[1]
    lm.clear_preferred_dir(tp)
    lm.clear_preferred_dir(tp)  # clearing twice is fine
    assert lm.preferred_dir(tp) is None


def test_current_log_or_prefer(tmp_path: Path) -> None:
    d = dirs_of(tmp_path)
    lm = start(d)
    tp = TopicPartition("later", 0)
    with pytest.raises(ReplicaNotAvailableError, match="will be created"):
        lm.current_log_or_prefer(tp, d[2])
    assert lm.preferred_dir(tp) == d[2]
    lg = lm.get_or_create_log(tp, is_new=True)
    assert lg.log_dir == d[2]
    lm.set_preferred_dir(tp, d[1])
    assert lm.current_log_or_prefer(tp, d[0]) is lg
    assert lm.preferred_dir(tp) is None  # the move takes over from a preference
    lm.channel.mark_offline(d[2], "test")
    with pytest.raises(KafkaStorageError, match="offline"):
        lm.current_log_or_prefer(tp, d[0])
    assert lm.preferred_dir(tp) is None


def _source_and_future(lm: LogManager, tp: TopicPartition) -> tuple[Log, Log]:
    lm.set_preferred_dir(tp, lm.dirs[0])
    source = lm.get_or_create_log(tp, is_new=True)
    for epoch in (1, 1, 3):
        source.append_as_leader(build_batch([(None, b"v" * 500)]), epoch)
        source.epochs.assign(epoch, source.log_end_offset - 1)
    source.update_high_watermark(2)
    with open(os.path.join(source.dir_path, "partition.metadata"), "wb") as f:
        f.write(b"version: 0\n")
    return source, lm.create_future_log(tp, lm.dirs[1])


def _copy_all(source: Log, future: Log) -> None:
    """What the move engine's copy does, in the simplest way: the source's batches, appended."""
    res = source.read(future.log_end_offset, 1 << 20)
    if res.data:
        future.append_as_follower(res.data)


def test_swap_refuses_a_future_that_has_not_caught_up(tmp_path: Path) -> None:
    lm = start(dirs_of(tmp_path))
    tp = TopicPartition("swap", 0)
    source, future = _source_and_future(lm, tp)
    points: list[str] = []
    assert not lm.replace_current_with_future_log(
        tp, source, future, catch_up=lambda: None, on_point=points.append
    )
    assert points == [] and lm.get_log(tp) is source and lm.get_future_log(tp) is future
    assert os.path.isdir(os.path.join(lm.dirs[0], log_dir_name(tp)))
    assert os.path.isdir(future.dir_path) and source.successor is None


def test_swap_carries_state_renames_and_queues_the_source(tmp_path: Path) -> None:
    lm = start(dirs_of(tmp_path))
    tp = TopicPartition("swap", 0)
    source, future = _source_and_future(lm, tp)
    epochs, hw, leo = source.epochs.entries(), source.high_watermark, source.log_end_offset
    points: list[str] = []
    assert lm.replace_current_with_future_log(
        tp, source, future, catch_up=lambda: _copy_all(source, future), on_point=points.append
    )
    assert points == [
        "commit",
        "before_renames",
        "source_renamed",
        "between_renames",
        "after_renames",
    ]
    assert lm.get_log(tp) is future and lm.get_future_log(tp) is None
    assert source.successor is future and not future.is_future
    assert future.dir_path == os.path.join(lm.dirs[1], log_dir_name(tp))
    assert (future.log_end_offset, future.high_watermark) == (leo, hw)
    assert future.epochs.entries() == epochs
    with open(os.path.join(future.dir_path, "partition.metadata"), "rb") as f:
        assert f.read() == b"version: 0\n"
    with open(os.path.join(lm.dirs[1], RECOVERY_POINT_CHECKPOINT), "rb") as f:
        assert tp in parse_offsets(f.read(), RECOVERY_POINT_CHECKPOINT)
    (trash,) = lm.pending_deletes
    assert os.path.dirname(trash) == lm.dirs[0] and trash.endswith("-delete")
    assert lm.run_deletions() == 1 and not os.path.exists(trash)


def test_swap_refused_at_commit_changes_nothing(tmp_path: Path) -> None:
    lm = start(dirs_of(tmp_path))
    tp = TopicPartition("swap", 0)
    source, future = _source_and_future(lm, tp)

    def refuse(point: str) -> None:
        if point == "commit":
            raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError, match="cancelled"):
        lm.replace_current_with_future_log(
            tp, source, future, catch_up=lambda: _copy_all(source, future), on_point=refuse
        )
    assert lm.get_log(tp) is source and lm.get_future_log(tp) is future
    assert source.dir_path == os.path.join(lm.dirs[0], log_dir_name(tp))
    assert os.path.isdir(future.dir_path) and future.is_future and lm.pending_deletes == []


def test_swap_of_logs_that_are_not_the_replicas_is_refused(tmp_path: Path) -> None:
    lm = start(dirs_of(tmp_path))
    tp = TopicPartition("swap", 0)
    source, future = _source_and_future(lm, tp)
    other = TopicPartition("swap", 1)
    lm.get_or_create_log(other, is_new=True)
    other_future = lm.create_future_log(other, lm.dirs[2])
    with pytest.raises(InvalidRequestError, match="not its current and future logs"):
        lm.replace_current_with_future_log(tp, source, other_future, catch_up=lambda: None)
    assert lm.get_log(tp) is source and lm.get_future_log(tp) is future
    assert lm.get_future_log(other) is other_future and other_future.is_future


# -- a full disk at start-up: -future copies that cannot be loaded or finished -----------------


def _source_and_half_future(tmp_path: Path) -> tuple[list[str], TopicPartition, str]:
    """A replica on disk0 (~200 KB) and a copy of about half of it on disk1, then a crash."""
    d = dirs_of(tmp_path, 2)
    lm = start(d)
    tp = TopicPartition("t", 0)
    lm.set_preferred_dir(tp, d[0])
    fill(lm, tp, 200)
    source = lm.get_log(tp)
    assert source is not None
    future = lm.create_future_log(tp, d[1])
    future.append_as_follower(source.read(0, 100_000).data)
    lm.shutdown()
    return d, tp, future.dir_path


def test_a_move_without_room_to_finish_is_dropped_at_startup(tmp_path: Path) -> None:
    d, tp, future_path = _source_and_half_future(tmp_path)
    # disk1 is provisioned at 1 MiB, of which the copy holds 100 KB: the other 100 KB would
    # fit, but not beside the 1 MiB headroom this broker keeps (the rule every move passes).
    lm = LogManager(
        [d[0], LogDirSpec(d[1], 1024 * 1024)], broker_id=1, headroom=Headroom(bytes=1 << 20)
    )
    report = lm.startup()
    assert lm.offline_dirs() == {} and report.resumable_moves == {}
    assert lm.get_future_log(tp) is None and not os.path.exists(future_path)
    # Deleted at once, not queued (no -delete folder either): the directory needs the room.
    assert [n for n in os.listdir(d[1]) if os.path.isdir(os.path.join(d[1], n))] == []
    (note,) = [a for a in report.actions if "dropped the future copy" in a]
    assert "the move cannot be resumed" in note and f"log dir {d[1]} has no room" in note
    lg = lm.get_log(tp)
    assert lg is not None and lg.log_dir == d[0] and lg.log_end_offset == 200


def test_a_move_with_room_to_finish_is_resumed(tmp_path: Path) -> None:
    d, tp, future_path = _source_and_half_future(tmp_path)
    lm = LogManager([d[0], LogDirSpec(d[1], 4 * 1024 * 1024)], broker_id=1)
    report = lm.startup()
    assert report.resumable_moves == {tp: d[1]} and os.path.isdir(future_path)


def _futures_cannot_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a -future folder fails for lack of space (the disk is full); others load."""
    real = LogSegment.recover

    def recover(seg: LogSegment, *args: Any, **kwargs: Any) -> int:
        if seg.dir_path.endswith("-future"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), seg.log_path)
        return real(seg, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "recover", recover)


def test_a_future_that_cannot_be_loaded_for_lack_of_space_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, tp, future_path = _source_and_half_future(tmp_path)
    _futures_cannot_load(monkeypatch)
    lm = LogManager(d, broker_id=1)
    report = lm.startup()
    lm.channel.drain()
    assert lm.offline_dirs() == {} and report.resumable_moves == {}
    assert not os.path.exists(future_path) and lm.get_future_log(tp) is None
    (note,) = [a for a in report.actions if "dropped the future copy" in a]
    assert "cannot be loaded for lack of space" in note and "No space left on device" in note
    lg = lm.get_log(tp)
    assert lg is not None and lg.log_end_offset == 200


def test_the_only_copy_that_cannot_be_loaded_for_lack_of_space_takes_its_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, _ = _make_future_only(tmp_path)
    _futures_cannot_load(monkeypatch)
    lm = LogManager(d, broker_id=1)
    report = lm.startup()
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {d[1]}  # nothing can be dropped: it holds the data
    assert "No space left on device" in lm.offline_dirs()[d[1]]
    assert any(n.endswith("-future") for n in os.listdir(d[1]))
    assert any("the only copy" in a for a in report.actions)


def test_a_lone_future_that_cannot_be_loaded_beside_a_bad_dir_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d, tp = _make_future_only(tmp_path)
    os.rename(d[0], d[0] + ".gone")
    with open(d[0], "w") as f:  # the first disk is now unusable
        f.write("x")
    _futures_cannot_load(monkeypatch)
    lm = LogManager(d, broker_id=1)
    report = lm.startup()
    lm.channel.drain()
    assert set(lm.offline_dirs()) == {d[0]}  # the source may be there (KAFKA-16082)
    assert tp in lm.offline_replicas() and lm.get_log(tp) is None
    assert any(n.endswith("-future") for n in os.listdir(d[1]))
    assert any("future left in place" in a for a in report.actions)


def test_advance_high_watermark_reads_the_end_of_the_log_holding_the_data(
    tmp_path: Path,
) -> None:
    """Issue 14 (2): the HW rule runs on the log that holds the data, with its end read under
    its lock, so a holder of the retired source still commits what went into the new log;
    it is bounded by the other replicas' end and never goes back."""
    lm = start(dirs_of(tmp_path))
    tp = TopicPartition("swap", 0)
    source, future = _source_and_future(lm, tp)
    assert lm.replace_current_with_future_log(
        tp, source, future, catch_up=lambda: _copy_all(source, future)
    )
    source.append_as_leader(build_batch([(None, b"after")] * 2), 3)  # lands in the future
    assert (future.log_end_offset, future.high_watermark) == (5, 2)
    assert source.advance_high_watermark(4) and future.high_watermark == 4
    assert not source.advance_high_watermark(3) and future.high_watermark == 4
    assert source.advance_high_watermark() and future.high_watermark == 5
    assert not future.advance_high_watermark() and future.high_watermark == 5


def test_the_log_map_keeps_its_per_dir_counts_in_step() -> None:
    """Placement reads each dir's replica count from the map's counter (not a pass over the
    map): every mutation the manager uses keeps it in step, the others are refused."""
    from types import SimpleNamespace
    from typing import Any, cast

    from jbod_broker.storage.log_manager import _LogMap

    m = _LogMap()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    in_x, in_y = cast(Any, SimpleNamespace(log_dir="/x")), cast(Any, SimpleNamespace(log_dir="/y"))
    m[a] = in_x
    m[b] = in_x
    m[a] = in_y  # replaced: counted once, in its new dir
    assert (m.per_dir["/x"], m.per_dir["/y"]) == (1, 1)
    del m[b]
    assert m.pop(a) is in_y and m.pop(a) is None
    assert (m.per_dir["/x"], m.per_dir["/y"]) == (0, 0)
    for refused in (m.clear, m.popitem, lambda: m.update({a: in_x}), lambda: m.setdefault(a, in_x)):
        with pytest.raises(TypeError, match="per-dir counts"):
            refused()
    assert not m
