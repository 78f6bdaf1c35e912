"""Every bench starts as ``make bench`` starts it: as a module of the repository
(``python -m bench.x`` from the root), so each reaches the tests' helpers and the others'
the same way, with no ``sys.path`` edits (``make bench`` once stopped at its fifth bench,
``bench/logdir_move.py``, on ``No module named 'tests'``). ``--help`` imports a bench
without running it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHES = sorted(p.stem for p in (REPO / "bench").glob("*.py") if p.stem != "__init__")


def bench_recipe() -> str:
    """The Makefile's ``bench`` target's recipe lines."""
    text = (REPO / "Makefile").read_text()
    m = re.search(r"^bench:.*\n((?:\t.*\n)+)", text, re.M)
    assert m, "the Makefile has no bench target"
    return m.group(1)


def test_make_bench_runs_each_bench_as_a_module_of_the_repository() -> None:
    recipe = bench_recipe()
    assert re.search(r"python -m bench\.", recipe), recipe


def test_no_bench_edits_sys_path() -> None:
    edits = [b for b in BENCHES if "sys.path" in (REPO / "bench" / f"{b}.py").read_text()]
    assert edits == []


@pytest.mark.parametrize("bench", BENCHES)
def test_each_bench_imports_as_make_bench_runs_it(bench: str) -> None:
    # Only the packages' own directories, as the venv's editable install gives them: not the
    # repository root, which `python -m` from the root adds by itself.
    root = str(REPO)
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    run = subprocess.run(
        [sys.executable, "-m", f"bench.{bench}", "--help"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "usage:" in run.stdout
