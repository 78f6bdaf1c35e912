"""The placement planner on small hand-made snapshots whose best plan is known."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from jbod_operator.models import LogDirMove, PartitionReassignment
from jbod_operator.models.goals import GoalName
from jbod_operator.models.snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo
from jbod_spark import PlanOptions, plan, plan_directory_balance
from jbod_spark.arrays import from_snapshot
from jbod_spark.baselines import plain_greedy
from jbod_spark.dirbalance import BrokerDirsProblem, DirBalanceParams, balance_broker_dirs
from jbod_spark.options import DirRef, Mode
from jbod_spark.outputs import Plan
from jbod_spark.synthetic import synthetic_cluster

GB = 10**9

# (topic, partition, broker, dir name, size, leader)
Rep = tuple[str, int, int, str, int, bool]


def make(
    brokers: Mapping[int, str | None],
    dirs: dict[tuple[int, str], int],
    reps: list[Rep],
    *,
    cordoned: frozenset[tuple[int, str]] = frozenset(),
    offline: frozenset[tuple[int, str]] = frozenset(),
    dead: frozenset[int] = frozenset(),
    other: dict[tuple[int, str], int] | None = None,
) -> ClusterSnapshot:
    used: Counter[tuple[int, str]] = Counter()
    for _, _, b, d, s, _ in reps:
        used[(b, d)] += s
    for k, v in (other or {}).items():
        used[k] += v
    return ClusterSnapshot(
        cluster_name="demo",
        namespace="kafka",
        brokers=[BrokerInfo(id=b, rack=r, live=b not in dead) for b, r in brokers.items()],
        log_dirs=[
            LogDirInfo(
                broker_id=b,
                name=n,
                path=f"/var/lib/jbod/data-{n}",
                capacity_bytes=c,
                used_bytes=used[(b, n)],
                live=(b, n) not in offline,
                cordoned=(b, n) in cordoned,
            )
            for (b, n), c in dirs.items()
        ],
        replicas=[
            ReplicaInfo(
                topic=t,
                partition=p,
                broker_id=b,
                log_dir=f"/var/lib/jbod/data-{d}",
                size_bytes=s,
                leader=ld,
            )
            for t, p, b, d, s, ld in reps
        ],
    )


def final_dirs(p: Plan, s: ClusterSnapshot) -> dict[tuple[str, int, int], tuple[int, str]]:
    """(topic, partition, original broker) -> (broker, dir path) after the plan."""
    out = {(r.topic, r.partition, r.broker_id): (r.broker_id, r.log_dir) for r in s.replicas}
    for m in p.moves:
        out[(m.topic, m.partition, m.from_broker)] = (m.to_broker, m.to_dir)
    return out


def dir_usage(p: Plan) -> dict[tuple[int, str], float]:
    return {(d.broker_id, d.name): d.util_after for d in p.report.dirs}


def assert_hard_constraints(p: Plan) -> None:
    bad = [c for c in p.report.constraints if not c.ok]
    assert not bad, bad


def validate_manifests(p: Plan, **kw: Any) -> tuple[list[LogDirMove], list[PartitionReassignment]]:
    ldm = [LogDirMove.model_validate(m) for m in p.log_dir_moves(**kw)]
    pr = [PartitionReassignment.model_validate(m) for m in p.partition_reassignments(**kw)]
    return ldm, pr


# -- directory balance (KIP-113's problem) ---------------------------------------------------


def test_one_move_evens_two_directories() -> None:
    # /a holds 600 (300+200+100), /b 200: moving the 200 one makes both 400, the only best plan.
    s = make(
        {0: None},
        {(0, "a"): 1000 * GB, (0, "b"): 1000 * GB},
        [
            ("t", 0, 0, "a", 300 * GB, True),
            ("t", 1, 0, "a", 200 * GB, True),
            ("t", 2, 0, "a", 100 * GB, True),
            ("t", 3, 0, "b", 200 * GB, True),
        ],
    )
    p = plan_directory_balance(s)
    assert [(m.topic, m.partition, m.to_dir_name, m.kind) for m in p.moves] == [
        ("t", 1, "b", "intra")
    ]
    assert p.report.summary.bytes_moved == 200 * GB
    assert p.report.summary.worst_spread_pp_after == pytest.approx(0.0)
    assert p.report.summary.lower_bound_bytes == 200 * GB
    assert_hard_constraints(p)


def demo_snapshot() -> ClusterSnapshot:
    """3 brokers x 3 dirs, skewed topics all landed on each broker's first dir."""
    brokers = {0: "r0", 1: "r1", 2: "r2"}
    dirs = {(b, d): 100 * GB for b in brokers for d in ("a", "b", "c")}
    reps: list[Rep] = []
    sizes = [20, 14, 9, 6, 4, 3, 2, 2, 1, 1, 1, 1]
    for p, size in enumerate(sizes):
        for j in range(3):
            b = (p + j) % 3
            reps.append(("skewed", p, b, "a" if p % 4 else "b", size * GB, j == 0))
    return make(brokers, dirs, reps)


def test_demo_plan_evens_each_broker_with_logdirmoves_only() -> None:
    s = demo_snapshot()
    before = {(d.broker_id, d.name): d.used_bytes / d.capacity_bytes for d in s.log_dirs}
    p = plan_directory_balance(s, tolerance=0.04)
    assert_hard_constraints(p)
    assert p.moves and all(m.kind == "intra" for m in p.moves)
    ldm, pr = validate_manifests(p)
    assert pr == [] and len(ldm) == 1
    assert ldm[0].spec.cluster_name == "demo" and ldm[0].metadata.namespace == "kafka"
    assert {(m.broker_id, m.topic, m.partition) for m in ldm[0].spec.moves or []} == {
        (m.to_broker, m.topic, m.partition) for m in p.moves
    }
    after = dir_usage(p)
    for b in range(3):
        spread_before = max(before[(b, d)] for d in "abc") - min(before[(b, d)] for d in "abc")
        spread_after = max(after[(b, d)] for d in "abc") - min(after[(b, d)] for d in "abc")
        assert spread_before > 0.3
        assert spread_after <= 0.05
        assert max(after[(b, d)] for d in "abc") <= max(before[(b, d)] for d in "abc")
    assert p.report.summary.bytes_moved <= 1.2 * p.report.summary.lower_bound_bytes


def test_balanced_broker_is_left_alone() -> None:
    s = make(
        {0: None},
        {(0, "a"): 100 * GB, (0, "b"): 100 * GB},
        [("t", 0, 0, "a", 41 * GB, True), ("t", 1, 0, "b", 40 * GB, True)],
    )
    assert plan_directory_balance(s).moves == []


def test_balancing_never_widens_a_brokers_spread() -> None:
    """Found by hypothesis: the 5 GB replica shed from the fullest dir fits nowhere under the
    band and goes back, while the 3 GB one leaves its dir empty; the spread went from 11.5 to
    12.5 points. A plan that would widen the spread or raise the top is not made."""
    s = make(
        {0: None},
        {(0, "a"): 40 * GB, (0, "b"): 40 * GB, (0, "c"): 40 * GB, (0, "d"): 100 * GB},
        [
            ("t", 0, 0, "a", 5 * GB, True),
            ("t", 1, 0, "b", 3 * GB, True),
            ("t", 2, 0, "c", 1 * GB, True),
            ("t", 3, 0, "d", 1 * GB, True),
            ("t", 4, 0, "a", 0, True),
        ],
    )
    p = plan(s, PlanOptions(mode=Mode.DIRS_ONLY, dir_balance_tolerance=0.02))
    summary = p.report.summary
    assert summary.worst_spread_pp_after <= summary.worst_spread_pp_before + 1e-9
    assert summary.largest_util_after <= summary.largest_util_before + 1e-9
    assert all(m.size_bytes > 0 for m in p.moves)  # an empty replica is never moved


def test_an_arriving_replica_does_not_take_the_dir_a_shed_one_leaves() -> None:
    """Found by hypothesis: a 5 GB replica arrives on a broker whose only data is 5 GB in dir
    0 of three. Shedding made dir 0 empty, the arrival took it, the shed replica went back:
    10 GB in one dir. Placing the arrival in an empty dir is better and is what is kept."""
    gb = float(GB)
    prob = BrokerDirsProblem(
        capacity=np.array([40 * gb] * 3),
        fixed=np.zeros(3),
        usable=np.ones(3, dtype=np.bool_),
        sizes=np.array([5 * GB, 5 * GB], dtype=np.int64),
        cur=np.array([-1, 0], dtype=np.int64),  # the arrival first: it is placed first
        movable=np.ones(2, dtype=np.bool_),
    )
    new = balance_broker_dirs(prob, DirBalanceParams(tolerance=0.02, ceiling=0.125))
    assert new[1] == 0 and new[0] != 0  # the resident stays, the arrival goes elsewhere


def test_cordoned_dir_is_drained_to_the_same_broker() -> None:
    s = make(
        {0: None},
        {(0, "a"): 100 * GB, (0, "b"): 100 * GB, (0, "c"): 100 * GB},
        [
            ("t", 0, 0, "a", 30 * GB, True),
            ("t", 1, 0, "a", 10 * GB, True),
            ("t", 2, 0, "b", 20 * GB, True),
            ("t", 3, 0, "c", 20 * GB, True),
        ],
        cordoned=frozenset({(0, "a")}),
    )
    p = plan_directory_balance(s)
    assert_hard_constraints(p)
    u = dir_usage(p)
    assert u[(0, "a")] == 0.0
    assert {m.partition for m in p.moves} == {0, 1}
    assert max(u[(0, "b")], u[(0, "c")]) == pytest.approx(0.50)


def test_min_move_bytes_skips_small_replicas() -> None:
    reps: list[Rep] = [("big", 0, 0, "a", 40 * GB, True)]
    reps += [("small", i, 0, "a", GB // 100, True) for i in range(50)]
    s = make({0: None}, {(0, "a"): 100 * GB, (0, "b"): 100 * GB}, reps)
    p = plan_directory_balance(s, min_move_bytes=GB)
    assert all(m.size_bytes >= GB for m in p.moves)


# -- across brokers: broker and disk chosen together ----------------------------------------


def test_inter_broker_moves_name_the_emptier_disk() -> None:
    # Broker 0 is full; broker 1's first disk holds 70 GB of other data (Cruise Control #1590:
    # moving onto "any" dir would fill it). Every move must land on broker 1's empty disk.
    reps: list[Rep] = [("t", p, 0, "a" if p % 2 else "b", 10 * GB, True) for p in range(12)]
    s = make(
        {0: None, 1: None},
        {(0, "a"): 100 * GB, (0, "b"): 100 * GB, (1, "a"): 100 * GB, (1, "b"): 100 * GB},
        reps,
        other={(1, "a"): 70 * GB},
    )
    p = plan(s)
    assert_hard_constraints(p)
    inter = [m for m in p.moves if m.kind == "inter"]
    assert inter and all(m.to_broker == 1 for m in inter)
    assert all(m.to_dir_name == "b" for m in inter)
    _, pr = validate_manifests(p)
    assert pr
    for ta in pr[0].spec.partitions:
        assert ta.log_dirs is not None and len(ta.log_dirs) == len(ta.replicas)
    assert max(dir_usage(p).values()) <= 0.8


def test_rack_spread_is_kept() -> None:
    # p0 spans racks r1 (broker 0) and r2 (broker 1). Broker 0 must shed; broker 3 (r2) is the
    # emptiest but would put both replicas in r2, so p0 may only go to broker 2 (r1).
    brokers = {0: "r1", 1: "r2", 2: "r1", 3: "r2"}
    dirs = {(b, "a"): 100 * GB for b in brokers}
    reps: list[Rep] = [
        ("t", 0, 0, "a", 30 * GB, True),
        ("t", 0, 1, "a", 30 * GB, False),
        ("u", 0, 0, "a", 30 * GB, True),
        ("u", 0, 2, "a", 30 * GB, False),
        ("v", 0, 2, "a", 10 * GB, True),
    ]
    s = make(brokers, dirs, reps)
    p = plan(s, PlanOptions(goals=[GoalName.DISK_USAGE]))
    assert_hard_constraints(p)
    moved_t = [m for m in p.moves if m.topic == "t"]
    assert all(m.to_broker in (0, 2) for m in moved_t)
    racks = {b.id: b.rack for b in s.brokers}
    after = final_dirs(p, s)
    for t in ("t", "u"):
        rs = {racks[after[(t, 0, b)][0]] for (tt, _, b) in after if tt == t}
        assert len(rs) == 2


def test_offline_dir_replicas_move_to_another_broker() -> None:
    s = make(
        {0: None, 1: None, 2: None},
        {(b, d): 100 * GB for b in range(3) for d in ("a", "b")},
        [
            ("t", 0, 0, "a", 10 * GB, True),
            ("t", 0, 1, "a", 10 * GB, False),
            ("t", 1, 0, "b", 5 * GB, True),
        ],
        offline=frozenset({(0, "a")}),
    )
    p = plan(s)
    assert_hard_constraints(p)
    m = [m for m in p.moves if (m.topic, m.partition, m.from_broker) == ("t", 0, 0)]
    assert len(m) == 1 and m[0].to_broker == 2 and m[0].kind == "inter"
    # dirs-only cannot do it: it says so
    q = plan_directory_balance(s)
    assert not next(c for c in q.report.constraints if c.name == "drained_dirs_empty").ok
    assert any("offline" in n for n in q.report.notes)


def test_capacity_threshold_is_restored() -> None:
    s = make(
        {0: None, 1: None},
        {(0, "a"): 100 * GB, (1, "a"): 100 * GB},
        [("t", p, 0, "a", 9 * GB, True) for p in range(10)],
    )
    p = plan(s)
    assert_hard_constraints(p)
    u = dir_usage(p)
    assert u[(0, "a")] <= 0.8 and u[(0, "a")] - u[(1, "a")] <= 0.1


def test_leaders_balanced_without_moving_bytes() -> None:
    # data perfectly balanced, every leader on broker 0
    reps: list[Rep] = []
    for part in range(12):
        for b in range(3):
            reps.append(("t", part, b, "a", GB, b == 0))
    s = make({b: None for b in range(3)}, {(b, "a"): 100 * GB for b in range(3)}, reps)
    p = plan(s)
    assert_hard_constraints(p)
    assert p.report.summary.bytes_moved == 0
    leaders = Counter(pt.replicas[0] for pt in p.partitions)
    final = Counter({0: 12})
    for pt in p.partitions:
        final[0] -= 1
        final[pt.replicas[0]] += 1
    assert sorted(final.values()) == [4, 4, 4]
    assert leaders[0] == 0
    _, pr = validate_manifests(p)
    assert len(pr) == 1 and len(pr[0].spec.partitions) == 8


# -- modes -----------------------------------------------------------------------------------


def cluster4() -> ClusterSnapshot:
    reps: list[Rep] = []
    for p in range(16):
        for j in range(2):
            b = (p + j) % 3
            reps.append(("t", p, b, "a" if p % 3 else "b", (p % 5 + 1) * GB, j == 0))
    return make(
        {0: None, 1: None, 2: None, 3: None},
        {(b, d): 100 * GB for b in range(4) for d in ("a", "b")},
        reps,
    )


def test_add_brokers_moves_onto_new_brokers_only() -> None:
    s = cluster4()
    p = plan(s, PlanOptions(mode=Mode.ADD_BROKERS, brokers=[3]))
    assert_hard_constraints(p)
    inter = [m for m in p.moves if m.from_broker != m.to_broker]
    assert inter and all(m.to_broker == 3 for m in inter)
    b3 = next(b for b in p.report.brokers if b.broker_id == 3)
    assert b3.replicas_after > 0 and b3.spread_pp_after <= 5.0
    # leadership moves only onto the new broker too
    for pt in p.partitions:
        if pt.leader_changed:
            assert pt.replicas[0] == 3


def test_add_brokers_also_balances_the_old_brokers_disks() -> None:
    """A disk added to an old broker fills (a move within that broker) while replicas cross
    brokers only onto the new one: every broker ends inside the band, as full mode would."""
    reps: list[Rep] = [("t", p, p % 3, "a", 5 * GB // 2, True) for p in range(72)]
    s = make(
        {0: None, 1: None, 2: None, 3: None},
        {(b, d): 100 * GB for b in range(4) for d in ("a", "b")},
        reps,
    )
    p = plan(s, PlanOptions(mode=Mode.ADD_BROKERS, brokers=[3]))
    assert_hard_constraints(p)
    inter = [m for m in p.moves if m.from_broker != m.to_broker]
    intra = [m for m in p.moves if m.from_broker == m.to_broker]
    assert inter and all(m.to_broker == 3 for m in inter)
    assert {m.from_broker for m in intra} == {0, 1, 2}
    assert all(m.to_dir_name == "b" for m in intra)
    assert p.report.summary.band_scope == "all"
    assert all(b.spread_pp_after <= 5.0 for b in p.report.brokers), p.report.text()


def test_remove_brokers_empties_them() -> None:
    s = cluster4()
    p = plan(s, PlanOptions(mode=Mode.REMOVE_BROKERS, brokers=[0]))
    assert_hard_constraints(p)
    b0 = next(b for b in p.report.brokers if b.broker_id == 0)
    assert b0.replicas_after == 0 and b0.leaders_after == 0 and b0.used_after == 0
    # Replicas leave broker 0 only; the others' disks may be evened out within each broker.
    assert all(m.from_broker == 0 for m in p.moves if m.kind == "inter")
    assert all(m.from_broker != 0 for m in p.moves if m.kind == "intra")
    assert any(m.kind == "inter" for m in p.moves)


def test_remove_dirs_drains_within_the_broker_first() -> None:
    s = cluster4()
    p = plan(s, PlanOptions(mode=Mode.REMOVE_DIRS, log_dirs=[DirRef(broker_id=1, log_dir="a")]))
    assert_hard_constraints(p)
    assert dir_usage(p)[(1, "a")] == 0.0
    drained = [m for m in p.moves if m.from_broker == 1 and m.from_dir.endswith("data-a")]
    assert drained and all(m.kind == "intra" and m.to_dir_name == "b" for m in drained)


def test_remove_dirs_spills_to_other_brokers_when_the_broker_is_full() -> None:
    reps: list[Rep] = [("t", p, 0, "a", 10 * GB, True) for p in range(7)]
    reps += [("u", p, 0, "b", 10 * GB, True) for p in range(6)]
    s = make(
        {0: None, 1: None},
        {(b, d): 100 * GB for b in range(2) for d in ("a", "b")},
        reps,
    )
    p = plan(s, PlanOptions(mode=Mode.REMOVE_DIRS, log_dirs=[DirRef(broker_id=0, log_dir="a")]))
    assert_hard_constraints(p)
    u = dir_usage(p)
    assert u[(0, "a")] == 0.0 and u[(0, "b")] <= 0.8
    kinds = Counter(m.kind for m in p.moves)
    # 5 must leave (broker 0 keeps 80 GB at most); the rest of the cluster is then balanced
    # by DiskUsageDistributionGoal (bytes over capacity, broker 1 has twice broker 0's)
    assert kinds["intra"] >= 2 and kinds["inter"] >= 5
    assert {g.name: g.met_after for g in p.report.goals}["DiskUsageDistributionGoal"]


def test_targeted_only_relieves_hot_dirs() -> None:
    reps: list[Rep] = [("t", p, 0, "a", 10 * GB, True) for p in range(9)]
    reps += [("u", 0, 0, "b", 50 * GB, True), ("v", 0, 0, "c", 5 * GB, True)]
    s = make({0: None}, {(0, d): 100 * GB for d in "abc"}, reps)
    p = plan(s, PlanOptions(mode=Mode.TARGETED, target_utilisation=0.7))
    assert_hard_constraints(p)
    u = dir_usage(p)
    assert u[(0, "a")] <= 0.7 and u[(0, "b")] == 0.5
    assert p.report.summary.bytes_moved == 20 * GB


# -- outputs and determinism -----------------------------------------------------------------


def test_outputs_name_every_partition_once_and_chunk() -> None:
    s = cluster4()
    p = plan(s)
    assert_hard_constraints(p)
    ldm = [
        LogDirMove.model_validate(m)
        for m in p.log_dir_moves(max_moves=1, throttle_bytes_per_second=10_000_000)
    ]
    pr = [
        PartitionReassignment.model_validate(m)
        for m in p.partition_reassignments(throttle_bytes_per_second=10_000_000)
    ]
    assert all(x.spec.throttle_bytes_per_second == 10_000_000 for x in ldm + pr)
    in_ldm = [(m.topic, m.partition) for x in ldm for m in x.spec.moves or []]
    in_pr = [(t.topic, t.partition) for x in pr for t in x.spec.partitions]
    assert len(in_pr) == len(set(in_pr))
    assert not set(in_ldm) & set(in_pr)
    assert all(len(x.spec.moves or []) == 1 for x in ldm)
    assert len({x.metadata.name for x in ldm + pr}) == len(ldm) + len(pr)
    kafka = p.kafka_reassignment()
    assert kafka["version"] == 1
    for e in kafka["partitions"]:
        assert len(e["replicas"]) == len(e["log_dirs"]) == 2
        assert all(d.startswith("/") for d in e["log_dirs"])
    changed = {(e["topic"], e["partition"]) for e in kafka["partitions"]}
    assert changed == set(in_ldm) | set(in_pr)


def test_same_snapshot_same_plan_whatever_the_input_order() -> None:
    s = demo_snapshot()
    p1 = plan(s)
    assert plan(s) == p1
    rng = random.Random(7)
    brokers = list(s.brokers)
    dirs = list(s.log_dirs)
    rng.shuffle(brokers)
    rng.shuffle(dirs)
    # shuffle partitions but keep each partition's replica order
    by_part: dict[tuple[str, int], list[ReplicaInfo]] = {}
    for r in s.replicas:
        by_part.setdefault((r.topic, r.partition), []).append(r)
    keys = list(by_part)
    rng.shuffle(keys)
    reps = [r for k in keys for r in by_part[k]]
    s2 = s.model_copy(update={"brokers": brokers, "log_dirs": dirs, "replicas": reps})
    assert plan(s2) == p1


def test_growth_horizon_plans_for_projected_sizes() -> None:
    # balanced today (30 / 30 GB); "fast" grows 17 GB a day: planning a day ahead moves "x"
    s = make(
        {0: None},
        {(0, "a"): 100 * GB, (0, "b"): 100 * GB},
        [
            ("fast", 0, 0, "a", 20 * GB, True),
            ("x", 0, 0, "a", 10 * GB, True),
            ("y", 0, 0, "b", 30 * GB, True),
        ],
    )
    s = ClusterSnapshot.model_validate(
        {
            **s.model_dump(),
            "partition_loads": [
                {"topic": "fast", "partition": 0, "growth_bytes_per_second": 200_000.0}
            ],
        }
    )
    a = from_snapshot(s)
    assert a.part_growth.tolist() == [200_000.0, 0.0, 0.0]
    assert plan(s, PlanOptions(mode=Mode.DIRS_ONLY)).moves == []
    p = plan(s, PlanOptions(mode=Mode.DIRS_ONLY, horizon_seconds=86_400))
    assert [(m.topic, m.to_dir_name) for m in p.moves] == [("x", "b")]


def test_capacity_override_for_dirs_on_one_filesystem() -> None:
    # every dir reports the same 500 GB disk (mostly other data): by those figures the dirs look
    # even; planned as 1 GiB dirs holding only their replicas, the skew shows and is fixed
    mib = 2**20
    reps: list[Rep] = [("t", p, 0, "a", s * mib, True) for p, s in enumerate([300, 100, 50])]
    s = make(
        {0: None},
        {(0, "a"): 500 * GB, (0, "b"): 500 * GB},
        reps,
        other={(0, "a"): 300 * GB, (0, "b"): 300 * GB + 450 * mib},
    )
    assert plan_directory_balance(s).moves == []
    p = plan_directory_balance(s, capacity_bytes=2**30)
    assert_hard_constraints(p)
    # the best split of 300 / 100 / 50 MiB is 300 against 150: moving the two small ones
    assert [(m.partition, m.to_dir_name) for m in p.moves] == [(1, "b"), (2, "b")]
    assert p.report.summary.worst_spread_pp_after == pytest.approx(100 * 150 / 1024)


@pytest.mark.parametrize("seed", [21, 22])
def test_a_two_point_band_is_reached_near_the_lower_bound(seed: int) -> None:
    """The Rebalance benchmark's quality targets (issue 16) at a small size: asked for a 2 pp
    band, every broker ends within it and the bytes stay within 1.1 x the report's bound. The
    plain greedy balancer reaches the band too, with more bytes; the planner must not do worse."""
    a = synthetic_cluster(seed, 20, 6, 12000)
    p = plan(a, PlanOptions(dir_balance_tolerance=0.02))
    s = p.report.summary
    assert p.report.ok
    assert s.worst_spread_pp_before > 50.0
    assert s.worst_spread_pp_after <= 2.0
    assert s.bytes_moved <= 1.1 * s.lower_bound_bytes
    greedy = plain_greedy(a, 0.02)
    assert s.bytes_moved <= int(a.rep_size[greedy != a.rep_dir].sum())


def test_dirs_only_never_widens_a_broker_s_spread_past_the_band() -> None:
    """Found by the property test: 7 GB on a 40 GB disk (17.5 %) and 7 GB on a 100 GB one
    (7 %), band 10 pp: moving the first replica over lowers the fullest disk to 14 % but
    leaves the disks 14 pp apart; no move is the better plan under the threshold."""
    reps: list[Rep] = [("a", 0, 0, "x", 7 * GB, True), ("a", 1, 0, "y", 7 * GB, True)]
    s = make({0: None}, {(0, "x"): 40 * GB, (0, "y"): 100 * GB}, reps)
    p = plan(s, PlanOptions(mode=Mode.DIRS_ONLY, dir_balance_tolerance=0.1))
    assert p.moves == []
    assert p.report.summary.worst_spread_pp_after == pytest.approx(10.5)
