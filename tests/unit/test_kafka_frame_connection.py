"""How a Kafka connection reads frames (``kafka.connection.FrameConnection``), for the listener
and a follower's client alike: every frame exactly as sent however the network splits it,
small and large, back to back; a large body's buffer kept only where allowed, and never while
still lent; reading paused while nobody reads, so a connection holds no more than its small
buffer; the peer closing between frames, inside a size or inside a body told apart; writes
and a drain after the connection is lost. Real sockets on loopback."""

from __future__ import annotations

import asyncio
import os
import random
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from jbod_broker.kafka.connection import FrameConnection, FrameCutShort
from jbod_broker.kafka.protocol import SIZE
from tests.waiting import wait_async

MiB = 1024 * 1024
SMALL = 64 * 1024


@asynccontextmanager
async def _pair(
    small: int = SMALL, keep: int = 16 * MiB
) -> AsyncIterator[tuple[FrameConnection, socket.socket]]:
    """A FrameConnection on one end of a socket pair, and the other end (non-blocking) to
    write to with ``loop.sock_sendall``."""
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(lambda: FrameConnection(small, keep), sock=ours)
    try:
        yield conn, theirs
    finally:
        conn.close()
        theirs.close()
        await conn.closed()


def _frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


async def _read_frame(conn: FrameConnection) -> bytes:
    size = await asyncio.wait_for(conn.read_size(), 10)
    assert size is not None
    buffer, n = await asyncio.wait_for(conn.read_body(size), 10)
    assert n == size
    body = bytes(buffer[:n])
    conn.give_back(buffer)
    return body


SIZES = [0, 1, 100, SMALL - 5, SMALL - 4, SMALL - 1, SMALL, SMALL + 1, 200_000, MiB]
SIZES += [3 * MiB + 17, 150_000, 5, MiB]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_every_frame_arrives_exactly_as_sent_however_the_network_splits_it(
    seed: int,
) -> None:
    rng = random.Random(seed)
    payloads = [rng.randbytes(n) for n in SIZES]
    stream = b"".join(_frame(p) for p in payloads)
    async with _pair() as (conn, peer):
        loop = asyncio.get_running_loop()

        async def send() -> None:
            pos = 0
            while pos < len(stream):
                n = rng.choice([1, 2, 3, 5, 7, 4096, 65_537, MiB])
                await loop.sock_sendall(peer, stream[pos : pos + n])
                pos += n
                await asyncio.sleep(0)  # the reader takes what arrived, a piece at a time

        sender = asyncio.create_task(send())
        got = [await _read_frame(conn) for _ in payloads]
        await sender
        assert [len(g) for g in got] == SIZES
        assert got == payloads


async def test_frames_sent_back_to_back_in_one_write_are_read_one_by_one() -> None:
    payloads = [os.urandom(n) for n in (10, SMALL - 4, 3, 300_000, 0, 17)]
    async with _pair() as (conn, peer):
        sender = asyncio.create_task(
            asyncio.get_running_loop().sock_sendall(peer, b"".join(_frame(p) for p in payloads))
        )
        assert [await _read_frame(conn) for _ in payloads] == payloads
        await sender


async def test_a_large_body_s_buffer_is_kept_for_the_next_but_not_while_lent() -> None:
    async with _pair() as (conn, peer):
        loop = asyncio.get_running_loop()

        async def body(size: int) -> tuple[bytearray | bytes, bytes]:
            payload = os.urandom(size)
            sender = asyncio.create_task(loop.sock_sendall(peer, _frame(payload)))
            n = await asyncio.wait_for(conn.read_size(), 10)
            assert n == size
            buffer, _ = await asyncio.wait_for(conn.read_body(size), 10)
            await sender
            assert bytes(buffer[:size]) == payload
            return buffer, payload

        first, _ = await body(MiB)
        lent, lent_payload = await body(MiB - 1000)  # the first was not given back
        assert lent is not first
        conn.give_back(first)
        again, _ = await body(300_000)
        assert again is first  # given back: taken for a smaller large body
        assert bytes(lent[: MiB - 1000]) == lent_payload  # the lent one untouched
        conn.give_back(again)
        bigger, _ = await body(2 * MiB)
        assert bigger is not first and len(bigger) == 2 * MiB
        small, _ = await body(100)
        assert isinstance(small, bytes)  # a small body is its own bytes


async def test_nothing_is_kept_where_keeping_is_not_allowed() -> None:
    async with _pair(keep=0) as (conn, peer):
        loop = asyncio.get_running_loop()
        buffers = []
        for _ in range(2):
            sender = asyncio.create_task(loop.sock_sendall(peer, _frame(os.urandom(MiB))))
            size = await asyncio.wait_for(conn.read_size(), 10)
            assert size is not None
            buffer, _ = await asyncio.wait_for(conn.read_body(size), 10)
            await sender
            buffers.append(buffer)
            conn.give_back(buffer)
        assert buffers[0] is not buffers[1]


async def test_reading_pauses_while_nobody_reads() -> None:
    """A peer that sends far more than the small buffer while no frame is read leaves the rest
    in the kernel: the connection's own memory stays at its small buffer."""
    async with _pair(small=SMALL) as (conn, peer):
        payloads = [os.urandom(40_000) for _ in range(40)]  # 1.6 MB of small frames
        stream = b"".join(_frame(p) for p in payloads)
        sender = asyncio.create_task(asyncio.get_running_loop().sock_sendall(peer, stream))
        # The small buffer filled up and reading stopped.
        await wait_async(lambda: conn._paused, "reading paused", 10)
        assert conn._end - conn._start == SMALL  # all the process holds
        assert not sender.done()  # the rest waits in the socket buffers
        assert [await _read_frame(conn) for _ in payloads] == payloads
        await sender


async def test_a_clean_close_between_frames_reads_as_none() -> None:
    async with _pair() as (conn, peer):
        await asyncio.get_running_loop().sock_sendall(peer, _frame(b"last"))
        peer.shutdown(socket.SHUT_WR)
        assert await _read_frame(conn) == b"last"
        assert await asyncio.wait_for(conn.read_size(), 10) is None


@pytest.mark.parametrize("cut", [1, 3])
async def test_a_close_inside_a_size_says_so(cut: int) -> None:
    async with _pair() as (conn, peer):
        await asyncio.get_running_loop().sock_sendall(peer, SIZE.pack(100)[:cut])
        peer.shutdown(socket.SHUT_WR)
        with pytest.raises(FrameCutShort, match=f"inside a frame size \\({cut} of 4 bytes\\)"):
            await asyncio.wait_for(conn.read_size(), 10)


@pytest.mark.parametrize(("size", "sent"), [(100, 10), (MiB, 10), (MiB, 200_000), (SMALL, 0)])
async def test_a_close_inside_a_body_names_how_much_arrived(size: int, sent: int) -> None:
    async with _pair() as (conn, peer):

        async def send() -> None:  # beside the reads: more than the socket buffers may hold
            await asyncio.get_running_loop().sock_sendall(peer, SIZE.pack(size) + b"x" * sent)
            peer.shutdown(socket.SHUT_WR)

        sender = asyncio.create_task(send())
        assert await asyncio.wait_for(conn.read_size(), 10) == size
        with pytest.raises(FrameCutShort) as cut:
            await asyncio.wait_for(conn.read_body(size), 10)
        assert (cut.value.got, cut.value.wanted) == (sent, size)
        assert f"inside a frame ({sent} of {size} bytes)" in str(cut.value)
        await sender


async def test_a_negative_size_is_read_as_sent() -> None:
    """The size is the caller's to judge (the listener and the client refuse it)."""
    async with _pair() as (conn, peer):
        await asyncio.get_running_loop().sock_sendall(peer, SIZE.pack(-5))
        assert await asyncio.wait_for(conn.read_size(), 10) == -5


async def test_writes_reach_the_peer_and_a_drain_after_the_connection_is_lost_raises() -> None:
    async with _pair() as (conn, peer):
        loop = asyncio.get_running_loop()
        data = os.urandom(3 * MiB)  # past the write buffer's high-water mark

        async def receive() -> bytes:
            got = bytearray()
            while len(got) < len(data):
                got += await loop.sock_recv(peer, MiB)
            return bytes(got)

        receiver = asyncio.create_task(receive())
        conn.write(data)
        await asyncio.wait_for(conn.drain(), 10)
        assert await asyncio.wait_for(receiver, 10) == data
        peer.close()
        conn.write(b"x" * MiB)  # fails in the transport: the peer is gone
        await asyncio.wait_for(conn.closed(), 10)
        with pytest.raises(ConnectionResetError):
            await conn.drain()
