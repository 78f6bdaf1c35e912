"""A placement plan's report: what a person reviews before approving it.

Written by the planner (``jbod_spark``) as ``report.json`` and ``report.txt`` and read by the
operator (the Rebalance's proposal) and ``jbod-ctl``, which import no Spark and no numpy: so
the report's shape lives here, with the other models, and the planner fills it in.

Fields are camelCase in JSON, snake_case in Python (like the project's custom resources).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .common import CamelModel


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
    replica_moves_intra_broker: int
    leader_moves: int
    partitions_changed: int


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

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.constraints)

    def text(self) -> str:
        s = self.summary
        lines = [
            f"plan {self.plan_id} for cluster {self.cluster_name} (mode {self.mode})",
            f"  largest dir utilisation {s.largest_util_before:.1%} -> {s.largest_util_after:.1%}",
            f"  worst broker spread {s.worst_spread_pp_before:.1f} pp -> "
            f"{s.worst_spread_pp_after:.1f} pp; std {s.std_pp_before:.1f} -> "
            f"{s.std_pp_after:.1f} pp",
            f"  bytes to move {s.bytes_moved} (inter-broker {s.bytes_moved_inter_broker}, "
            f"intra-broker {s.bytes_moved_intra_broker}); lower bound {s.lower_bound_bytes}",
            f"  moves: {s.replica_moves_inter_broker} inter-broker, "
            f"{s.replica_moves_intra_broker} intra-broker, {s.leader_moves} leader",
        ]
        for c in self.constraints:
            lines.append(
                f"  [{'ok' if c.ok else 'FAIL'}] {c.name}{': ' + c.detail if c.detail else ''}"
            )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)
