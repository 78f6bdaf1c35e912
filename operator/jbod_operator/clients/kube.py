"""A small async client of the Kubernetes API over aiohttp.

kopf watches and calls handlers; everything the operator itself reads or writes goes through
this client. It is deliberately small: get/list/create/server-side apply/merge patch/delete on a
handful of resources. Each call is recorded as (verb, group, resource[/subresource]) in
``calls``, so a test can compare what the code really does with the RBAC rules the Helm chart
grants. Credentials come from a kubeconfig (``KUBECONFIG``) or the pod's service account.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import yaml

from ..models.spark_application import SPARK_GROUP

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace)}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name)}"
        if sub:
            base += f"/{sub}"
        return base


STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
SERVICES = Resource("", "v1", "services", "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
PODS = Resource("", "v1", "pods", "Pod")
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
EVENTS = Resource("", "v1", "events", "Event")
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
BROKER_CLUSTERS = Resource("jbod.io", "v1alpha1", "brokerclusters", "BrokerCluster")
TOPICS = Resource("jbod.io", "v1alpha1", "topics", "Topic")
PARTITION_SHARDS = Resource("jbod.io", "v1alpha1", "partitionshards", "PartitionShard")
LOG_DIR_MOVES = Resource("jbod.io", "v1alpha1", "logdirmoves", "LogDirMove")
REASSIGNMENTS = Resource("jbod.io", "v1alpha1", "partitionreassignments", "PartitionReassignment")
REBALANCES = Resource("jbod.io", "v1alpha1", "rebalances", "Rebalance")
KAFKA_CLUSTERS = Resource("jbod.io", "v1alpha1", "kafkaclusters", "KafkaCluster")
JOBS = Resource("batch", "v1", "jobs", "Job")
SPARK_APPLICATIONS = Resource(SPARK_GROUP, "v1beta2", "sparkapplications", "SparkApplication")
BY_KIND = {
    r.kind: r
    for r in (
        STATEFULSETS,
        SERVICES,
        CONFIGMAPS,
        SECRETS,
        PODS,
        PVCS,
        EVENTS,
        PDBS,
        LEASES,
        BROKER_CLUSTERS,
        TOPICS,
        PARTITION_SHARDS,
        LOG_DIR_MOVES,
        REASSIGNMENTS,
        REBALANCES,
        KAFKA_CLUSTERS,
        JOBS,
        SPARK_APPLICATIONS,
    )
}


TOO_MANY_REQUESTS_RETRIES = 10


def _retry_after(header: str | None) -> float:
    """Retry-After in seconds (1 when absent or not a number, at most 5)."""
    try:
        return min(max(float(header or 1), 0.1), 5.0)
    except ValueError:
        return 1.0


def _answer(status: int, raw: bytes, method: str, path: str) -> Any:
    """The decoded body of an answer, or its :class:`ApiError`."""
    if status >= 400:
        try:
            st = json.loads(raw)
        except ValueError:
            raise ApiError(status, "", raw[:300].decode(errors="replace"), method, path) from None
        raise ApiError(status, st.get("reason", ""), st.get("message", ""), method, path)
    return json.loads(raw) if raw else None


class ApiError(Exception):
    def __init__(self, status: int, reason: str, message: str, verb: str, path: str) -> None:
        super().__init__(f"{verb} {path}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def forbidden(self) -> bool:
        return self.status == 403


@dataclass
class Credentials:
    server: str
    token: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    cert_file: str | None = None
    key_file: str | None = None


def _materialise(data_b64: str, suffix: str) -> str:
    fd, path = tempfile.mkstemp(suffix=suffix, prefix="jbod-kube-")
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(data_b64))
    return path


def load_credentials(kubeconfig: str | None = None) -> Credentials:
    """Kubeconfig (explicit, then $KUBECONFIG, then ~/.kube/config), else in-cluster."""
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        ctx_name = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user: dict[str, Any] = next(
            (u["user"] for u in cfg.get("users", []) if u["name"] == ctx.get("user")), {}
        )
        creds = Credentials(server=cluster["server"].rstrip("/"))
        creds.insecure = bool(cluster.get("insecure-skip-tls-verify"))
        if "certificate-authority-data" in cluster:
            creds.ca_file = _materialise(cluster["certificate-authority-data"], ".crt")
        elif "certificate-authority" in cluster:
            creds.ca_file = cluster["certificate-authority"]
        if "token" in user:
            creds.token = user["token"]
        elif "tokenFile" in user:
            with open(user["tokenFile"], encoding="utf-8") as f:
                creds.token = f.read().strip()
        if "client-certificate-data" in user:
            creds.cert_file = _materialise(user["client-certificate-data"], ".crt")
            creds.key_file = _materialise(user["client-key-data"], ".key")
        elif "client-certificate" in user:
            creds.cert_file, creds.key_file = user["client-certificate"], user["client-key"]
        return creds
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
    )
    if not host:
        raise RuntimeError("no kubeconfig found and not running in a cluster")
    with open(os.path.join(SA_DIR, "token"), encoding="utf-8") as f:
        token = f.read().strip()
    return Credentials(
        server=f"https://{host}:{port}", token=token, ca_file=os.path.join(SA_DIR, "ca.crt")
    )


class KubeClient:
    def __init__(self, creds: Credentials, *, field_manager: str = "jbod-operator") -> None:
        self.creds = creds
        self.field_manager = field_manager
        self.calls: set[tuple[str, str, str]] = set()
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_env(cls, kubeconfig: str | None = None) -> KubeClient:
        return cls(load_credentials(kubeconfig))

    def _ssl(self) -> ssl.SSLContext | bool:
        if not self.creds.server.startswith("https"):
            return False
        ctx = ssl.create_default_context(cafile=self.creds.ca_file)
        if self.creds.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.creds.cert_file and self.creds.key_file:
            ctx.load_cert_chain(self.creds.cert_file, self.creds.key_file)
        return ctx

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            headers = {"Accept": "application/json"}
            if self.creds.token:
                headers["Authorization"] = f"Bearer {self.creds.token}"
            self._session = aiohttp.ClientSession(
                headers=headers,
                connector=aiohttp.TCPConnector(ssl=self._ssl()),
                timeout=aiohttp.ClientTimeout(total=30),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(
        self,
        verb: str,
        res: Resource,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
        sub: str | None = None,
    ) -> Any:
        self.calls.add((verb, res.group, res.plural + (f"/{sub}" if sub else "")))
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(TOO_MANY_REQUESTS_RETRIES + 1):
            async with self.session.request(
                method,
                self.creds.server + path,
                data=data,
                params=params,
                headers={"Content-Type": content_type} if data is not None else None,
            ) as resp:
                raw = await resp.read()
                if resp.status == 429 and attempt < TOO_MANY_REQUESTS_RETRIES:
                    # The API server's "come back later" (priority and fairness, or a new
                    # CRD's storage still initialising): client-go waits Retry-After, as here.
                    await asyncio.sleep(_retry_after(resp.headers.get("Retry-After")))
                    continue
                return _answer(resp.status, raw, method, path)
        raise AssertionError("unreachable")

    async def served(self, res: Resource) -> bool:
        """Whether the API server serves ``res`` (discovery of its group version, which every
        authenticated user may read: no RBAC rule, so not recorded in ``calls``)."""
        base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
        async with self.session.get(self.creds.server + base) as resp:
            if resp.status == 404:
                return False
            raw = await resp.read()
            if resp.status >= 400:
                raise ApiError(resp.status, "", raw[:300].decode(errors="replace"), "GET", base)
        listed = json.loads(raw).get("resources") or []
        return any(r.get("name") == res.plural for r in listed)

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            out: dict[str, Any] = await self._call("get", res, "GET", res.path(namespace, name))
            return out
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def list(
        self, res: Resource, namespace: str | None, *, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else None
        out = await self._call("list", res, "GET", res.path(namespace), params=params)
        items: list[dict[str, Any]] = out.get("items", [])
        return items

    async def create(self, res: Resource, namespace: str | None, body: dict[str, Any]) -> Any:
        return await self._call("create", res, "POST", res.path(namespace), body=body)

    async def apply(self, res: Resource, namespace: str | None, body: dict[str, Any]) -> Any:
        """Server-side apply: idempotent, and only the fields we own are touched."""
        name = body["metadata"]["name"]
        return await self._call(
            "patch",
            res,
            "PATCH",
            res.path(namespace, name),
            body=body,
            content_type="application/apply-patch+yaml",
            params={"fieldManager": self.field_manager, "force": "true"},
        )

    async def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        sub: str | None = None,
    ) -> Any:
        return await self._call(
            "patch",
            res,
            "PATCH",
            res.path(namespace, name, sub),
            body=patch,
            content_type="application/merge-patch+json",
            sub=sub,
        )

    async def patch_status(
        self, res: Resource, namespace: str | None, name: str, status: dict[str, Any]
    ) -> Any:
        return await self.patch(res, namespace, name, {"status": status}, sub="status")

    async def write_status(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
    ) -> Any:
        """Make the status ``after`` when it was ``before`` (one merge patch; nothing sent when
        they are equal). Keys that went away, nested ones included, are removed."""
        if dict(after) == dict(before):
            return None
        return await self.patch_status(res, namespace, name, merge_patch(before, after))

    async def replace_status(
        self, res: Resource, namespace: str | None, obj: dict[str, Any]
    ) -> Any:
        """PUT /status with the object's resourceVersion: fails (409) if it changed since read."""
        return await self._call(
            "update",
            res,
            "PUT",
            res.path(namespace, obj["metadata"]["name"], "status"),
            body=obj,
            sub="status",
        )

    async def replace(self, res: Resource, namespace: str | None, obj: dict[str, Any]) -> Any:
        """PUT with the object's resourceVersion: 409 if someone changed it since we read it."""
        return await self._call(
            "update", res, "PUT", res.path(namespace, obj["metadata"]["name"]), body=obj
        )

    async def delete(
        self, res: Resource, namespace: str | None, name: str, *, propagation: str | None = None
    ) -> bool:
        body = {"propagationPolicy": propagation} if propagation else None
        try:
            await self._call("delete", res, "DELETE", res.path(namespace, name), body=body)
            return True
        except ApiError as e:
            if e.status == 404:
                return False
            raise


def merge_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns ``before`` into ``after``: a merge patch
    merges nested objects, so a key missing from ``after`` must be sent as null or it stays."""
    out: dict[str, Any] = {k: None for k in before if k not in after}
    for k, v in after.items():
        old = before.get(k)
        if isinstance(v, Mapping) and isinstance(old, Mapping):
            sub = merge_patch(old, v)
            if sub:
                out[k] = sub
        elif v != old or k not in before:
            out[k] = v
    return out
