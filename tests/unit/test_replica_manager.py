"""Replica manager rules on one in-process broker: HW, ISR, acks, fencing, KIP-112 creation.

Followers are simulated by calling ``fetch_for_follower`` as their fetch requests would.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from jbod_broker import wire
from jbod_broker.config import BrokerConfig
from jbod_broker.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    RequestTimedOutError,
    StaleControllerEpochError,
    UnknownLeaderEpochError,
)
from jbod_broker.fetcher import FetchedPartition, FetcherManager, FetchState, LeaderFetcher
from jbod_broker.replica_manager import ReplicaManager
from jbod_broker.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from jbod_broker.storage.log import AppendInfo, Log
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch

TP = TopicPartition("t", 0)


def make(tmp_path: Path, **over: object) -> ReplicaManager:
    cfg = BrokerConfig.model_validate(
        {
            "broker.id": 1,
            "log.dirs": [str(tmp_path / "a"), str(tmp_path / "b")],
            "auth.disabled": True,
            **over,
        }
    )
    lm = LogManager(cfg.log_dirs, broker_id=1, default_config=cfg.log_config())
    lm.startup()
    return ReplicaManager(cfg, lm)


def lai(
    leader: int = 1,
    epoch: int = 0,
    isr: list[int] | None = None,
    replicas: list[int] | None = None,
    *,
    controller_epoch: int = 1,
    new: bool = True,
    min_isr: int = 1,
) -> wire.LeaderAndIsrRequest:
    return wire.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=controller_epoch,
        partitions=[
            wire.LeaderAndIsrPartition(
                topic=TP.topic,
                partition=TP.partition,
                leader=leader,
                leader_epoch=epoch,
                isr=isr if isr is not None else [1, 2, 3],
                replicas=replicas or [1, 2, 3],
                is_new_replica=new,
                min_insync_replicas=min_isr,
            )
        ],
    )


def follower_fetch(rm: ReplicaManager, replica: int, offset: int, epoch: int = 0) -> None:
    rm.fetch_for_follower(replica, TP, offset, epoch, 1 << 20, throttled=False).records.close()


def rec(n: int = 1) -> bytes:
    return build_batch([(None, b"v%d" % i) for i in range(n)])


async def test_hw_is_min_leo_of_isr_and_acks_all_waits(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai())
    lg = rm.logs.log_or_error(TP)
    await rm.produce(TP, rec(3), acks=1, timeout_ms=100)
    assert lg.log_end_offset == 3 and lg.high_watermark == 0
    follower_fetch(rm, 2, 3)
    assert lg.high_watermark == 0  # broker 3 has not fetched
    follower_fetch(rm, 3, 2)
    assert lg.high_watermark == 2
    follower_fetch(rm, 3, 3)
    assert lg.high_watermark == 3
    with pytest.raises(RequestTimedOutError, match="not replicated"):
        await rm.produce(TP, rec(), acks=-1, timeout_ms=50)
    res = await rm.fetch_consumer(TP, 0, 1 << 20, 0)
    assert res.high_watermark == 3  # the unreplicated record is not visible to consumers


async def test_min_isr_refuses_before_append(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(isr=[1], min_isr=2))
    lg = rm.logs.log_or_error(TP)
    with pytest.raises(NotEnoughReplicasError, match=r"min\.insync\.replicas=2"):
        await rm.produce(TP, rec(), acks=-1, timeout_ms=100)
    assert lg.log_end_offset == 0  # nothing appended
    await rm.produce(TP, rec(), acks=1, timeout_ms=100)  # acks=1 does not need the ISR
    assert lg.log_end_offset == 1


async def test_isr_expands_when_follower_catches_up_and_shrinks_when_it_lags(
    tmp_path: Path,
) -> None:
    rm = make(tmp_path, **{"replica.lag.time.max.ms": 1})
    rm.leader_and_isr(lai(isr=[1, 2]))
    await rm.produce(TP, rec(2), acks=1, timeout_ms=100)
    follower_fetch(rm, 2, 2)
    follower_fetch(rm, 3, 1)
    p = rm.partition(TP)
    assert p.isr == [1, 2]  # 3 is below the high watermark (2): not in sync yet
    follower_fetch(rm, 3, 2)
    assert p.isr == [1, 2, 3] and rm.isr_expands == 1
    await rm.produce(TP, rec(), acks=1, timeout_ms=100)
    time.sleep(0.01)
    rm.shrink_isr_pass()
    assert p.isr == [1] and rm.isr_shrinks == 1


async def test_pending_isr_change_goes_to_controller_and_waits(tmp_path: Path) -> None:
    rm = make(tmp_path)
    sent: list[wire.AlterPartitionItem] = []
    rm.send_alter_partition = sent.append
    rm.leader_and_isr(lai(isr=[1, 2]))
    follower_fetch(rm, 3, 0)
    p = rm.partition(TP)
    assert p.isr == [1, 2] and p.pending_isr == [1, 2, 3]
    assert sent[0].new_isr == [1, 2, 3] and sent[0].partition_epoch == 0
    rm.alter_partition_done(
        wire.AlterPartitionResult(
            topic="t", partition=0, leader=1, leader_epoch=0, isr=[1, 2, 3], partition_epoch=1
        )
    )
    assert p.isr == [1, 2, 3] and p.pending_isr is None and p.partition_epoch == 1
    # A refused change is dropped, the committed ISR stays.
    p.pending_isr = [1]
    rm.alter_partition_done(
        wire.AlterPartitionResult(topic="t", partition=0, error="FENCED_LEADER_EPOCH")
    )
    assert p.isr == [1, 2, 3] and p.pending_isr is None


async def test_fencing(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(epoch=5, controller_epoch=3))
    with pytest.raises(StaleControllerEpochError):
        rm.leader_and_isr(lai(epoch=6, controller_epoch=2))
    assert rm.partition(TP).leader_epoch == 5
    resp = rm.leader_and_isr(lai(epoch=4, controller_epoch=3, leader=2))
    assert resp.partitions[0].error == "FENCED_LEADER_EPOCH"
    assert rm.partition(TP).leader == 1
    with pytest.raises(FencedLeaderEpochError):
        follower_fetch(rm, 2, 0, epoch=4)
    with pytest.raises(UnknownLeaderEpochError):
        follower_fetch(rm, 2, 0, epoch=6)
    with pytest.raises(OffsetOutOfRangeError):
        follower_fetch(rm, 2, 99, epoch=5)
    with pytest.raises(NotLeaderOrFollowerError):
        follower_fetch(rm, 7, 0, epoch=5)  # not a replica
    # Idempotent: the same state twice changes nothing.
    before = (rm.partition(TP).leader_epoch, list(rm.partition(TP).isr))
    rm.leader_and_isr(lai(epoch=5, controller_epoch=3))
    assert (rm.partition(TP).leader_epoch, list(rm.partition(TP).isr)) == before


async def test_follower_refuses_produce(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(leader=2))
    with pytest.raises(NotLeaderOrFollowerError, match="leader: 2"):
        await rm.produce(TP, rec(), acks=1, timeout_ms=100)


async def test_kip112_leader_and_isr_respects_is_new_replica(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.logs.channel.mark_offline(str(tmp_path / "a"), "test")
    resp = rm.leader_and_isr(lai(new=False))
    assert resp.partitions[0].error == "KAFKA_STORAGE_ERROR"
    assert rm.logs.get_log(TP) is None
    resp = rm.leader_and_isr(lai(new=True))
    assert resp.partitions[0].error is None
    assert rm.logs.log_or_error(TP).log_dir == str(tmp_path / "b")


async def test_log_dir_failure_takes_replicas_offline(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai())
    d = rm.logs.log_or_error(TP).log_dir
    gone: list[TopicPartition] = []
    rm.logs.add_offline_listener(lambda _d, _r, tps: gone.extend(tps))
    rm.logs.channel.mark_offline(d, "test")
    rm.replicas_offline(gone)
    assert gone == [TP] and rm.partition(TP).offline
    with pytest.raises(KafkaStorageError):
        await rm.produce(TP, rec(), acks=1, timeout_ms=100)


# -- group commit ---------------------------------------------------------------------------


def test_produce_requests_queued_together_share_one_write(tmp_path: Path) -> None:
    """Requests that reach the partition in the same turn of the loop are one write; each gets
    its own offsets, a corrupt one its own error, and nothing is acknowledged before the write."""
    rm = make(tmp_path)
    rm.leader_and_isr(lai(isr=[1], replicas=[1]))
    bad = bytearray(rec(2))
    bad[-1] ^= 0xFF

    async def go() -> list[object]:
        reqs = [rec(1), rec(2), bytes(bad), rec(3)]
        return await asyncio.gather(
            *(rm.produce(TP, r, acks=1, timeout_ms=1000) for r in reqs), return_exceptions=True
        )

    results = asyncio.run(go())
    assert rm.append_writes == 1 and rm.append_requests == 3
    spans = [(r.first_offset, r.last_offset) for r in results if isinstance(r, AppendInfo)]
    assert spans == [(0, 0), (1, 2), (3, 5)]
    assert type(results[2]).__name__ == "CorruptRecordError"
    assert rm.logs.log_or_error(TP).log_end_offset == 6


def test_a_queued_request_fails_when_leadership_moves_before_the_write(tmp_path: Path) -> None:
    rm = make(tmp_path)
    rm.leader_and_isr(lai(isr=[1], replicas=[1]))

    async def go() -> list[object]:
        t = asyncio.ensure_future(rm.produce(TP, rec(1), acks=1, timeout_ms=1000))
        await asyncio.sleep(0)  # queued, not yet written
        rm.leader_and_isr(lai(leader=2, epoch=1, isr=[1, 2], replicas=[1, 2], new=False))
        return list(await asyncio.gather(t, return_exceptions=True))

    (result,) = asyncio.run(go())
    assert isinstance(result, NotLeaderOrFollowerError)
    assert rm.logs.log_or_error(TP).log_end_offset == 0  # nothing written as a non-leader


# -- a log-dir move swapping the log under produce (issue 14 item 2) -------------------------


def swap_now(rm: ReplicaManager) -> tuple[Log, Log]:
    """Move ``TP`` to the other dir at once (the move engine's copy and swap, simplest form);
    returns the retired source and the log that now holds the data."""
    lm = rm.logs
    source = lm.log_or_error(TP)
    future = lm.create_future_log(TP, next(d for d in lm.dirs if d != source.log_dir))

    def catch_up() -> None:
        res = source.read(future.log_end_offset, 1 << 20)
        if res.data:
            future.append_as_follower(res.data)

    assert lm.replace_current_with_future_log(TP, source, future, catch_up=catch_up)
    return source, future


def swap_before_append(
    rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch, method: str = "append_as_leader_group"
) -> Log:
    """The race of issue 14 (2), made deterministic: the produce path has its log and is about
    to append when the swap takes that log's lock; the append waits, then goes on into the new
    log (``successor``). Returns the log that will be retired."""
    source = rm.logs.log_or_error(TP)
    append = getattr(source, method)

    def swap_then_append(*args: object, **kwargs: object) -> object:
        if source.successor is None:
            swap_now(rm)
        return append(*args, **kwargs)

    monkeypatch.setattr(source, method, swap_then_append)
    return source


def test_acks_all_is_answered_from_the_log_a_swap_put_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An acks=all append that the swap redirected into the new log is committed there at once
    (RF 1): success, and the high watermark equals the log end. The old code computed the HW
    from the retired log's end, below the new records, and answered REQUEST_TIMED_OUT."""
    rm = make(tmp_path)
    rm.leader_and_isr(lai(isr=[1], replicas=[1]))

    async def go() -> AppendInfo:
        await rm.produce(TP, rec(3), acks=-1, timeout_ms=1000)
        retired = swap_before_append(rm, monkeypatch)
        info = await rm.produce(TP, rec(2), acks=-1, timeout_ms=2000)
        assert retired.successor is rm.logs.log_or_error(TP)
        return info

    info = asyncio.run(go())
    assert (info.first_offset, info.last_offset) == (3, 4)
    lg = rm.logs.log_or_error(TP)
    assert (lg.log_end_offset, lg.high_watermark) == (5, 5)


async def test_a_follower_append_a_swap_redirected_takes_the_leaders_hw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follower side of the same race: fetched batches whose append the swap redirected
    into the new log take the leader's high watermark there. The old code capped it by the
    retired log's end, so the follower's HW lagged the data it held until the next fetch."""
    rm = make(tmp_path)
    rm.leader_and_isr(lai(leader=2, isr=[1, 2], replicas=[1, 2]))
    fetcher = LeaderFetcher(FetcherManager(rm), 2)
    fetcher.partitions[TP] = FetchState(needs_truncation=False)
    retired = swap_before_append(rm, monkeypatch, "append_as_follower")
    data = build_batch([(None, b"f%d" % i) for i in range(3)], partition_leader_epoch=0)
    fetcher._apply(FetchedPartition(TP, ErrorCode.none, 3, 0, data))
    lg = rm.logs.log_or_error(TP)
    assert retired.successor is lg
    assert (lg.log_end_offset, lg.high_watermark) == (3, 3)


async def test_a_new_leader_names_no_end_until_its_hw_reaches_its_epoch_start(
    tmp_path: Path,
) -> None:
    """Kafka's OFFSET_NOT_AVAILABLE: broker 1 follows with 3 records while its HW is 0, then
    becomes leader (epoch 1, starting at offset 3). Until broker 2 fetches, its HW (0) lies
    below offsets the old leader may have acknowledged: a client asking for the end must be
    told to ask again, not be given 0 (a consumer would stop short of acknowledged records)."""
    rm = make(tmp_path)
    rm.leader_and_isr(lai(leader=2, isr=[1, 2]))
    lg = rm.logs.log_or_error(TP)
    lg.append_as_follower(rec(3))  # replicated from leader 2, the HW not yet sent
    rm.leader_and_isr(lai(leader=1, epoch=1, isr=[1, 2], new=False))
    p = rm.leader_partition(TP)
    assert (lg.high_watermark, rm.epoch_start_offset(p, lg)) == (0, 3)
    with pytest.raises(OffsetNotAvailableError, match=r"high watermark \(0\) is below"):
        rm.check_offsets_available(p, lg)
    follower_fetch(rm, 2, 3, epoch=1)  # broker 2 has the three: the HW reaches them
    assert lg.high_watermark == 3
    rm.check_offsets_available(p, lg)


async def test_a_long_poll_over_several_partitions_wakes_on_any_and_leaves_no_waiter(
    tmp_path: Path,
) -> None:
    """A follower's long poll (``wait_for_any``) ends when one of its partitions moves or when
    its time is up, and afterwards no partition still holds a waiter for it (each round of
    every follower runs one; left behind, they would pile up on idle partitions)."""
    rm = make(tmp_path)
    tps = [TopicPartition("t", i) for i in range(3)]
    rm.leader_and_isr(
        wire.LeaderAndIsrRequest(
            controller_id=0,
            controller_epoch=1,
            partitions=[
                wire.LeaderAndIsrPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    leader=1,
                    leader_epoch=0,
                    isr=[1, 2, 3],
                    replicas=[1, 2, 3],
                    is_new_replica=True,
                    min_insync_replicas=1,
                )
                for tp in tps
            ],
        )
    )
    parts = [rm.partition(tp) for tp in tps]
    await rm.wait_for_any(tps, 0.01, follower=True)
    assert [p.data_waiters for p in parts] == [[], [], []]
    poll = asyncio.create_task(rm.wait_for_any(tps, 30, follower=True))
    await asyncio.sleep(0)
    assert all(len(p.data_waiters) == 1 for p in parts)
    started = time.monotonic()
    await rm.produce(tps[1], rec(), acks=1, timeout_ms=100)  # the append notifies t-1
    await asyncio.wait_for(poll, 5)
    assert time.monotonic() - started < 5
    assert [p.data_waiters for p in parts] == [[], [], []]
    assert [p.waiters for p in parts] == [[], [], []]


async def _settle() -> None:
    """Let every callback the last step scheduled run (no timer involved)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_an_append_wakes_followers_and_a_hw_move_wakes_producers_and_consumers(
    tmp_path: Path,
) -> None:
    """Two kinds of long poll, each woken by what it waits for (as Kafka's DelayedFetch and
    DelayedProduce): a follower's by records appended, an acks=all producer's and a
    consumer's by the high watermark. An append that leaves the HW where it is (followers in
    the ISR) wakes no producer or consumer, and a follower's fetch that moves the HW wakes no
    other follower's poll (it used to: a fetch round with nothing in it per follower per
    acks=all produce); a leadership change wakes both."""
    rm = make(tmp_path)
    rm.leader_and_isr(lai())  # broker 1 leads, ISR 1, 2, 3
    p = rm.partition(TP)
    lg = rm.logs.log_or_error(TP)
    await rm.produce(TP, rec(), acks=1, timeout_ms=100)
    follower_fetch(rm, 2, 1)
    follower_fetch(rm, 3, 1)
    assert lg.high_watermark == 1

    follower_poll = asyncio.create_task(rm.wait_for_any([TP], 30, follower=True))
    consumer_poll = asyncio.create_task(rm.wait_for_any([TP], 30))
    produce = asyncio.create_task(rm.produce(TP, rec(), acks=-1, timeout_ms=30_000))
    await _settle()
    assert lg.log_end_offset == 2 and lg.high_watermark == 1
    assert follower_poll.done()  # records for it
    assert not consumer_poll.done() and not produce.done()  # the HW did not move
    assert p.waiters  # the producer and the consumer still wait, on the HW

    follower_poll = asyncio.create_task(rm.wait_for_any([TP], 30, follower=True))
    await _settle()
    follower_fetch(rm, 2, 2)
    await _settle()
    assert lg.high_watermark == 1 and not consumer_poll.done() and not produce.done()
    follower_fetch(rm, 3, 2)  # the HW moves to 2
    await _settle()
    assert lg.high_watermark == 2
    assert consumer_poll.done()
    assert (await produce).last_offset == 1
    assert not follower_poll.done()  # nothing new to fetch: its poll goes on
    assert p.data_waiters

    rm.leader_and_isr(lai(leader=2, epoch=1))  # this broker follows now: every poll ends
    await _settle()
    assert follower_poll.done()
    assert p.waiters == [] and p.data_waiters == []
