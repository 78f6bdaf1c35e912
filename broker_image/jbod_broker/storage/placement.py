"""Which log directory gets a new replica. Pure: no I/O, so the rule is easy to test.

Kafka puts a new replica on the directory with the fewest partitions, which ignores how big
partitions are, so disks drift apart (KIP-1066: operators "regularly shuffle partitions").
We pick the live directory with the most usable bytes; ties go to the one with the fewest
replicas, then to configuration order. A directory named ahead of time for the replica (a move
requested before the replica existed, KIP-113) wins when it is live. Cordoned directories
(being drained) never receive new replicas unless named explicitly.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .errors import KafkaStorageError


@dataclass(frozen=True, slots=True)
class DirState:
    path: str
    live: bool
    usable_bytes: int
    replica_count: int
    cordoned: bool = False


def rank_log_dirs(
    dirs: Sequence[DirState],
    *,
    preferred: str | None = None,
    exclude: Collection[str] = (),
) -> list[str]:
    """Candidate directories, best first; creation falls back down the list (KAFKA-8526)."""
    order = {d.path: i for i, d in enumerate(dirs)}
    live = [d for d in dirs if d.live and d.path not in exclude]
    ranked = sorted(
        (d for d in live if not d.cordoned),
        key=lambda d: (-d.usable_bytes, d.replica_count, order[d.path]),
    )
    paths = [d.path for d in ranked]
    if preferred is not None and any(d.path == preferred for d in live):
        paths = [preferred] + [p for p in paths if p != preferred]
    if not paths:
        raise KafkaStorageError(
            "no live log directory can take a new replica"
            + (" (the live ones are cordoned)" if live else "")
        )
    return paths


def choose_log_dir(
    dirs: Sequence[DirState],
    *,
    preferred: str | None = None,
    exclude: Collection[str] = (),
) -> str:
    return rank_log_dirs(dirs, preferred=preferred, exclude=exclude)[0]
