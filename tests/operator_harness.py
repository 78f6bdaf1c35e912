"""The operator as a real process against the test API server, with local broker processes.

``OperatorProcess``, ``start_local_brokers`` and ``wait_for`` are the product's
(:mod:`jbod_operator.tools.localkube`, which ``make demo`` uses too). ``Kube`` adds what only
tests need: playing the garbage collector this API server does not run.
"""

from __future__ import annotations

import json

from jbod_operator.tools import localkube
from jbod_operator.tools.localkube import OperatorProcess, start_local_brokers, wait_for

__all__ = ["Kube", "OperatorProcess", "start_local_brokers", "wait_for"]


class Kube(localkube.Kube):
    """kubectl with JSON in and out, for tests."""

    def finish_orphan_deletions(self, kind: str = "statefulset") -> None:
        """Play the garbage collector (this API server runs none): an object deleted with
        orphan propagation keeps its ``orphan`` finalizer until GC releases its dependents.
        There are no pods or PVC owners here, so releasing means dropping the finalizer."""
        out = json.loads(self.run("get", kind, "-n", self.namespace, "-o", "json"))
        for item in out.get("items", []):
            meta = item["metadata"]
            if meta.get("deletionTimestamp") and "orphan" in (meta.get("finalizers") or []):
                self.run(
                    "patch",
                    kind,
                    meta["name"],
                    "-n",
                    self.namespace,
                    "--type=json",
                    "-p",
                    '[{"op": "remove", "path": "/metadata/finalizers"}]',
                    check=False,
                )
