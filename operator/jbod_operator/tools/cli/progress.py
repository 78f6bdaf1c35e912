"""The progress bars of ``jbod-ctl logdirmove wait|apply`` and ``reassignments apply --wait``,
drawn from a LogDirMove's or a PartitionReassignment's status.

Only formatting: the numbers (percent, rate, ETA, bytes) are the operator's, read from
``status``, so what the bar shows is what ``kubectl get logdirmoves`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TextIO

from ...models import log_dir_move, reassignment
from ...models.common import human_bytes
from ...models.log_dir_move import MovePhase, ReplicaState
from ...models.reassignment import PartitionPhase, ReassignmentPhase

Formatter = Callable[[Mapping[str, Any] | None], str]


def human_duration(s: float) -> str:
    """``9s``, ``2m05s``, ``1h02m``: short enough for a one-line bar."""
    s = max(0, round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def format_bar(
    status: Mapping[str, Any], *, final: bool, default_phase: str, width: int = 20
) -> list[str]:
    """The parts every bar starts with: ``[########------------]  42%``, the rate, the ETA and
    the phase. ``final``: the phase is final, so no ETA is shown (the operator may leave its
    last estimate in the status)."""
    phase = str(status.get("phase") or default_phase)
    pct = max(0, min(100, int(status.get("progressPercent") or 0)))
    filled = pct * width // 100
    bar = "#" * filled + "-" * (width - filled)
    rate = status.get("rateBytesPerSecond")
    rate_s = f"{human_bytes(rate or 0)}/s"
    eta = status.get("etaSeconds")
    eta_s = "-" if eta is None or final else human_duration(eta) if eta >= 1 else "<1s"
    return [f"[{bar}] {pct:3d}%", rate_s, f"ETA {eta_s}", phase]


def format_progress(status: Mapping[str, Any] | None, width: int = 20) -> str:
    """A LogDirMove's line:
    ``[########------------]  42%  12.3 MiB/s  ETA 9s  Moving  2/6 replicas``.

    A status not written yet reads as Pending at 0%."""
    st = status or {}
    parts = format_bar(
        st,
        final=st.get("phase") in log_dir_move.ENDED_PHASES,
        default_phase=MovePhase.PENDING,
        width=width,
    )
    replicas = st.get("replicas") or []
    if replicas:
        done = sum(1 for r in replicas if r.get("state") == ReplicaState.SUCCEEDED)
        parts.append(f"{done}/{len(replicas)} replicas")
    total = st.get("bytesTotal")
    if total:
        parts.append(f"{human_bytes(int(st.get('bytesCopied') or 0))} of {human_bytes(total)}")
    return "  ".join(parts)


def format_reassignment_progress(status: Mapping[str, Any] | None, width: int = 20) -> str:
    """A PartitionReassignment's line:
    ``[########------------]  42%  12.3 MiB/s  ETA 9s  Running  batch 3  5/12 partitions
    1.2 GiB of 3.0 GiB``. Partitions done count Done and Gone (their topic was deleted), as
    the operator's progressPercent does."""
    st = status or {}
    parts = format_bar(
        st,
        final=st.get("phase") in reassignment.ENDED_PHASES,
        default_phase=ReassignmentPhase.PENDING,
        width=width,
    )
    if st.get("batch"):
        parts.append(f"batch {st['batch']}")
    counts: Mapping[str, int] = st.get("counts") or {}
    if counts:
        done = counts.get(PartitionPhase.DONE, 0) + counts.get(PartitionPhase.GONE, 0)
        parts.append(f"{done}/{sum(counts.values())} partitions")
    total = st.get("bytesToMove")
    if total:
        parts.append(f"{human_bytes(int(st.get('bytesMoved') or 0))} of {human_bytes(total)}")
    return "  ".join(parts)


class ProgressView:
    """A bar redrawn in place on a terminal; plain lines (on change, or every 10 s) otherwise,
    so a log file or CI output gets a readable history instead of carriage returns."""

    def __init__(
        self,
        out: TextIO,
        name: str,
        tty: bool | None = None,
        formatter: Formatter = format_progress,
    ) -> None:
        self.out = out
        self.name = name
        self.tty = out.isatty() if tty is None else tty
        self.formatter = formatter
        self._last_key: tuple[Any, ...] | None = None
        self._last_time = 0.0
        self._drawn = False

    def update(self, status: Mapping[str, Any] | None, now: float) -> None:
        line = self.formatter(status)
        if self.tty:
            self.out.write(f"\r{self.name}: {line}\x1b[K")
            self._drawn = True
        else:
            st = status or {}
            key = (st.get("phase"), st.get("progressPercent"), st.get("batch"))
            if key == self._last_key and now - self._last_time < 10:
                return
            self._last_key, self._last_time = key, now
            self.out.write(f"{self.name}: {line}\n")
        self.out.flush()

    def close(self) -> None:
        """End the redrawn line so what follows starts on a line of its own."""
        if self.tty and self._drawn:
            self.out.write("\n")
            self.out.flush()
            self._drawn = False
