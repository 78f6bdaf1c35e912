"""Producer-id blocks: Kafka's controller rule for handing out idempotent producers' ids.

A broker answers InitProducerId from a block of ids the controller gave it (Kafka's
``ProducerIdControlManager`` and ``ProducerIdsBlock``, KIP-730). Our controller is the
operator; the next block's first id is kept in a ConfigMap per BrokerCluster, and each block is
taken by one conditional write (the ConfigMap's ``resourceVersion`` as a precondition: of two
writers, or of an operator that lost its leadership meanwhile, only one succeeds). Ids are
therefore unique across the brokers of a cluster, and across restarts of brokers and of the
operator: the counter lives in the API server (etcd), not on a broker's disks, so even a
broker whose every disk was replaced never reuses an id another producer had.

Pure: the caller reads and writes the ConfigMap (``control.endpoint``).
"""

from __future__ import annotations

from typing import Any, Final

BLOCK_SIZE: Final = 1000
"""Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``."""

NEXT_BLOCK_KEY: Final = "nextBlockStart"
MAX_PRODUCER_ID: Final = 2**63 - 1


class ProducerIdsExhausted(Exception):
    """No block fits below 2^63 any more (Kafka refuses likewise)."""


def config_map_name(cluster: str) -> str:
    """The ConfigMap that holds a BrokerCluster's next producer-id block."""
    return f"{cluster}-producer-ids"


def next_block_start(config_map: dict[str, Any] | None) -> int:
    """The first id of the next block, from the ConfigMap as read (``None``: none yet, 0).

    A value that is not a non-negative integer raises ``ValueError``: guessing would risk
    handing out ids already given.
    """
    if config_map is None:
        return 0
    raw = (config_map.get("data") or {}).get(NEXT_BLOCK_KEY)
    if not isinstance(raw, str) or not raw.isdecimal():
        raise ValueError(f"{NEXT_BLOCK_KEY} is not a non-negative integer: {raw!r}")
    start = int(raw)
    return start


def take_block(start: int) -> tuple[int, int]:
    """``(first id, the next block's start)`` for the block at ``start``."""
    if start > MAX_PRODUCER_ID - BLOCK_SIZE:
        raise ProducerIdsExhausted(f"no producer-id block of {BLOCK_SIZE} fits after {start}")
    return start, start + BLOCK_SIZE


def config_map_body(namespace: str, cluster: str, next_start: int) -> dict[str, Any]:
    """The ConfigMap as first created. It has no owner: deleting the BrokerCluster leaves it,
    so a cluster made again under the same name goes on from where the old one stopped."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(cluster),
            "namespace": namespace,
            "annotations": {"jbod.io/cluster": cluster, "jbod.io/purpose": "producer-ids"},
        },
        "data": {NEXT_BLOCK_KEY: str(next_start)},
    }
