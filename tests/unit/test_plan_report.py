"""The proposal summary a person reviews: feasibility against the band and the capacity
threshold (with the spread reached and why when missed), moves between brokers and between
disks, bytes to move, spreads before and after, and the readable report.txt.

Pure: small snapshots through the pure planner; figures are checked against the per-disk
report, never against the summary's own numbers.
"""

from __future__ import annotations

import re

import pytest

from jbod_operator.models.plan_report import PlanReport
from jbod_spark import PlanOptions, plan, plan_directory_balance
from jbod_spark.feasibility import MAX_REASONS
from jbod_spark.options import Mode
from jbod_spark.outputs import Plan
from tests.unit.test_planner import GB, Rep, cluster4, demo_snapshot, make


def spread_pp(utils: list[float]) -> float:
    return 100.0 * (max(utils) - min(utils)) if utils else 0.0


def counted(p: Plan) -> list[tuple[int, str, float, float]]:
    return [
        (d.broker_id, d.name, d.util_before, d.util_after)
        for d in p.report.dirs
        if d.live and not d.cordoned and not d.drained
    ]


def big_partition_snapshot() -> tuple[list[Rep], dict[tuple[int, str], int]]:
    """Two brokers x two 100 GB disks; t-3 (60 GB, RF 2) is larger than half of any disk and
    the rest is 8 GB per broker, so no placement brings a broker's disks within 4 pp."""
    reps: list[Rep] = [
        ("t", 3, 0, "a", 60 * GB, True),
        ("t", 3, 1, "a", 60 * GB, False),
        ("u", 0, 0, "b", 5 * GB, True),
        ("u", 1, 1, "b", 5 * GB, True),
        ("u", 2, 0, "a", 3 * GB, True),
        ("u", 3, 1, "a", 3 * GB, True),
    ]
    return reps, {(b, d): 100 * GB for b in (0, 1) for d in "ab"}


@pytest.mark.parametrize("mode", [Mode.DIRS_ONLY, Mode.FULL])
def test_a_partition_larger_than_half_a_disk_is_infeasible_and_says_why(mode: Mode) -> None:
    reps, dirs = big_partition_snapshot()
    p = plan(make({0: None, 1: None}, dirs, reps), PlanOptions(mode=mode))
    s = p.report.summary
    assert s.feasible is False
    assert s.balance_band_pp == pytest.approx(4.0)
    # the spread reported is the one the plan reaches, per broker, never the target
    per_broker = {b: spread_pp([u for bb, _, _, u in counted(p) if bb == b]) for b in (0, 1)}
    assert s.best_spread_pp == pytest.approx(max(per_broker.values()))
    assert s.best_spread_pp > s.balance_band_pp
    # 60 GB + 3 GB on one disk, 5 GB on the other: the only layouts are 63/5 or 60/8
    assert s.best_spread_pp == pytest.approx(52.0)
    why = [r for r in s.infeasible_reasons if "t-3" in r]
    assert len(why) == 2, s.infeasible_reasons
    assert all("larger than half of any disk" in r for r in why)
    # the bound it states holds: the broker's mean is 34%, the disk with t-3 at least 60%
    assert any("cannot come within 26.0 pp" in r and "broker 0" in r for r in why)
    text = p.report.text()
    assert "NOT feasible: best spread 52.0 pp (band 4.0 pp)" in text
    assert "why: partition t-3" in text


def test_a_balanced_proposal_is_feasible_and_its_figures_match_the_disks() -> None:
    p = plan_directory_balance(demo_snapshot())
    s = p.report.summary
    assert s.feasible is True and s.infeasible_reasons == []
    assert s.band_scope == "all"
    rows = counted(p)
    assert s.best_spread_pp <= s.balance_band_pp
    by_broker: dict[int, list[float]] = {}
    for b, _, _, after in rows:
        by_broker.setdefault(b, []).append(after)
    assert s.best_spread_pp == pytest.approx(max(spread_pp(u) for u in by_broker.values()))
    assert s.disk_spread_pp_before == pytest.approx(spread_pp([r[2] for r in rows]))
    assert s.disk_spread_pp_after == pytest.approx(spread_pp([r[3] for r in rows]))
    # moves between disks only; their count and bytes are the moves listed
    assert s.replica_moves_inter_broker == 0 and s.bytes_moved_inter_broker == 0
    assert s.replica_moves_intra_broker == len(p.moves) > 0
    assert s.bytes_moved == s.bytes_moved_intra_broker == sum(m.size_bytes for m in p.moves)
    assert s.capacity_threshold_percent == pytest.approx(80.0)
    assert "feasible: every disk at or under 80%" in p.report.text()


def test_moves_between_brokers_and_between_disks_are_counted_apart() -> None:
    s4 = cluster4()
    p = plan(s4, PlanOptions(mode=Mode.ADD_BROKERS, brokers=[3]))
    s = p.report.summary
    inter = [m for m in p.moves if m.from_broker != m.to_broker]
    intra = [m for m in p.moves if m.from_broker == m.to_broker]
    assert inter, "adding a broker moves replicas onto it"
    assert s.replica_moves_inter_broker == len(inter)
    assert s.replica_moves_intra_broker == len(intra)
    assert s.bytes_moved_inter_broker == sum(m.size_bytes for m in inter)
    assert s.bytes_moved == sum(m.size_bytes for m in p.moves)
    # brokers' utilisations: the new broker starts empty, so the spread before is the fullest
    utils_before = [b.used_before / b.capacity_bytes for b in p.report.brokers]
    utils_after = [b.used_after / b.capacity_bytes for b in p.report.brokers]
    assert s.broker_spread_pp_before == pytest.approx(spread_pp(utils_before))
    assert s.broker_spread_pp_after == pytest.approx(spread_pp(utils_after))
    assert s.broker_spread_pp_after < s.broker_spread_pp_before
    assert s.band_scope == "all"
    assert s.feasible, s.infeasible_reasons


def test_drain_modes_also_hold_the_band_over_what_stays() -> None:
    """remove-brokers empties broker 0 and balances the disks of the brokers that stay: the
    band holds over them (broker 0's empty disks are not counted)."""
    p = plan(cluster4(), PlanOptions(mode=Mode.REMOVE_BROKERS, brokers=[0]))
    s = p.report.summary
    assert s.band_scope == "all"
    assert s.feasible, s.infeasible_reasons
    assert 0.0 < s.best_spread_pp <= 100 * PlanOptions().dir_balance_tolerance


def test_a_replica_larger_than_the_threshold_of_any_disk_is_named() -> None:
    reps: list[Rep] = [("big", 0, 0, "a", 90 * GB, True), ("small", 0, 1, "a", 1 * GB, True)]
    dirs = {(b, d): 100 * GB for b in (0, 1) for d in "ab"}
    p = plan(make({0: None, 1: None}, dirs, reps), PlanOptions(mode=Mode.FULL))
    s = p.report.summary
    assert not s.feasible
    assert s.dirs_above_threshold_after == 1
    assert any(
        "big-0" in r and "larger than 80% of any disk it may sit on" in r
        for r in s.infeasible_reasons
    ), s.infeasible_reasons


def test_dirs_only_cannot_empty_a_broker_above_the_threshold() -> None:
    reps: list[Rep] = [("t", i, 0, "a" if i % 2 else "b", 10 * GB, True) for i in range(17)]
    dirs = {(0, "a"): 100 * GB, (0, "b"): 100 * GB, (1, "a"): 100 * GB}
    p = plan(make({0: None, 1: None}, dirs, reps), PlanOptions(mode=Mode.DIRS_ONLY))
    s = p.report.summary
    assert not s.feasible
    assert any(
        "broker 0 holds" in r and "dirs-only mode moves nothing to another broker" in r
        for r in s.infeasible_reasons
    ), s.infeasible_reasons


def test_reasons_are_capped_and_counted() -> None:
    n = MAX_REASONS + 3
    reps: list[Rep] = []
    for b in range(n):
        reps += [("t", b, b, "a", 60 * GB, True), ("u", b, b, "b", 1 * GB, True)]
    dirs = {(b, d): 100 * GB for b in range(n) for d in "ab"}
    p = plan(make(dict.fromkeys(range(n)), dirs, reps), PlanOptions(mode=Mode.DIRS_ONLY))
    reasons = p.report.summary.infeasible_reasons
    assert len(reasons) == MAX_REASONS + 1
    assert reasons[-1] == "... and 3 more brokers out of the band"


def test_report_round_trips_and_text_lists_every_disk() -> None:
    p = plan_directory_balance(demo_snapshot())
    again = PlanReport.model_validate_json(p.report.model_dump_json(by_alias=True))
    assert again == p.report
    text = p.report.text()
    disk_lines = [ln for ln in text.splitlines() if re.match(r"^\s+\d+\s+[abc]\s", ln)]
    assert len(disk_lines) == len(p.report.dirs) == 9
    short = p.report.text(max_disks=4)
    assert "... 5 more disks in report.json" in short
    assert "broker  disk" not in p.report.text(tables=False)
