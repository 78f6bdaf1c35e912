"""The broker image, checked without a Docker engine.

What `docker build -f broker_image/Dockerfile .` and `docker run` would rely on, checked from
the repository and the project venv:
- every COPY source exists (the build context is the repository root) and the packaging step
  (`pip install --no-deps /app/src` with empty operator/ and spark_apps/) finds the broker;
- the pinned requirements are exactly the venv's versions and close over every runtime
  dependency, since the image installs them with --no-deps;
- a slim Python base matching the venv's Python, a non-root USER owning the declared VOLUMEs,
  and a HEALTHCHECK on /healthz at the exposed port;
- the ENTRYPOINT + CMD (`python -m jbod_broker --config <file>`) start a real broker from a
  config laid out like the image's, answer /healthz and /readyz, pass the image's own health
  check command, shut down on SIGTERM with exit code 0 after flushing and marking every log
  dir clean, and start again on the same volumes;
- a bad setting stops it with exit code 2 and a message naming the setting.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from setuptools import find_namespace_packages, find_packages

from jbod_broker import wire
from jbod_broker.local import free_port
from jbod_broker.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    read_offsets,
)
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, iter_batches
from tests.dockerfile import Dockerfile, Instruction, pin_drift, read_pins
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "broker_image" / "Dockerfile"
REQUIREMENTS = REPO_ROOT / "broker_image" / "requirements.txt"
PYPROJECT = REPO_ROOT / "pyproject.toml"
TOKEN = "image-test-token-0123456789abcdef"


# -- Dockerfile parsing ---------------------------------------------------------------------


_DOCKERFILE = Dockerfile(DOCKERFILE)
parse_dockerfile = _DOCKERFILE.parse
instructions = _DOCKERFILE.instructions
only = _DOCKERFILE.only
copy_sources = _DOCKERFILE.copy_sources


def volumes() -> list[str]:
    out: list[str] = []
    for ins in instructions("VOLUME"):
        out += ins.words()
    return out


def healthcheck_argv() -> list[str]:
    ins = only("HEALTHCHECK")
    m = re.search(r"\bCMD\s+(.*)$", ins.args)
    assert m, f"line {ins.line}: HEALTHCHECK without CMD"
    cmd = m.group(1).strip()
    return Instruction("CMD", cmd, ins.line).words()


def exposed_port() -> int:
    """The HTTP API's port, exposed first; the Kafka listener's (issue 18) follows it."""
    ports = [int(w.split("/")[0]) for i in instructions("EXPOSE") for w in i.words()]
    assert len(ports) == 2 and ports[1] == 9093, ports
    return ports[0]


# -- the build context ----------------------------------------------------------------------


def test_dockerfile_parses_and_has_one_stage() -> None:
    kinds = [i.keyword for i in parse_dockerfile()]
    assert kinds[0] == "FROM"
    assert kinds.count("FROM") == 1
    assert {"COPY", "RUN", "USER", "VOLUME", "HEALTHCHECK", "ENTRYPOINT", "CMD"} <= set(kinds)


def test_every_copy_source_exists_in_the_build_context() -> None:
    sources = copy_sources()
    assert sources, "the Dockerfile copies nothing"
    for ins, srcs, _dest in sources:
        for src in srcs:
            assert not os.path.isabs(src), f"line {ins.line}: {src} must be context-relative"
            path = (REPO_ROOT / src).resolve()
            assert path.is_relative_to(REPO_ROOT), f"line {ins.line}: {src} leaves the context"
            assert path.exists(), f"line {ins.line}: COPY source {src} is not in the repository"


def test_dockerignore_does_not_hide_copied_files() -> None:
    ignore = REPO_ROOT / ".dockerignore"
    if not ignore.exists():
        return
    patterns = [
        p.strip()
        for p in ignore.read_text(encoding="utf-8").splitlines()
        if p.strip() and not p.startswith("#") and not p.startswith("!")
    ]
    for ins, srcs, _ in copy_sources():
        for src in srcs:
            for pat in patterns:
                assert not Path(src).match(pat.rstrip("/")), (
                    f"line {ins.line}: {src} is excluded by .dockerignore pattern {pat!r}"
                )


def _dockerignored(rel: str) -> bool:
    """Docker's reading of .dockerignore, as far as this repository's patterns need: a path is
    left out of the context when it or a folder above it matches a pattern (``**`` any depth)."""
    import fnmatch

    patterns = [
        p.strip()
        for p in (REPO_ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if p.strip() and not p.startswith("#")
    ]
    parts = Path(rel).parts
    heads = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch.fnmatch(h, pat) or fnmatch.fnmatch(h, pat.replace("**/", "*/")) or h == pat
        for pat in patterns
        for h in heads
    )


def test_the_development_harness_stays_out_of_both_images() -> None:
    """Issue 38: local broker processes, the counting clients and the local-cluster tool are
    for `make demo` and the tests; the images' build context leaves them out, and the rest of
    the broker package goes in (the import contract in pyproject.toml keeps the runtime from
    needing them)."""
    harness = {
        "broker_image/jbod_broker/local.py",
        "broker_image/jbod_broker/counting.py",
        "operator/jbod_operator/tools/localkube.py",
    }
    assert {h for h in harness if not _dockerignored(h)} == set()
    shipped = [
        str(p.relative_to(REPO_ROOT))
        for p in (REPO_ROOT / "broker_image" / "jbod_broker").rglob("*.py")
        if "__pycache__" not in p.parts and str(p.relative_to(REPO_ROOT)) not in harness
    ]
    assert shipped and [p for p in shipped if _dockerignored(p)] == []


def test_copied_tree_is_an_installable_broker_package(tmp_path: Path) -> None:
    """Stage the context as the image lays it out, then run the packaging discovery on it."""
    stage = tmp_path / "app-src"
    for _ins, srcs, dest in copy_sources():
        if not dest.startswith("/app/src"):
            continue
        target = stage / dest.removeprefix("/app/src").lstrip("/")
        for src in srcs:
            path = REPO_ROOT / src
            # Docker copies a directory's contents; a file lands under a "/"-ended dest.
            into_dir = dest.endswith("/") or len(srcs) > 1
            where = target / path.name if into_dir and not path.is_dir() else target
            if path.is_dir():
                where.mkdir(parents=True, exist_ok=True)
                for f in path.rglob("*"):
                    if f.is_file() and not _dockerignored(str(f.relative_to(REPO_ROOT))):
                        (where / f.relative_to(path)).parent.mkdir(parents=True, exist_ok=True)
                        (where / f.relative_to(path)).write_bytes(f.read_bytes())
            else:
                where.parent.mkdir(parents=True, exist_ok=True)
                where.write_bytes(path.read_bytes())
    # The RUN step's mkdir: the other package roots exist, empty.
    run = " ".join(i.args for i in instructions("RUN"))
    for m in re.finditer(r"mkdir -p ((?:/app/src/\S+\s*)+)", run):
        for d in m.group(1).split():
            (stage / d.removeprefix("/app/src/")).mkdir(parents=True, exist_ok=True)
    assert "pip install --no-deps /app/src" in run

    project = tomllib.loads((stage / "pyproject.toml").read_text(encoding="utf-8"))
    find = project["tool"]["setuptools"]["packages"]["find"]
    found: set[str] = set()
    for where in find["where"]:
        assert (stage / where).is_dir(), f"packages.find where={where} missing in the image"
        # pyproject's packages.find defaults to namespaces = true.
        finder = find_namespace_packages if find.get("namespaces", True) else find_packages
        found |= set(finder(str(stage / where), include=find["include"]))
    pkg_root = REPO_ROOT / "broker_image"
    expected = {
        ".".join(p.parent.relative_to(pkg_root).parts)
        for p in (pkg_root / "jbod_broker").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert "jbod_broker" in expected
    assert expected <= found, f"not packaged in the image: {sorted(expected - found)}"
    assert (stage / "broker_image" / "jbod_broker" / "__main__.py").is_file()
    script = project["project"]["scripts"]["jbod-broker"]
    assert script == "jbod_broker.__main__:main"


# -- pinned dependencies --------------------------------------------------------------------


def pins() -> dict[str, tuple[str, str]]:
    return read_pins(REQUIREMENTS)


def test_pins_equal_the_venv_versions() -> None:
    drift = pin_drift(pins())
    assert not drift, "broker_image/requirements.txt drifted (run `make pin`):\n" + "\n".join(drift)


def runtime_dependencies() -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    return [Requirement(r) for r in project["project"]["dependencies"]]


def test_every_runtime_dependency_is_pinned_and_allowed() -> None:
    pinned = pins()
    deps = runtime_dependencies()
    assert deps
    for req in deps:
        key = canonicalize_name(req.name)
        assert key in pinned, f"pyproject dependency {req.name} is not pinned for the image"
        assert req.specifier.contains(pinned[key][1], prereleases=True), (
            f"{req.name}=={pinned[key][1]} does not satisfy pyproject's {req}"
        )


def test_pins_close_over_transitive_dependencies() -> None:
    """`pip install --no-deps` installs only what is listed: nothing may be missing."""
    env = {k: str(v) for k, v in default_environment().items()} | {"extra": ""}
    pinned = pins()
    todo = [canonicalize_name(r.name) for r in runtime_dependencies()]
    seen: set[str] = set()
    missing: dict[str, str] = {}
    conflicts: list[str] = []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in pinned:
            continue  # reported by the caller that needed it
        for raw in metadata.requires(name) or []:
            req = Requirement(raw)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dep = canonicalize_name(req.name)
            if dep not in pinned:
                missing[dep] = name
            elif not req.specifier.contains(pinned[dep][1], prereleases=True):
                conflicts.append(f"{name} needs {req}, pinned {pinned[dep][1]}")
            todo.append(dep)
    assert not missing, "needed at run time but not pinned: " + ", ".join(
        f"{d} (for {by})" for d, by in sorted(missing.items())
    )
    assert not conflicts, "pins that break a dependency: " + "; ".join(conflicts)


# -- base image, user, volumes, health check ------------------------------------------------


def test_slim_python_base_matching_the_venv() -> None:
    image = only("FROM").words()[0]
    m = re.fullmatch(r"(?:docker\.io/)?(?:library/)?python:(\d+)\.(\d+)(?:\.\d+)?-slim\S*", image)
    assert m, f"base image {image} is not a slim Python image"
    assert (int(m.group(1)), int(m.group(2))) == sys.version_info[:2], (
        f"the image runs Python {m.group(1)}.{m.group(2)}, the pins were tested on "
        f"{sys.version_info[0]}.{sys.version_info[1]}"
    )


def test_runs_as_a_non_root_user_owning_the_volumes() -> None:
    user = only("USER").words()[0]
    uid, _, gid = user.partition(":")
    assert uid not in ("root", "0", ""), f"USER {user} is root"
    if gid:
        assert gid not in ("root", "0"), f"USER {user} has the root group"
    run = " ".join(i.args for i in instructions("RUN"))
    if uid.isdigit():
        assert re.search(rf"useradd\b[^&]*--uid {uid}\b", run), f"no user with uid {uid} made"
    vols = volumes()
    assert vols, "no VOLUME declared: log dirs would live in the container layer"
    # Changes a RUN makes to a path after VOLUME declares it are discarded: the folders
    # must be created and chowned before.
    all_ins = parse_dockerfile()
    vol_line = min(i.line for i in all_ins if i.keyword == "VOLUME")
    chown_lines = [i.line for i in all_ins if i.keyword == "RUN" and "chown" in i.args]
    assert chown_lines and max(chown_lines) < vol_line
    for v in vols:
        assert os.path.isabs(v), v
        assert v in run.split() or f"{v} " in run, f"volume {v} is not created before USER"
        owner = re.search(r"chown -R (\S+) (\S+)", run)
        assert owner and v.startswith(owner.group(2).rstrip("/") + "/"), (
            f"volume {v} is not chowned to the broker user"
        )


def test_healthcheck_is_wired_to_healthz_on_the_exposed_port() -> None:
    ins = only("HEALTHCHECK")
    assert "/healthz" in ins.args
    assert f":{exposed_port()}/healthz" in ins.args
    for opt in ("--interval", "--timeout", "--start-period"):
        assert opt in ins.args, f"HEALTHCHECK without {opt}"
    argv = healthcheck_argv()
    assert argv[0] == "python", argv  # the image's python, not a shell pipeline


def test_default_config_path_and_token_location_are_documented() -> None:
    entry = only("ENTRYPOINT").words()
    cmd = only("CMD").words()
    assert entry == ["python", "-m", "jbod_broker"]
    assert cmd[0] == "--config" and cmd[1].startswith("/etc/jbod/")
    assert "/etc/jbod" in " ".join(i.args for i in instructions("RUN"))


# -- the entry point starts a real broker ---------------------------------------------------


@dataclass
class ImageLayout:
    """The container's filesystem, mapped under a temp dir (/etc/jbod, /var/lib/jbod...)."""

    root: Path
    port: int = field(default_factory=free_port)
    extra: dict[str, str] = field(default_factory=dict)

    def path(self, container_path: str) -> Path:
        return self.root / container_path.lstrip("/")

    @property
    def config_path(self) -> Path:
        return self.path(only("CMD").words()[1])

    @property
    def token_path(self) -> Path:
        return self.path("/etc/jbod/token/token")

    @property
    def log_dirs(self) -> list[Path]:
        return [self.path(v) for v in volumes()]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)  # the volumes exist, empty, as mounted
        self.token_path.parent.mkdir(parents=True, exist_ok=True)
        self.token_path.write_text(TOKEN + "\n", encoding="utf-8")
        self.token_path.chmod(0o600)
        props = {
            "broker.id": "0",
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "listeners": self.url,
            "token.file": str(self.token_path),
            **self.extra,
        }
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "# like the operator's ConfigMap\n" + "".join(f"{k}={v}\n" for k, v in props.items()),
            encoding="utf-8",
        )

    def argv(self) -> list[str]:
        """ENTRYPOINT + CMD with the venv's python and the mapped config path."""
        entry = only("ENTRYPOINT").words()
        cmd = only("CMD").words()
        assert entry[0] == "python"
        return [sys.executable, *entry[1:], cmd[0], str(self.config_path), *cmd[2:]]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JBOD_")}
    env.update(extra)
    return env


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    log_path: Path

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def start(layout: ImageLayout, env: dict[str, str] | None = None) -> Running:
    log_path = layout.root / f"broker-{time.monotonic_ns()}.log"
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen(
            layout.argv(), stdout=logf, stderr=subprocess.STDOUT, env=env or clean_env()
        )
    return Running(proc, log_path)


def http(
    method: str, url: str, body: bytes | None = None, ctype: str | None = None, token: str = ""
) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method)
    if ctype:
        req.add_header("Content-Type", ctype)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.read()


def wait_status(run: Running, url: str, timeout_s: float = 30) -> None:
    def ok() -> bool:
        if run.proc.poll() is not None:
            pytest.fail(f"broker exited with {run.proc.returncode}:\n{run.output()[-3000:]}")
        return http("GET", url)[0] == 200

    wait_for(
        ok,
        lambda: f"{url} to answer 200:\n{run.output()[-3000:]}",
        timeout_s,
        retry=(urllib.error.URLError, OSError),
    )


def stop(run: Running, timeout_s: float = 20) -> int:
    if run.proc.poll() is None:
        run.proc.send_signal(signal.SIGTERM)
        try:
            run.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            run.proc.wait()
            pytest.fail(f"no exit within {timeout_s}s of SIGTERM:\n{run.output()[-3000:]}")
    return run.proc.returncode


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[ImageLayout]:
    lay = ImageLayout(tmp_path / "container")
    lay.write()
    yield lay


def leader_and_isr(layout: ImageLayout, tp: TopicPartition, *, new: bool) -> None:
    req = wire.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=1,
        partitions=[
            wire.LeaderAndIsrPartition(
                topic=tp.topic,
                partition=tp.partition,
                leader=0,
                leader_epoch=0,
                isr=[0],
                replicas=[0],
                is_new_replica=new,
            )
        ],
    )
    status, body = http(
        "POST",
        layout.url + "/v1/controller/leader-and-isr",
        req.model_dump_json().encode(),
        "application/json",
        TOKEN,
    )
    assert status == 200, body
    resp = wire.LeaderAndIsrResponse.model_validate_json(body)
    assert [p.error for p in resp.partitions] == [None], resp


def run_healthcheck(port: int) -> int:
    argv = healthcheck_argv()
    argv = [sys.executable, *(a.replace(f":{exposed_port()}/", f":{port}/") for a in argv[1:])]
    return subprocess.run(argv, capture_output=True, timeout=30, env=clean_env()).returncode


def test_entrypoint_starts_serves_and_shuts_down_cleanly(layout: ImageLayout) -> None:
    run = start(layout)
    try:
        wait_status(run, layout.url + "/healthz")
        wait_status(run, layout.url + "/readyz")
        status, body = http("GET", layout.url + "/readyz")
        ready = json.loads(body)
        assert (ready["status"], ready["offline_log_dirs"]) == ("ready", [])
        assert ready["open_files"]["limit"] > 0  # the open-file budget (issue 14)
        assert run_healthcheck(layout.port) == 0, "the image's HEALTHCHECK fails on a live broker"
        # The admin API and the data path need the token from the mounted Secret.
        assert http("POST", layout.url + "/v1/controller/leader-and-isr", b"{}", "x")[0] == 401
        assert http("GET", layout.url + "/v1/data/metadata")[0] == 401

        tp = TopicPartition("image-check", 0)
        leader_and_isr(layout, tp, new=True)
        batch = build_batch([(b"k%d" % i, b"v" * 100) for i in range(10)])
        produce = f"{layout.url}/v1/data/produce?topic={tp.topic}&partition=0&acks=-1"
        for _ in range(3):
            status, body = http("POST", produce, batch, "application/octet-stream", TOKEN)
            assert status == 200, body
        assert wire.ProduceResponse.model_validate_json(body).last_offset == 29
    finally:
        rc = stop(run)
    assert rc == 0, f"SIGTERM gave exit code {rc}:\n{run.output()[-3000:]}"
    assert "broker_stopped" in run.output()
    assert run_healthcheck(layout.port) != 0, "the HEALTHCHECK passes with no broker"

    holders = []
    for d in layout.log_dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists(), f"{d} has no clean-shutdown marker"
        assert (d / META_PROPERTIES).exists(), f"{d} was not initialised"
        points = read_offsets(str(d / RECOVERY_POINT_CHECKPOINT))
        if tp in points:
            holders.append(d)
            assert points[tp] == 30, f"the shutdown did not flush {tp}: recovery point {points}"
    assert len(holders) == 1, "the partition should live in exactly one log dir"

    # The volumes outlive the container: a new one starts on them and serves the data.
    run = start(layout)
    try:
        wait_status(run, layout.url + "/readyz")
        for d in layout.log_dirs:
            assert not (d / CLEAN_SHUTDOWN_FILE).exists(), "marker kept after a restart"
        leader_and_isr(layout, tp, new=False)
        status, data = http(
            "GET", f"{layout.url}/v1/data/fetch?topic={tp.topic}&partition=0&offset=0", token=TOKEN
        )
        assert status == 200
        assert [h.records_count for _, h in iter_batches(data)] == [10, 10, 10]
    finally:
        rc = stop(run)
    assert rc == 0, run.output()[-3000:]


def test_sigint_is_graceful_too(layout: ImageLayout) -> None:
    # The entry point's own variables (read by __main__) must not be taken for settings.
    run = start(layout, clean_env(JBOD_LOG_LEVEL="DEBUG"))
    try:
        wait_status(run, layout.url + "/readyz")
    finally:
        run.proc.send_signal(signal.SIGINT)
        try:
            rc = run.proc.wait(20)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            run.proc.wait()
            raise
    assert rc == 0, run.output()[-3000:]
    assert '"level": "debug"' in run.output(), "JBOD_LOG_LEVEL=DEBUG was not applied"
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in layout.log_dirs)


# -- configuration errors -------------------------------------------------------------------


def run_to_exit(layout: ImageLayout, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = subprocess.run(
        layout.argv(), capture_output=True, timeout=60, env=env or clean_env(), check=False
    )
    return proc.returncode, proc.stderr.decode(errors="replace")


@pytest.mark.parametrize(
    ("extra", "setting"),
    [
        ({"broker.id": "-1"}, "broker.id"),
        ({"log.dirs": "data-0,data-1"}, "log.dirs"),
        ({"log.dirs": "/var/lib/jbod/data-0,/var/lib/jbod/data-0"}, "log.dirs"),
        ({"no.such.setting": "true"}, "no.such.setting"),
        ({"num.replica.fetchers": "lots"}, "num.replica.fetchers"),
        ({"listeners": "tcp://0.0.0.0:9092"}, "listeners"),
        ({"auth.disabled": "maybe"}, "auth.disabled"),
    ],
)
def test_bad_setting_exits_2_naming_it(tmp_path: Path, extra: dict[str, str], setting: str) -> None:
    lay = ImageLayout(tmp_path / "container", extra=extra)
    lay.write()
    rc, err = run_to_exit(lay)
    assert rc == 2, err
    assert "configuration error" in err
    assert setting in err, err
    assert "Traceback" not in err


def test_bad_env_override_exits_2_naming_it(layout: ImageLayout) -> None:
    rc, err = run_to_exit(layout, clean_env(JBOD_BROKER_ID="-1"))
    assert rc == 2 and "broker.id" in err, err


def test_short_token_exits_2(layout: ImageLayout) -> None:
    layout.token_path.write_text("too-short\n", encoding="utf-8")
    rc, err = run_to_exit(layout)
    assert rc == 2 and "token.file" in err, err


def test_missing_config_file_exits_2(layout: ImageLayout) -> None:
    layout.config_path.unlink()
    rc, err = run_to_exit(layout)
    assert rc == 2 and str(layout.config_path) in err, err


def test_no_usable_log_dir_exits_3(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("", encoding="utf-8")
    lay = ImageLayout(tmp_path / "container", extra={"log.dirs": str(blocker)})
    lay.write()
    rc, err = run_to_exit(lay)
    assert rc == 3, err
    assert "jbod-broker:" in err
