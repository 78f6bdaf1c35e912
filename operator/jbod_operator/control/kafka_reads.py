"""How the operator reads an Apache Kafka cluster's brokers and their log dirs: the one reader
every Kafka adapter uses (``control.kafka_reassignments``, ``control.kafka_log_dir_moves``,
``control.kafka_snapshots``) and the KafkaCluster's status refresh, so a LogDirMove, a
PartitionReassignment, a Rebalance and the status see a broker that answers or does not alike.

DescribeLogDirs goes to one broker at a time (one broker's failure is its own), and a broker
that does not answer is asked once more before it counts as not answering: a single
timed-out read on a busy machine made a pass plan around two live brokers as if they were
down.
"""

from __future__ import annotations

import asyncio
import logging

from ..clients.kafka_admin import KafkaAdmin, KafkaAdminError
from ..plan.execution import ClusterUnusable
from ..plan.kafka_dirs import kafka_broker_dirs
from ..plan.kafka_types import BrokerLogDirs, ClusterDescription
from ..plan.port_types import BrokerDirs

log = logging.getLogger(__name__)

DIRS_ATTEMPTS = 2
"""DescribeLogDirs tries per broker and read before the broker counts as not answering."""

DIRS_RETRY_PAUSE_S = 0.5
"""The pause between them."""


async def read_log_dirs(admin: KafkaAdmin, broker: int) -> BrokerLogDirs:
    """One broker's DescribeLogDirs, asked again once when it does not answer; raises the
    last :class:`KafkaAdminError` when it answered neither time."""
    last = KafkaAdminError("DescribeLogDirs", "NoAnswer")
    for attempt in range(DIRS_ATTEMPTS):
        if attempt:
            await asyncio.sleep(DIRS_RETRY_PAUSE_S)
        try:
            answers = await admin.describe_log_dirs([broker])
        except KafkaAdminError as exc:
            last = exc
        else:
            if len(answers) == 1:
                return answers[0]
            last = KafkaAdminError(
                "DescribeLogDirs", "NoAnswer", f"{len(answers)} brokers answered"
            )
        log.info(
            "DescribeLogDirs not answered",
            extra={"broker": broker, "attempt": attempt + 1, "error": str(last)},
        )
    raise last


async def answered_log_dirs(admin: KafkaAdmin, broker: int) -> BrokerLogDirs | None:
    """:func:`read_log_dirs`, None when the broker did not answer."""
    try:
        return await read_log_dirs(admin, broker)
    except KafkaAdminError:
        return None


async def broker_dirs(admin: KafkaAdmin, broker: int) -> BrokerDirs | None:
    """One broker's dirs as the plans read them; None when it does not answer."""
    read = await answered_log_dirs(admin, broker)
    return None if read is None else kafka_broker_dirs(read)


async def read_cluster(
    admin: KafkaAdmin,
) -> tuple[ClusterDescription, dict[int, BrokerDirs | None]]:
    """DescribeCluster, then each unfenced broker's dirs (:func:`broker_dirs`; a fenced one
    is None, not asked). An unreachable cluster raises :class:`ClusterUnusable` (the client
    is closed, started afresh on the next call)."""
    try:
        desc = await admin.describe_cluster()
    except KafkaAdminError as exc:
        await admin.close()
        raise ClusterUnusable(
            "KafkaUnreachable", f"Kafka's DescribeCluster failed: {exc}"
        ) from None
    dirs: dict[int, BrokerDirs | None] = {}
    for b in desc.brokers:
        dirs[b.broker_id] = None if b.fenced else await broker_dirs(admin, b.broker_id)
    return desc, dirs
