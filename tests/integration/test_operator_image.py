"""The operator image (the repository's root Dockerfile), checked without a Docker engine.

What `docker build .` and `docker run` would rely on, checked from the repository and the venv:
- every COPY source exists in the build context (the repository root, minus .dockerignore) and
  the copied tree is a package that installs both jbod_operator and the jbod_broker it imports;
- requirements-operator.txt pins exactly the venv's versions of the closure of pyproject's
  dependencies plus the `operator` extra (the image installs it with --no-deps), and the
  entry point imports nothing from outside it;
- a slim Python base matching the venv's Python, a non-root USER whose uid the chart runs as,
  the chart's port exposed with a HEALTHCHECK on /healthz;
- the ENTRYPOINT (`python -m jbod_operator`) imports, exits 2 naming a bad setting, and, given a
  kubeconfig, serves /healthz and /readyz (active) and passes the image's own health check.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from setuptools import find_namespace_packages, find_packages

from tests import pin_operator_requirements as pins_mod
from tests.dockerfile import Dockerfile, Instruction, pin_drift, read_pins
from tests.kube_cluster import KubeCluster
from tests.operator_harness import OperatorProcess, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
REQUIREMENTS = REPO / "requirements-operator.txt"
CHART_VALUES = REPO / "charts" / "jbod-operator" / "values.yaml"


# -- Dockerfile parsing ---------------------------------------------------------------------


_DOCKERFILE = Dockerfile(DOCKERFILE)
parse_dockerfile = _DOCKERFILE.parse
instructions = _DOCKERFILE.instructions
only = _DOCKERFILE.only
copy_sources = _DOCKERFILE.copy_sources


def run_text() -> str:
    return " ".join(i.args for i in instructions("RUN"))


# -- the build context ----------------------------------------------------------------------


def test_dockerfile_has_one_stage_and_what_an_image_needs() -> None:
    kinds = [i.keyword for i in parse_dockerfile()]
    assert kinds[0] == "FROM" and kinds.count("FROM") == 1
    assert {"COPY", "RUN", "USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT"} <= set(kinds)


def test_every_copy_source_exists_in_the_build_context() -> None:
    ignored = []
    ignore = REPO / ".dockerignore"
    if ignore.exists():
        ignored = [
            p.strip().rstrip("/")
            for p in ignore.read_text(encoding="utf-8").splitlines()
            if p.strip() and not p.startswith(("#", "!"))
        ]
    sources = copy_sources()
    assert sources, "the Dockerfile copies nothing"
    for ins, srcs, _dest in sources:
        for src in srcs:
            assert not os.path.isabs(src), f"line {ins.line}: {src} must be context-relative"
            path = (REPO / src).resolve()
            assert path.is_relative_to(REPO), f"line {ins.line}: {src} leaves the context"
            assert path.exists(), f"line {ins.line}: COPY source {src} is not in the repository"
            for pat in ignored:
                assert not Path(src).match(pat), f"line {ins.line}: .dockerignore hides {src}"


def test_copied_tree_installs_the_operator_and_the_broker_package(tmp_path: Path) -> None:
    """Stage the context as the image lays it out, then run the packaging discovery on it."""
    stage = tmp_path / "app-src"
    for _ins, srcs, dest in copy_sources():
        if not dest.startswith("/app/src"):
            continue
        target = stage / dest.removeprefix("/app/src").lstrip("/")
        for src in srcs:
            path = REPO / src
            if path.is_dir():
                for f in path.rglob("*"):
                    if f.is_file() and "__pycache__" not in f.parts:
                        (target / f.relative_to(path)).parent.mkdir(parents=True, exist_ok=True)
                        (target / f.relative_to(path)).write_bytes(f.read_bytes())
            else:
                into = target / path.name if dest.endswith("/") or len(srcs) > 1 else target
                into.parent.mkdir(parents=True, exist_ok=True)
                into.write_bytes(path.read_bytes())
    for m in re.finditer(r"mkdir -p ((?:/app/src/\S+\s*)+)", run_text()):
        for d in m.group(1).split():
            (stage / d.removeprefix("/app/src/")).mkdir(parents=True, exist_ok=True)
    assert "pip install --no-deps /app/src" in run_text()

    project = tomllib.loads((stage / "pyproject.toml").read_text(encoding="utf-8"))
    find = project["tool"]["setuptools"]["packages"]["find"]
    found: set[str] = set()
    for where in find["where"]:
        assert (stage / where).is_dir(), f"packages.find where={where} is missing in the image"
        finder = find_namespace_packages if find.get("namespaces", True) else find_packages
        found |= set(finder(str(stage / where), include=find["include"]))
    expected = set()
    for root, pkg in (("operator", "jbod_operator"), ("broker_image", "jbod_broker")):
        base = REPO / root
        expected |= {
            ".".join(p.parent.relative_to(base).parts)
            for p in (base / pkg).rglob("__init__.py")
            if "__pycache__" not in p.parts
        }
    assert {"jbod_operator", "jbod_broker"} <= expected
    assert expected <= found, f"not packaged in the image: {sorted(expected - found)}"
    assert project["project"]["scripts"]["jbod-operator"] == "jbod_operator.__main__:main"


# -- pinned dependencies --------------------------------------------------------------------


def pins() -> dict[str, tuple[str, str]]:
    return read_pins(REQUIREMENTS)


def test_the_image_installs_the_pinned_file() -> None:
    (src, dest) = next((s, d) for _i, s, d in copy_sources() if s == [REQUIREMENTS.name])
    assert f"pip install --no-deps -r {dest}" in run_text(), src


def test_pins_equal_the_venv_versions() -> None:
    drift = pin_drift(pins())
    assert not drift, (
        f"{REQUIREMENTS.name} drifted (run .venv/bin/python -m tests.pin_operator_requirements):\n"
        + "\n".join(drift)
    )


def test_pins_cover_pyproject_dependencies_and_the_operator_extra() -> None:
    pinned = pins()
    reqs = pins_mod.top_level()
    names = {canonicalize_name(r.name) for r in reqs}
    assert {"pydantic", "aiohttp", "kopf", "pyyaml", "crc32c", "prometheus-client"} <= names
    for req in reqs:
        key = canonicalize_name(req.name)
        assert key in pinned, f"pyproject dependency {req.name} is not pinned for the image"
        assert req.specifier.contains(pinned[key][1], prereleases=True), (
            f"{req.name}=={pinned[key][1]} does not satisfy pyproject's {req}"
        )


def test_pins_are_exactly_the_runtime_closure() -> None:
    """`pip install --no-deps` installs only what is listed: nothing missing, nothing extra."""
    pinned = pins()
    closure = pins_mod.closure()
    assert pinned.keys() == closure.keys(), (
        f"missing: {sorted(closure.keys() - pinned.keys())}, "
        f"not needed: {sorted(pinned.keys() - closure.keys())}"
    )
    conflicts = []
    for key in closure:
        for raw in metadata.requires(closure[key][0]) or []:
            dep = Requirement(raw)
            dep_key = canonicalize_name(dep.name)
            if (
                pins_mod.applies(dep)
                and dep_key in pinned
                and not dep.specifier.contains(pinned[dep_key][1], prereleases=True)
            ):
                conflicts.append(f"{key} needs {dep}, pinned {pinned[dep_key][1]}")
    assert not conflicts, "; ".join(conflicts)
    assert REQUIREMENTS.read_text(encoding="utf-8") == pins_mod.render(), (
        "requirements-operator.txt is not what tests.pin_operator_requirements writes"
    )


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JBOD_") and k != "KUBECONFIG"}
    env.update(extra)
    return env


def optional_extras(pinned: Iterable[str]) -> set[str]:
    """Distributions a pinned one requires only under an extra: it imports them when present
    and runs without them (kafka-python tries lz4, python-snappy and zstandard for its codecs;
    the image installs none, the dev venv has them for the client tests)."""
    out: set[str] = set()
    for name in pinned:
        for raw in metadata.requires(name) or []:
            req = Requirement(raw)
            if req.marker is not None and "extra" in str(req.marker):
                out.add(canonicalize_name(req.name))
    return out


def test_entrypoint_imports_only_pinned_distributions() -> None:
    """The entry point and the handlers it registers load nothing the image does not install."""
    probe = (
        "import sys\n"
        "before = set(sys.modules)  # the interpreter's own start-up (site, .pth hooks)\n"
        "import json, importlib.metadata as md\n"
        "import jbod_operator.__main__, jbod_operator.main\n"
        "dists = md.packages_distributions()\n"
        "new = set(sys.modules) - before\n"
        "names = {d for m in new for d in dists.get(m.split('.')[0], [])}\n"
        "print(json.dumps(sorted(names)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=True,
    )
    loaded = {canonicalize_name(n) for n in json.loads(out.stdout)}
    own = {"jbod-operator"}
    missing = loaded - own - pins().keys() - optional_extras(pins().keys())
    assert not missing, f"imported at start-up but not pinned for the image: {sorted(missing)}"


# -- base image, user, port, health check ---------------------------------------------------


def test_slim_python_base_matching_the_venv() -> None:
    image = only("FROM").words()[0]
    m = re.fullmatch(r"(?:docker\.io/)?(?:library/)?python:(\d+)\.(\d+)(?:\.\d+)?-slim\S*", image)
    assert m, f"base image {image} is not a slim Python image"
    assert (int(m.group(1)), int(m.group(2))) == sys.version_info[:2]


def chart_values() -> dict[str, object]:
    values: dict[str, object] = yaml.safe_load(CHART_VALUES.read_text(encoding="utf-8"))
    return values


def test_runs_as_the_non_root_user_the_chart_expects() -> None:
    user = only("USER").words()[0]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0, f"USER {user} must be a numeric non-root uid"
    assert gid.isdigit() and int(gid) > 0, f"USER {user} must have a non-root gid"
    assert re.search(rf"useradd\b[^&]*--uid {uid}\b", run_text()), f"no user with uid {uid}"
    assert re.search(rf"groupadd\b[^&]*--gid {gid}\b", run_text()), f"no group with gid {gid}"
    security = chart_values()["securityContext"]
    assert isinstance(security, dict)
    assert (security["runAsUser"], security["runAsGroup"]) == (int(uid), int(gid))


def test_exposes_the_charts_port_with_a_healthcheck() -> None:
    ports = [int(w.split("/")[0]) for i in instructions("EXPOSE") for w in i.words()]
    operator = chart_values()["operator"]
    assert isinstance(operator, dict)
    assert ports == [operator["port"]]
    hc = only("HEALTHCHECK")
    assert f"127.0.0.1:{ports[0]}/healthz" in hc.args
    for opt in ("--interval", "--timeout", "--start-period"):
        assert opt in hc.args, f"HEALTHCHECK without {opt}"


def healthcheck_argv(port: int) -> list[str]:
    m = re.search(r"\bCMD\s+(.*)$", only("HEALTHCHECK").args)
    assert m
    argv = Instruction("CMD", m.group(1), 0).words()
    assert argv[0] == "python"
    return [sys.executable, *(a.replace(":8080/", f":{port}/") for a in argv[1:])]


def test_entrypoint_is_the_operator_module() -> None:
    assert only("ENTRYPOINT").words() == ["python", "-m", "jbod_operator"]
    assert not instructions("CMD"), "the operator takes no arguments: settings are variables"


# -- the entry point ------------------------------------------------------------------------


def entrypoint_argv() -> list[str]:
    entry = only("ENTRYPOINT").words()
    return [sys.executable, *entry[1:]]


def test_entrypoint_module_imports() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import jbod_operator.__main__"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("JBOD_OPERATOR_LEASE_SECONDS", "1", "JBOD_OPERATOR_LEASE_SECONDS"),
        ("JBOD_OPERATOR_CONTROLLER_LISTEN_PORT", "http", "JBOD_OPERATOR_CONTROLLER_LISTEN_PORT"),
        ("JBOD_OPERATOR_SESSION_TIMEOUT_SECONDS", "-3", "JBOD_OPERATOR_SESSION_TIMEOUT_SECONDS"),
        ("JBOD_OPERATOR_NO_SUCH_SETTING", "1", "unknown setting JBOD_OPERATOR_NO_SUCH_SETTING"),
    ],
)
def test_bad_setting_exits_2_naming_it(name: str, value: str, expected: str) -> None:
    proc = subprocess.run(
        entrypoint_argv(),
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(**{name: value}),
    )
    assert proc.returncode == 2, proc.stderr
    assert "configuration error" in proc.stderr and expected in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        with err:
            return int(err.code)


def test_entrypoint_serves_health_and_readiness(kube_cluster: KubeCluster, tmp_path: Path) -> None:
    """`python -m jbod_operator` as the image runs it, against the test API server: /healthz
    answers, /readyz turns 200 once it holds the Lease, and the image's health check passes."""
    ns = "image-check"
    kube_cluster.kubectl("create", "namespace", ns, check=False)
    op = OperatorProcess(
        kube_cluster,
        ns,
        str(tmp_path),
        name="image-entrypoint",
        env={"JBOD_OPERATOR_LEASE_NAME": "image-check-leader"},
    )
    op.start()
    try:
        wait_for(lambda: http_status(op.url + "/healthz") == 200, what="/healthz", timeout=60)
        wait_for(lambda: http_status(op.url + "/readyz") == 200, what="/readyz", timeout=60)
        check = subprocess.run(
            healthcheck_argv(op.port), capture_output=True, timeout=30, env=clean_env()
        )
        assert check.returncode == 0, check.stderr
        assert op.proc is not None and op.proc.poll() is None
    finally:
        op.stop()
    assert op.proc.returncode == 0, op.tail()
    after = subprocess.run(
        healthcheck_argv(op.port), capture_output=True, timeout=30, env=clean_env()
    )
    assert after.returncode != 0, "the health check passes with no operator"
