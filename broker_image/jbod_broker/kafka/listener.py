"""The Kafka protocol listener: an asyncio streams server beside the HTTP API (issue 18).

One task per connection reads a request, answers it, and only then reads the next, as Kafka's
SocketServer mutes a channel while its request is in flight: pipelined requests are answered
in order, and a connection holds at most one request body in memory.

Bounds, as for the HTTP path (issue 14):

- a frame larger than ``socket.request.max.bytes`` (or than the whole request-memory pool) is
  refused before a byte of it is read: the connection closes, as Kafka's
  InvalidReceiveException closes it;
- a body reserves its size in the request-memory pool (``queued.max.request.bytes``) before it
  is read and gives it back once its request is answered, so bodies arriving at once wait for
  each other instead of growing the heap;
- once a body's first byte may be read, all of it must arrive within
  ``request.body.timeout.ms``; a connection silent between requests for
  ``connections.max.idle.ms`` is closed.

Every connection closed for a protocol error is logged with the peer and the reason; nothing
of a request that did not decode reaches the replica manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..request_memory import Reservation
from ..storage.log import FileSlice
from .apis import HANDLERS, Close
from .protocol import SIZE, ProtocolError, encode_response_pieces, parse_request

if TYPE_CHECKING:
    from ..server import Broker

log = logging.getLogger(__name__)


class KafkaListener:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0
        """The bound port (the configured one, or the kernel's pick for port 0)."""
        self.requests: Counter[str] = Counter()
        """Requests answered, by API name."""
        self.closed_for_errors = 0
        """Connections closed because of what their client sent."""
        self.connections_accepted = 0

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        bind = self.broker.config.kafka_bind
        assert bind is not None
        host, port = bind
        self._server = await asyncio.start_server(
            self._accept, host or None, port, backlog=1024, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info(
            "Kafka listener started",
            extra={"event": "kafka_listener_started", "host": host, "port": self.port},
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._connections):
            t.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_accepted += 1
        peer = writer.get_extra_info("peername")
        try:
            await self._serve(reader, writer)
        except ProtocolError as e:
            self.closed_for_errors += 1
            log.warning(
                "closing a Kafka connection: %s",
                e,
                extra={"event": "kafka_protocol_error", "peer": str(peer), "error": str(e)},
            )
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass  # the client went away, or was idle or slow past its deadline
        except asyncio.CancelledError:
            pass  # the broker is stopping
        except Exception:
            log.exception(
                "Kafka request failed; closing the connection",
                extra={"event": "kafka_request_failed", "peer": str(peer)},
            )
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        c = self.broker.config
        pool = self.broker.request_memory
        while True:
            try:
                async with asyncio.timeout(c.connections_max_idle_ms / 1000):
                    head = await reader.readexactly(SIZE.size)
            except asyncio.IncompleteReadError as e:
                if e.partial:
                    raise ProtocolError(
                        f"the connection closed inside a request size ({len(e.partial)} of 4 bytes)"
                    ) from None
                return  # a clean close between requests
            (size,) = SIZE.unpack(head)
            if size < 0:
                raise ProtocolError(f"negative request size {size}")
            if size > c.socket_request_max_bytes:
                raise ProtocolError(
                    f"a request of {size} bytes is larger than socket.request.max.bytes="
                    f"{c.socket_request_max_bytes}"
                )
            if size > pool.capacity:
                raise ProtocolError(
                    f"a request of {size} bytes is larger than the whole request memory pool "
                    f"(queued.max.request.bytes={pool.capacity})"
                )
            held = Reservation(pool)
            try:
                await held.grow(size)
                try:
                    async with asyncio.timeout(c.request_body_timeout_ms / 1000):
                        frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    raise ProtocolError(
                        f"the connection closed after {len(e.partial)} of a request's {size} bytes"
                    ) from None
                except TimeoutError:
                    raise ProtocolError(
                        f"a request's {size} bytes did not arrive within "
                        f"request.body.timeout.ms={c.request_body_timeout_ms}"
                    ) from None
                req = parse_request(frame)
                del frame
                response = await HANDLERS[req.api_key](self.broker, req)
            finally:
                held.release()
            self.requests[req.api_name] += 1
            if isinstance(response, Close):
                raise ProtocolError(response.reason)
            if response is not None:
                await _send(writer, encode_response_pieces(req.correlation_id, response))


SENDFILE_MIN_BYTES = 128 * 1024
"""File ranges this big or bigger go by the kernel's sendfile; smaller ones are read and
written with the bytes around them. asyncio's ``loop.sendfile`` waits for the transport to
drain, pauses reading and runs its own future for each range: for the 16 KiB batch a
follower fetches per acks=all produce it cost 170-240 µs of CPU against 27 µs for a pread and
a write (the same socket pair, /tmp microbenchmark: 64 KiB 200 against 100 µs, even at
256 KiB, sendfile ahead at 1 MiB, 1.2 against 1.7 ms). Measured again with :func:`_sendfile`,
which sends a range by one call when the socket has room (bench/sendfile_range.py's frames,
session 38, the sender's CPU): the read and write cost less up to 64 KiB (53.5 against
58.2 µs), the kernel's send less from 128 KiB (70.6 against 78.7 µs), so the bound stays."""


async def _send(
    writer: asyncio.StreamWriter, pieces: list[Any], sendfile_min: int = SENDFILE_MIN_BYTES
) -> None:
    """Write a response frame's pieces in order: bytes, and the file ranges of a follower's
    records read from their files when small, sent by the kernel when large
    (:data:`SENDFILE_MIN_BYTES`; :func:`_sendfile`: os.sendfile on a plain socket, never
    read into the process). The bytes before a large range, and all of a frame without one,
    go in one write: each write to an idle transport is a send call, and on loopback every
    send also runs the receiver's side of TCP and may wake its reader, so a follower's
    response in five pieces (headers and records of two partitions) cost five of each.
    Every range's descriptor is closed once read or sent, or when the send fails. A range
    cut short (the file was truncated under it) is not sent and leaves the frame shorter
    than its size said: the connection is closed, and the client, which cannot read the
    frame, reconnects."""
    try:
        run: list[bytes] = []
        for piece in pieces:
            if not isinstance(piece, FileSlice):
                run.append(piece)
                continue
            if piece.size < sendfile_min:
                data = os.pread(piece.fd, piece.size, piece.position)
                sent = len(data)
                if sent == piece.size:
                    run.append(data)
            else:
                if run:
                    writer.write(b"".join(run))
                    run = []
                sent = await _sendfile(writer, piece)
            if sent != piece.size:
                raise ProtocolError(
                    f"a file range of {piece.size} bytes gave {sent} (truncated under the send)"
                )
            piece.close()
        if run:
            writer.write(run[0] if len(run) == 1 else b"".join(run))
        await writer.drain()
    finally:
        for piece in pieces:
            if isinstance(piece, FileSlice):
                piece.close()


async def _sendfile(writer: asyncio.StreamWriter, piece: FileSlice) -> int:
    """Send a file range by the kernel; the bytes sent (fewer when the file ends inside it).

    When the transport has nothing buffered, one ``os.sendfile`` on its socket sends the
    range: a follower that waits for this response has room for it in the socket buffers,
    so on loopback the call takes the whole range. Only what that call leaves (a full
    socket buffer) goes by ``loop.sendfile``, which pauses the transport's reading, waits for
    it to drain and registers for writability around its own os.sendfile: 135-250 µs of the
    thread's CPU per range of 64 KiB-1 MiB on loopback, against 22-105 µs this way, within a
    third of the os.sendfile call alone (bench/sendfile_range.py, docs/benchmarks.md). An RF 3
    leader sends a range per partition per follower round."""
    transport = writer.transport
    sent = 0
    sock = transport.get_extra_info("socket")
    if sock is not None and not transport.is_closing() and not transport.get_write_buffer_size():
        try:
            sent = os.sendfile(sock.fileno(), piece.fd, piece.position, piece.size)
        except (BlockingIOError, InterruptedError):
            pass  # the socket's buffer is full: all of it by loop.sendfile
        else:
            if sent in (0, piece.size):
                return sent  # all of it, or nothing: the file ends where the range starts
    with open(piece.fd, "rb", buffering=0, closefd=False) as f:
        loop = asyncio.get_running_loop()
        rest = await loop.sendfile(transport, f, piece.position + sent, piece.size - sent)
    return sent + rest
