"""How the Kafka listener writes a response's pieces (``kafka.listener._send``): bytes as they
are, a follower's file ranges read and written when small, sent by the kernel when large
(``SENDFILE_MIN_BYTES``), each range's descriptor closed, a range cut short not sent; the
bytes and small ranges of a frame in one write."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from jbod_broker.kafka import listener
from jbod_broker.kafka.protocol import ProtocolError
from jbod_broker.storage.log import FileSlice


def _file(tmp_path: Path, size: int) -> tuple[str, bytes]:
    data = os.urandom(size)
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    return str(path), data


async def _send_catching(
    writer: asyncio.StreamWriter, pieces: list[object]
) -> ProtocolError | None:
    """``listener._send``, and the protocol error it raised (None when it sent the frame)."""
    try:
        await listener._send(writer, pieces)
    except ProtocolError as e:
        return e
    return None


async def _sent(pieces: list[object]) -> tuple[bytes, BaseException | None]:
    """What a peer receives when ``pieces`` are sent, and the error the send raised."""
    got = bytearray()
    done = asyncio.Event()

    async def peer(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while chunk := await r.read(1 << 20):
            got.extend(chunk)
        w.close()
        done.set()

    server = await asyncio.start_server(peer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    err = await _send_catching(writer, pieces)
    writer.close()
    await done.wait()
    server.close()
    return bytes(got), err


@pytest.mark.parametrize("size", [16_707, listener.SENDFILE_MIN_BYTES, 3 * 1024 * 1024])
def test_a_range_small_or_large_reaches_the_peer_between_the_bytes(
    tmp_path: Path, size: int
) -> None:
    path, data = _file(tmp_path, size + 100)
    fd = os.open(path, os.O_RDONLY)
    piece = FileSlice(os.dup(fd), 100, size)
    got, err = asyncio.run(_sent([b"head", piece, b"tail"]))
    assert err is None
    assert got == b"head" + data[100 : 100 + size] + b"tail"
    assert piece.fd == -1  # closed once sent
    os.close(fd)


@pytest.mark.parametrize("size", [16_707, 3 * 1024 * 1024])
def test_a_range_cut_short_is_not_sent_and_fails_the_send(tmp_path: Path, size: int) -> None:
    path, _ = _file(tmp_path, size)
    fd = os.open(path, os.O_RDONLY)
    piece = FileSlice(os.dup(fd), 0, size)
    os.truncate(path, size // 2)  # retention or a truncation under the send
    got, err = asyncio.run(_sent([b"head", piece]))
    assert isinstance(err, ProtocolError) and "truncated" in str(err)
    assert piece.fd == -1
    if size < listener.SENDFILE_MIN_BYTES:
        assert got == b""  # read whole or not at all: nothing of the frame went
    else:
        assert len(got) < len(b"head") + size
    os.close(fd)


class _CountingWriter:
    """A stream writer that records each write (what the transport sends in one call)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    async def drain(self) -> None:
        pass


def test_a_frame_with_small_ranges_goes_in_one_write(tmp_path: Path) -> None:
    """A follower's response, headers around the records of two partitions, is one write:
    each write to an idle transport is a send call (on loopback, the receiver's TCP too)."""
    path, data = _file(tmp_path, 40_000)
    fd = os.open(path, os.O_RDONLY)
    a, b = FileSlice(os.dup(fd), 0, 16_707), FileSlice(os.dup(fd), 16_707, 16_707)
    w = _CountingWriter()
    asyncio.run(listener._send(w, [b"head", a, b"middle", b, b"tail"]))  # type: ignore[arg-type]
    assert w.writes == [b"head" + data[:16_707] + b"middle" + data[16_707:33_414] + b"tail"]
    assert a.fd == -1 and b.fd == -1
    os.close(fd)


async def _sent_over_socketpair(
    pieces: list[object], sndbuf: int
) -> tuple[bytes, BaseException | None, list[int]]:
    """What a peer reading all the while receives when ``pieces`` are sent on a Unix socket
    pair whose sending side has ``sndbuf`` bytes of buffer (the kernel's own size, not a
    network's, decides how much one ``os.sendfile`` takes), and the counts ``loop.sendfile``
    was asked to send."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    theirs.setblocking(False)
    loop = asyncio.get_running_loop()
    got = bytearray()

    async def read() -> None:
        while chunk := await loop.sock_recv(theirs, 1 << 16):
            got.extend(chunk)

    reader = asyncio.create_task(read())
    calls: list[int] = []
    real = loop.sendfile

    async def counting(transport: Any, file: Any, offset: int = 0, count: Any = None) -> int:
        calls.append(count)
        return await real(transport, file, offset, count)

    loop.sendfile = counting  # type: ignore[method-assign,assignment]
    _, writer = await asyncio.open_unix_connection(sock=ours)
    err = await _send_catching(writer, pieces)
    writer.close()
    await writer.wait_closed()
    await reader
    theirs.close()
    return bytes(got), err, calls


def test_a_range_the_socket_takes_whole_goes_by_one_call_not_by_the_loop(
    tmp_path: Path,
) -> None:
    """asyncio's ``loop.sendfile`` pauses reading and waits for writability around its own
    os.sendfile: with room in the socket's buffer, the range skips all of that."""
    size = listener.SENDFILE_MIN_BYTES
    path, data = _file(tmp_path, size + 10)
    fd = os.open(path, os.O_RDONLY)
    piece = FileSlice(os.dup(fd), 10, size)
    got, err, calls = asyncio.run(_sent_over_socketpair([b"head", piece, b"tail"], 4 * size))
    assert err is None and got == b"head" + data[10 : 10 + size] + b"tail"
    assert calls == []
    assert piece.fd == -1
    os.close(fd)


def test_what_a_full_socket_buffer_leaves_goes_by_the_loop_in_order(tmp_path: Path) -> None:
    """A socket buffer far smaller than the range: one call sends what fits, the loop the
    rest as the peer reads, and the peer gets every byte once, in order."""
    size = 3 * 1024 * 1024
    path, data = _file(tmp_path, size)
    fd = os.open(path, os.O_RDONLY)
    piece = FileSlice(os.dup(fd), 0, size)
    got, err, calls = asyncio.run(_sent_over_socketpair([b"head", piece, b"tail"], 4096))
    assert err is None and got == b"head" + data + b"tail"
    assert len(calls) == 1 and 0 < calls[0] <= size  # the loop sent what was left, once
    assert piece.fd == -1
    os.close(fd)
