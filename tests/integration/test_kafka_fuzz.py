"""Fuzz of the Kafka listener: its request decoder and every handler (issue 36).

Every served API at every served version (:data:`jbod_broker.kafka.protocol.SUPPORTED`) is
sent as a realistic request (the topic the cluster has, offsets and epochs in range) or as a
random one of the right shape (kio's Hypothesis strategies for its entities), then mutated at
the byte level: bytes flipped, the frame cut short, bytes inserted, a length-sized field
overwritten with an extreme, bytes appended, and now and then a size header that lies.

The oracle is the broker's own decoder, run here on the bytes sent
(:func:`protocol.parse_request`, a pure function): a frame it cannot answer must close the
connection without an answer; one it can must get, within seconds, an answer that decodes as
that request's response with its correlation id (an acks=0 produce may get none; a Fetch that
long-polls for longer than the test waits may still be waiting). A request that makes a
handler fail (the broker's log says ``kafka_request_failed``) fails the test: no input may
reach an unexpected exception. After every example both brokers are alive and ready; after
the run, everything the topic holds decodes as a consumer decodes it, and a produce and a
fetch still work.

Bounded and repeatable: derandomized, no example database, about 500 examples, a fresh
connection each, all on loopback; two brokers, a controller stub in a thread of its own.
"""

from __future__ import annotations

import dataclasses
import datetime
import http.client
import json
import socket
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from jbod_broker.kafka import protocol
from jbod_broker.kafka.protocol import (
    SIZE,
    ProtocolError,
    encode_request,
    make,
    parse_request,
    parse_response,
    request_module,
    request_schema,
)
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches
from tests.integration.controller_stub import ControllerStub, LoopThread, stub_cluster
from tests.integration.test_broker_fuzz import FUZZ_SETTINGS as BROKER_FUZZ_SETTINGS

pytestmark = pytest.mark.integration

T = TypeVar("T")

SETTINGS = {
    "socket.request.max.bytes": str(1 << 20),
    "request.body.timeout.ms": "1000",
    "message.max.bytes": "65536",
    "broker.heartbeat.interval.ms": "200",
}
TOPIC = "t"
PARTITIONS = 2
ANSWER_WITHIN_S = 5.0
"""How long an answerable request may take (a lying size waits request.body.timeout.ms)."""
LONG_POLL_GRACE_S = 1.5
"""A Fetch that may long-poll for longer than this is not waited for to the end."""
EXAMPLES = 500

SERVED = [(k, v) for k, (lo, hi) in sorted(protocol.SUPPORTED.items()) for v in range(lo, hi + 1)]
"""Every (API key, version) the listener serves."""

# kio's entities carry their records as ``Records``, which has no strategy of its own: random
# bytes, or a batch that validates (so a random request sometimes gets as far as the log).
st.register_type_strategy(
    Records,
    st.one_of(
        st.binary(max_size=128),
        st.builds(lambda v: build_batch([(None, v)]), st.binary(max_size=64)),
    ),
)

FUZZ_SETTINGS = settings(BROKER_FUZZ_SETTINGS, max_examples=EXAMPLES)
"""The broker fuzz's settings (derandomized, no database, no shrinking), more examples."""


# --------------------------------------------------------------------------------------------
# The cluster: two brokers, the controller stub on a loop of its own thread
# --------------------------------------------------------------------------------------------


@dataclass
class Env:
    cluster: LocalCluster
    ctl: ControllerStub
    loop: LoopThread

    @property
    def leader(self) -> str:
        return self.cluster[0].kafka_endpoint

    def failed_requests(self) -> list[str]:
        """The broker-side reasons of requests whose handler raised (never expected)."""
        out = []
        for b in self.cluster.brokers:
            with open(b.log_path, encoding="utf-8") as f:
                out += [line for line in f if '"kafka_request_failed"' in line]
        return out


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("fuzz") / "cluster"
    with stub_cluster(str(base), 2, num_dirs=2, settings=SETTINGS) as sc:
        # Partition 0 led by broker 0, partition 1 by broker 1: every request has both a
        # partition this broker leads and one it follows.
        sc.loop.run(sc.ctl.create_topic(TOPIC, PARTITIONS, 2))
        yield Env(sc.cluster, sc.ctl, sc.loop)


def ready(url: str) -> bool:
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=10)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------
# Requests: realistic ones, and random ones of the right shape
# --------------------------------------------------------------------------------------------

MS = datetime.timedelta(milliseconds=1)


def realistic(api_key: int, version: int, draw: Callable[[st.SearchStrategy[Any]], Any]) -> Any:
    """A request of ``(api_key, version)`` a real client could send, about the cluster's
    topic: what the mutations start from, so they reach the handlers' logic."""
    m: Any = request_module(api_key, version)
    partition = draw(st.integers(0, PARTITIONS))  # PARTITIONS itself: no such partition
    if api_key == protocol.PRODUCE:
        records = build_batch([(b"k", b"fuzz-%d" % draw(st.integers(0, 999)))])
        part = make(m.PartitionProduceData, index=partition, records=records)
        return make(
            m.ProduceRequest,
            transactional_id=None,
            acks=draw(st.sampled_from([-1, 1, 0])),
            timeout=1000 * MS,
            topic_data=(make(m.TopicProduceData, name=TOPIC, partition_data=(part,)),),
        )
    if api_key == protocol.FETCH:
        part = make(
            m.FetchPartition,
            partition=partition,
            current_leader_epoch=-1,
            fetch_offset=draw(st.integers(0, 5)),
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=draw(st.sampled_from([1, 1024, 1 << 20])),
        )
        return make(
            m.FetchRequest,
            cluster_id=None,
            replica_id=draw(st.sampled_from([-1, -1, 1, 7])),
            max_wait=draw(st.integers(0, 100)) * MS,
            min_bytes=draw(st.sampled_from([0, 1])),
            max_bytes=draw(st.sampled_from([1, 1 << 20])),
            isolation_level=draw(st.sampled_from([0, 1])),
            session_id=0,
            session_epoch=-1,
            topics=(make(m.FetchTopic, topic=TOPIC, partitions=(part,)),),
            forgotten_topics_data=(),
            rack_id="",
        )
    if api_key == protocol.LIST_OFFSETS:
        part = make(
            m.ListOffsetsPartition,
            partition_index=partition,
            current_leader_epoch=-1,
            timestamp=draw(st.sampled_from([-1, -2, -3, -4, -5, -6, 0])),
        )
        return make(
            m.ListOffsetsRequest,
            replica_id=-1,
            isolation_level=0,
            topics=(make(m.ListOffsetsTopic, name=TOPIC, partitions=(part,)),),
            timeout=1000 * MS,
        )
    if api_key == protocol.METADATA:
        topics = draw(st.sampled_from([None, (TOPIC,), (TOPIC, "nope")]))
        return make(
            m.MetadataRequest,
            topics=None
            if topics is None
            else tuple(make(m.MetadataRequestTopic, topic_id=None, name=n) for n in topics),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
    if api_key == protocol.API_VERSIONS:
        return make(m.ApiVersionsRequest, client_software_name="fuzz", client_software_version="1")
    if api_key == protocol.INIT_PRODUCER_ID:
        return make(
            m.InitProducerIdRequest,
            transactional_id=None,
            transaction_timeout=60_000 * MS,
            producer_id=-1,
            producer_epoch=-1,
        )
    assert api_key == protocol.OFFSET_FOR_LEADER_EPOCH
    part = make(
        m.OffsetForLeaderPartition,
        partition=partition,
        current_leader_epoch=-1,
        leader_epoch=draw(st.integers(-1, 2)),
    )
    return make(
        m.OffsetForLeaderEpochRequest,
        replica_id=-1,
        topics=(make(m.OffsetForLeaderTopic, topic=TOPIC, partitions=(part,)),),
    )


def _short_waits(body: Any) -> Any:
    """A random Fetch waits at most 100 ms: the long poll is not what this test is about."""
    if getattr(body, "max_wait", None) is not None and body.max_wait > 100 * MS:
        return dataclasses.replace(body, max_wait=100 * MS)
    return body


# --------------------------------------------------------------------------------------------
# Mutations of the encoded frame
# --------------------------------------------------------------------------------------------

EXTREMES = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x00\x00"]


@st.composite
def frames(draw: Callable[[st.SearchStrategy[Any]], Any]) -> bytes:
    """A whole frame (size and request) of a served API, mutated or not."""
    api_key, version = draw(st.sampled_from(SERVED))
    if draw(st.booleans()):
        body = realistic(api_key, version, draw)
    else:
        body = _short_waits(draw(st.from_type(request_schema(api_key, version))))
    frame = bytearray(encode_request(draw(st.integers(0, 2**31 - 1)), "fuzz", body)[SIZE.size :])
    for _ in range(draw(st.integers(0, 3))):
        frame = _mutate(draw, frame)
    size = len(frame)
    if draw(st.integers(0, 19)) == 0:  # one in twenty: a size that lies, either way
        size = max(0, size + draw(st.sampled_from([-3, -1, 1, 64])))
    return SIZE.pack(size) + bytes(frame)


def _mutate(draw: Callable[[st.SearchStrategy[Any]], Any], frame: bytearray) -> bytearray:
    if not frame:
        return frame
    at = draw(st.integers(0, len(frame) - 1))
    kind = draw(st.sampled_from(["flip", "cut", "insert", "extreme", "append", "zero-run"]))
    if kind == "flip":
        frame[at] ^= draw(st.integers(1, 255))
    elif kind == "cut":
        del frame[at:]
    elif kind == "insert":
        frame[at:at] = draw(st.binary(min_size=1, max_size=8))
    elif kind == "extreme":
        frame[at : at + 4] = draw(st.sampled_from(EXTREMES))
    elif kind == "append":
        frame += draw(st.binary(min_size=1, max_size=16))
    else:
        frame[at : at + 8] = bytes(8)
    return frame


# --------------------------------------------------------------------------------------------
# What the broker must do with a frame
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    request: protocol.Request | None
    """What the broker's decoder makes of the frame; ``None``: it must close the connection."""
    may_stay_silent: bool
    """An acks=0 produce, or a Fetch that may long-poll past :data:`LONG_POLL_GRACE_S`."""


def expectation(raw: bytes) -> Expect:
    (size,) = SIZE.unpack_from(raw)
    body = raw[SIZE.size :]
    if size < 0 or size > int(SETTINGS["socket.request.max.bytes"]) or size > len(body):
        return Expect(None, False)  # refused before it is read, or never completes
    try:
        req = parse_request(body[:size])
    except ProtocolError:
        return Expect(None, False)
    silent = False
    if req.api_key == protocol.PRODUCE and req.body is not None:
        silent = int(req.body.acks) == 0
    elif req.api_key == protocol.FETCH and req.body is not None:
        silent = req.body.max_wait.total_seconds() > LONG_POLL_GRACE_S
    return Expect(req, silent)


def exchange(endpoint: str, raw: bytes, wait_s: float) -> bytes | None:
    """Send ``raw``; the first answer's frame (after its size), or ``None`` if the broker
    closed the connection first. TimeoutError if it did neither within ``wait_s``."""
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            return None  # closed while the frame was still going out
        try:
            head = _read_exactly(s, SIZE.size)
            if head is None:
                return None
            (size,) = SIZE.unpack(head)
            assert 0 <= size < 64 << 20, f"an answer of {size} bytes"
            frame = _read_exactly(s, size)
            assert frame is not None, "the connection closed inside an answer"
            return frame
        except ConnectionResetError:
            return None


def _read_exactly(s: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            assert not buf, f"the connection closed after {len(buf)} of {n} bytes"
            return None
        buf += chunk
    return bytes(buf)


def check_answer(req: protocol.Request, frame: bytes) -> None:
    """The answer decodes as ``req``'s response, at its version, with its correlation id (an
    ApiVersions of a version this broker does not know is answered at v0)."""
    version = 0 if req.body is None else req.version
    resp = parse_response(req.api_key, version, req.correlation_id, frame)
    if req.body is None:
        assert resp.error_code == ErrorCode.unsupported_version
    assert ErrorCode.unknown_server_error not in error_codes(resp), (req, resp)


def error_codes(entity: Any) -> Iterator[ErrorCode]:
    """Every error code in a response, nested entities included: UNKNOWN_SERVER_ERROR is
    what the broker answers for an error it has no code for, which is always a bug."""
    if isinstance(entity, tuple):
        for item in entity:
            yield from error_codes(item)
    elif dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if isinstance(value, ErrorCode):
                yield value
            else:
                yield from error_codes(value)


def test_every_served_request_mutated_is_answered_or_closed(env: Env) -> None:
    brokers = env.cluster.brokers
    seen: dict[str, int] = {"answered": 0, "closed": 0, "silent": 0}

    @FUZZ_SETTINGS
    @given(frames())
    def one(raw: bytes) -> None:
        expect = expectation(raw)
        wait_s = LONG_POLL_GRACE_S if expect.may_stay_silent else ANSWER_WITHIN_S
        try:
            frame = exchange(env.leader, raw, wait_s)
        except TimeoutError:
            assert expect.may_stay_silent, f"neither answered nor closed: {raw[:80]!r}"
            seen["silent"] += 1
        else:
            if frame is None:
                assert expect.request is None or expect.may_stay_silent, (
                    f"closed without an answer: {expect.request}"
                )
                seen["closed"] += 1
            else:
                assert expect.request is not None, f"answered what it cannot decode: {raw!r}"
                check_answer(expect.request, frame)
                seen["answered"] += 1
        assert all(b.alive for b in brokers)
        assert all(ready(b.url) for b in brokers)

    one()
    print(json.dumps(seen))
    assert env.failed_requests() == []
    # Both ways were taken many times: the oracle was exercised, not one branch of it.
    assert seen["answered"] > EXAMPLES // 5 and seen["closed"] > EXAMPLES // 10, seen


def test_afterwards_everything_stored_decodes_and_the_broker_serves(env: Env) -> None:
    """What the fuzz appended (a mutated produce that still validates), a consumer reads, and
    the broker still takes and serves records."""
    for p in range(PARTITIONS):
        data = env.loop.run(_read_all(env, p))
        for pos, header in iter_batches(data):
            _, records = decode_batch(data, pos)
            assert len(records) == header.records_count
    res = env.loop.run(
        env.ctl.client(0).produce(TOPIC, 0, build_batch([(None, b"after")]), acks=-1)
    )
    assert res is not None and res.base_offset >= 0


async def _read_all(env: Env, partition: int) -> bytes:
    """Every batch of a partition up to its high watermark, through the HTTP API's fetch
    (the other front end: what the Kafka port stored is read another way)."""
    client = env.ctl.client(env.ctl.state[TopicPartition(TOPIC, partition)].leader)
    out = bytearray()
    offset = 0
    while True:
        data, hw = await client.fetch(TOPIC, partition, offset)
        if not data:
            assert offset == hw, (offset, hw)
            return bytes(out)
        out += data
        offset = list(iter_batches(data))[-1][1].next_offset


@settings(max_examples=len(SERVED) * 2, derandomize=True, database=None, deadline=None)
@given(st.sampled_from(SERVED), st.data())
def test_the_fuzz_builds_every_served_version(served: tuple[int, int], data: st.DataObject) -> None:
    """Every (API, version) the listener serves has a realistic request here (a version added
    to SUPPORTED without one fails), and it decodes as that version."""
    api_key, version = served
    raw = encode_request(1, "fuzz", realistic(api_key, version, data.draw))
    req = parse_request(raw[SIZE.size :])
    assert (req.api_key, req.version) == (api_key, version)
    assert SIZE.unpack_from(raw)[0] == len(raw) - SIZE.size
