"""BrokerCluster: a set of JBOD brokers, each with one PersistentVolumeClaim per log dir."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StringConstraints

from .common import BrokerId, CamelModel, Condition, DnsLabel, Quantity, ResourceMeta

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


class BrokerClusterStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    ready_brokers: int | None = None
    brokers: list[BrokerState] = Field(default_factory=list)
    log_dirs: list[str] = Field(
        default_factory=list, description="Log dir names currently in the StatefulSet."
    )


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
            "name": "Message",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = "jbod.io/v1alpha1"
    metadata: ResourceMeta
    spec: BrokerClusterSpec
    status: BrokerClusterStatus | None = None
