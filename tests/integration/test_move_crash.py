"""SIGKILL during log-dir moves, at random moments and at the swap's narrowest windows.

A child process (this module run as ``python -m tests.integration.test_move_crash child``)
opens three log directories, appends to three partitions (each append flushed, then
acknowledged on stdout) and keeps moving the partitions between the directories. The parent
kills it, either after a random delay or by setting ``JBOD_MOVE_CRASH_AT`` so that the child
kills itself at a named point of the swap. Then, in the parent, for every run:

* the folders on disk are one of the states KIP-113's recovery knows, and a new log manager
  recovers them by its rules (both copies: resume; only the future: rename it into place;
  ``-delete``: delete);
* no acknowledged record is lost; every partition holds, per writer, a gap-free and
  duplicate-free prefix of what was written, in order;
* asking again for each interrupted move completes it, after which no ``-future`` or
  ``-delete`` folder is left.

Child protocol (one line each, stdout flushed after each):
``READY``, ``ACK <partition> <tag> <acked count>``, ``MOVE <partition> <dest>``,
``DONE <partition> <state>``, ``ERROR <text>``.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jbod_broker.move import AlterResult, MoveState, ReplicaMoveEngine, start_storage
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import DirKind, TopicPartition, parse_dir_name
from jbod_broker.storage.records import build_batch
from tests.move_helpers import Appender, iter_records, parse_payload, payload

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "crashmove"
PARTITIONS = 3
BROKER_ID = 5
CONFIG = LogConfig(segment_bytes=96 * 1024)
PREFILL_BATCHES = 600  # ~0.7 MB per partition before the first run


def tps() -> list[TopicPartition]:
    return [TopicPartition(TOPIC, i) for i in range(PARTITIONS)]


# -- the child ----------------------------------------------------------------------------------


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dirs", required=True)
    ap.add_argument("--run", type=int, required=True)
    ap.add_argument("--throttle", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-seconds", type=float, default=20.0)
    args = ap.parse_args(argv)
    out_lock = threading.Lock()

    def say(line: str) -> None:
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    dirs = args.dirs.split(",")
    lm = LogManager(dirs, broker_id=BROKER_ID, default_config=CONFIG)
    engine = ReplicaMoveEngine(lm, throttle_rate=args.throttle or None)
    start_storage(lm, engine)
    appenders = []
    for tp in tps():
        tag = f"r{args.run}p{tp.partition}"

        def on_ack(_first: int, acked: int, tp: TopicPartition = tp, tag: str = tag) -> None:
            say(f"ACK {tp.partition} {tag} {acked}")

        a = Appender(
            tag,
            lambda tp=tp: lm.get_log(tp),  # type: ignore[misc]
            records_per_batch=2,
            pad=150,
            flush=True,
            epoch=lambda run=args.run: run + 1,  # type: ignore[misc]
            pause=0.002,
            on_ack=on_ack,
        )
        appenders.append(a)
        a.start()
    rng = random.Random(args.seed)
    say("READY")
    deadline = time.monotonic() + args.max_seconds
    moving: dict[TopicPartition, str] = {}
    while time.monotonic() < deadline:
        for a in appenders:
            if a.error is not None:
                say(f"ERROR appender {a.tag}: {a.error!r}")
                return 4
        for tp in tps():
            if tp in moving:
                info = engine.status(tp)
                if info.state is None or not info.state.finished:
                    continue
                say(f"DONE {tp.partition} {info.state.value}")
                if info.state is not MoveState.DONE:
                    say(f"ERROR move of {tp} ended {info.state.value}: {info.error}")
                    return 4
                del moving[tp]
            lg = lm.get_log(tp)
            assert lg is not None
            dest = rng.choice([d for d in dirs if d != lg.log_dir])
            say(f"MOVE {tp.partition} {dest}")
            engine.alter_replica_log_dir(tp, dest)
            moving[tp] = dest
        time.sleep(0.005)
    return 3


# -- the parent ---------------------------------------------------------------------------------


@dataclass
class History:
    dirs: list[str]
    acked: dict[TopicPartition, dict[str, int]] = field(default_factory=dict)
    tags: dict[TopicPartition, list[str]] = field(default_factory=dict)
    runs: int = 0
    kills_by_point: dict[str, int] = field(default_factory=dict)


def prefill(history: History) -> None:
    lm = LogManager(history.dirs, broker_id=BROKER_ID, default_config=CONFIG)
    lm.startup()
    for i, tp in enumerate(tps()):
        lm.set_preferred_dir(tp, history.dirs[i % len(history.dirs)])
        lg = lm.get_or_create_log(tp, is_new=True)
        for seq in range(0, PREFILL_BATCHES * 2, 2):
            lg.append_as_leader(
                build_batch(
                    [(None, payload("pre", seq, 500)), (None, payload("pre", seq + 1, 500))]
                ),
                0,
            )
        lg.update_high_watermark(lg.log_end_offset)
        history.acked[tp] = {"pre": PREFILL_BATCHES * 2}
        history.tags[tp] = ["pre"]
    lm.shutdown()


def check_log(history: History, tp: TopicPartition, lg: Log) -> None:
    """No acknowledged record lost; per writer a gap-free, duplicate-free prefix, in order."""
    seqs: dict[str, list[int]] = {}
    order: list[str] = []
    expect_offset = None
    for offset, value in iter_records(lg):
        assert expect_offset is None or offset == expect_offset, f"{tp}: offset gap at {offset}"
        expect_offset = offset + 1
        tag, seq = parse_payload(value)
        if not order or order[-1] != tag:
            order.append(tag)
        seqs.setdefault(tag, []).append(seq)
    known = history.tags[tp]
    assert len(order) == len(set(order)), f"{tp}: writers interleave: {order}"
    assert [known.index(t) for t in order] == sorted(known.index(t) for t in order), order
    for tag in known:
        got = seqs.get(tag, [])
        assert got == list(range(len(got))), f"{tp}/{tag}: gap or duplicate in {got[:20]}..."
        acked = history.acked[tp].get(tag, 0)
        assert len(got) >= acked, f"{tp}/{tag}: {acked} acknowledged, {len(got)} in the log"


def classify(dirs: list[str]) -> dict[TopicPartition, dict[DirKind, list[str]]]:
    out: dict[TopicPartition, dict[DirKind, list[str]]] = {tp: {} for tp in tps()}
    for d in dirs:
        for name in os.listdir(d):
            parsed = parse_dir_name(name)
            if parsed is None or not os.path.isdir(os.path.join(d, name)):
                continue
            out.setdefault(parsed.tp, {}).setdefault(parsed.kind, []).append(d)
    return out


def run_child(history: History, *, crash_at: str | None, rng: random.Random) -> None:
    run = history.runs
    history.runs += 1
    env = dict(os.environ)
    env.pop("JBOD_MOVE_CRASH_AT", None)
    env.pop("JBOD_MOVE_PAUSE_AT", None)
    throttle = 0
    if crash_at is not None:
        env["JBOD_MOVE_CRASH_AT"] = crash_at
    else:
        throttle = 3_000_000
    cmd = [
        sys.executable, "-m", "tests.integration.test_move_crash", "child",
        "--dirs", ",".join(history.dirs), "--run", str(run), "--seed", str(rng.randrange(2**31)),
        "--throttle", str(throttle),
    ]  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        lines = _kill_child(proc, crash_at, rng)
    _after_kill(history, run, crash_at, lines)


def _kill_child(proc: subprocess.Popen[str], crash_at: str | None, rng: random.Random) -> list[str]:
    lines: list[str] = []
    ready = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("READY"):
                ready.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    deadline = time.monotonic() + 20
    while not ready.wait(0.05):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"child never became ready: {proc.stderr.read() if proc.stderr else ''}")
    if crash_at is None:
        time.sleep(rng.uniform(0.05, 0.7))
        proc.send_signal(signal.SIGKILL)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"child did not reach {crash_at} within 20 s")
    t.join(5)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == -signal.SIGKILL, f"child exited {proc.returncode}: {stderr}"
    return lines


def _after_kill(history: History, run: int, crash_at: str | None, lines: list[str]) -> None:
    errors = [ln for ln in lines if ln.startswith("ERROR")]
    assert not errors, errors
    point = crash_at or "random"
    history.kills_by_point[point] = history.kills_by_point.get(point, 0) + 1
    pending: dict[TopicPartition, str] = {}
    for ln in lines:
        parts = ln.split(" ")
        try:
            if parts[0] == "ACK" and len(parts) == 4:
                tp = TopicPartition(TOPIC, int(parts[1]))
                history.acked[tp][parts[2]] = int(parts[3])
                if parts[2] not in history.tags[tp]:
                    history.tags[tp].append(parts[2])
            elif parts[0] == "MOVE" and len(parts) == 3:
                pending[TopicPartition(TOPIC, int(parts[1]))] = parts[2]
            elif parts[0] == "DONE" and len(parts) == 3:
                pending.pop(TopicPartition(TOPIC, int(parts[1])), None)
        except (ValueError, KeyError):
            continue  # the last line may be cut by the kill
    for tp in tps():
        tag = f"r{run}p{tp.partition}"
        if tag not in history.tags[tp]:
            history.tags[tp].append(tag)  # written but maybe never acknowledged
    recover_and_complete(history, pending)


def delete_folders(dirs: list[str]) -> set[str]:
    return {
        os.path.join(d, n)
        for d in dirs
        for n in os.listdir(d)
        if (p := parse_dir_name(n)) is not None and p.kind is DirKind.DELETE
    }


def recover_and_complete(history: History, pending: dict[TopicPartition, str]) -> None:
    before = classify(history.dirs)
    trash = delete_folders(history.dirs)
    lm = LogManager(history.dirs, broker_id=BROKER_ID, default_config=CONFIG)
    engine = ReplicaMoveEngine(lm, start=False)  # resumed moves wait until checked
    try:
        report = start_storage(lm, engine)
        assert lm.offline_dirs() == {}
        for tp in tps():
            kinds = before[tp]
            current = kinds.get(DirKind.CURRENT, [])
            future = kinds.get(DirKind.FUTURE, [])
            assert len(current) <= 1 and len(future) <= 1, (tp, kinds)
            assert current or future, f"{tp}: no copy at all: {kinds}"
            lg = lm.get_log(tp)
            assert lg is not None
            if current and future:  # KIP-113: both present -> resume the copy
                assert report.resumable_moves.get(tp) == future[0], (tp, kinds, report)
                assert lg.log_dir == current[0]
            elif future:  # only the future, no bad dir -> renamed into place
                assert lg.log_dir == future[0], (tp, kinds)
            else:
                assert lg.log_dir == current[0]
        assert not trash & delete_folders(history.dirs)  # -delete folders went at start-up
        # Ask again for every move that was interrupted: it completes.
        for tp, dest in pending.items():
            result = engine.alter_replica_log_dir(tp, dest)
            if tp in report.resumable_moves and report.resumable_moves[tp] == dest:
                assert result is AlterResult.IN_PROGRESS  # the resumed copy is not reset
            else:
                assert result in (AlterResult.STARTED, AlterResult.NOTHING_TO_DO), result
        engine.start()
        for info in engine.wait_all(60):
            assert info.state is MoveState.DONE, info
        engine.run_deletions()
        final = classify(history.dirs)
        for tp in tps():
            assert set(final[tp]) == {DirKind.CURRENT}, (tp, final[tp])
            lg = lm.get_log(tp)
            assert lg is not None
            if tp in pending:
                assert lg.log_dir == pending[tp]
            check_log(history, tp, lg)
    finally:
        engine.shutdown()
        lm.shutdown()


POINTS = ["after_lock", "before_renames", "between_renames", "after_renames", "after_swap"]


@pytest.mark.timeout(240)
def test_sigkill_at_random_moments_and_named_points(tmp_path: Path) -> None:
    """60 kills: 25 at random moments (mostly mid-copy, the copy is throttled), 5 at random
    chunks via ``mid_copy@N``, and 6 at each of the swap's named points."""
    history = History([str(tmp_path / f"disk{i}") for i in range(3)])
    prefill(history)
    rng = random.Random(20240611)
    plan: list[str | None] = [None] * 25
    plan += [f"mid_copy@{rng.randint(1, 12)}" for _ in range(5)]
    plan += [p for p in POINTS for _ in range(6)]
    rng.shuffle(plan)
    start = time.monotonic()
    for crash_at in plan:
        run_child(history, crash_at=crash_at, rng=rng)
    assert history.runs == len(plan) >= 50
    print(f"{history.runs} kills in {time.monotonic() - start:.1f}s: {history.kills_by_point}")


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "child":
    sys.exit(child_main(sys.argv[2:]))
