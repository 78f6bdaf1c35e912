"""The controller of one BrokerCluster: liveness, elections, offline replicas, broadcast.

The single writer of leader/ISR state for the cluster's topics (AlterPartition from leaders
goes through the same lock). Each pass reconciles from observation, not from events:

1. liveness: a broker is live while its heartbeats arrive within the session timeout;
2. probe: brokers that came back, reported a log dir failure, or are new to this controller
   (failover) get the full LeaderAndIsr of their partitions (isNewReplica=false, KIP-112
   scenarios 2-4 and 6); KAFKA_STORAGE_ERROR answers mark replicas offline, clean answers
   bring them back;
3. decide (``election.decide``) for every partition; persist changed statuses first (the
   state of record), then send LeaderAndIsr to the live replicas of changed partitions and
   UpdateMetadata (with offline replicas, KIP-112 scenario 5) to every live broker;
4. strays: each probed broker's describe-log-dirs, then the Topics read fresh; the replicas it
   holds that the state of record does not place on it (``plan.strays``) are deleted with
   StopReplica, confirmed by describe-log-dirs, posted as an Event, and the ones not deleted
   yet (or left on a broker that is down) listed in the BrokerCluster's status.

New partitions are created here too (:meth:`ClusterController.create_partitions`), under the
same lock, on what the Topic handler decided (``plan.topic_partitions``). Every command goes
out through ``control.broker_commands``; a broker's StaleControllerEpochError makes the
operator step down (``on_fenced``) wherever it comes from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from jbod_broker import wire
from jbod_broker.client import BrokerClient
from jbod_broker.errors import StaleControllerEpochError
from jbod_broker.storage.errors import KafkaStorageError

from ..clients.brokers import BrokerPool
from ..clients.kube import TOPICS, ApiError, KubeClient
from ..clients.partition_store import PartitionStore, store_of
from ..models import kafka_topic_name, topic_id_of
from ..plan import partition_state, topic_partitions, topic_spec
from ..plan.election import (
    Decision,
    apply_to_status,
    decide,
    settled,
    unchanged,
    validate_alter_partition,
    view_from_status,
)
from ..plan.topic_partitions import PartitionCreation
from .broker_commands import BrokerCommands
from .loop_clock import LoopClock
from .stray_replicas import StrayReplicas

log = logging.getLogger(__name__)


YIELD_EVERY = 1000
"""Partitions decided between two yields to the event loop."""
PROBES_AT_ONCE = 8
"""Brokers sent their whole state at the same time (a takeover sends it to all of them)."""
LOGGED_ELECTIONS = 100
"""Elections logged one by one in a pass; the rest are counted in one line (a failover at
100,000 partitions would log 30 MB)."""
FULL_PASS_S = 5.0
"""The periodic full pass' least interval (small clusters: every 5 s, as before issue 39)."""


def _changed_states(
    topics: list[dict[str, Any]], changes: list[tuple[tuple[str, int], int]]
) -> list[tuple[dict[str, Any], dict[str, Any], int]]:
    """(Topic, partition state, offset) of each change still in the state of record (a
    deleted Topic's are not)."""
    by_uid = {str(t["metadata"].get("uid")): t for t in topics}
    states: dict[str, dict[int, dict[str, Any]]] = {}
    out = []
    for (uid, p), at in changes:
        t = by_uid.get(uid)
        if t is None:
            continue
        if uid not in states:
            states[uid] = {int(s["partition"]): s for s in t["status"]["partitions"]}
        s = states[uid].get(p)
        if s is not None:
            out.append((t, s, at))
    return out


def _metadata(
    states: Iterable[tuple[dict[str, Any], dict[str, Any]]],
) -> list[wire.PartitionMetadata]:
    """UpdateMetadata entries of (Topic, partition state) pairs, as the state of record has them."""
    return [_metadata_of(t, s) for t, s in states]


def _metadata_of(t: dict[str, Any], s: dict[str, Any]) -> wire.PartitionMetadata:
    return partition_state.metadata(kafka_topic_name(t), s, topic_id=topic_id_of(t))


Pair = tuple[dict[str, Any], dict[str, Any]]
"""(Topic joined with its states, one of its partition states)."""

T = TypeVar("T")


async def _yielding(
    pairs: Iterable[Pair], build: Callable[[dict[str, Any], dict[str, Any]], T]
) -> list[T]:
    """``build`` over ``pairs``, yielding to the loop every ``YIELD_EVERY``: at 200,000
    partitions a takeover's metadata alone is seconds of validated models, and heartbeats
    must get their turn (a held loop past the session timeout fences brokers)."""
    out = []
    for i, (t, s) in enumerate(pairs):
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
        out.append(build(t, s))
    return out


async def held_by(topics: Iterable[dict[str, Any]], brokers: set[int]) -> dict[int, list[Pair]]:
    """Each of ``brokers``' replicas, one walk over the record for all of them (a walk per
    broker was 50 walks of 200,000 partitions on a takeover). A replica a reassignment is
    adding is left out: the reassignment creates it in its named dir."""
    out: dict[int, list[Pair]] = {b: [] for b in brokers}
    i = 0
    for t in topics:
        for s in t["status"]["partitions"]:
            i += 1
            if i % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            adding = s.get("addingReplicas") or ()
            for r in s["replicas"]:
                b = r["brokerId"]
                if b in out and b not in adding:
                    out[b].append((t, s))
    return out


class ClusterController:
    def __init__(
        self,
        namespace: str,
        name: str,
        kube: KubeClient,
        pool: BrokerPool,
        *,
        session_timeout_s: float = 6.0,
        preferred_election: bool = True,
        on_fenced: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.kube = kube
        self.pool = pool
        self.commands = BrokerCommands(pool, namespace, name)
        self.session_timeout_s = session_timeout_s
        self.preferred_election = preferred_election
        self.on_fenced = on_fenced
        self.heartbeats: dict[int, float] = {}
        self.known_live: set[int] = set()
        self.needs_probe: set[int] = set()
        self.lock = asyncio.Lock()
        self.started = time.monotonic()
        self.last_full = 0.0
        self.full_pass_s = 0.0
        """How long the last full pass (decide over every partition) took: the periodic one
        runs every :data:`FULL_PASS_S` or ten times that, whichever is longer."""
        self.acked: dict[int, int] = {}
        """Broker → the store offset up to which it was sent every change (its LeaderAndIsr
        and UpdateMetadata): what Kafka's brokers track as their metadata log offset."""
        self.incarnations: dict[int, str] = {}
        self.clock = LoopClock()
        """Liveness is measured on it (heartbeats, the session timeout)."""
        self.probe_failed: set[int] = set()
        """Brokers whose whole state was not taken this term: sent again by the periodic
        pass rather than on every tick."""
        self._task: asyncio.Task[None] | None = None
        self.elections = 0
        self.isr_changed = asyncio.Event()
        """Set, and replaced by a fresh one, each time an AlterPartition changes an ISR: a
        PartitionReassignment whose step waits for its new replicas to join takes the event
        before a pass and waits on it (or its poll interval) after."""
        self.strays = StrayReplicas(self)
        """Stray replica detection and deletion for this cluster (``control.stray_replicas``)."""

    @property
    def store(self) -> PartitionStore:
        """The partition state of record (``clients.partition_store``), shared by every
        writer of this process."""
        return store_of(self.kube)

    # -- liveness -------------------------------------------------------------------------

    def heartbeat(self, broker_id: int, incarnation: str | None = None) -> None:
        """A broker's heartbeat; a new incarnation (the broker restarted, however quickly)
        gets it its whole state again on the next pass."""
        self.heartbeats[broker_id] = self.clock.now()
        if incarnation is not None:
            if self.incarnations.get(broker_id) not in (None, incarnation):
                self.needs_probe.add(broker_id)
            self.incarnations[broker_id] = incarnation

    def live(self) -> set[int]:
        """The brokers whose last heartbeat is within the session timeout, on the loop's
        clock (``control.loop_clock``: a pass that held the loop kills nobody)."""
        now = self.clock.now()
        return {b for b, t in self.heartbeats.items() if now - t <= self.session_timeout_s}

    def liveness_known(self) -> bool:
        """Whether every live broker has had time to heartbeat to this controller (past the
        grace period that follows taking over): before that, silence proves nothing."""
        return time.monotonic() - self.started >= self.session_timeout_s

    def log_dir_failed(self, broker_id: int) -> None:
        self.needs_probe.add(broker_id)

    # -- loop -----------------------------------------------------------------------------

    def start(self) -> None:
        self.started = time.monotonic()
        self.known_live = set()
        self.acked = {}  # a new term sends every broker its whole state once
        # Another controller may have checked, deleted and reported meanwhile: a fresh view.
        self.strays = StrayReplicas(self)
        self.clock.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await self.clock.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except StaleControllerEpochError:
                await self._fenced()
            except Exception:
                log.exception("controller pass failed", extra={"cluster": self.name})
            await asyncio.sleep(0.25)

    async def _fenced(self) -> None:
        log.error("a broker refused our controller epoch: stepping down")
        if self.on_fenced is not None:
            await self.on_fenced()

    async def tick(self) -> None:
        """One pass when something calls for it. Liveness changes and probes run the full
        decision over every partition (``reconcile``); otherwise only the changes since each
        broker's acknowledged offset are delivered (:meth:`deliver`), as KRaft brokers follow
        the metadata log from their offset. The periodic full pass re-checks every decision
        (and the brokers' strays) at a cadence that grows with its own cost."""
        live = self.live()
        now = time.monotonic()
        in_grace = now - self.started < self.session_timeout_s
        came_back = live - self.known_live
        died = set() if in_grace else self.known_live - live
        periodic = now - self.last_full > max(FULL_PASS_S, 10 * self.full_pass_s)
        behind = not in_grace and any(self.acked.get(b, -1) < self.store.offset for b in live)
        if not (came_back or died or self.needs_probe or periodic or behind):
            return
        if in_grace and not came_back and not self.needs_probe:
            return  # brokers may not have found this controller yet: never elect on start
        # A broker this term has not sent its state to yet gets all of it (a takeover, a
        # broker new to this controller, one that restarted or reported a failed dir).
        # One that did not take it is tried again with the periodic pass, not every tick.
        unsent = {b for b in live if b not in self.acked and b not in self.probe_failed}
        probe = (
            came_back
            | (self.needs_probe & live)
            | unsent
            | (live - set(self.acked) if periodic else set())
        )
        self.needs_probe -= probe
        self.probe_failed = set() if periodic else self.probe_failed
        async with self.lock:
            if came_back or died or probe or periodic:
                started = time.monotonic()
                await self.reconcile(live, probe, dead_known=not in_grace)
                await self.strays.check(probe | (live if periodic else set()))
                if periodic:
                    self.full_pass_s = time.monotonic() - started
            if not in_grace:
                await self.deliver(live)
        self.known_live = live if not in_grace else self.known_live | live
        if periodic:
            self.last_full = time.monotonic()

    # -- the pass -------------------------------------------------------------------------

    async def _topics(self) -> list[dict[str, Any]]:
        return [
            t
            for t in await self.store.topics(self.namespace, self.name)
            if t["status"]["partitions"] and not t["metadata"].get("deletionTimestamp")
        ]

    async def reconcile(self, live: set[int], probe: set[int], *, dead_known: bool) -> None:
        """Decide every partition from what is observed, and write what changed; the probed
        brokers get their whole state first (KIP-112's LeaderAndIsr, then the metadata). The
        changed partitions go out with the next delivery (their offsets moved on)."""
        upto = self.store.offset
        topics = await self._topics()
        seen = await self._probe_all(topics, probe, live, upto)
        dead = (set(range(self.broker_count(topics))) - live) if dead_known else set()
        elected = 0
        for t in topics:
            updates: dict[int, dict[str, Any]] = {}
            for i, s in enumerate(t["status"]["partitions"]):
                if i % YIELD_EVERY == YIELD_EVERY - 1:
                    await asyncio.sleep(0)  # heartbeats and AlterPartitions get their turn
                out = self._decided(kafka_topic_name(t), s, live, dead, dead_known, seen)
                if out is None:
                    continue
                updates[int(s["partition"])] = out[0]
                if out[1].leader_changed:
                    self.elections += 1
                    elected += 1
                    if elected <= LOGGED_ELECTIONS:
                        self._log_election(out[1])
            if updates:
                try:
                    await self.store.put(t, updates)
                except ApiError as e:
                    if e.status == 409:
                        # Someone wrote the status since we read it: redo on the next pass.
                        self.last_full = 0.0
                        return
                    raise
        if elected > LOGGED_ELECTIONS:
            log.warning(
                "leaders elected",
                extra={"event": "leader_elections", "count": elected, "logged": LOGGED_ELECTIONS},
            )

    async def _probe_all(
        self, topics: list[dict[str, Any]], probe: set[int], live: set[int], upto: int
    ) -> tuple[dict[tuple[str, int], set[int]], dict[tuple[str, int], set[int]]]:
        """Each probed broker's whole state, a few at a time; what they answered: replicas on
        failed dirs (KAFKA_STORAGE_ERROR) and replicas answered clean, by partition."""
        errors: dict[tuple[str, int], set[int]] = {}
        ok: dict[tuple[str, int], set[int]] = {}
        gate = asyncio.Semaphore(PROBES_AT_ONCE)

        held = await held_by(topics, probe)

        async def probed(b: int) -> bool:
            async with gate:
                return await self._probe(b, held[b], errors, ok)

        answers = await asyncio.gather(*(probed(b) for b in sorted(probe)))
        told = {b for b, done in zip(sorted(probe), answers, strict=True) if done}
        took = await self._update_metadata(topics, told, live) if told else set()
        for b in took:
            self.acked[b] = upto  # what changes later is delivered after this pass
        self.probe_failed |= probe - took
        return errors, ok

    def _decided(
        self,
        name: str,
        s: dict[str, Any],
        live: set[int],
        dead: set[int],
        dead_known: bool,
        seen: tuple[dict[tuple[str, int], set[int]], dict[tuple[str, int], set[int]]],
    ) -> tuple[dict[str, Any], Decision] | None:
        """Partition state ``s`` decided (``election.decide``): its new entry and the
        decision, or None when it stays as it is."""
        key = (name, s["partition"])
        errors, ok = seen
        live_for = live if dead_known else live | set(partition_state.replica_ids(s))
        answered = key in errors or key in ok
        if not answered and settled(s, live_for, dead, preferred_election=self.preferred_election):
            return None
        disk_off = (set(s.get("diskOfflineReplicas", [])) | errors.get(key, set())) - ok.get(
            key, set()
        )
        s2 = {**s, "diskOfflineReplicas": sorted(disk_off)}
        v = view_from_status(name, s2)
        d = decide(v, live_for, preferred_election=self.preferred_election)
        # In the grace period nobody is known dead: the record's offline replicas stay
        # offline until their broker registers (else a takeover would rewrite every shard
        # holding a dead broker's replica, and rewrite it back once the grace period ends).
        gone = dead if dead_known else set(s.get("offlineReplicas") or ()) - live
        out = apply_to_status(s2, d.after, gone)
        return None if unchanged(s, out) else (out, d)

    def _log_election(self, d: Decision) -> None:
        log.warning(
            "leader elected",
            extra={
                "event": "leader_election",
                "topic": d.before.topic,
                "partition": d.before.partition,
                "old_leader": d.before.leader,
                "new_leader": d.after.leader,
                "leader_epoch": d.after.leader_epoch,
                "isr": list(d.after.isr),
            },
        )

    def broker_count(self, topics: list[dict[str, Any]]) -> int:
        ids = {
            int(r["brokerId"])
            for t in topics
            for s in t["status"]["partitions"]
            for r in s["replicas"]
        }
        return max([*ids, *self.heartbeats, -1]) + 1

    def _state(
        self, t: dict[str, Any], s: dict[str, Any], *, is_new: bool = False
    ) -> wire.LeaderAndIsrPartition:
        # The configs in force (status.configs), never the spec's: a spec edit the topic
        # handler refused must not reach the brokers (issue 14).
        configs = topic_spec.configs_in_force(t)
        return partition_state.leader_and_isr(
            kafka_topic_name(t),
            s,
            is_new=is_new,
            min_isr=topic_spec.min_insync_replicas(configs),
            configs=configs,
            topic_id=topic_id_of(t),
        )

    async def _probe(
        self,
        b: int,
        held: list[Pair],
        errors: dict[tuple[str, int], set[int]],
        ok: dict[tuple[str, int], set[int]],
    ) -> bool:
        """Ask broker ``b`` for the state of the partitions it ``held`` (KIP-112): the full
        LeaderAndIsr (``held_by``: without the replicas a reassignment is adding)."""
        states = await _yielding(held, self._state)
        if not states:
            return True
        resp = await self.commands.leader_and_isr(b, states, self.live() | {b})
        if resp is None:
            return False
        for r in resp.partitions:
            key = (r.topic, r.partition)
            if r.error == KafkaStorageError.kafka_error:
                errors.setdefault(key, set()).add(b)
            elif r.error is None:
                ok.setdefault(key, set()).add(b)
        return True

    async def _update_metadata(
        self, topics: list[dict[str, Any]], to: set[int], live: set[int]
    ) -> set[int]:
        """Every partition's metadata to the brokers ``to``; those that took it all."""
        return await self.commands.update_metadata_to(
            await _yielding(
                ((t, s) for t in topics for s in t["status"]["partitions"]), _metadata_of
            ),
            to,
            live,
        )

    # -- delivery ------------------------------------------------------------------------

    async def deliver(self, live: set[int]) -> None:
        """Each live broker the changes past its acknowledged offset: LeaderAndIsr for the
        partitions it holds (not a replica a reassignment is adding: that one is created in
        its named dir by the reassignment), UpdateMetadata for all. Brokers at one offset get
        the same UpdateMetadata, encoded once. A broker that did not take it stays behind and
        is sent it again on the next pass."""
        upto = self.store.offset
        behind = {b: self.acked[b] for b in live if b in self.acked and self.acked[b] < upto}
        if not behind:
            return
        changes = self.store.changes_since(self.namespace, min(behind.values()))
        found = _changed_states(await self._topics(), changes)
        by_offset: dict[int, list[int]] = {}
        for b, at in behind.items():
            by_offset.setdefault(at, []).append(b)
        for at, brokers in sorted(by_offset.items()):
            mine = [(t, s) for t, s, off in found if off > at]
            if not mine:  # the changes were another cluster's (the offsets are the store's)
                self.acked.update(dict.fromkeys(brokers, upto))
                continue
            took = await self.commands.update_metadata_to(
                _metadata(mine),
                brokers,
                live,
            )
            for b in sorted(took):
                if await self._deliver_states(b, mine, live):
                    self.acked[b] = upto

    async def _deliver_states(
        self, b: int, changed: list[tuple[dict[str, Any], dict[str, Any]]], live: set[int]
    ) -> bool:
        states = [
            self._state(t, s)
            for t, s in changed
            if b in partition_state.replica_ids(s)
            and b not in (s.get("diskOfflineReplicas") or ())
            and b not in (s.get("addingReplicas") or ())
        ]
        if not states:
            return True
        return await self.commands.leader_and_isr(b, states, live) is not None

    # -- partition creation ----------------------------------------------------------------

    async def create_partitions(
        self, resource: str, decide: Callable[[dict[str, Any]], Awaitable[PartitionCreation]]
    ) -> PartitionCreation | None:
        """Create the partitions ``decide`` plans on Topic ``resource`` as stored now.

        Under the lock every writer of partition states takes, on the Topic read fresh: of two
        Topics racing for one Kafka name, the second to get here sees the first one's
        partitions, and no leader or ISR read before an election is written back. The order
        is Kafka's controller's: the brokers confirm our epoch, the state of record is
        written, then the brokers are told (a crash in between is finished by the next
        pass). A stale epoch steps the operator down and is re-raised before anything is
        written. Returns the decision (its status as written), None if the Topic is gone."""
        async with self.lock:
            fresh = await self.store.topic(self.namespace, resource)
            if fresh is not None and not await self.store.migrate(fresh):
                fresh = await self.store.topic(self.namespace, resource)
            if fresh is None:
                return None
            creation = await decide(fresh)
            if not creation.new:
                return creation
            try:
                await self.commands.confirm_epoch(creation.live)
                await self._record_new(fresh, creation)
                fresh["status"] = creation.status
                await self._tell_new(fresh, creation)
            except StaleControllerEpochError:
                await self._fenced()
                raise
            return creation

    async def migrate(self, resource: str) -> None:
        """Move Topic ``resource``'s partition states from its status (an operator before
        shards wrote them there) into its shards, under the lock every writer takes."""
        async with self.lock:
            fresh = await self.store.topic(self.namespace, resource)
            if fresh is not None:
                await self.store.migrate(fresh)

    async def _record_new(self, fresh: dict[str, Any], c: PartitionCreation) -> None:
        """The Topic's status (topic id and configs first: no broker may hear of a partition
        without them), then the new partitions' states in their shards. A crash in between
        leaves partitions missing, created by the next pass with the same id."""
        status = topic_partitions.without_partitions(c.status)
        out = await self.kube.replace_status(TOPICS, self.namespace, {**fresh, "status": status})
        states = {int(s["partition"]): s for s in c.status["partitions"]}
        await self.store.put(out if isinstance(out, dict) else fresh, {p: states[p] for p in c.new})

    async def _tell_new(self, t: dict[str, Any], c: PartitionCreation) -> None:
        """Preferred dirs and LeaderAndIsr to each live replica of the topic, then its
        metadata (replicas a broker answered KAFKA_STORAGE_ERROR for, or not live, offline)."""
        states = t["status"]["partitions"]
        offline: dict[int, set[int]] = {}
        for b in c.live:
            moves = [
                (c.topic, s["partition"], r["logDir"])
                for s in states
                if s["partition"] in c.new
                for r in s["replicas"]
                if r["brokerId"] == b and r.get("logDir")
            ]
            if moves and not await self._prefer_dirs(b, moves):
                continue
            parts = [
                self._state(t, s, is_new=s["partition"] in c.new)
                for s in states
                if b in partition_state.replica_ids(s)
            ]
            resp = await self.commands.leader_and_isr(b, parts, c.live) if parts else None
            for r in resp.partitions if resp is not None else ():
                if r.error == KafkaStorageError.kafka_error:
                    offline.setdefault(r.partition, set()).add(b)
        meta = [
            partition_state.metadata(
                c.topic,
                s,
                offline.get(s["partition"], set())
                | (set(partition_state.replica_ids(s)) - set(c.live)),
                topic_id=topic_id_of(t),
            )
            for s in states
        ]
        await self.commands.update_metadata(meta, c.live)

    async def _prefer_dirs(self, b: int, moves: list[tuple[str, int, str]]) -> bool:
        """KIP-113: the broker remembers the directory of a replica it does not hold yet
        (REPLICA_NOT_AVAILABLE) and creates it there on LeaderAndIsr. Whether it took them."""

        async def alter(client: BrokerClient) -> bool:
            await client.alter_replica_log_dirs(moves)
            return True

        return bool(await self.commands.send(b, "alter_replica_log_dirs", alter))

    # -- AlterPartition -------------------------------------------------------------------

    def _signal_isr_change(self) -> None:
        changed, self.isr_changed = self.isr_changed, asyncio.Event()
        changed.set()

    async def alter_partition(
        self, broker: int, item: wire.AlterPartitionItem
    ) -> wire.AlterPartitionResult:
        async with self.lock:
            for _ in range(5):
                topics = await self._topics()
                t = next((x for x in topics if kafka_topic_name(x) == item.topic), None)
                parts = (t or {}).get("status", {}).get("partitions") or []
                s = next((p for p in parts if p["partition"] == item.partition), None)
                if t is None or s is None:
                    return wire.AlterPartitionResult(
                        topic=item.topic,
                        partition=item.partition,
                        error="UNKNOWN_TOPIC_OR_PARTITION",
                    )
                v = view_from_status(item.topic, s)
                # Before liveness is known (just after taking over) no broker counts as fenced.
                known = self.liveness_known()
                fenced = frozenset(set(v.replicas) - self.live()) if known else frozenset()
                err = validate_alter_partition(
                    v, broker, item.leader_epoch, item.partition_epoch, list(item.new_isr), fenced
                )
                if err is None:
                    s = {**s, "isr": list(item.new_isr), "partitionEpoch": v.partition_epoch + 1}
                    try:
                        await self.store.put(t, {item.partition: s})
                    except ApiError as e:
                        if e.status == 409:
                            continue
                        raise
                    self._signal_isr_change()
                    log.info(
                        "ISR changed",
                        extra={
                            "event": "isr_change",
                            "topic": item.topic,
                            "partition": item.partition,
                            "isr": list(item.new_isr),
                        },
                    )
                return wire.AlterPartitionResult(
                    topic=item.topic,
                    partition=item.partition,
                    error=err,
                    leader=s["leader"],
                    leader_epoch=s["leaderEpoch"],
                    isr=list(s["isr"]),
                    partition_epoch=s.get("partitionEpoch", 0),
                )
        return wire.AlterPartitionResult(
            topic=item.topic, partition=item.partition, error="CONCURRENT_TRANSACTIONS"
        )
