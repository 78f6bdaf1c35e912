"""The kubectl wrapper: every Kubernetes read and write of ``jbod-ctl`` goes through kubectl.

Why kubectl rather than an API client: the user's kubeconfig, contexts, exec credential plugins
and proxies then work exactly as they do for ``kubectl get``, and the tool needs no client
library in the operator's dependencies. Failures become :class:`~.common.CliError` with
kubectl's own message.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...plan import partition_shards
from .common import CliError


def find_kubectl(explicit: str | None = None) -> str:
    """--kubectl, else $KUBECTL, else kubectl on PATH, else the one next to this Python (the
    project's .venv/bin, where ``make setup`` puts it)."""
    for cand in (explicit, os.environ.get("KUBECTL")):
        if cand:
            return cand
    found = shutil.which("kubectl")
    if found:
        return found
    sibling = Path(sys.executable).parent / "kubectl"
    if os.access(sibling, os.X_OK):
        return str(sibling)
    raise CliError(
        "kubectl not found: run `make setup` (it installs kubectl into .venv/bin) "
        "or pass --kubectl PATH"
    )


class KubectlError(CliError):
    """kubectl exited non-zero. ``not_found`` lets callers turn a NotFound into a message that
    names the missing resource while any other failure keeps kubectl's own words."""

    def __init__(self, args: Sequence[str], stderr: str) -> None:
        self.not_found = "NotFound" in stderr or "not found" in stderr
        text = stderr.strip() or "(no output)"
        super().__init__(f"kubectl {' '.join(args)} failed: {text}")


@dataclass
class Kubectl:
    """One kubectl binary with the user's ``--kubeconfig`` and ``-n``, run with a timeout so a
    dead API server ends the command instead of hanging it."""

    binary: str
    kubeconfig: str | None = None
    namespace: str | None = None
    timeout_s: float = 60.0

    def command(self, args: Sequence[str]) -> list[str]:
        cmd = [self.binary]
        if self.kubeconfig:
            cmd.append(f"--kubeconfig={self.kubeconfig}")
        if self.namespace:
            cmd += ["-n", self.namespace]
        return cmd + list(args)

    def run(self, *args: str, input: str | None = None) -> str:
        """kubectl's stdout; a failure, a missing binary or a timeout is a CliError."""
        try:
            p = subprocess.run(
                self.command(args),
                input=input,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise CliError(f"cannot run {self.binary!r}: no such file") from None
        except subprocess.TimeoutExpired:
            raise CliError(
                f"kubectl {' '.join(args)}: no answer in {self.timeout_s:.0f} s"
            ) from None
        if p.returncode != 0:
            raise KubectlError(args, p.stderr)
        return p.stdout

    def get_json(self, *args: str) -> dict[str, Any]:
        """``kubectl get ARGS -o json`` as an object."""
        text = self.run("get", *args, "-o", "json")
        try:
            data = json.loads(text)
        except ValueError as e:
            raise CliError(f"kubectl get {' '.join(args)}: not JSON: {e}") from None
        if not isinstance(data, dict):
            raise CliError(f"kubectl get {' '.join(args)}: expected an object")
        return data

    def topics(self) -> list[dict[str, Any]]:
        """The namespace's Topics with their partition state of record (their
        PartitionShards joined in, ``plan.partition_shards``: the rule the operator reads by)."""
        topics = self.get_json("topics.jbod.io").get("items") or []
        shards = self.get_json("partitionshards.jbod.io").get("items") or []
        return partition_shards.join_all(topics, shards)


def add_kube_options(p: argparse.ArgumentParser) -> None:
    """The options every command that talks to Kubernetes takes, spelled as kubectl's."""
    p.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: the kubeconfig's)")
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)",
    )
    p.add_argument(
        "--kubectl", metavar="PATH", help="kubectl binary (default: $KUBECTL, PATH, .venv/bin)"
    )


def kubectl_from_args(ns: argparse.Namespace) -> Kubectl:
    """The :class:`Kubectl` that :func:`add_kube_options`' options describe."""
    return Kubectl(find_kubectl(ns.kubectl), ns.kubeconfig, ns.namespace)
