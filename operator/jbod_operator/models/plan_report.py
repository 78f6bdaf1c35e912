"""A placement plan's report: what a person reviews before approving it.

Written by the planner (``jbod_spark``) as ``report.json`` and ``report.txt`` and read by the
operator (the Rebalance's proposal) and ``jbod-ctl``, which import no Spark and no numpy: so
the report's shape lives here, with the other models, and the planner fills it in.

Fields are camelCase in JSON, snake_case in Python (like the project's custom resources).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .common import CamelModel, human_bytes

BandScope = Literal["all", "none"]
"""Which brokers a proposal's band applies to: every broker in every Rebalance mode (the
remove modes hold it over the disks that stay) or none (the planner's targeted mode only
relieves)."""


class ConstraintCheck(CamelModel):
    name: str
    ok: bool
    detail: str = ""


class DirReport(CamelModel):
    broker_id: int
    name: str
    path: str
    capacity_bytes: int
    used_before: int
    used_after: int
    util_before: float
    util_after: float
    live: bool
    cordoned: bool
    drained: bool


class BrokerReport(CamelModel):
    broker_id: int
    rack: str | None
    live: bool
    capacity_bytes: int
    used_before: int
    used_after: int
    replicas_before: int
    replicas_after: int
    leaders_before: int
    leaders_after: int
    max_dir_util_before: float
    max_dir_util_after: float
    spread_pp_before: float
    spread_pp_after: float


class Summary(CamelModel):
    """The figures a person approves a plan on.

    Spreads are max - min utilisation in percentage points, over the disks that count (live,
    not cordoned or drained, of a live broker that stays): ``worst_spread_pp`` is the largest
    spread between the disks of one broker (what the band bounds), ``broker_spread_pp`` the
    spread of the brokers' utilisations, ``disk_spread_pp`` that of every disk of the cluster.
    """

    largest_util_before: float
    largest_util_after: float
    worst_spread_pp_before: float
    worst_spread_pp_after: float
    std_pp_before: float
    std_pp_after: float
    dirs_above_threshold_before: int
    dirs_above_threshold_after: int
    bytes_moved: int
    bytes_moved_inter_broker: int
    bytes_moved_intra_broker: int
    lower_bound_bytes: int
    replica_moves_inter_broker: int
    """Moves between brokers (a replica changes broker, landing on a named disk)."""
    replica_moves_intra_broker: int
    """Moves between the disks of one broker."""
    leader_moves: int
    partitions_changed: int
    broker_spread_pp_before: float = 0.0
    broker_spread_pp_after: float = 0.0
    disk_spread_pp_before: float = 0.0
    disk_spread_pp_after: float = 0.0
    balance_band_pp: float = 0.0
    """The target: the largest accepted spread between the disks of one broker."""
    capacity_threshold_percent: float = 100.0
    """The target: no disk above this utilisation."""
    band_scope: BandScope = "all"
    """The brokers the band applies to in this mode (the planner's, :data:`BandScope`); the
    end state is held to the same scope."""
    feasible: bool
    """The plan reaches the targets (band, capacity threshold) and keeps every hard constraint.
    When false, ``best_spread_pp`` is the spread it does reach and ``infeasible_reasons`` say
    why no better one was reached: never a target the plan does not meet."""
    best_spread_pp: float = 0.0
    """The worst spread between the disks of one broker in scope, after the plan."""
    infeasible_reasons: list[str] = Field(default_factory=list)


class GoalReport(CamelModel):
    """One goal of the plan, before and after (``jbod_operator.models.goals``).

    A distribution goal measures one figure per broker (``metric``, in ``unit``) against
    bounds around the average; ``violations`` counts what is outside them (brokers, or
    topic-broker pairs for TopicReplicaDistributionGoal). A hard goal counts what breaks it
    (partitions, brokers or disks). ``met`` is recomputed from the plan's placement, never
    taken from the planner's intentions."""

    name: str
    hard: bool
    priority: int
    """Position in the order the goals were worked on (0 = highest); -1: reported only."""
    metric: str
    unit: str = ""
    average: float = 0.0
    lower: float = 0.0
    upper: float = 0.0
    min_before: float = 0.0
    max_before: float = 0.0
    min_after: float = 0.0
    max_after: float = 0.0
    violations_before: int = 0
    violations_after: int = 0
    met_before: bool = True
    met_after: bool = True
    required: bool = False
    """The proposal fails when this goal is not met (every hard goal, and the soft goals the
    Rebalance names in ``requiredGoals``)."""
    reason: str = ""
    """Why the goal is not met after the plan (empty when it is)."""

    def line(self) -> str:
        verdict = "met" if self.met_after else "NOT met"
        kind = "hard" if self.hard else "soft"
        if self.hard:
            fig = f"{self.violations_before} -> {self.violations_after} {self.metric}"
        else:
            fig = (
                f"{self.metric} {self.min_before:.4g}..{self.max_before:.4g} -> "
                f"{self.min_after:.4g}..{self.max_after:.4g} (bounds {self.lower:.4g}.."
                f"{self.upper:.4g}{' ' + self.unit if self.unit else ''}; "
                f"{self.violations_before} -> {self.violations_after} outside)"
            )
        why = f": {self.reason}" if self.reason else ""
        return f"  [{verdict}] {self.name} ({kind}): {fig}{why}"


def _pct(x: float) -> str:
    return f"{100.0 * x:5.1f}%"


class PlanReport(CamelModel):
    cluster_name: str
    mode: str
    plan_id: str
    options: dict[str, Any]
    summary: Summary
    constraints: list[ConstraintCheck]
    brokers: list[BrokerReport]
    dirs: list[DirReport]
    notes: list[str] = Field(default_factory=list)
    goals: list[GoalReport] = Field(default_factory=list)
    """Every goal, hard ones first, then the soft ones in the order they were worked on."""

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.constraints)

    def unmet_goals(self, *, required: bool | None = None) -> list[GoalReport]:
        """The goals not met after the plan (only the required ones, or only the others)."""
        return [
            g
            for g in self.goals
            if not g.met_after and (required is None or g.required == required)
        ]

    def headline(self) -> list[str]:
        """The summary in a few lines: targets and whether they are met, moves, bytes, spreads."""
        s = self.summary
        if s.feasible:
            verdict = (
                f"feasible: every disk at or under {s.capacity_threshold_percent:.0f}%, "
                f"disks of each broker within {s.balance_band_pp:.1f} pp "
                f"(worst {s.best_spread_pp:.1f} pp)"
            )
        else:
            verdict = (
                f"NOT feasible: best spread {s.best_spread_pp:.1f} pp "
                f"(band {s.balance_band_pp:.1f} pp), largest disk "
                f"{s.largest_util_after:.1%} (threshold {s.capacity_threshold_percent:.0f}%)"
            )
        lines = [
            f"plan {self.plan_id} for cluster {self.cluster_name} (mode {self.mode})",
            f"  {verdict}",
        ]
        lines += [f"    why: {r}" for r in s.infeasible_reasons]
        lines += [
            f"  moves: {s.replica_moves_inter_broker} between brokers "
            f"({human_bytes(s.bytes_moved_inter_broker)}), {s.replica_moves_intra_broker} "
            f"between disks ({human_bytes(s.bytes_moved_intra_broker)})",
            f"         {s.leader_moves} leader changes, {s.partitions_changed} partitions change",
            f"  bytes to move {human_bytes(s.bytes_moved)} ({s.bytes_moved} B; lower bound "
            f"{s.lower_bound_bytes} B)",
            "  spread in pp, before -> after:",
            f"    disks of one broker (worst) {s.worst_spread_pp_before:5.1f} -> "
            f"{s.worst_spread_pp_after:.1f}",
            f"    brokers                     {s.broker_spread_pp_before:5.1f} -> "
            f"{s.broker_spread_pp_after:.1f}",
            f"    all disks                   {s.disk_spread_pp_before:5.1f} -> "
            f"{s.disk_spread_pp_after:.1f} (std {s.std_pp_before:.1f} -> {s.std_pp_after:.1f})",
            f"  largest disk {s.largest_util_before:.1%} -> {s.largest_util_after:.1%}; above "
            f"threshold {s.dirs_above_threshold_before} -> {s.dirs_above_threshold_after}",
        ]
        return lines

    def broker_table(self) -> list[str]:
        """One line per broker: bytes, replicas, leaders and disk spread, before -> after."""
        out = [
            "  broker  rack        used before -> after          replicas      leaders"
            "       spread pp"
        ]
        for b in self.brokers:
            out.append(
                f"  {b.broker_id:>6}  {(b.rack or '-')[:10]:<10}  "
                f"{human_bytes(b.used_before):>10} -> {human_bytes(b.used_after):<10}  "
                f"{b.replicas_before:>5} -> {b.replicas_after:<5}  "
                f"{b.leaders_before:>4} -> {b.leaders_after:<4}  "
                f"{b.spread_pp_before:5.1f} -> {b.spread_pp_after:.1f}"
                f"{'' if b.live else '  (dead)'}"
            )
        return out

    def disk_table(self, limit: int | None = None) -> list[str]:
        """One line per disk, grouped by broker: capacity, use before -> after."""
        out = ["  broker  disk          capacity       before ->      after"]
        shown = self.dirs if limit is None else self.dirs[:limit]
        for d in shown:
            flags = [
                f
                for f, on in (
                    ("offline", not d.live),
                    ("cordoned", d.cordoned),
                    ("drained", d.drained),
                )
                if on
            ]
            out.append(
                f"  {d.broker_id:>6}  {d.name[:10]:<10}  {human_bytes(d.capacity_bytes):>10}  "
                f"{_pct(d.util_before)} {human_bytes(d.used_before):>10} -> "
                f"{_pct(d.util_after)} {human_bytes(d.used_after):>10}"
                f"{'  (' + ', '.join(flags) + ')' if flags else ''}"
            )
        if len(shown) < len(self.dirs):
            out.append(f"  ... {len(self.dirs) - len(shown)} more disks in report.json")
        return out

    def text(self, *, tables: bool = True, max_disks: int | None = 500) -> str:
        """``report.txt``: the headline, the checks and notes, then (``tables``) a line per
        broker and per disk, at most ``max_disks`` of them (report.json has every one)."""
        lines = self.headline()
        for c in self.constraints:
            lines.append(
                f"  [{'ok' if c.ok else 'FAIL'}] {c.name}{': ' + c.detail if c.detail else ''}"
            )
        if self.goals:
            lines += ["  goals, highest priority first:", *(g.line() for g in self.goals)]
        lines += [f"  note: {n}" for n in self.notes]
        if tables and self.brokers:
            lines += ["", *self.broker_table()]
        if tables and self.dirs:
            lines += ["", *self.disk_table(max_disks)]
        return "\n".join(lines)
