"""What sending one file range costs the Kafka listener's thread: ours against asyncio's
``loop.sendfile`` and against the kernel's ``os.sendfile`` alone.

A leader answers a follower's Fetch with the records as file ranges sent by the kernel
(``jbod_broker.kafka.listener``): at RF 3 it sends one range per partition per follower round.
Three ways of sending the same range on the same loopback TCP connection, alternating send by
send:

- ``os``: one ``os.sendfile`` call on the socket, the yardstick (what the kernel's copy costs);
- ``loop``: asyncio's ``loop.sendfile`` (which the listener used before session 38): it pauses
  the transport's reading, waits for its buffer to drain, and registers for writability around
  its own ``os.sendfile``;
- ``ours``: ``listener._sendfile``, one ``os.sendfile`` call when the transport has nothing
  buffered and the socket takes the whole range, ``loop.sendfile`` for what it leaves.

Then whole response frames as the listener writes them (``listener._send``: 70 bytes before
a partition's records, the range, 20 after), the range read with ``os.pread`` and written with
the bytes around it (``frame_read``, what ranges below ``SENDFILE_MIN_BYTES`` get) against
sent by the kernel between two writes (``frame_sendfile``), from 8 to 256 KiB;
``frame_sendfile_pays_from_bytes`` is the smallest size where the second costs the sender no
more. Only the sender is measured: a frame in three writes can cost its receiver more wake-ups
than a frame in one, which is why the bound is not simply that size.

The figure is the CPU time of the sending thread (``time.thread_time``) per range or frame,
the median of ``--sends`` sends of each way and size. A peer in another thread reads
everything, and each send starts once the peer has read the previous one, as a follower reads
a whole response before it asks again. Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable

from jbod_broker.kafka.listener import SENDFILE_MIN_BYTES, _send, _sendfile
from jbod_broker.storage.log import FileSlice

KiB = 1024
SIZES = (64 * KiB, 128 * KiB, 256 * KiB, 1024 * KiB)
FRAME_SIZES = (8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB, 256 * KiB)
HEAD = bytes(70)
"""What goes before a partition's records in a Fetch response frame (sizes, ids, offsets)."""
TAIL = bytes(20)


class Peer:
    """Reads a socket to its end in a thread of its own, counting the bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while chunk := self.sock.recv(1 << 20):
            self.received += len(chunk)


async def _until_read(peer: Peer, total: int) -> None:
    """Until the peer has read ``total`` bytes: each send starts on an empty connection."""
    while peer.received < total:
        await asyncio.sleep(0.0002)


async def measure(path: str, sizes: tuple[int, ...], sends: int) -> dict[str, object]:
    server = socket.create_server(("127.0.0.1", 0))
    _, writer = await asyncio.open_connection("127.0.0.1", server.getsockname()[1])
    conn, _ = server.accept()
    server.close()
    peer = Peer(conn)
    loop = asyncio.get_running_loop()
    sock = writer.transport.get_extra_info("socket")
    fd = os.open(path, os.O_RDONLY)
    sent_total = 0

    async def by_os(size: int) -> int:
        return os.sendfile(sock.fileno(), fd, 0, size)

    async def by_loop(size: int) -> int:
        with open(fd, "rb", buffering=0, closefd=False) as f:
            return await loop.sendfile(writer.transport, f, 0, size)

    async def by_ours(size: int) -> int:
        return await _sendfile(writer, FileSlice(os.dup(fd), 0, size))

    ways: dict[str, Callable[[int], Awaitable[int]]] = {
        "os": by_os,
        "loop": by_loop,
        "ours": by_ours,
    }

    async def frame_by_read(size: int) -> int:
        await _send(writer, [HEAD, FileSlice(os.dup(fd), 0, size), TAIL], sendfile_min=size + 1)
        return size

    async def frame_by_sendfile(size: int) -> int:
        await _send(writer, [HEAD, FileSlice(os.dup(fd), 0, size), TAIL], sendfile_min=size)
        return size

    frames: dict[str, Callable[[int], Awaitable[int]]] = {
        "frame_read": frame_by_read,
        "frame_sendfile": frame_by_sendfile,
    }

    async def timed(
        ways: dict[str, Callable[[int], Awaitable[int]]], size: int, extra: int
    ) -> dict[str, float]:
        """Median CPU µs of each way at ``size``, the ways alternating send by send."""
        nonlocal sent_total
        spent: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(sends):
            for name, way in ways.items():
                await _until_read(peer, sent_total)
                t0 = time.thread_time()
                n = await way(size)
                spent[name].append(time.thread_time() - t0)
                if n != size:
                    raise RuntimeError(f"{name} sent {n} of {size} bytes")
                sent_total += n + extra
        return {name: statistics.median(v) * 1e6 for name, v in spent.items()}

    out: dict[str, object] = {}
    try:
        for size in sizes:
            label = f"{size // KiB}k"
            us = await timed(ways, size, 0)
            for name, value in us.items():
                out[f"{name}_us_{label}"] = round(value, 1)
            out[f"ours_to_os_ratio_{label}"] = round(us["ours"] / us["os"], 2)
            out[f"loop_to_ours_ratio_{label}"] = round(us["loop"] / us["ours"], 2)
        pays_from = None
        for size in FRAME_SIZES:
            label = f"{size // KiB}k"
            us = await timed(frames, size, len(HEAD) + len(TAIL))
            for name, value in us.items():
                out[f"{name}_us_{label}"] = round(value, 1)
            if pays_from is None and us["frame_sendfile"] <= us["frame_read"]:
                pays_from = size
        out["frame_sendfile_pays_from_bytes"] = pays_from
        out["sendfile_min_bytes"] = SENDFILE_MIN_BYTES
    finally:
        os.close(fd)
        writer.close()
        await writer.wait_closed()
        peer.thread.join(10)
        conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sends")
    ap.add_argument("--sends", type=int, default=None, help="sends of each way and size")
    args = ap.parse_args()
    sends = args.sends or (40 if args.quick else 300)
    load_start = os.getloadavg()
    with tempfile.NamedTemporaryFile(prefix="bench-sendfile-") as f:
        f.write(os.urandom(max(SIZES)))
        f.flush()
        figures = asyncio.run(measure(f.name, SIZES, sends))
    print(
        json.dumps(
            {
                "bench": "sendfile_range",
                "units": "us = microseconds of the sending thread's CPU per range or frame "
                "(median); k = KiB",
                "connection": "TCP on loopback, the peer reading in another thread",
                "sends_per_way_and_size": sends,
                "cpus": os.cpu_count(),
                "loadavg_1m_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
                **figures,
            }
        )
    )


if __name__ == "__main__":
    main()
