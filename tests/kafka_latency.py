"""Producer latency beside a move: Kafka's Java producer at a fixed rate, every record's latency
kept, and the percentiles of any time window (issue 22's bench: producer p99 and max while a
reassignment runs, ours against Kafka's own tool).

    with RateProducer.start(bootstrap, "t", rate=5000, record_bytes=1024, out=path) as p:
        t0 = time.time(); ...move...; t1 = time.time()
    stats = window_stats(read_samples(path), t0, t1)

The producer (``tests/kafka_java/RateProducer.java``) runs an open loop: record i is due at
start + i / rate and its latency counts from that due time, so a stalled broker shows as
latency rather than as fewer records. Windows are wall-clock times (``time.time()`` here,
``System.currentTimeMillis`` there: one machine, one clock).
"""

from __future__ import annotations

import json
import math
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.kafka_jars import JAVA_SOURCES, java_command
from tests.waiting import wait_for

RATE_PRODUCER = str(JAVA_SOURCES / "RateProducer.java")


@dataclass(frozen=True)
class Sample:
    due_s: float
    """When the record was due to be sent (epoch seconds)."""
    latency_ms: float


@dataclass(frozen=True)
class Samples:
    acked: list[Sample]
    """In the order the acknowledgements arrived."""
    failed: list[tuple[float, str]]
    """(due time, the producer's error) of each record that was not acknowledged."""


@dataclass(frozen=True)
class Totals:
    sent: int
    acked: int
    errors: int


def parse_samples(text: str) -> Samples:
    """The lines RateProducer writes (see its header); a line of another shape is an error,
    never skipped, so a change in the program's output cannot quietly empty a window."""
    acked: list[Sample] = []
    failed: list[tuple[float, str]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("E "):
            _, due, err = line.split(" ", 2)
            failed.append((int(due) / 1e6, err))
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"line {n} is not '<due us> <latency us>': {line!r}")
        acked.append(Sample(int(parts[0]) / 1e6, int(parts[1]) / 1e3))
    return Samples(acked, failed)


def read_samples(path: str | Path) -> Samples:
    return parse_samples(Path(path).read_text(encoding="ascii"))


TAIL_BYTES = 256 * 1024
"""How much of the end of RateProducer's file :func:`latest_due` reads: four times its write
buffer (64 KiB), so the last flushed lines are always in it."""


def latest_due(path: str | Path) -> float | None:
    """The latest due time (epoch seconds) of the records already answered (acknowledged or
    failed) in RateProducer's file as it is being written, or None before any. Only the end of
    the file is read, without its first line (cut by the seek) and its last one (the writer's
    buffer may end mid-line); answers arrive about in due order, so the end holds the latest."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - TAIL_BYTES))
        tail = f.read().decode("ascii")
    lines = tail.split("\n")[1 if size > TAIL_BYTES else 0 : -1]
    s = parse_samples("\n".join(lines))
    dues = [x.due_s for x in s.acked] + [due for due, _ in s.failed]
    return max(dues, default=None)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest rank (the smallest value with at least ``q`` of the values at or below it), the
    definition latency tools use: always a measured value, never an interpolation."""
    if not sorted_values:
        raise ValueError("no values")
    if not 0 < q <= 1:
        raise ValueError(f"q must be in (0, 1], not {q}")
    return sorted_values[max(math.ceil(q * len(sorted_values)), 1) - 1]


def window_stats(samples: Samples, start_s: float, end_s: float) -> dict[str, float]:
    """Latency of the records due in ``[start_s, end_s)``: count, p50, p99, max (ms), and the
    records in that window that failed."""
    values = sorted(s.latency_ms for s in samples.acked if start_s <= s.due_s < end_s)
    failed = sum(1 for due, _ in samples.failed if start_s <= due < end_s)
    if not values:
        return {"count": 0, "failed": failed}
    return {
        "count": len(values),
        "failed": failed,
        "p50_ms": round(percentile(values, 0.5), 3),
        "p99_ms": round(percentile(values, 0.99), 3),
        "max_ms": round(values[-1], 3),
    }


class RateProducer:
    """The Java program as a context manager: started and waited for until its first
    acknowledgement; stopped (standard input closed) and waited for on leaving."""

    def __init__(self, proc: subprocess.Popen[str], out: Path) -> None:
        self.proc = proc
        self.out = out
        self.totals: Totals | None = None

    @classmethod
    def start(
        cls,
        bootstrap: str,
        topic: str,
        *,
        rate: float,
        record_bytes: int,
        out: str | Path,
        settings: Mapping[str, str] | None = None,
        ready_timeout_s: float = 60,
    ) -> RateProducer:
        args = [bootstrap, topic, str(rate), str(record_bytes), str(out)]
        args += [f"{k}={v}" for k, v in (settings or {}).items()]
        proc = subprocess.Popen(
            java_command(RATE_PRODUCER, args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        p = cls(proc, Path(out))
        try:
            p._wait_ready(ready_timeout_s)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        return p

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=deadline - time.monotonic()):
                    continue
                line = self.proc.stdout.readline()
                if not line:
                    err = self.proc.stderr.read() if self.proc.stderr else ""
                    raise RuntimeError(f"RateProducer exited before its first ack:\n{err[-4000:]}")
                if json.loads(line).get("ready"):
                    return
        raise TimeoutError(f"RateProducer had no acknowledgement in {timeout_s}s")

    def wait_answered_past(self, due_s: float, timeout_s: float = 300) -> None:
        """Until a record due at or after ``due_s`` is answered in the file. The loop sends in
        due order and stops sending at :meth:`stop` (which then waits for every record sent),
        so a producer running behind (a full buffer on a busy machine) stopped earlier would
        leave the records of a window that ends at ``due_s`` partly unsent, and the window
        would hold only its early ones. Seen a write buffer late (64 KiB of lines)."""

        def answered() -> bool:
            if self.proc.poll() is not None:  # raised at once: it can no longer come
                raise RuntimeError(f"RateProducer exited with {self.proc.returncode}")
            latest = latest_due(self.out)
            return latest is not None and latest >= due_s

        wait_for(answered, f"RateProducer to answer a record due after {due_s}", timeout_s)

    def stop(self, timeout_s: float = 120) -> Totals:
        """Stop sending, wait for the outstanding acknowledgements, and return the totals."""
        if self.totals is not None:
            return self.totals
        stdout, stderr = self.proc.communicate(input="stop\n", timeout=timeout_s)
        done = [json.loads(ln) for ln in stdout.splitlines() if ln.strip()]
        last = done[-1] if done else {}
        if self.proc.returncode != 0 or not last.get("done"):
            raise RuntimeError(
                f"RateProducer exited with {self.proc.returncode}:\n{stderr[-4000:]}"
            )
        self.totals = Totals(int(last["sent"]), int(last["acked"]), int(last["errors"]))
        return self.totals

    def __enter__(self) -> RateProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.proc.kill()
            self.proc.wait()
