"""Kafka's own reassignment tool, driven as its users drive it: the yardstick of issue 22's
bench (``kafka-reassign-partitions --execute``, every partition at once, then ``--verify``
until it says each one is completed; ``--verify`` is also what removes the tool's throttles).

    plan = tool_plan({("t", 0): [3, 4]}, log_dirs={("t", 0): [dir_a, "any"]})
    wall_s = reassign_and_wait(bootstrap, plan, tmp_path)   # then --verify, as users must
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.kafka_jars import run_class
from tests.waiting import wait_for

with warnings.catch_warnings():
    # kafka-python 3.0 loads its message schemas with importlib.resources.read_text, which
    # Python 3.11 deprecates (and the test suite makes every warning an error).
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.admin

REASSIGN_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"

IN_PROGRESS = "is still in progress"
"""What ``--verify`` prints for a partition or replica move not finished yet."""
NOT_AS_PLANNED = "rather than"
"""What it prints for a partition whose reassignment ended elsewhere (e.g. cancelled)."""


def tool_plan(
    replicas: Mapping[tuple[str, int], Sequence[int]],
    log_dirs: Mapping[tuple[str, int], Sequence[str]] | None = None,
) -> dict[str, object]:
    """The tool's ``--reassignment-json-file`` (version 1): each partition's target replicas,
    and, where given, each replica's log dir (absolute path, or ``any``) in the same order."""
    parts: list[dict[str, object]] = []
    for (topic, partition), target in sorted(replicas.items()):
        entry: dict[str, object] = {
            "topic": topic,
            "partition": partition,
            "replicas": list(target),
        }
        dirs = (log_dirs or {}).get((topic, partition))
        if dirs is not None:
            if len(dirs) != len(target):
                raise ValueError(
                    f"{topic}-{partition}: {len(dirs)} log dirs for {len(target)} replicas"
                )
            entry["log_dirs"] = list(dirs)
        parts.append(entry)
    return {"version": 1, "partitions": parts}


def _tool(bootstrap: str, action: str, plan_path: Path, *extra: str) -> str:
    proc = run_class(
        REASSIGN_COMMAND,
        "--bootstrap-server",
        bootstrap,
        f"--{action}",
        "--reassignment-json-file",
        str(plan_path),
        *extra,
    )
    return proc.stdout


def execute(bootstrap: str, plan: Mapping[str, Any], work_dir: Path, *extra: str) -> None:
    """``--execute``: every partition of the plan submitted at once (``extra``: e.g.
    ``--throttle``, ``--replica-alter-log-dirs-throttle``)."""
    path = work_dir / "reassignment.json"
    path.write_text(json.dumps(plan))
    out = _tool(bootstrap, "execute", path, *extra)
    if "Successfully started" not in out:
        raise RuntimeError(f"the reassignment tool did not start the plan:\n{out[-4000:]}")


def verify(bootstrap: str, plan: Mapping[str, Any], work_dir: Path) -> bool:
    """``--verify`` once: ``True`` when every partition and replica of the plan is done as
    planned; a partition that ended elsewhere is an error, not a wait."""
    path = work_dir / "reassignment.json"
    path.write_text(json.dumps(plan))
    out = _tool(bootstrap, "verify", path)
    if NOT_AS_PLANNED in out:
        raise RuntimeError(f"a reassignment ended elsewhere than planned:\n{out[-4000:]}")
    return IN_PROGRESS not in out


def moves_in_flight(admin: Any, partitions: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
    """Which of ``partitions`` Kafka still moves: an ongoing reassignment
    (ListPartitionReassignments) or a future replica in some log dir (DescribeLogDirs), asked
    of the cluster itself through kafka-python's admin client."""
    wanted = set(partitions)
    busy = {(tp.topic, tp.partition) for tp in admin.list_partition_reassignments()} & wanted
    for broker in admin.describe_log_dirs():
        for log_dir in broker["log_dirs"]:
            for topic in log_dir["topics"]:
                for p in topic["partitions"]:
                    key = (topic["name"], p["partition_index"])
                    if p["is_future_key"] and key in wanted:
                        busy.add(key)
    return busy


def reassign_and_wait(
    bootstrap: str,
    plan: Mapping[str, Any],
    work_dir: Path,
    *extra: str,
    timeout_s: float = 600,
    poll_s: float = 0.1,
) -> float:
    """Execute the plan as Kafka's tool does (all at once) and wait until Kafka moves none of
    its partitions (polled every ``poll_s`` through the admin client, not with ``--verify``,
    whose JVM start would blur the figure by seconds); the wall seconds from the start of
    ``--execute`` to then. Then ``--verify`` once, as the tool's users must: it confirms every
    partition landed as planned and removes the throttles ``--throttle`` set."""
    parts = [(str(e["topic"]), int(e["partition"])) for e in plan["partitions"]]
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        start = time.monotonic()
        execute(bootstrap, plan, work_dir, *extra)
        wait_for(
            lambda: not moves_in_flight(admin, parts),
            "Kafka to move none of the plan's partitions",
            timeout_s,
            interval=poll_s,
        )
        wall = time.monotonic() - start
    finally:
        admin.close()
    if not verify(bootstrap, plan, work_dir):
        raise RuntimeError("--verify says the reassignment is still in progress after it ended")
    return wall
