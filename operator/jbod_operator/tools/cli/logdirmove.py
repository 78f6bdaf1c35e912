"""``jbod-ctl logdirmove apply|wait``: apply LogDirMoves and follow their status until final.

The exit code is the outcome (0 Succeeded; 1 Failed, Cancelled or timed out), with a JSON
summary on stdout and the progress bar on stderr, so a script can both watch and decide.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from ...models.log_dir_move import ENDED_PHASES, MovePhase
from .common import CliError, positive_float, print_json, read_text
from .follow import POLL_SECONDS, Watched, final_message, follow
from .kubectl import Kubectl, add_kube_options, kubectl_from_args
from .progress import format_progress


def move_summary(
    name: str, namespace: str | None, status: Mapping[str, Any], elapsed: float
) -> dict[str, Any]:
    """The JSON a script reads after waiting: phase, message, bytes and replicas per state."""
    states: dict[str, int] = {}
    for r in status.get("replicas") or []:
        s = str(r.get("state"))
        states[s] = states.get(s, 0) + 1
    return {
        "name": name,
        "namespace": namespace,
        "phase": status.get("phase"),
        "message": final_message(status),
        "progressPercent": status.get("progressPercent"),
        "bytesCopied": status.get("bytesCopied"),
        "bytesTotal": status.get("bytesTotal"),
        "replicas": states,
        "elapsedSeconds": round(elapsed, 1),
    }


LOG_DIR_MOVE = Watched(
    kind="LogDirMove",
    resource="logdirmoves.jbod.io",
    final_phases=frozenset(ENDED_PHASES),
    exit_codes={MovePhase.SUCCEEDED: 0},
    timeout_exit=1,
    first_phase=MovePhase.PENDING,
    formatter=format_progress,
    summary=move_summary,
)
"""A LogDirMove followed: exit 0 Succeeded; 1 Failed, Cancelled or timed out."""


def wait_for_move(
    kubectl: Kubectl,
    name: str,
    *,
    timeout_s: float,
    out: TextIO,
    poll_s: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tty: bool | None = None,
) -> tuple[int, dict[str, Any]]:
    """Poll the LogDirMove until it is final or ``timeout_s`` passed: (exit code, summary)."""
    return follow(
        kubectl,
        name,
        LOG_DIR_MOVE,
        timeout_s=timeout_s,
        out=out,
        poll_s=poll_s,
        clock=clock,
        sleep=sleep,
        tty=tty,
    )


FIELD_MANAGER = "jbod-ctl"


def apply_text(kubectl: Kubectl, text: str, *, server_side: bool = False) -> list[dict[str, str]]:
    """kubectl apply of manifests (YAML or JSON); returns kind/name/namespace of every object
    applied.

    ``server_side``: the API server merges (as field manager ``jbod-ctl``, the file winning
    any conflict as a client-side apply's would). A client-side apply keeps a second copy of
    the object in its last-applied annotation, and annotations are limited to 256 KiB: a
    PartitionReassignment of a few hundred partitions with long names is over it."""
    args = ["apply", "-f", "-", "-o", "json"]
    if server_side:
        args += ["--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}"]
    out = kubectl.run(*args, input=text)
    try:
        data = json.loads(out)
    except ValueError:
        raise CliError(f"kubectl apply: unexpected output: {out[:200]!r}") from None
    items = data.get("items", []) if data.get("kind") == "List" else [data]
    return [
        {
            "kind": str(o.get("kind")),
            "name": str(o["metadata"]["name"]),
            "namespace": str(o["metadata"].get("namespace") or ""),
        }
        for o in items
    ]


def apply_file(kubectl: Kubectl, path: str) -> list[dict[str, str]]:
    """kubectl apply of the manifest file at ``path`` (``-``: stdin)."""
    return apply_text(kubectl, read_text(path, "manifest file"))


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``logdirmove wait`` and ``logdirmove apply`` and their options."""
    lm = sub.add_parser("logdirmove", help="apply LogDirMoves and follow their progress")
    lm_sub = lm.add_subparsers(dest="action", required=True, metavar="ACTION")
    w = lm_sub.add_parser("wait", help="wait until a LogDirMove is final, showing progress")
    w.add_argument("name", metavar="NAME")
    w.add_argument(
        "--timeout", metavar="S", type=positive_float, default=3600.0, help="seconds (3600)"
    )
    add_kube_options(w)
    a = lm_sub.add_parser("apply", help="kubectl apply a manifest file, optionally wait")
    a.add_argument("file", metavar="FILE", help="manifest file ('-' for stdin)")
    a.add_argument("--wait", action="store_true", help="wait for every LogDirMove in FILE")
    a.add_argument(
        "--timeout", metavar="S", type=positive_float, default=3600.0, help="seconds (3600)"
    )
    add_kube_options(a)


def cmd_wait(ns: argparse.Namespace) -> int:
    """``logdirmove wait``: progress on stderr, the summary on stdout."""
    code, summary = wait_for_move(
        kubectl_from_args(ns), ns.name, timeout_s=ns.timeout, out=sys.stderr
    )
    print_json(summary)
    return code


def cmd_apply(ns: argparse.Namespace) -> int:
    """``logdirmove apply [--wait]``: with --wait, one deadline for all the file's LogDirMoves
    (followed one after the other) and the worst exit code of them."""
    kubectl = kubectl_from_args(ns)
    applied = apply_file(kubectl, ns.file)
    for o in applied:
        print(f"applied {o['kind']} {o['name']}", file=sys.stderr)
    result: dict[str, Any] = {"applied": applied}
    code = 0
    if ns.wait:
        moves = [o for o in applied if o["kind"] == "LogDirMove"]
        if not moves:
            raise CliError(f"--wait: {ns.file} holds no LogDirMove")
        deadline = time.monotonic() + ns.timeout
        result["moves"] = []
        for o in moves:
            k = Kubectl(kubectl.binary, kubectl.kubeconfig, o["namespace"] or kubectl.namespace)
            left = max(0.001, deadline - time.monotonic())
            c, summary = wait_for_move(k, o["name"], timeout_s=left, out=sys.stderr)
            result["moves"].append(summary)
            code = max(code, c)
    print_json(result)
    return code
