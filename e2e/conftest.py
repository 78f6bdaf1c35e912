"""e2e scenarios share the integration tier's real API server (one per test session) and its
JBOD Kafka cluster fixture (one per module); a test about to time out prints where its asyncio
tasks wait."""

from tests.integration.conftest import kafka_jbod, kube_cluster
from tests.task_dump import _dump_tasks_before_timeout

__all__ = ["_dump_tasks_before_timeout", "kafka_jbod", "kube_cluster"]
