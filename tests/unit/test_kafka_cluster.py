"""KafkaCluster (issue 22): the spec the CRD and the model refuse, the status and conditions
decided from one reading of the Admin API (pure), and the client's connection settings and
error mapping (a fake kafka-python client: the real one is in
tests/integration/test_kafka_admin.py)."""

from __future__ import annotations

import asyncio
import copy
import json
import warnings
from typing import Any

import jsonschema
import pytest

from jbod_operator.clients.kafka_admin import (
    CONFIG_REWRITE_S,
    KafkaAdmin,
    KafkaAdminError,
    KafkaConnection,
)
from jbod_operator.models import KafkaCluster, KafkaClusterSpec, KafkaClusterStatus
from jbod_operator.plan.kafka_cluster import KafkaObservation, decide_status
from jbod_operator.plan.kafka_types import (
    BrokerLogDirs,
    ClusterDescription,
    ConfigKind,
    KafkaBroker,
    LogDir,
    LogDirReplica,
)
from jbod_operator.tools import crdgen

with warnings.catch_warnings():  # kafka-python 3.0's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kafka_errors

NOW = 1_767_225_600.0
"""The time a decision is made at (conditions' ``lastTransitionTime``): 2026-01-01."""
SECRET = {"secretKeyRef": {"name": "kafka-admin", "key": "password"}}
USER = {"secretKeyRef": {"name": "kafka-admin", "key": "username"}}


def spec_schema() -> dict[str, Any]:
    schema = crdgen.crd(KafkaCluster)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec: dict[str, Any] = copy.deepcopy(schema["properties"]["spec"])
    return spec


def cel_rules() -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec_schema())
    return found


VALID = [
    {"bootstrapServers": ["kafka-0.kafka:9092"]},
    {"bootstrapServers": ["10.0.0.1:9092", "[::1]:9093"], "refreshIntervalSeconds": 5},
    {
        "bootstrapServers": ["k:9094"],
        "securityProtocol": "SASL_SSL",
        "sasl": {"mechanism": "SCRAM-SHA-512", "username": USER, "password": SECRET},
        "tls": {"ca": {"secretKeyRef": {"name": "ca", "key": "ca.crt"}}},
    },
    {
        "bootstrapServers": ["k:9093"],
        "securityProtocol": "SSL",
        "tls": {
            "certificate": {"secretKeyRef": {"name": "c", "key": "tls.crt"}},
            "key": {"secretKeyRef": {"name": "c", "key": "tls.key"}},
            "verifyHostname": False,
        },
    },
    {
        "bootstrapServers": ["k:9092"],
        "securityProtocol": "SASL_PLAINTEXT",
        "sasl": {"mechanism": "PLAIN", "username": USER, "password": SECRET},
    },
]


@pytest.mark.parametrize("spec", VALID)
def test_valid_specs_pass_model_and_schema(spec: dict[str, Any]) -> None:
    KafkaClusterSpec.model_validate_json(json.dumps(spec), strict=True)
    jsonschema.validate(spec, spec_schema())


# (spec, the JSON schema keyword that refuses it)
SCHEMA_REFUSED = [
    ({"bootstrapServers": []}, "minItems"),
    ({}, "required"),
    ({"bootstrapServers": ["kafka:9092"], "securityProtocol": "TLS"}, "enum"),
    ({"bootstrapServers": ["kafka"]}, "pattern"),
    ({"bootstrapServers": ["kafka:9092;rm"]}, "pattern"),
    ({"bootstrapServers": ["k:9092"], "refreshIntervalSeconds": 1}, "minimum"),
    (
        {
            "bootstrapServers": ["k:9092"],
            "securityProtocol": "SASL_SSL",
            "sasl": {"mechanism": "GSSAPI", "username": USER, "password": SECRET},
        },
        "enum",
    ),
    (
        {
            "bootstrapServers": ["k:9092"],
            "securityProtocol": "SASL_SSL",
            "sasl": {"mechanism": "PLAIN", "username": USER},
        },
        "required",
    ),
]


@pytest.mark.parametrize(("spec", "keyword"), SCHEMA_REFUSED)
def test_bad_specs_are_refused_by_the_schema_and_the_model(
    spec: dict[str, Any], keyword: str
) -> None:
    with pytest.raises(ValueError):
        KafkaClusterSpec.model_validate_json(json.dumps(spec), strict=True)
    with pytest.raises(jsonschema.ValidationError) as refused:
        jsonschema.validate(spec, spec_schema())
    assert refused.value.validator == keyword


# What only the CRD's CEL rules (and the model's validators) refuse: the schema alone cannot
# say "sasl only with SASL_*". The API server evaluates them (e2e/test_kafka_cluster.py).
CEL_REFUSED = [
    {"bootstrapServers": ["k:9092"], "securityProtocol": "SASL_SSL"},
    {
        "bootstrapServers": ["k:9092"],
        "sasl": {"mechanism": "PLAIN", "username": USER, "password": SECRET},
    },
    {"bootstrapServers": ["k:9092"], "tls": {}},
    {
        "bootstrapServers": ["k:9092"],
        "securityProtocol": "SSL",
        "tls": {"certificate": {"secretKeyRef": {"name": "c", "key": "tls.crt"}}},
    },
]


@pytest.mark.parametrize("spec", CEL_REFUSED)
def test_security_combinations_are_refused_by_the_model(spec: dict[str, Any]) -> None:
    jsonschema.validate(spec, spec_schema())  # structurally fine ...
    with pytest.raises(ValueError):  # ... the model (and the CRD's CEL rules) refuse it
        KafkaClusterSpec.model_validate_json(json.dumps(spec), strict=True)


def test_the_crd_carries_the_cel_rules_the_model_checks() -> None:
    # spec.balance is BrokerCluster's BalanceSpec, with its own two rules (a history that
    # covers the window, a threshold not written as the integer 0)
    assert cel_rules() == [
        "self.securityProtocol.startsWith('SASL_') == has(self.sasl)",
        "!has(self.tls) || self.securityProtocol.endsWith('SSL')",
        "has(self.certificate) == has(self.key)",
        "self.historySamples * self.sampleIntervalSeconds > self.windowSeconds",
        "self >= 0.5",
    ]


# -- the status, decided ---------------------------------------------------------------------


def broker(i: int, *, fenced: bool = False) -> KafkaBroker:
    return KafkaBroker(broker_id=i, host=f"10.0.0.{i}", port=9092, rack=f"r{i % 2}", fenced=fenced)


def dirs(i: int, *, offline: str | None = None) -> BrokerLogDirs:
    replica = LogDirReplica("orders", i, 1000, 0, False)
    future = LogDirReplica("orders", 9, 400, 0, True)
    return BrokerLogDirs(
        i,
        (
            LogDir(f"/data/{i}/a", None, 10_000, 8_000, False, (replica, future)),
            LogDir(f"/data/{i}/b", offline, None if offline else 10_000, None, None, ()),
        ),
    )


CLUSTER = ClusterDescription("abc", 2, tuple(broker(i) for i in (1, 2, 3, 4)))


def conditions(status: KafkaClusterStatus) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in status.conditions}


def test_a_healthy_cluster_is_ready_with_every_broker_and_dir() -> None:
    obs = KafkaObservation(
        "k:9092", CLUSTER, {i: dirs(i) for i in (1, 2, 3, 4)}, time="2026-01-01T00:00:00Z"
    )
    status = decide_status(obs, None, 3, now=NOW)
    assert conditions(status) == {
        "Reachable": ("True", "Connected", "cluster abc answered via k:9092"),
        "Ready": ("True", "Ready", "4 brokers, 8 log dirs read"),
        "Degraded": ("False", "AllHealthy", "every broker unfenced, every log dir online"),
    }
    assert status.observed_generation == 3
    assert (status.cluster_id, status.controller_id) == ("abc", 2)
    assert (status.broker_count, status.log_dir_count) == (4, 8)
    assert status.last_refresh_time == "2026-01-01T00:00:00Z"
    assert status.brokers is not None
    b1 = status.brokers[0]
    assert (b1.id, b1.host, b1.port, b1.rack, b1.fenced) == (1, "10.0.0.1", 9092, "r1", False)
    assert b1.log_dirs is not None
    a, b = b1.log_dirs
    assert (a.path, a.total_bytes, a.usable_bytes, a.cordoned, a.offline) == (
        "/data/1/a",
        10_000,
        8_000,
        False,
        False,
    )
    # The future copy is counted apart: it is in flight, not yet the replica.
    assert (a.replica_count, a.replica_bytes, a.future_replica_count) == (1, 1000, 1)
    assert (b.total_bytes, b.cordoned, b.replica_count) == (10_000, None, 0)
    # The status round-trips through the CRD's model.
    KafkaClusterStatus.model_validate(status.dump())


def test_fenced_broker_and_offline_dir_make_it_degraded_not_unready() -> None:
    cluster = ClusterDescription("abc", 1, (broker(1), broker(2, fenced=True)))
    obs = KafkaObservation("k:9092", cluster, {1: dirs(1, offline="KAFKA_STORAGE_ERROR")})
    got = conditions(decide_status(obs, None, 1, now=NOW))
    assert got["Ready"][0] == "True"
    assert got["Degraded"] == (
        "True",
        "BrokersFenced",
        "fenced brokers [2]; offline log dirs ['1:/data/1/b (KAFKA_STORAGE_ERROR)']",
    )


def test_a_broker_whose_dirs_cannot_be_read_makes_it_unready() -> None:
    obs = KafkaObservation("k:9092", CLUSTER, {1: dirs(1), 2: "KafkaTimeoutError"})
    status = decide_status(obs, None, 1, now=NOW)
    assert conditions(status)["Ready"] == (
        "False",
        "LogDirsUnreadable",
        "DescribeLogDirs failed on broker ['2 (KafkaTimeoutError)']",
    )
    assert status.brokers is not None and status.brokers[1].error == "KafkaTimeoutError"


def test_no_unfenced_broker_is_not_ready() -> None:
    cluster = ClusterDescription("abc", None, (broker(1, fenced=True),))
    assert conditions(decide_status(KafkaObservation("k:9092", cluster), None, 1, now=NOW))[
        "Ready"
    ][:2] == (
        "False",
        "NoBrokers",
    )


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("KafkaTimeoutError", "Unreachable"),
        ("NoBrokersAvailable", "Unreachable"),
        ("SASL_AUTHENTICATION_FAILED", "AuthenticationFailed"),
        ("CLUSTER_AUTHORIZATION_FAILED", "AuthorizationFailed"),
        ("UNSUPPORTED_VERSION", "KafkaError"),
    ],
)
def test_a_failed_reading_says_why_and_keeps_what_was_seen(error: str, reason: str) -> None:
    seen = decide_status(
        KafkaObservation("k:9092", CLUSTER, {i: dirs(i) for i in (1, 2, 3, 4)}, time="t0"),
        None,
        1,
        now=NOW,
    )
    obs = KafkaObservation(
        "bad:9092", cluster_error=error, cluster_message="Unable to bootstrap", time="t1"
    )
    status = decide_status(obs, seen, 2, now=NOW)
    got = conditions(status)
    message = f"DescribeCluster via bad:9092 failed with {error}: Unable to bootstrap"
    assert got["Reachable"] == ("False", reason, message)
    assert got["Ready"] == ("False", reason, message)
    assert got["Degraded"][0] == "Unknown"
    # The last reading stays, with its time: stale, and the conditions say so.
    assert (status.brokers, status.cluster_id, status.last_refresh_time) == (
        seen.brokers,
        "abc",
        "t0",
    )
    assert status.observed_generation == 2


def test_missing_credentials_are_their_own_reason() -> None:
    obs = KafkaObservation("k:9092", credentials_error="Secret ns/kafka-admin not found")
    got = conditions(decide_status(obs, None, 1, now=NOW))
    assert got["Ready"] == ("False", "CredentialsMissing", "Secret ns/kafka-admin not found")
    assert got["Reachable"][1] == "CredentialsMissing"


def test_an_unchanged_reading_keeps_the_transition_times() -> None:
    obs = KafkaObservation("k:9092", CLUSTER, {i: dirs(i) for i in (1, 2, 3, 4)})
    first = decide_status(obs, None, 1, now=NOW)
    stamped = [
        c.model_copy(update={"last_transition_time": "2020-01-01T00:00:00Z"})
        for c in first.conditions
    ]
    again = decide_status(obs, first.model_copy(update={"conditions": stamped}), 1, now=NOW)
    assert [c.last_transition_time for c in again.conditions] == ["2020-01-01T00:00:00Z"] * 3


# -- the client: settings and errors ------------------------------------------------------------


def test_connection_settings_and_no_secret_in_repr() -> None:
    conn = KafkaConnection(
        ("k:9092",),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="admin",
        sasl_password="s3cret-value",
    )
    cfg = conn.client_config()
    assert cfg["bootstrap_servers"] == ["k:9092"]
    assert (cfg["sasl_mechanism"], cfg["sasl_plain_username"], cfg["sasl_plain_password"]) == (
        "SCRAM-SHA-256",
        "admin",
        "s3cret-value",
    )
    assert "ssl_context" not in cfg
    assert "s3cret-value" not in repr(conn) and "admin" not in repr(conn)
    plain = KafkaConnection(("k:9092",)).client_config()
    assert "sasl_mechanism" not in plain and plain["security_protocol"] == "PLAINTEXT"


class FakeClient:
    """Stands in for kafka-python's client: raises what it is told to."""

    def __init__(self, raises: BaseException) -> None:
        self.raises = raises
        self.closed = False

    def describe_cluster(self) -> Any:
        raise self.raises

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    ("raised", "name"),
    [
        (kafka_errors.KafkaTimeoutError("Unable to bootstrap"), "KafkaTimeoutError"),
        (
            kafka_errors.ClusterAuthorizationFailedError("no"),
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        (kafka_errors.NotControllerError(), "NOT_CONTROLLER"),
    ],
)
def test_every_failure_is_one_error_with_kafka_s_name(raised: Exception, name: str) -> None:
    fake = FakeClient(raised)
    admin = KafkaAdmin(KafkaConnection(("k:9092",)), factory=lambda **_: fake)

    async def go() -> KafkaAdminError:
        with pytest.raises(KafkaAdminError) as failed:
            await admin.describe_cluster()
        await admin.close()
        return failed.value

    error = asyncio.run(go())
    assert (error.call, error.error) == ("DescribeCluster", name)
    assert fake.closed


class ForgetsBroker3:
    """kafka-python's client started while broker 3 was down: its broker list lacks 3 (it
    reads it again only every 5 minutes), so a request to 3 fails without being sent."""

    def __init__(self, knows_3: bool) -> None:
        self.knows_3 = knows_3
        self.closed = False

    def describe_log_dirs(self, brokers: list[int]) -> Any:
        if not self.knows_3:
            raise kafka_errors.UnknownBrokerIdError(3)
        return []

    def close(self) -> None:
        self.closed = True


def test_a_client_that_does_not_know_a_broker_is_started_afresh() -> None:
    """Broker 3 back and unfenced (DescribeCluster says so): its DescribeLogDirs fails once,
    on the client that forgot it; the next call's new client reaches it."""
    built: list[ForgetsBroker3] = []

    def factory(**_: Any) -> ForgetsBroker3:
        built.append(ForgetsBroker3(knows_3=bool(built)))
        return built[-1]

    admin = KafkaAdmin(KafkaConnection(("k:9092",)), factory=factory)

    async def go() -> KafkaAdminError:
        with pytest.raises(KafkaAdminError) as failed:
            await admin.describe_log_dirs([3])
        assert await admin.describe_log_dirs([3]) == []
        await admin.close()
        return failed.value

    error = asyncio.run(go())
    assert (error.call, error.error) == ("DescribeLogDirs", "UnknownBrokerIdError")
    assert len(built) == 2 and built[0].closed and built[1].closed


class AlterRecorder:
    """kafka-python's alter_configs, recorded; answers OK, or with Kafka's error text while
    ``refuse`` is set."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.refuse = False

    def alter_configs(self, resources: list[Any], **_: Any) -> dict[str, dict[str, str]]:
        (resource,) = resources
        self.sent.append({k: v[1] for k, v in resource.configs.items()})
        answer = "[Error 7] RequestTimedOutError: busy" if self.refuse else "OK"
        return {"broker": {resource.name: answer}}

    def close(self) -> None:
        pass


def test_ensure_configs_sends_only_what_it_has_not_written_lately() -> None:
    """A reassignment's every pass names each broker's throttle rates again; each write goes
    through Kafka's controller (40-400 ms loaded), more than half of a pass. ensure_configs
    sends a key only when its value changed, when its last write failed, or when the last
    write is CONFIG_REWRITE_S old (someone else's change is undone within that)."""
    fake = AlterRecorder()
    now = [100.0]
    admin = KafkaAdmin(KafkaConnection(("k:9092",)), factory=lambda **_: fake, clock=lambda: now[0])
    rates = {"leader.replication.throttled.rate": None, "follower.replication.throttled.rate": None}

    async def go() -> None:
        await admin.ensure_configs(ConfigKind.BROKER, "1", rates)
        await admin.ensure_configs(ConfigKind.BROKER, "1", rates)  # the next pass: nothing sent
        assert len(fake.sent) == 1
        await admin.ensure_configs(ConfigKind.BROKER, "2", rates)  # another broker: sent
        await admin.ensure_configs(  # one value changed: only that one sent
            ConfigKind.BROKER, "1", {**rates, "leader.replication.throttled.rate": "1024"}
        )
        assert fake.sent[-1] == {"leader.replication.throttled.rate": "1024"}
        fake.refuse = True
        with pytest.raises(KafkaAdminError):
            await admin.ensure_configs(ConfigKind.BROKER, "1", rates)
        fake.refuse = False
        sent = len(fake.sent)
        await admin.ensure_configs(ConfigKind.BROKER, "1", rates)  # the failed one again
        assert len(fake.sent) == sent + 1
        now[0] += CONFIG_REWRITE_S
        await admin.ensure_configs(ConfigKind.BROKER, "1", rates)  # old: written again
        assert fake.sent[-1] == rates and len(fake.sent) == sent + 2
        await admin.close()

    asyncio.run(go())
