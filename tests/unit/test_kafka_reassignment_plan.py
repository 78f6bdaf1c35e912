"""The Kafka adapter's pure mappings (issue 22): Kafka's metadata and ongoing reassignments
read as the partition state of record, the plan's writes turned into Admin API requests, the
throttle configs, and the preferred-leader rule both adapters now share."""

from __future__ import annotations

from dataclasses import replace

from jbod_operator.plan import kafka_reassignment as kr
from jbod_operator.plan.kafka_dirs import cluster_size_of, kafka_broker_dirs
from jbod_operator.plan.kafka_types import (
    BrokerLogDirs,
    LogDir,
    LogDirReplica,
    OngoingReassignment,
    PartitionMetadata,
    TopicMetadata,
)
from jbod_operator.plan.port_types import PartView, Throttle, WritePartition


def topic(name: str, *parts: tuple[int, tuple[int, ...], int, tuple[int, ...]]) -> TopicMetadata:
    return TopicMetadata(
        name=name,
        topic_id=None,
        internal=False,
        partitions=tuple(
            PartitionMetadata(name, p, leader, reps, isr, ()) for p, reps, leader, isr in parts
        ),
    )


def dirs(broker: int, where: dict[str, list[tuple[str, int, bool]]]) -> BrokerLogDirs:
    return BrokerLogDirs(
        broker,
        tuple(
            LogDir(
                path, None, 100, 50, False, tuple(LogDirReplica(t, p, 10, 0, f) for t, p, f in rs)
            )
            for path, rs in where.items()
        ),
    )


def test_a_broker_s_dirs_as_the_planners_read_them() -> None:
    bd = kafka_broker_dirs(dirs(3, {"/k/data-0": [("t", 0, False)], "/k/data-1": [("t", 0, True)]}))
    assert bd.broker == 3
    assert [d.name for d in bd.dirs] == ["0", "1"]
    assert bd.locate("t", 0) is not None and bd.locate("t", 0).path == "/k/data-0"  # type: ignore[union-attr]
    assert bd.has_future(("t", 0))
    assert bd.find("data-1") is bd.dirs[1]


def test_partitions_in_flight_are_ours_only_when_the_status_lists_their_target() -> None:
    meta = [topic("t", (0, (3, 1, 2), 1, (1, 2)), (1, (2, 1), 2, (2, 1)), (2, (4, 2, 1), 1, (1,)))]
    ongoing = [
        OngoingReassignment("t", 0, (3, 1, 2), adding=(3,), removing=(1,)),
        OngoingReassignment("t", 2, (4, 2, 1), adding=(4,), removing=(1,)),
        OngoingReassignment("u", 5, (4, 3), adding=(4,), removing=(3,)),
    ]
    bds = {1: kafka_broker_dirs(dirs(1, {"/a/data-0": [("t", 0, False)]}))}
    read = kr.read_partitions("pr", ["t"], meta, ongoing, {("t", 0): [3, 2]}, {}, {"t": 2}, bds)
    p0 = read.topics["t"].partitions[0]
    assert (p0.replicas, p0.adding, p0.removing, p0.target) == ((3, 1, 2), (3,), (1,), (3, 2))
    assert p0.reassigned_by == "pr" and p0.in_step
    assert p0.dirs == (None, "/a/data-0", None)
    p1 = read.topics["t"].partitions[1]
    assert (p1.replicas, p1.adding, p1.target, p1.reassigned_by) == ((2, 1), (), (), None)
    # Someone else's: claimed, charged to its brokers, counted against the partition limit.
    assert read.topics["t"].partitions[2].reassigned_by is None
    assert read.claims == {("t", 2): kr.FOREIGN, ("u", 5): kr.FOREIGN}
    assert read.busy == {4: 2, 1: 1, 3: 1}
    assert read.others_in_flight == 2
    assert read.topics["t"].min_isr == 2


def test_a_step_kafka_ended_whose_isr_metadata_does_not_show_yet_is_still_catching_up() -> None:
    """Kafka ends a step only with every target replica in the ISR; a broker's metadata cache
    may list the target replicas before that ISR. The entry stays in its step until the ISR
    shows, so no pass plans the next step from the old ISR and leader."""
    mine = {("t", 0): [4, 2, 1]}
    stale = [topic("t", (0, (4, 2, 1), 2, (2, 1)))]
    p0 = kr.read_partitions("pr", ["t"], stale, [], mine, {}, {}, {}).topics["t"].partitions[0]
    assert (p0.adding, p0.target, p0.reassigned_by) == ((4,), (4, 2, 1), "pr") and p0.in_step
    fresh = [topic("t", (0, (4, 2, 1), 2, (2, 1, 4)))]
    p0 = kr.read_partitions("pr", ["t"], fresh, [], mine, {}, {}, {}).topics["t"].partitions[0]
    assert (p0.adding, p0.target, p0.reassigned_by) == ((), (), None) and not p0.in_step
    # A step the status lists that Kafka never ran (the replicas are not the target's): as is.
    never = [topic("t", (0, (2, 1), 2, (2, 1)))]
    p0 = kr.read_partitions("pr", ["t"], never, [], mine, {}, {}, {}).topics["t"].partitions[0]
    assert not p0.in_step


def test_a_step_kafka_ended_whose_replicas_metadata_still_shows_is_still_in_its_step() -> None:
    """Metadata (read first, from a broker's cache) may still list a step's target and the
    replicas it drops after ListPartitionReassignments (read next, from the controller) has
    stopped listing it. Read as in flight, every new replica in sync: the pass shrinks it
    (Kafka drops the replicas itself) and plans nothing from replicas that are gone. Read as
    settled at ``(1, 2, 3, 4)``, a pass planned the step ``[1, 2, 4]``: broker 4 added back,
    one more full copy, after the move to ``[1, 2]`` had ended (bench/kafka_reassignment.py)."""
    mine, started = {("t", 0): [1, 2]}, {("t", 0): [1, 3, 4]}
    stale = [topic("t", (0, (1, 2, 3, 4), 1, (1, 3, 4, 2)))]
    read = kr.read_partitions("pr", ["t"], stale, [], mine, {}, {}, {}, started)
    p0 = read.topics["t"].partitions[0]
    assert (p0.replicas, p0.adding, p0.removing, p0.target) == ((1, 2, 3, 4), (), (3, 4), (1, 2))
    assert p0.reassigned_by == "pr" and p0.in_step
    assert read.claims == {} and read.busy == {}
    # Its ISR not shown yet either: still catching up.
    late = [topic("t", (0, (1, 2, 3, 4), 1, (1, 3, 4)))]
    t = kr.read_partitions("pr", ["t"], late, [], mine, {}, {}, {}, started).topics["t"]
    assert (t.partitions[0].adding, t.partitions[0].removing) == ((2,), (3, 4))
    # Once Metadata shows the step's end: settled.
    fresh = [topic("t", (0, (1, 2), 1, (1, 2)))]
    t = kr.read_partitions("pr", ["t"], fresh, [], mine, {}, {}, {}, started).topics["t"]
    assert not t.partitions[0].in_step and t.partitions[0].reassigned_by is None
    # A step Kafka never ran (refused: the replicas as before it) is not read as running,
    # so the next pass plans it again; nor are replicas that are neither (someone else's).
    for shown in ((1, 3, 4), (1, 2, 4)):
        never = [topic("t", (0, shown, 1, shown))]
        t = kr.read_partitions("pr", ["t"], never, [], mine, {}, {}, {}, started).topics["t"]
        assert not t.partitions[0].in_step, shown
    # A step that only drops (``(1, 2, 4) -> (1, 2)``) ends at once on Kafka: its replicas as
    # before it mean the request was not taken, and the next pass must send it again.
    drop = [topic("t", (0, (1, 2, 4), 1, (1, 2, 4)))]
    was = {("t", 0): [1, 2, 4]}
    t = kr.read_partitions("pr", ["t"], drop, [], mine, {}, {}, {}, was).topics["t"]
    assert not t.partitions[0].in_step


def test_a_step_submitted_before_a_crash_is_adopted_within_the_resource_s_brokers() -> None:
    meta = [topic("t", (0, (3, 1, 2), 1, (1, 2)))]
    ongoing = [OngoingReassignment("t", 0, (3, 1, 2), adding=(3,), removing=(1,))]
    read = kr.read_partitions(
        "pr", ["t"], meta, ongoing, {}, {("t", 0): frozenset({1, 2, 3, 4})}, {}, {}
    )
    assert read.claims == {} and read.topics["t"].partitions[0].reassigned_by == "pr"
    other = kr.read_partitions(
        "pr", ["t"], meta, ongoing, {}, {("t", 0): frozenset({1, 2, 4})}, {}, {}
    )
    assert other.claims == {("t", 0): kr.FOREIGN}


def view(reps: tuple[int, ...], **kw: object) -> PartView:
    base = PartView("t", 0, reps, (None,) * len(reps), reps[0], 0, reps, 0)
    return replace(base, **kw)  # type: ignore[arg-type]


def test_a_step_started_names_its_dirs_then_submits_its_target() -> None:
    before = view((1, 2))
    step = replace(
        before,
        replicas=(1, 2, 3),
        dirs=(None, None, "/k3/data-1"),
        adding=(3,),
        removing=(1,),
        target=(3, 2),
        reassigned_by="pr",
    )
    sub = kr.submit([WritePartition("t", step)], {("t", 0): before})
    assert sub.dirs == {("t", 0, 3): "/k3/data-1"}
    assert sub.targets == {("t", 0): (3, 2)} and sub.cancels == ()
    # Already in flight with that target: nothing again.
    again = kr.submit([WritePartition("t", step)], {("t", 0): step})
    assert (again.dirs, again.targets, again.cancels) == ({}, {}, ())


def test_a_cancelled_step_is_a_null_target_and_a_shrink_is_kafka_s_own() -> None:
    flying = view((3, 1, 2), adding=(3,), removing=(1,), target=(3, 2), reassigned_by="pr")
    reverted = replace(flying, replicas=(2, 1), adding=(), removing=(3,), target=())
    sub = kr.submit([WritePartition("t", reverted)], {("t", 0): flying})
    assert sub.cancels == (("t", 0),) and sub.targets == {}
    shrunk = replace(flying, replicas=(3, 2), adding=(), removing=(1,), target=())
    sub = kr.submit([WritePartition("t", shrunk)], {("t", 0): flying})
    assert (sub.dirs, sub.targets, sub.cancels) == ({}, {}, ())


def test_a_reorder_with_nothing_in_flight_is_submitted_and_a_leader_change_is_not() -> None:
    before = view((1, 2))
    sub = kr.submit([WritePartition("t", replace(before, replicas=(2, 1)))], {("t", 0): before})
    assert sub.targets == {("t", 0): (2, 1)}
    led = replace(before, leader=1)
    assert (
        kr.submit([WritePartition("t", led)], {("t", 0): replace(before, leader=2)}).targets == {}
    )


def test_elections_where_the_written_leader_is_the_first_replica_and_not_kafka_s() -> None:
    seen = {("t", 0): view((1, 2), leader=2), ("t", 1): view((1, 2))}
    written = {("t", 0): view((1, 2), leader=1), ("t", 1): view((1, 2))}
    assert kr.to_elect([("t", 0), ("t", 1)], written, seen) == [("t", 0)]
    assert kr.to_elect([("t", 0)], {("t", 0): view((1, 2), leader=2)}, seen) == []


def test_a_step_written_with_an_election_asks_for_it_unless_the_first_replica_is_new() -> None:
    """The step after one that ended led by another replica goes out with the election: the
    written entry adds a replica and is led by its first one, which Kafka does not report
    leading yet. A first replica that the entry itself adds cannot lead: nothing is asked."""
    seen = {("t", 0): view((3, 1, 2), leader=1)}
    step = view((3, 1, 2, 4), leader=3, adding=(4,), removing=(1, 2), target=(3, 4))
    assert kr.to_elect([("t", 0)], {("t", 0): step}, seen) == [("t", 0)]
    new_first = view((4, 1, 2), leader=4, adding=(4,), removing=(2,), target=(4, 1))
    assert kr.to_elect([("t", 0)], {("t", 0): new_first}, {("t", 0): view((1, 2))}) == []


def test_throttles_as_kafka_s_tool_sets_them_and_lifted_to_nothing() -> None:
    acts = [
        Throttle(1, 1000, frozenset({("t", 0), ("t", 3)}), frozenset()),
        Throttle(3, 1000, frozenset(), frozenset({("t", 0)})),
        Throttle(2, 0, frozenset(), frozenset()),
    ]
    assert kr.topic_throttles(acts, ["t", "u"]) == {
        "t": {kr.LEADER_REPLICAS: "0:1,3:1", kr.FOLLOWER_REPLICAS: "0:3"},
        "u": {kr.LEADER_REPLICAS: None, kr.FOLLOWER_REPLICAS: None},
    }
    assert kr.broker_throttle(acts[0]) == {kr.LEADER_RATE: "1000", kr.FOLLOWER_RATE: "1000"}
    # Rate 0 is no limit: Kafka's configs deleted (a 0 there would stop replication).
    assert kr.broker_throttle(acts[2]) == {kr.LEADER_RATE: None, kr.FOLLOWER_RATE: None}


def test_the_size_the_range_check_uses_covers_kafka_s_ids() -> None:
    assert cluster_size_of([1, 2, 4]) == 5
    assert cluster_size_of([]) == 0


def test_the_throttles_seen_on_kafka_are_what_the_topics_lists_name_per_broker() -> None:
    """``partition:broker`` entries of either list, per broker asked for; a ``*`` list (a
    user's wildcard, never this operator's) names nothing."""
    configs: dict[str, dict[str, str | None]] = {
        "t": {kr.LEADER_REPLICAS: "0:1,1:2", kr.FOLLOWER_REPLICAS: "0:3"},
        "u": {kr.LEADER_REPLICAS: "*", kr.FOLLOWER_REPLICAS: None},
    }
    seen = kr.throttles_seen(configs, [1, 3, 4])
    assert seen[1].replicas == {("t", 0)}
    assert seen[3].replicas == {("t", 0)}
    assert seen[4].replicas == frozenset()
    assert {s.rate for s in seen.values()} == {0}
