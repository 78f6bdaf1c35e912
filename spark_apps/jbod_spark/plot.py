"""``plot.png``: every disk's utilisation before and after a plan, grouped by broker, with the
capacity threshold, and under it each broker's bytes, replicas and leaders before and after
against the mean (a new broker's share at a glance), for the person who approves the plan
(the proposal ConfigMap carries it, ``jbod-ctl rebalance show --plot`` writes it out).

Drawn with matplotlib's object API (a :class:`~matplotlib.figure.Figure` rendered by the Agg
canvas): no pyplot state, no display, safe in a driver process. It reads only the report, so
the picture shows exactly the figures of ``report.json``.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jbod_operator.models.plan_report import BrokerReport, PlanReport

__all__ = ["BAR_LIMIT", "DPI", "HEIGHT_IN", "plot_png", "width_inches", "write_plot"]

DPI = 100
HEIGHT_IN = 8.0
BAR_LIMIT = 400
"""Up to this many disks, each gets a pair of bars; beyond, two rows of markers (250 brokers x
12 disks would be 6,000 bars no one can read)."""
_MIN_W, _MAX_W, _PER_DISK = 7.0, 24.0, 0.22


def width_inches(n_disks: int) -> float:
    """Wide enough for every disk's pair of bars, within what an image viewer shows."""
    return min(_MAX_W, max(_MIN_W, 1.5 + _PER_DISK * n_disks))


def plot_png(report: PlanReport) -> bytes:
    """The PNG bytes of the before/after chart of ``report``'s disks."""
    from matplotlib.figure import Figure  # the spark extra; imported when a plot is drawn

    dirs = sorted(report.dirs, key=lambda d: (d.broker_id, d.path))
    n = len(dirs)
    fig = Figure(figsize=(width_inches(n), HEIGHT_IN), dpi=DPI, layout="constrained")
    grid = fig.add_gridspec(2, 3, height_ratios=[3, 2])
    ax = fig.add_subplot(grid[0, :])
    _brokers(report, [fig.add_subplot(grid[1, k]) for k in range(3)])
    xs = list(range(n))
    before = [100.0 * d.util_before for d in dirs]
    after = [100.0 * d.util_after for d in dirs]
    if n <= BAR_LIMIT:
        ax.bar([x - 0.2 for x in xs], before, width=0.4, color="#9e9e9e", label="before")
        bars = ax.bar([x + 0.2 for x in xs], after, width=0.4, color="#1f77b4", label="after")
        for bar, d in zip(bars, dirs, strict=True):
            if d.drained or d.cordoned or not d.live:
                bar.set_hatch("//")
                bar.set_edgecolor("#d62728")
    else:
        ax.plot(xs, before, ".", color="#9e9e9e", markersize=2, label="before")
        ax.plot(xs, after, ".", color="#1f77b4", markersize=2, label="after")
    s = report.summary
    ax.axhline(
        s.capacity_threshold_percent,
        color="#d62728",
        linestyle="--",
        linewidth=1,
        label=f"capacity threshold {s.capacity_threshold_percent:.0f}%",
    )
    # brokers: a separator between groups, the broker id under the middle of its disks
    starts = [i for i, d in enumerate(dirs) if i == 0 or d.broker_id != dirs[i - 1].broker_id]
    ends = [*starts[1:], n] if starts else []
    centers = [(i + end - 1) / 2 for i, end in zip(starts, ends, strict=True)]
    ax.vlines(  # one collection, not an artist per broker (250 brokers: 0.7 s less)
        [i - 0.5 for i in starts[1:]],
        0,
        1,
        transform=ax.get_xaxis_transform(),
        color="#cccccc",
        linewidth=0.8,
    )
    if n <= 60:
        ax.set_xticks(xs, [d.name for d in dirs], fontsize=7, rotation=90)
        sec = ax.secondary_xaxis("top")
        sec.set_xticks(centers, [f"broker {dirs[i].broker_id}" for i in starts], fontsize=8)
    else:
        step = max(1, len(starts) // 40)
        ax.set_xticks(centers[::step], [str(dirs[i].broker_id) for i in starts[::step]], fontsize=7)
        ax.set_xlabel("broker")
    ax.set_xlim(-0.7, max(n, 1) - 0.3)
    top = max([100.0, *before, *after])
    ax.set_ylim(0, top * 1.05)
    ax.set_ylabel("disk utilisation (%)")
    verdict = (
        "feasible"
        if s.feasible
        else f"NOT feasible: best spread {s.best_spread_pp:.1f} pp (band {s.balance_band_pp:.1f})"
    )
    ax.set_title(
        f"{report.cluster_name}: plan {report.plan_id} ({report.mode}), {verdict}\n"
        f"worst disk spread within a broker {s.worst_spread_pp_before:.1f} -> "
        f"{s.worst_spread_pp_after:.1f} pp; largest disk {s.largest_util_before:.0%} -> "
        f"{s.largest_util_after:.0%}",
        fontsize=9,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


_Figure = Callable[[BrokerReport], float]
_BROKER_FIGURES: tuple[tuple[str, _Figure, _Figure], ...] = (
    ("GiB", lambda b: b.used_before / 2**30, lambda b: b.used_after / 2**30),
    ("replicas", lambda b: float(b.replicas_before), lambda b: float(b.replicas_after)),
    ("leaders", lambda b: float(b.leaders_before), lambda b: float(b.leaders_after)),
)


def _brokers(report: PlanReport, axes: list[Any]) -> None:
    """Per broker: bytes, replicas and leaders before (grey) and after (blue), and the mean
    after over the live brokers (dashed): a broker that did not take its share stands out."""
    brokers = sorted(report.brokers, key=lambda b: b.broker_id)
    xs = list(range(len(brokers)))
    live = [b for b in brokers if b.live]
    for ax, (title, before_of, after_of) in zip(axes, _BROKER_FIGURES, strict=True):
        before = [before_of(b) for b in brokers]
        after = [after_of(b) for b in brokers]
        if len(brokers) <= 60:
            ax.bar([x - 0.2 for x in xs], before, width=0.4, color="#9e9e9e")
            ax.bar([x + 0.2 for x in xs], after, width=0.4, color="#1f77b4")
            ax.set_xticks(xs, [str(b.broker_id) for b in brokers], fontsize=7)
        else:
            ax.plot(xs, before, ".", color="#9e9e9e", markersize=2)
            ax.plot(xs, after, ".", color="#1f77b4", markersize=2)
        if live:
            mean = sum(after_of(b) for b in live) / len(live)
            ax.axhline(mean, color="#2ca02c", linestyle="--", linewidth=1)
        ax.set_title(f"{title} per broker", fontsize=8)
        middle = title == "replicas"
        ax.set_xlabel("broker" + (" (dashed: the mean after)" if middle else ""), fontsize=7)
        ax.tick_params(labelsize=7)


def write_plot(report: PlanReport, path: Path) -> Path:
    path.write_bytes(plot_png(report))
    return path
