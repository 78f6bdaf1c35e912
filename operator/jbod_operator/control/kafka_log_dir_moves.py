"""The second adapter of ``plan.execution.LogDirMoveExecutor``: a LogDirMove on an Apache
Kafka cluster the operator does not run (issue 22), through its Admin API.

Kafka's controller and brokers execute the moves (KIP-113): the operator asks with
AlterReplicaLogDirs and reads back with DescribeLogDirs, and keeps no state of its own on
the Kafka side beyond the broker configs it sets and lifts (the copy throttle
``replica.alter.log.dirs.io.max.bytes.per.second`` and, on Kafka 4.3+, ``cordoned.log.dirs``).
Where a replica lives is Kafka's metadata (nothing to record); the plan and each replica's
state live in the LogDirMove's status, as on our brokers.

Dir names: a Kafka log dir is its absolute path (as the KafkaCluster's status lists it). A
LogDirMove names it by that path or by the path's last component (``/disks/b/kafka-logs`` is
``kafka-logs``; ``.../data-1`` is also ``1``, the BrokerCluster naming ``wire`` applies to
every dir), so the spec's one field means the same on both kinds of cluster. Where two dirs
of a broker end alike, the path is the unambiguous name.

Progress: DescribeLogDirs lists a moving replica twice, the current copy and the future one
(``is_future``); the future's size against the current one's is the progress, and the rate
is the future's growth between two samples of one pass (the wait samples, the observation
reads again). That mapping, and the other pure ones (AlterReplicaLogDirs' answers, the
cordon's change), are ``plan.kafka_log_dir_move``; this module does the I/O. Kafka keeps no
cancelled state: a cancel points the replica back at its current dir (what Kafka 4.x's
reassignment tool does), which drops the future copy, and is confirmed by reading
DescribeLogDirs until the future copy is gone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence

from jbod_broker import wire

from ..clients.kafka_admin import KafkaAdmin, KafkaAdminError
from ..plan.execution import ActionFailed, ClusterUnusable
from ..plan.kafka_dirs import cluster_size_of, kafka_broker_dirs
from ..plan.kafka_log_dir_move import Sample, cordon_change, futures_of, move_progress, start_answer
from ..plan.kafka_types import BrokerLogDirs, ConfigKind
from ..plan.port_types import (
    BrokerDirs,
    CancelMoves,
    Cordon,
    RecordInTopic,
    ReplicaKey,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
)
from .kafka_reads import answered_log_dirs

log = logging.getLogger(__name__)

COPY_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
"""Kafka's per-broker rate limit of the copies between its log dirs (KIP-113)."""

CORDONED_LOG_DIRS = "cordoned.log.dirs"
"""Kafka 4.3's (KIP-1066) per-broker list of dirs no new replica is placed in."""

# -- the adapter ------------------------------------------------------------------------------


class KafkaLogDirMoves:
    """A LogDirMove's steps on an Apache Kafka cluster (``plan.execution.LogDirMoveExecutor``),
    over one KafkaCluster's :class:`KafkaAdmin` (shared with its status refresh). One serves
    one pass: the samples the wait takes give the rates the observation reports."""

    def __init__(
        self, admin: KafkaAdmin, *, poll_s: float = 0.5, cancel_wait_s: float = 30.0
    ) -> None:
        self.admin = admin
        self.poll_s = poll_s
        self.cancel_wait_s = cancel_wait_s
        self._live: frozenset[int] | None = None
        self._samples: dict[ReplicaKey, Sample] = {}

    async def _live_brokers(self) -> frozenset[int]:
        if self._live is None:
            desc = await self.admin.describe_cluster()
            self._live = frozenset(b.broker_id for b in desc.brokers if not b.fenced)
        return self._live

    async def _read(self, broker: int) -> BrokerLogDirs | None:
        """The broker's DescribeLogDirs as every Kafka adapter reads it (``control.kafka_reads``:
        asked again once); None when it did not answer."""
        return await answered_log_dirs(self.admin, broker)

    # -- observe ------------------------------------------------------------------------------

    async def cluster_size(self) -> int | None:
        """Kafka's broker ids are the plan's: the size covers the highest one (ids Kafka does
        not have answer as absent brokers)."""
        try:
            desc = await self.admin.describe_cluster()
        except KafkaAdminError as exc:
            raise ClusterUnusable(
                "KafkaUnreachable", f"Kafka's DescribeCluster failed: {exc}"
            ) from None
        self._live = frozenset(b.broker_id for b in desc.brokers if not b.fenced)
        return cluster_size_of(b.broker_id for b in desc.brokers)

    async def describe_dirs(self, brokers: Sequence[int]) -> Mapping[int, BrokerDirs | None]:
        live = await self._live_brokers()
        out: dict[int, BrokerDirs | None] = {}
        for b in brokers:
            read = await self._read(b) if b in live else None
            out[b] = None if read is None else kafka_broker_dirs(read)
        return out

    async def describe_moves(
        self, broker: int, replicas: Sequence[tuple[str, int]]
    ) -> Sequence[wire.ReplicaLogDirInfo]:
        read = await self._read(broker)
        if read is None:
            return []
        before = {(t, p): s for (b, t, p), s in self._samples.items() if b == broker}
        return move_progress(read, replicas, before, time.monotonic())

    async def wait_for_a_move_to_end(
        self, by_broker: Mapping[int, Sequence[tuple[str, int]]], wait_s: float
    ) -> bool:
        """Kafka has no long poll: read DescribeLogDirs every ``poll_s`` until one of these
        future copies is gone (the move ended: swapped, or failed), or ``wait_s`` passed. The
        first reading of each future copy is the sample the pass's rate is measured from."""
        if not by_broker:
            return False
        deadline = time.monotonic() + wait_s
        while True:
            answered = False
            for b, replicas in sorted(by_broker.items()):
                read = await self._read(b)
                if read is None:
                    continue
                answered = True
                now = time.monotonic()
                futures = futures_of(read)
                for key in replicas:
                    if key not in futures:
                        return True
                    self._samples.setdefault((b, *key), (now, futures[key]))
            if not answered:
                return False
            if time.monotonic() >= deadline:
                return True
            await asyncio.sleep(self.poll_s)

    async def reassigning(self) -> Mapping[tuple[str, int], str]:
        """Kafka's own reassignments in flight, whoever started them."""
        try:
            ongoing = await self.admin.list_partition_reassignments()
        except KafkaAdminError as exc:
            raise ClusterUnusable(
                "KafkaUnreachable", f"Kafka's ListPartitionReassignments failed: {exc}"
            ) from None
        return {(o.topic, o.partition): "(Kafka's, in flight)" for o in ongoing}

    # -- act ----------------------------------------------------------------------------------

    async def _alter(self, replica: ReplicaKey, target: str) -> str | None:
        b, topic, partition = replica
        answer = await self.admin.alter_replica_log_dirs({(topic, partition, b): target})
        return answer.get((topic, partition, b))

    async def start(self, action: Start) -> StartResult:
        try:
            error = await self._alter(action.replica, action.target)
        except KafkaAdminError as exc:
            if exc.unreachable:
                return StartResult(action.replica, StartAnswer.BROKER_AWAY)
            return StartResult(action.replica, StartAnswer.REFUSED, str(exc))
        return start_answer(action.replica, error)

    async def resend(self, action: Resend) -> None:
        """Asked again (the same dir: Kafka answers without a new copy where one runs)."""
        error = await self._alter(action.replica, action.target)
        if error is not None:
            raise KafkaAdminError("AlterReplicaLogDirs", error)

    async def cancel(self, action: CancelMoves) -> None:
        """Each replica with a future copy pointed back at its current dir; then DescribeLogDirs
        read until the future copies are gone (a warning names any left)."""
        by_broker: dict[int, list[tuple[str, int]]] = {}
        for b, topic, partition in action.replicas:
            by_broker.setdefault(b, []).append((topic, partition))
        for b, keys in sorted(by_broker.items()):
            read = await self._read(b)
            if read is None:
                log.warning("cancel not delivered: broker did not answer", extra={"broker": b})
                continue
            back = {
                (info.topic, info.partition, b): info.current_log_dir
                for info in move_progress(read, keys, {}, 0.0)
                if info.future_log_dir is not None and info.current_log_dir is not None
            }
            if not back:
                continue
            try:
                answers = await self.admin.alter_replica_log_dirs(back)
            except KafkaAdminError as exc:
                log.warning("cancel not delivered", extra={"broker": b, "error": str(exc)})
                continue
            refused = {k: e for k, e in answers.items() if e is not None}
            if refused:
                log.warning("cancel refused", extra={"broker": b, "error": str(refused)})
            await self._wait_futures_gone(b, [(t, p) for t, p, _ in back])

    async def _wait_futures_gone(self, broker: int, keys: Sequence[tuple[str, int]]) -> None:
        deadline = time.monotonic() + self.cancel_wait_s
        while True:
            read = await self._read(broker)
            left = sorted(set(keys) & set(futures_of(read))) if read is not None else None
            if left == []:
                return
            if time.monotonic() >= deadline:
                log.warning(
                    "future copies still there after the cancel",
                    extra={"broker": broker, "error": str(left)},
                )
                return
            await asyncio.sleep(self.poll_s)

    async def set_throttle(self, action: SetThrottle) -> None:
        """On live brokers only (KAFKA-13392: a config written for a dead broker's id is
        applied when it returns, and nothing lifts it); 0 deletes the config. Kafka keeps it
        across a broker's restart, so the rate every pass names again is sent only when it
        changed (:meth:`KafkaAdmin.ensure_configs`). For the same reason a write that fails
        raises :class:`ActionFailed` once every broker was tried: the pass is not recorded and
        the next one sets or lifts it again (a lift that failed at the end would otherwise be
        left on the broker for good)."""
        try:
            live = await self._live_brokers()
        except KafkaAdminError as exc:
            raise ActionFailed(f"throttle not set: {exc}") from None
        value = str(action.rate) if action.rate > 0 else None
        failed: list[str] = []
        for b in action.brokers:
            if b not in live:
                log.warning("throttle not set: broker not live", extra={"broker": b})
                continue
            try:
                await self.admin.ensure_configs(ConfigKind.BROKER, str(b), {COPY_THROTTLE: value})
            except KafkaAdminError as exc:
                failed.append(f"broker {b}: {exc}")
        if failed:
            raise ActionFailed("throttle not set: " + "; ".join(failed))

    async def cordon(self, action: Cordon) -> None:
        """``cordoned.log.dirs`` gets (or loses) the dir's path, on Kafka 4.3+. An older broker
        reports no cordon flag: the drain goes on uncordoned and a warning says so."""
        b = action.drain.broker_id
        read = await self._read(b)
        if read is None:
            return
        bd = kafka_broker_dirs(read)
        found = bd.find(action.drain.log_dir)
        d = next((x for x in read.dirs if found is not None and x.path == found.path), None)
        if d is None:
            return
        if d.cordoned is None:
            # Said in the LogDirMove's status too (``Dir.can_cordon``).
            log.warning(
                "broker cannot cordon a log dir (cordoned.log.dirs needs Kafka 4.3+): "
                "the drain goes on uncordoned",
                extra={"broker": b},
            )
            return
        change = cordon_change(d, action.on)
        if change is None:
            return
        try:
            await self.admin.alter_list_config(
                ConfigKind.BROKER,
                str(b),
                CORDONED_LOG_DIRS,
                append=change if action.on else (),
                subtract=() if action.on else change,
            )
        except KafkaAdminError as exc:
            log.warning("cordon not changed", extra={"broker": b, "error": str(exc)})

    async def record_placement(self, action: RecordInTopic) -> None:
        """Nothing: Kafka's metadata is the state of record of where a replica lives."""
        return None
