"""The leader-epoch cache of one replica and its ``leader-epoch-checkpoint`` file.

Maps each leader epoch to the first offset written in it. A follower that learns of a new
leader asks for the end offset of its own latest epoch and truncates there, so that a new
leader's log wins (KIP-101). The checkpoint moves with the replica when it changes disk
(KAFKA-15608: forgetting it leaves the ISR stuck).

Not thread-safe: the owning log holds its lock. Persistence goes through a callback so the
log's failure guard sees any I/O error.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from .checkpoints import format_epochs

Persist = Callable[[bytes], None]


class LeaderEpochCache:
    def __init__(self, entries: list[tuple[int, int]], persist: Persist) -> None:
        self._epochs = [e for e, _ in entries]
        self._starts = [s for _, s in entries]
        self._persist = persist

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else -1

    def _flush(self) -> None:
        self._persist(format_epochs(self.entries()))

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; older or equal epochs are no-ops."""
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return
        # An epoch never starts before a later-numbered one: drop entries it supersedes.
        while self._starts and self._starts[-1] >= start_offset:
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self._flush()

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose leader wrote ``offset`` (the last to start at or before it); -1 when
        no entry is that old. ListOffsets answers it beside an offset found by timestamp."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else -1

    def start_offset_for(self, epoch: int) -> int:
        """Where ``epoch`` (or the latest epoch before it) starts; -1 when no entry is that old.
        A leader's own epoch starts at its log end when it became leader (Kafka's
        ``leaderEpochStartOffset``)."""
        i = bisect.bisect_right(self._epochs, epoch) - 1
        return self._starts[i] if i >= 0 else -1

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, offset where it ends) — OffsetsForLeaderEpoch.

        Unknown (older than every entry): (-1, -1), and the follower truncates to its high
        watermark instead.
        """
        if not self._epochs or epoch < self._epochs[0]:
            return -1, -1
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i == len(self._epochs) - 1:
            return self._epochs[i], log_end_offset
        return self._epochs[i], self._starts[i + 1]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was cut at ``end_offset``: forget epochs that start at or after it."""
        n = bisect.bisect_left(self._starts, end_offset)
        if n < len(self._starts):
            del self._epochs[n:]
            del self._starts[n:]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: the epoch holding it now starts there."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0:
            return
        changed = i > 0 or self._starts[0] != start_offset
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = max(self._starts[0], start_offset)
        if changed:
            self._flush()

    def clear(self) -> None:
        if self._epochs:
            self._epochs.clear()
            self._starts.clear()
            self._flush()
