"""Following a resource's status until it ends: the one poll loop behind ``logdirmove
wait|apply`` and ``reassignments wait|apply --wait``.

What differs per kind (which phases end it, the bar, the summary, the exit codes) is a
:class:`Watched`; the loop, the tolerance of a busy API server and the timeout are here once.
A phase counts as the end only once the operator has seen the spec as applied
(``status.observedGeneration`` >= ``metadata.generation``): a resource applied again with, say,
``rollback: true`` still shows its old ``Succeeded`` until the operator's next pass, and that
stale phase is not the outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from .common import CliError
from .kubectl import Kubectl, KubectlError
from .progress import Formatter, ProgressView

POLL_SECONDS = 0.5

Summary = Callable[[str, str | None, Mapping[str, Any], float], dict[str, Any]]


@dataclass(frozen=True)
class Watched:
    """One kind of resource as :func:`follow` watches it."""

    kind: str
    """``LogDirMove``: in messages."""
    resource: str
    """``logdirmoves.jbod.io``: what kubectl gets."""
    final_phases: frozenset[str]
    exit_codes: Mapping[str, int]
    """Exit code per final phase (a final phase missing here: 1)."""
    timeout_exit: int
    first_phase: str
    """The phase shown before the operator wrote any status."""
    formatter: Formatter
    summary: Summary


def final_message(status: Mapping[str, Any]) -> str:
    """Why it ended: the message of the condition named after the phase, else the last
    Progressing message (empty when the operator wrote neither)."""
    phase = status.get("phase")
    for c in status.get("conditions") or []:
        if c.get("type") == phase and c.get("message"):
            return str(c["message"])
    for c in status.get("conditions") or []:
        if c.get("type") == "Progressing" and c.get("message"):
            return str(c["message"])
    return ""


def observed(obj: Mapping[str, Any]) -> bool:
    """The status was written for the spec as it is now (no generation: nothing to compare)."""
    gen = (obj.get("metadata") or {}).get("generation")
    seen = (obj.get("status") or {}).get("observedGeneration")
    return gen is None or seen is None or int(seen) >= int(gen)


def follow(
    kubectl: Kubectl,
    name: str,
    watched: Watched,
    *,
    timeout_s: float,
    out: TextIO,
    poll_s: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    tty: bool | None = None,
) -> tuple[int, dict[str, Any]]:
    """Poll the resource until its phase is final or ``timeout_s`` passed: (exit code,
    summary). The bar goes to ``out``; an API error is retried (the server may be busy), a
    NotFound is a :class:`CliError`.

    ``clock`` and ``sleep`` are parameters so the loop is tested without waiting."""
    start = clock()
    view = ProgressView(out, name, tty, watched.formatter)
    status: dict[str, Any] = {}
    last_error = ""
    done = False
    try:
        while True:
            try:
                obj = kubectl.get_json(watched.resource, name)
                status = dict(obj.get("status") or {})
                done = status.get("phase") in watched.final_phases and observed(obj)
                last_error = ""
            except KubectlError as e:
                if e.not_found:
                    raise CliError(
                        f"{watched.kind} {name} not found"
                        + (f" in namespace {kubectl.namespace}" if kubectl.namespace else "")
                    ) from None
                last_error = str(e)
            now = clock()
            view.update(status, now)
            phase = status.get("phase")
            if done:
                view.close()
                summary = watched.summary(name, kubectl.namespace, status, now - start)
                msg = summary.get("message") or ""
                print(f"{watched.kind} {name}: {phase}{': ' + msg if msg else ''}", file=out)
                return watched.exit_codes.get(str(phase), 1), summary
            if now - start >= timeout_s:
                view.close()
                summary = watched.summary(name, kubectl.namespace, status, now - start)
                summary["phase"] = summary.get("phase") or watched.first_phase
                detail = f"; last error: {last_error}" if last_error else ""
                print(
                    f"{watched.kind} {name}: timed out after {timeout_s:g} s in phase "
                    f"{summary['phase']} at {status.get('progressPercent') or 0}%{detail}",
                    file=out,
                )
                summary["timedOut"] = True
                return watched.timeout_exit, summary
            sleep(poll_s)
    finally:
        view.close()
