"""The summaries of Kafka's performance tools, as bench/kafka_protocol.py reads them.

The lines are what ProducerPerformance and ConsumerPerformance of Kafka 4.3.1 printed on this
machine (periodic progress lines, the whole run's summary, then the steady-state one that
``--warmup-records`` adds); a format change in a later Kafka must fail here, not yield a
figure read from the wrong line.
"""

from __future__ import annotations

import pytest

from tests.kafka_jars import (
    CONSUMER_COLUMNS,
    parse_consumer_performance,
    parse_producer_performance,
)

PRODUCER_OUT = """\
Warmup first 10000 records. Steady state results will print after the complete test summary.
31337 records sent, 6267.4 records/sec (6.12 MB/sec), 1911.3 ms avg latency, 2911.0 ms max latency.
60000 records sent, 21149.101163 records/sec (20.65 MB/sec), 880.62 ms avg latency, \
1449.00 ms max latency, 990 ms 50th, 1378 ms 95th, 1427 ms 99th, 1448 ms 99.9th.
50000 steady state records sent, 24937.655860 records/sec (24.35 MB/sec), 987.37 ms avg \
latency, 1449.00 ms max latency, 1157 ms 50th, 1380 ms 95th, 1445 ms 99th, 1448 ms 99.9th.
"""

CONSUMER_OUT = f"""\
Warning: --messages is deprecated. Use --num-records instead.
{CONSUMER_COLUMNS}
2026-11-25 00:12:16:031, 2026-11-25 00:12:18:988, 58.5938, 19.8153, 60000, 20290.8353, 1568, \
1389, 42.1841, 43196.5443
"""


def test_producer_steady_state_summary_wins() -> None:
    got = parse_producer_performance(PRODUCER_OUT)
    assert got == {
        "records": 50000.0,
        "records_s": 24937.65586,
        "mb_s": 24.35,
        "avg_ms": 987.37,
        "max_ms": 1449.0,
        "p50_ms": 1157.0,
        "p95_ms": 1380.0,
        "p99_ms": 1445.0,
        "p999_ms": 1448.0,
        "steady_state": 1.0,
    }


def test_producer_summary_without_warmup() -> None:
    whole = "".join(PRODUCER_OUT.splitlines(True)[1:3])
    got = parse_producer_performance(whole)
    assert (got["records"], got["mb_s"], got["p50_ms"], got["p99_ms"]) == (60000, 20.65, 990, 1427)
    assert got["steady_state"] == 0.0


def test_producer_progress_lines_alone_are_no_summary() -> None:
    """A producer that died after its progress lines printed no percentiles: an error, not the
    last progress line's figures."""
    with pytest.raises(ValueError, match="no ProducerPerformance summary"):
        parse_producer_performance(PRODUCER_OUT.splitlines(True)[1])


def test_consumer_summary_by_column() -> None:
    got = parse_consumer_performance(CONSUMER_OUT)
    assert got == {
        "data.consumed.in.MB": 58.5938,
        "MB.sec": 19.8153,
        "data.consumed.in.nMsg": 60000.0,
        "nMsg.sec": 20290.8353,
        "rebalance.time.ms": 1568.0,
        "fetch.time.ms": 1389.0,
        "fetch.MB.sec": 42.1841,
        "fetch.nMsg.sec": 43196.5443,
    }


@pytest.mark.parametrize(
    "out",
    [
        "",
        CONSUMER_COLUMNS + "\n",  # a header and no figures: the consumer failed after it
        CONSUMER_COLUMNS + "\n1, 2, 3\n",  # fewer columns than the header names
    ],
)
def test_consumer_without_summary_is_an_error(out: str) -> None:
    with pytest.raises(ValueError, match="no ConsumerPerformance summary"):
        parse_consumer_performance(out)
