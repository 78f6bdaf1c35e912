"""Reading a broker's Prometheus ``/metrics`` in tests (integration and e2e tiers)."""

from __future__ import annotations

import urllib.request


def scrape(url: str) -> dict[str, float]:
    """The unlabelled samples of a broker's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line and not line.startswith("#") and "{" not in line.split()[0]
    }
