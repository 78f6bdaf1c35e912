"""e2e scenarios share the integration tier's real API server (one per test session)."""

from tests.integration.conftest import kube_cluster

__all__ = ["kube_cluster"]
