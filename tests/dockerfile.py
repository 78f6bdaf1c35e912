"""Reading a Dockerfile the way Docker does, for the image tests (no Docker engine runs here:
the tests check what an image build would copy and run, not an image)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path


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
