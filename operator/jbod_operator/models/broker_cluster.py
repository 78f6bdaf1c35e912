"""BrokerCluster: a set of JBOD brokers, each with one PersistentVolumeClaim per log dir."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StringConstraints, model_validator

from .common import (
    API_VERSION,
    BrokerId,
    CamelModel,
    Condition,
    DnsLabel,
    Quantity,
    ResourceMeta,
    StrayReplica,
)

ConfigKey = Annotated[
    str, StringConstraints(min_length=1, max_length=255, pattern=r"^[a-z0-9.\-_]+$")
]


class LogDir(CamelModel):
    """One disk of every broker: a volumeClaimTemplate ``data-<name>``."""

    name: DnsLabel
    size: Quantity
    storage_class_name: Annotated[str, StringConstraints(min_length=1, max_length=253)] | None = (
        None
    )


class Resources(CamelModel):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class BalanceTrigger(StrEnum):
    """What continuous detection may create a Rebalance for (the value of the Rebalance's label
    ``jbod.io/rebalance-trigger``)."""

    DISK_IMBALANCE = "disk-imbalance"
    """The disk spread stayed above the threshold for the whole window (dirs-only, or full
    when the spread is across brokers: dirs-only cannot move bytes between brokers)."""
    BROKER_ADDED = "broker-added"
    """Brokers joined the cluster (add-brokers with their ids)."""
    DISK_ADDED = "disk-added"
    """A log dir joined every broker (dirs-only)."""


MAX_HISTORY_SAMPLES = 10_000
"""The longest history of describe-log-dirs samples the operator keeps per cluster (memory:
one sample is a few numbers per disk, plus one size per partition for the Spark job)."""
MAX_BALANCE_SECONDS = 7 * 24 * 3600
"""A week: the longest window, cooldown or sample interval a person would mean."""
MAX_STRAYS = 1000
"""Stray replicas the BrokerCluster's status lists (each is ~100 bytes): the first ones by
broker, topic and partition; the controller deletes every one it finds either way."""


class BalanceSpec(CamelModel):
    """Continuous detection of disk imbalance (off by default): the operator samples every
    broker's describe-log-dirs, keeps a bounded history, and creates a Rebalance when a trigger
    holds. The rules are ``plan.balance_trigger``'s."""

    model_config = CamelModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "self.historySamples * self.sampleIntervalSeconds > self.windowSeconds",
                    "message": "historySamples x sampleIntervalSeconds must be longer than "
                    "windowSeconds: a shorter history can never show a skew sustained for "
                    "the whole window",
                },
            ]
        }
    }

    enabled: bool = False
    disk_spread_threshold_percent: Annotated[
        float,
        Field(
            ge=0.5,
            le=100,
            description="Percentage points of utilisation between the fullest and the emptiest "
            "disk of a broker, or between the fullest and the emptiest broker, above which the "
            "disks are skewed.",
            # The API server checks a fractional minimum against a whole number as a whole
            # number (0 >= 0.5 passed): CEL compares as doubles.
            json_schema_extra={
                "x-kubernetes-validations": [
                    {"rule": "self >= 0.5", "message": "must be at least 0.5 percentage points"}
                ]
            },
        ),
    ] = 10  # written whole: Helm renders a CRD's 10.0 as 10, and the chart's copy must be equal
    window_seconds: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_BALANCE_SECONDS,
            description="How long a trigger must hold, in every sample, before a Rebalance is "
            "created (a burst of writes or a broker starting up does not trigger).",
        ),
    ] = 600
    cooldown_seconds: Annotated[
        int,
        Field(
            ge=0,
            le=MAX_BALANCE_SECONDS,
            description="No Rebalance is created for this long after a triggered one was "
            "created or finished.",
        ),
    ] = 3600
    triggers: Annotated[
        list[BalanceTrigger],
        Field(
            max_length=3,
            description="Which events create a Rebalance: disk-imbalance, broker-added, "
            "disk-added.",
            json_schema_extra={"x-kubernetes-list-type": "set"},
        ),
    ] = Field(default_factory=lambda: list(BalanceTrigger))
    auto_approve: Annotated[
        bool,
        Field(description="The created Rebalances run without the approve annotation."),
    ] = False
    sample_interval_seconds: Annotated[
        int,
        Field(ge=1, le=3600, description="How often describe-log-dirs is sampled."),
    ] = 30
    history_samples: Annotated[
        int,
        Field(
            ge=2,
            le=MAX_HISTORY_SAMPLES,
            description="Samples kept (the oldest dropped first); also the Spark job's metric "
            "history.",
        ),
    ] = 240

    @model_validator(mode="after")
    def _history_covers_the_window(self) -> BalanceSpec:
        # The CRD's CEL rule, for objects that did not come through the API server.
        if self.history_samples * self.sample_interval_seconds <= self.window_seconds:
            raise ValueError(
                "historySamples x sampleIntervalSeconds must be longer than windowSeconds"
            )
        if len(set(self.triggers)) != len(self.triggers):
            raise ValueError("triggers must not repeat")
        return self


class BrokerClusterSpec(CamelModel):
    replicas: Annotated[int, Field(ge=1, le=1000, description="Number of brokers.")]
    log_dirs: Annotated[
        list[LogDir],
        Field(
            min_length=1,
            max_length=64,
            description="The disks of each broker; adding one is allowed, removing one only "
            "after a LogDirMove drained it.",
            json_schema_extra={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        ),
    ]
    racks: Annotated[
        list[DnsLabel] | None,
        Field(max_length=64, description="Broker i gets racks[i % len(racks)]."),
    ] = None
    image: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = (
        "ghcr.io/jbod-operator/broker:0.1.0"
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    config: Annotated[
        dict[ConfigKey, Annotated[str, StringConstraints(max_length=4096)]] | None,
        Field(
            max_length=200, description="Broker settings (Kafka names), e.g. min.insync.replicas."
        ),
    ] = None
    resources: Resources | None = None
    balance: Annotated[
        BalanceSpec | None,
        Field(description="Continuous detection of disk imbalance (off when absent)."),
    ] = None


class LogDirState(CamelModel):
    name: str
    path: str
    live: bool
    error: str | None = None
    used_percent: Annotated[int, Field(ge=0, le=100)] | None = None
    cordoned: bool = False
    replicas: int | None = None


class BrokerState(CamelModel):
    id: BrokerId
    rack: str | None = None
    live: bool
    url: str | None = None
    offline_log_dirs: list[str] = Field(default_factory=list)
    log_dirs: list[LogDirState] = Field(default_factory=list)


class TriggeredRebalance(CamelModel):
    """The last Rebalance continuous detection created."""

    name: str
    trigger: BalanceTrigger
    mode: str
    brokers: list[int] = Field(default_factory=list)
    created: str
    """RFC 3339."""
    reason: str = ""


class BalanceStatus(CamelModel):
    """What continuous detection sees (``status.balance``): for users, and for an operator
    that restarts (the brokers and dirs it knew, when the last Rebalance was triggered)."""

    last_sample_time: str | None = None
    samples: int | None = None
    """Samples in the history now (it is kept in the operator's memory)."""
    disk_spread_percent: float | None = None
    """The widest spread between the disks of one broker in the last sample (pp)."""
    worst_broker: int | None = None
    """The broker with that spread."""
    broker_spread_percent: float | None = None
    """The spread between the fullest and the emptiest broker in the last sample (pp)."""
    sustained_since: str | None = None
    """Since when the spread has been above the threshold in every sample."""
    cooldown_until: str | None = None
    active_rebalance: str | None = None
    """A Rebalance of this cluster that has not finished (no other is created meanwhile)."""
    last_triggered: TriggeredRebalance | None = None
    known_brokers: list[int] | None = None
    """The brokers already accounted for: one outside this list is an added broker."""
    known_log_dirs: list[str] | None = None
    """The log dirs already accounted for: one outside this list is an added disk."""
    message: str | None = None
    """What detection is waiting for, in words."""


class BrokerClusterStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    ready_brokers: int | None = None
    brokers: list[BrokerState] = Field(default_factory=list)
    log_dirs: list[str] = Field(
        default_factory=list, description="Log dir names currently in the StatefulSet."
    )
    balance: BalanceStatus | None = None
    stray_replicas: list[StrayReplica] = Field(default_factory=list, max_length=MAX_STRAYS)
    """Replicas the cluster controller knows a broker holds (or may hold) outside the
    partitions' state of record and has not deleted yet: left by a PartitionReassignment on a
    broker that was down (its ``status.strayReplicas``), or found on a broker whose deletion
    did not take. Each goes once a describe-log-dirs of its broker, after the controller's
    StopReplica, shows it gone. Written by the controller only (``plan.strays``)."""


def rack_for(racks: Sequence[str] | None, broker_id: int) -> str | None:
    """Broker *i*'s rack: ``racks[i % len(racks)]``, or None when the spec names no racks.

    The one home of the rule (the pod's start script in ``plan.builders`` computes the same in
    the pod). It depends on the ordinal only, so a broker keeps its rack across restarts and a
    scale-up spreads new brokers over the racks in turn."""
    if not racks:
        return None
    return racks[broker_id % len(racks)]


class BrokerCluster(CamelModel):
    # The whole object as read from the API: apiVersion/kind and server fields pass through.
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "BrokerCluster"
    plural: ClassVar[str] = "brokerclusters"
    short_names: ClassVar[list[str]] = ["bc", "jbc"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Brokers", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready-Brokers", "type": "integer", "jsonPath": ".status.readyBrokers"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {
            "name": "Degraded",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Degraded")].status',
        },
        {
            "name": "Disk-Spread",
            "type": "number",
            "priority": 1,
            "jsonPath": ".status.balance.diskSpreadPercent",
        },
        {
            "name": "Message",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = API_VERSION
    metadata: ResourceMeta
    spec: BrokerClusterSpec
    status: BrokerClusterStatus | None = None

    @property
    def broker_count(self) -> int:
        """The brokers there are: ``spec.replicas``, or more while a scale-down waits for the
        leaving brokers to be emptied (``plan.scale_down``; the cluster reconcile lists every
        broker there is in ``status.brokers``). Who observes replicas asks all of them; who
        places new ones uses ``spec.replicas``."""
        listed = len(self.status.brokers) if self.status is not None else 0
        return max(self.spec.replicas, listed)
