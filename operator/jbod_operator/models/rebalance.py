"""Rebalance: from "my disks are uneven" to "they are even" in one resource: a snapshot, a
proposal planned by the Spark job, reviewed, approved, and executed as PartitionReassignments
and LogDirMoves (Strimzi's KafkaRebalance workflow, with the disks in the plan).

The schema and the states live here; the transitions are decided in
``jbod_operator.plan.rebalance`` (one table, pure) and carried out by
``jbod_operator.handlers.rebalances``. The execution limits are PartitionReassignment's own
types (``models.reassignment``): one home for each bound, handed to the children as they are.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field, StringConstraints, model_validator

from .common import (
    ABSOLUTE_PATH,
    API_VERSION,
    BrokerId,
    CamelModel,
    Condition,
    ResourceMeta,
    ResourceName,
)
from .goals import HARD_GOALS, GoalName, GoalThresholds
from .plan_report import BandScope, GoalReport
from .reassignment import (
    DEFAULT_LEADER_MOVEMENTS,
    DEFAULT_MOVES_PER_BROKER,
    DEFAULT_PARTITION_MOVEMENTS,
    DEFAULT_REPLICA_MOVEMENTS,
    LeaderMovements,
    MovesPerBroker,
    PartitionMovements,
    ReplicaMovements,
    ThrottleRate,
)

COMMAND_ANNOTATION = "jbod.io/rebalance"
"""``approve | refresh | stop`` (Strimzi's ``strimzi.io/rebalance``); removed once acted on."""
TRIGGER_LABEL = "jbod.io/rebalance-trigger"
"""On a Rebalance made by continuous detection: ``disk-imbalance | broker-added | disk-added``."""
CLUSTER_LABEL = "jbod.io/cluster"
CHILD_LABEL = "jbod.io/rebalance"
"""On every child (PartitionReassignment, LogDirMove): the Rebalance that created it."""

_HARD_LIST = "[" + ", ".join(f"'{g}'" for g in HARD_GOALS) + "]"
"""The hard goals as a CEL list (the CRD refuses them in ``goals``)."""

MAX_NAMED = 1000
"""Brokers or disks one Rebalance may name (add/remove); part of the size budget."""
MAX_SUMMARY_ROWS = 1000
"""Brokers and disks listed one by one in ``status.proposal`` (the ConfigMap has them all)."""
MAX_CHILDREN = 500
"""Children listed in the status (each a resource of up to 500 partitions or 10,000 moves)."""


class RebalanceMode(StrEnum):
    """What the planner may move (its modes; ``remove-disks`` is its ``remove-dirs``)."""

    FULL = "full"
    ADD_BROKERS = "add-brokers"
    REMOVE_BROKERS = "remove-brokers"
    REMOVE_DISKS = "remove-disks"
    DIRS_ONLY = "dirs-only"


MODES_NAMING_BROKERS = frozenset({RebalanceMode.ADD_BROKERS, RebalanceMode.REMOVE_BROKERS})


class RebalanceCommand(StrEnum):
    """The values of the ``jbod.io/rebalance`` annotation."""

    APPROVE = "approve"
    REFRESH = "refresh"
    STOP = "stop"


class RebalancePhase(StrEnum):
    """The phase of a Rebalance (``status.phase``, and a condition of the same type).

    Allowed transitions (``plan.rebalance.PHASE_TRANSITIONS``, one test each)::

        (new)           -> PendingProposal  accepted: snapshot taken, planning job started
        (new)           -> NotReady         the spec names what the cluster lacks, or no cluster
        PendingProposal -> ProposalReady    the job wrote a proposal inside the band
        PendingProposal -> NotReady         the job failed, or the balance is infeasible
        PendingProposal -> Stopped          stop while planning: the job is cancelled
        ProposalReady   -> PendingProposal  refresh, or approved with a stale snapshot
        ProposalReady   -> Rebalancing      approved with a fresh snapshot: children created
        Rebalancing     -> Ready            every child succeeded, every disk in the band
        Rebalancing     -> NotReady         a child failed, not emptied, or disks outside the band
        Rebalancing     -> Stopped          stop: the children cancelled
        Ready           -> PendingProposal  refresh
        NotReady        -> PendingProposal  refresh
        Stopped         -> PendingProposal  refresh

    Staying in a phase is always allowed (a refresh while planning restarts the job).
    """

    PENDING_PROPOSAL = "PendingProposal"
    PROPOSAL_READY = "ProposalReady"
    REBALANCING = "Rebalancing"
    READY = "Ready"
    NOT_READY = "NotReady"
    STOPPED = "Stopped"


ENDED_PHASES = frozenset({RebalancePhase.READY, RebalancePhase.NOT_READY, RebalancePhase.STOPPED})
"""Nothing runs for them; only ``refresh`` moves them on."""

RebalanceDirRef = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=64, pattern=rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?|{ABSOLUTE_PATH})$"
    ),
]
"""A dir name (``a``), its folder (``data-a``) or its path."""


class RebalanceLogDir(CamelModel):
    broker_id: BrokerId
    log_dir: RebalanceDirRef


Percent = Annotated[
    float,
    Field(
        ge=0.1,
        le=100,
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self >= 0.1", "message": "must be at least 0.1 percent"}
            ]
        },
    ),
]
"""0.1 to 100 (whole numbers written as integers: Helm renders a YAML ``4.0`` as ``4``, and the
chart's copy of the CRD must equal ``crds/``). The CEL rule repeats the minimum: the API server
compares a value written as an integer (``0``) with the integer part of ``minimum`` and would
store it."""


class RebalanceSpec(CamelModel):
    model_config = CamelModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "!(self.mode in ['add-brokers', 'remove-brokers']) || "
                    "(has(self.brokers) && size(self.brokers) > 0)",
                    "message": "modes add-brokers and remove-brokers need brokers",
                },
                {
                    "rule": "self.mode != 'remove-disks' || "
                    "(has(self.logDirs) && size(self.logDirs) > 0)",
                    "message": "mode remove-disks needs logDirs",
                },
                {
                    "rule": "(!has(self.goals) || self.goals.all(g, !(g in "
                    + _HARD_LIST
                    + "))) && (!has(self.requiredGoals) || self.requiredGoals.all(g, !(g in "
                    + _HARD_LIST
                    + ")))",
                    "message": "goals and requiredGoals name soft goals only: the hard goals "
                    "(" + ", ".join(HARD_GOALS) + ") always come first and are always required",
                },
            ]
        }
    }

    cluster_name: ResourceName
    mode: RebalanceMode = RebalanceMode.FULL
    brokers: Annotated[
        list[BrokerId] | None,
        Field(
            max_length=MAX_NAMED,
            description="add-brokers: the new (empty) brokers; remove-brokers: the brokers to "
            "empty.",
            json_schema_extra={"x-kubernetes-list-type": "set"},
        ),
    ] = None
    log_dirs: Annotated[
        list[RebalanceLogDir] | None,
        Field(
            max_length=MAX_NAMED,
            description="remove-disks: the disks to empty (a dir name, data-<name> or path).",
            json_schema_extra={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["brokerId", "logDir"],
            },
        ),
    ] = None
    balance_band_percent: Annotated[
        Percent,
        Field(
            description="Accepted spread of disk utilisation within each broker, in "
            "percentage points: the proposal and the end state must be inside it."
        ),
    ] = 4
    capacity_threshold_percent: Annotated[
        Percent,
        Field(description="No disk may end, or pass mid-way, above this utilisation."),
    ] = 80
    goals: Annotated[
        list[GoalName] | None,
        Field(
            max_length=len(GoalName),
            description="The soft goals to work on, highest priority first (Cruise Control's "
            "names; default: IntraBrokerDiskUsageDistributionGoal, DiskUsageDistributionGoal, "
            "ReplicaDistributionGoal, LeaderReplicaDistributionGoal, "
            "TopicReplicaDistributionGoal, LeaderBytesInDistributionGoal, PotentialNwOutGoal). "
            "The hard goals (RackAwareGoal, ReplicaCapacityGoal, DiskCapacityGoal, "
            "OneReplicaPerBrokerGoal) always come first.",
            json_schema_extra={"x-kubernetes-list-type": "set"},
        ),
    ] = None
    required_goals: Annotated[
        list[GoalName] | None,
        Field(
            max_length=len(GoalName),
            description="Soft goals the proposal must meet to be ready; any other soft goal "
            "not met is named in the condition's message.",
            json_schema_extra={"x-kubernetes-list-type": "set"},
        ),
    ] = None
    goal_thresholds: Annotated[
        GoalThresholds | None,
        Field(description="The distribution goals' thresholds, relative to the average."),
    ] = None
    max_concurrent_replica_movements: ReplicaMovements = DEFAULT_REPLICA_MOVEMENTS
    max_concurrent_partition_movements: PartitionMovements = DEFAULT_PARTITION_MOVEMENTS
    max_concurrent_leader_movements: LeaderMovements = DEFAULT_LEADER_MOVEMENTS
    max_concurrent_moves_per_broker: MovesPerBroker = DEFAULT_MOVES_PER_BROKER
    throttle_bytes_per_second: ThrottleRate | None = None
    auto_approve: Annotated[
        bool,
        Field(description="Run the proposal as soon as it is ready, without the annotation."),
    ] = False

    @model_validator(mode="after")
    def _named_what_the_mode_needs(self) -> RebalanceSpec:
        """The CRD's rules for objects that do not come from the API server (tests, tools)."""
        if self.mode in MODES_NAMING_BROKERS and not self.brokers:
            raise ValueError("modes add-brokers and remove-brokers need brokers")
        if self.mode == RebalanceMode.REMOVE_DISKS and not self.log_dirs:
            raise ValueError("mode remove-disks needs logDirs")
        named = [*(self.goals or []), *(self.required_goals or [])]
        if any(g in HARD_GOALS for g in named):
            raise ValueError("goals and requiredGoals name soft goals only")
        return self


class BrokerSummary(CamelModel):
    """One broker before and after the proposal (spreads and utilisation in percent)."""

    broker_id: int
    spread_before: float
    spread_after: float
    replicas_before: int
    replicas_after: int
    leaders_before: int
    leaders_after: int
    used_bytes_before: int
    used_bytes_after: int


class DiskSummary(CamelModel):
    broker_id: int
    name: str
    utilisation_before: float
    utilisation_after: float


class GoalSummary(CamelModel):
    """One goal of the proposal: met or not after it, its bounds and the worst brokers'
    figures, and why when it is not met (the ConfigMap's report.json has every field)."""

    name: str
    hard: bool
    met: bool
    required: bool = False
    violations_before: int = 0
    violations_after: int = 0
    lower: float = 0.0
    upper: float = 0.0
    min_after: float = 0.0
    max_after: float = 0.0
    reason: str = ""

    @classmethod
    def of(cls, g: GoalReport) -> GoalSummary:
        return cls(
            name=g.name,
            hard=g.hard,
            met=g.met_after,
            required=g.required,
            violations_before=g.violations_before,
            violations_after=g.violations_after,
            lower=round(g.lower, 6),
            upper=round(g.upper, 6),
            min_after=round(g.min_after, 6),
            max_after=round(g.max_after, 6),
            reason=g.reason[:500],
        )


class ProposalSummary(CamelModel):
    """What a person reviews before approving (the ConfigMap holds the whole plan)."""

    plan_id: str
    moves: int
    """Replica moves in all: between brokers plus between disks."""
    moves_between_brokers: int
    moves_between_disks: int
    leader_moves: int
    partitions_changed: int
    bytes_to_move: int
    worst_spread_before: float
    """The largest per-broker disk spread before, in percentage points."""
    worst_spread_after: float
    largest_utilisation_before: float
    largest_utilisation_after: float
    feasible: bool
    """Inside the band with every constraint kept; False: the figures are the best achievable."""
    band_scope: BandScope = "all"
    """The brokers the band applies to in this mode (the planner's, ``BandScope``); the end
    state is held to the same scope."""
    problems: list[str] = Field(default_factory=list)
    brokers: list[BrokerSummary] = Field(default_factory=list)
    disks: list[DiskSummary] = Field(default_factory=list)
    truncated: bool = False
    """More brokers or disks than listed here (all are in the ConfigMap's report.json)."""
    waves: int = 0
    """Groups of children run one after the other so no disk passes the threshold mid-way."""
    goals: list[GoalSummary] = Field(default_factory=list)
    """Every goal, hard ones first, then the soft ones in priority order."""

    def unmet_soft_goals(self) -> list[GoalSummary]:
        return [g for g in self.goals if not g.hard and not g.met]


class ChildStatus(CamelModel):
    kind: str
    name: str
    wave: int
    phase: str | None = None
    bytes_to_move: int = 0
    bytes_moved: int = 0


class DiskMeasure(CamelModel):
    """A broker's disk spread measured from a fresh describe-log-dirs (the end state)."""

    broker_id: int
    spread: float
    largest_utilisation: float


class RebalanceStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    phase: RebalancePhase | None = None
    plans: int = 0
    """Proposals planned so far (each refresh or re-plan adds one): names the job and children."""
    job: str | None = None
    """The planning job running or last run."""
    snapshot_time: str | None = None
    snapshot_fingerprint: dict[str, str] | None = None
    """Per object the proposal was planned from (``BrokerCluster/x``, ``Topic/y``): a digest of
    what placement depends on; a proposal whose cluster no longer matches is re-planned."""
    approved: bool = False
    """Approved (annotation or autoApprove): runs once a fresh proposal is ready."""
    replanned_because: str | None = None
    proposal: ProposalSummary | None = None
    proposal_config_map: str | None = None
    wave: int = 0
    """The wave of children running (from 1), or the last one."""
    children: list[ChildStatus] = Field(default_factory=list)
    bytes_to_move: int = 0
    bytes_moved: int = 0
    progress_percent: int | None = None
    rate_bytes_per_second: int | None = None
    eta_seconds: int | None = None
    measured: list[DiskMeasure] | None = None
    """The end state from a fresh describe-log-dirs: what Ready (or out of band) is based on."""
    start_time: str | None = None
    completion_time: str | None = None


class Rebalance(CamelModel):
    # The whole object as read from the API: apiVersion/kind and server fields pass through.
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "Rebalance"
    plural: ClassVar[str] = "rebalances"
    short_names: ClassVar[list[str]] = ["rb"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterName"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
        {
            "name": "Moves",
            "type": "integer",
            "description": "Replica moves between brokers and between disks",
            "jsonPath": ".status.proposal.moves",
        },
        {"name": "Progress", "type": "integer", "jsonPath": ".status.progressPercent"},
        {"name": "ETA", "type": "integer", "jsonPath": ".status.etaSeconds"},
        {
            "name": "Message",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.status=="True")].message',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = API_VERSION
    metadata: ResourceMeta
    spec: RebalanceSpec
    status: RebalanceStatus | None = None
