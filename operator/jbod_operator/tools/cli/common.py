"""What every ``jbod-ctl`` command shares: the error users see, reading input files, printing
JSON, argparse value types and the cap on listed problems.

Kept apart from :mod:`.app` so that the command modules do not import the argparse wiring that
imports them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MAX_ERRORS_SHOWN = 20
"""Problems listed in one message; a bad file of 100,000 partitions must not flood stderr."""


class CliError(Exception):
    """What the user did wrong or what failed, said plainly; exit code 1."""


def problems(head: str, errors: Sequence[str]) -> CliError:
    """One error listing the first :data:`MAX_ERRORS_SHOWN` problems under ``head``, so the
    user fixes every problem of a file in one go instead of one per run."""
    shown = errors[:MAX_ERRORS_SHOWN]
    more = len(errors) - len(shown)
    return CliError(
        f"{head}:\n  " + "\n  ".join(shown) + (f"\n  ... and {more} more" if more else "")
    )


def read_text(path: str, what: str) -> str:
    """The file at ``path`` (``-``: stdin); an unreadable file is a :class:`CliError` naming
    ``what`` it was meant to be, not a traceback."""
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot read {what} {path}: {e.strerror or e}") from None


def print_json(obj: Any) -> None:
    """The command's result on stdout, indented for people and flushed for pipes."""
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
    sys.stdout.flush()


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a bad value is a usage error, exit 2)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} is negative")
    return v


def positive_float(text: str) -> float:
    """argparse type: a number > 0, for timeouts (0 would time out before the first poll)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{v} must be > 0")
    return v
