"""Small real filesystems for the full-disk tests: one home for mounting, filling and closing.

A tmpfs of a few MiB is a real filesystem that runs out of blocks (ENOSPC) like a full disk.
Mounting needs CAP_SYS_ADMIN: where that is forbidden, the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def mounted_tmpfs(path: str, size: str) -> Iterator[str]:
    """Mount a tmpfs of ``size`` (as mount(8) reads it: ``2m``) on ``path``; unmount at exit."""
    os.makedirs(path, exist_ok=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip() or res.returncode}")
    try:
        yield path
    finally:
        res = subprocess.run(["umount", path], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            # Still busy (descriptors left open): detach it so the test run can go on.
            subprocess.run(["umount", "-l", path], check=False)


@contextlib.contextmanager
def tmpfs_if_possible(path: str, size: str) -> Iterator[bool]:
    """A tmpfs of ``size`` on ``path`` where mounting is allowed (yields ``True``), else the
    plain directory (``False``): for tests that only want many small files made fast, whose
    point holds on any filesystem."""
    os.makedirs(path, exist_ok=True)
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
        capture_output=True,
        check=False,
    )
    if res.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        if subprocess.run(["umount", path], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", path], check=False)


def resize_tmpfs(path: str, size: str) -> None:
    """Grow (or shrink) a mounted tmpfs in place: the disk an operator replaced or cleaned."""
    subprocess.run(["mount", "-o", f"remount,size={size}", path], check=True)


def fill_up(mount: str, name: str = "filler") -> str:
    """Write a file on ``mount`` until the filesystem has no block left; returns its path."""
    path = os.path.join(mount, name)
    with contextlib.suppress(OSError), open(path, "wb") as f:
        while True:
            f.write(bytes(4096))
            f.flush()
    assert free_bytes(mount) < 4096, f"{mount} is not full"
    return path


def free_bytes(mount: str) -> int:
    st = os.statvfs(mount)
    return st.f_bavail * st.f_frsize


def close_fds_under(path: str) -> None:
    """Close, without writing anything, every descriptor this process holds under ``path``."""
    prefix = os.path.realpath(path) + os.sep
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            os.close(int(fd))
