"""Synthetic clusters from a seed, for the benchmark and the tests.

Partition sizes are Zipf-distributed (numpy's ``zipf``, a heavy tail, truncated so that one
replica stays a small fraction of a disk); replicas are spread over 3 racks, one per rack,
with some brokers somewhat fuller than others; within a broker some directories ("hot") got far
more data than the rest and a few ("new") far less, as happens when new replicas go to the
directory with the fewest partitions and sizes differ.
"""

from __future__ import annotations

import numpy as np

from jbod_operator.models.snapshot import BrokerInfo, ClusterSnapshot, LogDirInfo, ReplicaInfo

from .arrays import ClusterArrays

GiB = 1 << 30


def synthetic_cluster(
    seed: int,
    brokers: int,
    dirs_per_broker: int,
    replicas: int,
    *,
    rf: int = 3,
    racks: int = 3,
    mean_util: float = 0.5,
    zipf_a: float = 1.8,
    zipf_cap: int = 40,
    hot_fraction: float = 0.15,
    hot_weight: float = 1.6,
    cold_fraction: float = 0.10,
    cold_weight: float = 0.4,
    broker_skew: float = 0.10,
    max_util: float = 0.95,
    cluster: str = "synthetic",
) -> ClusterArrays:
    rng = np.random.default_rng(seed)
    n_parts = max(1, replicas // rf)
    # topics of varied partition counts, named so that they sort in creation order
    counts: list[int] = []
    left = n_parts
    while left > 0:
        big = rng.random() >= 0.9
        c = min(left, int(rng.integers(64, 512)) if big else int(rng.integers(1, 64)))
        counts.append(c)
        left -= c
    part_topic = tuple(f"t{ti:05d}" for ti, c in enumerate(counts) for _ in range(c))
    part_num = np.concatenate([np.arange(c, dtype=np.int64) for c in counts])
    # Zipf-skewed sizes (heavy tail, truncated) with some noise, in bytes
    z = np.minimum(rng.zipf(zipf_a, n_parts), zipf_cap).astype(np.float64)
    psize = z * rng.lognormal(0.0, 0.25, n_parts)

    # brokers: rack i % racks; broker weights (some fuller than others)
    rack = np.arange(brokers, dtype=np.int64) % racks
    bweight = 1.0 + broker_skew * (2 * rng.random(brokers) - 1)
    # each partition: one broker from each of rf distinct racks (rf <= racks) or any brokers
    rep_part = np.repeat(np.arange(n_parts, dtype=np.int64), rf)
    rep_broker = np.empty(n_parts * rf, dtype=np.int64)
    by_rack = [np.flatnonzero(rack == r) for r in range(racks)]
    first_rack = rng.integers(0, racks, n_parts)
    for j in range(rf):
        rk = (first_rack + j) % racks
        for r in range(racks):
            sel = np.flatnonzero(rk == r)
            cand = by_rack[r]
            prob = bweight[cand] / bweight[cand].sum()
            rep_broker[sel * rf + j] = cand[rng.choice(cand.size, size=sel.size, p=prob)]
    if rf > racks:  # resolve duplicates by re-drawing (rare in tests only)
        for p_ in range(n_parts):
            bs = rep_broker[p_ * rf : (p_ + 1) * rf]
            if len(set(bs.tolist())) < rf:
                rep_broker[p_ * rf : (p_ + 1) * rf] = rng.choice(brokers, rf, replace=False)
    # dirs: weights per dir (hot / cold / normal), replica -> dir by weight
    n_dirs = brokers * dirs_per_broker
    dweight = np.ones(n_dirs)
    u = rng.random(n_dirs)
    dweight[u < hot_fraction] = hot_weight
    dweight[(u >= hot_fraction) & (u < hot_fraction + cold_fraction)] = cold_weight
    dw = dweight.reshape(brokers, dirs_per_broker)
    cum = np.cumsum(dw / dw.sum(axis=1, keepdims=True), axis=1)
    draw = rng.random(rep_part.size)
    local = (draw[:, None] > cum[rep_broker]).sum(axis=1)
    local = np.minimum(local, dirs_per_broker - 1)
    rep_dir = rep_broker * dirs_per_broker + local
    # sizes in bytes; capacity so that the cluster is at mean_util
    rep_size_f = psize[rep_part]
    total = rep_size_f.sum()
    cap_per_dir = total / (n_dirs * mean_util)
    scale = 2000.0 * GiB / cap_per_dir  # 2 TiB disks
    rep_size = np.rint(rep_size_f * scale).astype(np.int64)
    used = np.bincount(rep_dir, weights=rep_size.astype(np.float64), minlength=n_dirs)
    disk = max(2000.0 * GiB, float(used.max()) / max_util)  # no disk starts above max_util
    capacity = np.full(n_dirs, int(disk), dtype=np.int64)
    leader = np.zeros(rep_part.size, dtype=np.bool_)
    leader[::rf] = True
    return ClusterArrays(
        cluster=cluster,
        namespace="default",
        broker_ids=np.arange(brokers, dtype=np.int64),
        broker_rack=rack,
        broker_live=np.ones(brokers, dtype=np.bool_),
        rack_names=tuple(f"rack-{i}" for i in range(racks)),
        dir_broker=np.repeat(np.arange(brokers, dtype=np.int64), dirs_per_broker),
        dir_name=tuple(f"d{i:02d}" for _ in range(brokers) for i in range(dirs_per_broker)),
        dir_path=tuple(
            f"/var/lib/jbod/data-d{i:02d}" for _ in range(brokers) for i in range(dirs_per_broker)
        ),
        dir_capacity=capacity,
        dir_other=np.zeros(n_dirs, dtype=np.int64),
        dir_live=np.ones(n_dirs, dtype=np.bool_),
        dir_cordoned=np.zeros(n_dirs, dtype=np.bool_),
        part_topic=part_topic,
        part_num=part_num,
        part_growth=np.zeros(n_parts),
        part_bytes_in=np.zeros(n_parts),
        rep_part=rep_part,
        rep_broker=rep_broker,
        rep_dir=rep_dir,
        rep_size=rep_size,
        rep_leader=leader,
    )


def to_snapshot(a: ClusterArrays) -> ClusterSnapshot:
    """The JSON model of a (small) cluster given as arrays."""
    used = a.dir_used()
    return ClusterSnapshot(
        cluster_name=a.cluster,
        namespace=a.namespace,
        brokers=[
            BrokerInfo(
                id=int(a.broker_ids[b]),
                rack=a.rack_names[a.broker_rack[b]] if a.broker_rack[b] >= 0 else None,
                live=bool(a.broker_live[b]),
            )
            for b in range(a.n_brokers)
        ],
        log_dirs=[
            LogDirInfo(
                broker_id=int(a.broker_ids[a.dir_broker[d]]),
                name=a.dir_name[d],
                path=a.dir_path[d],
                capacity_bytes=int(a.dir_capacity[d]),
                used_bytes=int(used[d]),
                live=bool(a.dir_live[d]),
                cordoned=bool(a.dir_cordoned[d]),
            )
            for d in range(a.n_dirs)
        ],
        replicas=[
            ReplicaInfo(
                topic=a.part_topic[a.rep_part[i]],
                partition=int(a.part_num[a.rep_part[i]]),
                broker_id=int(a.broker_ids[a.rep_broker[i]]),
                log_dir=a.dir_path[a.rep_dir[i]],
                size_bytes=int(a.rep_size[i]),
                leader=bool(a.rep_leader[i]),
            )
            for i in range(a.n_replicas)
        ],
    )
