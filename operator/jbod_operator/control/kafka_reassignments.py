"""A PartitionReassignment's steps on an Apache Kafka cluster the operator does not run: the
second ``plan.execution.ReassignmentExecutor`` (issue 22), over ``clients.kafka_admin``.

Kafka's controller executes each step; this adapter reads Kafka's metadata and its ongoing
reassignments as the partition state of record (``plan.kafka_reassignment`` maps them, pure),
and turns what the plan writes into Admin API requests: a step's new replicas' dirs named with
AlterReplicaLogDirs, then AlterPartitionReassignments to the step's target; a cancelled step a
null target (the replica order Kafka's revert may have changed is put back by the plan's next
passes, as a reorder); ElectLeaders PREFERRED where the plan elects the first replica; the throttles
as IncrementalAlterConfigs on the live brokers and the moving topics. Kafka deletes the
dropped replicas and tells its brokers itself, so :meth:`delete` and :meth:`announce` do
nothing. Every request is idempotent, so a pass repeated after an operator restart repeats
nothing that matters; a failed call is logged and the next pass tries again from what Kafka
then reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence

from ..clients.kafka_admin import KafkaAdmin, KafkaAdminError
from ..models import PartitionReassignment
from ..plan import kafka_reassignment as kr
from ..plan.execution import ActionFailed
from ..plan.kafka_dirs import cluster_size_of
from ..plan.kafka_types import ConfigKind, KafkaErrorName
from ..plan.port_types import (
    TP,
    BrokerDirs,
    ClusterSeen,
    Delete,
    PartitionsSeen,
    PartView,
    PreferDir,
    RecordDirs,
    Tell,
    Throttle,
    ThrottleSeen,
    WritePartition,
)
from .kafka_reads import read_cluster

log = logging.getLogger(__name__)

_NOT_THERE_YET_ANSWERS = frozenset(
    {
        None,
        KafkaErrorName.REPLICA_NOT_AVAILABLE.value,
        KafkaErrorName.NOT_LEADER_FOR_PARTITION.value,
    }
)
"""AlterReplicaLogDirs' answers for a new replica that is not on its broker yet (asked again
by the next pass), besides success: nothing to warn about."""


class KafkaReassignments:
    """One pass of a PartitionReassignment on a KafkaCluster: :meth:`cluster` and
    :meth:`partitions` keep what they read, which the act-side methods compare against."""

    def __init__(self, admin: KafkaAdmin, lock: asyncio.Lock, cluster: str) -> None:
        self.admin = admin
        self.lock = lock
        self.cluster_name = cluster
        self.live: frozenset[int] = frozenset()
        self.dirs: dict[int, BrokerDirs | None] = {}
        self.seen: dict[TP, PartView] = {}
        self.written: dict[TP, PartView] = {}
        self.topics: tuple[str, ...] = ()
        self.topic_configs: dict[str, dict[str, str | None]] = {}

    # -- observe ------------------------------------------------------------------------------

    async def cluster(self) -> ClusterSeen | None:
        """The cluster as :func:`read_cluster` reads it. An unreachable cluster raises
        :class:`ClusterUnusable`: the pass says so and decides nothing from a cluster not
        read."""
        desc, self.dirs = await read_cluster(self.admin)
        unfenced = {b.broker_id for b in desc.brokers if not b.fenced}
        # Live: unfenced and answering. A broker in its controlled shutdown stays unfenced for
        # a while with its listener closed: a config sent to it would fail (KAFKA-13392's
        # case), and a step to it waits, saying the broker is not live.
        self.live = frozenset(b for b in unfenced if self.dirs.get(b) is not None)
        names = sorted({d.name for bd in self.dirs.values() if bd is not None for d in bd.dirs})
        return ClusterSeen(
            size=cluster_size_of(b.broker_id for b in desc.brokers),
            dir_names=tuple(names),
            brokers=dict(self.dirs),
            broker_ids=frozenset(b.broker_id for b in desc.brokers),
        )

    def serialized(self) -> contextlib.AbstractAsyncContextManager[object]:
        """A per-cluster lock: the passes of the cluster's resources read the reassignments in
        flight and submit theirs one at a time, so two never both fill the same budget."""
        return self.lock

    async def liveness(self) -> tuple[frozenset[int], bool]:
        """The unfenced brokers that answered (Kafka's controller fences one that stops
        heartbeating)."""
        return self.live, True

    async def partitions(self, pr: PartitionReassignment) -> PartitionsSeen:
        try:
            return await self._partitions(pr)
        except KafkaAdminError:
            # kafka-python routes some calls to the broker its metadata names controller; when
            # that broker stopped, every such call fails until the client starts afresh.
            await self.admin.close()
            raise

    async def _partitions(self, pr: PartitionReassignment) -> PartitionsSeen:
        self.topics = tuple(sorted({t.topic for t in pr.spec.partitions}))
        metadata = await self.admin.describe_topics(self.topics)
        ongoing = await self.admin.list_partition_reassignments()
        min_isr: dict[str, int] = {}
        self.topic_configs = {}
        for t in metadata:
            if t.error is not None:
                continue
            cfg = await self.admin.describe_configs(
                ConfigKind.TOPIC, t.name, [kr.MIN_ISR, *kr.TOPIC_THROTTLE_KEYS]
            )
            isr = cfg.get(kr.MIN_ISR)
            min_isr[t.name] = int(isr.value) if isr is not None and isr.value else 1
            self.topic_configs[t.name] = {
                k: (cfg[k].value or None) if k in cfg else None for k in kr.TOPIC_THROTTLE_KEYS
            }
        status = pr.status
        batch = status.current_batch if status else []
        mine = {(e.topic, e.partition): e.target_brokers for e in batch}
        started_from = {(e.topic, e.partition): e.current_brokers for e in batch}
        adoptable: dict[TP, frozenset[int]] = {}
        if status is not None and status.phase is not None:
            targets = {(t.topic, t.partition): t.replicas for t in pr.spec.partitions}
            for o in status.original or []:
                key = (o.topic, o.partition)
                adoptable[key] = frozenset(o.replicas) | frozenset(targets.get(key, ()))
        read = kr.read_partitions(
            pr.metadata.name,
            self.topics,
            metadata,
            ongoing,
            mine,
            adoptable,
            min_isr,
            self.dirs,
            started_from,
        )
        self.seen = {
            (name, p): pv for name, tv in read.topics.items() for p, pv in tv.partitions.items()
        }
        return PartitionsSeen(read.topics, read.busy, read.claims, read.others_in_flight)

    async def throttles(self, brokers: Sequence[int]) -> Mapping[int, ThrottleSeen]:
        """From the throttled-replica lists of the topics :meth:`partitions` read (Kafka's
        DescribeConfigs): per broker, the replicas they name on it. The rate is not read
        (0): a broker's rate throttles only the replicas a list names, and the lists here
        are only of the topics this resource names, so a rate with none of them may be
        another reassignment's."""
        return kr.throttles_seen(self.topic_configs, brokers)

    # -- act ----------------------------------------------------------------------------------

    async def write_partitions(self, writes: Sequence[WritePartition]) -> None:
        self.written = {w.view.key: w.view for w in writes}
        sub = kr.submit(writes, self.seen)
        if sub.dirs:
            # Before the step: a broker that does not host the replica yet remembers the dir
            # and creates it there (it answers that the replica is not there: expected).
            await self._alter_dirs(dict(sub.dirs))
        if sub.targets:
            await self._reassign({k: list(v) for k, v in sub.targets.items()})
        if sub.cancels:
            await self._cancel(sub.cancels)

    async def _reassign(self, targets: dict[TP, list[int] | None]) -> None:
        try:
            answers = await self.admin.alter_partition_reassignments(targets)
        except KafkaAdminError as e:
            log.warning("reassignment not submitted", extra={"error": str(e)})
            return
        for key, err in sorted(answers.items()):
            if err is not None and err != KafkaErrorName.NO_REASSIGNMENT_IN_PROGRESS:
                log.warning(
                    "reassignment refused",
                    extra={
                        "event": "reassign_refused",
                        "partition": f"{key[0]}-{key[1]}",
                        "error": err,
                    },
                )

    async def _cancel(self, keys: Sequence[TP]) -> None:
        """Null targets: Kafka reverts each step to the replicas before it. The order the
        revert leaves and the leader are the plan's to check on the next passes, which write
        a reorder (a target with nothing in flight) and elect where they differ: a read made
        here could lag the revert, and a cancel that ended with the pass could not retry."""
        await self._reassign(dict.fromkeys(keys))
        log.info(
            "steps cancelled on Kafka",
            extra={
                "event": "reassignment_cancelled_steps",
                "partitions": [f"{t}-{p}" for t, p in sorted(keys)],
            },
        )

    async def _alter_dirs(self, dirs: dict[tuple[str, int, int], str]) -> None:
        try:
            answers = await self.admin.alter_replica_log_dirs(dirs)
        except KafkaAdminError as e:
            log.warning("log dirs not named", extra={"error": str(e)})
            return
        for (t, p, b), err in sorted(answers.items()):
            if err not in _NOT_THERE_YET_ANSWERS:
                log.warning(
                    "log dir refused",
                    extra={
                        "event": "log_dir_refused",
                        "partition": f"{t}-{p}",
                        "broker": b,
                        "error": err,
                    },
                )

    async def _elect(self, partitions: Sequence[TP]) -> None:
        if not partitions:
            return
        try:
            answers = await self.admin.elect_leaders(partitions)
        except KafkaAdminError as e:
            log.warning("preferred leaders not elected", extra={"error": str(e)})
            return
        for key, err in sorted(answers.items()):
            if err is not None:
                log.info(
                    "preferred leader not elected",
                    extra={"partition": f"{key[0]}-{key[1]}", "error": err},
                )

    async def record_dirs(self, records: Sequence[RecordDirs]) -> None:
        """Nothing: Kafka's metadata is the record, and the entries this adapter reads take
        each replica's dir from Kafka's DescribeLogDirs."""

    async def prefer_dirs(self, prefer: Sequence[PreferDir]) -> None:
        """AlterReplicaLogDirs: the retry while a new replica does not exist yet (each pass
        asks again until the replica is in its dir), and the move of one in another dir."""
        if prefer:
            await self._alter_dirs({(a.topic, a.partition, a.broker): a.log_dir for a in prefer})

    async def tell(self, tells: Sequence[Tell]) -> None:
        await self._elect(
            kr.to_elect(((t.topic, t.partition) for t in tells), self.written, self.seen)
        )

    async def delete(self, deletes: Sequence[Delete]) -> None:
        """Nothing: Kafka's controller deletes the replicas a reassignment drops."""

    async def throttle(self, actions: Sequence[Throttle]) -> None:
        """Each broker's rates, then every moving topic's throttled replicas from all of the
        pass' throttles together (the plan gives one per live broker involved). Each pass
        names the same rates again: a broker's are sent only when they changed (or were last
        sent long ago, :meth:`KafkaAdmin.ensure_configs`), a topic's lists only when they
        differ from what the pass read. Written from
        part of them, one broker's at a time, a topic's lists dropped the other brokers'
        replicas between two calls of every pass: each such moment let a throttled follower
        fetch unthrottled, and a step meant to copy at 16 KiB/s caught up in seconds.

        Kafka keeps these configs in its metadata until they are lifted (a broker restart does
        not clear them), so a call that fails raises :class:`ActionFailed` once the others
        were tried: the pass is not recorded and the next one sets or lifts them again (at the
        end, a lift that failed would otherwise be left for good)."""
        failed: list[str] = []
        for action in actions:
            try:
                await self.admin.ensure_configs(
                    ConfigKind.BROKER, str(action.broker), kr.broker_throttle(action)
                )
            except KafkaAdminError as e:
                failed.append(f"broker {action.broker}: {e}")
        for topic, changes in kr.topic_throttles(actions, self.topics).items():
            if self.topic_configs.get(topic) == changes:
                continue
            try:
                await self.admin.incremental_alter_configs(ConfigKind.TOPIC, topic, changes)
                self.topic_configs[topic] = changes
            except KafkaAdminError as e:
                failed.append(f"topic {topic}: {e}")
        if failed:
            raise ActionFailed("throttle not set: " + "; ".join(failed))

    async def announce(self) -> None:
        """Nothing: Kafka's controller publishes the metadata."""
