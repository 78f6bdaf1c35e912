"""``jbod-ctl``: the command-line tool for the daily path of JBOD brokers (KIP-113).

The commands print JSON, text (or YAML manifests) on stdout and what went wrong on stderr
(exit 1; 2 for a usage error):

``jbod-ctl log-dirs describe`` (:mod:`.log_dirs`)
    Kafka's ``kafka-log-dirs --describe`` output as KIP-113 describes it: per broker, per log
    dir, ``is_live``, ``path`` and the replicas in it (``is_temporary`` marks the future replica
    of a move). Brokers are found from a BrokerCluster's status (``--cluster``, through kubectl)
    or named directly (``--bootstrap-url``).

``jbod-ctl reassignment to-manifests`` (:mod:`.reassignment`)
    A ``kafka-reassign-partitions`` JSON file (with ``log_dirs``) turned into custom resources:
    partitions that keep their replica list but name directories become one LogDirMove;
    partitions whose replica list changes become one PartitionReassignment (with their
    ``logDirs``). Every partition lands in exactly one resource, so no replica is the subject
    of two moves at once (KAFKA-9087).

``jbod-ctl logdirmove wait|apply`` (:mod:`.logdirmove`)
    Follows a LogDirMove's status until it is final, with a progress bar (:mod:`.progress`) on
    a terminal.

``jbod-ctl reassignments list|describe|verify|apply|wait`` (:mod:`.reassignments`)
    PartitionReassignments as Kafka's tools show reassignments: ``list`` is
    ``kafka-reassign-partitions --list`` (KIP-455's replicas, adding, removing) plus each
    running one's current batch (KIP-435); ``describe`` is KIP-240's description with each new
    replica's log end offset and lag; ``verify`` is ``--verify`` with named log dirs; ``apply
    --wait`` follows with a progress bar (the loop in :mod:`.follow`, shared with
    ``logdirmove``). The formatting is pure, in :mod:`.reassignments_view`.

The pure parts (conversions, validation, formatting) are functions on plain data, so the unit
tests call them directly; the I/O (kubectl, broker HTTP) sits at the edges, behind
:class:`.kubectl.Kubectl` and :func:`.log_dirs.describe_urls`. :mod:`.app` wires the commands
to argparse and turns errors into exit codes. Only :func:`main` is the package's interface
(the ``jbod-ctl`` console script and ``python -m jbod_operator.tools.cli``).
"""

from __future__ import annotations

from .app import main

__all__ = ["main"]
