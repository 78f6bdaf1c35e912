"""A running broker exposes Kafka's operational figures in Prometheus format and logs JSON."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

import pytest

from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster, lead_alone
from jbod_broker.storage.records import build_batch

pytestmark = pytest.mark.integration

EXPECTED = [
    "jbod_offline_log_directory_count",
    "jbod_offline_replica_count",
    "jbod_under_replicated_partitions",
    "jbod_bytes_in_total",
    "jbod_bytes_out_total",
    "jbod_isr_shrinks_total",
    "jbod_isr_expands_total",
    "jbod_log_dir_move_bytes_total",
    "jbod_log_dir_move_rate_bytes",
    "jbod_request_seconds_bucket",
]


def test_metrics_and_json_logs(tmp_path: Path) -> None:
    cl = LocalCluster(str(tmp_path), size=1, num_dirs=2)
    cl.start()
    try:

        async def traffic() -> None:
            async with BrokerClient(cl[0].url, token=cl.token) as c:
                await lead_alone(c, "m", 1)
                for _ in range(5):
                    await c.produce("m", 0, build_batch([(None, b"x" * 1000)] * 4), acks=1)
                await c.fetch("m", 0, 0)

        asyncio.run(traffic())
        with urllib.request.urlopen(cl[0].url + "/metrics", timeout=5) as r:
            assert r.status == 200
            text = r.read().decode()
        for name in EXPECTED:
            assert name in text, name
        values = {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line and not line.startswith("#") and "{" not in line.split()[0]
        }
        assert values["jbod_bytes_in_total"] > 20_000
        assert values["jbod_offline_log_directory_count"] == 0
        assert 'route="/v1/data/produce"' in text
    finally:
        cl.stop()
    lines = [ln for ln in Path(cl[0].log_path).read_text().splitlines() if ln.strip()]
    events = [json.loads(ln) for ln in lines]  # every line is one JSON object
    assert {"ts", "level", "logger", "msg"} <= set(events[0])
    assert any(e.get("event") == "broker_started" for e in events)
    assert any(e.get("event") == "broker_stopped" for e in events)
