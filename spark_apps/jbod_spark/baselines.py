"""Two baselines the benchmark compares the planner with (pure, single process).

* :func:`kafka_default`: every replica re-placed on its broker by Kafka's own rule, the live
  directory with the fewest partitions (ties to the first), as if all had been created anew.
* :func:`plain_greedy`: per broker, repeatedly move the largest replica of the fullest
  directory to the emptiest one as long as that lowers the larger of the two utilisations,
  until the broker's spread is within the tolerance.
"""

from __future__ import annotations

import numpy as np

from .arrays import I64, ClusterArrays


def kafka_default(a: ClusterArrays) -> I64:
    rd = a.rep_dir.copy()
    order = np.argsort(a.rep_broker, kind="stable")
    bstart = np.searchsorted(a.rep_broker[order], np.arange(a.n_brokers + 1))
    dstart = np.searchsorted(a.dir_broker, np.arange(a.n_brokers + 1))
    for b in range(a.n_brokers):
        dirs = np.arange(dstart[b], dstart[b + 1])
        dirs = dirs[a.dir_live[dirs] & ~a.dir_cordoned[dirs]]
        reps = order[bstart[b] : bstart[b + 1]]
        if dirs.size == 0 or reps.size == 0:
            continue
        # fewest partitions first, from empty: the k-th replica goes to dir k mod n
        rd[reps] = dirs[np.arange(reps.size) % dirs.size]
    return rd


def plain_greedy(a: ClusterArrays, tolerance: float = 0.04) -> I64:
    rd = a.rep_dir.copy()
    size = a.rep_size.astype(np.float64)
    cap = a.dir_capacity.astype(np.float64)
    load = a.dir_other.astype(np.float64) + np.bincount(rd, weights=size, minlength=a.n_dirs)
    order = np.argsort(a.rep_broker, kind="stable")
    bstart = np.searchsorted(a.rep_broker[order], np.arange(a.n_brokers + 1))
    dstart = np.searchsorted(a.dir_broker, np.arange(a.n_brokers + 1))
    for b in range(a.n_brokers):
        dirs = np.arange(dstart[b], dstart[b + 1])
        dirs = dirs[a.dir_live[dirs] & ~a.dir_cordoned[dirs] & (cap[dirs] > 0)]
        reps = order[bstart[b] : bstart[b + 1]]
        if dirs.size < 2 or reps.size == 0:
            continue
        reps = reps[np.argsort(-size[reps], kind="stable")]  # largest first
        for _ in range(reps.size):
            u = load[dirs] / cap[dirs]
            hi, lo = int(dirs[int(np.argmax(u))]), int(dirs[int(np.argmin(u))])
            u_hi, u_lo = load[hi] / cap[hi], load[lo] / cap[lo]
            if u_hi - u_lo <= tolerance:
                break
            on_hi = reps[rd[reps] == hi]
            ok = (load[lo] + size[on_hi]) / cap[lo] < u_hi
            if not ok.any():
                break
            i = int(on_hi[int(np.argmax(ok))])  # the largest that lowers the pair's maximum
            rd[i] = lo
            load[hi] -= size[i]
            load[lo] += size[i]
    return rd
