"""Issue 14 (5), and the body timeout of (6): nobody can drive a broker's memory up or hold its
connections with bodies or heads that never finish.

Against broker processes on loopback, with raw sockets where the bytes on the wire matter:

- the data path needs the token by default, and a request without it is answered 401 from
  its head alone: the body is neither read nor waited for, and the connection closes;
  ``data.auth.required=false`` opens the data path, with a warning in the log;
- request bodies share the request-memory pool (``queued.max.request.bytes``): 64 concurrent
  99 MiB bodies leave the broker's peak RSS within the pool plus a fixed margin, while
  /readyz keeps answering; a body larger than the whole pool is refused unread (413); a body
  of unknown length (chunked) is counted against the pool as it arrives; memory comes back
  when a client goes away mid-body;
- a body trickled slower than ``request.body.timeout.ms`` is answered 408 and its connection
  closed; a request head trickled slower than ``connections.max.idle.ms`` is closed; the
  broker stays ready meanwhile.

The peak RSS is VmHWM from ``/proc/<pid>/status`` (the kernel's high-water mark, so no peak
falls between two samples); the test prints it as a JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jbod_broker.client import BrokerClient
from jbod_broker.config import BrokerConfig
from jbod_broker.local import LocalBroker, lead_alone, write_token
from jbod_broker.storage.records import build_batch
from tests.integration.test_broker_loop import READY_WITHIN_S, ReadyzProbe
from tests.tiers import SERIAL
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, SERIAL]

MiB = 1 << 20
TOPIC = "memory"
PRODUCE = f"/v1/data/produce?topic={TOPIC}&partition=0&acks=1"
ANSWER_WITHIN_S = 10.0
"""How long a test waits for an answer the broker owes at once (on a loaded machine)."""

BODIES = 64
BODY_BYTES = 99 * MiB
POOL_BYTES = 128 * MiB
"""The pool in the RSS test: one 99 MiB body at a time, so the bound is tight."""
RSS_MARGIN_BYTES = 64 * MiB
"""What may come on top of the pool: per-connection buffers (aiohttp reads at most 128 KiB of
a body ahead), parser state, the allocator's slack."""
HEARTBEAT_INTERVAL_S = BrokerConfig.model_fields["broker_heartbeat_interval_ms"].default / 1000
"""broker.heartbeat.interval.ms by default: /readyz answers within it while bodies stream."""
CHUNK = memoryview(b"\xff" * MiB)
"""Every body is streamed from this one buffer: the test never holds a body either."""


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def __str__(self) -> str:
        return f"HTTP {self.status} {self.headers} {self.body[:400]!r}"


StartBroker = Callable[[Mapping[str, str]], tuple[LocalBroker, str]]


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[StartBroker]:
    """Start a broker (with these settings) that leads ``TOPIC``-0; stopped after the test."""
    started: list[LocalBroker] = []

    def start(settings: Mapping[str, str]) -> tuple[LocalBroker, str]:
        token_file = str(tmp_path / "token")
        token = write_token(token_file)
        b = LocalBroker(
            broker_id=0,
            base_dir=str(tmp_path),
            token_file=token_file,
            num_dirs=1,
            settings=dict(settings),
        )
        started.append(b)
        b.start()

        async def lead() -> None:
            async with BrokerClient(b.url, token=token) as c:
                await lead_alone(c, TOPIC, 1)

        asyncio.run(lead())
        return b, token

    try:
        yield start
    finally:
        for b in started:
            b.stop()


def request_head(
    method: str, path: str, headers: Mapping[str, str], *, token: str | None = None
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_reply(s: socket.socket) -> Reply:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise AssertionError(f"the connection closed without an answer: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return Reply(int(lines[0].split()[1]), headers, body)


def closed_by_peer(s: socket.socket) -> bool:
    """True once the broker closed the connection (EOF or reset); False if it stays open
    past the socket's timeout."""
    try:
        return s.recv(65536) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def metrics(b: LocalBroker) -> dict[str, float]:
    with urllib.request.urlopen(b.url + "/metrics", timeout=ANSWER_WITHIN_S) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(jbod_request_\w+) ([0-9.e+-]+)", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def expect_error(r: Reply, status: int, error: str, *words: str) -> None:
    assert r.status == status, r
    body = r.json()
    assert body["error"] == error, r
    for w in words:
        assert w in body["message"], r


# --------------------------------------------------------------------------------------------
# Authentication before the body
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("auth", [None, "Bearer " + "w" * 48], ids=["no-token", "wrong-token"])
def test_unauthenticated_produce_is_refused_before_its_body_is_read(
    start_broker: StartBroker, auth: str | None
) -> None:
    """Only the head and 16 bytes of a 99 MiB body are sent: the 401 must come anyway (the
    broker does not wait for the body), and the connection must close (it does not read
    the rest either). Before issue 14 the data path was open by default and the broker
    waited for the whole body."""
    b, _ = start_broker({})
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(BODY_BYTES)}
    if auth is not None:
        headers["Authorization"] = auth
    with socket.create_connection(("127.0.0.1", b.port), timeout=ANSWER_WITHIN_S) as s:
        s.sendall(request_head("POST", PRODUCE, headers) + b"\xff" * 16)
        t = time.monotonic()
        r = read_reply(s)
        took = time.monotonic() - t
        expect_error(r, 401, "CLUSTER_AUTHORIZATION_FAILED", "bearer token")
        assert r.headers.get("connection", "").lower() == "close", r
        assert closed_by_peer(s), "the broker kept the connection open for the rest of the body"
    print(json.dumps({"unauthenticated_401_s": round(took, 3)}))
    assert metrics(b)["jbod_request_memory_used_bytes"] == 0


def test_opening_the_data_path_is_explicit_and_logged(start_broker: StartBroker) -> None:
    b, _ = start_broker({"data.auth.required": "false"})
    with urllib.request.urlopen(b.url + "/v1/data/metadata", timeout=ANSWER_WITHIN_S) as r:
        assert r.status == 200
    admin = urllib.request.Request(b.url + "/v1/admin/configs")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(admin, timeout=ANSWER_WITHIN_S)
    with info.value:
        assert info.value.code == 401, "opening the data path must not open the admin API"
    warnings = [
        json.loads(line)
        for line in Path(b.log_path).read_text(encoding="utf-8").splitlines()
        if '"auth_open"' in line
    ]
    assert [(w["level"], w["paths"]) for w in warnings] == [("warning", "/v1/data/")], warnings
    assert "data.auth.required=false" in warnings[0]["msg"]


# --------------------------------------------------------------------------------------------
# The request-memory pool
# --------------------------------------------------------------------------------------------


def vm_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


async def send_body(port: int, token: str, size: int) -> int:
    """One produce of ``size`` bytes streamed from :data:`CHUNK`; the answer's status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Length": str(size),
        "Connection": "close",
    }
    writer.write(request_head("POST", PRODUCE, headers, token=token))
    sent = 0
    with contextlib.suppress(ConnectionError):
        while sent < size:
            n = min(len(CHUNK), size - sent)
            writer.write(CHUNK[:n])
            await writer.drain()
            sent += n
    answer = await reader.read()
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    return int(answer.split(b" ", 2)[1]) if answer else 0


def test_rss_stays_within_the_pool_under_64_concurrent_99_mib_bodies(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    """Before issue 14 each body was read whole as it came (aiohttp's ``request.read()``,
    which also copies it once more): ten 99 MiB bodies took a broker from 258 to 1,331 MiB.
    Now they reserve their size first; the bodies are not valid batches (refused once read),
    so the time goes into moving 6.2 GiB over loopback, one body at a time."""
    b, token = start_broker({"queued.max.request.bytes": str(POOL_BYTES)})
    pid = b.proc.pid if b.proc is not None else 0
    small = build_batch([(None, b"warm-up")])

    async def warm_up() -> None:
        async with BrokerClient(b.url, token=token) as c:
            await c.produce(TOPIC, 0, small, acks=1)

    asyncio.run(warm_up())
    baseline_kib = vm_kib(pid, "VmRSS")
    seen_used: list[float] = []
    seen_waiting: list[float] = []
    done = threading.Event()

    def watch_pool() -> None:
        while not done.is_set():
            m = metrics(b)
            seen_used.append(m["jbod_request_memory_used_bytes"])
            seen_waiting.append(m["jbod_request_memory_waiting_requests"])
            done.wait(0.05)

    async def all_bodies() -> list[int]:
        return await asyncio.gather(*(send_body(b.port, token, BODY_BYTES) for _ in range(BODIES)))

    watcher = threading.Thread(target=watch_pool)
    probe = ReadyzProbe(b.url, tmp_path)
    t = time.monotonic()
    try:
        watcher.start()
        statuses = asyncio.run(all_bodies())
    finally:
        took = time.monotonic() - t
        done.set()
        watcher.join()
        latencies = probe.finish()
    peak_kib = vm_kib(pid, "VmHWM")
    result = {
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "baseline_rss_mib": round(baseline_kib / 1024, 1),
        "pool_mib": POOL_BYTES // MiB,
        "bodies": BODIES,
        "body_mib": BODY_BYTES // MiB,
        "max_pool_used_mib": round(max(seen_used) / MiB, 1),
        "max_waiting": int(max(seen_waiting)),
        "readyz_worst_ms": round(max(latencies) * 1000, 1),
        "seconds": round(took, 1),
    }
    print(json.dumps(result))
    assert statuses == [400] * BODIES, statuses  # every body read, then refused as garbage
    assert max(seen_used) <= POOL_BYTES
    assert max(seen_waiting) >= 1, "the bodies never queued for the pool"
    assert (peak_kib - baseline_kib) * 1024 <= POOL_BYTES + RSS_MARGIN_BYTES, result
    # The broker reads at full speed here, competing for 2 shared cores with this client, the
    # probe and whatever else runs: the bound is the heartbeat interval, what the controller
    # needs (the slow-body test holds READY_WITHIN_S, on an idle loop).
    assert max(latencies) < HEARTBEAT_INTERVAL_S, result
    assert metrics(b)["jbod_request_memory_used_bytes"] == 0


def test_a_body_larger_than_the_whole_pool_is_refused_unread(start_broker: StartBroker) -> None:
    b, token = start_broker({"queued.max.request.bytes": str(MiB)})
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(2 * MiB)}
    with socket.create_connection(("127.0.0.1", b.port), timeout=ANSWER_WITHIN_S) as s:
        s.sendall(request_head("POST", PRODUCE, headers, token=token) + b"\xff" * 16)
        r = read_reply(s)
        expect_error(r, 413, "MESSAGE_TOO_LARGE", "queued.max.request.bytes=1048576", "2097152")
        assert closed_by_peer(s)


def chunked_produce(b: LocalBroker, token: str, chunks: Iterator[bytes]) -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", b.port, timeout=ANSWER_WITHIN_S)
    try:
        # A body refused part way may not be sent in full: the broker closes the connection.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.request(
                "POST",
                PRODUCE,
                body=chunks,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/octet-stream",
                },
                encode_chunked=True,
            )
        resp = conn.getresponse()
        return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def test_a_chunked_body_is_counted_against_the_pool_as_it_arrives(
    start_broker: StartBroker,
) -> None:
    b, token = start_broker({"queued.max.request.bytes": str(MiB)})
    batch = build_batch([(None, b"v" * 1000) for _ in range(100)])
    ok = chunked_produce(b, token, iter([batch[:1000], batch[1000:]]))
    assert ok.status == 200, ok
    big = chunked_produce(b, token, iter([b"\xff" * 65536] * 32))
    expect_error(big, 413, "MESSAGE_TOO_LARGE", "queued.max.request.bytes=1048576", "at least")
    assert metrics(b)["jbod_request_memory_used_bytes"] == 0


def test_memory_comes_back_when_a_client_leaves_mid_body(start_broker: StartBroker) -> None:
    b, token = start_broker({})
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(10 * MiB)}
    with socket.create_connection(("127.0.0.1", b.port), timeout=ANSWER_WITHIN_S) as s:
        s.sendall(request_head("POST", PRODUCE, headers, token=token) + b"\xff" * MiB)
        wait_for(
            lambda: metrics(b)["jbod_request_memory_used_bytes"] == 10 * MiB,
            "the body's reservation",
            ANSWER_WITHIN_S,
        )
    wait_for(
        lambda: metrics(b)["jbod_request_memory_used_bytes"] == 0,
        "the reservation released after the client left",
        ANSWER_WITHIN_S,
    )


# --------------------------------------------------------------------------------------------
# Slow bodies and slow heads
# --------------------------------------------------------------------------------------------

SLOW_TIMEOUT_MS = 1000
TRICKLE_EVERY_S = 0.1
"""1 byte per tick: 10 bytes/s, far below what the deadline lets through."""


class Trickler:
    """Sends one piece per tick on its own thread until stopped or the peer closes."""

    def __init__(self, s: socket.socket, piece: bytes) -> None:
        self.s, self.piece = s, piece
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.stop.wait(TRICKLE_EVERY_S):
            try:
                self.s.sendall(self.piece)
            except OSError:
                return
            self.sent += 1

    def __enter__(self) -> Trickler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_trickled_body_is_answered_408_and_closed_within_the_timeout(
    start_broker: StartBroker, tmp_path: Path, framing: str
) -> None:
    b, token = start_broker({"request.body.timeout.ms": str(SLOW_TIMEOUT_MS)})
    if framing == "chunked":
        headers = {"Transfer-Encoding": "chunked"}
        piece = b"1\r\n\xff\r\n"
    else:
        headers = {"Content-Length": "1000"}
        piece = b"\xff"
    headers["Content-Type"] = "application/octet-stream"
    probe = ReadyzProbe(b.url, tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", b.port), timeout=ANSWER_WITHIN_S) as s:
            s.sendall(request_head("POST", PRODUCE, headers, token=token))
            t = time.monotonic()
            with Trickler(s, piece) as trickle:
                r = read_reply(s)
                took = time.monotonic() - t
                closed = closed_by_peer(s)
    finally:
        latencies = probe.finish()
    print(
        json.dumps(
            {"framing": framing, "answered_s": round(took, 2), "bytes_trickled": trickle.sent}
        )
    )
    expect_error(r, 408, "REQUEST_TIMED_OUT", f"request.body.timeout.ms={SLOW_TIMEOUT_MS}")
    assert closed, "the connection stayed open after the 408"
    assert SLOW_TIMEOUT_MS / 1000 * 0.9 <= took < SLOW_TIMEOUT_MS / 1000 + 3, took
    assert trickle.sent >= 2, "the body was not trickled"
    assert len(latencies) >= 2 and max(latencies) < READY_WITHIN_S, latencies
    m = metrics(b)
    assert m["jbod_request_body_timeouts_total"] == 1
    assert m["jbod_request_memory_used_bytes"] == 0


def test_a_trickled_request_head_is_closed_after_connections_max_idle_ms(
    start_broker: StartBroker,
) -> None:
    b, token = start_broker({"connections.max.idle.ms": str(SLOW_TIMEOUT_MS)})
    with socket.create_connection(("127.0.0.1", b.port), timeout=ANSWER_WITHIN_S) as s:
        t = time.monotonic()
        s.sendall(f"POST {PRODUCE} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode())
        with Trickler(s, b"z") as trickle:
            closed = closed_by_peer(s)
            took = time.monotonic() - t
    assert closed, f"the connection was still open after {ANSWER_WITHIN_S}s"
    assert SLOW_TIMEOUT_MS / 1000 * 0.9 <= took < SLOW_TIMEOUT_MS / 1000 + 3, took
    assert trickle.sent >= 2
    with urllib.request.urlopen(b.url + "/readyz", timeout=ANSWER_WITHIN_S) as r:
        assert r.status == 200

    # A request that completes its head in time is served as usual on the same settings.
    async def produce() -> None:
        async with BrokerClient(b.url, token=token) as c:
            await c.produce(TOPIC, 0, build_batch([(None, b"after")]), acks=1)

    asyncio.run(produce())
