"""The ``jbod-ctl`` command line: argparse wiring and the exit codes.

Each command module adds its own sub-commands and options; this module only assembles them and
maps outcomes to exit codes, the same for every command: 0 done, 1 a :class:`~.common.CliError`
(said on stderr as ``jbod-ctl: error: ...``, no traceback), 2 a usage error (argparse), 130
Ctrl-C. A command whose answer is an outcome says it with its own codes: ``verify`` 1 when not
done, ``reassignments apply --wait|wait`` 3 Cancelled, 4 RolledBack, 5 timed out
(:data:`.reassignments.EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from . import cluster, log_dirs, logdirmove, reassignment, reassignments, rebalance
from .common import CliError

PROG = "jbod-ctl"

COMMANDS: dict[tuple[str, str], Callable[[argparse.Namespace], int]] = {
    ("log-dirs", "describe"): log_dirs.cmd_describe,
    ("reassignment", "to-manifests"): reassignment.cmd_to_manifests,
    ("logdirmove", "wait"): logdirmove.cmd_wait,
    ("logdirmove", "apply"): logdirmove.cmd_apply,
    ("reassignments", "list"): reassignments.cmd_list,
    ("reassignments", "describe"): reassignments.cmd_describe,
    ("reassignments", "verify"): reassignments.cmd_verify,
    ("reassignments", "apply"): reassignments.cmd_apply,
    ("reassignments", "wait"): reassignments.cmd_wait,
    ("rebalance", "show"): rebalance.cmd_show,
    ("rebalance", "approve"): rebalance.cmd_command,
    ("rebalance", "refresh"): rebalance.cmd_command,
    ("rebalance", "stop"): rebalance.cmd_command,
    ("cluster", "bootstrap-servers"): cluster.cmd_bootstrap_servers,
}
"""(command, action) → the function that runs it and returns the exit code."""


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; ``--help`` lists the commands in this order."""
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Daily operations on JBOD broker clusters: log dirs, reassignments, moves, "
        "rebalances, Kafka bootstrap servers.",
    )
    sub = ap.add_subparsers(dest="group", required=True, metavar="COMMAND")
    log_dirs.add_parser(sub)
    reassignment.add_parser(sub)
    logdirmove.add_parser(sub)
    reassignments.add_parser(sub)
    rebalance.add_parser(sub)
    cluster.add_parser(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (argparse exits 2 itself on a usage error)."""
    ns = build_parser().parse_args(argv)
    try:
        return COMMANDS[(ns.group, ns.action)](ns)
    except CliError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr)
        return 130
