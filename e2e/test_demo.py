"""`make demo` end to end: the planner's directory balance for the demo's skewed topics,
applied through a LogDirMove on real broker processes, evens the directories out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]


def test_demo_evens_out_every_broker() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JBOD_")}
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo.py")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    # The product's planner (jbod_spark) made the plan: the demo has no other.
    assert "plan by jbod_spark" in out, out[-4000:]
    summary = next(line for line in out.splitlines() if line.startswith("demo OK"))
    before, after = (
        float(x) for x in re.findall(r"spread ([\d.]+) MiB -> ([\d.]+) MiB", summary)[0]
    )
    assert after < before, summary
    assert "every replica verified in its new dir" in summary
