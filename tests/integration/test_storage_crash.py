"""Crash consistency of the storage engine: SIGKILL a writer over and over, then recover.

A child process (tests/integration/storage_child.py) opens a LogManager on three directories,
which runs crash recovery, and appends to four partitions, acknowledging each batch on stdout
only after ``log.flush()``. The parent kills it with SIGKILL at a random moment (during start-up,
while appending, during a clean shutdown) and sometimes tears the tail of an active segment the
way an interrupted write would (garbage, zeros, a partial batch or header, a batch whose last
bytes are zeros). It then opens the directories itself and checks: every acknowledged batch is
there with its exact records, offsets are contiguous, every batch passes its CRC, no torn bytes
remain on disk, the indexes point at real batch boundaries, and the leader-epoch cache matches
the batches. The parent then either shuts down cleanly (the next start trusts the
clean-shutdown marker) or abandons its descriptors without writing anything (the next start
recovers).

The RNG seed is fixed (override with STORAGE_CRASH_SEED=<int>); kill timing is not, so each run
explores different interleavings. A failure message names the seed and the run.

A second group of tests pins down what recovery does with a torn tail in a middle segment.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jbod_broker.storage.checkpoints import CLEAN_SHUTDOWN_FILE
from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition, log_dir_name
from jbod_broker.storage.records import (
    BATCH_HEADER_SIZE,
    build_batch,
    decode_batch,
    first_corrupt_position,
    parse_header,
    validate_batches,
)
from tests.integration.storage_child import (
    BROKER_ID,
    log_config,
    payload_records,
    run_of_seed,
    seed_of_key,
)

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNS = 80
PARTITIONS = 4
MAX_BATCH = log_config().max_message_bytes
DAMAGE_KINDS = ("garbage", "zeros", "partial-batch", "partial-header", "zeroed-batch-tail")


# --------------------------------------------------------------------------------------------
# The model: what the parent knows the logs must hold
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    crc: int
    seed: str


@dataclass
class Model:
    batches: dict[int, list[Batch]] = field(default_factory=lambda: {p: [] for p in range(4)})
    acked: dict[int, dict[int, tuple[int, str]]] = field(
        default_factory=lambda: {p: {} for p in range(4)}
    )

    def leo(self, p: int) -> int:
        return self.batches[p][-1].last + 1 if self.batches[p] else 0


@dataclass
class ChildRun:
    mode: str
    ready: dict[int, int] | None
    acks: list[tuple[int, int, int, str]]
    shut_down: bool
    returncode: int
    stderr: str
    recovery_s: float | None = None  # RECOVERING to READY, as the parent saw it


# --------------------------------------------------------------------------------------------
# Running and killing the child
# --------------------------------------------------------------------------------------------


def run_child(
    dirs: list[str], run: int, rng: random.Random, errfile: Path, recovery_s: float
) -> ChildRun:
    """Run the child once and SIGKILL it.

    ``recovery_s`` is how long start-up (RECOVERING to READY) took in earlier runs: a start-up
    kill lands at a random point inside that window, whatever the speed of the machine.
    """
    roll = rng.random()
    mode = "startup" if roll < 0.2 else "shutdown" if roll < 0.35 else "append"
    cmd = [
        sys.executable,
        "-m",
        "tests.integration.storage_child",
        "--dirs",
        ",".join(dirs),
        "--run",
        str(run),
        "--partitions",
        str(PARTITIONS),
        "--max-seconds",
        "20",
    ]
    if mode == "shutdown":
        cmd += ["--shutdown-after", str(rng.randint(1, 150))]
    lines: list[bytes] = []
    recovering = threading.Event()
    ready = threading.Event()
    times: dict[str, float] = {}
    with open(errfile, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    stdout = proc.stdout

    def reader() -> None:
        for line in stdout:
            lines.append(line)
            if line.startswith(b"RECOVERING"):
                times["recovering"] = time.monotonic()
                recovering.set()
            if line.startswith(b"READY"):
                times["ready"] = time.monotonic()
                ready.set()
        recovering.set()  # EOF: the child is gone
        ready.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        if mode == "startup":
            assert recovering.wait(20), "the child never started recovering"
            time.sleep(rng.uniform(0.0, 0.8 * recovery_s))
        else:
            assert ready.wait(20), "the child never became ready"
            time.sleep(rng.uniform(0.02, 0.3))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        t.join(10)
        stdout.close()

    out = ChildRun(mode, None, [], False, proc.returncode, errfile.read_text(errors="replace"))
    if "recovering" in times and "ready" in times:
        out.recovery_s = times["ready"] - times["recovering"]
    for raw in lines:
        if not raw.endswith(b"\n"):
            continue  # killed mid-line: not an acknowledgement
        words = raw.decode().split()
        if words[0] == "READY":
            out.ready = {int(p): int(leo) for p, leo in (w.split(":") for w in words[1:])}
        elif words[0] == "ACK":
            out.acks.append((int(words[1]), int(words[2]), int(words[3]), words[4]))
        elif words[0] == "SHUTDOWN":
            out.shut_down = True
    return out


def folder_of(dirs: list[str], p: int) -> str | None:
    tp = TopicPartition("crash", p)
    found = [
        os.path.join(d, log_dir_name(tp))
        for d in dirs
        if os.path.isdir(os.path.join(d, log_dir_name(tp)))
    ]
    assert len(found) <= 1, f"two copies of {tp}: {found}"
    return found[0] if found else None


def segment_files(folder: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith(".log"))


def tear_tail(dirs: list[str], rng: random.Random, run: int, kind: str) -> bool:
    """Append what an interrupted write leaves to the active segment of a random partition.

    Only where the directory was not shut down cleanly: after a clean shutdown nothing is
    being written, so there is nothing to tear.
    """
    p = rng.randrange(PARTITIONS)
    folder = folder_of(dirs, p)
    if folder is None:
        return False
    if os.path.exists(os.path.join(os.path.dirname(folder), CLEAN_SHUTDOWN_FILE)):
        return False
    active = os.path.join(folder, segment_files(folder)[-1])
    with open(active, "rb") as f:
        _, headers = first_corrupt_position(f.read(), max_batch_bytes=MAX_BATCH)
    leo = headers[-1].next_offset if headers else int(os.path.basename(active)[:20])
    # The batch the interrupted write was appending, with the offset it would have had.
    batch = build_batch(payload_records(p, f"{run}.torn"), base_offset=leo)
    if kind == "garbage":
        junk = rng.randbytes(rng.randint(1, 400))
    elif kind == "zeros":
        junk = bytes(rng.randint(1, 5000))
    elif kind == "partial-batch":
        junk = batch[: rng.randint(BATCH_HEADER_SIZE, len(batch) - 1)]
    elif kind == "partial-header":
        junk = batch[: rng.randint(1, BATCH_HEADER_SIZE - 1)]
    else:  # whole length, but the last bytes never reached the disk: a CRC mismatch
        cut = rng.randint(1, len(batch) - BATCH_HEADER_SIZE)
        junk = batch[:-cut] + bytes(cut)
    with open(active, "ab") as f:
        f.write(junk)
    return True


def abandon(root: Path) -> None:
    """Drop every descriptor under ``root`` without writing anything, as a killed process."""
    prefix = str(root.resolve()) + os.sep
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            os.close(int(fd))


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


def check_files(
    folder: str, batches: list[Batch], *, after_clean_shutdown: bool
) -> tuple[list[int], list[str]]:
    """The segment files of one replica, read directly: whole batches, no torn tail, and index
    entries that name real batch boundaries. Returns the segment base offsets and, after a
    clean shutdown, the non-empty segments whose offset index file is empty."""
    names = os.listdir(folder)
    leftovers = [n for n in names if n.endswith((".tmp", ".deleted", ".cleaned", ".swap"))]
    assert leftovers == [], f"{folder}: leftovers {leftovers}"
    logs = segment_files(folder)
    bases = [int(n[:20]) for n in logs]
    for n in names:
        if n.endswith((".index", ".timeindex")):
            assert n.split(".")[0] + ".log" in logs, f"{folder}/{n} has no log"
    seen: list[tuple[int, int, int]] = []
    unindexed: list[str] = []
    for i, (name, base) in enumerate(zip(logs, bases, strict=True)):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        end, headers = first_corrupt_position(data, max_batch_bytes=MAX_BATCH)
        assert end == len(data), f"{folder}/{name}: {len(data) - end} bytes not whole batches"
        if i < len(logs) - 1:
            assert headers, f"{folder}/{name}: empty segment in the middle"
        if headers:
            assert headers[0].base_offset == base, f"{folder}/{name} starts elsewhere"
        if seen and headers:
            assert headers[0].base_offset == seen[-1][1] + 1, f"{folder}/{name}: gap"
        starts = {}
        pos = 0
        for h in headers:
            starts[pos] = h
            pos += h.size_in_bytes
        last_offsets = {h.last_offset for h in headers}
        with open(os.path.join(folder, name[:-4] + ".index"), "rb") as f:
            index = f.read()
        assert len(index) % 8 == 0, f"{folder}/{name}: index of {len(index)} bytes"
        for rel, position in struct.iter_unpack(">ii", index):
            assert position in starts, f"{folder}/{name}: index entry at {position} mid-batch"
            assert starts[position].last_offset == base + rel, f"{folder}/{name}: index"
        with open(os.path.join(folder, name[:-4] + ".timeindex"), "rb") as f:
            tindex = f.read()
        assert len(tindex) % 12 == 0, f"{folder}/{name}: time index of {len(tindex)} bytes"
        for _ts, rel in struct.iter_unpack(">qi", tindex):
            assert base + rel in last_offsets, f"{folder}/{name}: time index names no batch"
        if after_clean_shutdown and headers and not index:
            # Valid (lookups scan from the segment start) but lost for good: see
            # test_index_rebuilt_by_recovery_reaches_the_disk_before_it_is_trusted.
            unindexed.append(name)
        seen += [(h.base_offset, h.last_offset, h.crc) for h in headers]
    assert seen == [(b.base, b.last, b.crc) for b in batches], f"{folder}: files differ"
    return bases, unindexed


def verify(lm: LogManager, model: Model, rng: random.Random) -> dict[int, str]:
    """Check every partition against the model and extend the model; returns the folders."""
    folders = {}
    for p in range(PARTITIONS):
        tp = TopicPartition("crash", p)
        lg = lm.get_log(tp)
        if lg is None:
            assert not model.batches[p] and not model.acked[p], f"{tp} vanished"
            continue
        folders[p] = lg.dir_path
        assert lg.log_start_offset == 0
        prev = model.batches[p]
        found: list[Batch] = []
        offset, end = 0, lg.log_end_offset
        while offset < end:
            data = lg.read(offset, 128 * 1024).data
            assert data, f"{tp}: nothing readable at {offset}, log end {end}"
            headers = validate_batches(data, max_batch_bytes=MAX_BATCH)  # framing and CRC
            pos = 0
            for h in headers:
                assert h.base_offset == offset, f"{tp}: batch at {h.base_offset}, expected {offset}"
                i = len(found)
                if i < len(prev):
                    old = prev[i]
                    assert (old.base, old.last, old.crc) == (h.base_offset, h.last_offset, h.crc), (
                        f"{tp}: batch {i} changed after it was seen"
                    )
                    seed = old.seed
                else:
                    _, recs = decode_batch(data, pos)
                    assert recs[0].key is not None
                    kp, seed, k0 = seed_of_key(recs[0].key)
                    assert (kp, k0) == (p, 0), f"{tp}: batch at {offset}: {recs[0].key!r}"
                    assert [(r.key, r.value) for r in recs] == payload_records(p, seed)
                    assert [r.offset for r in recs] == list(range(h.base_offset, h.next_offset))
                    assert h.partition_leader_epoch == run_of_seed(seed)
                found.append(Batch(h.base_offset, h.last_offset, h.crc, seed))
                pos += h.size_in_bytes
                offset = h.next_offset
        assert offset == end
        assert len(found) >= len(prev), f"{tp}: lost batches {len(found)} < {len(prev)}"

        by_base = {b.base: b for b in found}
        for first, (last, seed) in model.acked[p].items():
            b = by_base.get(first)
            assert b is not None, f"{tp}: acknowledged batch {seed} at {first} is gone"
            assert (b.last, b.seed) == (last, seed), f"{tp}: acknowledged batch {seed} changed"

        epochs: list[tuple[int, int]] = []
        for b in found:
            if not epochs or run_of_seed(b.seed) > epochs[-1][0]:
                epochs.append((run_of_seed(b.seed), b.base))
        assert lg.epochs.entries() == epochs, f"{tp}: leader-epoch cache"

        # The indexes lead to the batch holding any offset.
        for b in rng.sample(found, min(20, len(found))):
            o = rng.randint(b.base, b.last)
            data = lg.read(o, 1).data
            h = parse_header(data)
            assert (h.base_offset, h.last_offset, h.crc) == (b.base, b.last, b.crc), (
                f"{tp}: read at {o} returned the batch at {h.base_offset}"
            )

        bases, _ = check_files(lg.dir_path, found, after_clean_shutdown=False)
        assert bases == [s.base_offset for s in lg.segments]
        model.batches[p] = found
    return folders


# --------------------------------------------------------------------------------------------
# The crash loop
# --------------------------------------------------------------------------------------------


def test_sigkill_loop_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    seed = int(os.environ.get("STORAGE_CRASH_SEED", "20240611"))
    root = tmp_path / "data"
    dirs = [str(root / f"disk{i}") for i in range(3)]
    model = Model()
    stats: Counter[str] = Counter()
    tears = 0
    recoveries: list[float] = []
    started = time.monotonic()
    for run in range(RUNS):
        # One generator per run: its choices do not depend on how earlier kills fell.
        rng = random.Random(f"{seed}/{run}")
        recovery_s = statistics.median(recoveries) if recoveries else 0.05
        child = run_child(dirs, run, rng, tmp_path / "child.err", recovery_s)
        if child.recovery_s is not None:
            recoveries.append(child.recovery_s)
        context = f"seed {seed}, run {run} ({child.mode})"
        assert child.returncode == -signal.SIGKILL, (
            f"{context}: the child exited with {child.returncode}:\n{child.stderr}"
        )
        stats[f"mode:{child.mode}"] += 1
        if child.ready is None:
            stats["killed during recovery"] += 1
        else:
            # What the child recovered is exactly what the parent verified last time.
            assert child.ready == {p: model.leo(p) for p in range(PARTITIONS)}, context
        expect = dict(child.ready or {})
        for p, first, last, s in child.acks:
            assert first == expect[p], f"{context}: ack at {first}, log end was {expect[p]}"
            expect[p] = last + 1
            model.acked[p][first] = (last, s)
        stats["acks"] += len(child.acks)
        if child.shut_down:
            stats["child shut down"] += 1
            for d in dirs:
                assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)), context

        if rng.random() < 0.6:
            kind = DAMAGE_KINDS[tears % len(DAMAGE_KINDS)]
            if tear_tail(dirs, rng, run, kind):
                tears += 1
                stats[f"torn:{kind}"] += 1
                context += f", torn: {kind}"

        lm = LogManager(dirs, broker_id=BROKER_ID, default_config=log_config())
        report = lm.startup()
        lm.channel.drain()
        assert lm.offline_dirs() == {}, context
        assert not any("quarantined" in a for a in report.actions), (context, report.actions)
        try:
            folders = verify(lm, model, rng)
        except AssertionError as e:
            raise AssertionError(f"{context}: {e}") from e
        for p in folders:
            lg = lm.get_log(TopicPartition("crash", p))
            assert lg is not None
            stats[f"segments:{p}"] = len(lg.segments)
        if rng.random() < 0.5:
            lm.shutdown()
            stats["parent clean"] += 1
            for p, folder in folders.items():
                _, unindexed = check_files(folder, model.batches[p], after_clean_shutdown=True)
                stats["unindexed segments after a clean shutdown"] += len(unindexed)
        else:
            abandon(root)
            stats["parent unclean"] += 1
    elapsed = time.monotonic() - started
    median_ms = statistics.median(recoveries) * 1000
    print(
        f"{RUNS} runs in {elapsed:.1f}s, recovery median {median_ms:.0f} ms:",
        dict(sorted(stats.items())),
    )

    assert stats["acks"] > 1000
    assert stats["mode:startup"] >= 5 and stats["killed during recovery"] >= 1
    assert stats["mode:shutdown"] >= 5 and stats["child shut down"] >= 2
    assert stats["parent clean"] >= 10 and stats["parent unclean"] >= 10
    for kind in DAMAGE_KINDS:
        assert stats[f"torn:{kind}"] >= 3, f"{kind} damage applied too rarely"
    for p in range(PARTITIONS):
        assert stats[f"segments:{p}"] >= 3, f"partition {p} rolled too rarely"
    assert all(model.acked[p] for p in range(PARTITIONS))


# --------------------------------------------------------------------------------------------
# A torn tail in a middle segment
# --------------------------------------------------------------------------------------------

MID_TP = TopicPartition("mid", 0)
MID_CONFIG = LogConfig(segment_bytes=4096, retention_ms=-1, index_interval_bytes=512)


def _build_four_segments(log_dir: str) -> tuple[str, list[list[Batch]]]:
    """A closed log of four segments; returns its folder and the batches of each segment."""
    folder = os.path.join(log_dir, log_dir_name(MID_TP))
    lg = Log.create(folder, MID_TP, MID_CONFIG, LogDirFailureChannel(), log_dir=log_dir)
    n = 0
    while len(lg.segments) < 4 or lg.active.size < 2000:
        lg.append_as_leader(build_batch(payload_records(0, f"1.{n}")), leader_epoch=1)
        n += 1
    lg.close()
    per_segment = []
    for name in segment_files(folder):
        with open(os.path.join(folder, name), "rb") as f:
            data = f.read()
        _, headers = first_corrupt_position(data)
        per_segment.append(
            [Batch(h.base_offset, h.last_offset, h.crc, f"1.{i}") for i, h in enumerate(headers)]
        )
    return folder, per_segment


def _all_batches(lg: Log) -> list[tuple[int, int, int]]:
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 64 * 1024).data
        if not data:
            break
        for h in validate_batches(data):
            out.append((h.base_offset, h.last_offset, h.crc))
            offset = h.next_offset
    return out


@pytest.mark.parametrize("damage", ["truncated-last-batch", "garbage-after-last-batch"])
def test_torn_middle_segment_below_log_end_drops_the_later_segments(
    tmp_path: Path, damage: str
) -> None:
    """LogLoader._load_segments: recovering a segment whose tail was torn cuts the tail and deletes
    every later segment ("later segments cannot follow it"). Recovery starts at the segment
    holding the recovery point, so a recovery point of 0 re-checks every segment."""
    log_dir = str(tmp_path)
    folder, segs = _build_four_segments(log_dir)
    names = segment_files(folder)
    snapshots = sorted(n for n in os.listdir(folder) if n.endswith(".snapshot"))
    middle = os.path.join(folder, names[1])
    if damage == "truncated-last-batch":
        size = os.path.getsize(middle)
        os.truncate(middle, size - 7)  # the last batch lost its final bytes
        survivors = [*segs[0], *segs[1][:-1]]
    else:
        with open(middle, "ab") as f:
            f.write(random.Random(1).randbytes(300))
        survivors = [*segs[0], *segs[1]]

    lg = Log.load(
        folder, MID_TP, MID_CONFIG, LogDirFailureChannel(), log_dir=log_dir, recovery_point=0
    )
    assert [s.base_offset for s in lg.segments] == [segs[0][0].base, segs[1][0].base]
    assert segment_files(folder) == names[:2]
    assert (
        sorted(os.listdir(folder))
        == sorted(
            [
                n
                for name in names[:2]
                for n in (name, name[:-4] + ".index", name[:-4] + ".timeindex")
            ]
            + ["leader-epoch-checkpoint"]
            # producer snapshots (issue 18) past the new log end are deleted with the tail
            + [n for n in snapshots if int(n[:20]) <= lg.log_end_offset]
        )
    )
    assert lg.log_end_offset == survivors[-1].last + 1
    assert _all_batches(lg) == [(b.base, b.last, b.crc) for b in survivors]
    with open(middle, "rb") as f:
        data = f.read()
    assert first_corrupt_position(data)[0] == len(data) == lg.segments[1].size
    assert lg.epochs.entries() == [(1, 0)]

    # The log goes on from there, and a clean restart sees the same thing.
    info = lg.append_as_leader(build_batch(payload_records(0, "2.0")), leader_epoch=2)
    assert info.first_offset == survivors[-1].last + 1
    lg.close()
    lg2 = Log.load(
        folder,
        MID_TP,
        MID_CONFIG,
        LogDirFailureChannel(),
        log_dir=log_dir,
        recovery_point=info.last_offset + 1,
        clean_shutdown=True,
    )
    got = _all_batches(lg2)
    assert got[:-1] == [(b.base, b.last, b.crc) for b in survivors]
    assert got[-1][:2] == (info.first_offset, info.last_offset)
    assert lg2.epochs.entries() == [(1, 0), (2, info.first_offset)]
    lg2.close()


def test_torn_middle_segment_below_the_recovery_point_is_not_rechecked(tmp_path: Path) -> None:
    """Segments wholly below the recovery point were flushed: they are opened, not recovered,
    so a damaged tail there does not cost the later segments (Kafka's LogLoader does the same).
    The whole batches stay readable; the torn batch's offsets read as a gap."""
    log_dir = str(tmp_path)
    folder, segs = _build_four_segments(log_dir)
    names = segment_files(folder)
    middle = os.path.join(folder, names[1])
    os.truncate(middle, os.path.getsize(middle) - 7)
    recovery_point = segs[3][0].base  # in the last segment

    lg = Log.load(
        folder,
        MID_TP,
        MID_CONFIG,
        LogDirFailureChannel(),
        log_dir=log_dir,
        recovery_point=recovery_point,
    )
    assert segment_files(folder) == names
    assert lg.log_end_offset == segs[3][-1].last + 1
    whole = [*segs[0], *segs[1][:-1], *segs[2], *segs[3]]
    assert _all_batches(lg) == [(b.base, b.last, b.crc) for b in whole]
    lg.close()


def test_index_rebuilt_by_recovery_reaches_the_disk_before_it_is_trusted(tmp_path: Path) -> None:
    log_dir = str(tmp_path)
    folder = os.path.join(log_dir, log_dir_name(MID_TP))
    lg = Log.create(folder, MID_TP, MID_CONFIG, LogDirFailureChannel(), log_dir=log_dir)
    for n in range(4):
        lg.append_as_leader(build_batch(payload_records(0, f"1.{n}")), leader_epoch=1)
    end = lg.flush()  # everything durable: the recovery point is the log end
    abandon(tmp_path)  # crash 1

    # Restart: no clean shutdown, so the last segment is recovered (its indexes rebuilt).
    lg = Log.load(
        folder, MID_TP, MID_CONFIG, LogDirFailureChannel(), log_dir=log_dir, recovery_point=end
    )
    assert lg.segments[0].index.entries > 0
    lg.roll()  # as the next append does when the segment is full
    lg.append_as_leader(build_batch(payload_records(0, "2.0")), leader_epoch=2)
    end = lg.flush()
    abandon(tmp_path)  # crash 2

    # Segment 0 is now below the recovery point: it is trusted as it is on disk.
    first = os.path.join(folder, segment_files(folder)[0])
    assert os.path.getsize(first[:-4] + ".index") > 0, "offset index of segment 0 is empty"
    assert os.path.getsize(first[:-4] + ".timeindex") > 0, "time index of segment 0 is empty"


class _Crash(BaseException):
    """Stands for SIGKILL at a chosen instruction: nothing after it runs."""


def test_crash_while_dropping_the_later_segments_recovers_the_same_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = str(tmp_path)
    folder, segs = _build_four_segments(log_dir)
    names = segment_files(folder)
    middle = os.path.join(folder, names[1])
    os.truncate(middle, os.path.getsize(middle) - 7)

    def crash(dir_path: str, base_offset: int) -> None:
        raise _Crash

    with monkeypatch.context() as m:
        # The later segments are removed without being opened (LogSegment.delete_files).
        m.setattr("jbod_broker.storage.log.LogSegment.delete_files", staticmethod(crash))
        with pytest.raises(_Crash):
            Log.load(folder, MID_TP, MID_CONFIG, LogDirFailureChannel(), log_dir=log_dir)
    abandon(tmp_path)

    lg = Log.load(
        folder, MID_TP, MID_CONFIG, LogDirFailureChannel(), log_dir=log_dir, recovery_point=0
    )
    try:
        survivors = [*segs[0], *segs[1][:-1]]
        # What an uninterrupted recovery gives (test_torn_middle_segment_below_log_end_...).
        assert [s.base_offset for s in lg.segments] == [segs[0][0].base, segs[1][0].base]
        assert lg.log_end_offset == survivors[-1].last + 1
    finally:
        lg.close()
