"""``jbod-ctl rebalance show|approve|refresh|stop``: review a Rebalance's proposal and command it.

``show`` prints what a person approves on: the phase and conditions from the Rebalance, the
proposal summary and every disk's utilisation before and after from the proposal ConfigMap's
``report.json`` (the whole plan; the status carries a bounded summary), and with ``--plot``
writes the ConfigMap's ``plot.png`` to a file and prints its path. ``approve``, ``refresh`` and
``stop`` set the ``jbod.io/rebalance`` annotation (Strimzi's ``strimzi.io/rebalance``), which the
operator acts on and removes.
"""

from __future__ import annotations

import argparse
import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...models.plan_report import PlanReport
from ...models.rebalance import COMMAND_ANNOTATION, RebalanceCommand
from ...plan import proposal_configmap
from .common import CliError, print_json
from .kubectl import Kubectl, KubectlError, add_kube_options, kubectl_from_args

RESOURCE = "rebalances.jbod.io"
REPORT_KEY = "report.json"
PLOT_KEY = proposal_configmap.PLOT


def proposal_config_map_name(name: str, status: Mapping[str, Any]) -> str:
    """The ConfigMap the status names, else the contract's ``<name>-proposal``."""
    return str(status.get("proposalConfigMap") or f"{name}-proposal")


def _where(kubectl: Kubectl) -> str:
    return f" in namespace {kubectl.namespace}" if kubectl.namespace else ""


def get_rebalance(kubectl: Kubectl, name: str) -> dict[str, Any]:
    try:
        return kubectl.get_json(RESOURCE, name)
    except KubectlError as e:
        if not e.not_found:
            raise
        raise CliError(f"Rebalance {name} not found{_where(kubectl)}") from None


def get_proposal(kubectl: Kubectl, cm_name: str) -> dict[str, Any] | None:
    """The proposal ConfigMap, or None while there is none (still planning, or never)."""
    try:
        return kubectl.get_json("configmap", cm_name)
    except KubectlError as e:
        if e.not_found:
            return None
        raise


def report_of(cm: Mapping[str, Any], cm_name: str) -> PlanReport | None:
    try:
        text = proposal_configmap.read_text(cm, REPORT_KEY)
        if text is None:
            return None
        return PlanReport.model_validate_json(text)
    except ValueError as e:  # pydantic's ValidationError is a ValueError too
        raise CliError(f"ConfigMap {cm_name}: {REPORT_KEY} is not a plan report: {e}") from None


def plot_of(cm: Mapping[str, Any] | None, cm_name: str) -> bytes:
    """The PNG bytes of the ConfigMap's ``plot.png`` (binaryData, base64 on the wire)."""
    if cm is None:
        raise CliError(f"no proposal yet: ConfigMap {cm_name} does not exist")
    data = (cm.get("binaryData") or {}).get(PLOT_KEY)
    if data is None:
        raise CliError(f"ConfigMap {cm_name} has no {PLOT_KEY}")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as e:
        raise CliError(f"ConfigMap {cm_name}: {PLOT_KEY} is not base64: {e}") from None


def write_plot(png: bytes, path: str) -> str:
    try:
        Path(path).write_bytes(png)
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def show_document(
    rb: Mapping[str, Any], cm_name: str, report: PlanReport | None, plot: str | None
) -> dict[str, Any]:
    """``show -o json``: the Rebalance's state, the status summary and the whole report."""
    meta = rb.get("metadata") or {}
    spec = rb.get("spec") or {}
    status = rb.get("status") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "cluster": spec.get("clusterName"),
        "mode": spec.get("mode"),
        "phase": status.get("phase"),
        "conditions": list(status.get("conditions") or []),
        "proposal": status.get("proposal"),
        "proposalConfigMap": cm_name,
        "report": None if report is None else report.model_dump(by_alias=True, mode="json"),
        "plot": plot,
    }


def format_show(doc: Mapping[str, Any], report: PlanReport | None) -> str:
    """``show``'s text: state, conditions, then the proposal with every disk, then the plot."""
    lines = [
        f"Rebalance {doc['name']} (cluster {doc['cluster']}, mode {doc['mode']}): "
        f"{doc['phase'] or 'no phase yet'}"
    ]
    for c in doc["conditions"]:
        reason = f" {c['reason']}" if c.get("reason") else ""
        message = f": {c['message']}" if c.get("message") else ""
        since = f" (since {c['lastTransitionTime']})" if c.get("lastTransitionTime") else ""
        lines.append(f"  {c.get('type')}={c.get('status')}{reason}{message}{since}")
    lines.append("")
    if report is not None:
        lines.append(f"proposal (ConfigMap {doc['proposalConfigMap']}):")
        lines.append(report.text(max_disks=None))
    elif doc["proposal"]:
        lines.append(f"proposal (status; ConfigMap {doc['proposalConfigMap']} not found):")
        lines += [f"  {k}: {v}" for k, v in doc["proposal"].items() if not isinstance(v, list)]
    else:
        lines.append(f"no proposal yet (ConfigMap {doc['proposalConfigMap']} not found)")
    if doc["plot"]:
        lines += ["", f"plot: {doc['plot']}"]
    return "\n".join(lines)


def cmd_show(ns: argparse.Namespace) -> int:
    kubectl = kubectl_from_args(ns)
    rb = get_rebalance(kubectl, ns.name)
    cm_name = proposal_config_map_name(ns.name, rb.get("status") or {})
    cm = get_proposal(kubectl, cm_name)
    report = None if cm is None else report_of(cm, cm_name)
    plot = write_plot(plot_of(cm, cm_name), ns.plot) if ns.plot else None
    doc = show_document(rb, cm_name, report, plot)
    if ns.output == "json":
        print_json(doc)
    else:
        print(format_show(doc, report))
    return 0


def annotate(kubectl: Kubectl, name: str, command: RebalanceCommand) -> dict[str, Any]:
    """Set ``jbod.io/rebalance=<command>`` (overwriting one the operator has not acted on)."""
    try:
        kubectl.run(
            "annotate", RESOURCE, name, f"{COMMAND_ANNOTATION}={command.value}", "--overwrite"
        )
    except KubectlError as e:
        if not e.not_found:
            raise
        raise CliError(f"Rebalance {name} not found{_where(kubectl)}") from None
    return {
        "name": name,
        "namespace": kubectl.namespace,
        "annotation": COMMAND_ANNOTATION,
        "command": command.value,
    }


def cmd_command(ns: argparse.Namespace) -> int:
    print_json(annotate(kubectl_from_args(ns), ns.name, RebalanceCommand(ns.action)))
    return 0


COMMAND_HELP: Mapping[RebalanceCommand, str] = {
    RebalanceCommand.APPROVE: "run the proposal (re-planned first if the cluster changed)",
    RebalanceCommand.REFRESH: "plan again from a fresh snapshot",
    RebalanceCommand.STOP: "stop planning, or cancel the running children",
}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``rebalance show|approve|refresh|stop`` and their options."""
    rb = sub.add_parser("rebalance", help="review a Rebalance's proposal, approve, refresh, stop")
    rb_sub = rb.add_subparsers(dest="action", required=True, metavar="ACTION")
    sh = rb_sub.add_parser(
        "show",
        help="phase, conditions and the proposal with every disk before and after",
        description="Print the Rebalance's phase and conditions, and the proposal from its "
        "ConfigMap: feasibility, moves between brokers and between disks, bytes to move, "
        "spreads, and each broker and disk before and after. --plot writes the proposal's "
        "plot.png to a file and prints its path.",
    )
    sh.add_argument("name", metavar="NAME")
    sh.add_argument("-o", "--output", choices=["text", "json"], default="text")
    sh.add_argument("--plot", metavar="FILE", help="write the before/after plot (PNG) here")
    add_kube_options(sh)
    for command, text in COMMAND_HELP.items():
        c = rb_sub.add_parser(
            command.value,
            help=text,
            description=f"Annotate the Rebalance {COMMAND_ANNOTATION}={command.value}: {text}. "
            "The operator acts on it and removes the annotation.",
        )
        c.add_argument("name", metavar="NAME")
        add_kube_options(c)
