"""bench/kafka_protocol.py's summary: the ratios, the targets and the RF 3 CPU ceiling."""

from __future__ import annotations

from typing import Any

from bench.kafka_protocol import HTTP_RF3_MB_PER_BROKER_CPU_S, RF3_CPU_TARGET_FACTOR, ratios


def _targets(result: dict[str, object]) -> dict[str, Any]:
    out = ratios(result)["targets"]
    assert isinstance(out, dict)
    return out


def test_a_throughput_ratio_is_judged_against_its_target() -> None:
    t = _targets({"produce_mb_s_rf1_ours": 30.0, "produce_mb_s_rf1_kafka": 100.0})
    assert t["produce_mb_s_rf1"] == {"ratio": 0.3, "target": 0.5, "met": False}


def test_the_rf3_cpu_entry_says_whether_cutting_user_cpu_alone_could_reach_the_target() -> None:
    want = round(RF3_CPU_TARGET_FACTOR * HTTP_RF3_MB_PER_BROKER_CPU_S, 2)
    low = _targets(
        {
            "produce_mb_per_broker_cpu_s_rf3_ours": 60.0,
            "produce_mb_per_broker_kernel_cpu_s_rf3_ours": want - 1,
        }
    )["produce_mb_per_broker_cpu_s_rf3_ours"]
    assert low["met"] is False
    assert low["ceiling_kernel_only"] == want - 1
    assert low["reachable_by_user_cpu_alone"] is False
    high = _targets(
        {
            "produce_mb_per_broker_cpu_s_rf3_ours": want,
            "produce_mb_per_broker_kernel_cpu_s_rf3_ours": 5 * want,
        }
    )["produce_mb_per_broker_cpu_s_rf3_ours"]
    assert high["met"] is True and high["reachable_by_user_cpu_alone"] is True


def test_without_a_kernel_figure_no_ceiling_is_claimed() -> None:
    entry = _targets({"produce_mb_per_broker_cpu_s_rf3_ours": 60.0})[
        "produce_mb_per_broker_cpu_s_rf3_ours"
    ]
    assert "ceiling_kernel_only" not in entry
