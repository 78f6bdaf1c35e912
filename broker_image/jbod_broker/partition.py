"""One partition's replica state on this broker: Kafka's ``Partition``.

What a partition knows of itself (leader, epochs, ISR, the followers' fetch state, who waits on
it) and the rules that only need that state and its log, where Kafka keeps them:

- the leader's high watermark is the smallest log end offset over the *maximal* ISR (the
  committed ISR plus any member whose addition is in flight), so a pending shrink never lets
  it run ahead, and it never goes backwards (:meth:`Partition.maybe_increment_leader_hw`);
- a follower is caught up when it asks for the leader's end, or for what was the end at its
  previous fetch (:meth:`Partition.update_follower_fetch_state`); it joins the ISR once its
  log end reaches the high watermark and the start of the leader's epoch
  (:meth:`Partition.isr_to_expand`), and leaves it when it has not caught up for
  ``replica.lag.time.max.ms`` (:meth:`Partition.isr_to_shrink`);
- an ISR change is proposed (``pending_isr``) and applied when the controller's answer
  carries it (:meth:`Partition.alter_partition_answered`), including the answer to a retry of
  a change already applied whose first answer was lost.

:class:`~jbod_broker.replica_manager.ReplicaManager` holds the partitions, sends the proposals
to the controller and counts the changes; the rules are here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from . import wire
from .errors import OffsetNotAvailableError
from .storage.log import Log
from .storage.names import TopicPartition

log = logging.getLogger(__name__)


class IsrCommitted(NamedTuple):
    """An ISR the controller committed, as :meth:`Partition.alter_partition_answered` applied
    it: whether it is this broker's own proposal (then it counts as an expand or a shrink)."""

    own: bool
    expand: bool


@dataclass
class FollowerState:
    leo: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0


@dataclass
class Partition:
    tp: TopicPartition
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    replicas: list[int] = field(default_factory=list)
    min_isr: int = 1
    pending_isr: list[int] | None = None
    """The ISR proposed to the controller and not yet answered (Kafka's pending state)."""
    followers: dict[int, FollowerState] = field(default_factory=dict)
    offline: bool = False
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    """Consumers' long polls and acks=all producers: they wait for the high watermark."""
    data_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    """Followers' long polls: they wait for records past their fetch offset."""
    local_broker_id: int = -1
    """This broker: the leader's own end is its log's, never a follower's state."""

    def notify(self) -> None:
        """Wake every waiter: the partition's state changed (leadership, ISR, offline), or
        both the data and the HW moved."""
        self.notify_hw()
        self.notify_data()

    def notify_hw(self) -> None:
        """Wake consumers' long polls and acks=all producers: the high watermark moved. Not a
        follower's long poll: a follower's fetch is answered when it has records to take
        (Kafka's DelayedFetch completes a follower's fetch on bytes, never on the HW), and
        learns the HW from that answer. Waking it for every HW move cost a fetch round with
        nothing in it per follower per acks=all produce: the follower whose fetch moved the
        HW woke the other's poll."""
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def notify_data(self) -> None:
        """Wake followers' long polls: records were appended. Not an acks=all producer or a
        consumer while the HW stays where it was (with followers in the ISR an append alone
        never moves it)."""
        waiters, self.data_waiters = self.data_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait(self, timeout_s: float) -> None:
        """Until :meth:`notify` or :meth:`notify_hw`, or ``timeout_s``. Keyed by the
        partition, not by a log: a move's swap replaces the log object, and a waiter re-reads
        the current one on waking (nothing to hand over at the swap, nothing left waiting on
        the retired log)."""
        await wait_on_any((self,), timeout_s)

    @property
    def maximal_isr(self) -> set[int]:
        return set(self.isr) | set(self.pending_isr or ())

    # -- high watermark and ISR (Kafka's Partition) ----------------------------------------

    def maybe_increment_leader_hw(self, lg: Log) -> bool:
        """Raise the HW to the smallest log end over the maximal ISR; ``True`` if it moved.

        ``lg`` may be a log a move has just retired (the caller looked it up before the swap):
        the leader's own end is therefore read by :meth:`Log.advance_high_watermark` on the
        log that holds the data, never here (issue 14 item 2; the rule is there).
        """
        others: int | None = None
        for r in self.maximal_isr:
            if r == self.local_broker_id:
                continue
            st = self.followers.get(r)
            leo = st.leo if st is not None else -1
            others = leo if others is None else min(others, leo)
        return lg.advance_high_watermark(others)

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, leader_leo: int, now_ms: int
    ) -> None:
        """A follower asked for ``fetch_offset`` (its log end) when the leader's end was
        ``leader_leo``. Kafka's rule: caught up now if it asked for the log end; or caught up
        as of its previous fetch if it asked for what was the log end then."""
        st = self.followers.setdefault(replica_id, FollowerState())
        if fetch_offset >= leader_leo:
            st.last_caught_up_ms = now_ms
        elif fetch_offset >= st.last_fetch_leader_leo >= 0:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.leo = fetch_offset
        st.last_fetch_leader_leo = leader_leo
        st.last_fetch_ms = now_ms

    def epoch_start_offset(self, lg: Log) -> int:
        """Where the leader's current epoch starts: its log end when it became leader (Kafka's
        ``leaderEpochStartOffset``), read from the epoch cache, which moves with the log."""
        return lg.epochs.start_offset_for(self.leader_epoch)

    def check_offsets_available(self, lg: Log) -> None:
        """Kafka's rule for offsets asked by clients after an election: until the new leader's
        high watermark reaches the start of its epoch, its HW may lie below offsets the previous
        leader acknowledged, so "the end" is OFFSET_NOT_AVAILABLE (retriable), never a stale
        offset a consumer would stop at."""
        start = self.epoch_start_offset(lg)
        if start > lg.high_watermark:
            raise OffsetNotAvailableError(
                f"{self.tp}: the leader's high watermark ({lg.high_watermark}) is below the "
                f"start of its epoch {self.leader_epoch} ({start}); ask again when its "
                "followers caught up"
            )

    def isr_to_expand(self, lg: Log, replica_id: int) -> list[int] | None:
        """The ISR with ``replica_id`` added, when it has caught up to the high watermark and
        to the start of the leader's epoch (Kafka's ``maybeExpandIsr``); ``None`` while it is
        a member, or a change is in flight."""
        if replica_id in self.isr or self.pending_isr is not None:
            return None
        st = self.followers[replica_id]
        epoch_start = self.epoch_start_offset(lg)
        if st.leo >= lg.high_watermark and st.leo >= max(epoch_start, 0):
            return sorted({*self.isr, replica_id})
        return None

    def isr_to_shrink(self, now_ms: int, lag_ms: int) -> list[int] | None:
        """The ISR without the followers that have not caught up within ``lag_ms`` (Kafka's
        ``maybeShrinkIsr``); ``None`` when none is out, or this broker does not lead the
        partition on a working disk, or a change is in flight."""
        if self.leader != self.local_broker_id or self.offline or self.pending_isr is not None:
            return None
        out = [
            r
            for r in self.isr
            if r != self.local_broker_id
            and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms > lag_ms
        ]
        return [r for r in self.isr if r not in out] if out else None

    def propose_isr(self, new_isr: list[int]) -> wire.AlterPartitionItem:
        """Keep ``new_isr`` pending (the maximal ISR counts it for the HW) and return the
        AlterPartition item that asks the controller for it at the epochs known now."""
        self.pending_isr = new_isr
        return wire.AlterPartitionItem(
            topic=self.tp.topic,
            partition=self.tp.partition,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            new_isr=new_isr,
        )

    def still_proposes(self, item: wire.AlterPartitionItem) -> bool:
        """Whether ``item`` is still what this partition waits on: a LeaderAndIsr that made
        a new leadership or set the ISR cleared the proposal, and nothing waits for its
        answer. A newer partition epoch alone does not (the proposal is still pending: its
        answer, a refusal carrying the committed state, is what ends it)."""
        return self.pending_isr == item.new_isr and self.leader_epoch == item.leader_epoch

    def commit_isr(self, isr: list[int], partition_epoch: int) -> None:
        self.isr = list(isr)
        self.partition_epoch = partition_epoch

    def alter_partition_answered(self, res: wire.AlterPartitionResult) -> IsrCommitted | None:
        """The controller answered the pending proposal: apply the ISR it committed, or drop
        the proposal (``None``: nothing applied). A refusal that carries a newer committed
        state at this leadership is applied too (:meth:`_newer_committed_state`)."""
        if self.pending_isr is None:
            return None
        proposed, self.pending_isr = self.pending_isr, None
        if res.error is not None and not self._newer_committed_state(res):
            log.warning(
                "AlterPartition refused",
                extra={
                    "event": "alter_partition_refused",
                    "partition": str(self.tp),
                    "error": res.error,
                },
            )
            return None
        if res.leader_epoch != self.leader_epoch:
            return None
        if res.error is not None:
            # A retry of a change the controller applied but whose answer was lost: refused
            # at the stale partition epoch, the answer carries the committed state.
            log.info(
                "AlterPartition refused with a newer committed state: adopted",
                extra={
                    "event": "alter_partition_adopted",
                    "partition": str(self.tp),
                    "error": res.error,
                    "isr": res.isr,
                    "partition_epoch": res.partition_epoch,
                },
            )
        expand = len(res.isr) > len(self.isr)
        self.commit_isr(res.isr, res.partition_epoch)
        return IsrCommitted(own=self.isr == proposed, expand=expand)

    def _newer_committed_state(self, res: wire.AlterPartitionResult) -> bool:
        """A refused AlterPartition's answer carries the controller's committed state (the
        latest LeaderAndIsr it knows); at this broker's leadership and a newer partition epoch
        it is the state Kafka's leader awaits from metadata after INVALID_UPDATE_VERSION,
        delivered with the refusal: adopting it ends the retry of a change already applied
        (its first answer lost) instead of proposing it again at the stale epoch."""
        return (
            res.leader == self.local_broker_id
            and res.leader_epoch == self.leader_epoch
            and res.partition_epoch > self.partition_epoch
            and self.local_broker_id in res.isr
        )


async def wait_on_any(parts: Sequence[Partition], timeout_s: float, *, data: bool = False) -> None:
    """Until one of ``parts`` notifies, or ``timeout_s``: its HW waiters, or with ``data``
    its data waiters (a follower's long poll). One future joins every partition's
    waiters and one timer bounds it: a follower's long poll runs this on every fetch round,
    and a task per partition (as ``asyncio.wait`` over each one's wait) cost more than the
    round's own work. The future is taken off the lists that still hold it when it ends."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    lists = [p.data_waiters if data else p.waiters for p in parts]
    for waiters in lists:
        waiters.append(fut)
    timer = loop.call_later(timeout_s, _wake, fut)
    try:
        await fut
    finally:
        timer.cancel()
        for waiters in lists:
            if fut in waiters:
                waiters.remove(fut)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
