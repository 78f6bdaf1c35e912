"""The latency windows of issue 22's bench: parsing RateProducer's lines and the percentiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kafka_latency import (
    TAIL_BYTES,
    Sample,
    Samples,
    latest_due,
    parse_samples,
    percentile,
    window_stats,
)


def test_parse_acked_and_failed_lines() -> None:
    s = parse_samples("1000000 2500\nE 1002000 org.apache.kafka...TimeoutException: x y\n")
    assert s.acked == [Sample(1.0, 2.5)]
    assert s.failed == [(1.002, "org.apache.kafka...TimeoutException: x y")]


@pytest.mark.parametrize("line", ["1000000", "1000000 2.5", "a b", "1 2 3", "-1 5"])
def test_a_line_of_another_shape_is_an_error_not_skipped(line: str) -> None:
    with pytest.raises(ValueError, match="line 2"):
        parse_samples(f"1 1\n{line}\n")


def test_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile(values, 1.0) == 100
    assert percentile([7.0], 0.99) == 7
    assert percentile([1.0, 2.0], 0.5) == 1  # a measured value, never 1.5
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile(values, 0)


def test_window_keeps_records_due_inside_it_only() -> None:
    acked = [Sample(10.0 + i / 100, float(i)) for i in range(300)]  # due 10.00 .. 12.99
    s = Samples(acked, failed=[(10.5, "e"), (13.5, "e")])
    w = window_stats(s, 11.0, 12.0)  # records 100..199
    assert w == {"count": 100, "failed": 0, "p50_ms": 149.0, "p99_ms": 198.0, "max_ms": 199.0}
    assert window_stats(s, 10.0, 11.0)["failed"] == 1
    assert window_stats(s, 20.0, 21.0) == {"count": 0, "failed": 0}


def test_latest_due_reads_the_end_of_a_file_being_written(tmp_path: Path) -> None:
    path = tmp_path / "lat.txt"
    path.write_text("")
    assert latest_due(path) is None
    path.write_text("1000000 5\nE 3000000 boom\n2000000 7\n4000")  # the last line unfinished
    assert latest_due(path) == 3.0
    # Longer than the tail read: the seek cuts a line, which is left out, not misread.
    lines = "".join(f"{1_000_000 + i} 12345\n" for i in range(TAIL_BYTES // 10))
    path.write_text(lines)
    assert latest_due(path) == 1 + (TAIL_BYTES // 10 - 1) / 1e6
