"""How a follower's connection receives its leader's answers (``kafka.client``): frames of every
size, split anywhere by the network, each exactly as sent; a large frame's buffer kept for the
next one; an oversized, negative or unasked-for frame, a frame cut short and a mangled answer
each close the connection with a reason. Real sockets on loopback, no broker."""

from __future__ import annotations

import asyncio
import datetime
import os
import random
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from jbod_broker.kafka import protocol
from jbod_broker.kafka.client import (
    SMALL_FRAME_BYTES,
    KafkaConnection,
    LeaderConnectionError,
    ResponseFrames,
)
from jbod_broker.kafka.protocol import SIZE, make, request_module, response_module

MiB = 1024 * 1024
FETCH_VERSION = 12


@asynccontextmanager
async def _pair(max_frame: int = 64 * MiB) -> AsyncIterator[tuple[ResponseFrames, socket.socket]]:
    """A ResponseFrames on one end of a socket pair, and the other end (non-blocking) to write
    to with ``loop.sock_sendall``."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    _, frames = await loop.create_connection(lambda: ResponseFrames(max_frame), sock=ours)
    try:
        yield frames, theirs
    finally:
        assert frames.transport is not None
        frames.transport.close()
        theirs.close()
        await frames.closed()


async def _send_in_pieces(sock: socket.socket, data: bytes, rng: random.Random) -> None:
    """``data`` in writes of awkward sizes (1 byte, a few, across a size prefix, 4 KiB, ...),
    so that the receiver sees frames and prefixes split everywhere."""
    loop = asyncio.get_running_loop()
    pos = 0
    while pos < len(data):
        n = rng.choice([1, 2, 3, 5, 7, 4096, 65_537, 1 << 20])
        await loop.sock_sendall(sock, data[pos : pos + n])
        pos += n
        await asyncio.sleep(0)  # let the receiver take what arrived, one piece at a time


def _frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


def _got(answer: tuple[bytearray | bytes, int]) -> bytes:
    buffer, size = answer
    return bytes(buffer[:size])


SIZES = [0, 1, 100, SMALL_FRAME_BYTES - 5, SMALL_FRAME_BYTES - 4, SMALL_FRAME_BYTES - 3]
SIZES += [SMALL_FRAME_BYTES, 200_000, MiB, 3 * MiB + 17, 150_000, 5, MiB]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_every_frame_arrives_exactly_as_sent_however_the_network_splits_it(
    seed: int,
) -> None:
    rng = random.Random(seed)
    async with _pair() as (frames, peer):
        for size in SIZES:
            payload = rng.randbytes(size)
            answer = frames.expect()
            await _send_in_pieces(peer, _frame(payload), rng)
            got = await asyncio.wait_for(answer, 10)
            assert _got(got) == payload, size
            frames.give_back(got[0])


async def test_a_large_frame_s_buffer_is_kept_for_the_next_large_frame() -> None:
    async with _pair() as (frames, peer):
        loop = asyncio.get_running_loop()
        buffers = []
        for size in (MiB, MiB - 1000, 300_000, 2 * MiB):
            payload = os.urandom(size)
            answer = frames.expect()
            await loop.sock_sendall(peer, _frame(payload))
            got = await asyncio.wait_for(answer, 10)
            assert _got(got) == payload
            buffers.append(got[0])
            frames.give_back(got[0])
        # The 1 MiB buffer took the two smaller large frames; the 2 MiB one needed its own.
        assert buffers[0] is buffers[1] is buffers[2]
        assert buffers[3] is not buffers[0] and len(buffers[3]) == 2 * MiB
        # A small frame is its own bytes, not a lent buffer.
        answer = frames.expect()
        await loop.sock_sendall(peer, _frame(b"small"))
        got = await asyncio.wait_for(answer, 10)
        assert isinstance(got[0], bytes) and _got(got) == b"small"


async def test_a_buffer_still_read_is_not_reused() -> None:
    """Not given back (still being read): the next large frame gets another buffer."""
    async with _pair() as (frames, peer):
        loop = asyncio.get_running_loop()
        first = os.urandom(MiB)
        answer = frames.expect()
        await loop.sock_sendall(peer, _frame(first))
        held = await asyncio.wait_for(answer, 10)
        answer = frames.expect()
        await loop.sock_sendall(peer, _frame(os.urandom(MiB)))
        second = await asyncio.wait_for(answer, 10)
        assert second[0] is not held[0] and _got(held) == first


@pytest.mark.parametrize("size", [64 * MiB + 1, -1, -(2**31)])
async def test_a_frame_over_the_limit_or_negative_fails_before_it_is_read(size: int) -> None:
    async with _pair(max_frame=64 * MiB) as (frames, peer):
        answer = frames.expect()
        await asyncio.get_running_loop().sock_sendall(peer, SIZE.pack(size) + b"x" * 100)
        with pytest.raises(ValueError, match=f"a response frame of {size} bytes"):
            await asyncio.wait_for(answer, 10)
        await asyncio.wait_for(frames.closed(), 10)  # the connection is closed
        with pytest.raises(ValueError):  # and every later request fails the same way
            await frames.expect()


async def test_a_frame_nobody_asked_for_closes_the_connection() -> None:
    async with _pair() as (frames, peer):
        await asyncio.get_running_loop().sock_sendall(peer, _frame(b"unasked"))
        await asyncio.wait_for(frames.closed(), 10)
        with pytest.raises(ValueError, match="while no request was waiting"):
            await frames.expect()


@pytest.mark.parametrize("cut", [2, 4 + 10, 4 + 100_000])
async def test_a_frame_cut_short_by_the_peer_fails_the_request(cut: int) -> None:
    async with _pair() as (frames, peer):
        answer = frames.expect()
        await asyncio.get_running_loop().sock_sendall(peer, _frame(os.urandom(MiB))[:cut])
        peer.shutdown(socket.SHUT_WR)
        with pytest.raises(EOFError):
            await asyncio.wait_for(answer, 10)


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
    part = make(
        m.PartitionData,
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=7,
        last_stable_offset=7,
        log_start_offset=0,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=records,
    )
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
        (lambda cid, n: _fetch_answer(cid, b"x" * MiB)[:-10], True, "EOFError"),
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
