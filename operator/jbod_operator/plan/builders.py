"""Kubernetes objects of a BrokerCluster, as pure functions: spec in, manifest dict out.

Like Strimzi's ``model/`` (``generatePersistentVolumeClaims``, ``generateHeadlessService``) and
dask-kubernetes' ``build_…_spec``: no I/O, no client, no kopf. The same BrokerCluster always
gives the same dicts (sorted where the input is a mapping), and every dict is plain JSON.

Names are deterministic (Strimzi's JBOD scheme, our prefix):

==========================  ==================================================
StatefulSet                 ``<name>-broker``
headless Service            ``<name>-brokers``
ConfigMap                   ``<name>-broker-config`` (key ``server.properties``)
token Secret                ``<name>-broker-token`` (key ``token``)
PodDisruptionBudget         ``<name>-broker``
volumeClaimTemplate         ``data-<logdir>``, so PVCs are ``data-<logdir>-<name>-broker-<id>``
mount path                  ``/var/lib/jbod/data-<logdir>``
broker URL                  ``http://<name>-broker-<id>.<name>-brokers.<ns>.svc:9092``
==========================  ==================================================

The broker reads ``/etc/jbod/server.properties`` and lets ``JBOD_*`` environment variables
override it (``jbod_broker.config``); every ``JBOD_*`` variable must name a known setting or the
broker refuses to start. That is why the pods have ``enableServiceLinks: false`` (a Service
called ``jbod-…`` in the namespace would inject ``JBOD_…_SERVICE_HOST``) and why the racks list
travels in ``BROKER_RACKS``, not in a ``JBOD_`` variable (see :func:`build_statefulset`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from jbod_broker import wire
from jbod_broker.storage.names import format_topic_id

from ..models import BrokerCluster, LogDir
from ..models.broker_cluster import rack_for
from ..models.kafka_cluster import KafkaCluster

__all__ = [
    "APP_NAME",
    "BROKER_PORT",
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_KEY",
    "CONFIG_PATH",
    "CONTAINER_NAME",
    "DATA_ROOT",
    "KAFKA_LISTENERS",
    "KAFKA_PORT",
    "LISTENERS",
    "MANAGED_BY",
    "MAX_CLUSTER_NAME_LENGTH",
    "MAX_LOG_DIR_NAME_LENGTH",
    "POD_INDEX_LABEL",
    "RACKS_ENV",
    "RACK_LAUNCHER",
    "RESERVED_CONFIG_KEYS",
    "TOKEN_DIR",
    "TOKEN_FILE",
    "TOKEN_KEY",
    "broker_url",
    "build_configmap",
    "build_headless_service",
    "build_pdb",
    "build_statefulset",
    "build_token_secret",
    "config_hash",
    "configmap_name",
    "headless_service_name",
    "kafka_bootstrap_host",
    "kafka_bootstrap_servers",
    "labels",
    "log_dir_name_from_path",
    "mount_path",
    "owner_reference",
    "pdb_name",
    "pod_name",
    "pvc_name",
    "rack_of",
    "render_server_properties",
    "selector_labels",
    "spec_problems",
    "statefulset_name",
    "token_secret_name",
    "volume_name",
]

APP_NAME = "jbod-broker"
MANAGED_BY = "jbod-operator"
COMPONENT = "broker"
CONTAINER_NAME = "broker"
BROKER_PORT = 9092
PORT_NAME = "http"
LISTENERS = f"http://0.0.0.0:{BROKER_PORT}"
KAFKA_PORT = 9093
"""The brokers' Kafka protocol listener (issue 18): what Kafka clients bootstrap from."""
KAFKA_PORT_NAME = "kafka"
KAFKA_LISTENERS = f"PLAINTEXT://:{KAFKA_PORT}"
DATA_ROOT = "/var/lib/jbod"
CONFIG_KEY = "server.properties"
CONFIG_PATH = f"/etc/jbod/{CONFIG_KEY}"
TOKEN_DIR = "/etc/jbod/token"
TOKEN_KEY = "token"
TOKEN_FILE = f"{TOKEN_DIR}/{TOKEN_KEY}"
RUN_AS = 10001
MIN_TOKEN_LENGTH = 16
"""The broker refuses a shorter token (``BrokerConfig.read_token``)."""

POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
"""Set by the StatefulSet controller on every pod (Kubernetes >= 1.28, PodIndexLabel)."""
CONFIG_HASH_ANNOTATION = "jbod.io/config-hash"
RACKS_ENV = "BROKER_RACKS"

MAX_CLUSTER_NAME_LENGTH = 45
"""``<name>-broker`` must stay within 52 characters: the StatefulSet controller puts
``<sts>-<hash>`` in the 63-character ``controller-revision-hash`` label of every pod."""
MAX_LOG_DIR_NAME_LENGTH = 58
"""``data-<logdir>`` is a pod volume name, a DNS label of at most 63 characters."""

RESERVED_CONFIG_KEYS = (
    "advertised.url",
    "broker.id",
    "broker.rack",
    "cluster.id",
    "controller.url",
    "kafka.advertised.listeners",
    "kafka.listeners",
    "listeners",
    "log.dirs",
    "token.file",
)
"""Settings the operator owns; ``spec.config`` may not set them (most are ``JBOD_*`` variables,
which would silently override the file anyway)."""

RACK_LAUNCHER = (
    "import os, sys\n"
    f"racks = os.environ.pop({RACKS_ENV!r}).split(',')\n"
    "os.environ['JBOD_BROKER_RACK'] = racks[int(os.environ['JBOD_BROKER_ID']) % len(racks)]\n"
    "from jbod_broker.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
"""``python -c`` program run instead of ``python -m jbod_broker`` when racks are set: it picks
``racks[broker_id % len(racks)]`` into ``JBOD_BROKER_RACK``, then runs the broker's ``main``."""


# -- names --------------------------------------------------------------------------------


def _name(bc: BrokerCluster) -> str:
    return bc.metadata.name


def _namespace(bc: BrokerCluster) -> str:
    ns = bc.metadata.namespace
    if not ns:
        raise ValueError(f"BrokerCluster {bc.metadata.name}: metadata.namespace is required")
    return ns


def _log_dir_name(log_dir: LogDir | str) -> str:
    return log_dir if isinstance(log_dir, str) else log_dir.name


def statefulset_name(bc: BrokerCluster) -> str:
    return f"{_name(bc)}-broker"


def headless_service_name(bc: BrokerCluster) -> str:
    return f"{_name(bc)}-brokers"


def configmap_name(bc: BrokerCluster) -> str:
    return f"{_name(bc)}-broker-config"


def token_secret_name(bc: BrokerCluster) -> str:
    return f"{_name(bc)}-broker-token"


def pdb_name(bc: BrokerCluster) -> str:
    return f"{_name(bc)}-broker"


def volume_name(log_dir: LogDir | str) -> str:
    """The volumeClaimTemplate (and pod volume) of a log dir: ``data-<name>``."""
    return wire.log_dir_folder(_log_dir_name(log_dir))


def mount_path(log_dir: LogDir | str) -> str:
    """Where the broker sees a log dir: ``/var/lib/jbod/data-<name>``."""
    return f"{DATA_ROOT}/{volume_name(log_dir)}"


def log_dir_name_from_path(path: str) -> str | None:
    """The log dir name of a mount path (as brokers report it), or None if not one of ours."""
    p = path.rstrip("/")
    name = wire.log_dir_short_name(p)
    if not name or p != mount_path(name):
        return None
    return name


def pod_name(bc: BrokerCluster, broker_id: int) -> str:
    return f"{statefulset_name(bc)}-{broker_id}"


def pvc_name(bc: BrokerCluster, log_dir: LogDir | str, broker_id: int) -> str:
    """The claim the StatefulSet controller creates: ``data-<logdir>-<sts>-<id>``."""
    return f"{volume_name(log_dir)}-{pod_name(bc, broker_id)}"


def kafka_bootstrap_host(bc: BrokerCluster, pod: str) -> str:
    """A broker pod's name in the headless Service: where Kafka clients reach it."""
    return f"{pod}.{headless_service_name(bc)}.{_namespace(bc)}.svc"


def kafka_bootstrap_servers(bc: BrokerCluster) -> str:
    """Every broker's Kafka listener, as a Kafka client's ``bootstrap.servers`` (issue 18)."""
    return ",".join(
        f"{kafka_bootstrap_host(bc, pod_name(bc, i))}:{KAFKA_PORT}" for i in range(bc.spec.replicas)
    )


def broker_url(bc: BrokerCluster, broker_id: int) -> str:
    """The broker's stable address through the headless Service (its advertised URL)."""
    return (
        f"http://{pod_name(bc, broker_id)}.{headless_service_name(bc)}"
        f".{_namespace(bc)}.svc:{BROKER_PORT}"
    )


def rack_of(bc: BrokerCluster, broker_id: int) -> str | None:
    """The broker's rack by the spec (``models.broker_cluster.rack_for``)."""
    return rack_for(bc.spec.racks, broker_id)


# -- shared metadata ----------------------------------------------------------------------


def selector_labels(bc: BrokerCluster) -> dict[str, str]:
    """The labels that select the brokers' pods (StatefulSet selector: immutable, keep small)."""
    return {
        "app.kubernetes.io/component": COMPONENT,
        "app.kubernetes.io/instance": _name(bc),
        "app.kubernetes.io/name": APP_NAME,
    }


def labels(bc: BrokerCluster) -> dict[str, str]:
    return {**selector_labels(bc), "app.kubernetes.io/managed-by": MANAGED_BY}


def owner_reference(bc: BrokerCluster | KafkaCluster) -> dict[str, Any]:
    """Makes the object garbage-collected with the cluster (needs ``metadata.uid``)."""
    if not bc.metadata.uid:
        raise ValueError(
            f"{bc.kind} {bc.metadata.name}: metadata.uid is required for ownerReferences "
            "(build from the object the API server returned)"
        )
    return {
        "apiVersion": bc.api_version,
        "kind": bc.kind,
        "name": bc.metadata.name,
        "uid": bc.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(bc: BrokerCluster, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": _namespace(bc),
        "labels": labels(bc),
        "ownerReferences": [owner_reference(bc)],
    }


# -- validation and configuration ---------------------------------------------------------


def spec_problems(bc: BrokerCluster) -> list[str]:
    """What in the spec can never build working objects (the CRD schema cannot say it all).

    Empty when fine; each message names the field. Builders raise ValueError with these.
    """
    problems: list[str] = []
    if len(_name(bc)) > MAX_CLUSTER_NAME_LENGTH:
        problems.append(
            f"metadata.name {_name(bc)!r} is longer than {MAX_CLUSTER_NAME_LENGTH} characters "
            f"(the StatefulSet {statefulset_name(bc)!r} would exceed 52)"
        )
    seen: set[str] = set()
    for ld in bc.spec.log_dirs:
        if ld.name in seen:
            problems.append(f"spec.logDirs: {ld.name!r} is listed twice")
        seen.add(ld.name)
        if len(ld.name) > MAX_LOG_DIR_NAME_LENGTH:
            problems.append(
                f"spec.logDirs: {ld.name!r} is longer than {MAX_LOG_DIR_NAME_LENGTH} characters "
                f"(the volume name {volume_name(ld)!r} must be a DNS label)"
            )
    for key, value in sorted((bc.spec.config or {}).items()):
        if key in RESERVED_CONFIG_KEYS:
            problems.append(f"spec.config.{key} is set by the operator and cannot be overridden")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            problems.append(
                f"spec.config.{key}: control characters (such as a newline) are not allowed"
            )
    return problems


def _check(bc: BrokerCluster) -> None:
    problems = spec_problems(bc)
    if problems:
        raise ValueError(f"BrokerCluster {_name(bc)}: " + "; ".join(problems))


def render_server_properties(bc: BrokerCluster) -> str:
    """``server.properties``: the listener, then ``spec.config`` sorted by key.

    The broker's parser splits each line at the first ``=`` and strips both sides, with no
    escapes: a value with a newline would inject settings, so :func:`spec_problems` refuses it.
    """
    _check(bc)
    lines = [
        f"# Generated by {MANAGED_BY} from BrokerCluster {_name(bc)}; edit the BrokerCluster.",
        f"listeners={LISTENERS}",
        f"kafka.listeners={KAFKA_LISTENERS}",
    ]
    cid = cluster_id(bc)
    if cid is not None:
        lines.append(f"cluster.id={cid}")
    lines += [f"{k}={v}" for k, v in sorted((bc.spec.config or {}).items())]
    return "\n".join(lines) + "\n"


def cluster_id(bc: BrokerCluster) -> str | None:
    """The brokers' ``cluster.id``: the BrokerCluster's uid in Kafka's ``Uuid`` form.

    Fixed for the resource's life and unique without a status write before the first pod
    starts; a BrokerCluster deleted and made again under the same name is another cluster, so
    its brokers refuse (take offline) dirs the old one left on retained volumes. ``None`` for a
    model without a uid, or with one that is not a UUID (never one read from the API server)."""
    try:
        raw = uuid.UUID(bc.metadata.uid or "").bytes
    except ValueError:
        return None
    return format_topic_id(raw)


def config_hash(bc: BrokerCluster) -> str:
    """SHA-256 of what a running broker cannot pick up without a restart: the log dir list, the
    properties file and the racks. Put on the pod template, a change rolls the pods (a ConfigMap
    mounted with subPath is never refreshed in a running pod)."""
    payload = {
        "logDirs": [ld.name for ld in bc.spec.log_dirs],
        "racks": list(bc.spec.racks or []),
        "serverProperties": render_server_properties(bc),
    }
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()


# -- builders -----------------------------------------------------------------------------


def _volume_claim_template(log_dir: LogDir) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": log_dir.size}},
    }
    if log_dir.storage_class_name is not None:
        spec["storageClassName"] = log_dir.storage_class_name
    return {"metadata": {"name": volume_name(log_dir)}, "spec": spec}


def _env(
    bc: BrokerCluster, *, controller_url: str, racks: list[str] | None
) -> list[dict[str, Any]]:
    advertised = (
        f"http://$(POD_NAME).{headless_service_name(bc)}.{_namespace(bc)}.svc:{BROKER_PORT}"
    )
    env: list[dict[str, Any]] = [
        # Must come before JBOD_ADVERTISED_URL: $(VAR) only expands variables defined earlier.
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {
            "name": "JBOD_BROKER_ID",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
        },
        {"name": "JBOD_LOG_DIRS", "value": ",".join(mount_path(ld) for ld in bc.spec.log_dirs)},
        {"name": "JBOD_ADVERTISED_URL", "value": advertised},
        {
            "name": "JBOD_KAFKA_ADVERTISED_LISTENERS",
            "value": f"PLAINTEXT://{kafka_bootstrap_host(bc, '$(POD_NAME)')}:{KAFKA_PORT}",
        },
        {"name": "JBOD_CONTROLLER_URL", "value": controller_url},
        {"name": "JBOD_TOKEN_FILE", "value": TOKEN_FILE},
    ]
    if racks:
        env.append({"name": RACKS_ENV, "value": ",".join(racks)})
    return env


def _probe(path: str, *, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": PORT_NAME, "scheme": "HTTP"},
        "periodSeconds": period,
        "timeoutSeconds": 3,
        "failureThreshold": failures,
    }


def build_statefulset(
    bc: BrokerCluster, *, controller_url: str, token_secret: str
) -> dict[str, Any]:
    """The brokers: one pod per broker id, one PVC per log dir per pod.

    - ``volumeClaimTemplates`` are one per log dir, in spec order (immutable once created: a
      change is classified by :mod:`jbod_operator.plan.storage_diff` first). PVCs are retained when
      the StatefulSet is deleted or scaled down.
    - The broker id is the pod ordinal, read from the ``apps.kubernetes.io/pod-index`` label
      (Kubernetes >= 1.28) through the downward API: no shell, no init container.
    - The rack of broker *i* is ``racks[i % len(racks)]``: it depends on the ordinal, which a
      pod template cannot compute, so the racks list goes in ``BROKER_RACKS`` and the broker
      picks its own. The broker has no setting for a list (a ``JBOD_RACKS`` variable would be an
      "unknown setting" that stops it), so the container then runs :data:`RACK_LAUNCHER`
      (``python -c``): it sets ``JBOD_BROKER_RACK`` and calls ``jbod_broker.__main__.main``.
      Without racks the image's own entrypoint runs.
    - ``token_secret`` names the Secret whose key ``token`` is mounted at ``/etc/jbod/token``.
    - The pod template carries :data:`CONFIG_HASH_ANNOTATION` (:func:`config_hash`).
    """
    _check(bc)
    racks = list(bc.spec.racks) if bc.spec.racks else None
    mounts: list[dict[str, Any]] = [
        {"name": volume_name(ld), "mountPath": mount_path(ld)} for ld in bc.spec.log_dirs
    ]
    mounts += [
        {"name": "config", "mountPath": CONFIG_PATH, "subPath": CONFIG_KEY, "readOnly": True},
        {"name": "token", "mountPath": TOKEN_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": bc.spec.image,
        "imagePullPolicy": bc.spec.image_pull_policy,
    }
    if racks:
        container["command"] = ["python", "-c", RACK_LAUNCHER]
    container.update(
        {
            "args": ["--config", CONFIG_PATH],
            "ports": [
                {"name": PORT_NAME, "containerPort": BROKER_PORT, "protocol": "TCP"},
                {"name": KAFKA_PORT_NAME, "containerPort": KAFKA_PORT, "protocol": "TCP"},
            ],
            "env": _env(bc, controller_url=controller_url, racks=racks),
            "volumeMounts": mounts,
            # Log recovery runs before the listener opens: give it up to 10 minutes.
            "startupProbe": _probe("/healthz", period=5, failures=120),
            "livenessProbe": _probe("/healthz", period=10, failures=3),
            "readinessProbe": _probe("/readyz", period=5, failures=2),
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
            },
        }
    )
    if bc.spec.resources is not None:
        container["resources"] = bc.spec.resources.dump()
    digest = config_hash(bc)
    pod_spec: dict[str, Any] = {
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 60,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "fsGroupChangePolicy": "OnRootMismatch",
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {
                "name": "config",
                "configMap": {
                    "name": configmap_name(bc),
                    "items": [{"key": CONFIG_KEY, "path": CONFIG_KEY}],
                },
            },
            {
                "name": "token",
                "secret": {
                    "secretName": token_secret,
                    "items": [{"key": TOKEN_KEY, "path": TOKEN_KEY}],
                    "defaultMode": 0o440,
                },
            },
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }
    metadata = _metadata(bc, statefulset_name(bc))
    metadata["annotations"] = {CONFIG_HASH_ANNOTATION: digest}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata,
        "spec": {
            "replicas": bc.spec.replicas,
            "serviceName": headless_service_name(bc),
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "persistentVolumeClaimRetentionPolicy": {
                "whenDeleted": "Retain",
                "whenScaled": "Retain",
            },
            "selector": {"matchLabels": selector_labels(bc)},
            "template": {
                "metadata": {
                    "labels": labels(bc),
                    "annotations": {
                        CONFIG_HASH_ANNOTATION: digest,
                        "kubectl.kubernetes.io/default-container": CONTAINER_NAME,
                    },
                },
                "spec": pod_spec,
            },
            "volumeClaimTemplates": [_volume_claim_template(ld) for ld in bc.spec.log_dirs],
        },
    }


def build_headless_service(bc: BrokerCluster) -> dict[str, Any]:
    """DNS for every broker pod, ready or not (brokers find each other while starting)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(bc, headless_service_name(bc)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(bc),
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": BROKER_PORT,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                },
                {
                    "name": KAFKA_PORT_NAME,
                    "port": KAFKA_PORT,
                    "targetPort": KAFKA_PORT_NAME,
                    "protocol": "TCP",
                },
            ],
        },
    }


def build_configmap(bc: BrokerCluster) -> dict[str, Any]:
    """``server.properties`` for every broker (per-broker settings come from the environment)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(bc, configmap_name(bc)),
        "data": {CONFIG_KEY: render_server_properties(bc)},
    }


def build_token_secret(bc: BrokerCluster, token: str) -> dict[str, Any]:
    """The shared bearer token of the operator and the brokers (``stringData``; the API server
    stores it base64-encoded under ``data``)."""
    if len(token.strip()) < MIN_TOKEN_LENGTH or token != token.strip():
        raise ValueError(
            f"the broker token must be at least {MIN_TOKEN_LENGTH} characters, without "
            "surrounding whitespace"
        )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(bc, token_secret_name(bc)),
        "stringData": {TOKEN_KEY: token},
    }


def build_pdb(bc: BrokerCluster) -> dict[str, Any]:
    """At most one broker voluntarily down at a time (drains, node upgrades)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(bc, pdb_name(bc)),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(bc)}},
    }
