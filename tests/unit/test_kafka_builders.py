"""The brokers' Kafka listener in Kubernetes (issue 18): the port on the pod and the headless
Service, the bound listener in server.properties, each pod's advertised name."""

from __future__ import annotations

from jbod_broker.config import load_config
from jbod_broker.storage.checkpoints import parse_properties
from jbod_operator.plan import builders
from tests.unit.test_builders import cluster, container, env_of, sts_of


def test_each_pod_advertises_its_name_in_the_headless_service() -> None:
    bc = cluster()
    env = env_of(sts_of(bc))
    advertised = env["JBOD_KAFKA_ADVERTISED_LISTENERS"]
    names = [e["name"] for e in container(sts_of(bc))["env"]]
    assert names.index("POD_NAME") < names.index("JBOD_KAFKA_ADVERTISED_LISTENERS")
    pod = builders.pod_name(bc, 1)
    expanded = advertised.replace("$(POD_NAME)", pod)
    assert expanded == f"PLAINTEXT://{pod}.main-brokers.kafka.svc:9093"
    assert expanded.removeprefix("PLAINTEXT://") in builders.kafka_bootstrap_servers(bc)


def test_the_broker_takes_the_listener_the_operator_renders() -> None:
    bc = cluster()
    props = parse_properties(builders.render_server_properties(bc).encode())
    env = {
        "JBOD_BROKER_ID": "1",
        "JBOD_LOG_DIRS": "/d",
        "JBOD_AUTH_DISABLED": "true",
        "JBOD_KAFKA_LISTENERS": props["kafka.listeners"],
        "JBOD_KAFKA_ADVERTISED_LISTENERS": env_of(sts_of(bc))[
            "JBOD_KAFKA_ADVERTISED_LISTENERS"
        ].replace("$(POD_NAME)", builders.pod_name(bc, 1)),
    }
    c = load_config(env=env)
    assert c.kafka_bind == ("", builders.KAFKA_PORT)
    assert c.kafka_advertised == (f"{builders.pod_name(bc, 1)}.main-brokers.kafka.svc", 9093)


def test_bootstrap_servers_name_every_broker() -> None:
    bc = cluster()
    servers = builders.kafka_bootstrap_servers(bc).split(",")
    assert servers == [
        f"{builders.pod_name(bc, i)}.main-brokers.kafka.svc:9093" for i in range(bc.spec.replicas)
    ]
    svc = builders.build_headless_service(bc)
    assert {"name": "kafka", "port": 9093, "targetPort": "kafka", "protocol": "TCP"} in svc["spec"][
        "ports"
    ]
