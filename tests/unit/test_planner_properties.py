"""Properties of every plan (hypothesis): hard constraints kept, no broker's largest directory
utilisation raised (beyond the level the mode fills receivers to), the same plan on a second
run."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jbod_operator.models.snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo
from jbod_spark import PlanOptions, plan
from jbod_spark.options import DirRef, Mode
from jbod_spark.outputs import Plan

GB = 10**9
ALWAYS = {
    "replication_factor_kept",
    "one_replica_per_broker",
    "rack_spread_kept",
    "destinations_valid",
    "one_leader_per_partition",
}


@st.composite
def snapshots(draw: Any, drains: bool = False) -> ClusterSnapshot:
    nb = draw(st.integers(2, 6))
    n_racks = draw(st.sampled_from([0, 2, 3]))
    dirs_per = [draw(st.integers(1, 4)) for _ in range(nb)]
    n_parts = draw(st.integers(1, 24))
    used: Counter[tuple[int, int]] = Counter()
    reps: list[ReplicaInfo] = []
    for p in range(n_parts):
        rf = draw(st.integers(1, min(3, nb)))
        brokers = draw(st.permutations(list(range(nb))))[:rf]
        size = draw(st.integers(0, 12)) * GB
        topic = draw(st.sampled_from(["a", "b", "c"]))
        for j, b in enumerate(brokers):
            d = draw(st.integers(0, dirs_per[b] - 1))
            used[(b, d)] += size
            reps.append(
                ReplicaInfo(
                    topic=topic,
                    partition=p,
                    broker_id=b,
                    log_dir=f"/d/{d}",
                    size_bytes=size,
                    leader=j == 0,
                )
            )
    dirs = []
    for b in range(nb):
        for d in range(dirs_per[b]):
            cap = draw(st.sampled_from([40, 60, 100])) * GB
            cap = max(cap, -(-used[(b, d)] * 4 // 3))  # nobody starts above 75 %
            dirs.append(
                LogDirInfo(
                    broker_id=b,
                    name=f"d{d}",
                    path=f"/d/{d}",
                    capacity_bytes=cap,
                    used_bytes=used[(b, d)],
                )
            )
    brokers_info = [
        BrokerInfo(id=b, rack=f"r{b % n_racks}" if n_racks else None) for b in range(nb)
    ]
    if drains:
        # cordon or fail some dirs, kill a broker
        new_dirs = []
        for d in dirs:
            kind = draw(st.sampled_from(["ok", "ok", "ok", "cordoned", "offline"]))
            new_dirs.append(
                d.model_copy(update={"cordoned": kind == "cordoned", "live": kind != "offline"})
            )
        dirs = new_dirs
        if draw(st.booleans()):
            dead = draw(st.integers(0, nb - 1))
            brokers_info[dead] = brokers_info[dead].model_copy(update={"live": False})
    return ClusterSnapshot(cluster_name="prop", brokers=brokers_info, log_dirs=dirs, replicas=reps)


def per_broker_max(p: Plan) -> tuple[dict[int, float], dict[int, float]]:
    before: dict[int, float] = {}
    after: dict[int, float] = {}
    for d in p.report.dirs:
        if not d.live or d.cordoned or d.drained:
            continue
        before[d.broker_id] = max(before.get(d.broker_id, 0.0), d.util_before)
        after[d.broker_id] = max(after.get(d.broker_id, 0.0), d.util_after)
    return before, after


def mean_util(s: ClusterSnapshot) -> float:
    live = {b.id for b in s.brokers if b.live}
    ds = [d for d in s.log_dirs if d.live and not d.cordoned and d.broker_id in live]
    cap = sum(d.capacity_bytes for d in ds)
    return sum(d.used_bytes for d in ds) / cap if cap else 0.0


MODES = [Mode.FULL, Mode.DIRS_ONLY, Mode.TARGETED, Mode.ADD_BROKERS]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.sampled_from(MODES), st.sampled_from([0.02, 0.04, 0.1]))
def test_plans_keep_constraints_and_never_raise_largest_utilisation(
    s: ClusterSnapshot, mode: Mode, tol: float
) -> None:
    brokers = [max(b.id for b in s.brokers)] if mode is Mode.ADD_BROKERS else []
    opts = PlanOptions(mode=mode, dir_balance_tolerance=tol, brokers=brokers)
    p = plan(s, opts)
    bad = [c for c in p.report.constraints if not c.ok]
    assert not bad, (bad, p.report.notes)
    # the level a mode may fill a receiving broker's dirs to
    if mode is Mode.DIRS_ONLY:
        fill = 0.0
    elif mode is Mode.TARGETED:
        fill = opts.target_utilisation
    else:
        fill = min(
            opts.capacity_threshold,
            mean_util(s) * opts.thresholds.disk + opts.dir_balance_tolerance,
        )
    before, after = per_broker_max(p)
    for b, u in after.items():
        assert u <= max(before[b], fill) + 1e-9, (b, u, before[b], fill)
    assert (
        p.report.summary.largest_util_after
        <= max(p.report.summary.largest_util_before, fill) + 1e-9
    )
    if mode is Mode.DIRS_ONLY:
        assert all(m.kind == "intra" for m in p.moves)
        assert (
            p.report.summary.worst_spread_pp_after <= p.report.summary.worst_spread_pp_before + 1e-6
        )
    # determinism
    assert plan(s, opts) == p


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshots(drains=True),
    st.sampled_from([Mode.FULL, Mode.DIRS_ONLY, Mode.REMOVE_BROKERS, Mode.REMOVE_DIRS]),
    st.data(),
)
def test_drains_keep_hard_constraints(s: ClusterSnapshot, mode: Mode, data: Any) -> None:
    live = [b.id for b in s.brokers if b.live]
    opts = PlanOptions(mode=mode)
    if mode is Mode.REMOVE_BROKERS:
        opts = PlanOptions(mode=mode, brokers=[data.draw(st.sampled_from(live))])
    elif mode is Mode.REMOVE_DIRS:
        d = data.draw(st.sampled_from([d for d in s.log_dirs if d.broker_id in live]))
        opts = PlanOptions(mode=mode, log_dirs=[DirRef(broker_id=d.broker_id, log_dir=d.name)])
    p = plan(s, opts)
    checks = {c.name: c for c in p.report.constraints}
    for name in ALWAYS:
        assert checks[name].ok, (checks[name], p.report.notes)
    moved_to = {(m.to_broker, m.to_dir) for m in p.moves}
    dirs = {(d.broker_id, d.path): d for d in s.log_dirs}
    dead = {b.id for b in s.brokers if not b.live}
    for key in moved_to:
        assert dirs[key].live and not dirs[key].cordoned and key[0] not in dead
    if mode is Mode.REMOVE_BROKERS:
        assert all(m.to_broker not in opts.brokers for m in p.moves)
    assert plan(s, opts) == p
