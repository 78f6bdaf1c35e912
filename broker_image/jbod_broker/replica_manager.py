"""Partitions on this broker as leader or follower: produce, fetch, high watermark, ISR.

Kafka's ``ReplicaManager``: it holds the partitions, applies the controller's requests, serves
produce and fetch, sends ISR proposals to the controller and counts the changes. Each
partition's own state and the ISR and high-watermark rules are
:class:`~jbod_broker.partition.Partition`'s, where Kafka keeps them. Runs on the server's event
loop (single-threaded state); storage calls are made inline because appends and reads hit the
page cache and hold a log's lock only briefly. The move engine's threads touch logs, never this
state.

Rules kept from Kafka (the ISR and HW rules themselves are written in ``partition``):
- acks=all is refused before the append when the ISR is below ``min.insync.replicas``
  (NOT_ENOUGH_REPLICAS) and completes when the high watermark passes the last offset.
- Acknowledgement is exact across log-dir moves (issue 14 item 2): a swap may retire the log a
  request looked up while its append waits for the lock, the append then landing in the new
  log. The HW rule reads the leader's end on the log that holds the data
  (:meth:`Log.advance_high_watermark`); waiters belong to the partition, not to a log object,
  and read the HW of the current log, which the swap carried over
  (``Log.adopt_replica_state``); so the answer always comes from the log holding the records.
- ISR changes go to the controller (AlterPartition) and are applied when it acknowledges;
  with no controller configured they are applied at once (a standalone broker).
- Requests carrying an older controller epoch or leader epoch change nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import wire
from .config import BrokerConfig, ConfigError
from .errors import (
    FencedLeaderEpochError,
    InvalidConfigError,
    KafkaError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    StaleControllerEpochError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from .loop_slice import LoopSlice, settle_long_lived
from .partition import FollowerState, Partition, wait_on_any
from .storage.clock import monotonic_ms
from .storage.errors import (
    DuplicateSequenceError,
    KafkaStorageError,
    OffsetOutOfRangeError,
)
from .storage.log import EMPTY_SLICE, AppendInfo, Log, LogConfig, ReadResult, SliceResult
from .storage.log_manager import LogManager
from .storage.names import TopicPartition
from .storage.topic_configs import MIN_INSYNC_REPLICAS

log = logging.getLogger(__name__)


IsrSender = Callable[[wire.AlterPartitionItem], None]


class ReplicaManager:
    def __init__(self, config: BrokerConfig, logs: LogManager) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.logs = logs
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.controller_id = -1
        self.brokers: dict[int, wire.BrokerEndpoint] = {}
        self.metadata: dict[TopicPartition, wire.PartitionMetadata] = {}
        self._metadata_topics: dict[str, dict[int, wire.PartitionMetadata]] = {}
        """:attr:`metadata` by topic, so a Metadata request naming a few topics reads those
        (issue 36), not the whole cluster's."""
        self.topic_ids: dict[str, str] = {}
        """KIP-516: topic name -> id, from LeaderAndIsr and UpdateMetadata (the protocol
        listener serves Fetch and Produce by id through :meth:`topic_by_id`)."""
        self._topics_by_id: dict[str, str] = {}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.bytes_in = 0
        self.bytes_out = 0
        # Group commit: produce requests waiting for the next write of their partition.
        self._produce_queues: dict[TopicPartition, list[_QueuedProduce]] = {}
        self.append_writes = 0  # writes made for produce requests
        self.append_requests = 0  # produce requests they carried
        self.send_alter_partition: IsrSender | None = None
        """Set by the server when a controller URL is configured."""
        self.on_become_follower: Callable[[TopicPartition, int], None] = lambda tp, leader: None
        self.on_stop_following: Callable[[TopicPartition], None] = lambda tp: None
        self._controller_requests = asyncio.Lock()
        """Controller requests are applied one at a time, in the order they came."""
        self._unsettled = 0
        """Partitions given disk work since the collector last settled (:meth:`_settle`)."""

    # -- lookups --------------------------------------------------------------------------

    def partition(self, tp: TopicPartition) -> Partition:
        p = self.partitions.get(tp)
        if p is None:
            raise UnknownTopicOrPartitionError(f"{tp} is not hosted on broker {self.broker_id}")
        return p

    def log_of(self, p: Partition) -> Log:
        if p.offline:
            raise KafkaStorageError(f"replica {p.tp} on broker {self.broker_id} is offline")
        return self.logs.log_or_error(p.tp)

    def leader_partition(self, tp: TopicPartition) -> Partition:
        p = self.partition(tp)
        if p.offline:
            raise KafkaStorageError(
                f"replica {tp} on broker {self.broker_id} is offline (log dir failure)"
            )
        if p.leader != self.broker_id:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {tp} (leader: {p.leader})"
            )
        return p

    def check_leader_epoch(self, p: Partition, epoch: int) -> None:
        if epoch < 0:
            return
        if epoch < p.leader_epoch:
            raise FencedLeaderEpochError(
                f"{p.tp}: leader epoch {epoch} is older than the current {p.leader_epoch}"
            )
        if epoch > p.leader_epoch:
            raise UnknownLeaderEpochError(
                f"{p.tp}: leader epoch {epoch} is newer than ours ({p.leader_epoch})"
            )

    @property
    def under_replicated(self) -> int:
        return sum(
            1
            for p in self.partitions.values()
            if p.leader == self.broker_id and not p.offline and len(p.isr) < len(p.replicas)
        )

    # -- controller requests --------------------------------------------------------------

    def check_controller_epoch(self, epoch: int) -> None:
        if epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"controller epoch {epoch} is older than {self.controller_epoch}: "
                "this request comes from a controller that has been replaced"
            )

    def _begin_controller_request(self, controller_epoch: int, controller_id: int) -> None:
        self.check_controller_epoch(controller_epoch)
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id

    def leader_and_isr(self, req: wire.LeaderAndIsrRequest) -> wire.LeaderAndIsrResponse:
        """LeaderAndIsr in one go, disk work inline: for in-process callers and small
        requests. The server's handler uses :meth:`serve_leader_and_isr`, same rules."""
        self._begin_controller_request(req.controller_epoch, req.controller_id)
        self._note_live_leaders(req)
        results = []
        for st in req.partitions:
            try:
                self._apply_partition_state(TopicPartition(st.topic, st.partition), st)
                results.append(_result(st.topic, st.partition, None))
            except KafkaError as e:
                results.append(_result(st.topic, st.partition, e))
        return wire.LeaderAndIsrResponse(partitions=results)

    async def serve_leader_and_isr(
        self, req: wire.LeaderAndIsrRequest
    ) -> wire.LeaderAndIsrResponse:
        """LeaderAndIsr without holding the loop (issue 36: 25,000 new partitions held it
        113 s and the broker missed its heartbeats).

        Controller requests are applied one at a time in the order they came (a lock), as
        Kafka's ``replicaStateChangeLock``; a stale controller epoch is refused before the
        wait and again after it. Each partition is checked and its state published on the
        loop, in slices; the disk work a partition needs first (creating its log, writing
        the leader epoch it is about to lead in) runs in the executor, for a batch of
        consecutive partitions at a time. Until its state is published a partition answers
        as before the request (absent, or in its old role), never half-changed: a produce
        waits for nothing and is refused as not led here, a follower's fetcher is stopped
        before a partition it followed is given its new epoch.
        """
        self.check_controller_epoch(req.controller_epoch)
        async with self._controller_requests:
            self._begin_controller_request(req.controller_epoch, req.controller_id)
            self._note_live_leaders(req)
            results: list[wire.PartitionResult | None] = [None] * len(req.partitions)
            sl = LoopSlice()
            batch: list[_PendingState] = []
            waiting: set[TopicPartition] = set()
            for i, st in enumerate(req.partitions):
                if sl.due():
                    await sl.pause()
                tp = TopicPartition(st.topic, st.partition)
                if len(batch) >= DISK_BATCH or tp in waiting:
                    # A partition named again is checked against its state after the first.
                    await self._finish_states(batch, results, sl)
                    batch, waiting = [], set()
                try:
                    pending = self._check_or_apply(tp, st)
                except KafkaError as e:
                    results[i] = _result(st.topic, st.partition, e)
                    continue
                if pending is None:
                    results[i] = _result(st.topic, st.partition, None)
                else:
                    pending.index = i
                    batch.append(pending)
                    waiting.add(tp)
            await self._finish_states(batch, results, sl)
            if self._unsettled:
                self._settle()
            return wire.LeaderAndIsrResponse(partitions=[r for r in results if r is not None])

    def _note_live_leaders(self, req: wire.LeaderAndIsrRequest) -> None:
        for ep in req.live_leaders:
            self.brokers[ep.broker_id] = ep

    def _apply_partition_state(self, tp: TopicPartition, st: wire.LeaderAndIsrPartition) -> None:
        """One partition's new state, disk work inline (see :meth:`_check_partition_state`,
        :meth:`_prepare_disk`, :meth:`_publish_partition_state`)."""
        cfg = self._check_partition_state(tp, st)
        if cfg is None:
            return
        leads = self._leads_anew(tp, st)
        if leads:
            self.on_stop_following(tp)
        self._prepare_disk(tp, st, cfg, leads)
        self._publish_partition_state(tp, st)

    def _check_or_apply(
        self, tp: TopicPartition, st: wire.LeaderAndIsrPartition
    ) -> _PendingState | None:
        """Check ``st`` and, if it needs no disk work, apply it now (``None``); else what is
        left to do once its disk work is done. Raises the partition's error."""
        cfg = self._check_partition_state(tp, st)
        if cfg is None:
            return None
        leads = self._leads_anew(tp, st)
        if not self._needs_disk(tp, st, leads):
            self._prepare_disk(tp, st, cfg, leads)
            self._publish_partition_state(tp, st)
            return None
        if leads:
            # Before the log end is read for the new epoch: no follower append after it.
            self.on_stop_following(tp)
        return _PendingState(tp, st, cfg, leads)

    async def _finish_states(
        self,
        batch: list[_PendingState],
        results: list[wire.PartitionResult | None],
        sl: LoopSlice,
    ) -> None:
        """The batch's disk work in the executor, then each state published on the loop."""
        if not batch:
            return
        loop = asyncio.get_running_loop()
        errors = await loop.run_in_executor(None, self._prepare_batch, batch)
        for b, err in zip(batch, errors, strict=True):
            if sl.due():
                await sl.pause()
            if err is None:
                try:
                    self._publish_partition_state(b.tp, b.st)
                except KafkaError as e:
                    err = e
            results[b.index] = _result(b.st.topic, b.st.partition, err)
        self._unsettled += len(batch)
        if self._unsettled >= SETTLE_EVERY:
            self._settle()

    def _settle(self) -> None:
        """The logs just made out of the collector's sight (:func:`settle_long_lived`): each
        is some 30 objects that live as long as their replica, and every full collection on
        the loop walked them all (25,000 new logs: 0.1 s and more a pass, issue 36). Every
        :data:`SETTLE_EVERY` partitions and at the end of the request: the first call also
        walks the request itself (25 ms for 25,000 partitions), later ones only what came
        since."""
        self._unsettled = 0
        settle_long_lived()

    def _prepare_batch(self, batch: list[_PendingState]) -> list[KafkaError | None]:
        """Runs in the executor: each partition's disk work, its error kept for its answer."""
        out: list[KafkaError | None] = []
        for b in batch:
            try:
                self._prepare_disk(b.tp, b.st, b.config, b.leads)
                out.append(None)
            except KafkaError as e:
                out.append(e)
        return out

    def _check_partition_state(
        self, tp: TopicPartition, st: wire.LeaderAndIsrPartition
    ) -> LogConfig | None:
        """The checks before anything changes: the partition's log config, or ``None`` for an
        older view of the current leadership (nothing to apply); raises the refusal."""
        p = self.partitions.get(tp)
        if p is not None and st.leader_epoch < p.leader_epoch:
            raise FencedLeaderEpochError(
                f"{tp}: leader epoch {st.leader_epoch} is older than the current {p.leader_epoch}"
            )
        if (
            p is not None
            and st.leader_epoch == p.leader_epoch
            and st.partition_epoch < p.partition_epoch
        ):
            return None  # an older view of the same leadership (a late resend): nothing to apply
        if self.broker_id not in st.replicas:
            raise UnknownTopicOrPartitionError(
                f"broker {self.broker_id} is not a replica of {tp} (replicas {st.replicas})"
            )
        try:
            cfg = self.config.log_config(st.configs)
        except ConfigError as e:
            raise InvalidConfigError(f"{tp}: {e}") from e
        in_configs = st.configs.get(MIN_INSYNC_REPLICAS)
        if in_configs is not None and int(in_configs) != st.min_insync_replicas:
            # Two values for one setting: the controller contradicts itself; apply neither.
            raise InvalidConfigError(
                f"{tp}: {MIN_INSYNC_REPLICAS}={in_configs!r} in configs but "
                f"min_insync_replicas={st.min_insync_replicas}"
            )
        return cfg

    def _leads_anew(self, tp: TopicPartition, st: wire.LeaderAndIsrPartition) -> bool:
        """``st`` makes this broker the leader of a leadership it does not hold yet."""
        p = self.partitions.get(tp)
        new_leadership = p is None or st.leader_epoch != p.leader_epoch or st.leader != p.leader
        return st.leader == self.broker_id and new_leadership

    def _needs_disk(self, tp: TopicPartition, st: wire.LeaderAndIsrPartition, leads: bool) -> bool:
        """Whether :meth:`_prepare_disk` would write: a log to create, a topic id to record
        (or refuse), a leader epoch to add to the epoch checkpoint."""
        lg = self.logs.get_log(tp)
        if lg is None:
            return True
        if st.topic_id is not None and lg.topic_id != st.topic_id:
            return True
        return leads and lg.epochs.latest_epoch < st.leader_epoch

    def _prepare_disk(
        self, tp: TopicPartition, st: wire.LeaderAndIsrPartition, cfg: LogConfig, leads: bool
    ) -> None:
        """The disk work before ``st`` is published; thread-safe (the executor runs it).

        KIP-112: create only when the controller says the replica is new. KIP-516: the topic
        id is checked (or recorded) first; a mismatch refuses the partition, nothing changed.
        A new leader's epoch starts at its log end, written before it takes any produce.
        """
        self.logs.get_or_create_log(tp, is_new=st.is_new_replica, config=cfg, topic_id=st.topic_id)
        if leads:
            self._assign_leader_epoch(tp, st.leader_epoch)

    def _assign_leader_epoch(self, tp: TopicPartition, epoch: int) -> None:
        """Start ``epoch`` at the log end, on the log that holds the data: under its lock, so
        a move's swap carries the entry over, or after the swap on its successor."""
        while True:
            lg = self.logs.log_or_error(tp)
            with lg.lock:
                if lg.successor is None:
                    lg.epochs.assign(epoch, lg.log_end_offset)
                    return

    def _publish_partition_state(self, tp: TopicPartition, st: wire.LeaderAndIsrPartition) -> None:
        """The partition's new state, on the loop, once its log is ready: raises
        KafkaStorageError if that log's directory failed meanwhile, changing nothing."""
        self.logs.log_or_error(tp)
        if st.topic_id is not None:
            self._note_topic_id(tp.topic, st.topic_id)
        p = self.partitions.get(tp)
        if p is None:
            p = Partition(tp, local_broker_id=self.broker_id)
            self.partitions[tp] = p
        unchanged = (
            p.leader_epoch == st.leader_epoch
            and p.leader == st.leader
            and p.isr == list(st.isr)
            and p.replicas == list(st.replicas)
            and not p.offline
        )
        p.offline = False
        p.replicas = list(st.replicas)
        p.min_isr = st.min_insync_replicas
        p.partition_epoch = max(p.partition_epoch, st.partition_epoch)
        if unchanged:
            return
        new_leadership = st.leader_epoch != p.leader_epoch or st.leader != p.leader
        p.isr = list(st.isr)
        p.pending_isr = None
        p.leader_epoch = st.leader_epoch
        p.leader = st.leader
        if st.leader == self.broker_id:
            if new_leadership:
                self._become_leader(p)
            # A smaller ISR from the controller may commit what was waiting on a removed member
            # (Kafka's makeLeader does the same).
            lg = self.logs.get_log(tp)
            if lg is not None:
                p.maybe_increment_leader_hw(lg)
        elif new_leadership:
            self._become_follower(p)
        p.notify()

    def _become_leader(self, p: Partition) -> None:
        self.on_stop_following(p.tp)
        t = monotonic_ms()
        p.followers = {
            r: FollowerState(last_caught_up_ms=t if r in p.isr else 0)
            for r in p.replicas
            if r != self.broker_id
        }
        lg = self.logs.log_or_error(p.tp)
        lg.epochs.assign(p.leader_epoch, lg.log_end_offset)
        log.info(
            "became leader",
            extra={"event": "become_leader", "partition": str(p.tp), "epoch": p.leader_epoch},
        )

    def _become_follower(self, p: Partition) -> None:
        p.followers = {}
        self.on_stop_following(p.tp)
        if p.leader >= 0:
            self.on_become_follower(p.tp, p.leader)
        log.info(
            "became follower",
            extra={"event": "become_follower", "partition": str(p.tp), "leader": p.leader},
        )

    def fenced(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """A StopReplica for ``tp`` at ``leader_epoch`` would be refused as fenced."""
        p = self.partitions.get(tp)
        return p is not None and 0 <= leader_epoch < p.leader_epoch

    def stop_replica(self, req: wire.StopReplicaRequest) -> wire.StopReplicaResponse:
        """StopReplica in one go, disk work inline (in-process callers; the server's handler
        uses :meth:`serve_stop_replica`, same rules)."""
        self.check_controller_epoch(req.controller_epoch)
        self.controller_epoch = req.controller_epoch
        results = []
        for sp in req.partitions:
            try:
                if self._stop_partition(sp):
                    self.logs.delete_log(TopicPartition(sp.topic, sp.partition))
                results.append(_result(sp.topic, sp.partition, None))
            except KafkaError as e:
                results.append(_result(sp.topic, sp.partition, e))
        return wire.StopReplicaResponse(partitions=results)

    async def serve_stop_replica(
        self,
        req: wire.StopReplicaRequest,
        forget_move: Callable[[TopicPartition], None] = lambda tp: None,
    ) -> wire.StopReplicaResponse:
        """StopReplica without holding the loop, in the controller's order (see
        :meth:`serve_leader_and_isr`). Each replica stops serving on the loop, in slices; a
        deleted one's move is cancelled (``forget_move``) and its log renamed for deletion in
        the executor, a batch of consecutive replicas at a time."""
        self.check_controller_epoch(req.controller_epoch)
        async with self._controller_requests:
            self.check_controller_epoch(req.controller_epoch)
            self.controller_epoch = req.controller_epoch
            results: list[wire.PartitionResult | None] = [None] * len(req.partitions)
            sl = LoopSlice()
            doomed: list[tuple[int, TopicPartition]] = []
            for i, sp in enumerate(req.partitions):
                if sl.due():
                    await sl.pause()
                try:
                    delete = self._stop_partition(sp)
                except KafkaError as e:
                    results[i] = _result(sp.topic, sp.partition, e)
                    continue
                if delete:
                    doomed.append((i, TopicPartition(sp.topic, sp.partition)))
                else:
                    results[i] = _result(sp.topic, sp.partition, None)
                if len(doomed) >= DISK_BATCH:
                    await self._delete_logs(doomed, forget_move, results)
                    doomed = []
            await self._delete_logs(doomed, forget_move, results)
            return wire.StopReplicaResponse(partitions=[r for r in results if r is not None])

    def _stop_partition(self, sp: wire.StopReplicaPartition) -> bool:
        """Stop serving ``sp``'s replica (unless fenced: raises); ``True`` if its log goes."""
        tp = TopicPartition(sp.topic, sp.partition)
        p = self.partitions.get(tp)
        if p is not None and self.fenced(tp, sp.leader_epoch):
            raise FencedLeaderEpochError(
                f"{tp}: leader epoch {sp.leader_epoch} is older than {p.leader_epoch}"
            )
        self.on_stop_following(tp)
        if p is not None:
            self.partitions.pop(tp, None)
            p.notify()
        return sp.delete

    async def _delete_logs(
        self,
        doomed: list[tuple[int, TopicPartition]],
        forget_move: Callable[[TopicPartition], None],
        results: list[wire.PartitionResult | None],
    ) -> None:
        if not doomed:
            return

        def delete_all() -> list[KafkaError | None]:
            out: list[KafkaError | None] = []
            for _, tp in doomed:
                try:
                    forget_move(tp)
                    self.logs.delete_log(tp)
                    out.append(None)
                except KafkaError as e:
                    out.append(e)
            return out

        errors = await asyncio.get_running_loop().run_in_executor(None, delete_all)
        for (i, tp), err in zip(doomed, errors, strict=True):
            results[i] = _result(tp.topic, tp.partition, err)

    def update_metadata(self, req: wire.UpdateMetadataRequest) -> None:
        """UpdateMetadata in one go (in-process callers; the server's handler uses
        :meth:`serve_update_metadata`, same rules)."""
        self._begin_controller_request(req.controller_epoch, req.controller_id)
        self.brokers = {b.broker_id: b for b in req.live_brokers}
        for pm in req.partitions:
            self._note_metadata(pm)

    async def serve_update_metadata(self, req: wire.UpdateMetadataRequest) -> None:
        """UpdateMetadata in slices, in the controller's order (see
        :meth:`serve_leader_and_isr`)."""
        self.check_controller_epoch(req.controller_epoch)
        async with self._controller_requests:
            self._begin_controller_request(req.controller_epoch, req.controller_id)
            self.brokers = {b.broker_id: b for b in req.live_brokers}
            sl = LoopSlice()
            for pm in req.partitions:
                if sl.due():
                    await sl.pause()
                self._note_metadata(pm)

    def _note_metadata(self, pm: wire.PartitionMetadata) -> None:
        self.metadata[TopicPartition(pm.topic, pm.partition)] = pm
        self._metadata_topics.setdefault(pm.topic, {})[pm.partition] = pm
        if pm.topic_id is not None:
            self._note_topic_id(pm.topic, pm.topic_id)

    def _note_topic_id(self, topic: str, topic_id: str) -> None:
        old = self.topic_ids.get(topic)
        if old is not None and old != topic_id:
            self._topics_by_id.pop(old, None)  # the name now belongs to a new topic
        self.topic_ids[topic] = topic_id
        self._topics_by_id[topic_id] = topic

    def topic_by_id(self, topic_id: str) -> str | None:
        """The name of the topic with id ``topic_id`` as the controller last said, or ``None``
        (Kafka answers UNKNOWN_TOPIC_ID then)."""
        return self._topics_by_id.get(topic_id)

    def metadata_response(self) -> wire.MetadataResponse:
        """The whole cluster's metadata (the HTTP API's): every partition the controller
        named, and every one this broker leads, by :meth:`partition_metadata`."""
        led = self.unannounced_leaderships()
        tps = sorted(self.metadata.keys() | {tp for ps in led.values() for tp in ps})
        return wire.MetadataResponse(
            controller_id=self.controller_id,
            controller_epoch=self.controller_epoch,
            brokers=sorted(self.brokers.values(), key=lambda b: b.broker_id),
            partitions=[pm for tp in tps if (pm := self.partition_metadata(tp)) is not None],
        )

    def unannounced_leaderships(self) -> dict[str, list[TopicPartition]]:
        """Partitions this broker leads that the controller's UpdateMetadata has not named
        yet (LeaderAndIsr comes first), by topic: Metadata answers them too. One pass over
        the hosted partitions per Metadata request, not one per topic asked for."""
        out: dict[str, list[TopicPartition]] = {}
        for tp, p in self.partitions.items():
            if tp not in self.metadata and p.leader == self.broker_id and not p.offline:
                out.setdefault(tp.topic, []).append(tp)
        return out

    def metadata_topic_names(self, unannounced: dict[str, list[TopicPartition]]) -> list[str]:
        """Every topic Metadata knows, sorted (a request for all topics)."""
        return sorted(self._metadata_topics.keys() | unannounced.keys())

    def topic_metadata(
        self, topic: str, unannounced: dict[str, list[TopicPartition]]
    ) -> list[wire.PartitionMetadata]:
        """One topic's partitions by :meth:`partition_metadata`, in partition order; empty for
        a topic neither the controller nor this broker's leaderships (``unannounced``, from
        :meth:`unannounced_leaderships`) name."""
        named = self._metadata_topics.get(topic, {})
        tps = [TopicPartition(topic, i) for i in named]
        tps.extend(unannounced.get(topic, ()))
        return [pm for tp in sorted(tps) if (pm := self.partition_metadata(tp)) is not None]

    def partition_metadata(self, tp: TopicPartition) -> wire.PartitionMetadata | None:
        """The controller's word for ``tp``, or this broker's own leadership where it leads
        ``tp`` on a working disk (LeaderAndIsr is newer than UpdateMetadata); the offline
        replicas are always the controller's. ``None``: neither names it (any more: a
        Metadata request served in slices may find a leadership it listed gone)."""
        pm = self.metadata.get(tp)
        p = self.partitions.get(tp)
        if p is None or p.leader != self.broker_id or p.offline:
            return pm
        # model_construct: every field comes from state already validated on its way in.
        return wire.PartitionMetadata.model_construct(
            topic=tp.topic,
            partition=tp.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=list(p.isr),
            replicas=list(p.replicas),
            offline_replicas=list(pm.offline_replicas) if pm is not None else [],
            topic_id=self.topic_ids.get(tp.topic),
        )

    # -- log dir failure ------------------------------------------------------------------

    def replicas_offline(self, tps: list[TopicPartition]) -> None:
        """KIP-112: act as if StopReplica arrived for replicas on a failed directory."""
        for tp in tps:
            self.on_stop_following(tp)
            p = self.partitions.get(tp)
            if p is not None:
                p.offline = True
                p.notify()

    # -- produce --------------------------------------------------------------------------

    async def produce(
        self, tp: TopicPartition, data: bytes | bytearray, acks: int, timeout_ms: int
    ) -> AppendInfo:
        """Append a producer's batches as leader; with acks=-1, wait until they are committed.
        A bytearray is handed over: its batches are stamped with offsets in place."""
        p = self.leader_partition(tp)
        if acks == -1 and len(p.isr) < p.min_isr:
            raise NotEnoughReplicasError(
                f"{tp}: the ISR {sorted(p.isr)} has fewer than min.insync.replicas={p.min_isr} "
                "members"
            )
        self.log_of(p)  # an offline replica fails now, before queueing
        info = await self._append_grouped(p, data)
        if acks != -1:
            return info
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            cur = self.partitions.get(tp)
            if cur is not p or p.leader != self.broker_id or p.offline:
                raise NotLeaderOrFollowerError(
                    f"{tp}: leadership moved while waiting for replication of offsets "
                    f"{info.first_offset}-{info.last_offset}; they may or may not be committed"
                )
            if self.logs.log_or_error(tp).high_watermark > info.last_offset:
                return info
            if len(p.isr) < p.min_isr:
                raise NotEnoughReplicasAfterAppendError(
                    f"{tp}: the ISR shrank to {sorted(p.isr)} below min.insync.replicas="
                    f"{p.min_isr} after the append"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestTimedOutError(
                    f"{tp}: offsets {info.first_offset}-{info.last_offset} not replicated to "
                    f"the ISR {sorted(p.isr)} within {timeout_ms} ms"
                )
            await p.wait(min(remaining, 0.5))

    async def _append_grouped(self, p: Partition, data: bytes | bytearray) -> AppendInfo:
        """Append through the partition's group commit; return once the bytes are written.

        Requests whose bodies arrive while the loop is busy queue for their partition and the
        next loop turn appends them with one write (:meth:`Log.append_as_leader_group`). The
        reply still waits for that write, so an acknowledged record is in the OS exactly as
        with one write per request; a lone request pays one loop turn.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[AppendInfo] = loop.create_future()
        queue = self._produce_queues.get(p.tp)
        if queue is None:
            queue = self._produce_queues[p.tp] = []
            loop.call_soon(self._append_queued, p.tp)
        queue.append(_QueuedProduce(p, data, fut))
        return await fut

    def _append_queued(self, tp: TopicPartition) -> None:
        queue = self._produce_queues.pop(tp, [])
        live: list[_QueuedProduce] = []
        for q in queue:
            if q.future.done():
                continue  # the request was cancelled before the write: nothing to append
            cur = self.partitions.get(tp)
            if cur is not q.partition or cur.leader != self.broker_id or cur.offline:
                q.future.set_exception(
                    NotLeaderOrFollowerError(
                        f"broker {self.broker_id} stopped leading {tp} before the append"
                    )
                )
                continue
            live.append(q)
        if not live:
            return
        p = live[0].partition
        try:
            lg = self.log_of(p)
        except KafkaError as e:
            _fail_all(live, e)
            return
        limit = min(PRODUCE_GROUP_MAX_BYTES, lg.config.segment_bytes)
        for group in _groups_within(live, limit):
            try:
                results = lg.append_as_leader_group(
                    [q.data for q in group], p.leader_epoch, in_place=True
                )
            except Exception as e:  # the directory failed: every request in the group fails
                _fail_all(group, e)
                continue
            appended = 0
            for q, r in zip(group, results, strict=True):
                if isinstance(r, AppendInfo):
                    appended += 1
                    self.bytes_in += len(q.data)
                    q.future.set_result(r)
                elif isinstance(r, DuplicateSequenceError):
                    # An idempotent producer's retry: success with the original offsets (an
                    # acks=all wait then covers them as for the first send), as Kafka answers.
                    q.future.set_result(
                        AppendInfo(r.first_offset, r.last_offset, 0, 0, 0, r.log_start_offset)
                    )
                else:
                    q.future.set_exception(r)
            if appended:
                self.append_writes += 1
                self.append_requests += appended
        if p.maybe_increment_leader_hw(lg):
            p.notify()
        else:
            p.notify_data()

    # -- fetch ----------------------------------------------------------------------------

    async def fetch_consumer(
        self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int, epoch: int = -1
    ) -> ReadResult:
        """Consumers read up to the high watermark; an empty read may long-poll."""
        deadline = time.monotonic() + max_wait_ms / 1000
        while True:
            res = self.read_for_consumer(tp, offset, max_bytes, epoch)
            remaining = deadline - time.monotonic()
            if res.data or remaining <= 0:
                return res
            await self.partition(tp).wait(remaining)

    def read_for_consumer(
        self,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
        epoch: int = -1,
        *,
        min_one: bool = True,
    ) -> ReadResult:
        """One read for a consumer, without waiting: the leader's log up to the high
        watermark, at the consumer's leader epoch. The rule both front ends (HTTP and Kafka's
        Fetch) read by; their long polls wait with :meth:`wait_for_any` between reads.
        ``min_one``: the first batch whole past ``max_bytes`` (``Log.read``; Kafka's Fetch
        allows it to the first partition that returns records only)."""
        p = self.leader_partition(tp)
        self.check_leader_epoch(p, epoch)
        lg = self.log_of(p)
        res = lg.read(offset, max_bytes, max_offset=lg.high_watermark, min_one=min_one)
        self.bytes_out += len(res.data)
        return res

    async def wait_for_any(
        self, tps: list[TopicPartition], timeout_s: float, *, follower: bool = False
    ) -> None:
        """Until the high watermark moves on one of ``tps`` (a consumer's long poll), or with
        ``follower`` until records are appended to one (a follower's), or leadership
        changes, or ``timeout_s``: the long poll of a fetch naming several partitions."""
        parts = [p for tp in tps if (p := self.partitions.get(tp)) is not None]
        await wait_on_any(parts, timeout_s, data=follower)

    def fetch_for_follower(
        self,
        replica_id: int,
        tp: TopicPartition,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        throttled: bool,
    ) -> SliceResult:
        """A follower's read: the leader's log from ``fetch_offset`` up to its end (not the
        high watermark), after the follower's state is updated from the offset it asked for
        (its log end): the caught-up clock, ISR expansion, the high watermark. A throttled
        read (the leader throttle of a reassignment, or the Fetch response's budget spent:
        decided by the caller) updates the state and returns no data, as Kafka's leader
        answers a throttled replica over its quota or a partition past ``max_bytes``.
        The records are a range of a segment file (``Log.read_slice``) for the Fetch handler
        to send without reading them; the caller closes it."""
        p = self.leader_partition(tp)
        self.check_leader_epoch(p, current_leader_epoch)
        if replica_id not in p.replicas or replica_id == self.broker_id:
            raise NotLeaderOrFollowerError(f"broker {replica_id} is not a follower of {tp}")
        lg = self.log_of(p)
        leo = lg.log_end_offset
        if fetch_offset > leo or fetch_offset < lg.log_start_offset:
            raise OffsetOutOfRangeError(
                f"{tp}: follower {replica_id} fetch offset {fetch_offset} is outside "
                f"[{lg.log_start_offset}, {leo}]"
            )
        self._update_follower(p, lg, replica_id, fetch_offset, leo)
        if throttled or (fetch_offset == leo and lg.successor is None):
            # Nothing to send (or nothing allowed): no range to look up under the log's lock.
            # A follower names every partition it follows in every round, most of them with
            # nothing new; a log a move retired meanwhile goes the long way, to its successor.
            return SliceResult(EMPTY_SLICE, lg.log_start_offset, leo, lg.high_watermark)
        res = lg.read_slice(fetch_offset, max_bytes)
        self.bytes_out += res.records.size
        return res

    def in_isr(self, tp: TopicPartition, replica_id: int) -> bool:
        p = self.partitions.get(tp)
        return p is not None and replica_id in p.isr

    def _update_follower(
        self, p: Partition, lg: Log, replica_id: int, fetch_offset: int, leader_leo: int
    ) -> None:
        """Kafka's order on a follower's fetch: its fetch state, an ISR expansion, the HW."""
        p.update_follower_fetch_state(replica_id, fetch_offset, leader_leo, monotonic_ms())
        new_isr = p.isr_to_expand(lg, replica_id)
        if new_isr is not None:
            self._change_isr(p, new_isr, expand=True)
        if p.maybe_increment_leader_hw(lg):
            p.notify_hw()

    @staticmethod
    def epoch_start_offset(p: Partition, lg: Log) -> int:
        """:meth:`Partition.epoch_start_offset` (the rule is the partition's)."""
        return p.epoch_start_offset(lg)

    def check_offsets_available(self, p: Partition, lg: Log) -> None:
        """:meth:`Partition.check_offsets_available` (the rule is the partition's)."""
        p.check_offsets_available(lg)

    def shrink_isr_pass(self) -> None:
        """Run periodically: drop followers that have not caught up in time."""
        t = monotonic_ms()
        lag = self.config.replica_lag_time_max_ms
        for p in list(self.partitions.values()):
            new_isr = p.isr_to_shrink(t, lag)
            if new_isr is not None:
                self._change_isr(p, new_isr, expand=False)

    def _change_isr(self, p: Partition, new_isr: list[int], *, expand: bool) -> None:
        """Send the partition's proposal to the controller; with none (a standalone broker)
        commit it at once at the next partition epoch."""
        log.info(
            "ISR change",
            extra={
                "event": "isr_expand" if expand else "isr_shrink",
                "partition": str(p.tp),
                "old_isr": p.isr,
                "new_isr": new_isr,
            },
        )
        if self.send_alter_partition is None:
            p.commit_isr(new_isr, p.partition_epoch + 1)
            self._count_isr_change(expand)
            lg = self.logs.get_log(p.tp)
            if lg is not None:
                p.maybe_increment_leader_hw(lg)
            p.notify()
            return
        self.send_alter_partition(p.propose_isr(new_isr))

    def _count_isr_change(self, expand: bool) -> None:
        if expand:
            self.isr_expands += 1
        else:
            self.isr_shrinks += 1

    def alter_partition_done(self, res: wire.AlterPartitionResult) -> None:
        """The controller answered an AlterPartition: the partition applies the committed ISR
        or drops its proposal (:meth:`Partition.alter_partition_answered`)."""
        tp = TopicPartition(res.topic, res.partition)
        p = self.partitions.get(tp)
        if p is None:
            return
        committed = p.alter_partition_answered(res)
        if committed is None:
            return
        if committed.own:
            self._count_isr_change(committed.expand)
        lg = self.logs.get_log(tp)
        if lg is not None:
            p.maybe_increment_leader_hw(lg)
        p.notify()

    def alter_partition_pending(self, item: wire.AlterPartitionItem) -> bool:
        """Whether ``item`` is still its partition's proposal (the controller channel asks
        before a retry)."""
        p = self.partitions.get(TopicPartition(item.topic, item.partition))
        return p is not None and p.still_proposes(item)

    # -- follower side --------------------------------------------------------------------

    def follower_state(self, tp: TopicPartition) -> Partition | None:
        p = self.partitions.get(tp)
        if p is None or p.leader == self.broker_id or p.offline:
            return None
        return p

    def epoch_end_offset(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetsForLeaderEpoch (KIP-101, KIP-320): ``(epoch, end offset)`` of the largest
        epoch at most ``leader_epoch`` in the leader's log, ``(-1, -1)`` if it knows none.
        Answered by the leader only, for a follower about to truncate and for a consumer
        alike (as Kafka's ``lastOffsetForLeaderEpoch`` answers both)."""
        p = self.leader_partition(tp)
        self.check_leader_epoch(p, current_leader_epoch)
        lg = self.log_of(p)
        return lg.epochs.end_offset_for(leader_epoch, lg.log_end_offset)


# Requests grouped into one write stay within what one fetch returns (1 MiB by default) and,
# smaller still, one segment, so a group never forces a roll a single request would not.
PRODUCE_GROUP_MAX_BYTES = 1 << 20


@dataclass(slots=True)
class _QueuedProduce:
    partition: Partition
    data: bytes | bytearray
    future: asyncio.Future[AppendInfo]


def _fail_all(queue: list[_QueuedProduce], error: BaseException) -> None:
    for q in queue:
        if not q.future.done():
            q.future.set_exception(error)


def _groups_within(queue: list[_QueuedProduce], limit: int) -> Iterator[list[_QueuedProduce]]:
    """Consecutive runs of requests whose bodies add up to at most ``limit`` (at least one)."""
    group: list[_QueuedProduce] = []
    size = 0
    for q in queue:
        if group and size + len(q.data) > limit:
            yield group
            group, size = [], 0
        group.append(q)
        size += len(q.data)
    if group:
        yield group


DISK_BATCH = 64
"""Partitions of one controller request whose disk work (a log created or deleted, an epoch
written: 1-3 ms each here) goes to the executor in one call: few enough that the request's
answers come in order soon after, many enough that the hand-over costs little beside it."""
SETTLE_EVERY = 1024
"""Partitions with new logs between two :meth:`ReplicaManager._settle` calls: few enough that
each call's full collection is short (a few ms), many enough that the request is not frozen
call after call."""


@dataclass(slots=True)
class _PendingState:
    """A LeaderAndIsr partition checked on the loop, waiting for its disk work."""

    tp: TopicPartition
    st: wire.LeaderAndIsrPartition
    config: LogConfig
    leads: bool
    """It becomes leader of a new leadership: its epoch is written first."""
    index: int = -1
    """Its place in the request (and in the answer)."""


def _result(topic: str, partition: int, error: KafkaError | None) -> wire.PartitionResult:
    if error is None:
        return wire.PartitionResult(topic=topic, partition=partition)
    return wire.PartitionResult(
        topic=topic, partition=partition, error=error.kafka_error, message=str(error)
    )
