"""The Kafka protocol listener: an asyncio streams server beside the HTTP API (issue 18).

One task per connection reads a request, answers it, and only then reads the next, as Kafka's
SocketServer mutes a channel while its request is in flight: pipelined requests are answered
in order, and a connection holds at most one request body in memory.

Bounds, as for the HTTP path (issue 14):

- a frame larger than ``socket.request.max.bytes`` (or than the whole request-memory pool) is
  refused before a byte of it is read: the connection closes, as Kafka's
  InvalidReceiveException closes it;
- a body reserves its size in the request-memory pool (``queued.max.request.bytes``) once its
  first bytes are here (a size alone holds nothing: issue 36) and gives it back once its
  request is answered, so bodies arriving at once wait for each other instead of growing the
  heap; a request that fits is never queued behind one that does not (request_memory);
- a body must keep ``request.body.min.bytes.per.second`` from its first byte (after a grace
  of ``request_memory.BODY_GRACE_S``, which is also the longest it may pause) and arrive
  whole within ``request.body.timeout.ms``; a connection silent between requests for
  ``connections.max.idle.ms`` is closed;
- pipelined requests (already in the buffer, so nothing waits) let the loop serve others
  every :data:`PIPELINE_SLICE_S`;
- a client that does not read its answers is not read either once they pass
  :data:`UNSENT_MAX_BYTES` unsent (as Kafka mutes the channel).

The usual request, whose body came with its size, is read without a timer or a coroutine
that waits: only a body still arriving, or one the pool cannot take at once, goes the slow
way (:meth:`KafkaListener._read_body`).

Every connection closed for a protocol error is logged with the peer and the reason; nothing
of a request that did not decode reaches the replica manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..request_memory import BodyClock, Reservation
from ..storage.log import FileSlice
from .apis import HANDLERS, Close
from .protocol import (
    COLLECTOR_PAUSED_MIN_BYTES,
    SIZE,
    ProtocolError,
    Request,
    encode_response_pieces,
    parse_large_request,
    parse_request,
)

if TYPE_CHECKING:
    from ..served import ServedBroker

log = logging.getLogger(__name__)


class KafkaListener:
    def __init__(self, broker: ServedBroker) -> None:
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
        writer.transport.set_write_buffer_limits(high=UNSENT_MAX_BYTES)
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
        loop = asyncio.get_running_loop()
        buffer = _buffer(reader)
        turn_started = loop.time()
        unbroken = 0  # requests taken from the buffer since the last wait for one
        while True:
            if len(buffer) < SIZE.size:
                # The client has sent no further request: waiting for it lets the loop run.
                try:
                    async with asyncio.timeout(c.connections_max_idle_ms / 1000):
                        head = await reader.readexactly(SIZE.size)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        raise ProtocolError(
                            "the connection closed inside a request size "
                            f"({len(e.partial)} of 4 bytes)"
                        ) from None
                    return  # a clean close between requests
                turn_started, unbroken = loop.time(), 0
            else:
                # Pipelined: the next request is here already and nothing below need wait
                # (readexactly returns at once from a full buffer), so 10,000 of them held
                # the loop 3.4 s (issue 36): a turn for the others (PIPELINE_TURN_EVERY).
                unbroken += 1
                if unbroken >= PIPELINE_TURN_EVERY and (
                    loop.time() - turn_started >= PIPELINE_SLICE_S
                ):
                    await asyncio.sleep(0)
                    turn_started, unbroken = loop.time(), 0
                head = await reader.readexactly(SIZE.size)
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
                if len(buffer) >= size and held.try_grow(size):
                    # The usual case: the body came with its size, and the pool has room.
                    # No deadline to arm, no coroutine to wait in.
                    frame: bytes | memoryview = await reader.readexactly(size)
                else:
                    frame = await self._read_body(reader, size, held)
                if size < COLLECTOR_PAUSED_MIN_BYTES:
                    req = parse_request(frame)
                else:
                    req = await _parse_large(frame)
                del frame
                response = await HANDLERS[req.api_key](self.broker, req)
            finally:
                held.release()
            self.requests[req.api_name] += 1
            if isinstance(response, Close):
                raise ProtocolError(response.reason)
            if response is not None:
                await _send(writer, encode_response_pieces(req.correlation_id, response))

    async def _read_body(
        self, reader: asyncio.StreamReader, size: int, held: Reservation
    ) -> memoryview:
        """A body still arriving (or one the pool cannot take now), read-only: nothing is
        reserved until its first bytes are here, then its whole size at once (one grant per
        body cannot deadlock: request_memory), waiting for the pool with the rest unread if
        it must; the rest comes chunk by chunk into a buffer that grows, under the body's
        :class:`BodyClock` (``request.body.min.bytes.per.second``,
        ``request.body.timeout.ms``)."""
        c = self.broker.config
        loop = asyncio.get_running_loop()
        clock = BodyClock(
            loop.time(),
            timeout_s=c.request_body_timeout_ms / 1000,
            min_rate=c.request_body_min_bytes_per_second,
        )
        buffer = _buffer(reader)
        body = bytearray()
        while len(body) < size:
            try:
                async with asyncio.timeout_at(clock.due):
                    chunk = await reader.read(min(size - len(body), BODY_CHUNK_BYTES))
            except TimeoutError:
                if buffer:
                    continue  # it came while the loop was busy elsewhere: on time
                raise self._late(clock, size, len(body), loop.time()) from None
            if not chunk:
                raise ProtocolError(
                    f"the connection closed after {len(body)} of a request's {size} bytes"
                )
            if not body and not held.try_grow(size):
                waited = loop.time()
                await held.grow(size)  # the pool's wait is not the client's
                clock.paused(loop.time() - waited)
            body += chunk
            clock.moved(loop.time(), len(body))
        return memoryview(body).toreadonly()

    def _late(self, clock: BodyClock, size: int, got: int, now: float) -> ProtocolError:
        c = self.broker.config
        if clock.timed_out(now):
            return ProtocolError(
                f"a request's {size} bytes did not arrive within "
                f"request.body.timeout.ms={c.request_body_timeout_ms} ({got} came)"
            )
        self.broker.slow_bodies += 1
        return ProtocolError(
            f"a request's bytes arrived slower than request.body.min.bytes.per.second="
            f"{c.request_body_min_bytes_per_second} ({got} of {size} bytes came)"
        )


async def _parse_large(frame: bytes | memoryview) -> Request:
    """A large frame decoded with the collector paused (protocol.parse_large_request), then a
    turn for the others if the decode took a slice (:data:`PIPELINE_SLICE_S`): the handler's
    own first slice then starts a turn of its own instead of adding to the decode's (Metadata
    naming 100,000 topics: a decode and the handler's first pass in one turn held the loop
    48 ms, issue 36). A large produce decodes in microseconds and has no turn to pay."""
    started = time.monotonic()
    req = parse_large_request(frame)
    if time.monotonic() - started >= PIPELINE_SLICE_S:
        await asyncio.sleep(0)
    return req


PIPELINE_SLICE_S = 0.001
"""How long one connection's pipelined requests may run before it lets the loop serve the
others. A client that waits for each answer never meets it (its next request is not there
yet, and the wait for it is a turn). A fifth of the handlers' ``LOOP_SLICE_S``: under load a
broker gets a fraction of a core (2 cores, load average 6-9: a turn of 4-5 ms of CPU took
40-70 ms of wall time), and a /readyz answer needs two or three turns of the loop (read, the
handler's task, the write), each behind a slice of the pipelined connection: with 5 ms slices
10,000 pipelined ApiVersions put /readyz at 157-697 ms (load 5-9), with 1 ms at 27-90 ms,
nothing else holding the loop meanwhile (a monitor of each callback's time and the
collector's passes). A turn costs one loop iteration per millisecond of pipelined work."""

PIPELINE_TURN_EVERY = 8
"""Requests taken from the buffer between two looks at the clock. A handler that waited (an
acks=all produce waiting for its followers: the Java producer pipelines five) has let the
loop run already, but the listener cannot tell, and a turn after each such request would be
one more loop iteration per request: so the clock is read, and a turn given once the slice is
spent, only every few requests."""

UNSENT_MAX_BYTES = 64 * 1024
"""The most of a connection's answers left unsent (the transport's buffer, past what the
kernel's socket buffers took) before it stops being read: each answer's send waits for the
buffer to drain below this (``drain``), and while it waits no further request is read, so a
client that pipelines and never reads its answers holds one answer and this much, as Kafka
mutes a channel whose response is not sent. Without the bound (asyncio's default high-water
mark, named here so the rule is not a library's accident), 10,000 unread Metadata answers
would be held (test_kafka_hostile_memory)."""

BODY_CHUNK_BYTES = 1 << 20
"""The most of a body taken from the reader at a time (it holds less: StreamReader stops the
socket at 128 KiB): the deadline is rescheduled between two."""


def _buffer(reader: asyncio.StreamReader) -> bytearray:
    """The reader's buffer of bytes received and not yet read, watched (never changed) to tell
    a body that is here already from one still arriving: StreamReader has no public way to
    ask, and waiting to find out would cost every request a coroutine and a timer."""
    buffer: bytearray = reader._buffer  # type: ignore[attr-defined]
    return buffer


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
