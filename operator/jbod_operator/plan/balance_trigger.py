"""Continuous detection (issue 16): whether to create a Rebalance now, and which. Pure.

The operator samples every broker's describe-log-dirs (``handlers.balance``) into a bounded
:class:`History`; :func:`decide` reads it with the cluster's ``spec.balance``
(:class:`TriggerConfig`), the brokers and dirs already accounted for (:class:`Known`) and the
cluster's Rebalances, and answers with a :class:`Decision`. The rules, one test each in
``tests/unit/test_balance_trigger.py``:

- **threshold**: a sample is skewed when the widest spread between the disks of one broker, or
  between the fullest and the emptiest broker, is above ``diskSpreadThresholdPercent``
  (percentage points of utilisation; live, uncordoned disks with a capacity only, as the
  planner counts them).
- **window**: a trigger holds only when it held in every sample of the last ``windowSeconds``
  and in one sample at or before its start, with no gap between samples longer than
  ``TriggerConfig.max_gap_s`` (a hole in the observation proves nothing).
- **health**: nothing triggers while a broker the spec has does not answer or a dir is offline
  (a failing disk empties or stops reporting; balancing towards it would be wrong), and such a
  sample breaks every window.
- **fresh**: nothing triggers on a newest sample older than ``max_gap_s``.
- **never two at once**: nothing is created while a Rebalance of the cluster has not finished.
- **cooldown**: nothing is created within ``cooldownSeconds`` of a triggered Rebalance's
  creation or end (the later of the two).
- **which**: ``broker-added`` (brokers outside :class:`Known`, answering for the whole window)
  → ``add-brokers`` with their ids; ``disk-added`` (a dir name on every broker for the whole
  window) → ``dirs-only``; ``disk-imbalance`` → ``dirs-only``, or ``full`` when the brokers
  themselves are apart by more than the threshold (dirs-only moves no byte between brokers, so
  it could never end that skew). Checked in that order; an added broker or dir is accounted
  for (:class:`Known`) when its Rebalance is created, or at once when its trigger is not
  enabled.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from ..models import BalanceSpec, BalanceTrigger
from ..models.rebalance import RebalanceMode

EPSILON_PP = 1e-9
"""Spreads are differences of float ratios: a spread equal to the threshold must not count as
above it by a rounding error."""


@dataclass(frozen=True, slots=True)
class DiskSample:
    """One log dir of one broker at one moment."""

    broker_id: int
    log_dir: str
    """The dir's name (``a`` for ``.../data-a``)."""
    used_bytes: int
    capacity_bytes: int
    live: bool = True
    cordoned: bool = False

    @property
    def counted(self) -> bool:
        """Whether the dir's utilisation counts for balance (the planner's rule)."""
        return self.live and not self.cordoned and self.capacity_bytes > 0

    @property
    def utilisation(self) -> float:
        return self.used_bytes / self.capacity_bytes if self.capacity_bytes > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PartitionSize:
    """A partition's size in one sample (its largest current replica): the Spark job's metric
    history is made of these."""

    topic: str
    partition: int
    size: int


@dataclass(frozen=True, slots=True)
class Spread:
    disk_pp: float
    """The widest spread between the counted disks of one broker, in percentage points."""
    worst_broker: int | None
    broker_pp: float
    """Between the fullest and the emptiest broker (bytes over capacity of its counted disks)."""

    @property
    def worst_pp(self) -> float:
        return max(self.disk_pp, self.broker_pp)


def spread_of(disks: Iterable[DiskSample]) -> Spread:
    per_broker: dict[int, list[DiskSample]] = {}
    for d in disks:
        if d.counted:
            per_broker.setdefault(d.broker_id, []).append(d)
    disk_pp = 0.0
    worst: int | None = None
    broker_util: list[float] = []
    for b in sorted(per_broker):
        utils = [d.utilisation for d in per_broker[b]]
        pp = 100.0 * (max(utils) - min(utils))
        if worst is None or pp > disk_pp:
            disk_pp, worst = pp, b
        broker_util.append(
            sum(d.used_bytes for d in per_broker[b]) / sum(d.capacity_bytes for d in per_broker[b])
        )
    broker_pp = 100.0 * (max(broker_util) - min(broker_util)) if broker_util else 0.0
    return Spread(disk_pp, worst, broker_pp)


@dataclass(frozen=True, slots=True)
class Sample:
    """What describe-log-dirs said at ``time`` (epoch seconds). Its figures (spread, health,
    the dirs every broker has) are computed once, when it is made: a decision reads every
    sample of a window, at every sample."""

    time: float
    expected_brokers: frozenset[int]
    """The brokers the cluster has now (its spec): one of them not answering is offline."""
    answered: frozenset[int]
    disks: tuple[DiskSample, ...]
    partitions: tuple[PartitionSize, ...] = ()
    spread: Spread = field(init=False, compare=False, repr=False)
    problem: str | None = field(init=False, compare=False, repr=False)
    """Why this sample must not trigger anything (a broker or a dir offline), or None."""
    dirs_on_every_broker: frozenset[str] = field(init=False, compare=False, repr=False)
    """The dir names every answering broker has (a dir being rolled out is on some only)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "spread", spread_of(self.disks))
        object.__setattr__(self, "problem", _problem(self))
        object.__setattr__(self, "dirs_on_every_broker", _dirs_on_every_broker(self))


def _problem(s: Sample) -> str | None:
    silent = sorted(s.expected_brokers - s.answered)
    if silent:
        return f"broker {', '.join(map(str, silent))} did not answer"
    offline = [f"broker {d.broker_id} log dir {d.log_dir}" for d in s.disks if not d.live]
    if offline:
        return f"offline: {', '.join(offline)}"
    return None


def _dirs_on_every_broker(s: Sample) -> frozenset[str]:
    per: dict[int, set[str]] = {}
    for d in s.disks:
        per.setdefault(d.broker_id, set()).add(d.log_dir)
    if not per or set(per) != set(s.answered):
        return frozenset()
    return frozenset(set.intersection(*per.values()))


class History:
    """The samples of one cluster, oldest first, at most ``max_samples`` (the oldest is dropped
    first). In the operator's memory only: a restarted operator starts a new window."""

    def __init__(self, max_samples: int) -> None:
        if max_samples < 1:
            raise ValueError("a history keeps at least one sample")
        self._samples: deque[Sample] = deque(maxlen=max_samples)

    @property
    def max_samples(self) -> int:
        assert self._samples.maxlen is not None
        return self._samples.maxlen

    def add(self, sample: Sample) -> None:
        """Append; a sample not newer than the last one replaces nothing and is refused (the
        window rule reads the samples in time order)."""
        if self._samples and sample.time <= self._samples[-1].time:
            raise ValueError("samples must be added in time order")
        self._samples.append(sample)

    def resize(self, max_samples: int) -> None:
        """A new bound (``historySamples`` edited): the newest samples are kept."""
        if max_samples != self.max_samples:
            self._samples = deque(self._samples, maxlen=max(1, max_samples))

    def clear(self) -> None:
        self._samples.clear()

    def __len__(self) -> int:
        return len(self._samples)

    def __iter__(self) -> Iterator[Sample]:
        return iter(self._samples)

    def samples(self) -> list[Sample]:
        return list(self._samples)


@dataclass(frozen=True, slots=True)
class TriggerConfig:
    threshold_pp: float
    window_s: float
    cooldown_s: float
    triggers: frozenset[BalanceTrigger]
    max_gap_s: float
    """The longest time between two samples that still counts as watching all along."""

    @classmethod
    def from_spec(cls, spec: BalanceSpec, *, slack_s: float = 0.0) -> TriggerConfig:
        """``slack_s``: what one sample may take beyond its interval (the brokers' timeout)."""
        return cls(
            threshold_pp=spec.disk_spread_threshold_percent,
            window_s=float(spec.window_seconds),
            cooldown_s=float(spec.cooldown_seconds),
            triggers=frozenset(spec.triggers),
            max_gap_s=2.0 * spec.sample_interval_seconds + slack_s,
        )


@dataclass(frozen=True, slots=True)
class Known:
    """The brokers and dir names already accounted for: one outside is *added*."""

    brokers: frozenset[int]
    log_dirs: frozenset[str]


@dataclass(frozen=True, slots=True)
class RebalanceView:
    """A Rebalance of the cluster, as far as detection cares."""

    name: str
    finished: bool
    triggered: bool
    """It carries the ``jbod.io/rebalance-trigger`` label (continuous detection made it)."""
    created: float
    finished_at: float | None = None
    phase: str | None = None


@dataclass(frozen=True, slots=True)
class Create:
    trigger: BalanceTrigger
    mode: RebalanceMode
    brokers: tuple[int, ...]
    reason: str
    known_after: Known
    """What is accounted for once this Rebalance exists (its added brokers or dir included)."""


@dataclass(frozen=True, slots=True)
class Decision:
    create: Create | None
    known: Known | None
    """What is accounted for without the Rebalance to create (``Create.known_after`` with)."""
    spread: Spread | None
    sustained_since: float | None
    """Since when the disks have been skewed in every sample (None: not skewed now)."""
    cooldown_until: float | None
    active: str | None
    """The Rebalance of the cluster that has not finished, if any."""
    message: str
    absorbed: bool = field(default=False)
    """``known`` changed without a Rebalance (an added broker or dir whose trigger is off)."""


def held_since(
    samples: Sequence[Sample], holds: Callable[[Sample], bool], max_gap_s: float
) -> float | None:
    """The time of the first sample of the run of samples, ending with the newest, in which
    ``holds`` is true with no gap over ``max_gap_s``; None when it is false in the newest."""
    start: float | None = None
    for i in range(len(samples) - 1, -1, -1):
        if not holds(samples[i]):
            break
        if start is not None and start - samples[i].time > max_gap_s:
            break
        start = samples[i].time
    return start


def sustained(since: float | None, latest: float, window_s: float) -> bool:
    return since is not None and since <= latest - window_s


def cooldown_until(
    cfg: TriggerConfig, rebalances: Sequence[RebalanceView], last_triggered_at: float | None
) -> float | None:
    """The end of the cooldown: ``cooldownSeconds`` after the later of the creation and the end
    of the newest triggered Rebalance (or the one remembered in status, if since deleted)."""
    refs = [
        r.created if r.finished_at is None else max(r.created, r.finished_at)
        for r in rebalances
        if r.triggered
    ]
    if last_triggered_at is not None:
        refs.append(last_triggered_at)
    return max(refs) + cfg.cooldown_s if refs else None


def _fmt(pp: float) -> str:
    return f"{pp:.1f} pp"


@dataclass(frozen=True, slots=True)
class _Accounted:
    """``Known`` brought up to the newest sample, and what is added beyond it."""

    known: Known
    added_brokers: frozenset[int]
    added_dirs: frozenset[str]
    absorbed: bool
    """An added broker or dir was accounted for at once (its trigger is not enabled)."""


def _account(known: Known | None, latest: Sample, cfg: TriggerConfig) -> _Accounted:
    """What is accounted for after ``latest``: everything, the first time (``known`` None;
    the caller waits for a sample without a problem); brokers scaled away and dirs removed are
    forgotten (a later one is added anew); an addition whose trigger is off is absorbed."""
    if known is None:
        known = Known(latest.expected_brokers, latest.dirs_on_every_broker)
    elif latest.problem is None:
        present = frozenset(d.log_dir for d in latest.disks)
        known = Known(known.brokers & latest.expected_brokers, known.log_dirs & present)
    added_brokers = latest.expected_brokers - known.brokers
    added_dirs = latest.dirs_on_every_broker - known.log_dirs
    absorbed = False
    if added_brokers and BalanceTrigger.BROKER_ADDED not in cfg.triggers:
        known = replace(known, brokers=known.brokers | added_brokers)
        added_brokers, absorbed = frozenset(), True
    if added_dirs and BalanceTrigger.DISK_ADDED not in cfg.triggers:
        known = replace(known, log_dirs=known.log_dirs | added_dirs)
        added_dirs, absorbed = frozenset(), True
    return _Accounted(known, added_brokers, added_dirs, absorbed)


def _broker_added(
    samples: Sequence[Sample], cfg: TriggerConfig, acc: _Accounted, waiting: list[str]
) -> Create | None:
    """``add-brokers`` for the added brokers once they answered for the whole window."""
    added = acc.added_brokers
    if not added:
        return None
    latest = samples[-1]
    since = held_since(samples, lambda s: s.problem is None and added <= s.answered, cfg.max_gap_s)
    ids = tuple(sorted(added))
    if not sustained(since, latest.time, cfg.window_s):
        waiting.append(f"broker {', '.join(map(str, ids))} added: waiting for the window")
        return None
    return Create(
        BalanceTrigger.BROKER_ADDED,
        RebalanceMode.ADD_BROKERS,
        ids,
        f"broker {', '.join(map(str, ids))} added",
        replace(acc.known, brokers=acc.known.brokers | added),
    )


def _dir_added(
    samples: Sequence[Sample], cfg: TriggerConfig, acc: _Accounted, waiting: list[str]
) -> Create | None:
    """``dirs-only`` for the added dir names once every broker had them for the window."""
    added = acc.added_dirs
    if not added:
        return None
    since = held_since(
        samples,
        lambda s: s.problem is None and added <= s.dirs_on_every_broker,
        cfg.max_gap_s,
    )
    names = ", ".join(sorted(added))
    if not sustained(since, samples[-1].time, cfg.window_s):
        waiting.append(f"log dir {names} added: waiting for the window")
        return None
    return Create(
        BalanceTrigger.DISK_ADDED,
        RebalanceMode.DIRS_ONLY,
        (),
        f"log dir {names} added",
        replace(acc.known, log_dirs=acc.known.log_dirs | added),
    )


def _imbalance(
    latest: Sample,
    cfg: TriggerConfig,
    known: Known,
    skewed_since: float | None,
    waiting: list[str],
) -> Create | None:
    """``dirs-only`` (``full`` when the brokers themselves are apart) once the disks have been
    skewed for the whole window."""
    sp = latest.spread
    if not sustained(skewed_since, latest.time, cfg.window_s):
        if skewed_since is not None:
            left = skewed_since + cfg.window_s - latest.time
            waiting.append(
                f"spread {_fmt(sp.worst_pp)} over {_fmt(cfg.threshold_pp)}: "
                f"{math.ceil(left)} s of the window left"
            )
        return None
    across = sp.broker_pp > cfg.threshold_pp + EPSILON_PP
    return Create(
        BalanceTrigger.DISK_IMBALANCE,
        RebalanceMode.FULL if across else RebalanceMode.DIRS_ONLY,
        (),
        (
            f"brokers {_fmt(sp.broker_pp)} apart"
            if across
            else f"disks of broker {sp.worst_broker} {_fmt(sp.disk_pp)} apart"
        )
        + f" (threshold {_fmt(cfg.threshold_pp)}) for {cfg.window_s:g} s",
        known,
    )


def _wanted(
    samples: Sequence[Sample], cfg: TriggerConfig, acc: _Accounted, skewed_since: float | None
) -> tuple[Create | None, list[str]]:
    """What would be created before the gates (the triggers in their order), and what the
    triggers that do not hold yet are waiting for."""
    waiting: list[str] = []
    want = _broker_added(samples, cfg, acc, waiting)
    if want is None:
        want = _dir_added(samples, cfg, acc, waiting)
    if want is None and BalanceTrigger.DISK_IMBALANCE in cfg.triggers:
        want = _imbalance(samples[-1], cfg, acc.known, skewed_since, waiting)
    return want, waiting


def _held_back(
    want: Create | None,
    waiting: list[str],
    latest: Sample,
    cfg: TriggerConfig,
    now: float,
    active: RebalanceView | None,
    until: float | None,
) -> str | None:
    """The gates: why nothing is created now (None: ``want`` is)."""
    if now - latest.time > cfg.max_gap_s:
        return "no recent sample"
    if latest.problem is not None:
        return f"not triggering: {latest.problem}"
    if want is None:
        sp = latest.spread
        return (
            "; ".join(waiting) or f"spread {_fmt(sp.worst_pp)}, threshold {_fmt(cfg.threshold_pp)}"
        )
    if active is not None:
        return (
            f"{want.reason}: waiting for Rebalance {active.name} ({active.phase or 'new'}) "
            "to finish"
        )
    if until is not None and now < until:
        return f"{want.reason}: cooling down for {math.ceil(until - now)} s"
    return None


def decide(
    samples: Sequence[Sample],
    cfg: TriggerConfig,
    now: float,
    known: Known | None,
    rebalances: Sequence[RebalanceView] = (),
    last_triggered_at: float | None = None,
) -> Decision:
    """Whether to create a Rebalance now (``Decision.create``), and what the status says:
    account for the newest sample, find what a trigger wants, then pass it through the gates."""
    active = next((r for r in rebalances if not r.finished), None)
    active_name = active.name if active is not None else None
    until = cooldown_until(cfg, rebalances, last_triggered_at)
    if not samples:
        return Decision(None, known, None, None, until, active_name, "no sample yet")
    latest = samples[-1]
    skewed_since = held_since(
        samples,
        lambda s: s.problem is None and s.spread.worst_pp > cfg.threshold_pp + EPSILON_PP,
        cfg.max_gap_s,
    )

    def decision(create: Create | None, known_: Known | None, message: str, **kw: bool) -> Decision:
        return Decision(
            create, known_, latest.spread, skewed_since, until, active_name, message, **kw
        )

    if known is None and latest.problem is not None:
        return decision(None, None, f"waiting for every broker and dir: {latest.problem}")
    acc = _account(known, latest, cfg)
    want, waiting = _wanted(samples, cfg, acc, skewed_since)
    why = _held_back(want, waiting, latest, cfg, now, active, until)
    if why is not None or want is None:
        return decision(None, acc.known, why or "", absorbed=acc.absorbed)
    return decision(want, acc.known, f"creating a {want.mode.value} Rebalance: {want.reason}")


# -- the Spark job's metric history -----------------------------------------------------------

METRIC_COLUMNS = ("cluster", "time", "topic", "partition", "size", "bytes_in")
"""The columns ``python -m jbod_spark.job --metrics`` reads (``spark_job.METRICS_SQL``)."""


def metric_history_rows(samples: Iterable[Sample], cluster: str) -> list[dict[str, object]]:
    """The history as the Spark job's metric history: one row per partition per sample, time in
    epoch seconds. ``bytes_in`` is the partition's growth since the previous sample, never
    negative: describe-log-dirs carries no byte rate, and growth is what was written minus what
    retention deleted, so it is a lower bound of the bytes in."""
    rows: list[dict[str, object]] = []
    prev: dict[tuple[str, int], tuple[float, int]] = {}
    for s in samples:
        for p in s.partitions:
            key = (p.topic, p.partition)
            before = prev.get(key)
            rate = 0.0
            if before is not None and s.time > before[0]:
                rate = max(0.0, (p.size - before[1]) / (s.time - before[0]))
            prev[key] = (s.time, p.size)
            rows.append(
                {
                    "cluster": cluster,
                    "time": s.time,
                    "topic": p.topic,
                    "partition": p.partition,
                    "size": p.size,
                    "bytes_in": rate,
                }
            )
    return rows
