"""Cruise Control's goals (issue 40): each goal's figure recomputed from the plan by an
independent count, the hard goals never broken, the priority order respected, and a goal
reached whenever a brute-force search over every placement of a small cluster reaches it."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jbod_operator.models.goals import DEFAULT_SOFT_GOALS, HARD_GOALS, GoalName, goal_order
from jbod_operator.models.plan_report import GoalReport
from jbod_operator.models.snapshot import (
    BrokerInfo,
    ClusterSnapshot,
    LogDirInfo,
    PartitionLoad,
    ReplicaInfo,
)
from jbod_spark import PlanOptions, plan
from jbod_spark.arrays import from_snapshot
from jbod_spark.goals import (
    Placement,
    Scope,
    evaluate,
    goal_rules,
    partition_rates,
    relative_bounds,
)
from jbod_spark.metrics import counted_dirs
from jbod_spark.options import Mode
from jbod_spark.outputs import Plan

from .test_planner_properties import snapshots

GB = 10**9


def goals_of(p: Plan) -> dict[str, GoalReport]:
    return {g.name: g for g in p.report.goals}


def final_brokers(p: Plan, s: ClusterSnapshot) -> dict[tuple[str, int], list[int]]:
    """Each partition's replica list after the plan (leader first), from the plan's targets
    applied to the snapshot: an account independent of the planner's arrays."""
    out: dict[tuple[str, int], list[int]] = {}
    for r in sorted(s.replicas, key=lambda r: (r.topic, r.partition, not r.leader)):
        out.setdefault((r.topic, r.partition), []).append(r.broker_id)
    for t in p.partitions:
        out[(t.topic, t.partition)] = list(t.replicas)
    return out


def count_bounds(values: list[int], threshold: float = 1.10) -> tuple[float, float]:
    avg = sum(values) / len(values)
    return math.floor(avg * (2 - threshold) + 1e-9), math.ceil(avg * threshold - 1e-9)


# -- the rules --------------------------------------------------------------------------------


def test_the_hard_goals_come_first_and_soft_goals_keep_the_order_given() -> None:
    assert goal_order(None) == (*HARD_GOALS, *DEFAULT_SOFT_GOALS)
    mine = [GoalName.LEADER_REPLICA_DISTRIBUTION, GoalName.DISK_USAGE]
    assert goal_order(mine) == (*HARD_GOALS, *mine)
    with pytest.raises(ValueError, match="not soft goals"):
        goal_order([GoalName.RACK_AWARE])


def test_count_bounds_round_outward_and_low_utilisation_meets_the_goal() -> None:
    b = relative_bounds(13.5, 1.10, integral=True)
    assert (b.lower, b.upper) == (12.0, 15.0)
    assert relative_bounds(0.05, 1.10, integral=False, floor=0.1).low_utilisation
    assert not relative_bounds(0.05, 1.10, integral=False).low_utilisation


# -- the demo's story: a new broker takes its share --------------------------------------------


def demo_like(n_old: int = 3, parts: int = 18, rf: int = 3) -> ClusterSnapshot:
    """``parts`` partitions RF ``rf`` over ``n_old`` brokers of 3 disks, one new empty broker
    (the demo's add-brokers story), sizes 0.5-1.6 GB."""
    reps: list[ReplicaInfo] = []
    used: Counter[tuple[int, int]] = Counter()
    for p in range(parts):
        size = (5 + (p * 7) % 12) * GB // 10
        for j in range(rf):
            b = (p + j) % n_old
            d = (p + j) % 3
            used[(b, d)] += size
            reps.append(
                ReplicaInfo(
                    topic=f"t{p % 3}",
                    partition=p,
                    broker_id=b,
                    log_dir=f"/d/{d}",
                    size_bytes=size,
                    leader=j == 0,
                )
            )
    nb = n_old + 1
    dirs = [
        LogDirInfo(
            broker_id=b,
            name=f"d{d}",
            path=f"/d/{d}",
            capacity_bytes=100 * GB,
            used_bytes=used[(b, d)],
        )
        for b in range(nb)
        for d in range(3)
    ]
    return ClusterSnapshot(
        cluster_name="c",
        namespace="n",
        brokers=[BrokerInfo(id=b) for b in range(nb)],
        log_dirs=dirs,
        replicas=reps,
    )


def test_add_brokers_gives_the_new_broker_its_share_of_replicas_leaders_and_bytes() -> None:
    s = demo_like()
    p = plan(s, PlanOptions(mode=Mode.ADD_BROKERS, brokers=[3]))
    g = goals_of(p)
    for name in (
        "DiskUsageDistributionGoal",
        "ReplicaDistributionGoal",
        "LeaderReplicaDistributionGoal",
    ):
        assert g[name].met_after, g[name].line()
    new = next(b for b in p.report.brokers if b.broker_id == 3)
    n = len(p.report.brokers)
    mean_reps = sum(b.replicas_after for b in p.report.brokers) / n
    mean_leaders = sum(b.leaders_after for b in p.report.brokers) / n
    mean_bytes = sum(b.used_after for b in p.report.brokers) / n
    assert count_bounds([b.replicas_after for b in p.report.brokers])[0] <= new.replicas_after
    assert abs(new.replicas_after - mean_reps) <= max(1.0, 0.1 * mean_reps) + 0.5
    assert abs(new.leaders_after - mean_leaders) <= max(1.0, 0.1 * mean_leaders) + 0.5
    assert abs(new.used_after - mean_bytes) <= 0.1 * mean_bytes
    # replicas cross brokers only onto the new one
    assert all(m.to_broker == 3 for m in p.moves if m.kind == "inter")


# -- properties on random clusters ------------------------------------------------------------


MODES = [Mode.FULL, Mode.ADD_BROKERS, Mode.REMOVE_BROKERS, Mode.DIRS_ONLY]


def opts_for(s: ClusterSnapshot, mode: Mode, goals: list[GoalName] | None = None) -> PlanOptions:
    top = max(b.id for b in s.brokers)
    brokers = [top] if mode in (Mode.ADD_BROKERS, Mode.REMOVE_BROKERS) else []
    return PlanOptions(mode=mode, brokers=brokers, goals=goals)


@settings(
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(snapshots(), st.sampled_from(MODES))
def test_hard_goals_hold_and_a_goal_reported_met_is_met_recounted(
    s: ClusterSnapshot, mode: Mode
) -> None:
    p = plan(s, opts_for(s, mode))
    g = goals_of(p)
    assert set(g) == set(GoalName)
    for name in HARD_GOALS:
        assert g[name].met_after, g[name].line()
    assert g["DiskCapacityGoal"].violations_after <= g["DiskCapacityGoal"].violations_before
    # recount replicas and leaders per broker from the plan's targets
    removed = {max(b.id for b in s.brokers)} if mode is Mode.REMOVE_BROKERS else set()
    stay = [b.id for b in s.brokers if b.live and b.id not in removed]
    final = final_brokers(p, s)
    reps = Counter(b for rs in final.values() for b in rs)
    leads = Counter(rs[0] for rs in final.values())
    for goal, counts in (
        ("ReplicaDistributionGoal", reps),
        ("LeaderReplicaDistributionGoal", leads),
    ):
        lo, hi = count_bounds([counts[b] for b in stay])
        met = all(lo <= counts[b] <= hi for b in stay)
        assert g[goal].met_after == met, (g[goal].line(), {b: counts[b] for b in stay})
    for r in g.values():
        assert r.met_after or r.reason, r.line()


@settings(
    max_examples=80,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(snapshots(), st.sampled_from([Mode.FULL, Mode.ADD_BROKERS]), st.data())
def test_a_lower_goal_never_undoes_a_higher_one(s: ClusterSnapshot, mode: Mode, data: Any) -> None:
    soft = [g for g in DEFAULT_SOFT_GOALS if g is not GoalName.INTRA_BROKER_DISK_USAGE]
    first = data.draw(st.sampled_from(soft))
    rest = data.draw(st.permutations([g for g in soft if g is not first]))
    alone = goals_of(plan(s, opts_for(s, mode, [first])))
    together = goals_of(plan(s, opts_for(s, mode, [first, *rest])))
    if alone[first].met_after:
        assert together[first].met_after, (together[first].line(), rest)
    # reported against the same bounds, and a goal left out is reported, not worked on
    assert together[first].priority == len(HARD_GOALS)
    left = [g for g in DEFAULT_SOFT_GOALS if g not in (first, *rest)]
    assert all(alone[g].priority == -1 for g in left if g in alone)


# -- brute force on small clusters -------------------------------------------------------------


@st.composite
def small_clusters(draw: Any) -> ClusterSnapshot:
    nb = draw(st.integers(2, 3))
    n_parts = draw(st.integers(1, 5))
    reps = []
    used: Counter[int] = Counter()
    for p in range(n_parts):
        b = draw(st.integers(0, nb - 1))
        size = draw(st.integers(1, 4)) * GB
        used[b] += size
        reps.append(
            ReplicaInfo(
                topic="t", partition=p, broker_id=b, log_dir="/d/0", size_bytes=size, leader=True
            )
        )
    dirs = [
        LogDirInfo(broker_id=b, name="d0", path="/d/0", capacity_bytes=100 * GB, used_bytes=used[b])
        for b in range(nb)
    ]
    return ClusterSnapshot(
        cluster_name="c",
        namespace="n",
        brokers=[BrokerInfo(id=b) for b in range(nb)],
        log_dirs=dirs,
        replicas=reps,
    )


def reachable(s: ClusterSnapshot, goal: GoalName) -> bool:
    """Whether any placement of the replicas (RF 1, one dir per broker) meets ``goal``."""
    a = from_snapshot(s)
    counted = counted_dirs(a, a.dir_live & False)
    sc = Scope(a.broker_live.copy(), counted)
    rules = goal_rules(PlanOptions(goals=[goal]))
    for combo in itertools.product(range(a.n_brokers), repeat=a.n_replicas):
        rb = np.array(combo, dtype=np.int64)
        rd = rb.copy()  # dir b is broker b's only dir
        got = {r.name: r for r in evaluate(a, Placement(rb, rd, a.rep_leader), sc, rules)}
        if got[str(goal)].met_after:
            return True
    return False


@settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    small_clusters(),
    st.sampled_from(
        [
            GoalName.REPLICA_DISTRIBUTION,
            GoalName.LEADER_REPLICA_DISTRIBUTION,
            GoalName.DISK_USAGE,
            GoalName.POTENTIAL_NW_OUT,
        ]
    ),
)
def test_a_goal_a_brute_force_search_reaches_is_reached(s: ClusterSnapshot, goal: GoalName) -> None:
    p = plan(s, PlanOptions(goals=[goal]))
    if reachable(s, goal):
        assert goals_of(p)[str(goal)].met_after, goals_of(p)[str(goal)].line()


# -- the network goals, from the metric history -------------------------------------------------


def hot_topic_cluster() -> ClusterSnapshot:
    """4 brokers; topic ``hot`` (8 partitions at 10 MB/s each, every leader on broker 0, the
    followers on the others) and ``cold`` (8 partitions without history); all replicas the
    same size."""
    reps: list[ReplicaInfo] = []
    used: Counter[int] = Counter()
    for t in ("hot", "cold"):
        for p in range(8):
            lead = 0 if t == "hot" else p % 4
            for j in range(2):
                # a hot partition's follower on broker 1, 2 or 3: leadership alone can spread
                b = lead if j == 0 else (1 + p % 3 if t == "hot" else (lead + 1) % 4)
                used[b] += GB
                reps.append(
                    ReplicaInfo(
                        topic=t,
                        partition=p,
                        broker_id=b,
                        log_dir="/d/0",
                        size_bytes=GB,
                        leader=j == 0,
                    )
                )
    hot = [PartitionLoad(topic="hot", partition=p, bytes_in_per_second=10e6) for p in range(8)]
    return ClusterSnapshot(
        cluster_name="c",
        namespace="n",
        brokers=[BrokerInfo(id=b) for b in range(4)],
        log_dirs=[
            LogDirInfo(
                broker_id=b, name="d0", path="/d/0", capacity_bytes=100 * GB, used_bytes=used[b]
            )
            for b in range(4)
        ],
        replicas=reps,
        partition_loads=hot,
    )


def test_partition_rates_come_from_the_history_and_sizes_stand_in_for_the_rest() -> None:
    a = from_snapshot(hot_topic_cluster())
    rates = partition_rates(a)
    hot = np.array([t == "hot" for t in a.part_topic])
    assert np.allclose(rates[hot], 10e6)
    # a cold partition counts by its size (1 GB) at the hot ones' rate per byte (10 MB/s/GB)
    assert np.allclose(rates[~hot], 10e6)
    none = from_snapshot(hot_topic_cluster().model_copy(update={"partition_loads": []}))
    assert np.allclose(partition_rates(none), GB)


def test_a_hot_topic_s_leaders_are_spread_by_leader_bytes_in() -> None:
    s = hot_topic_cluster()
    p = plan(s, PlanOptions(goals=[GoalName.LEADER_BYTES_IN]))
    g = goals_of(p)["LeaderBytesInDistributionGoal"]
    assert not g.met_before and g.met_after, g.line()
    final = final_brokers(p, s)
    hot_leads = Counter(rs[0] for (t, _), rs in final.items() if t == "hot")
    # 16 leaders at 10 MB/s each over 4 brokers: 40 MB/s each, ±10 %, so 4 leaders each
    all_leads = Counter(rs[0] for rs in final.values())
    assert all(all_leads[b] == 4 for b in range(4)), all_leads
    assert hot_leads[0] < 8, hot_leads
    # leadership moved, no bytes did
    assert p.report.summary.bytes_moved == 0


def demo_story() -> ClusterSnapshot:
    """The demo's cluster at its plan (``scripts/demo.py``): 18 partitions RF 3 on brokers
    0-2 (so every partition has a replica on each), leaders round robin, sizes in MiB from the
    demo's topics, each broker 3 disks of 64 MiB (``c`` new and empty), broker 3 new."""
    mib = 1024 * 1024
    sizes = [2.5, 2.5, 2, 2, 1.5, 1.5, 1, 1, 0.75, 0.75, 0.5, 0.5] + [0.25] * 6
    reps: list[ReplicaInfo] = []
    used: Counter[tuple[int, str]] = Counter()
    for p, size in enumerate(sizes):
        topic, part = ("clicks", p) if p < 12 else ("orders", p - 12)
        for j in range(3):
            b, d = (p + j) % 3, "ab"[(p + j) % 2]
            used[(b, d)] += int(size * mib)
            reps.append(
                ReplicaInfo(
                    topic=topic,
                    partition=part,
                    broker_id=b,
                    log_dir=f"/d/{d}",
                    size_bytes=int(size * mib),
                    leader=j == 0,
                )
            )
    dirs = [
        LogDirInfo(
            broker_id=b, name=d, path=f"/d/{d}", capacity_bytes=64 * mib, used_bytes=used[(b, d)]
        )
        for b in range(4)
        for d in "abc"
    ]
    return ClusterSnapshot(
        cluster_name="demo",
        namespace="n",
        brokers=[BrokerInfo(id=b) for b in range(4)],
        log_dirs=dirs,
        replicas=reps,
    )


def test_the_demo_s_story_gives_the_new_broker_its_share_under_the_three_goals() -> None:
    """The demo's plan without the cluster around it: broker 3 ends with its share of bytes,
    replicas and leaders (4-5 of 18 leaders). The real demo showed the leader bias that the
    followers-first tie-break fixes (10 leaders on broker 3 before it); this pure copy of its
    layout does not reproduce the bias, so it guards the outcome, not that cause."""
    p = plan(demo_story(), PlanOptions(mode=Mode.ADD_BROKERS, brokers=[3]))
    g = goals_of(p)
    for name in (
        "DiskUsageDistributionGoal",
        "ReplicaDistributionGoal",
        "LeaderReplicaDistributionGoal",
    ):
        assert g[name].met_after, g[name].line()
    new = next(b for b in p.report.brokers if b.broker_id == 3)
    assert 4 <= new.leaders_after <= 5, new
