"""KafkaCluster: an Apache Kafka cluster the operator does not run, named by its bootstrap
servers, with what its Admin API reports about brokers and log dirs in the status.

A kind of its own rather than a mode of BrokerCluster: a BrokerCluster's spec is the pods,
disks, images and resources the operator runs, and none of it applies to a cluster someone
else runs; a KafkaCluster's spec is how to reach that cluster (bootstrap servers, security
protocol, SASL and TLS credentials from Secrets) and its status is only what Kafka reports
(docs/architecture.md, "A Kafka cluster the operator does not run"). The status is refreshed
by ``handlers.kafka_clusters`` on a timer; the conditions are decided in
``plan.kafka_cluster`` (pure).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import Field, StringConstraints, model_validator

from .broker_cluster import BalanceSpec, BalanceStatus
from .common import (
    API_VERSION,
    BrokerId,
    CamelModel,
    Condition,
    Quantity,
    ResourceMeta,
    ResourceName,
)

MAX_BOOTSTRAP_SERVERS = 64

# host:port, the host a DNS name, an IPv4 address or a bracketed IPv6 address.
BootstrapServer = Annotated[
    str,
    StringConstraints(
        min_length=3,
        max_length=261,
        pattern=r"^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$",
    ),
]
SecretKey = Annotated[
    str, StringConstraints(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
]


class SecurityProtocol(StrEnum):
    """Kafka's ``security.protocol``: the same four names as its clients take."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self.value.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.value.endswith("SSL")


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class SecretKeySelector(CamelModel):
    """One key of a Secret in the KafkaCluster's namespace (as a Pod's ``secretKeyRef``)."""

    name: ResourceName
    key: SecretKey


class FromSecret(CamelModel):
    secret_key_ref: SecretKeySelector


class SaslSpec(CamelModel):
    mechanism: SaslMechanism
    username: FromSecret
    password: FromSecret


class TlsSpec(CamelModel):
    """PEM from Secrets: the CA that signed the brokers' certificates (the system's CAs when
    absent), and a client certificate and key for mutual TLS (both or neither)."""

    model_config = CamelModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.certificate) == has(self.key)",
                    "message": "set both certificate and key for a client certificate, or neither",
                }
            ]
        }
    }

    ca: FromSecret | None = None
    certificate: FromSecret | None = None
    key: FromSecret | None = None
    verify_hostname: Annotated[
        bool, Field(description="Check that a broker's certificate names the host dialled.")
    ] = True

    @model_validator(mode="after")
    def _pair(self) -> TlsSpec:
        if (self.certificate is None) != (self.key is None):
            raise ValueError("set both certificate and key for a client certificate, or neither")
        return self


class KafkaClusterSpec(CamelModel):
    model_config = CamelModel.model_config | {
        "json_schema_extra": {
            "x-kubernetes-validations": [
                {
                    "rule": "self.securityProtocol.startsWith('SASL_') == has(self.sasl)",
                    "message": "sasl is required with SASL_PLAINTEXT and SASL_SSL, and only there",
                },
                {
                    "rule": "!has(self.tls) || self.securityProtocol.endsWith('SSL')",
                    "message": "tls needs securityProtocol SSL or SASL_SSL",
                },
            ]
        }
    }

    bootstrap_servers: Annotated[
        list[BootstrapServer],
        Field(
            min_length=1,
            max_length=MAX_BOOTSTRAP_SERVERS,
            description="host:port of one or more brokers; the client discovers the rest.",
        ),
    ]
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl: SaslSpec | None = None
    tls: TlsSpec | None = None
    refresh_interval_seconds: Annotated[
        int,
        Field(ge=5, le=3600, description="Seconds between two readings of the cluster."),
    ] = 30
    log_dir_capacity: Annotated[
        Quantity | None,
        Field(
            description=(
                "The size a Rebalance counts each log dir as when dirs of a broker share one "
                "filesystem (as BrokerCluster's logDirs[].size): each is then used by its "
                "replicas' bytes. Without it every dir is measured by its filesystem's figures."
            )
        ),
    ] = None
    balance: Annotated[
        BalanceSpec | None,
        Field(
            description="Continuous detection of disk imbalance (off when absent), as a "
            "BrokerCluster's: samples DescribeLogDirs and creates a Rebalance of this cluster."
        ),
    ] = None

    @model_validator(mode="after")
    def _security(self) -> KafkaClusterSpec:
        if self.security_protocol.uses_sasl != (self.sasl is not None):
            raise ValueError("sasl is required with SASL_PLAINTEXT and SASL_SSL, and only there")
        if self.tls is not None and not self.security_protocol.uses_tls:
            raise ValueError("tls needs securityProtocol SSL or SASL_SSL")
        return self


class KafkaLogDirStatus(CamelModel):
    path: str
    total_bytes: int | None = None
    usable_bytes: int | None = None
    cordoned: Annotated[
        bool | None,
        Field(description="KIP-1066 (Kafka 4.3+); absent where the broker does not report it."),
    ] = None
    offline: bool = False
    error: Annotated[str | None, Field(description="Kafka's error name for this dir.")] = None
    replica_count: int = 0
    replica_bytes: int = 0
    future_replica_count: int = 0


class KafkaBrokerStatus(CamelModel):
    id: BrokerId
    host: str
    port: int
    rack: str | None = None
    fenced: bool | None = None
    log_dirs: list[KafkaLogDirStatus] | None = None
    error: Annotated[
        str | None, Field(description="Why this broker's log dirs could not be read.")
    ] = None


class KafkaClusterStatus(CamelModel):
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    cluster_id: str | None = None
    controller_id: Annotated[
        int | None,
        Field(
            description=(
                "The broker DescribeCluster names as controller; in KRaft a broker that "
                "forwards to the controller quorum, not a KRaft controller."
            )
        ),
    ] = None
    brokers: list[KafkaBrokerStatus] | None = None
    broker_count: int | None = None
    log_dir_count: int | None = None
    last_refresh_time: str | None = None
    balance: Annotated[
        BalanceStatus | None,
        Field(description="What continuous detection sees; written by the sampler only."),
    ] = None


class KafkaCluster(CamelModel):
    # The whole object as read from the API: apiVersion/kind and server fields pass through.
    model_config = CamelModel.model_config | {"extra": "ignore"}

    kind: ClassVar[str] = "KafkaCluster"
    plural: ClassVar[str] = "kafkaclusters"
    short_names: ClassVar[list[str]] = ["kc"]
    printer_columns: ClassVar[list[dict[str, Any]]] = [
        {"name": "Brokers", "type": "integer", "jsonPath": ".status.brokerCount"},
        {"name": "Dirs", "type": "integer", "jsonPath": ".status.logDirCount"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
        {
            "name": "Reason",
            "type": "string",
            "priority": 1,
            "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    api_version: str = API_VERSION
    metadata: ResourceMeta
    spec: KafkaClusterSpec
    status: KafkaClusterStatus | None = None


__all__ = [
    "FromSecret",
    "KafkaBrokerStatus",
    "KafkaCluster",
    "KafkaClusterSpec",
    "KafkaClusterStatus",
    "KafkaLogDirStatus",
    "SaslMechanism",
    "SaslSpec",
    "SecretKeySelector",
    "SecurityProtocol",
    "TlsSpec",
]
