"""Appends never stop while partitions move between three directories, several at a time.

One appender thread per partition writes batches of known payloads (``<partition>:<seq>``).
Half of them fetch the partition's log for every batch; the other half keep the log object
they started with, so after a few moves they reach the data through a chain of retired logs
(``successor``). Meanwhile rounds of moves send every partition to another directory, in
both directions, with as many moves in flight as there are workers, and the throttle changes
between rounds. Afterwards every log, read from its start, holds exactly what was appended:
in order, without a gap or a duplicate, at consecutive offsets.
"""

from __future__ import annotations

import os
import random
import time
from functools import partial
from pathlib import Path

import pytest

from jbod_broker.move import MoveState, ReplicaMoveEngine
from jbod_broker.storage.log import LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from tests.move_helpers import Appender, iter_records, parse_payload
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 6
ROUNDS = 6


def started(a: Appender) -> bool:
    """Some records appended (or the appender failed: its stop raises why)."""
    return a.acked >= 50 or a.error is not None


def test_appends_during_moves_in_both_directions(tmp_path: Path) -> None:
    dirs = [str(tmp_path / f"disk{i}") for i in range(3)]
    lm = LogManager(dirs, broker_id=1, default_config=LogConfig(segment_bytes=512 * 1024))
    lm.startup()
    tps = [TopicPartition("busy", i) for i in range(PARTITIONS)]
    for i, tp in enumerate(tps):
        lm.set_preferred_dir(tp, dirs[i % 3])
        lm.get_or_create_log(tp, is_new=True)
    initial = {tp: lm.get_log(tp) for tp in tps}
    appenders = [
        Appender(
            str(tp.partition),
            (lambda tp=tp: lm.get_log(tp)),  # type: ignore[misc]
            hold=tp.partition % 2 == 1,
            records_per_batch=4,
            pad=300,
            pause=0.003,  # ~0.3 MB/s each: the moves (4-16 MB/s) can catch up
        )
        for tp in tps
    ]
    engine = ReplicaMoveEngine(lm, throttle_rate=8_000_000)
    rng = random.Random(7)
    moves = 0
    try:
        for a in appenders:
            a.start()
        for a in appenders:  # some data before the first moves
            wait_for(partial(started, a), f"appends to {a.tag}")
        for r in range(ROUNDS):
            step = 1 if r % 2 == 0 else 2  # disk i -> i+1, then i -> i-1: both directions
            for tp in tps:
                lg = lm.get_log(tp)
                assert lg is not None
                dest = dirs[(dirs.index(lg.log_dir) + step) % 3]
                engine.alter_replica_log_dir(tp, dest)
                moves += 1
            engine.set_throttle_rate(rng.choice([4_000_000, 16_000_000, None]))
            for info in engine.wait_all(120):
                assert info.state is MoveState.DONE, info
            busy = sum(1 for t in tps if lm.get_log(t) is not None)
            assert busy == PARTITIONS
        for a in appenders:
            a.stop()
        engine.run_deletions()
        for tp, a in zip(tps, appenders, strict=True):
            lg = lm.get_log(tp)
            assert lg is not None
            offsets, seqs = [], []
            for offset, value in iter_records(lg):
                tag, seq = parse_payload(value)
                assert tag == a.tag
                offsets.append(offset)
                seqs.append(seq)
            assert seqs == list(range(a.acked)), f"{tp}: {len(seqs)} records, {a.acked} appended"
            assert offsets == list(range(len(offsets)))
            assert a.acked > 500
            hops, old = 0, initial[tp]
            while old is not None and old.successor is not None:
                old, hops = old.successor, hops + 1
            assert old is lg and hops == ROUNDS  # held references were redirected 6 times
            names = sorted(os.listdir(lg.log_dir))
            assert not any(n.endswith(("-future", "-delete")) for n in names)
        assert moves == ROUNDS * PARTITIONS
    finally:
        for a in appenders:
            if a.is_alive():
                a.stop()
        engine.shutdown()
        lm.shutdown()


def test_moves_survive_truncation_retention_and_epoch_changes(tmp_path: Path) -> None:
    """One writer appends with rising leader epochs, truncates its tail now and then (a new
    leader's log wins) and applies retention, all through ``LogManager.get_log``, while the
    partition keeps moving between three directories. A model of the log kept by the writer
    must match the log at the end, offsets included, and the epochs must be the writer's."""
    from jbod_broker.storage.records import build_batch

    dirs = [str(tmp_path / f"disk{i}") for i in range(3)]
    cfg = LogConfig(segment_bytes=64 * 1024, retention_bytes=600_000)
    lm = LogManager(dirs, broker_id=1, default_config=cfg)
    lm.startup()
    tp = TopicPartition("chaos", 0)
    lm.get_or_create_log(tp, is_new=True)
    engine = ReplicaMoveEngine(lm, throttle_rate=3_000_000)
    rng = random.Random(11)
    model: dict[int, bytes] = {}
    epoch, seq, moves = 1, 0, 0
    deadline = time.monotonic() + 6
    try:
        while time.monotonic() < deadline:
            info = engine.status(tp)
            if info.state is None or info.state.finished:
                assert info.state in (None, MoveState.DONE), info
                lg = lm.get_log(tp)
                assert lg is not None
                engine.alter_replica_log_dir(tp, rng.choice([d for d in dirs if d != lg.log_dir]))
                moves += 1
            lg = lm.get_log(tp)
            assert lg is not None
            op = rng.random()
            if op < 0.02 and lg.log_end_offset - lg.log_start_offset > 50:
                cut = lg.log_end_offset - rng.randint(1, 40)
                lg.truncate_to(cut)
                cut = lg.log_end_offset  # whole batches: the cut may land lower
                for off in [o for o in model if o >= cut]:
                    del model[off]
                epoch += 1
            elif op < 0.04:
                lg.update_high_watermark(lg.log_end_offset)
                lg.delete_old_segments()
                for off in [o for o in model if o < lg.log_start_offset]:
                    del model[off]
            else:
                values = [f"c:{seq + i}:".encode() + b"z" * 200 for i in range(rng.randint(1, 4))]
                seq += len(values)
                res = lg.append_as_leader(build_batch([(None, v) for v in values]), epoch)
                for i, v in enumerate(values):
                    model[res.first_offset + i] = v
            time.sleep(0.0005)
        engine.set_throttle_rate(None)
        assert engine.wait(tp, 60).state is MoveState.DONE
        lg = lm.get_log(tp)
        assert lg is not None
        got = dict(iter_records(lg))
        assert got == {o: v for o, v in model.items() if o >= lg.log_start_offset}
        assert moves >= 3 and epoch > 2
        assert [e for e, _ in lg.epochs.entries()] == sorted({e for e, _ in lg.epochs.entries()})
        assert lg.epochs.latest_epoch == max(e for e, _ in lg.epochs.entries())
    finally:
        engine.shutdown()
        lm.shutdown()
