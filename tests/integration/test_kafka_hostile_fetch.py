"""Issue 36 (1, and Metadata of 3): Fetch and Metadata requests a hostile client sends.

A 61 KB Fetch naming t-0 2,048 times took a broker from 79 to 2,064 MiB (every entry read to
its partition maximum before the response's ``max_bytes`` trimmed them); 25,000 entries held
the loop 4.3 s and ran the process out of descriptors (a file range per entry); Metadata
naming 100,000 topics held the loop 5.7 s. Here, against real brokers (the fixture of
``test_kafka_bad_input``: two brokers, ``t`` with replicas [0, 1] led by broker 0): the peak
RSS stays under the baseline plus the response's ``max_bytes``; /readyz, asked from another
process, answers within 100 ms while 25,000-entry Fetches (a follower's and a consumer's)
and a 100,000-topic Metadata are served; the descriptors stay bounded and the broker serves
afterwards.
"""

from __future__ import annotations

import datetime
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.metadata.v8 import request as metadata_v8

from tests.integration import test_kafka_bad_input as bad_input
from tests.integration.kafka_wire import call
from tests.integration.test_broker_loop import READY_WITHIN_S, ReadyzProbe
from tests.integration.test_broker_memory import vm_kib
from tests.integration.test_kafka_bad_input import (
    Env,
    batch,
    follower_fetch_request,
    produce_request,
    still_serves,
)
from tests.tiers import SERIAL

pytestmark = [pytest.mark.integration, SERIAL]

env = bad_input.env
"""The fixture of ``test_kafka_bad_input``: two brokers, ``t`` led by broker 0."""

DUPLICATES = 2_048
MANY = 25_000
TOPICS = 100_000
RESPONSE_MAX_BYTES = 1 << 20


def fetch_request(
    entries: int, *, replica_id: int = -1, offset: int = 0, partition_max_bytes: int = 1 << 20
) -> Any:
    """A Fetch naming t-0 ``entries`` times (no wait: answered at once)."""
    m: Any = fetch_v12
    part = m.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=offset,
        partition_max_bytes=partition_max_bytes,
    )
    return m.FetchRequest(
        replica_id=replica_id,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=RESPONSE_MAX_BYTES,
        topics=(m.FetchTopic(topic="t", partitions=(part,) * entries),),
        forgotten_topics_data=(),
    )


def metadata_request(names: list[str]) -> Any:
    """Metadata v8: a name costs its length and two bytes (v10+ add a topic id to each)."""
    m: Any = metadata_v8
    return m.MetadataRequest(
        topics=tuple(m.MetadataRequestTopic(name=n) for n in names),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def pid(env: Env) -> int:
    proc = env.cluster[0].proc
    assert proc is not None
    return proc.pid


def open_fds(p: int) -> int:
    return len(os.listdir(f"/proc/{p}/fd"))


class FdWatch:
    """The most descriptors the broker held while a request was served, sampled from a
    thread (the test's loop is busy sending and reading)."""

    def __init__(self, p: int) -> None:
        self.pid, self.peak, self._stop = p, open_fds(p), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, open_fds(self.pid))
            time.sleep(0.001)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


async def fill(env: Env, batches: int, size: int) -> int:
    """``batches`` one-record batches of ``size`` bytes on t-0; the log end after them."""
    end = 0
    for _ in range(batches):
        resp = await call(env.leader, produce_request(batch(1, size)))
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.none, part
        end = part.base_offset + 1
    return end


async def while_probed(env: Env, tmp_path: Path, send: Callable[[], Any]) -> tuple[Any, float]:
    """``send()`` answered while /readyz is asked from another process; the answer and the
    worst /readyz latency."""
    probe = ReadyzProbe(env.cluster[0].url, tmp_path)
    try:
        resp = await send()
    finally:
        latencies = probe.finish()
    assert len(latencies) >= 2, "the probe never ran beside the request"
    return resp, max(latencies)


async def test_a_fetch_naming_one_partition_2048_times_reads_it_once(env: Env) -> None:
    # 4 MiB on t-0 in 60 KiB batches: each entry read to its 1 MiB maximum would be 2 GiB.
    await fill(env, 70, 60_000)
    p = pid(env)
    warm = await call(env.leader, fetch_request(1))  # code paths and buffers warm
    assert len(warm.responses[0].partitions[0].records) > RESPONSE_MAX_BYTES // 2
    with open(f"/proc/{p}/clear_refs", "w") as f:
        f.write("5")  # VmHWM from now on
    baseline_kib = vm_kib(p, "VmRSS")
    resp = await call(env.leader, fetch_request(DUPLICATES), timeout_s=60)
    peak_kib = vm_kib(p, "VmHWM")
    print(
        f"Fetch naming t-0 {DUPLICATES} times: RSS baseline {baseline_kib / 1024:.1f} MiB, "
        f"peak {peak_kib / 1024:.1f} MiB (bound +{RESPONSE_MAX_BYTES >> 20} MiB)"
    )
    assert peak_kib < baseline_kib + RESPONSE_MAX_BYTES // 1024
    # Served once, as Kafka's LinkedHashMap of fetch partitions answers it.
    (topic,) = resp.responses
    (part,) = topic.partitions
    assert part.error_code == ErrorCode.none
    assert 0 < len(part.records) <= RESPONSE_MAX_BYTES


@pytest.mark.parametrize("who", ["follower", "consumer"])
async def test_25000_entries_neither_hold_the_loop_nor_exhaust_descriptors(
    env: Env, tmp_path: Path, who: str
) -> None:
    # Small batches, each entry's maximum one batch: read 25,000 times the old way it is
    # 25,000 file ranges for a follower (a descriptor each), 2 MB for a consumer.
    end = await fill(env, 20, 10)
    replica_id = 1 if who == "follower" else -1
    request = fetch_request(MANY, replica_id=replica_id, partition_max_bytes=100)
    assert len(request.topics[0].partitions) == MANY
    await call(env.leader, fetch_request(1, replica_id=replica_id))  # warm
    p = pid(env)
    before = open_fds(p)
    watch = FdWatch(p)
    try:
        resp, worst = await while_probed(env, tmp_path, lambda: call(env.leader, request, 60))
    finally:
        peak = watch.stop()
    after = open_fds(p)
    print(
        f"{who} Fetch of {MANY} entries: readyz worst {worst * 1000:.1f} ms; descriptors "
        f"{before} before, peak {peak}, {after} after"
    )
    assert worst < READY_WITHIN_S, f"readyz took {worst:.3f}s while the Fetch was served"
    assert peak < before + 100, f"{peak} descriptors open while the Fetch was served"
    parts = [q for t in resp.responses for q in t.partitions]
    assert [(q.partition_index, q.error_code) for q in parts] == [(0, ErrorCode.none)]
    assert len(parts[0].records) > 0
    # Still serving: a follower's fetch and a produce answered (nothing was written).
    fresp = await call(env.leader, follower_fetch_request(1, 0))
    assert fresp.responses[0].partitions[0].error_code == ErrorCode.none
    await still_serves(env, end)


async def test_metadata_naming_100000_topics_does_not_hold_the_loop(
    env: Env, tmp_path: Path
) -> None:
    names = [f"m{i:05d}" for i in range(TOPICS - 1)] + ["t"]
    request = metadata_request(names)
    await call(env.leader, metadata_request(["t"]))  # warm
    resp, worst = await while_probed(env, tmp_path, lambda: call(env.leader, request, 60))
    print(f"Metadata naming {TOPICS} topics: readyz worst {worst * 1000:.1f} ms")
    assert len(resp.topics) == TOPICS
    by_name = {t.name: t for t in resp.topics}
    assert by_name["t"].error_code == ErrorCode.none
    assert [q.leader_id for q in by_name["t"].partitions] == [0]
    assert {t.error_code for n, t in by_name.items() if n != "t"} == {
        ErrorCode.unknown_topic_or_partition
    }
    assert worst < READY_WITHIN_S, f"readyz took {worst:.3f}s while Metadata was served"
    await still_serves(env, 0)
