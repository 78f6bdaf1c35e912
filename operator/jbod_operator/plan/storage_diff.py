"""Classify a change of ``spec.logDirs`` before anything acts on it (Strimzi's ``StorageDiff``).

``current`` is what the StatefulSet has (:func:`log_dirs_from_statefulset` reads it back from
its ``volumeClaimTemplates``), ``desired`` is the BrokerCluster spec. Each log dir is added,
removed, resized, given another storage class, or unchanged:

- **added**: allowed. ``volumeClaimTemplates`` are immutable, so the StatefulSet is deleted
  with ``propagationPolicy: Orphan`` (pods and PVCs stay) and created again with the new
  template; the rolling update then gives each pod its new claim.
- **removed**: allowed only once no broker keeps a replica in it (:func:`removal_blockers`):
  a LogDirMove with ``spec.drain`` empties it first (Strimzi #9640 deletes the claim of a disk
  that still holds data). The StatefulSet is recreated the same way; the orphaned PVCs of the
  removed dir are left for the operator to delete once it has checked them.
- **resized**: refused. Expanding PVCs (``allowVolumeExpansion``, per-claim patches, waiting
  for the file system resize) is out of scope; a shrink can never work.
- **storage class changed**: refused: a claim's class cannot change, the data would have to
  move to a new claim (add a dir, drain the old one, remove it).

Sizes are compared as quantities (``10Gi`` equals ``10240Mi``: the API server may return
either spelling), storage classes as strings (``None`` means the cluster default).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from jbod_broker import wire

from ..models import LogDir
from .builders import mount_path

__all__ = [
    "CONDITION",
    "REASON_BLOCKED",
    "REASON_CLEAR",
    "LogDirChange",
    "StorageDiff",
    "diff_log_dirs",
    "log_dirs_from_statefulset",
    "parse_quantity",
    "removal_blockers",
]

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"^\+?(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)|[eE](?P<exp>[+-]?[0-9]+))?$"
)
_SHOWN_REPLICAS = 5

CONDITION = "LogDirRemovalBlocked"
"""The BrokerCluster condition while a log dir removed from the spec still holds replicas (its
claim template stays until it is empty), like ``plan.scale_down.CONDITION`` for brokers."""
REASON_BLOCKED = "LogDirsHoldReplicas"
REASON_CLEAR = "NoLogDirToEmpty"


def parse_quantity(quantity: str) -> Fraction:
    """A Kubernetes quantity (``10Gi``, ``500M``, ``1.5Ti``, ``1e9``) as an exact number."""
    m = _QUANTITY.match(quantity.strip())
    if m is None:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity")
    value = Fraction(m["num"])
    if m["exp"] is not None:
        return value * Fraction(10) ** int(m["exp"])
    return value * _SUFFIXES[m["suffix"] or ""]


@dataclass(frozen=True, slots=True)
class LogDirChange:
    """A log dir present on both sides whose claim would have to change."""

    name: str
    current: LogDir
    desired: LogDir

    def describe(self) -> str:
        c, d = self.current, self.desired
        if parse_quantity(c.size) != parse_quantity(d.size):
            verb = "grow" if parse_quantity(d.size) > parse_quantity(c.size) else "shrink"
            return (
                f"log dir {self.name!r}: cannot {verb} from {c.size} to {d.size} "
                "(resizing volumes is not supported; add a new log dir and drain this one)"
            )
        return (
            f"log dir {self.name!r}: cannot change storageClassName from "
            f"{c.storage_class_name or '(default)'} to {d.storage_class_name or '(default)'} "
            "(a claim keeps its class; add a new log dir and drain this one)"
        )


@dataclass(frozen=True, slots=True)
class StorageDiff:
    """The classification of every log dir; act only when :meth:`refused_messages` is empty and
    :func:`removal_blockers` finds nothing for :attr:`removed`."""

    added: tuple[LogDir, ...]
    removed: tuple[LogDir, ...]
    resized: tuple[LogDirChange, ...]
    storage_class_changed: tuple[LogDirChange, ...]
    unchanged: tuple[LogDir, ...]
    current_names: tuple[str, ...]
    desired_names: tuple[str, ...]

    def refused_messages(self) -> list[str]:
        """Changes that can never be applied, one message each (resizes, then class changes)."""
        return [c.describe() for c in self.resized] + [
            c.describe() for c in self.storage_class_changed
        ]

    @property
    def allowed(self) -> bool:
        return not self.resized and not self.storage_class_changed

    @property
    def reordered(self) -> bool:
        """The dirs present on both sides appear in another order (the templates differ too)."""
        desired = set(self.desired_names)
        current = set(self.current_names)
        return [n for n in self.current_names if n in desired] != [
            n for n in self.desired_names if n in current
        ]

    @property
    def changed(self) -> bool:
        return self.current_names != self.desired_names or not self.allowed

    @property
    def recreate_statefulset(self) -> bool:
        """The ``volumeClaimTemplates`` list must change (a dir added or removed, or the order
        changed), which the API server forbids on an existing StatefulSet: delete it with
        ``propagationPolicy: Orphan`` (pods and PVCs stay) and create it again.

        False when there is no StatefulSet yet (``current`` empty: just create it) and when the
        diff is refused (nothing may be applied).
        """
        return (
            bool(self.current_names) and self.allowed and self.current_names != self.desired_names
        )


def _same_size(a: LogDir, b: LogDir) -> bool:
    return parse_quantity(a.size) == parse_quantity(b.size)


def diff_log_dirs(current: Sequence[LogDir], desired: Sequence[LogDir]) -> StorageDiff:
    """Classify each log dir by name; lists keep the order of ``desired`` (``removed``: of
    ``current``). A dir both resized and moved to another class counts in both lists."""
    cur = {ld.name: ld for ld in current}
    des = {ld.name: ld for ld in desired}
    if len(cur) != len(current) or len(des) != len(desired):
        raise ValueError("a log dir name is listed twice")
    added: list[LogDir] = []
    unchanged: list[LogDir] = []
    resized: list[LogDirChange] = []
    reclassed: list[LogDirChange] = []
    for d in desired:
        c = cur.get(d.name)
        if c is None:
            added.append(d)
            continue
        size_ok = _same_size(c, d)
        class_ok = c.storage_class_name == d.storage_class_name
        if not size_ok:
            resized.append(LogDirChange(d.name, c, d))
        if not class_ok:
            reclassed.append(LogDirChange(d.name, c, d))
        if size_ok and class_ok:
            unchanged.append(d)
    return StorageDiff(
        added=tuple(added),
        removed=tuple(c for c in current if c.name not in des),
        resized=tuple(resized),
        storage_class_changed=tuple(reclassed),
        unchanged=tuple(unchanged),
        current_names=tuple(c.name for c in current),
        desired_names=tuple(d.name for d in desired),
    )


def log_dirs_from_statefulset(statefulset: Mapping[str, Any]) -> list[LogDir]:
    """The log dirs a StatefulSet (as the API server returns it) was built with, read back from
    its ``data-<name>`` volumeClaimTemplates, in order; other templates are ignored."""
    templates: Iterable[Mapping[str, Any]] = (
        statefulset.get("spec", {}).get("volumeClaimTemplates") or []
    )
    out: list[LogDir] = []
    for t in templates:
        name = str(t.get("metadata", {}).get("name", ""))
        if not name.startswith(wire.LOG_DIR_FOLDER_PREFIX) or name == wire.LOG_DIR_FOLDER_PREFIX:
            continue
        spec = t.get("spec", {})
        size = spec.get("resources", {}).get("requests", {}).get("storage")
        if size is None:
            raise ValueError(f"volumeClaimTemplate {name!r} has no storage request")
        out.append(
            LogDir(
                name=wire.log_dir_short_name(name),
                size=str(size),
                storage_class_name=spec.get("storageClassName"),
            )
        )
    return out


def removal_blockers(
    removed: Iterable[LogDir | str], nonempty: Mapping[str, Sequence[str]]
) -> list[str]:
    """One message per removed log dir that still holds replicas, naming it and them.

    ``nonempty`` maps a log dir (its name, or its mount path ``/var/lib/jbod/data-<name>`` as
    brokers report it) to what is still in it on any broker, e.g. ``"broker 2: orders-3"``; an
    empty list means drained. A caller that cannot tell (a broker is down) should list the dir
    with a reason, since removing the claim of a dir that still holds data loses it.
    """
    messages: list[str] = []
    for ld in removed:
        name = ld if isinstance(ld, str) else ld.name
        held = list(nonempty.get(name, ())) + list(nonempty.get(mount_path(name), ()))
        if not held:
            continue
        shown = ", ".join(held[:_SHOWN_REPLICAS])
        more = len(held) - _SHOWN_REPLICAS
        if more > 0:
            shown += f" and {more} more"
        messages.append(
            f"log dir {name!r} still holds {len(held)} replica(s) ({shown}); keeping its claim "
            f"template. Empty it first on every broker with a Rebalance (mode: remove-disks, "
            f"logDirs: {name!r} of each broker) or a LogDirMove (spec.drain) per broker"
        )
    return messages
