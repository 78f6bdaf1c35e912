"""Fixtures for integration tests that need a real Kubernetes API (see tests/kube_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kube_cluster import KubeBinariesMissing, KubeCluster


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[KubeCluster]:
    """A kube-apiserver + etcd on loopback, shared by the session. Fails (never skips) when the
    binaries are missing: run `make kube-bins` (and `make kubectl-bins` for kubectl)."""
    cluster = KubeCluster()
    missing = ""
    try:
        cluster.require_kubectl()
        cluster.start()
    except KubeBinariesMissing as exc:
        missing = str(exc)
    if missing:
        pytest.fail(missing, pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
