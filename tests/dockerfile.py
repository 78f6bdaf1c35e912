"""Reading a Dockerfile the way Docker does, and its pinned requirements, for the image tests.

No Docker engine runs here: the tests check what an image build would copy, install and run.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int

    def words(self) -> list[str]:
        """Exec (JSON array) form or shell-style words."""
        text = self.args.strip()
        if text.startswith("["):
            parsed = json.loads(text)
            assert isinstance(parsed, list), self
            return [str(x) for x in parsed]
        return shlex.split(text)


class Dockerfile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def parse(self) -> list[Instruction]:
        out: list[Instruction] = []
        buf, start = "", 0
        for no, raw in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.rstrip()
            if not line.strip() or line.lstrip().startswith("#"):
                continue  # blank and comment lines (also inside a continuation, as Docker does)
            if not buf:
                start = no
            if line.endswith("\\"):
                buf += line[:-1] + " "
                continue
            buf += line
            keyword, _, args = buf.strip().partition(" ")
            out.append(Instruction(keyword.upper(), args.strip(), start))
            buf = ""
        assert not buf, "the Dockerfile ends inside a line continuation"
        return out

    def instructions(self, keyword: str) -> list[Instruction]:
        return [i for i in self.parse() if i.keyword == keyword]

    def only(self, keyword: str) -> Instruction:
        found = self.instructions(keyword)
        assert found, f"the Dockerfile has no {keyword}"
        return found[-1]  # Docker uses the last one

    def copy_sources(self) -> list[tuple[Instruction, list[str], str]]:
        """(instruction, sources, destination) of every COPY/ADD from the build context."""
        out = []
        for ins in self.instructions("COPY") + self.instructions("ADD"):
            words = ins.words()
            if any(w.startswith("--from") for w in words):
                continue  # another stage, not the build context
            words = [w for w in words if not w.startswith("--")]
            assert len(words) >= 2, f"line {ins.line}: COPY needs a source and a destination"
            out.append((ins, words[:-1], words[-1]))
        return out


def read_pins(path: Path) -> dict[str, tuple[str, str]]:
    """A pinned requirements file (what an image installs with ``--no-deps``):
    canonical name -> (name as written, version). Every line must pin with ``==``."""
    out: dict[str, tuple[str, str]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        assert m, f"{path.name}: {line!r} is not pinned with =="
        key = canonicalize_name(m.group(1))
        assert key not in out, f"{path.name} pins {m.group(1)} twice"
        out[key] = (m.group(1), m.group(2))
    return out


def pin_drift(pins: dict[str, tuple[str, str]]) -> list[str]:
    """Pins that differ from what the project's venv has installed."""
    drift = []
    for name, version in pins.values():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            drift.append(f"{name}=={version} is not installed in the venv")
            continue
        if installed != version:
            drift.append(f"{name}: pinned {version}, the venv has {installed}")
    return drift
