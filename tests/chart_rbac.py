"""What RBAC the operator needs, derived from its code, for the chart's tests.

Three sources, all read from ``operator/jbod_operator`` rather than written down by hand:

- **KubeClient calls**: every ``kube.<method>(RESOURCE, ...)`` in the package (receivers named
  ``kube`` or ``<anything>.kube``), with the verb that :class:`KubeClient` records for the
  method in ``KubeClient.calls`` (``apply`` is server-side apply: a PATCH that also needs
  ``create`` when the object is new).
- **kopf**: every resource a ``@kopf.on.*``/``@kopf.timer``/``@kopf.daemon`` handler serves is
  listed and watched, and patched (annotations, finalizers); kopf posts core/v1 Events; it
  lists and watches CRDs (and, watching one namespace, Namespaces) to follow the cluster.
- **owner references**: ``blockOwnerDeletion`` on owned objects needs ``update`` on the owner's
  ``finalizers`` subresource where OwnerReferencesPermissionEnforcement runs.

A rule is ``(api group, resource[/subresource], verb)``. ``required_rules`` groups them by the
chart's role that grants them: ``workload`` (ClusterRole, or Role in the watched namespace),
``leader-election`` (Role in the release namespace) and ``kopf`` (read-only ClusterRole).
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jbod_operator.clients import kube
from jbod_operator.models import GROUP, BrokerCluster
from jbod_operator.plan import builders

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "operator" / "jbod_operator"

Rule = tuple[str, str, str]
"""(apiGroup, resource or resource/subresource, verb)."""

KUBE_CLIENT_VERBS: dict[str, tuple[str, ...]] = {
    "get": ("get",),
    "list": ("list",),
    "create": ("create",),
    # Server-side apply: the API server authorizes a PATCH, and create when it creates.
    "apply": ("patch", "create"),
    "patch": ("patch",),
    "patch_status": ("patch",),
    "write_status": ("patch",),
    "replace": ("update",),
    "replace_status": ("update",),
    "delete": ("delete",),
}
"""KubeClient method -> RBAC verbs (the first is what KubeClient.calls records)."""

STATUS_METHODS = frozenset({"patch_status", "write_status", "replace_status"})
NOT_API_CALLS = frozenset({"close", "from_env", "served"})
"""Not resource requests: ``served`` reads discovery, which every authenticated user may."""
KOPF_RESOURCE_DECORATORS = frozenset(
    {"resume", "create", "update", "delete", "field", "event", "timer", "daemon", "index"}
)
KOPF_VERBS = ("list", "watch", "patch")
CLUSTER_OBSERVATION: tuple[Rule, ...] = (
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
)
NAMESPACE_OBSERVATION: tuple[Rule, ...] = (
    ("", "namespaces", "list"),
    ("", "namespaces", "watch"),
)
LEADER_ELECTION_RESOURCES = frozenset({("coordination.k8s.io", "leases")})


@dataclass
class StaticCalls:
    rules: dict[Rule, list[str]] = field(default_factory=dict)
    """Each rule with where it is needed (file:line)."""
    unresolved: list[str] = field(default_factory=list)
    """Calls whose resource could not be resolved to a kube.Resource constant."""

    def add(self, rule: Rule, where: str) -> None:
        self.rules.setdefault(rule, []).append(where)


def resource_constants() -> dict[str, kube.Resource]:
    return {n: v for n, v in vars(kube).items() if isinstance(v, kube.Resource)}


def kube_client_methods() -> set[str]:
    """KubeClient's public methods (each one a kind of API call, except NOT_API_CALLS)."""
    return {
        name
        for name, _ in inspect.getmembers(kube.KubeClient, callable)
        if not name.startswith("_") and name not in NOT_API_CALLS
    }


def _modules(package: Path) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(package.rglob("*.py")):
        # tools/ (jbod-ctl, crdgen, localkube) run as a person, not under the chart's
        # ServiceAccount; kube.py defines the calls rather than making them.
        if "__pycache__" in path.parts or "tools" in path.parts or path.name == "kube.py":
            continue
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_kube_receiver(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kube") or (
        isinstance(node, ast.Attribute) and node.attr == "kube"
    )


def kube_client_calls(package: Path = PACKAGE) -> StaticCalls:
    consts = resource_constants()
    out = StaticCalls()
    for path, tree in _modules(package):
        rel = path.relative_to(REPO)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and _is_kube_receiver(node.func.value)
            ):
                continue
            method = node.func.attr
            where = f"{rel}:{node.lineno}"
            if method in NOT_API_CALLS:
                continue
            if method not in KUBE_CLIENT_VERBS:
                out.unresolved.append(f"{where}: unknown KubeClient method {method!r}")
                continue
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, ast.Name) and arg.id in consts):
                out.unresolved.append(
                    f"{where}: kube.{method}(...) with a resource that is not a kube.py "
                    "constant: RBAC cannot be derived"
                )
                continue
            res = consts[arg.id]
            name = res.plural
            sub = "status" if method in STATUS_METHODS else None
            for kw in node.keywords:
                if kw.arg == "sub":
                    if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)):
                        out.unresolved.append(f"{where}: sub= is not a constant")
                        continue
                    sub = kw.value.value
            if sub:
                name = f"{name}/{sub}"
            for verb in KUBE_CLIENT_VERBS[method]:
                out.add((res.group, name, verb), where)
    return out


def _const_str(node: ast.expr, names: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def _kopf_resource(deco: ast.Call, names: dict[str, str]) -> tuple[str | None, str | None]:
    """(group, plural) of a kopf resource decorator: (GROUP, VERSION, "plural"),
    ("group/version", "plural"), ("plural.group") or group=/plural= keywords."""
    kw = {k.arg: _const_str(k.value, names) for k in deco.keywords if k.arg}
    args = [_const_str(a, names) for a in deco.args]
    if kw.get("plural"):
        return kw.get("group"), kw["plural"]
    if not args:
        return None, None
    if len(args) == 1:
        if args[0] is None:
            return None, ""
        plural, _, group = args[0].partition(".")
        return group, plural
    first = args[0]
    return (first.split("/")[0] if first is not None else None), args[-1]


def kopf_served_resources(package: Path = PACKAGE) -> dict[tuple[str, str], list[str]]:
    """(group, plural) of every resource a kopf handler serves, with where."""
    names = {"GROUP": GROUP}
    out: dict[tuple[str, str], list[str]] = {}
    for path, tree in _modules(package):
        for node in ast.walk(tree):
            if not isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)):
                    continue
                text = ast.unparse(deco.func)
                if not text.startswith("kopf.") or deco.func.attr not in KOPF_RESOURCE_DECORATORS:
                    continue
                group, plural = _kopf_resource(deco, names)
                if plural is None:
                    continue  # activity handlers (startup, login...) serve no resource
                if group is None:
                    raise AssertionError(
                        f"{path}:{deco.lineno}: cannot read the resource of {ast.unparse(deco)}"
                    )
                out.setdefault((group, plural), []).append(
                    f"{path.relative_to(REPO)}:{deco.lineno}"
                )
    return out


def owner_reference_rules() -> dict[Rule, list[str]]:
    """``update`` on ``<owner>/finalizers`` when owned objects block the owner's deletion."""
    sample = BrokerCluster.model_validate(
        {
            "metadata": {"name": "x", "namespace": "ns", "uid": "u"},
            "spec": {"replicas": 1, "logDirs": [{"name": "a", "size": "1Gi"}]},
        }
    )
    ref = builders.owner_reference(sample)
    if not ref.get("blockOwnerDeletion"):
        return {}
    res = kube.BY_KIND[ref["kind"]]
    return {(res.group, f"{res.plural}/finalizers", "update"): ["builders.owner_reference"]}


def required_rules(*, namespaced: bool, kopf_observation: bool = True) -> dict[str, set[Rule]]:
    """The rules each of the chart's roles must hold (nothing more, nothing less)."""
    static = kube_client_calls()
    if static.unresolved:
        raise AssertionError("\n".join(static.unresolved))
    workload: set[Rule] = set()
    leader: set[Rule] = set()
    for rule in static.rules:
        group, resource, _verb = rule
        if (group, resource.split("/")[0]) in LEADER_ELECTION_RESOURCES:
            leader.add(rule)
        else:
            workload.add(rule)
    served = kopf_served_resources()
    for group, plural in served:
        workload.update((group, plural, verb) for verb in KOPF_VERBS)
    if served:
        workload.add(("", "events", "create"))
    workload.update(owner_reference_rules())
    observation: set[Rule] = set()
    if kopf_observation:
        observation.update(CLUSTER_OBSERVATION)
        if namespaced:
            observation.update(NAMESPACE_OBSERVATION)
    return {"workload": workload, "leader-election": leader, "kopf": observation}


def rules_of(role: dict[str, Any]) -> set[Rule]:
    """The (group, resource, verb) triples a Role/ClusterRole grants (resourceNames ignored)."""
    out: set[Rule] = set()
    for rule in role.get("rules") or []:
        for group in rule.get("apiGroups") or [""]:
            for resource in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    out.add((group, resource, verb))
    return out


def describe(rules: Iterable[Rule]) -> str:
    return "\n".join(f"  {g or 'core'} {r}: {v}" for g, r, v in sorted(rules))


@dataclass(frozen=True)
class AuditedCall:
    verb: str
    group: str
    resource: str
    namespace: str | None
    code: int
    message: str

    @property
    def rule(self) -> Rule:
        return (self.group, self.resource, self.verb)

    @property
    def rules(self) -> set[Rule]:
        """What the request needed: a server-side apply that created the object (201) was
        authorized for create as well as patch."""
        out = {self.rule}
        if self.verb == "patch" and self.code == 201:
            out.add((self.group, self.resource, "create"))
        return out


def audited_calls(log: Path, username: str) -> list[AuditedCall]:
    """Resource requests made by ``username``, from an API server audit log (JSON lines)."""
    latest: dict[str, dict[str, Any]] = {}  # by auditID: a watch logs ResponseStarted first
    for line in log.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") == username:
            latest[event["auditID"]] = event
    out = []
    for event in latest.values():
        ref = event.get("objectRef")
        if not ref:
            continue  # discovery (/api, /apis/...): allowed to every authenticated user
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        status = event.get("responseStatus") or {}
        out.append(
            AuditedCall(
                verb=event["verb"],
                group=ref.get("apiGroup", ""),
                resource=resource,
                namespace=ref.get("namespace"),
                code=int(status.get("code", 0)),
                message=str(status.get("message", "")),
            )
        )
    return out
