"""What no Kafka client sends, sent to the Kafka listener of real broker processes (issue 18).

Truncated frames, lying lengths, unknown API keys and versions, oversized requests, clients
that disconnect mid-request, corrupt batches and 1,000 connections at once. Each must end in a
clear answer (a Kafka error code, or the connection closed with the reason in the broker's
log, as Kafka's SocketServer does), write nothing, and leave the broker serving: every test
ends by producing and reading back through the same listener.

Two brokers, the test as controller; topic ``t`` (one partition, replicas [0, 1]) is led by
broker 0.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v0 import response as api_versions_v0
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.list_offsets.v6 import request as list_offsets_v6
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v9 import request as produce_v9
from kio.serial import entity_reader

from jbod_broker.kafka.protocol import PRODUCE, request_module
from jbod_broker.local import LocalCluster
from jbod_broker.storage.records import build_batch, parse_header
from tests.bad_batches import TRANSACTIONAL, client_refused_batches
from tests.broker_metrics import scrape
from tests.integration.controller_stub import ControllerStub, running_cluster
from tests.integration.kafka_wire import call, closed_by_peer, encode_request, read_response

pytestmark = pytest.mark.integration

MAX_REQUEST = 1 << 20
SETTINGS = {
    "socket.request.max.bytes": str(MAX_REQUEST),
    "request.body.timeout.ms": "1000",
    "message.max.bytes": "65536",
    "broker.heartbeat.interval.ms": "200",
}


@dataclass
class Env:
    ctl: ControllerStub
    cluster: LocalCluster

    @property
    def leader(self) -> str:
        return self.cluster[0].kafka_endpoint

    @property
    def follower(self) -> str:
        return self.cluster[1].kafka_endpoint

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host, port = self.leader.rsplit(":", 1)
        return await asyncio.open_connection(host, int(port))

    def protocol_errors(self) -> list[str]:
        out = []
        with open(self.cluster[0].log_path, encoding="utf-8") as f:
            for line in f:
                if '"kafka_protocol_error"' in line:
                    out.append(json.loads(line)["error"])
        return out

    async def log_end(self) -> int:
        resp = await self.ctl.client(0).describe_log_dirs(topics=["t"])
        (end,) = [r.log_end_offset for d in resp.log_dirs for r in d.partitions]
        return end


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    base = str(tmp_path / "cluster")
    async with running_cluster(base, 2, num_dirs=1, settings=SETTINGS) as (ctl, cluster):
        await ctl.create_topic("t", 1, 2)
        yield Env(ctl, cluster)


def produce_request(records: bytes | None, *, acks: int = 1, topic: str = "t") -> Any:
    return produce_to({topic: records}, acks=acks)


def produce_to(records: dict[str, bytes | None], *, acks: int = 1, version: int = 9) -> Any:
    """One produce request: each topic's partition 0 gets its records."""
    m: Any = produce_v9 if version == 9 else request_module(PRODUCE, version)
    return m.ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=10),
        topic_data=tuple(
            m.TopicProduceData(
                name=topic, partition_data=(m.PartitionProduceData(index=0, records=data),)
            )
            for topic, data in records.items()
        ),
    )


def api_versions_request() -> Any:
    m: Any = api_versions_v3
    return m.ApiVersionsRequest(client_software_name="test", client_software_version="1")


def metadata_request() -> Any:
    m: Any = metadata_v12
    return m.MetadataRequest(
        topics=(m.MetadataRequestTopic(topic_id=None, name="t"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def latest_offset_request() -> Any:
    m: Any = list_offsets_v7
    return m.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            m.ListOffsetsTopic(
                name="t", partitions=(m.ListOffsetsPartition(partition_index=0, timestamp=-1),)
            ),
        ),
    )


def follower_fetch_request(
    replica_id: int, offset: int, *, epoch: int = -1, topic: str = "t", wait_ms: int = 0
) -> Any:
    """A follower's Fetch (``replica_id`` a broker id), as the brokers replicate."""
    m: Any = fetch_v12
    return m.FetchRequest(
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=1,
        topics=(
            m.FetchTopic(
                topic=topic,
                partitions=(
                    m.FetchPartition(
                        partition=0,
                        current_leader_epoch=epoch,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def batch(n: int = 1, size: int = 10) -> bytes:
    return build_batch([(None, b"x" * size)] * n)


async def still_serves(env: Env, written_before: int) -> None:
    """Nothing of the bad input was written, and a good produce still lands after it."""
    assert env.cluster[0].alive and env.cluster[1].alive
    assert await env.log_end() == written_before
    resp = await call(env.leader, produce_request(batch()))
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.none, written_before)


async def send_and_expect_close(env: Env, raw: bytes) -> None:
    reader, writer = await env.connect()
    try:
        writer.write(raw)
        await writer.drain()
        assert await closed_by_peer(reader), raw[:40]
    finally:
        writer.close()


async def test_truncated_frames_and_clients_leaving_mid_request_write_nothing(env: Env) -> None:
    whole = encode_request(produce_request(batch(5)))
    for cut in (2, 4, 10, len(whole) // 2, len(whole) - 1):
        _, writer = await env.connect()
        writer.write(whole[:cut])
        await writer.drain()
        writer.close()  # the client leaves inside the request
        await writer.wait_closed()
    # A size that promises more than ever comes: the body deadline closes the connection.
    await send_and_expect_close(env, whole[:-1])
    await still_serves(env, 0)
    errors = env.protocol_errors()
    assert any("did not arrive within request.body.timeout.ms=1000" in e for e in errors)
    assert any("closed after" in e for e in errors)


async def test_lying_lengths_close_the_connection(env: Env) -> None:
    good = encode_request(metadata_request())
    header_and_size = len(encode_request(metadata_request())) - 6  # up to the topics array
    lies = [
        struct.pack(">i", -5),  # a negative size
        # The topics array claims 2**28 entries (its compact length as a varint).
        struct.pack(">i", header_and_size - 4 + 5)
        + good[4:header_and_size]
        + b"\x81\x80\x80\x80\x01",
        # A topic name whose length runs past the end of the frame.
        struct.pack(">i", header_and_size - 4 + 3) + good[4:header_and_size] + b"\x02\x7f\x61",
        # A size that is shorter than the header it frames.
        struct.pack(">i", 3) + good[4:7],
    ]
    for raw in lies:
        await send_and_expect_close(env, raw)
    errors = env.protocol_errors()
    assert any("negative request size -5" in e for e in errors)
    assert sum("malformed metadata v12 body" in e for e in errors) == 2
    assert any("has no complete header" in e for e in errors)
    await still_serves(env, 0)


async def test_unknown_keys_and_versions_as_kafka_answers_them(env: Env) -> None:
    for key, version in [(99, 0), (10, 4), (22, 6)]:  # unknown, FindCoordinator, InitProducerId
        await send_and_expect_close(env, struct.pack(">ihhih", 10, key, version, 7, -1))
    await send_and_expect_close(env, encode_request(produce_request(batch()), version=99))
    await send_and_expect_close(env, encode_request(produce_request(batch()), version=2))
    # A newer ApiVersions: v0 with UNSUPPORTED_VERSION and the versions to retry with.
    reader, writer = await env.connect()
    try:
        writer.write(encode_request(api_versions_request(), correlation_id=77, version=99))
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        raw = await reader.readexactly(size)
        assert struct.unpack_from(">i", raw)[0] == 77  # response header v0: the id alone
        body, _ = entity_reader(api_versions_v0.ApiVersionsResponse)(raw, 4)
        assert body.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 4)]
    finally:
        writer.close()
    errors = env.protocol_errors()
    for what in ("key 99", "find_coordinator", "init_producer_id v6", "produce v99", "produce v2"):
        assert any(what in e for e in errors), what
    await still_serves(env, 0)


async def test_oversized_requests_are_refused_before_they_are_read(env: Env) -> None:
    for size in (MAX_REQUEST + 1, 2**31 - 1):
        # The size alone: the broker refuses it without waiting for (or reading) the body.
        await send_and_expect_close(env, struct.pack(">i", size))
    errors = env.protocol_errors()
    assert any(f"larger than socket.request.max.bytes={MAX_REQUEST}" in e for e in errors)
    await still_serves(env, 0)
    m = await asyncio.to_thread(scrape, env.cluster[0].url)
    assert m["jbod_kafka_connections_closed_for_errors_total"] == 2


async def test_bad_batches_and_wrong_partitions_get_kafka_error_codes(env: Env) -> None:
    good = batch(3)
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF  # the CRC no longer matches
    cases: list[tuple[Any, str, ErrorCode]] = [
        (produce_request(bytes(flipped)), env.leader, ErrorCode.corrupt_message),
        # Zeros read as a batch of magic 0, which the log refuses as a record it cannot take.
        (produce_request(b"\x00" * 70), env.leader, ErrorCode.invalid_record),
        (produce_request(good[:-5]), env.leader, ErrorCode.corrupt_message),
        (produce_request(None), env.leader, ErrorCode.invalid_record),
        (produce_request(batch(1, 70_000)), env.leader, ErrorCode.message_too_large),
        (produce_request(good, acks=2), env.leader, ErrorCode.invalid_required_acks),
        (produce_request(good, topic="nope"), env.leader, ErrorCode.unknown_topic_or_partition),
        (produce_request(good, topic="bad/name"), env.leader, ErrorCode.invalid_topic_exception),
        (produce_request(good), env.follower, ErrorCode.not_leader_or_follower),
    ]
    for req, endpoint, want in cases:
        resp = await call(endpoint, req)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == want, (want, part)
        assert part.base_offset == -1
    await still_serves(env, 0)


CLIENT_REFUSED_CODES = {
    "INVALID_RECORD": ErrorCode.invalid_record,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": ErrorCode.transactional_id_authorization_failed,
}


async def test_batches_no_client_may_write_are_refused_with_kafkas_codes(env: Env) -> None:
    """Issue 36 (4): a control batch is INVALID_RECORD; transactional records refuse the
    whole request, the partitions beside them too, as Kafka's KafkaApis answers a producer
    without a transactional id. Nothing is appended, so no read_committed consumer meets a
    control record or a transaction that never ends."""
    for name, bad in client_refused_batches().items():
        resp = await call(env.leader, produce_request(bad.data))
        part = resp.responses[0].partition_responses[0]
        # KafkaApis looks for transactional records before the log validates any batch.
        txn = parse_header(bad.data).attributes & TRANSACTIONAL
        want = ErrorCode.transactional_id_authorization_failed if txn else None
        assert part.error_code == (want or CLIENT_REFUSED_CODES[bad.error]), (name, part)
        assert part.base_offset == -1
    await env.ctl.create_topic("u", 1, 2)
    txn_batch = client_refused_batches()["transactional-flag-without-producer-id"].data
    resp = await call(env.leader, produce_to({"t": batch(2), "u": txn_batch}))
    codes = {t.name: t.partition_responses[0].error_code for t in resp.responses}
    assert codes == dict.fromkeys("tu", ErrorCode.transactional_id_authorization_failed)
    resp = await env.ctl.client(0).describe_log_dirs(topics=["u"])
    assert [r.log_end_offset for d in resp.log_dirs for r in d.partitions] == [0]
    await still_serves(env, 0)


def list_offsets_request(version: int, *entries: tuple[int, int]) -> Any:
    """ListOffsets of topic ``t`` for ``(partition, timestamp)`` entries, in one topic."""
    m: Any = list_offsets_v7 if version == 7 else list_offsets_v6
    return m.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            m.ListOffsetsTopic(
                name="t",
                partitions=tuple(
                    m.ListOffsetsPartition(partition_index=p, timestamp=ts) for p, ts in entries
                ),
            ),
        ),
    )


async def test_list_offsets_refuses_as_kafka_does(env: Env) -> None:
    """Issue 36 (5): a negative timestamp that names nothing (-6, -2^63), or a special one
    asked for below its version (max timestamp before v7), is UNSUPPORTED_VERSION, as Kafka's
    ReplicaManager.fetchOffset answers it, not UNKNOWN_SERVER_ERROR; a partition named twice
    is INVALID_REQUEST each time. The entries beside them are answered."""
    # acks=all: the latest offset is the high watermark, which then includes the three.
    await call(env.leader, produce_request(batch(3), acks=-1))

    async def codes(version: int, *entries: tuple[int, int]) -> list[tuple[ErrorCode, int]]:
        resp = await call(env.leader, list_offsets_request(version, *entries))
        return [(p.error_code, p.offset) for p in resp.topics[0].partitions]

    unsupported = (ErrorCode.unsupported_version, -1)
    assert await codes(7, (0, -6)) == [unsupported]
    assert await codes(7, (0, -(2**63))) == [unsupported]
    assert await codes(6, (0, -3)) == [unsupported]
    assert [c for c, _ in await codes(7, (0, -3))] == [ErrorCode.none]
    assert await codes(7, (0, -1), (0, -2)) == [(ErrorCode.invalid_request, -1)] * 2
    assert await codes(7, (0, -1)) == [(ErrorCode.none, 3)]
    await still_serves(env, 3)


async def test_a_thousand_connections_pipelining_are_all_answered_in_order(env: Env) -> None:
    """Each connection sends three requests before reading: the answers come in order."""
    kinds = [
        (api_versions_request(), 18, 3),
        (metadata_request(), 3, 12),
        (latest_offset_request(), 2, 7),
    ]

    async def one(i: int) -> None:
        reader, writer = await env.connect()
        try:
            writer.write(
                b"".join(encode_request(r, 3 * i + j) for j, (r, _, _) in enumerate(kinds))
            )
            await writer.drain()
            for j, (_, key, version) in enumerate(kinds):
                cid, resp = await read_response(reader, key, version)
                assert cid == 3 * i + j
            assert resp.topics[0].partitions[0].offset == 0
        finally:
            writer.close()

    await asyncio.gather(*(one(i) for i in range(1000)))
    assert not env.protocol_errors()
    await still_serves(env, 0)
    m = await asyncio.to_thread(scrape, env.cluster[0].url)
    assert m["jbod_kafka_requests_total"] >= 3000
    assert m["jbod_kafka_connections_closed_for_errors_total"] == 0


async def test_acks_0_is_not_answered_and_a_failed_one_closes_the_connection(env: Env) -> None:
    """Kafka's acks=0: no response; a produce that failed closes the connection instead, the
    one signal such a producer gets. The next request on a good connection is answered."""
    reader, writer = await env.connect()
    try:
        writer.write(encode_request(produce_request(batch(2), acks=0), 1))
        writer.write(encode_request(metadata_request(), 2))
        await writer.drain()
        cid, _ = await read_response(reader, 3, 12)
        assert cid == 2  # the produce took no answer; the metadata request after it did
    finally:
        writer.close()
    assert await env.log_end() == 2
    await send_and_expect_close(env, encode_request(produce_request(b"\x00" * 70, acks=0)))
    assert any("an acks=0 produce failed" in e for e in env.protocol_errors())
    # Produce v7 has no error_message field: a failed acks=0 one closes the same way (the fuzz
    # found its handler failing on the missing field instead).
    v7 = produce_to({"t": b"\x00" * 70}, acks=0, version=7)
    await send_and_expect_close(env, encode_request(v7))
    assert any("an acks=0 produce failed: INVALID_RECORD" in e for e in env.protocol_errors())
    await still_serves(env, 2)


async def test_follower_fetches_from_what_is_no_follower_get_kafka_error_codes(env: Env) -> None:
    """Replication runs on Kafka's Fetch: one carrying a broker id is a follower's, and only a
    replica of the partition may fetch it, from its leader, at the leader's epoch, inside the
    leader's log. Each refusal is a Kafka error code (OFFSET_OUT_OF_RANGE with the leader's
    log start offset, which a follower behind it restarts from), and changes nothing."""
    resp = await call(env.leader, produce_request(batch(3)))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    cases: list[tuple[Any, str, ErrorCode]] = [
        (follower_fetch_request(7, 0), env.leader, ErrorCode.not_leader_or_follower),
        (follower_fetch_request(0, 0), env.leader, ErrorCode.not_leader_or_follower),
        (follower_fetch_request(1, 0), env.follower, ErrorCode.not_leader_or_follower),
        (follower_fetch_request(1, 0, epoch=5), env.leader, ErrorCode.unknown_leader_epoch),
        (follower_fetch_request(1, 4), env.leader, ErrorCode.offset_out_of_range),
        (
            follower_fetch_request(1, 0, topic="nope"),
            env.leader,
            ErrorCode.unknown_topic_or_partition,
        ),
    ]
    for req, endpoint, want in cases:
        part = (await call(endpoint, req)).responses[0].partitions[0]
        assert part.error_code == want, (req.replica_id, want, part)
        assert not part.records
    out_of_range = (await call(env.leader, follower_fetch_request(1, 4))).responses[0].partitions[0]
    assert out_of_range.log_start_offset == 0
    await still_serves(env, 3)
