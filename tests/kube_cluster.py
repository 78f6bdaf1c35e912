"""A real kube-apiserver + etcd on loopback, for integration and e2e tests.

The implementation is the product's (:mod:`jbod_operator.tools.localkube`, which ``make demo``
uses too), so tests and demo start the API server the same way; this module keeps the name the
tests import it by::

    from tests.kube_cluster import KubeCluster

    with KubeCluster() as kube:
        kube.kubectl("get", "namespaces", check=True)
"""

from __future__ import annotations

from jbod_operator.tools.localkube import (
    KubeBinariesMissing,
    KubeCluster,
    default_bin_dir,
    find_binaries,
    main,
    pinned_kube_version,
)

__all__ = [
    "KubeBinariesMissing",
    "KubeCluster",
    "default_bin_dir",
    "find_binaries",
    "pinned_kube_version",
]


if __name__ == "__main__":  # manual smoke test: python -m tests.kube_cluster
    main()
