"""kio entities that several tests build the same way (one home for their fields)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from jbod_broker.kafka import protocol
from jbod_broker.kafka.protocol import make, response_module


def fetch_partition_data(records: Any, *, version: int = 12, high_watermark: int = 7) -> Any:
    """A Fetch response's answer for partition 0 holding ``records`` (bytes, or anything with
    a length where a test stands in for a file range), no error."""
    m = response_module(protocol.FETCH, version)
    return make(
        m.PartitionData,
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=high_watermark,
        last_stable_offset=high_watermark,
        log_start_offset=0,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=records,
    )
