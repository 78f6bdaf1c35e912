"""Status conditions as the Kubernetes API conventions want them. Pure.

``lastTransitionTime`` changes only when ``status`` changes, so re-running a reconcile that
finds nothing new writes an identical status (and the API server records no change). The
caller gives the time (``now``, epoch seconds): this package reads no clock, so a decision is
a function of what was observed and can be tested at any instant.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


def iso(ts: float) -> str:
    """An RFC 3339 timestamp to the second, as Kubernetes writes them."""
    return dt.datetime.fromtimestamp(int(ts), dt.UTC).isoformat().replace("+00:00", "Z")


def parse_iso(ts: str | None, default: float) -> float:
    """The epoch seconds of an RFC 3339 timestamp written by :func:`iso` (``default`` if unset)."""
    if not ts:
        return default
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    generation: int | None,
    *,
    now: float,
) -> list[dict[str, Any]]:
    """A new list with ``type_`` set; others kept in place (order is stable). ``now`` is the
    ``lastTransitionTime`` when the status changes (or the condition is new)."""
    value = "Unknown" if status is None else ("True" if status else "False")
    out = []
    found = False
    for c in conditions:
        if c.get("type") != type_:
            out.append(c)
            continue
        found = True
        changed = c.get("status") != value
        out.append(
            {
                "type": type_,
                "status": value,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": iso(now) if changed else c.get("lastTransitionTime"),
            }
        )
    if not found:
        out.append(
            {
                "type": type_,
                "status": value,
                "reason": reason,
                "message": message,
                "observedGeneration": generation,
                "lastTransitionTime": iso(now),
            }
        )
    return out
