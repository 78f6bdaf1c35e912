"""The operator as a real process against the test API server, with local broker processes.

``OperatorProcess``, ``start_local_brokers``, ``wait_for`` and ``Kube`` (kubectl with JSON in
and out, and ``finish_orphan_deletions``: playing the garbage collector this API server does
not run) are the product's (:mod:`jbod_operator.tools.localkube`, which ``make demo`` uses too).
"""

from __future__ import annotations

from jbod_operator.tools.localkube import Kube, OperatorProcess, start_local_brokers, wait_for

__all__ = ["Kube", "OperatorProcess", "start_local_brokers", "wait_for"]
