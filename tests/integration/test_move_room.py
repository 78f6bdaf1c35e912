"""A move never fills a disk (issue 13), on real small filesystems (tmpfs).

- A move of a replica larger than the destination's room is refused before anything is
  written: no future folder, the source and the destination unchanged, the destination online
  (in-process and through a broker process's alter-replica-log-dirs).
- Two moves that each fit alone but not together: the second is refused naming the first's
  reservation; when the first ends (cancelled here) its reservation is released and the second
  is accepted and completes.
- Another writer fills the destination in the middle of a copy: the move fails with the
  shortage named, its future folder is removed, the destination stays online with its other
  replica readable, the source is intact and appends to it go on.

Mounting a tmpfs needs CAP_SYS_ADMIN; where it is forbidden these tests skip saying so.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalBroker, lead_alone, write_token
from jbod_broker.move import MoveState, ReplicaMoveEngine
from jbod_broker.storage.errors import InsufficientSpaceError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch
from tests.move_helpers import Appender, fill, iter_records, parse_payload, read_values
from tests.tmpfs import fill_up, free_bytes, mounted_tmpfs
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
CONFIG = LogConfig(segment_bytes=256 * 1024, retention_ms=-1)
A, B, C = TopicPartition("room", 0), TopicPartition("room", 1), TopicPartition("room", 2)


@pytest.fixture
def dirs(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A roomy source dir and an 8 MiB tmpfs destination."""
    big = str(tmp_path / "big")
    with mounted_tmpfs(str(tmp_path / "small"), "8m") as small:
        yield big, small


@pytest.fixture
def lm(dirs: tuple[str, str]) -> Iterator[LogManager]:
    m = LogManager(list(dirs), broker_id=1, default_config=CONFIG)
    m.startup()
    yield m
    m.shutdown()


def make(lm: LogManager, tp: TopicPartition, d: str, nbytes: int) -> Log:
    lm.set_preferred_dir(tp, d)
    lg = lm.get_or_create_log(tp, is_new=True)
    fill(lg, nbytes, batch_bytes=4000)
    lg.update_high_watermark(lg.log_end_offset)
    return lg


def listing(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.startswith("room-"))


def test_a_move_without_room_is_refused_and_changes_nothing(
    lm: LogManager, dirs: tuple[str, str]
) -> None:
    big, small = dirs
    lg = make(lm, A, big, 10 * MIB)
    before, free_before, small_before = read_values(lg), free_bytes(small), listing(small)
    engine = ReplicaMoveEngine(lm)
    try:
        with pytest.raises(InsufficientSpaceError) as e:
            engine.alter_replica_log_dir(A, small)
        msg = str(e.value)
        assert f"log dir {small} has no room for {lg.size} bytes" in msg, msg
        assert "bytes free" in msg and "reserved" in msg and "headroom" in msg
        assert engine.status(A).state in (None, MoveState.NONE)
        assert listing(small) == small_before and free_bytes(small) == free_before
        assert lm.get_log(A) is lg and lg.log_dir == big and read_values(lg) == before
        assert not lm.offline_dirs() and lm.reserved_bytes(small) == 0
    finally:
        engine.shutdown()


def test_two_moves_that_fit_alone_but_not_together(lm: LogManager, dirs: tuple[str, str]) -> None:
    big, small = dirs
    first = make(lm, A, big, 5 * MIB)
    second = make(lm, B, big, 5 * MIB)
    assert lm.room_for_move(A, small).fits and lm.room_for_move(B, small).fits
    engine = ReplicaMoveEngine(lm, throttle_rate=1 * MIB)  # the first is still copying
    try:
        engine.alter_replica_log_dir(A, small)
        with pytest.raises(InsufficientSpaceError) as e:
            engine.alter_replica_log_dir(B, small)
        assert "reserved by moves" in str(e.value)
        reserved = int(str(e.value).split(" free, ")[1].split(" reserved")[0])
        assert 0 < reserved <= first.size, str(e.value)
        assert engine.status(B).state in (None, MoveState.NONE)
        # The first ends (cancelled): its reservation goes with it, and the second fits.
        assert engine.cancel(A)
        assert lm.reserved_bytes(small) == 0
        engine.run_deletions()
        engine.set_throttle_rate(None)
        engine.alter_replica_log_dir(B, small)
        assert engine.wait(B, 60).state is MoveState.DONE
        assert lm.get_log(B) is not None and lm.log_or_error(B).log_dir == small
        assert lm.reserved_bytes(small) == 0  # released at the end too
        assert read_values(lm.log_or_error(B)) == read_values(second)
    finally:
        engine.shutdown()


def test_destination_filled_by_another_writer_mid_copy(
    lm: LogManager, dirs: tuple[str, str]
) -> None:
    big, small = dirs
    lg = make(lm, A, big, 4 * MIB)
    before = read_values(lg)
    neighbour = make(lm, C, small, 300_000)  # another replica living on the destination
    neighbour_before = read_values(neighbour)
    engine = ReplicaMoveEngine(lm, throttle_rate=1 * MIB)
    appender = Appender("live", lambda: lm.get_log(A), pause=0.002)
    filler = ""
    try:
        appender.start()
        engine.alter_replica_log_dir(A, small)
        wait_for(lambda: engine.status(A).bytes_copied > 500_000, "the copy to start")
        filler = fill_up(small)  # another writer takes every block left
        info = engine.wait(A, 60)
        assert info.state is MoveState.FAILED, info
        assert info.error is not None and "ran out of space" in info.error, info.error
        assert f"log dir {small}" in info.error
        # The move's failure, not the disk's: the destination is online, its replica readable.
        assert not lm.offline_dirs()
        assert read_values(lm.log_or_error(C)) == neighbour_before
        # The future folder is gone (its space back), and not retried.
        engine.run_deletions()
        assert listing(small) == ["room-2"]
        assert lm.reserved_bytes(small) == 0
        # The source is intact and appends to it went on.
        wait_for(lambda: appender.acked > 30, "appends after the failure")
        appender.stop()  # first: an append in flight when acked is read would count as extra
        acked = appender.acked
        assert lm.get_log(A) is lg and lg.log_dir == big
        values = read_values(lg)
        assert values[: len(before)] == before
        live = [parse_payload(v)[1] for _, v in iter_records(lg) if v.startswith(b"live:")]
        assert live == list(range(acked))
    finally:
        if appender.is_alive():
            appender.stop()
        engine.shutdown()
        if filler:
            os.unlink(filler)


# -- through a broker process ------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    token_file = str(tmp_path / "token")
    write_token(token_file)
    b = LocalBroker(
        broker_id=0, base_dir=str(tmp_path), token_file=token_file, dir_names=["a", "b"]
    )
    with mounted_tmpfs(b.log_dirs[1], "4m"):
        b.start()
        try:
            yield b
        finally:
            b.stop()


def test_the_broker_refuses_a_move_without_room_and_changes_nothing(broker: LocalBroker) -> None:
    with open(broker.token_file, encoding="utf-8") as f:
        token = f.read().strip()
    a_dir, b_dir = broker.log_dirs

    async def run() -> None:
        async with BrokerClient(broker.url, token=token) as c:
            await lead_alone(c, "room", 1)
            batch = build_batch([(None, b"x" * 4000)] * 16)
            for _ in range(10 * MIB // len(batch) + 1):
                await c.produce("room", 0, batch, acks=-1)
            before = await c.describe_log_dirs()
            resp = await c.alter_replica_log_dirs([("room", 0, b_dir)])
            (r,) = resp.partitions
            assert r.error == "POLICY_VIOLATION", r
            assert r.message is not None and f"log dir {b_dir} has no room" in r.message
            assert "bytes free" in r.message and "headroom" in r.message
            after = await c.describe_log_dirs()
            assert [(d.path, d.is_live, d.partitions) for d in after.log_dirs] == [
                (d.path, d.is_live, d.partitions) for d in before.log_dirs
            ]
            small = next(d for d in after.log_dirs if d.path == b_dir)
            assert small.is_live and small.partitions == [] and small.reserved_bytes == 0
            assert small.headroom_bytes == -(-small.total_bytes // 100)  # 1% by default
            moves = (await c.describe_replica_log_dirs([("room", 0)])).partitions
            assert all(m.state is wire.MoveState.NONE and m.future_log_dir is None for m in moves)

    asyncio.run(run())
    assert not any(n.startswith("room-") for n in os.listdir(b_dir))
    assert any(n.startswith("room-") for n in os.listdir(a_dir))
