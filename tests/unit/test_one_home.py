"""Rules with one home (issue 38): each is defined once and the others derive from it.

These read the product's source, as a lint would: a second spelling of a rule is how two
copies drift (the CRD's topic pattern and the broker's check once disagreed on a trailing
newline)."""

from __future__ import annotations

import re
from pathlib import Path

from jbod_operator.models.broker_cluster import rack_for
from jbod_operator.models.log_dir_move import ENDED_PHASES as MOVE_ENDED
from jbod_operator.models.log_dir_move import MovePhase
from jbod_operator.models.reassignment import ENDED_PHASES as REASSIGNMENT_ENDED
from jbod_operator.models.reassignment import ReassignmentPhase
from jbod_operator.plan import rebalance

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = [ROOT / "broker_image" / "jbod_broker", ROOT / "operator" / "jbod_operator"]


def _sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for d in PRODUCT for p in sorted(d.rglob("*.py"))]


def _spelled(pattern: str) -> list[str]:
    rx = re.compile(pattern)
    return [
        f"{p.relative_to(ROOT)}:{n}"
        for p, text in _sources()
        for n, line in enumerate(text.splitlines(), 1)
        if rx.search(line) and not line.lstrip().startswith("#")
    ]


def test_the_api_version_is_spelled_once() -> None:
    assert _spelled(r'"jbod\.io/v1alpha1"') == []
    assert [s.split(":")[0] for s in _spelled(r"^API_VERSION = ")] == [
        "operator/jbod_operator/models/common.py"
    ]


def test_the_topic_characters_are_spelled_once() -> None:
    assert len(_spelled(r"a-zA-Z0-9\._-|a-zA-Z0-9_-\]")) == 1, _spelled(r"a-zA-Z0-9\._-")


def test_the_rack_rule_is_written_once() -> None:
    # The pod's start script (a string in plan.builders) is the one other reader, in the pod.
    inline = [s.split(":")[0] for s in _spelled(r"% len\(racks\)") if "builders.py" not in s]
    assert set(inline) == {"operator/jbod_operator/models/broker_cluster.py"}, inline
    assert [rack_for(["a", "b"], i) for i in range(4)] == ["a", "b", "a", "b"]
    assert rack_for(None, 3) is None and rack_for([], 3) is None


def test_a_rebalance_reads_its_children_s_phases_from_their_enums() -> None:
    assert rebalance.SUCCEEDED == str(ReassignmentPhase.SUCCEEDED) == str(MovePhase.SUCCEEDED)
    assert {"Failed", "Cancelled", "RolledBack"} == rebalance.FAILED_CHILD_PHASES
    assert rebalance.FAILED_CHILD_PHASES | {"Succeeded"} == (REASSIGNMENT_ENDED | MOVE_ENDED)
