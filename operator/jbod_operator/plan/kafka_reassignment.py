"""A PartitionReassignment on Apache Kafka, pure: what Kafka's Admin API reports, read as the
partition state of record ``plan.reassignment`` decides from, and its actions turned into the
Admin API's requests (issue 22). ``control.kafka_reassignments`` makes the calls.

On Kafka the state of record is Kafka's own: Metadata (replicas in order, ISR, leader) and
ListPartitionReassignments (adding and removing replicas). Kafka does not say who started a
reassignment, so a step in flight is this resource's when its status' current batch lists the
partition with the same target; every other reassignment in flight, whoever started it, is
someone else's: it claims its partition, charges its brokers and counts against the
partition limit, and is never cancelled by us.

Kafka's controller executes a step once it is submitted: it adds the new replicas, waits for
them to join the ISR, makes the target the replica list (electing a leader when the old one
leaves) and deletes the dropped replicas. So of the entries the plan writes, only three kinds
become requests: a step started (AlterPartitionReassignments to its target, each new replica's
dir named first with AlterReplicaLogDirs), a step undone by a cancel (a null target: Kafka
reverts it) and a new replica list with nothing in flight (a reorder or a smaller replication
factor). A shrink or a deletion the plan writes is what Kafka does by itself.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .kafka_types import OngoingReassignment, ReplicaKey, TopicMetadata
from .port_types import TP, BrokerDirs, PartView, Throttle, ThrottleSeen, TopicView, WritePartition

FOREIGN = "a Kafka reassignment this resource did not start"
"""Who moves a partition whose reassignment Kafka lists and this resource's status does not."""

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_THROTTLE_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
MIN_ISR = "min.insync.replicas"


@dataclass(frozen=True)
class KafkaPartitions:
    """Kafka's partitions read as ``plan.reassignment`` reads the record."""

    topics: Mapping[str, TopicView]
    busy: Mapping[int, int] = field(default_factory=dict)
    claims: Mapping[TP, str] = field(default_factory=dict)
    others_in_flight: int = 0


def read_partitions(
    name: str,
    wanted: Iterable[str],
    metadata: Sequence[TopicMetadata],
    ongoing: Sequence[OngoingReassignment],
    mine: Mapping[TP, Sequence[int]],
    adoptable: Mapping[TP, frozenset[int]],
    min_isr: Mapping[str, int],
    dirs: Mapping[int, BrokerDirs | None],
    started_from: Mapping[TP, Sequence[int]] | None = None,
) -> KafkaPartitions:
    """The partitions of the ``wanted`` topics as entries of record, and every reassignment
    in flight in the cluster that is not this resource's (``name``): ``mine`` maps each step
    of its current batch to its target brokers, ``started_from`` to the brokers it started
    from (the batch entry's current brokers). ``adoptable`` gives, for each partition of an
    accepted resource, the brokers its original and target replicas are on: a step in flight
    there within those brokers that the status does not list is one this resource submitted
    before an operator died, before it wrote its status (the plan adopts it as the batch);
    someone else's move between exactly those brokers would be taken for ours.

    Kafka's replica list during a reassignment is the target then the replicas leaving; the
    entry's target is that list without the removing ones. A partition Kafka reports no
    leader for gets :data:`election.NO_LEADER` (-1); Kafka's leader epoch is not in Metadata
    v12's answer as the client returns it, and the plan only carries it along."""
    before_step = started_from or {}
    flight = {(o.topic, o.partition): o for o in ongoing}
    busy: dict[int, int] = defaultdict(int)
    claims: dict[TP, str] = {}
    for key, o in flight.items():
        target = tuple(b for b in o.replicas if b not in o.removing)
        if tuple(mine.get(key, ())) == target or set(o.replicas) <= adoptable.get(key, set()):
            continue
        claims[key] = FOREIGN
        for b in {*o.adding, *o.removing}:
            busy[b] += 1
    want = set(wanted)
    views: dict[str, TopicView] = {}
    for t in metadata:
        if t.name not in want or t.error is not None:
            continue
        parts: dict[int, PartView] = {}
        for p in t.partitions:
            key = (t.name, p.partition)
            ongo = flight.get(key)
            replicas = ongo.replicas if ongo is not None else p.replicas
            removing = ongo.removing if ongo is not None else ()
            target = tuple(b for b in replicas if b not in removing) if ongo is not None else ()
            adding = tuple(ongo.adding) if ongo is not None else ()
            ours = ongo is not None and key not in claims
            step = tuple(mine.get(key, ()))
            shown, started = set(p.replicas), set(before_step.get(key, ()))
            if ongo is None and step and shown == set(step):
                late = tuple(b for b in step if b not in p.isr)
                if late:
                    # Kafka ended this resource's step (it is no longer in flight), which it
                    # does only once every target replica is in the ISR; this Metadata came
                    # from a broker's cache without that ISR yet. Read as still catching up,
                    # so no pass plans the next step from the old ISR and leader (a pass
                    # right after the step ended planned a leader movement from them).
                    adding, target, ours = late, tuple(p.replicas), True
            elif (
                ongo is None
                and set(step) - started
                and shown != set(step)
                and shown == set(step) | started
            ):
                # Kafka no longer lists this resource's step, yet this Metadata (read first,
                # from a broker's cache) still shows the replicas Kafka lists only while it
                # runs it: the step's target and the ones it drops. Kafka ended the step
                # between the two reads. Read as the step still running, so the pass shrinks
                # it (nothing to send: Kafka drops them itself) instead of planning a next
                # step from replicas that are gone; a step planned from them once added a
                # dropped broker back, one more full copy, after the step had ended. Only a
                # step that adds a replica runs: a step that only drops ends at once, so its
                # replicas as before it mean it was not taken (a failed request), and the
                # next pass plans it again; read as running, nothing would ever resend it.
                adding = tuple(b for b in step if b not in p.isr)
                removing = tuple(b for b in p.replicas if b not in step)
                target, ours = step, True
            parts[p.partition] = PartView(
                topic=t.name,
                partition=p.partition,
                replicas=tuple(replicas),
                dirs=tuple(_dir_of(dirs.get(b), key) for b in replicas),
                leader=-1 if p.leader is None else p.leader,
                leader_epoch=0,
                isr=tuple(p.isr),
                partition_epoch=0,
                adding=adding,
                removing=tuple(removing),
                target=target,
                reassigned_by=name if ours else None,
            )
        views[t.name] = TopicView(
            resource=t.name, name=t.name, min_isr=min_isr.get(t.name, 1), partitions=parts
        )
    return KafkaPartitions(views, dict(busy), claims, len(claims))


def _dir_of(bd: BrokerDirs | None, key: TP) -> str | None:
    d = bd.locate(*key) if bd is not None else None
    return d.path if d is not None else None


@dataclass(frozen=True)
class Submit:
    """The requests for one pass' written entries, in the order they are made."""

    dirs: Mapping[ReplicaKey, str] = field(default_factory=dict)
    """AlterReplicaLogDirs before the steps are submitted: each new replica's named dir."""
    targets: Mapping[TP, tuple[int, ...]] = field(default_factory=dict)
    """AlterPartitionReassignments: steps started, reorders, replicas dropped."""
    cancels: tuple[TP, ...] = ()
    """AlterPartitionReassignments with a null target. Kafka's revert may put ``[2, 1]``
    back as ``[1, 2]``: the plan's next passes restore the order and the preferred leader
    from what they read (``plan.reassignment._after_revert``), as writes of their own."""


def submit(writes: Sequence[WritePartition], seen: Mapping[TP, PartView]) -> Submit:
    """What each written entry asks of Kafka, against the entry as read (``seen``)."""
    dirs: dict[ReplicaKey, str] = {}
    targets: dict[TP, tuple[int, ...]] = {}
    cancels: list[TP] = []
    for w in writes:
        v = w.view
        before = seen.get(v.key)
        if before is None:
            continue
        if v.adding:
            if before.adding and before.target == v.target:
                continue  # submitted already
            for b in v.adding:
                d = v.dir_of(b)
                if d and d.startswith("/"):
                    dirs[(v.topic, v.partition, b)] = d
            targets[v.key] = v.target
        elif before.adding or before.removing:
            # In flight on Kafka: a cancel undoes it (the replicas as before the step); a
            # shrink is Kafka's own doing once the new replicas are in sync.
            if set(v.replicas) == set(before.replicas) - set(before.adding):
                cancels.append(v.key)
        elif v.replicas != before.replicas:
            targets[v.key] = v.replicas
    return Submit(dirs, targets, tuple(cancels))


def to_elect(
    tells: Iterable[TP], written: Mapping[TP, PartView], seen: Mapping[TP, PartView]
) -> list[TP]:
    """ElectLeaders PREFERRED for the told partitions whose written leader is their first
    replica and not the leader Kafka reports (Kafka's controller sends the rest itself),
    unless that replica is one the entry adds (a new replica cannot lead). An entry may start
    a step and elect at once: the step after one that ended led by another replica goes out
    with that replica's election (``plan.reassignment._ended_by_elections``); the step is
    submitted first, and Kafka's preferred replica is the first of its target, the one to
    elect."""
    out = []
    for key in sorted(set(tells)):
        w, s = written.get(key), seen.get(key)
        if w is None or s is None or not w.replicas:
            continue
        if w.leader == w.replicas[0] and w.leader != s.leader and w.leader not in w.adding:
            out.append(key)
    return out


def throttled_replicas(entries: Iterable[tuple[TP, int]]) -> dict[str, str | None]:
    """Per topic, Kafka's ``partition:broker`` list (None: no entry, the config deleted)."""
    by_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (topic, partition), broker in entries:
        by_topic[topic].append((partition, broker))
    return {t: ",".join(f"{p}:{b}" for p, b in sorted(set(v))) for t, v in by_topic.items()}


def throttles_seen(
    topic_configs: Mapping[str, Mapping[str, str | None]], brokers: Iterable[int]
) -> dict[int, ThrottleSeen]:
    """Per broker, the replicas the topics' throttled-replica lists (``partition:broker``
    entries) name on it; rate 0 (Kafka keeps rates per broker). A ``*`` list (every replica)
    is a user's, never this operator's, so it names nothing here."""
    wanted = set(brokers)
    named: dict[int, set[TP]] = {b: set() for b in wanted}
    for topic, cfg in topic_configs.items():
        for key in TOPIC_THROTTLE_KEYS:
            for entry in (cfg.get(key) or "").split(","):
                part, _, broker = entry.strip().partition(":")
                if broker.isdigit() and part.isdigit() and int(broker) in wanted:
                    named[int(broker)].add((topic, int(part)))
    return {b: ThrottleSeen(0, frozenset(tps)) for b, tps in named.items()}


def topic_throttles(
    actions: Iterable[Throttle], topics: Iterable[str]
) -> dict[str, dict[str, str | None]]:
    """The throttled-replica configs of each topic from one pass' throttle actions (the
    pass emits one for every live broker involved, so together they are the whole state):
    the leaders of the steps catching up and their new followers, as Kafka's tool sets them;
    a topic with none has both configs deleted."""
    acts = list(actions)
    leaders = throttled_replicas((k, a.broker) for a in acts for k in a.leader_replicas)
    followers = throttled_replicas((k, a.broker) for a in acts for k in a.follower_replicas)
    out: dict[str, dict[str, str | None]] = {}
    for t in sorted({*topics, *leaders, *followers}):
        out[t] = {LEADER_REPLICAS: leaders.get(t), FOLLOWER_REPLICAS: followers.get(t)}
    return out


def broker_throttle(action: Throttle) -> dict[str, str | None]:
    """One broker's rates: set to the action's, or deleted (no limit) when it is 0."""
    value = str(action.rate) if action.rate > 0 else None
    return {LEADER_RATE: value, FOLLOWER_RATE: value}
