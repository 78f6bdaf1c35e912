"""What receiving one frame costs a connection's event-loop thread: asyncio's StreamReader
(``readexactly`` of the size, then of the frame: how a follower read its leader's answers
until session 39, and how the Kafka listener still reads requests) against ``FrameConnection``
with the follower's settings (``kafka.client``: a 256 KiB small buffer, a large body received
straight into a buffer of its size that is kept for the next).

A server thread answers each 4-byte request with a frame of the size asked for, over loopback
TCP; the figure is the reading thread's CPU time per frame (``time.thread_time``), the median of
``--frames`` frames per size, after a warm-up. Only the receiving is measured: every way ends
with the frame's bytes in hand, and decoding them is the same work either way. The sizes span
a follower's answers: 16 KiB (one small produce request's worth), 256 KiB (one batch of Kafka's
producer in bench/kafka_protocol.py), 1 MiB (``replica.fetch.max.bytes``, one partition
catching up) and 4 MiB (several partitions catching up in one answer). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import threading
import time
from collections.abc import Awaitable, Callable

from jbod_broker.kafka import client
from jbod_broker.kafka.connection import FrameConnection
from jbod_broker.kafka.protocol import SIZE

KiB = 1024
SIZES = [16 * KiB, 64 * KiB, 256 * KiB, 1024 * KiB, 4096 * KiB]


def serve(listener: socket.socket, frames: dict[int, bytes]) -> None:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with conn:
        while req := conn.recv(SIZE.size, socket.MSG_WAITALL):
            conn.sendall(frames[SIZE.unpack(req)[0]])


def start_server(frames: dict[int, bytes]) -> int:
    listener = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=serve, args=(listener, frames), daemon=True).start()
    port: int = listener.getsockname()[1]
    return port


async def stream_reader(port: int) -> tuple[Callable[[int], Awaitable[int]], Callable[[], None]]:
    r, w = await asyncio.open_connection("127.0.0.1", port)

    async def get(n: int) -> int:
        w.write(SIZE.pack(n))
        await w.drain()
        (size,) = SIZE.unpack(await r.readexactly(SIZE.size))
        return len(await r.readexactly(size))

    return get, w.close


def frame_connection(
    small: int, keep: int
) -> Callable[[int], Awaitable[tuple[Callable[[int], Awaitable[int]], Callable[[], None]]]]:
    async def connect(port: int) -> tuple[Callable[[int], Awaitable[int]], Callable[[], None]]:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            lambda: FrameConnection(small, keep), "127.0.0.1", port
        )

        async def get(n: int) -> int:
            conn.write(SIZE.pack(n))
            await conn.drain()
            size = await conn.read_size()
            assert size is not None
            buffer, size = await conn.read_body(size)
            conn.give_back(buffer)
            return size

        return get, conn.close

    return connect


async def measure(frames_per_size: int, warmup: int) -> dict[str, float]:
    frames = {n: SIZE.pack(n) + os.urandom(n) for n in SIZES}
    out: dict[str, float] = {}
    ways = {
        "stream_reader": stream_reader,
        "follower": frame_connection(client.SMALL_FRAME_BYTES, client.KEPT_BUFFER_MAX_BYTES),
    }
    for name, connect in ways.items():
        get, close = await connect(start_server(frames))
        try:
            for n in SIZES:
                cpu = []
                for i in range(warmup + frames_per_size):
                    c0 = time.thread_time()
                    got = await get(n)
                    spent = time.thread_time() - c0
                    if got != n:
                        raise AssertionError(f"{name}: a frame of {got} bytes, asked for {n}")
                    if i >= warmup:
                        cpu.append(spent)
                out[f"{name}_us_{n // KiB}k"] = round(statistics.median(cpu) * 1e6, 1)
        finally:
            close()
    for n in SIZES:
        k = f"{n // KiB}k"
        out[f"ratio_follower_{k}"] = round(
            out[f"stream_reader_us_{k}"] / out[f"follower_us_{k}"], 2
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="60 frames per size instead of 400")
    ap.add_argument("--frames", type=int, default=None, help="measured frames per size")
    args = ap.parse_args()
    n = args.frames or (60 if args.quick else 400)
    load_start = os.getloadavg()[0]
    figures = asyncio.run(measure(n, warmup=max(n // 10, 5)))
    print(
        json.dumps(
            {
                "bench": "frame_read",
                "units": "client thread CPU microseconds per frame (median); ratio_WAY = "
                "stream_reader / WAY",
                "frames_per_size": n,
                "loadavg_1m_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
                **figures,
            }
        )
    )


if __name__ == "__main__":
    main()
