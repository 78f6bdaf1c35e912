"""Pin the operator image's runtime dependencies to the project venv: requirements-operator.txt.

The image installs them with ``pip install --no-deps``, so the file must hold the whole closure
of pyproject's ``[project].dependencies`` plus the ``operator`` extra, at the versions the tests
ran with. Regenerate after changing the venv:

    .venv/bin/python -m tests.pin_operator_requirements

tests/integration/test_operator_image.py fails when the file drifts from the venv.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
REQUIREMENTS = REPO / "requirements-operator.txt"
EXTRA = "operator"
HEADER = (
    "# Runtime dependencies of the operator image (the root Dockerfile), pinned to the versions\n"
    "# the tests ran with: pyproject's dependencies, the `operator` extra and everything they\n"
    "# need. Regenerate with: .venv/bin/python -m tests.pin_operator_requirements\n"
    "# (tests/integration/test_operator_image.py fails when these drift from the venv).\n"
)


def top_level() -> list[Requirement]:
    """pyproject's [project].dependencies plus the operator extra."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    raw = [*project["dependencies"], *project["optional-dependencies"][EXTRA]]
    return [Requirement(r) for r in raw]


def applies(req: Requirement) -> bool:
    """Whether the image installs ``req``: its marker holds here, with no extra requested
    (``kio[codegen]`` needs an old pydantic the image never installs)."""
    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    env["extra"] = ""
    return req.marker is None or req.marker.evaluate(env)


def closure() -> dict[str, tuple[str, str]]:
    """canonical name -> (distribution name, installed version) of every runtime dependency."""
    todo = [r for r in top_level() if applies(r)]
    out: dict[str, tuple[str, str]] = {}
    while todo:
        req = todo.pop()
        key = canonicalize_name(req.name)
        if key in out:
            continue
        dist = metadata.distribution(req.name)
        out[key] = (dist.metadata["Name"], dist.version)
        for raw in dist.requires or []:
            dep = Requirement(raw)
            if applies(dep):
                todo.append(dep)
    return out


def render() -> str:
    lines = [f"{name}=={version}" for name, version in sorted(closure().values(), key=_key)]
    return HEADER + "\n".join(lines) + "\n"


def _key(item: tuple[str, str]) -> str:
    return canonicalize_name(item[0])


def main() -> int:
    REQUIREMENTS.write_text(render(), encoding="utf-8")
    print(f"wrote {REQUIREMENTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
