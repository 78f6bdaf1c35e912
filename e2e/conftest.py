"""e2e scenarios share the integration tier's real API server (one per test session) and its
JBOD Kafka cluster fixture (one per module)."""

from tests.integration.conftest import kafka_jbod, kube_cluster

__all__ = ["kafka_jbod", "kube_cluster"]
