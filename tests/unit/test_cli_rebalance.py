"""jbod-ctl rebalance show|approve|refresh|stop against a fake kubectl: what is read (the
Rebalance, its proposal ConfigMap), what is printed (phase, conditions, the proposal with every
disk), the plot written from binaryData, and the annotation each command sets."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from jbod_operator.tools import cli
from jbod_operator.tools.cli import rebalance
from jbod_operator.tools.cli.kubectl import Kubectl, KubectlError
from jbod_spark import plan_directory_balance
from tests.unit.test_planner import demo_snapshot

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


class FakeKubectl(Kubectl):
    """Objects by (resource, name); anything else is kubectl's NotFound. Records every call."""

    def __init__(self, objects: Mapping[tuple[str, str], dict[str, Any]]) -> None:
        super().__init__("kubectl", None, "ns")
        self.objects = dict(objects)
        self.calls: list[tuple[str, ...]] = []

    def get_json(self, *args: str) -> dict[str, Any]:
        self.calls.append(("get", *args))
        got = self.objects.get((args[0], args[1]))
        if got is None:
            raise KubectlError(["get", *args], f'Error from server (NotFound): "{args[1]}"')
        return got

    def run(self, *args: str, input: str | None = None) -> str:
        self.calls.append(args)
        if args[0] == "annotate" and (args[1], args[2]) not in self.objects:
            raise KubectlError(args, f'Error from server (NotFound): "{args[2]}" not found')
        return ""


def rebalance_obj(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "jbod.io/v1alpha1",
        "kind": "Rebalance",
        "metadata": {"name": "even", "namespace": "ns"},
        "spec": {"clusterName": "demo", "mode": "dirs-only"},
        "status": status or {},
    }


READY = {
    "phase": "ProposalReady",
    "proposalConfigMap": "even-proposal",
    "conditions": [
        {
            "type": "ProposalReady",
            "status": "True",
            "reason": "Planned",
            "message": "12 moves between disks, 58.7 GiB",
            "lastTransitionTime": "2026-11-24T19:00:00Z",
        }
    ],
    "proposal": {"planId": "x", "feasible": True},
}


def proposal_cm(plot: bytes | None = PNG) -> dict[str, Any]:
    report = plan_directory_balance(demo_snapshot()).report
    cm: dict[str, Any] = {
        "metadata": {"name": "even-proposal"},
        "data": {"report.json": report.model_dump_json(by_alias=True)},
    }
    if plot is not None:
        cm["binaryData"] = {"plot.png": base64.b64encode(plot).decode()}
    return cm


def run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kube: FakeKubectl,
    argv: Sequence[str],
) -> tuple[int, str, str]:
    monkeypatch.setattr(rebalance, "kubectl_from_args", lambda ns: kube)
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_prints_phase_conditions_and_every_disk_before_and_after(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = FakeKubectl(
        {
            (rebalance.RESOURCE, "even"): rebalance_obj(READY),
            ("configmap", "even-proposal"): proposal_cm(),
        }
    )
    code, out, _ = run(monkeypatch, capsys, kube, ["rebalance", "show", "even", "-n", "ns"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "Rebalance even (cluster demo, mode dirs-only): ProposalReady"
    assert lines[1] == (
        "  ProposalReady=True Planned: 12 moves between disks, 58.7 GiB "
        "(since 2026-11-24T19:00:00Z)"
    )
    assert "proposal (ConfigMap even-proposal):" in lines
    assert any(ln.strip().startswith("feasible: every disk at or under 80%") for ln in lines)
    # every disk of the report, with its before and after
    report = plan_directory_balance(demo_snapshot()).report
    for d in report.dirs:
        row = [ln for ln in lines if ln.split()[:2] == [str(d.broker_id), d.name] and "->" in ln]
        assert len(row) == 1, (d, row)
        assert f"{100 * d.util_before:.1f}%" in row[0] and f"{100 * d.util_after:.1f}%" in row[0]
    assert "plot:" not in out
    assert kube.calls == [
        ("get", rebalance.RESOURCE, "even"),
        ("get", "configmap", "even-proposal"),
    ]


def test_show_plot_writes_the_binary_data_and_prints_the_path(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kube = FakeKubectl(
        {
            (rebalance.RESOURCE, "even"): rebalance_obj(READY),
            ("configmap", "even-proposal"): proposal_cm(),
        }
    )
    target = tmp_path / "out.png"
    code, out, _ = run(
        monkeypatch, capsys, kube, ["rebalance", "show", "even", "--plot", str(target)]
    )
    assert code == 0
    assert target.read_bytes() == PNG
    assert out.splitlines()[-1] == f"plot: {target}"


def test_show_json_has_the_state_the_summary_and_the_whole_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kube = FakeKubectl(
        {
            (rebalance.RESOURCE, "even"): rebalance_obj(READY),
            ("configmap", "even-proposal"): proposal_cm(),
        }
    )
    target = tmp_path / "p.png"
    code, out, _ = run(
        monkeypatch,
        capsys,
        kube,
        ["rebalance", "show", "even", "-o", "json", "--plot", str(target)],
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["phase"] == "ProposalReady" and doc["proposal"] == READY["proposal"]
    assert doc["conditions"] == READY["conditions"]
    assert doc["plot"] == str(target)
    assert len(doc["report"]["dirs"]) == 9
    assert doc["report"]["summary"]["feasible"] is True


def test_show_while_planning_has_no_proposal_yet(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kube = FakeKubectl({(rebalance.RESOURCE, "even"): rebalance_obj({"phase": "PendingProposal"})})
    code, out, _ = run(monkeypatch, capsys, kube, ["rebalance", "show", "even"])
    assert code == 0
    assert "Rebalance even (cluster demo, mode dirs-only): PendingProposal" in out
    assert "no proposal yet (ConfigMap even-proposal not found)" in out
    # the contract's name when the status names none
    assert kube.calls[-1] == ("get", "configmap", "even-proposal")


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        ({}, "Rebalance even not found in namespace ns"),
        (
            {(rebalance.RESOURCE, "even"): rebalance_obj({"phase": "PendingProposal"})},
            "no proposal yet: ConfigMap even-proposal does not exist",
        ),
    ],
)
def test_show_plot_errors_say_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    objects: dict[tuple[str, str], dict[str, Any]],
    message: str,
) -> None:
    code, out, err = run(
        monkeypatch,
        capsys,
        FakeKubectl(objects),
        ["rebalance", "show", "even", "--plot", str(tmp_path / "x.png")],
    )
    assert code == 1 and out == ""
    assert err.strip() == f"jbod-ctl: error: {message}"
    assert not (tmp_path / "x.png").exists()


def test_show_plot_of_a_proposal_without_a_plot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kube = FakeKubectl(
        {
            (rebalance.RESOURCE, "even"): rebalance_obj(READY),
            ("configmap", "even-proposal"): proposal_cm(plot=None),
        }
    )
    code, _, err = run(
        monkeypatch, capsys, kube, ["rebalance", "show", "even", "--plot", str(tmp_path / "x")]
    )
    assert code == 1 and "ConfigMap even-proposal has no plot.png" in err


@pytest.mark.parametrize("command", ["approve", "refresh", "stop"])
def test_commands_set_the_annotation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    kube = FakeKubectl({(rebalance.RESOURCE, "even"): rebalance_obj(READY)})
    code, out, _ = run(monkeypatch, capsys, kube, ["rebalance", command, "even", "-n", "ns"])
    assert code == 0
    assert kube.calls == [
        ("annotate", rebalance.RESOURCE, "even", f"jbod.io/rebalance={command}", "--overwrite")
    ]
    assert json.loads(out) == {
        "name": "even",
        "namespace": "ns",
        "annotation": "jbod.io/rebalance",
        "command": command,
    }


def test_command_on_a_missing_rebalance(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(monkeypatch, capsys, FakeKubectl({}), ["rebalance", "approve", "nope"])
    assert code == 1 and "Rebalance nope not found in namespace ns" in err


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["rebalance", "approve-all", "even"])
    assert e.value.code == 2
