"""bench/kafka_protocol.py's summary: the ratios, the targets and the RF 3 CPU ceiling."""

from __future__ import annotations

from typing import Any

import pytest

from bench.kafka_protocol import (
    HTTP_RF3_MB_PER_BROKER_CPU_S,
    ISSUE_RF3_MB_PER_BROKER_CPU_S_BEFORE,
    RF3_CPU_TARGET_FACTOR,
    median_figures,
    ratios,
    rf3_in_rf1_copies,
)

QUICK, FULL = 60_000, 400_000
AS_WRITTEN = "produce_mb_per_broker_cpu_s_rf3_ours"
VS_HTTP = "produce_mb_per_broker_cpu_s_rf3_ours_vs_http"


def _targets(result: dict[str, object], rf3_records: int | None = QUICK) -> dict[str, Any]:
    out = ratios(result, rf3_records)["targets"]
    assert isinstance(out, dict)
    return out


def test_a_throughput_ratio_is_judged_against_its_target() -> None:
    t = _targets({"produce_mb_s_rf1_ours": 30.0, "produce_mb_s_rf1_kafka": 100.0})
    assert t["produce_mb_s_rf1"] == {"ratio": 0.3, "target": 0.5, "met": False}


@pytest.mark.parametrize(("value", "met"), [(29.99, False), (30.0, True), (58.65, True)])
def test_the_rf3_cpu_target_is_five_times_the_figure_the_issue_quotes(
    value: float, met: bool
) -> None:
    entry = _targets({"produce_mb_per_broker_cpu_s_rf3_ours": value}, FULL)[AS_WRITTEN]
    assert ISSUE_RF3_MB_PER_BROKER_CPU_S_BEFORE == 6.0
    assert entry["target"] == RF3_CPU_TARGET_FACTOR * 6.0 == 30.0
    assert entry["value"] == value and entry["met"] is met


def test_the_rf3_cpu_entry_says_whether_cutting_user_cpu_alone_could_reach_the_target() -> None:
    want = round(RF3_CPU_TARGET_FACTOR * HTTP_RF3_MB_PER_BROKER_CPU_S[QUICK], 2)
    low = _targets(
        {
            "produce_mb_per_broker_cpu_s_rf3_ours": 60.0,
            "produce_mb_per_broker_kernel_cpu_s_rf3_ours": want - 1,
        }
    )[VS_HTTP]
    assert low["met"] is False
    assert low["ceiling_kernel_only"] == want - 1
    assert low["reachable_by_user_cpu_alone"] is False
    high = _targets(
        {
            "produce_mb_per_broker_cpu_s_rf3_ours": want,
            "produce_mb_per_broker_kernel_cpu_s_rf3_ours": 5 * want,
        }
    )[VS_HTTP]
    assert high["met"] is True and high["reachable_by_user_cpu_alone"] is True


def test_without_a_kernel_figure_no_ceiling_is_claimed() -> None:
    entry = _targets({"produce_mb_per_broker_cpu_s_rf3_ours": 60.0})[VS_HTTP]
    assert "ceiling_kernel_only" not in entry


@pytest.mark.parametrize("records", [QUICK, FULL])
def test_a_run_is_judged_against_the_baseline_of_its_own_size(records: int) -> None:
    entry = _targets({"produce_mb_per_broker_cpu_s_rf3_ours": 100.0}, records)[VS_HTTP]
    baseline = HTTP_RF3_MB_PER_BROKER_CPU_S[records]
    assert entry["baseline_http"] == baseline and entry["baseline_records_rf3"] == records
    assert entry["target"] == round(RF3_CPU_TARGET_FACTOR * baseline, 2)
    assert entry["ratio_to_baseline"] == round(100.0 / baseline, 3)


@pytest.mark.parametrize("records", [None, 123_456])
def test_a_size_without_a_baseline_is_not_judged(records: int | None) -> None:
    targets = _targets({"produce_mb_per_broker_cpu_s_rf3_ours": 1e9}, records)
    entry = targets[VS_HTTP]
    assert entry["met"] is None and entry["baseline_http"] is None
    assert "target" not in entry and str(records) in entry["why"]
    assert targets[AS_WRITTEN]["met"] is True  # the issue's own target needs no baseline


def test_rf3_is_counted_in_rf1_copies_on_each_side() -> None:
    result: dict[str, object] = {
        "produce_mb_per_broker_cpu_s_rf1_ours": 300.0,
        "produce_mb_per_broker_cpu_s_rf3_ours": 100.0,
        "produce_mb_per_broker_cpu_s_rf1_kafka": 120.0,
        "produce_mb_per_broker_cpu_s_rf3_kafka": 20.0,
    }
    assert rf3_in_rf1_copies(result, "ours") == 3.0
    out = ratios(result, FULL)
    assert out["produce_rf3_cost_in_rf1_copies_ours"] == 3.0
    assert out["produce_rf3_cost_in_rf1_copies_kafka"] == 6.0
    entry = out["targets"][VS_HTTP]  # type: ignore[index]
    assert entry["target_in_rf1_copies"] == round(300.0 / entry["target"], 2)


def test_without_both_rfs_no_copies_are_claimed() -> None:
    assert rf3_in_rf1_copies({"produce_mb_per_broker_cpu_s_rf3_ours": 100.0}, "ours") is None
    assert rf3_in_rf1_copies({"produce_mb_per_broker_cpu_s_rf1_ours": 100.0}, "ours") is None
    out = ratios({"produce_mb_per_broker_cpu_s_rf3_ours": 100.0}, FULL)
    assert "produce_rf3_cost_in_rf1_copies_ours" not in out
    entry = out["targets"][VS_HTTP]  # type: ignore[index]
    assert "target_in_rf1_copies" not in entry


def test_repeated_runs_give_each_figure_as_its_median_with_the_spread() -> None:
    runs: list[dict[str, object]] = [
        {"produce_mb_s_rf3_ours": 60.0, "isr_changes_rf3_ours": 0, "min_isr_size_end_rf3_ours": 3},
        {"produce_mb_s_rf3_ours": 90.0, "isr_changes_rf3_ours": 0, "min_isr_size_end_rf3_ours": 3},
        {"produce_mb_s_rf3_ours": 75.5, "isr_changes_rf3_ours": 2, "min_isr_size_end_rf3_ours": 3},
    ]
    out, spread = median_figures(runs)
    assert out == {
        "produce_mb_s_rf3_ours": 75.5,
        "isr_changes_rf3_ours": 0,
        "min_isr_size_end_rf3_ours": 3,
    }
    assert spread == {"produce_mb_s_rf3_ours": [60.0, 90.0], "isr_changes_rf3_ours": [0, 2]}


def test_one_run_is_its_own_figures_and_a_run_without_a_figure_is_left_out_of_it() -> None:
    one: dict[str, object] = {
        "produce_mb_s_rf1_ours": 143.35,
        "produce_kernel_share_rf1_ours": None,
    }
    assert median_figures([one]) == (one, {})
    out, spread = median_figures([{"a": 1.0}, {"a": None}, {"a": 4.0}])
    assert out == {"a": 2.5} and spread == {"a": [1.0, 4.0]}
