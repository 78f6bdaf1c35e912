"""The packed exchange between the Spark driver and its grouped steps (issue 16 bench): a
frame split into Arrow IPC chunks comes back the same, step 1's output is one group per broker
with the notes apart, and the directory step gives the same placement packed or not. Also the
sort-based unique the plan's checks use."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pytest

from jbod_spark.arrays import ClusterArrays, sorted_unique
from jbod_spark.frames import (
    KIND_NOTE,
    NOTES_BROKER,
    arrays_from_coded,
    coded_frames,
    pack,
    packed_rows,
    step1_frame,
    step1_packed,
    step2_broker,
    step2_packed,
    unpack,
    unpacked,
)
from jbod_spark.interbroker import InterResult, plan_inter_broker, projected_sizes
from jbod_spark.options import Mode, PlanOptions
from jbod_spark.synthetic import synthetic_cluster


def test_a_frame_survives_packing_with_types_strings_and_nulls() -> None:
    df = pd.DataFrame(
        {
            "cluster": ["c", "c", "c"],
            "idx": np.array([3, 1, 2], dtype=np.int64),
            "util": [0.5, np.nan, 1.25],
            "leader": [True, False, True],
            "note": [None, "a note", None],
        }
    )
    back = unpack(pack(df))
    pd.testing.assert_frame_equal(back, df)


def test_chunks_are_numbered_in_order_and_put_back_in_order() -> None:
    df = pd.DataFrame({"idx": np.arange(10, dtype=np.int64), "topic": [f"t{i}" for i in range(10)]})
    rows = packed_rows(df, "east", broker=4, rows=3)
    assert rows["chunk"].tolist() == [0, 1, 2, 3]
    assert set(rows["cluster"]) == {"east"} and set(rows["broker"]) == {4}
    shuffled = rows.iloc[::-1]  # Spark keeps no order within a group
    pd.testing.assert_frame_equal(unpacked(shuffled), df)


def test_an_empty_frame_is_one_empty_chunk() -> None:
    df = pd.DataFrame({"idx": np.array([], dtype=np.int64)})
    rows = packed_rows(df, "c")
    assert len(rows) == 1 and rows["broker"].tolist() == [NOTES_BROKER]
    back = unpacked(rows)
    assert len(back) == 0 and list(back.columns) == ["idx"]


def _step1(a: ClusterArrays, opts: PlanOptions) -> tuple[ClusterArrays, InterResult, Any]:
    topo, reps = coded_frames(a)
    arr = arrays_from_coded("c", topo, reps)
    sizes = projected_sizes(arr, opts)
    return arr, plan_inter_broker(arr, opts, sizes), sizes


def test_step1_is_packed_one_group_per_broker_with_notes_apart() -> None:
    # remove-brokers leaves notes only when something cannot move; an offline dir in dirs-only
    # mode always notes that its replicas need another broker
    a = synthetic_cluster(7, 6, 3, 1200, cluster="c")
    a.dir_live[1] = False
    opts = PlanOptions(mode=Mode.DIRS_ONLY)
    arr, inter, sizes = _step1(a, opts)
    plain = step1_frame(arr, inter, sizes)
    packed = step1_packed(arr, inter, sizes)
    assert sorted(set(packed["broker"])) == [NOTES_BROKER, *range(6)]
    notes = unpacked(packed[packed["broker"] == NOTES_BROKER])
    assert list(notes["note"]) == list(plain[plain["kind"] == KIND_NOTE]["note"])
    assert len(notes) == 1
    for b in range(6):
        got = unpacked(packed[packed["broker"] == b])
        want = plain[(plain["kind"] != KIND_NOTE) & (plain["broker"] == b)]
        assert got["idx"].tolist() == want["idx"].tolist()
        assert got["dir"].tolist() == want["dir"].tolist()


def test_the_directory_step_gives_the_same_placement_packed() -> None:
    a = synthetic_cluster(8, 5, 4, 2000, cluster="c")
    opts = PlanOptions(dir_balance_tolerance=0.02)
    arr, inter, sizes = _step1(a, opts)
    plain = step1_frame(arr, inter, sizes)
    packed = step1_packed(arr, inter, sizes)
    moved = 0
    for b in range(5):
        want = step2_broker(plain[(plain["kind"] != KIND_NOTE) & (plain["broker"] == b)], opts)
        out = step2_packed(packed[packed["broker"] == b].reset_index(drop=True), opts)
        assert out["broker"].tolist() == [b] * len(out)
        got = unpacked(out)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))
        moved += int((got["dir"].to_numpy() != arr.rep_dir[got["idx"].to_numpy()]).sum())
    assert moved > 0  # the directory step did balance something


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_sorted_unique_is_numpys_unique(n: int) -> None:
    x = np.random.default_rng(n).integers(-50, 50, n).astype(np.int64)
    assert np.array_equal(sorted_unique(x), np.unique(x))
