"""How far a PartitionReassignment says it is (``plan.reassignment_progress`` through
``plan.reassignment.advance``): ``progressPercent`` (the Progress printer column) counts the
bytes the new replicas copied, as ``bytesMoved``/rate/ETA do, not the partitions finished (a
reassignment of one big partition showed 0 for 110 of its 167 s)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from jbod_operator.models.reassignment import PartitionReassignment
from jbod_operator.models.reassignment import ReassignmentPhase as P
from jbod_operator.plan.port_types import (
    BrokerDirs,
    Delete,
    Dir,
    PartView,
    TopicView,
    WritePartition,
)
from jbod_operator.plan.reassignment import Decision, Observed, advance
from jbod_operator.plan.reassignment_progress import progress_percent

NOW = 1_700_000_000.0
SIZE = 1000
T0 = ("t", 0)


def _pr(replicas: list[int]) -> PartitionReassignment:
    return PartitionReassignment.model_validate(
        {
            "metadata": {"name": "r", "namespace": "kafka", "generation": 1},
            "spec": {
                "clusterName": "kip",
                "partitions": [{"topic": "t", "partition": 0, "replicas": replicas}],
            },
        }
    )


def _dirs(held: Mapping[int, int]) -> dict[int, BrokerDirs | None]:
    """Four brokers of one dir each; ``held``: broker -> bytes of t-0 it holds."""
    return {
        b: BrokerDirs(
            b,
            (
                Dir(
                    "a",
                    f"/data/{b}/data-a",
                    True,
                    False,
                    10**9,
                    {("t", 0): held[b]} if b in held else {},
                ),
            ),
        )
        for b in range(4)
    }


def _observe(
    pr: PartitionReassignment, pv: PartView, held: Mapping[int, int], now: float
) -> Observed:
    return Observed(
        pr,
        now,
        cluster_size=4,
        live=frozenset(range(4)),
        topics={"t": TopicView("t-res", "t", 1, {0: pv})},
        brokers=_dirs(held),
        cluster_dirs=("a",),
    )


def _written(d: Decision) -> PartView:
    (view,) = [a.view for a in d.actions if isinstance(a, WritePartition)]
    return view


def test_progress_counts_the_bytes_the_new_replica_copied() -> None:
    """One partition, one new replica: half of its bytes copied is 50%, not 0% because no
    partition has finished yet (the bytes fields said 500 of 1000 in the same status)."""
    pr = _pr([3, 1, 2])
    pv = PartView("t", 0, (0, 1, 2), (None,) * 3, 0, 3, (0, 1, 2), 7)
    first = advance(_observe(pr, pv, {0: SIZE, 1: SIZE, 2: SIZE}, NOW))
    assert first.status.phase == P.RUNNING and first.status.progress_percent == 0
    step = _written(first)
    assert step.adding == (3,)
    pr = pr.model_copy(update={"status": first.status})
    half = {0: SIZE, 1: SIZE, 2: SIZE, 3: SIZE // 2}
    d = advance(_observe(pr, step, half, NOW + 10))
    assert (d.status.bytes_moved, d.status.bytes_to_move) == (SIZE // 2, SIZE)
    assert d.status.progress_percent == 50
    # Every byte copied, the new replica not in the ISR yet (the step not ended): not 100.
    full = {**half, 3: SIZE}
    d = advance(_observe(pr, step, full, NOW + 20))
    assert d.status.bytes_moved == SIZE and d.status.progress_percent == 99
    # In sync: the step ends (shrink, delete) and the partition is done: 100.
    view = replace(step, isr=(0, 1, 2, 3), partition_epoch=step.partition_epoch + 1)
    for t in range(6):
        pr = pr.model_copy(update={"status": d.status})
        d = advance(_observe(pr, view, full, NOW + 21 + t))
        view = next((a.view for a in d.actions if isinstance(a, WritePartition)), view)
        for a in d.actions:
            if isinstance(a, Delete):
                full.pop(a.broker)
        if d.status.phase == P.SUCCEEDED:
            break
        assert d.status.progress_percent == (100 if d.status.counts == {"Done": 1} else 99)
    assert d.status.phase == P.SUCCEEDED and d.status.progress_percent == 100


def test_progress_by_partitions_where_nothing_is_to_copy() -> None:
    """A leader reorder or empty partitions copy no byte: the partitions finished say it."""
    assert progress_percent(moved=0, to_move=0, done=1, total=4) == 25
    assert progress_percent(moved=0, to_move=0, done=4, total=4) == 100
    assert progress_percent(moved=300, to_move=1000, done=0, total=4) == 30
    assert progress_percent(moved=1000, to_move=1000, done=3, total=4) == 99
    assert progress_percent(moved=1000, to_move=1000, done=4, total=4) == 100
