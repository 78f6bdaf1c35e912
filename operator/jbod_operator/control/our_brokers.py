"""The first adapter of the step-execution interfaces (``plan.execution``): our brokers, of
which the operator is the controller.

Everything a LogDirMove or PartitionReassignment pass sends to a broker or writes into a
Topic's status lives here, moved unchanged from the handlers: the partition state of record
is each Topic's status (written first, under the cluster controller's lock), and the brokers
are told with LeaderAndIsr, StopReplica and UpdateMetadata, and asked with their HTTP
endpoints (describe-log-dirs, alter-replica-log-dirs, the throttle configs, the cordon).
Kafka's Admin API is the second adapter (issue 22); the table in ``plan.execution`` says what
each method becomes there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from jbod_broker import wire
from jbod_broker.client import BrokerUnavailableError
from jbod_broker.errors import (
    KafkaError,
    ReplicaNotAvailableError,
    StaleControllerEpochError,
    error_by_name,
)

from ..clients.brokers import BrokerPool
from ..clients.kube import BROKER_CLUSTERS, ApiError, KubeClient
from ..clients.partition_store import store_of
from ..models import BrokerCluster, PartitionReassignment, kafka_topic_name, topic_id_of
from ..models.snapshot import ClusterSnapshot
from ..plan import partition_state, topic_spec
from ..plan.execution import ActionFailed, RecordChanged
from ..plan.port_types import (
    TP,
    BrokerDirs,
    CancelMoves,
    ClusterRecord,
    ClusterSeen,
    Cordon,
    Delete,
    PartitionsSeen,
    PartView,
    PreferDir,
    RecordDirs,
    RecordInTopic,
    ReplicaKey,
    Resend,
    SetThrottle,
    Start,
    StartAnswer,
    StartResult,
    Tell,
    Throttle,
    ThrottleSeen,
    TopicView,
    WritePartition,
    broker_dirs,
)
from ..plan.rebalance import cluster_fingerprint
from ..plan.scale_down import replicas_per_broker
from ..plan.snapshot import build_snapshot
from .broker_commands import BrokerCommands
from .cluster_controller import ClusterController

log = logging.getLogger(__name__)


class OurBrokersLogDirMoves:
    """A LogDirMove's steps on a BrokerCluster's brokers (``plan.execution.LogDirMoveExecutor``).

    ``topic_lock`` (the cluster controller's) is held while a moved replica's dir is written
    into its Topic, so that write never interleaves with an election's.
    """

    def __init__(
        self,
        kube: KubeClient,
        pool: BrokerPool,
        namespace: str,
        cluster: str,
        topic_lock: asyncio.Lock | None = None,
    ) -> None:
        self.kube, self.pool, self.ns, self.cluster = kube, pool, namespace, cluster
        self.lock = topic_lock

    # -- observe ------------------------------------------------------------------------------

    async def cluster_size(self) -> int | None:
        bc = await self.kube.get(BROKER_CLUSTERS, self.ns, self.cluster)
        return None if bc is None else int(bc["spec"]["replicas"])

    async def describe_dirs(self, brokers: Sequence[int]) -> Mapping[int, BrokerDirs | None]:
        describes = await self.pool.describe(self.ns, self.cluster, list(brokers))
        return {b: broker_dirs(b, d) if d is not None else None for b, d in describes.items()}

    async def describe_moves(
        self, broker: int, replicas: Sequence[tuple[str, int]]
    ) -> Sequence[wire.ReplicaLogDirInfo]:
        try:
            client = await self.pool.client(self.ns, self.cluster, broker)
            return (await client.describe_replica_log_dirs(list(replicas))).partitions
        except KafkaError:
            return []

    async def wait_for_a_move_to_end(
        self, by_broker: Mapping[int, Sequence[tuple[str, int]]], wait_s: float
    ) -> bool:
        """Long-poll the brokers with moves running until one of the moves ends.

        The operator then verifies a finished move when it finishes, not on its next poll,
        which is most of what it would otherwise add to a short move.
        """
        if not by_broker:
            return False

        async def poll(b: int, replicas: Sequence[tuple[str, int]]) -> None:
            client = await self.pool.client(self.ns, self.cluster, b)
            await client.describe_replica_log_dirs(list(replicas), wait_ms=int(wait_s * 1000))

        tasks = [asyncio.create_task(poll(b, r)) for b, r in sorted(by_broker.items())]
        return await _first_answer(tasks, wait_s + 5)

    async def reassigning(self) -> Mapping[tuple[str, int], str]:
        """The Topics' ``reassignedBy``: the state of record says who moves a partition."""
        out: dict[tuple[str, int], str] = {}
        for t in await store_of(self.kube).topics(self.ns, self.cluster):
            for s in t["status"]["partitions"]:
                if s.get("reassignedBy"):
                    out[(kafka_topic_name(t), s["partition"])] = s["reassignedBy"]
        return out

    # -- act ----------------------------------------------------------------------------------

    async def _alter(self, replica: ReplicaKey, target: str) -> None:
        b, topic, partition = replica
        client = await self.pool.client(self.ns, self.cluster, b)
        resp = await client.alter_replica_log_dirs([(topic, partition, target)])
        r = resp.partitions[0]
        if r.error:
            raise error_by_name(r.error, r.message or r.error)

    async def start(self, action: Start) -> StartResult:
        try:
            await self._alter(action.replica, action.target)
        except BrokerUnavailableError:
            return StartResult(action.replica, StartAnswer.BROKER_AWAY)
        except ReplicaNotAvailableError:
            return StartResult(action.replica, StartAnswer.NOT_THERE_YET)
        except KafkaError as err:
            return StartResult(action.replica, StartAnswer.REFUSED, str(err))
        return StartResult(action.replica, StartAnswer.ACCEPTED)

    async def resend(self, action: Resend) -> None:
        await self._alter(action.replica, action.target)

    async def cancel(self, action: CancelMoves) -> None:
        """Destination "any": the broker stops the copy and removes the future folder."""
        for b, topic, partition in action.replicas:
            try:
                client = await self.pool.client(self.ns, self.cluster, b)
                await client.alter_replica_log_dirs([(topic, partition, wire.ANY_LOG_DIR)])
            except KafkaError as err:
                log.warning("cancel not delivered", extra={"broker": b, "error": str(err)})

    async def set_throttle(self, action: SetThrottle) -> None:
        """The copy rate on each broker. One that is down forgets it when it restarts, so it
        is passed over; a live one that did not take it keeps what it had (at the end, a lift
        that failed would throttle its later copies until a restart, under a status saying
        the move is over). So a write a live broker refused or did not answer raises
        :class:`ActionFailed` once the others were tried: the pass is not recorded and the
        next one writes it again (the rule of the reassignment throttles)."""
        failed: list[str] = []
        for b in action.brokers:
            try:
                client = await self.pool.client(self.ns, self.cluster, b)
                await client.set_configs(
                    wire.ThrottleConfig(intra_broker_throttled_rate=action.rate)
                )
            except KafkaError as err:
                answers = (await self.pool.describe(self.ns, self.cluster, [b])).get(b)
                if answers is None:
                    log.warning("copy throttle not set: broker not live", extra={"broker": b})
                    continue
                failed.append(f"broker {b}: {err}")
        if failed:
            raise ActionFailed("copy throttle not set: " + "; ".join(failed))

    async def cordon(self, action: Cordon) -> None:
        b = action.drain.broker_id
        try:
            client = await self.pool.client(self.ns, self.cluster, b)
            d = broker_dirs(b, await client.describe_log_dirs()).find(action.drain.log_dir)
            if d is not None and d.cordoned != action.on:
                await client.cordon_log_dir(d.path, action.on)
        except KafkaError:
            return

    async def record_placement(self, action: RecordInTopic) -> None:
        """The Topic's status says where each replica lives: keep it true after a move."""
        broker, topic, partition = action.replica
        async with self.lock or asyncio.Lock():
            store = store_of(self.kube)
            for _ in range(5):
                t = next(
                    (
                        t
                        for t in await store.topics(self.ns, self.cluster)
                        if kafka_topic_name(t) == topic
                    ),
                    None,
                )
                s = next(
                    (
                        p
                        for p in (t or {}).get("status", {}).get("partitions", [])
                        if p["partition"] == partition
                    ),
                    None,
                )
                if t is None or s is None:
                    return
                replicas = [
                    {**r, "logDir": action.path} if r["brokerId"] == broker else r
                    for r in s["replicas"]
                ]
                try:
                    await store.put(t, {partition: {**s, "replicas": replicas}})
                    return
                except ApiError as e:
                    if e.status != 409:
                        raise


async def _first_answer(tasks: list[asyncio.Task[None]], timeout_s: float) -> bool:
    """Whether one of ``tasks`` succeeded before ``timeout_s``; one that fails does not
    count. Every task is cancelled and awaited before this returns."""
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Task[None]] = set(tasks)
    answered = False
    deadline = loop.time() + timeout_s
    try:
        while pending and not answered:
            timeout = deadline - loop.time()
            if timeout <= 0:
                break
            done, pending = await asyncio.wait(
                pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            answered = any(not t.cancelled() and t.exception() is None for t in done)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return answered


class OurBrokersReassignments:
    """A PartitionReassignment's steps on a BrokerCluster's brokers, the operator acting as
    Kafka's controller (``plan.execution.ReassignmentExecutor``).

    One instance serves one pass: :meth:`partitions` keeps the Topics it read (with their
    resourceVersions), which the act-side methods write and build their requests from.
    """

    def __init__(
        self,
        kube: KubeClient,
        pool: BrokerPool,
        ctrl: ClusterController,
        namespace: str,
        cluster: str,
    ) -> None:
        self.kube = kube
        self.pool = pool
        self.ctrl = ctrl
        self.ns = namespace
        self.cluster_name = cluster
        self.commands = BrokerCommands(pool, namespace, cluster)
        self.raw: dict[str, dict[str, Any]] = {}
        self.configs: dict[int, wire.ThrottleConfig] = {}
        """Each broker's throttle configs as :meth:`throttles` read them."""

    # -- observe ------------------------------------------------------------------------------

    async def cluster(self) -> ClusterSeen | None:
        bc_raw = await self.kube.get(BROKER_CLUSTERS, self.ns, self.cluster_name)
        if bc_raw is None:
            return None
        bc = BrokerCluster.model_validate(bc_raw)
        describes = await self.pool.describe(
            self.ns, self.cluster_name, list(range(bc.broker_count))
        )
        return ClusterSeen(
            size=bc.spec.replicas,
            dir_names=tuple(d.name for d in bc.spec.log_dirs),
            brokers={b: broker_dirs(b, d) if d is not None else None for b, d in describes.items()},
            broker_ids=frozenset(range(bc.spec.replicas)),
        )

    def serialized(self) -> contextlib.AbstractAsyncContextManager[object]:
        """The cluster controller's lock: it is the one writer of leader and ISR, so a pass
        never interleaves with an election or an AlterPartition."""
        return self.ctrl.lock

    async def liveness(self) -> tuple[frozenset[int], bool]:
        return frozenset(self.ctrl.live()), self.ctrl.liveness_known()

    async def partitions(self, pr: PartitionReassignment) -> PartitionsSeen:
        """The Topics' statuses, read fresh (call it under :meth:`serialized`)."""
        topics, me = {t.topic for t in pr.spec.partitions}, pr.metadata.name
        self.raw = {}
        views: dict[str, TopicView] = {}
        busy: dict[int, int] = defaultdict(int)
        claims: dict[TP, str] = {}
        for t in await self.ctrl.store.topics(self.ns, self.cluster_name):
            name = kafka_topic_name(t)
            parts = {}
            for s in t["status"]["partitions"]:
                pv = PartView.from_status(name, s)
                parts[pv.partition] = pv
                if pv.reassigned_by and pv.reassigned_by != me:
                    claims[pv.key] = f"PartitionReassignment {pv.reassigned_by}"
                    for b in {*pv.adding, *pv.removing}:
                        busy[b] += 1
            if name in topics:
                self.raw[name] = t
                views[name] = TopicView(
                    resource=t["metadata"]["name"],
                    name=name,
                    min_isr=topic_spec.min_insync_replicas(topic_spec.configs_in_force(t)),
                    partitions=parts,
                    deleting=bool(t["metadata"].get("deletionTimestamp")),
                )
        return PartitionsSeen(views, dict(busy), claims, others_in_flight=len(claims))

    async def throttles(self, brokers: Sequence[int]) -> Mapping[int, ThrottleSeen]:
        """Each broker's throttle configs (kept to merge this pass' throttles into)."""
        out: dict[int, ThrottleSeen] = {}
        for b in brokers:
            cfg = await self._broker(b, "get_configs", lambda c: c.get_configs())
            if isinstance(cfg, wire.ThrottleConfig):
                self.configs[b] = cfg
                out[b] = _seen(cfg)
        return out

    # -- act ----------------------------------------------------------------------------------

    async def write_partitions(self, writes: Sequence[WritePartition]) -> None:
        """Each Topic's status once, with the resourceVersion read (409: RecordChanged)."""
        by_topic: dict[str, list[PartView]] = defaultdict(list)
        for w in writes:
            by_topic[w.view.topic].append(w.view)
        for name, views in sorted(by_topic.items()):
            t = self.raw[name]
            changed = {v.partition: v for v in views}
            updates = {
                int(s["partition"]): changed[s["partition"]].to_status(s)
                for s in t["status"]["partitions"]
                if s["partition"] in changed
            }
            try:
                await self.ctrl.store.put(t, updates)
            except ApiError as e:
                if e.status == 409:
                    raise RecordChanged(name) from e
                raise
            self.raw[name] = self.ctrl.store.join(t)

    async def record_dirs(self, records: Sequence[RecordDirs]) -> None:
        """Each Topic's status once with the dirs its replicas are in. After the pass' writes
        (whose answers refreshed the Topics read), so a conflict means someone else wrote
        since: left to the next pass, which sees what is still wrong, rather than stopping
        this one before its brokers are told."""
        by_topic: dict[str, dict[int, dict[int, str]]] = defaultdict(dict)
        for r in records:
            by_topic[r.topic][r.partition] = dict(r.dirs)
        for name, fixes in sorted(by_topic.items()):
            t = self.raw[name]
            updates = {
                int(s["partition"]): _with_dirs(s, fixes[s["partition"]])
                for s in t["status"]["partitions"]
                if s["partition"] in fixes
            }
            try:
                await self.ctrl.store.put(t, updates)
            except ApiError as e:
                if e.status != 409:
                    raise
                log.info("dirs not recorded: the Topic changed", extra={"topic": name})
                continue
            self.raw[name] = self.ctrl.store.join(t)

    async def prefer_dirs(self, prefer: Sequence[PreferDir]) -> None:
        by_broker: dict[int, list[tuple[str, int, str]]] = defaultdict(list)
        for a in prefer:
            by_broker[a.broker].append((a.topic, a.partition, a.log_dir))
        for b, moves in sorted(by_broker.items()):
            await self._broker(
                b, "alter_replica_log_dirs", lambda c, m=moves: c.alter_replica_log_dirs(m)
            )

    def _entry(self, topic: str, partition: int) -> dict[str, Any]:
        t = self.raw[topic]
        return next(s for s in t["status"]["partitions"] if s["partition"] == partition)

    async def tell(self, tells: Sequence[Tell]) -> None:
        per_broker: dict[int, list[wire.LeaderAndIsrPartition]] = defaultdict(list)
        for a in tells:
            # The configs in force, never the spec's (issue 14): see plan.topic_spec.
            configs = topic_spec.configs_in_force(self.raw[a.topic])
            s = self._entry(a.topic, a.partition)
            for b in sorted(a.brokers):
                per_broker[b].append(
                    partition_state.leader_and_isr(
                        a.topic,
                        s,
                        is_new=b in a.new,
                        min_isr=topic_spec.min_insync_replicas(configs),
                        configs=configs,
                        topic_id=topic_id_of(self.raw[a.topic]),
                    )
                )
        live = sorted(self.ctrl.live())
        for b, states in sorted(per_broker.items()):
            await self.commands.leader_and_isr(b, states, live)

    async def delete(self, deletes: Sequence[Delete]) -> None:
        per_broker: dict[int, list[wire.StopReplicaPartition]] = defaultdict(list)
        for a in deletes:
            s = self._entry(a.topic, a.partition)
            per_broker[a.broker].append(
                wire.StopReplicaPartition(
                    topic=a.topic,
                    partition=a.partition,
                    delete=True,
                    leader_epoch=int(s["leaderEpoch"]),
                )
            )
        for b, parts in sorted(per_broker.items()):
            await self.commands.stop_replica(b, parts)

    async def throttle(self, actions: Sequence[Throttle]) -> None:
        """The pass' throttles, one broker at a time (our brokers share no throttle state).

        A broker forgets its throttle when it restarts, and the plan names only live ones. A
        live broker that did not take its write keeps what it had: at the end, a lift that
        failed would throttle its replication until it restarts, with a status saying no
        broker is throttled. So a write that failed raises :class:`ActionFailed` once the
        others were tried: the pass is not recorded and the next one sets or lifts it again
        (the rule the Kafka adapter follows for the throttles Kafka keeps)."""
        failed: list[str] = []
        for action in actions:
            try:
                await self._throttle(action)
            except StaleControllerEpochError:
                raise
            except KafkaError as e:
                failed.append(f"broker {action.broker}: {e}")
        if failed:
            raise ActionFailed("throttle not set: " + "; ".join(failed))

    async def _throttle(self, action: Throttle) -> None:
        client = await self.pool.client(self.ns, self.cluster_name, action.broker)
        was = self.configs.get(action.broker) or await client.get_configs()
        self.configs[action.broker] = await client.set_configs(merged_throttle(was, action))

    async def announce(self) -> None:
        await self.commands.update_metadata(
            [
                partition_state.metadata(name, s, topic_id=topic_id_of(t))
                for name, t in sorted(self.raw.items())
                for s in (t.get("status") or {}).get("partitions") or []
            ],
            self.ctrl.live(),
        )

    async def _broker(self, b: int, what: str, call: Any) -> Any:
        """One request to broker ``b`` through the one sender (``control.broker_commands``):
        a broker that is down or refuses is retried by a later pass (every request here is
        idempotent); a newer controller stops us."""
        return await self.commands.send(b, what, call)


def _refs(refs: Sequence[wire.ReplicaRef] | None) -> set[TP]:
    return {(r.topic, r.partition) for r in refs or ()}


def _seen(cfg: wire.ThrottleConfig) -> ThrottleSeen:
    rate = max(
        cfg.leader_replication_throttled_rate or 0, cfg.follower_replication_throttled_rate or 0
    )
    replicas = _refs(cfg.leader_replication_throttled_replicas) | _refs(
        cfg.follower_replication_throttled_replicas
    )
    return ThrottleSeen(rate, frozenset(replicas))


def merged_throttle(was: wire.ThrottleConfig, action: Throttle) -> wire.ThrottleConfig:
    """A broker's throttle configs with ``action`` applied: the replicas of its scope (its
    resource's partitions) replaced by the action's, another resource's kept. The rate is
    the action's while it throttles anything; a lift keeps the rate only for the replicas
    another resource still throttles (and clears it once none is left)."""

    def refs(tps: set[TP]) -> list[wire.ReplicaRef]:
        return [wire.ReplicaRef(topic=t, partition=p) for t, p in sorted(tps)]

    leader = (_refs(was.leader_replication_throttled_replicas) - action.scope) | set(
        action.leader_replicas
    )
    follower = (_refs(was.follower_replication_throttled_replicas) - action.scope) | set(
        action.follower_replicas
    )
    mine = action.leader_replicas or action.follower_replicas
    leader_rate = action.rate if mine else (was.leader_replication_throttled_rate or 0)
    follower_rate = action.rate if mine else (was.follower_replication_throttled_rate or 0)
    return wire.ThrottleConfig(
        leader_replication_throttled_rate=leader_rate if leader or follower else 0,
        follower_replication_throttled_rate=follower_rate if leader or follower else 0,
        leader_replication_throttled_replicas=refs(leader),
        follower_replication_throttled_replicas=refs(follower),
    )


def _with_dirs(s: Mapping[str, Any], dirs: Mapping[int, str]) -> dict[str, Any]:
    """Partition state ``s`` with its replicas in ``dirs`` (broker → dir; others as they are)."""
    replicas = [
        {**r, "logDir": dirs[int(r["brokerId"])]} if int(r["brokerId"]) in dirs else r
        for r in s["replicas"]
    ]
    return {**s, "replicas": replicas}


def cluster_record(bc: dict[str, Any], topics: list[dict[str, Any]]) -> ClusterRecord:
    """A BrokerCluster's record for a Rebalance: every broker there is (the leaving ones of a
    scale-down that waits included: that wait names a remove-brokers Rebalance of them as its
    remedy, ``plan.scale_down``), its spec's dir names, the fingerprint of the spec and the
    Topics, and the replicas the Topic statuses put on each broker."""
    return ClusterRecord(
        size=BrokerCluster.model_validate(bc).broker_count,
        dir_names=tuple(str(d["name"]) for d in bc["spec"].get("logDirs") or []),
        fingerprint=cluster_fingerprint(bc, topics),
        held=replicas_per_broker(topics),
    )


class OurBrokersSnapshots:
    """What a Rebalance reads of a BrokerCluster (``plan.execution.ClusterSnapshots``): the
    BrokerCluster and its Topics from the API (the state of record), every broker's
    describe-log-dirs, built by ``plan.snapshot.build_snapshot`` (the same pure builder as
    ``jbod_spark.collect``)."""

    def __init__(self, kube: KubeClient, pool: BrokerPool, namespace: str, cluster: str) -> None:
        self.kube, self.pool, self.ns, self.cluster = kube, pool, namespace, cluster
        self.bc: dict[str, Any] | None = None
        self.topics: list[dict[str, Any]] = []

    async def record(self) -> ClusterRecord | None:
        self.bc = await self.kube.get(BROKER_CLUSTERS, self.ns, self.cluster)
        if self.bc is None:
            return None
        self.topics = await store_of(self.kube).topics(self.ns, self.cluster)
        return cluster_record(self.bc, self.topics)

    async def snapshot(self, captured_at: str) -> ClusterSnapshot:
        assert self.bc is not None, "record() first"
        count = BrokerCluster.model_validate(self.bc).broker_count
        described = await self.pool.describe(self.ns, self.cluster, list(range(count)))
        return build_snapshot(
            self.cluster,
            self.bc,
            self.topics,
            {b: d for b, d in described.items() if d is not None},
            namespace=self.ns,
            captured_at=captured_at,
        )
