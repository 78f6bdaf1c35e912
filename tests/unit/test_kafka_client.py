"""A follower's connection to its leader (``kafka.client.KafkaConnection``) against a listener
on loopback that answers Fetch as told: answers small and large come back as sent, and an
oversized, cut-short or mangled answer or a wrong correlation id closes the connection with
the reason. How frames are read is tests/unit/test_kafka_frame_connection.py's."""

from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from jbod_broker.kafka import protocol
from jbod_broker.kafka.client import (
    KafkaConnection,
    LeaderConnectionError,
)
from jbod_broker.kafka.protocol import SIZE, make, request_module, response_module
from tests.kafka_entities import fetch_partition_data

MiB = 1024 * 1024
FETCH_VERSION = 12


# -- KafkaConnection against a listener that answers Fetch as told ----------------------------


def _fetch_request() -> Any:
    m = request_module(protocol.FETCH, FETCH_VERSION)
    return make(
        m.FetchRequest,
        replica_id=1,
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=1,
        max_bytes=10 * MiB,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            make(
                m.FetchTopic,
                topic="t",
                partitions=(
                    make(
                        m.FetchPartition,
                        partition=0,
                        current_leader_epoch=1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=0,
                        partition_max_bytes=MiB,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _fetch_answer(correlation_id: int, records: bytes) -> bytes:
    m = response_module(protocol.FETCH, FETCH_VERSION)
    part = fetch_partition_data(records, version=FETCH_VERSION)
    return protocol.encode_response(
        correlation_id,
        make(
            m.FetchResponse,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            session_id=0,
            responses=(make(m.FetchableTopicResponse, topic="t", partitions=(part,)),),
        ),
    )


@asynccontextmanager
async def _leader(
    answer: Callable[[int, int], bytes], *, close_after_answer: bool = False
) -> AsyncIterator[KafkaConnection]:
    """A listener answering the n-th request (correlation id, n) with ``answer``'s bytes
    (closing the connection then, if told), and a connection to it."""

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        n = 0
        try:
            while True:
                (size,) = SIZE.unpack(await r.readexactly(SIZE.size))
                req = protocol.parse_request(await r.readexactly(size))
                w.write(answer(req.correlation_id, n))
                await w.drain()
                n += 1
                if close_after_answer:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = KafkaConnection("127.0.0.1", port, client_id="replica-1", max_response_bytes=64 * MiB)
    try:
        yield conn
    finally:
        await conn.close()
        server.close()
        await server.wait_closed()


async def test_a_follower_s_answers_small_and_large_come_back_as_the_leader_sent_them() -> None:
    records = [os.urandom(n) for n in (100, 40_000, 3 * MiB, 900_000, 0, 2 * MiB)]
    async with _leader(lambda cid, n: _fetch_answer(cid, records[n])) as conn:
        for want in records:
            resp = await conn.request(_fetch_request(), 10)
            (part,) = resp.responses[0].partitions
            assert part.records == want and part.high_watermark == 7
            assert isinstance(part.records, bytes)  # a copy, not a view of the kept buffer
        assert conn.connected


@pytest.mark.parametrize(
    ("answer", "close", "why"),
    [
        (lambda cid, n: _fetch_answer(cid + 1, b"x" * MiB), False, "correlation id"),
        (lambda cid, n: _fetch_answer(cid, b"x" * MiB)[:-10], True, "closed inside a frame"),
        (lambda cid, n: SIZE.pack(MiB) + b"\xff" * MiB, False, "malformed response"),
        (lambda cid, n: SIZE.pack(65 * MiB), False, "at most 67108864"),
    ],
    ids=["wrong-correlation-id", "cut-short", "garbage", "oversized"],
)
async def test_a_bad_answer_closes_the_connection_with_the_reason(
    answer: Callable[[int, int], bytes], close: bool, why: str
) -> None:
    async with _leader(answer, close_after_answer=close) as conn:
        with pytest.raises(LeaderConnectionError, match=why):
            await conn.request(_fetch_request(), 10)
        assert not conn.connected
