"""Tables (pandas) for Spark: the fleet's Parquet tables and the coded frames the grouped
functions exchange. Pure: no Spark import, no I/O.

Fleet tables (one row per object, a ``cluster`` column in each):

* ``brokers``: cluster, broker_id, rack, live [, namespace]
* ``log_dirs``: cluster, broker_id, name, path, capacity_bytes, used_bytes, live, cordoned
* ``replicas``: cluster, topic, partition, broker_id, log_dir (path or name), size_bytes, leader,
  position (place in the replica list)
* ``partition_loads`` (optional): cluster, topic, partition, bytes_in_per_second,
  growth_bytes_per_second

Between the driver and the grouped functions the replica-level frames travel *packed*: a few
rows per group, each carrying a chunk of the frame as Arrow IPC bytes (:func:`packed_rows`,
:func:`unpacked`). Spark still groups, schedules and runs the steps in parallel, but it moves
a few hundred rows instead of a million: row by row, its shuffles and Arrow conversions took
about three quarters of the job's CPU at 250 brokers x 12 disks x 1,000,000 replicas.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa  # type: ignore[import-untyped]

from .arrays import ClusterArrays, rack_codes
from .goals import reason_notes
from .interbroker import InterResult
from .options import PlanOptions
from .planner import BrokerStepParams, broker_dir_step

# kinds of rows in the step-1 output
KIND_DIR, KIND_REP, KIND_NOTE, KIND_BROKER = 1, 0, 2, 3

TOPO_SCHEMA = (
    "cluster string, kind int, idx long, broker long, rack long, live boolean, "
    "capacity long, other long, cordoned boolean"
)
REPS_SCHEMA = (
    "cluster string, idx long, part long, broker long, dir long, size long, leader boolean, "
    "growth double, bytes_in double, topic string, partition long"
)
STEP1_SCHEMA = (
    "cluster string, kind int, broker long, idx long, dir long, size long, arrived boolean, "
    "leader boolean, capacity long, fixed long, usable boolean, dir_live boolean, "
    "balance boolean, ceiling double, upper double, note string"
)
STEP2_SCHEMA = "cluster string, idx long, broker long, dir long, leader boolean"
PACKED_SCHEMA = "cluster string, broker long, chunk long, data binary"
"""A packed frame: its group (cluster, broker; ``NOTES_BROKER`` for step 1's notes, and for
what is grouped per cluster), the chunk's number and the chunk (Arrow IPC stream bytes)."""
NOTES_BROKER = -1
CHUNK_ROWS = 131_072
"""Rows per chunk: big enough that Spark sees few rows, small enough for Arrow batches."""


# -- fleet tables <-> arrays ----------------------------------------------------------------


def tables_from_arrays(a: ClusterArrays) -> dict[str, Any]:
    """The fleet tables of one cluster (for tests, the benchmark and exporting)."""
    used = a.dir_used()
    start = a.part_start()
    pos = np.arange(a.n_replicas) - start[a.rep_part]
    racks = [a.rack_names[r] if r >= 0 else None for r in a.broker_rack]
    return {
        "brokers": pd.DataFrame(
            {
                "cluster": a.cluster,
                "broker_id": a.broker_ids,
                "rack": racks,
                "live": a.broker_live,
                "namespace": a.namespace,
            }
        ),
        "log_dirs": pd.DataFrame(
            {
                "cluster": a.cluster,
                "broker_id": a.broker_ids[a.dir_broker],
                "name": list(a.dir_name),
                "path": list(a.dir_path),
                "capacity_bytes": a.dir_capacity,
                "used_bytes": used,
                "live": a.dir_live,
                "cordoned": a.dir_cordoned,
            }
        ),
        "replicas": pd.DataFrame(
            {
                "cluster": a.cluster,
                "topic": np.asarray(a.part_topic, dtype=object)[a.rep_part],
                "partition": a.part_num[a.rep_part],
                "broker_id": a.broker_ids[a.rep_broker],
                "log_dir": np.asarray(a.dir_path, dtype=object)[a.rep_dir],
                "size_bytes": a.rep_size,
                "leader": a.rep_leader,
                "position": pos,
            }
        ),
    }


def arrays_from_tables(
    cluster: str,
    brokers: Any,
    log_dirs: Any,
    replicas: Any,
    loads: Any | None = None,
    namespace: str | None = None,
) -> ClusterArrays:
    """One cluster's arrays from its rows of the fleet tables (vectorised; canonical order)."""
    br = brokers.sort_values("broker_id", kind="stable").reset_index(drop=True)
    bid = br["broker_id"].to_numpy(np.int64)
    racks, rack_names = rack_codes([None if pd.isna(r) else str(r) for r in br["rack"]])
    bpos = pd.Series(np.arange(bid.size), index=bid)
    ld = log_dirs.copy()
    ld["b"] = bpos.loc[ld["broker_id"].to_numpy(np.int64)].to_numpy()
    ld = ld.sort_values(["b", "path"], kind="stable").reset_index(drop=True)
    ld["d"] = np.arange(len(ld))
    rp = replicas.copy()
    if "position" not in rp.columns:
        rp["position"] = np.arange(len(rp))
    by_path = ld[["broker_id", "path", "d"]].rename(columns={"path": "log_dir"})
    by_name = ld[["broker_id", "name", "d"]].rename(columns={"name": "log_dir"})
    keys = pd.concat([by_path, by_name]).drop_duplicates(["broker_id", "log_dir"])
    rp = rp.merge(keys, on=["broker_id", "log_dir"], how="left", validate="many_to_one")
    if rp["d"].isna().any():
        bad = rp[rp["d"].isna()].iloc[0]
        raise ValueError(
            f"{cluster}: {bad['topic']}-{bad['partition']}: broker {bad['broker_id']} has no "
            f"log dir {bad['log_dir']!r}"
        )
    rp = rp.sort_values(["topic", "partition", "position"], kind="stable").reset_index(drop=True)
    parts = rp[["topic", "partition"]].drop_duplicates().reset_index(drop=True)
    parts["p"] = np.arange(len(parts))
    rp = rp.merge(parts, on=["topic", "partition"], how="left")
    growth = np.zeros(len(parts))
    bytes_in = np.zeros(len(parts))
    if loads is not None and len(loads):
        lp = parts.merge(loads, on=["topic", "partition"], how="left")
        growth = lp["growth_bytes_per_second"].fillna(0.0).to_numpy(np.float64)
        bytes_in = lp["bytes_in_per_second"].fillna(0.0).to_numpy(np.float64)
    rep_dir = rp["d"].to_numpy(np.int64)
    size = rp["size_bytes"].to_numpy(np.int64)
    cap = ld["capacity_bytes"].to_numpy(np.int64)
    on_dir = np.bincount(rep_dir, weights=size.astype(np.float64), minlength=len(ld))
    other = np.maximum(0, ld["used_bytes"].to_numpy(np.int64) - np.rint(on_dir).astype(np.int64))
    ns = namespace
    if ns is None:
        ns = str(br["namespace"].iloc[0]) if "namespace" in br.columns and len(br) else "default"
    return ClusterArrays(
        cluster=cluster,
        namespace=ns,
        broker_ids=bid,
        broker_rack=racks,
        broker_live=br["live"].to_numpy(np.bool_),
        rack_names=rack_names,
        dir_broker=ld["b"].to_numpy(np.int64),
        dir_name=tuple(str(x) for x in ld["name"]),
        dir_path=tuple(str(x) for x in ld["path"]),
        dir_capacity=cap,
        dir_other=other,
        dir_live=ld["live"].to_numpy(np.bool_),
        dir_cordoned=ld["cordoned"].to_numpy(np.bool_),
        part_topic=tuple(str(x) for x in parts["topic"]),
        part_num=parts["partition"].to_numpy(np.int64),
        part_growth=growth,
        part_bytes_in=bytes_in,
        rep_part=rp["p"].to_numpy(np.int64),
        rep_broker=bpos.loc[rp["broker_id"].to_numpy(np.int64)].to_numpy(np.int64),
        rep_dir=rep_dir,
        rep_size=size,
        rep_leader=rp["leader"].to_numpy(np.bool_),
    )


# -- coded frames (what the grouped functions exchange) -------------------------------------


def coded_frames(a: ClusterArrays) -> tuple[Any, Any]:
    """(topology, replicas) of one cluster, numbered as in its arrays."""
    nb, nd = a.n_brokers, a.n_dirs
    topo = pd.DataFrame(
        {
            "cluster": a.cluster,
            "kind": np.r_[np.full(nb, KIND_BROKER), np.full(nd, KIND_DIR)].astype(np.int32),
            "idx": np.r_[np.arange(nb), np.arange(nd)].astype(np.int64),
            "broker": np.r_[a.broker_ids, a.dir_broker].astype(np.int64),
            "rack": np.r_[a.broker_rack, np.full(nd, -1)].astype(np.int64),
            "live": np.r_[a.broker_live, a.dir_live],
            "capacity": np.r_[np.zeros(nb, np.int64), a.dir_capacity],
            "other": np.r_[np.zeros(nb, np.int64), a.dir_other],
            "cordoned": np.r_[np.zeros(nb, np.bool_), a.dir_cordoned],
        }
    )
    reps = pd.DataFrame(
        {
            "cluster": a.cluster,
            "idx": np.arange(a.n_replicas, dtype=np.int64),
            "part": a.rep_part,
            "broker": a.rep_broker,
            "dir": a.rep_dir,
            "size": a.rep_size,
            "leader": a.rep_leader,
            "growth": a.part_growth[a.rep_part],
            "bytes_in": a.part_bytes_in[a.rep_part],
            "topic": np.asarray(a.part_topic, dtype=object)[a.rep_part],
            "partition": a.part_num[a.rep_part],
        }
    )
    return topo, reps


def arrays_from_coded(cluster: str, topo: Any, reps: Any) -> ClusterArrays:
    t = topo.sort_values(["kind", "idx"], kind="stable")
    b = t[t["kind"] == KIND_BROKER]
    d = t[t["kind"] == KIND_DIR]
    r = reps.sort_values("idx", kind="stable")
    rep_part = r["part"].to_numpy(np.int64)
    n_parts = int(rep_part.max()) + 1 if rep_part.size else 0
    first = np.searchsorted(rep_part, np.arange(n_parts))
    nd = len(d)
    names = tuple(f"d{i}" for i in range(nd))
    rack = b["rack"].to_numpy(np.int64)
    n_racks = int(rack.max()) + 1 if rack.size else 0
    return ClusterArrays(
        cluster=cluster,
        namespace="default",
        broker_ids=b["broker"].to_numpy(np.int64),
        broker_rack=rack,
        broker_live=b["live"].to_numpy(np.bool_),
        rack_names=tuple(str(i) for i in range(max(n_racks, 0))),
        dir_broker=d["broker"].to_numpy(np.int64),
        dir_name=names,
        dir_path=names,
        dir_capacity=d["capacity"].to_numpy(np.int64),
        dir_other=d["other"].to_numpy(np.int64),
        dir_live=d["live"].to_numpy(np.bool_),
        dir_cordoned=d["cordoned"].to_numpy(np.bool_),
        part_topic=tuple(str(x) for x in r["topic"].to_numpy()[first]),
        part_num=r["partition"].to_numpy(np.int64)[first],
        part_growth=r["growth"].to_numpy(np.float64)[first],
        part_bytes_in=r["bytes_in"].to_numpy(np.float64)[first],
        rep_part=rep_part,
        rep_broker=r["broker"].to_numpy(np.int64),
        rep_dir=r["dir"].to_numpy(np.int64),
        rep_size=r["size"].to_numpy(np.int64),
        rep_leader=r["leader"].to_numpy(np.bool_),
    )


def step1_frame(a: ClusterArrays, inter: InterResult, sizes: Any) -> Any:
    """Step 1's output: one row per dir (with its broker's step parameters), one per replica
    (after step 1), one per note."""
    usable = a.dir_live & ~a.dir_cordoned & ~inter.drain_dir
    db = a.dir_broker
    nd, nr = a.n_dirs, a.n_replicas
    dirs = pd.DataFrame(
        {
            "cluster": a.cluster,
            "kind": np.full(nd, KIND_DIR, np.int32),
            "broker": db,
            "idx": np.arange(nd, dtype=np.int64),
            "dir": np.arange(nd, dtype=np.int64),
            "size": np.zeros(nd, np.int64),
            "arrived": np.zeros(nd, np.bool_),
            "leader": np.zeros(nd, np.bool_),
            "capacity": a.dir_capacity,
            "fixed": a.dir_other,
            "usable": usable,
            "dir_live": a.dir_live & a.broker_live[db],
            "balance": inter.balance_broker[db],
            "ceiling": inter.broker_ceiling[db],
            "upper": inter.broker_upper[db],
            "note": "",
        }
    )
    reps = pd.DataFrame(
        {
            "cluster": a.cluster,
            "kind": np.full(nr, KIND_REP, np.int32),
            "broker": inter.rep_broker,
            "idx": np.arange(nr, dtype=np.int64),
            "dir": inter.rep_dir,
            "size": np.asarray(sizes, dtype=np.int64),
            "arrived": inter.arrived,
            "leader": inter.rep_leader,
            "capacity": np.zeros(nr, np.int64),
            "fixed": np.zeros(nr, np.int64),
            "usable": np.zeros(nr, np.bool_),
            "dir_live": np.zeros(nr, np.bool_),
            "balance": np.zeros(nr, np.bool_),
            "ceiling": np.zeros(nr),
            "upper": np.zeros(nr),
            "note": "",
        }
    )
    texts = [*inter.notes, *reason_notes(inter.goal_reasons)]
    notes = pd.DataFrame(
        {
            "cluster": a.cluster,
            "kind": np.full(len(texts), KIND_NOTE, np.int32),
            "broker": np.full(len(texts), -1, np.int64),
            "idx": np.arange(len(texts), dtype=np.int64),
            "note": texts,
        }
    )
    # "" rather than None in the rows without a note: pandas checks an all-missing object
    # column value by value when it concatenates (0.4 s per million rows)
    return pd.concat([dirs, reps, notes], ignore_index=True)


def step2_broker(pdf: Any, opts: PlanOptions) -> Any:
    """The directory step of one broker from its step-1 rows (dirs and replicas)."""
    cluster = str(pdf["cluster"].iloc[0])
    d = pdf[pdf["kind"] == KIND_DIR].sort_values("idx", kind="stable")
    r = pdf[pdf["kind"] == KIND_REP].sort_values("idx", kind="stable")
    out = pd.DataFrame(
        {
            "cluster": cluster,
            "idx": r["idx"].to_numpy(np.int64),
            "broker": r["broker"].to_numpy(np.int64),
            "dir": r["dir"].to_numpy(np.int64),
            "leader": r["leader"].to_numpy(np.bool_),
        }
    )
    if len(d) == 0 or len(r) == 0 or not bool(d["dir_live"].any()):
        return out
    first = d.iloc[0]
    sp = BrokerStepParams(
        balance=bool(first["balance"]),
        ceiling=float(first["ceiling"]),
        upper=float(first["upper"]),
    )
    out["dir"] = broker_dir_step(
        d["idx"].to_numpy(np.int64),
        d["capacity"].to_numpy(np.int64),
        d["fixed"].to_numpy(np.int64),
        d["usable"].to_numpy(np.bool_),
        d["dir_live"].to_numpy(np.bool_),
        r["dir"].to_numpy(np.int64),
        r["arrived"].to_numpy(np.bool_),
        r["size"].to_numpy(np.int64),
        opts,
        sp,
    )
    return out


# -- packed frames (what crosses Spark: few rows, each a chunk of a frame) ------------------


def _ipc(table: Any) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _table(df: Any) -> Any:
    # one thread: pyarrow would start threads for every call, and the calls are many and small
    return pa.Table.from_pandas(df, preserve_index=False, nthreads=1)


def pack(df: Any) -> bytes:
    """A pandas frame as Arrow IPC stream bytes (columns, dtypes and nulls kept)."""
    return _ipc(_table(df))


def unpack(data: bytes) -> Any:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all().to_pandas()


def packed_rows(df: Any, cluster: str, broker: int = NOTES_BROKER, rows: int = CHUNK_ROWS) -> Any:
    """``df`` as rows of :data:`PACKED_SCHEMA`: chunks of ``rows`` rows, numbered in order
    (an empty frame is one empty chunk, so that its group still exists)."""
    n = len(df)
    starts = range(0, max(n, 1), max(rows, 1))
    return pd.DataFrame(
        {
            "cluster": cluster,
            "broker": np.full(len(starts), broker, dtype=np.int64),
            "chunk": np.arange(len(starts), dtype=np.int64),
            "data": [pack(df.iloc[i : i + rows]) for i in starts],
        }
    )


def unpacked(packed: Any) -> Any:
    """The frame that :func:`packed_rows` packed (chunks put back in order)."""
    ordered = packed.sort_values("chunk", kind="stable")
    return pd.concat([unpack(d) for d in ordered["data"]], ignore_index=True)


def step1_packed(a: ClusterArrays, inter: InterResult, sizes: Any) -> Any:
    """Step 1's output packed per broker (its dir and replica rows, one chunk), notes apart.

    Converted to Arrow once and cut into zero-copy slices per broker: a pandas group-by with
    a conversion per group took three times as long at 250 brokers."""
    frame = step1_frame(a, inter, sizes)
    is_note = frame["kind"].to_numpy() == KIND_NOTE
    notes = packed_rows(frame[is_note], a.cluster)
    rest = frame[~is_note]
    brokers = rest["broker"].to_numpy(np.int64)
    order = np.argsort(brokers, kind="stable")
    table = _table(rest).take(pa.array(order))
    sb = brokers[order]
    ids, starts = np.unique(sb, return_index=True)
    ends = np.r_[starts[1:], sb.size]
    per_broker = pd.DataFrame(
        {
            "cluster": a.cluster,
            "broker": ids.astype(np.int64),
            "chunk": np.zeros(ids.size, dtype=np.int64),
            "data": [_ipc(table.slice(lo, hi - lo)) for lo, hi in zip(starts, ends, strict=True)],
        }
    )
    return pd.concat([notes, per_broker], ignore_index=True)


def step2_packed(packed: Any, opts: PlanOptions) -> Any:
    """The directory step of one broker, packed in and out."""
    out = step2_broker(unpacked(packed), opts)
    return packed_rows(out, str(packed["cluster"].iloc[0]), int(packed["broker"].iloc[0]))
