"""Named crash points for the crash-consistency tests (etcd's gofail, FoundationDB's buggify).

``JBOD_FAILPOINTS`` names points (comma-separated) and ``JBOD_FAILPOINTS_DIR``
a directory. The first process of any operator to reach a named point writes
``<dir>/<point>`` and kills itself with SIGKILL, as a node failure would: no cleanup, no
Lease release. Each point fires once across every operator sharing the directory, so a
standby that takes over runs on. Unset (always, outside tests), a point costs one lookup.
"""

from __future__ import annotations

import os
import signal

ENV_POINTS = "JBOD_FAILPOINTS"
ENV_DIR = "JBOD_FAILPOINTS_DIR"


def hit(point: str) -> None:
    """Die here if the tests asked for it and nobody died here before."""
    names = os.environ.get(ENV_POINTS)
    where = os.environ.get(ENV_DIR)
    if not names or not where or point not in names.split(","):
        return
    try:
        fd = os.open(os.path.join(where, point), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.fsync(fd)
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
