"""Whether ``chmod 000`` binds this process: the disk-failure tests fail a log dir that way.

As root, the kernel ignores file permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a
``chmod 000`` dir stays readable and writable and the failure a test waits for never comes: it
would time out far from the cause. ``scripts/run-tests`` (what ``make test`` runs) drops those
two capabilities. Each test that fails a dir with ``chmod`` calls :func:`require_permissions`
first, which skips it with the reason when they are still there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOT_ENFORCED = (
    "file permissions are not enforced (running as root with CAP_DAC_OVERRIDE): run the suite "
    "with scripts/run-tests, which drops those capabilities"
)


def permissions_bind(scratch: Path) -> bool:
    """Whether a ``chmod 000`` dir made under ``scratch`` denies this process a listing."""
    probe = scratch / "permission-probe"
    probe.mkdir(exist_ok=True)
    probe.chmod(0)
    try:
        os.listdir(probe)
    except PermissionError:
        return True
    finally:
        probe.chmod(0o755)
        probe.rmdir()
    return False


def require_permissions(scratch: Path) -> None:
    """Skip the calling test, saying why, when ``chmod 000`` would not fail a dir."""
    if not permissions_bind(scratch):
        pytest.skip(NOT_ENFORCED)
