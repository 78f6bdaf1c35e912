"""The broker's HTTP server (aiohttp): routes, auth, error mapping, over the :class:`Broker`
(:mod:`~jbod_broker.broker`, the composition root, which runs the background duties).

Layout of the API (all JSON bodies are ``jbod_broker.wire`` models):

    GET  /healthz /readyz /metrics                      open
    POST /v1/admin/...         log dirs, moves, configs  bearer token
    POST /v1/controller/...    LeaderAndIsr, StopReplica, UpdateMetadata   bearer token
    *    /v1/data/...          produce, fetch, list offsets, metadata      bearer token, unless
                                                                       data.auth.required=false
    GET  /openapi.json         the JSON API, generated from the wire models

Every error is a 4xx/5xx with ``{"error": <Kafka error name>, "message": <reason>}`` and changes
nothing: models validate before any handler runs; a storage error names the directory.

Memory and connections (issue 14): the token is checked before a body is read; bodies are read
by :func:`read_body` only, against the request-memory pool (``queued.max.request.bytes``) and
within ``request.body.timeout.ms``; a request answered before its body was read closes its
connection instead of reading the rest (:func:`server_options`).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from pydantic import TypeAdapter, ValidationError

from . import wire
from .broker import Broker
from .config import BrokerConfig
from .errors import (
    AuthError,
    InvalidRequestError,
    KafkaError,
    PayloadTooLargeError,
    RequestBodyTimeoutError,
    http_status,
)
from .loop_slice import (
    LoopSlice,
    decode_long_list,
    drop_in_slices,
    full_collections_held,
)
from .request_memory import BodyClock, Reservation
from .storage.names import TopicPartition, validate_partition, validate_topic

log = logging.getLogger(__name__)
M = TypeVar("M", bound=wire.Model)
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

BROKER: web.AppKey[Broker] = web.AppKey("broker")
RESERVATION: web.RequestKey[Reservation] = web.RequestKey("reservation", Reservation)
"""Where a request keeps its :class:`Reservation` in the request-memory pool."""


# -- request plumbing ---------------------------------------------------------------------


def error_response(err: KafkaError) -> web.Response:
    return web.json_response(
        {"error": err.kafka_error, "message": str(err)}, status=http_status(err)
    )


async def parse(request: web.Request, model: type[M]) -> M:
    return await parse_json(request, model.model_validate_json, model.__name__)


async def parse_json(
    request: web.Request, validate: Callable[[bytes | bytearray], T], name: str
) -> T:
    return _validated(await _json_body(request), validate, name)


async def _json_body(request: web.Request) -> bytes | bytearray:
    if request.content_type != "application/json":
        raise InvalidRequestError(
            f"expected Content-Type application/json, got {request.content_type!r}"
        )
    return await read_body(request)


def _validated(raw: bytes | bytearray, validate: Callable[[bytes | bytearray], T], name: str) -> T:
    try:
        return validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(body)"
        raise InvalidRequestError(
            f"invalid {name}: {where}: {first['msg']} ({e.error_count()} error(s))"
        ) from e


LIST_CHUNK = 250
"""Items validated between two turns of the loop by :func:`parse_long_list` (about 1 ms)."""


@functools.cache
def _list_adapter(model: type[wire.Model], field: str) -> TypeAdapter[list[Any]]:
    annotation: Any = model.model_fields[field].annotation
    return TypeAdapter(annotation)


async def parse_long_list(request: web.Request, model: type[M], field: str) -> M:
    """:func:`parse` for a request that is one long list (``field``), without holding the loop.

    Validating a maximal alter-replica-log-dirs body at once held the loop for 30-75 ms on
    this machine, and readiness missed its 100 ms under load (issue 14); decoding a
    LeaderAndIsr of 100,000 partitions (18 MB) took 0.4 s in one call (issue 36). Here the
    body is decoded an item at a time (:func:`decode_long_list`), its items validated a chunk
    at a time with a turn for the others in between, and the envelope last over the validated
    items. A list longer than the model allows is refused once its limit is passed, before the
    rest is decoded. A body that fails anywhere else is validated whole the usual way, so its
    error names the same place and count as :func:`parse` does.
    """
    raw = await _json_body(request)
    limit = _list_bounds(model, field)[1]
    chunk = _list_adapter(model, field)
    envelope: dict[str, Any] = {}
    done: list[Any] = []
    pending: list[Any] = []
    sl = LoopSlice()
    try:
        for item in decode_long_list(raw.decode(), field, envelope):
            pending.append(item)
            if len(done) + len(pending) > limit:
                raise InvalidRequestError(
                    f"invalid {model.__name__}: {field}: more than {limit} items"
                )
            if len(pending) == LIST_CHUNK:
                done.extend(chunk.validate_python(pending))
                pending = []
            if sl.due():
                await sl.pause()
        done.extend(chunk.validate_python(pending))
        # The envelope is validated over as few items as the model needs (its min_length) and
        # the whole list put in after: its items are validated and its length checked (the
        # envelope over 100,000 validated items took another 0.15 s).
        least = _list_bounds(model, field)[0]
        head = model.model_validate({**envelope, field: done[:least]})
        return head.model_copy(update={field: done})
    except (ValueError, RecursionError):  # (a ValidationError is a ValueError too)
        # Anything the item decoder or a chunk refuses (nesting too deep included): the whole
        # body is validated the usual way for its error.
        return _validated(raw, model.model_validate_json, model.__name__)


def _list_bounds(model: type[wire.Model], field: str) -> tuple[int, int]:
    """The fewest and most items the model takes in ``field`` (its ``min_length`` and
    ``max_length``; 0 and no limit when it sets none)."""
    least, most = 0, sys.maxsize
    for m in model.model_fields[field].metadata:
        if isinstance(getattr(m, "min_length", None), int):
            least = m.min_length
        if isinstance(getattr(m, "max_length", None), int):
            most = m.max_length
    return least, most


async def respond_long_list(model: wire.Model, field: str) -> web.Response:
    """:func:`respond` for an answer that is one long list (``field``), without holding the
    loop: the same bytes, the list's items serialised a chunk at a time with a turn for the
    others in between (100,000 results with their messages took 0.2 s in one call)."""
    items = getattr(model, field)
    if len(items) <= LIST_CHUNK:
        return respond(model)
    adapter = _list_adapter(type(model), field)
    head = model.model_copy(update={field: []}).model_dump_json().encode()
    empty = f'"{field}":[]'.encode()
    at = head.index(empty) + len(empty) - 1  # just before the empty list's "]"
    parts = [head[:at]]
    sl = LoopSlice()
    for i in range(0, len(items), LIST_CHUNK):
        if i:
            parts.append(b",")
        parts.append(adapter.dump_json(items[i : i + LIST_CHUNK])[1:-1])
        if sl.due():
            await sl.pause()
    parts.append(head[at:])
    return web.Response(body=b"".join(parts), content_type="application/json")


async def read_body(request: web.Request) -> bytes | bytearray:
    """The request's body, read against the request-memory pool and the body's clock.

    The only reader of request bodies (aiohttp's ``request.read()`` would hold a body twice
    while it copies it, and waits for neither the pool nor a deadline). A body of known
    length reserves it whole once its first bytes are here (a Content-Length alone holds
    nothing: issue 36), waiting for the pool without a deadline if it must (its bytes wait
    in the client's socket meanwhile, and under load a fair queue must not turn into 408s);
    one whose decoded length is unknown (chunked, or a Content-Encoding) reserves chunk by
    chunk, waiting inside ``request.body.timeout.ms``: two chunked bodies each holding part of
    the pool cannot wait for each other forever. The reservation is the request's
    (:data:`RESERVATION`) and the middleware releases it once the request is answered,
    whatever happened. From the first byte the broker is ready to read, the body runs on a
    :class:`BodyClock` (``request.body.min.bytes.per.second``, ``request.body.timeout.ms``),
    the Kafka listener's rule.
    """
    b = request.app[BROKER]
    held = request[RESERVATION]
    length = request.content_length
    encoded = "Content-Encoding" in request.headers and (
        request.headers["Content-Encoding"].lower() != "identity"
    )
    first: bytes = b""
    if length is not None and not encoded:
        _refuse_size(b, length, at_least=False)
        if length == 0:
            return b""
        # Most bodies are already whole in the reader's buffer (a produce request of a few
        # batches arrives with its head): take them as they are, with no deadline to arm and
        # no copy into a growing buffer. Arming asyncio.timeout costs a timer handle per
        # request, which was the largest part of issue 14's extra CPU per produced byte.
        first = request.content.read_nowait()
        if len(first) == length and held.try_grow(length):
            return first
        known = length
    else:
        known = None
    return await _read_body_slowly(request, first, known)


async def _read_body_slowly(request: web.Request, first: bytes, length: int | None) -> bytearray:
    """:func:`read_body` for a body not whole in the buffer, or that the pool cannot take at
    once: ``first`` is what was taken already (unreserved), ``length`` the Content-Length of a
    body whose size is known."""
    b = request.app[BROKER]
    c = b.config
    held = request[RESERVATION]
    content = request.content
    loop = asyncio.get_running_loop()
    clock = BodyClock(
        loop.time(),
        timeout_s=c.request_body_timeout_ms / 1000,
        min_rate=c.request_body_min_bytes_per_second,
    )
    buf = bytearray()
    chunk = first
    while True:
        if chunk:
            await _reserve(b, held, clock, len(buf), len(chunk), length)
            # Large buffers grow in place (realloc): no copy of what was read so far, and no
            # single long step on the loop.
            buf += chunk
            clock.moved(loop.time(), len(buf))
        if length is not None and len(buf) >= length:
            break
        try:
            async with asyncio.timeout_at(clock.due):
                chunk = await content.readany()
        except TimeoutError:
            chunk = content.read_nowait()  # came while the loop was busy elsewhere: on time
            if not chunk:
                raise _late(b, clock, len(buf), length, loop.time()) from None
            continue
        if not chunk:
            break
    if length is not None and len(buf) != length:
        raise InvalidRequestError(f"the request body ended after {len(buf)} of {length} bytes")
    return buf


async def _reserve(
    b: Broker, held: Reservation, clock: BodyClock, have: int, n: int, length: int | None
) -> None:
    """Reserve for ``n`` more bytes of a body of which ``have`` are held: the whole
    ``length`` with the first bytes when it is known, else these ``n``."""
    if length is not None:
        if have or held.try_grow(length):
            return
        loop = asyncio.get_running_loop()
        waited = loop.time()
        await held.grow(length)
        clock.paused(loop.time() - waited)
        return
    _refuse_size(b, have + n, at_least=True)
    if held.try_grow(n):
        return
    loop = asyncio.get_running_loop()
    waited = loop.time()
    try:
        async with asyncio.timeout_at(clock.timeout_at):
            await held.grow(n)
    except TimeoutError:
        raise _late(b, clock, have, length, loop.time()) from None
    clock.paused(loop.time() - waited, timeout_too=False)


def _late(b: Broker, clock: BodyClock, got: int, length: int | None, now: float) -> KafkaError:
    c = b.config
    expected = "" if length is None else f" of {length}"
    if clock.timed_out(now):
        b.body_timeouts += 1
        return RequestBodyTimeoutError(
            f"the request body did not arrive within request.body.timeout.ms="
            f"{c.request_body_timeout_ms} ({got}{expected} bytes came)"
        )
    b.slow_bodies += 1
    return RequestBodyTimeoutError(
        f"the request body arrived slower than request.body.min.bytes.per.second="
        f"{c.request_body_min_bytes_per_second} ({got}{expected} bytes came)"
    )


def _refuse_size(b: Broker, n: int, *, at_least: bool) -> None:
    """PayloadTooLargeError for a body of ``n`` bytes (``at_least``: so far) that the broker
    would never read: over ``socket.request.max.bytes``, or over the whole request-memory
    pool (it could never be reserved)."""
    limit = b.config.socket_request_max_bytes
    capacity = b.request_memory.capacity
    if n <= limit and n <= capacity:
        return
    size = f"{'at least ' if at_least else ''}{n} bytes"
    if n > limit:
        raise PayloadTooLargeError(
            f"request body of {size} is larger than socket.request.max.bytes={limit}"
        )
    raise PayloadTooLargeError(
        f"request body of {size} is larger than the whole request memory pool "
        f"(queued.max.request.bytes={capacity})"
    )


def respond(model: wire.Model) -> web.Response:
    # Bytes, not the str: aiohttp takes bytes as they are, where a str goes through its
    # payload registry on every answer (the same header and bytes reach the client).
    return web.Response(body=model.model_dump_json().encode(), content_type="application/json")


_QUERY_INT = re.compile(r"-?[0-9]{1,19}")


def query_int(
    request: web.Request, name: str, default: int | None = None, *, lo: int = 0, hi: int = 2**63 - 1
) -> int:
    raw = request.query.get(name)
    if raw is None:
        if default is None:
            raise InvalidRequestError(f"query parameter {name!r} is required")
        return default
    # ASCII digits only, as Kafka's clients send them: int() would also take " 1 ", "1_0" and
    # digits of other scripts (issue 14).
    if _QUERY_INT.fullmatch(raw) is None:
        raise InvalidRequestError(f"query parameter {name}={raw!r} is not an integer")
    v = int(raw)
    if not lo <= v <= hi:
        raise InvalidRequestError(f"query parameter {name}={v} is outside [{lo}, {hi}]")
    return v


def query_tp(request: web.Request) -> TopicPartition:
    topic = request.query.get("topic")
    if topic is None:
        raise InvalidRequestError("query parameter 'topic' is required")
    validate_topic(topic)
    partition = query_int(request, "partition", lo=0, hi=2**31 - 1)
    validate_partition(partition)
    return TopicPartition(topic, partition)


def drop_frames(err: BaseException) -> None:
    """Forget the frames an answered error (and the errors it chains) passed through.

    An error that came through a future is in a cycle (the future holds the error, its
    traceback the frame awaiting the future, that frame the future), and every frame on the
    way holds the request body: such a 99 MiB body waited for the garbage collector, long
    after the request-memory pool had taken its reservation back (issue 14). The error has
    been answered; its frames are not needed, and the body goes when its last user does.
    """
    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        cur.__traceback__ = None
        cur = cur.__cause__ or cur.__context__


OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json")


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    broker = request.app[BROKER]
    started = time.perf_counter()
    route = (
        request.match_info.route.resource.canonical if request.match_info.route.resource else "?"
    )
    held = request[RESERVATION] = Reservation(broker.request_memory)
    try:
        # Before anything reads the body: a refused request never costs its body's memory.
        if request.path not in OPEN_PATHS:
            needs = not request.path.startswith("/v1/data/") or broker.config.data_auth_required
            if needs and broker.token_bytes is not None:
                header = request.headers.get("Authorization", "")
                given = header[7:] if header.startswith("Bearer ") else ""
                if not given or not hmac.compare_digest(
                    given.encode("utf-8", "surrogateescape"), broker.token_bytes
                ):
                    raise AuthError("missing or wrong bearer token")
        resp = await handler(request)
    except KafkaError as e:
        resp = error_response(e)
        drop_frames(e)
    except (RequestPayloadError, ConnectionResetError) as e:
        # A body that does not decode as its Content-Encoding says, or a client gone mid-body.
        resp = error_response(InvalidRequestError(f"cannot read the request body: {e}"))
        drop_frames(e)
    except web.HTTPException as e:
        resp = web.json_response(
            {"error": "INVALID_REQUEST", "message": e.reason or str(e)}, status=e.status
        )
        drop_frames(e)
    finally:
        if held.bytes:  # (a call saved on requests without a body)
            held.release()
    if request.body_exists and not request.content.is_eof():
        # Answered before its body was read (refused, or timed out): the rest is not read
        # either. The connection closes after this answer (server_options: no lingering).
        resp.force_close()
    broker.metrics.observe(route, request.method, resp.status, time.perf_counter() - started)
    return resp


# -- handlers -----------------------------------------------------------------------------


async def healthz(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    if b.halted:
        return web.json_response({"status": "halted", "reason": b.halted}, status=503)
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    if not b.ready:
        return web.json_response({"status": "not ready", "reason": b.halted}, status=503)
    budget = b.open_files
    pool = b.request_memory
    return web.json_response(
        {
            "status": "ready",
            "offline_log_dirs": sorted(b.logs.offline_dirs()),
            # Said, not a 503 (issue 36): a stall is made by clients and ends as its holders
            # are answered or closed by their body clock; failing readiness for it would let
            # anyone who can reach the Kafka port take every broker out of its Service and
            # hold up the operator's rolling restarts, which wait for ready pods.
            "request_memory": {
                "stalled": pool.stalled,
                "capacity_bytes": pool.capacity,
                "used_bytes": pool.used,
                "waiting_requests": pool.waiting,
                "oldest_wait_seconds": round(pool.oldest_wait_s, 3),
            },
            "open_files": {
                "limit": budget.limit,
                "hard_limit": budget.hard_limit,
                "limit_at_start": budget.limit_at_start,
                "log_handles_max": budget.log_handles,
                "log_handles_open": b.logs.handles.open_count,
            },
        }
    )


async def metrics(request: web.Request) -> web.Response:
    body, ctype = request.app[BROKER].metrics.render()
    return web.Response(body=body, headers={"Content-Type": ctype})


async def describe_log_dirs(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    req = await parse(request, wire.DescribeLogDirsRequest)
    infos = b.logs.describe_log_dirs(topics=req.topics, dirs=req.log_dirs)
    return respond(
        wire.DescribeLogDirsResponse(
            broker_id=b.config.broker_id,
            log_dirs=[
                wire.LogDirDescription(
                    path=i.path,
                    is_live=i.is_live,
                    error=i.error,
                    total_bytes=i.total_bytes,
                    usable_bytes=i.usable_bytes,
                    cordoned=i.cordoned,
                    reserved_bytes=i.reserved_bytes,
                    headroom_bytes=i.headroom_bytes,
                    partitions=[
                        wire.ReplicaDescription(
                            topic=r.topic,
                            partition=r.partition,
                            size=r.size,
                            offset_lag=r.offset_lag,
                            is_future=r.is_future,
                            log_end_offset=r.log_end_offset,
                        )
                        for r in i.replicas
                    ],
                )
                for i in infos
            ],
        )
    )


async def alter_replica_log_dirs(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    req = await parse_long_list(request, wire.AlterReplicaLogDirsRequest, "partitions")
    results = []
    sl = LoopSlice()
    for item in req.partitions:
        if sl.due():
            # Issue 14: a big request must not freeze the loop (readiness, produce, fetch and
            # heartbeats run on it): give the others a turn between slices of entries.
            await sl.pause()
        tp = TopicPartition(item.topic, item.partition)
        try:
            b.moves.alter(tp, item.log_dir)
            results.append(wire.PartitionResult(topic=item.topic, partition=item.partition))
        except KafkaError as e:
            results.append(
                wire.PartitionResult(
                    topic=item.topic,
                    partition=item.partition,
                    error=e.kafka_error,
                    message=str(e),
                )
            )
    return respond(wire.AlterReplicaLogDirsResponse(partitions=results))


async def describe_replica_log_dirs(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    req = await parse(request, wire.DescribeReplicaLogDirsRequest)
    tps = (
        None
        if req.partitions is None
        else [TopicPartition(r.topic, r.partition) for r in req.partitions]
    )
    if req.wait_ms:
        await b.moves.wait_for_end(tps, req.wait_ms / 1000)
    return respond(wire.DescribeReplicaLogDirsResponse(partitions=b.moves.describe(tps)))


async def cordon_log_dir(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    req = await parse(request, wire.CordonLogDirRequest)
    b.logs.set_cordoned(req.log_dir, req.cordoned)
    return web.json_response({"log_dir": req.log_dir, "cordoned": req.cordoned})


def current_configs(b: Broker) -> wire.ThrottleConfig:
    def refs(tps: set[TopicPartition]) -> list[wire.ReplicaRef]:
        return [wire.ReplicaRef(topic=t.topic, partition=t.partition) for t in sorted(tps)]

    return wire.ThrottleConfig(
        intra_broker_throttled_rate=b.moves.rate,
        leader_replication_throttled_rate=b.leader_throttle.rate,
        follower_replication_throttled_rate=b.fetchers.throttle.rate,
        leader_replication_throttled_replicas=refs(b.leader_throttle.replicas),
        follower_replication_throttled_replicas=refs(b.fetchers.throttled_replicas),
    )


async def configs(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    if request.method == "POST":
        req = await parse(request, wire.ThrottleConfig)
        if req.intra_broker_throttled_rate is not None:
            b.moves.set_rate(req.intra_broker_throttled_rate)
        if req.leader_replication_throttled_rate is not None:
            b.leader_throttle.bucket.set_rate(req.leader_replication_throttled_rate)
        if req.follower_replication_throttled_rate is not None:
            b.fetchers.throttle.set_rate(req.follower_replication_throttled_rate)
        if req.leader_replication_throttled_replicas is not None:
            b.leader_throttle.replicas = {
                TopicPartition(r.topic, r.partition)
                for r in req.leader_replication_throttled_replicas
            }
        if req.follower_replication_throttled_replicas is not None:
            b.fetchers.throttled_replicas = {
                TopicPartition(r.topic, r.partition)
                for r in req.follower_replication_throttled_replicas
            }
    return respond(current_configs(b))


async def leader_and_isr(request: web.Request) -> web.Response:
    """The controller's requests are served in slices, their disk work off the loop (see
    :meth:`ReplicaManager.serve_leader_and_isr`), with full collections held off meanwhile
    (:func:`full_collections_held`: one over a 100,000-partition request took 0.12 s), and
    what they decoded freed in slices too (:func:`drop_in_slices`)."""
    b = request.app[BROKER]
    with full_collections_held():
        req = await parse_long_list(request, wire.LeaderAndIsrRequest, "partitions")
        resp = await b.replicas.serve_leader_and_isr(req)
        await drop_in_slices(req.partitions)
        answer = await respond_long_list(resp, "partitions")
        await drop_in_slices(resp.partitions)
        return answer


async def stop_replica(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    with full_collections_held():
        req = await parse_long_list(request, wire.StopReplicaRequest, "partitions")
        # A move of a replica being deleted is cancelled before its log goes (off the loop).
        resp = await b.replicas.serve_stop_replica(req, forget_move=b.moves.forget)
        await drop_in_slices(req.partitions)
        answer = await respond_long_list(resp, "partitions")
        await drop_in_slices(resp.partitions)
        return answer


async def update_metadata(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    with full_collections_held():
        req = await parse_long_list(request, wire.UpdateMetadataRequest, "partitions")
        await b.replicas.serve_update_metadata(req)
        await drop_in_slices(req.partitions)  # (the partitions' metadata is kept, not the list)
    return web.json_response({"controller_epoch": b.replicas.controller_epoch})


async def produce(request: web.Request) -> web.StreamResponse:
    b = request.app[BROKER]
    tp = query_tp(request)
    acks = query_int(request, "acks", -1, lo=-1, hi=1)
    timeout_ms = query_int(request, "timeout_ms", b.config.request_timeout_ms, lo=0, hi=600_000)
    b.replicas.leader_partition(tp)  # a produce to a partition not led here: refused unread
    data = await read_body(request)
    info = await b.replicas.produce(tp, data, acks, timeout_ms)
    if acks == 0:
        return web.Response(status=204)
    return respond(
        wire.ProduceResponse(
            topic=tp.topic,
            partition=tp.partition,
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_start_offset=info.log_start_offset,
        )
    )


async def fetch(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    tp = query_tp(request)
    offset = query_int(request, "offset")
    max_bytes = query_int(request, "max_bytes", 1 << 20, lo=0, hi=64 << 20)
    max_wait = query_int(request, "max_wait_ms", 0, lo=0, hi=60_000)
    epoch = query_int(request, "leader_epoch", -1, lo=-1, hi=2**31 - 1)
    res = await b.replicas.fetch_consumer(tp, offset, max_bytes, max_wait, epoch)
    return web.Response(
        body=res.data,
        content_type="application/octet-stream",
        headers={
            "X-High-Watermark": str(res.high_watermark),
            "X-Log-Start-Offset": str(res.log_start_offset),
            "X-Log-End-Offset": str(res.log_end_offset),
        },
    )


async def list_offsets(request: web.Request) -> web.Response:
    b = request.app[BROKER]
    tp = query_tp(request)
    spec = request.query.get("timestamp", "latest")
    if spec not in ("earliest", "latest"):
        raise InvalidRequestError("timestamp must be 'earliest' or 'latest'")
    p = b.replicas.leader_partition(tp)
    lg = b.replicas.log_of(p)
    off = lg.log_start_offset if spec == "earliest" else lg.high_watermark
    return respond(
        wire.ListOffsetsResponse(
            topic=tp.topic, partition=tp.partition, offset=off, leader_epoch=p.leader_epoch
        )
    )


async def metadata(request: web.Request) -> web.Response:
    return respond(request.app[BROKER].replicas.metadata_response())


JSON_ROUTES: list[tuple[str, type[wire.Model], Handler]] = [
    ("/v1/admin/describe-log-dirs", wire.DescribeLogDirsRequest, describe_log_dirs),
    ("/v1/admin/alter-replica-log-dirs", wire.AlterReplicaLogDirsRequest, alter_replica_log_dirs),
    (
        "/v1/admin/describe-replica-log-dirs",
        wire.DescribeReplicaLogDirsRequest,
        describe_replica_log_dirs,
    ),
    ("/v1/admin/cordon-log-dir", wire.CordonLogDirRequest, cordon_log_dir),
    ("/v1/admin/configs", wire.ThrottleConfig, configs),
    ("/v1/controller/leader-and-isr", wire.LeaderAndIsrRequest, leader_and_isr),
    ("/v1/controller/stop-replica", wire.StopReplicaRequest, stop_replica),
    ("/v1/controller/update-metadata", wire.UpdateMetadataRequest, update_metadata),
]


def openapi() -> dict[str, Any]:
    """The JSON API as OpenAPI 3.1, generated from the wire models (used by the fuzz test)."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for path, model, _ in JSON_ROUTES:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
        paths[path] = {
            "post": {
                "operationId": path.rsplit("/", 1)[-1].replace("-", "_"),
                "security": [{"bearer": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{model.__name__}"}
                        }
                    },
                },
                "responses": {"200": {"description": "ok"}, "4XX": {"description": "refused"}},
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "jbod broker", "version": "v1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


async def openapi_handler(request: web.Request) -> web.Response:
    return web.json_response(openapi())


def server_options(config: BrokerConfig) -> dict[str, Any]:
    """aiohttp's server settings that bound what one connection can hold (issue 14).

    - ``lingering_time=0``: after answering a request whose body it did not read (a 401 before
      a 99 MiB body, a 413, a 408), aiohttp would otherwise keep reading and discarding the
      body for 10 s; the connection closes instead (a client still sending may see a reset).
    - ``keepalive_timeout``: aiohttp's keep-alive timer runs from the connection's start until
      a complete request head arrives, and between requests; a head trickled in slower than
      ``connections.max.idle.ms`` closes the connection. The head's size is bounded by
      aiohttp's own limits (8190-byte request line and header fields, 128 headers), answered
      400 past them.
    """
    return {"lingering_time": 0, "keepalive_timeout": config.connections_max_idle_ms / 1000}


def make_app(broker: Broker) -> web.Application:
    app = web.Application(middlewares=[middleware])
    app[BROKER] = broker
    r = app.router
    r.add_get("/healthz", healthz)
    r.add_get("/readyz", readyz)
    r.add_get("/metrics", metrics)
    r.add_get("/openapi.json", openapi_handler)
    for path, _model, handler in JSON_ROUTES:
        r.add_post(path, handler)
    r.add_get("/v1/admin/configs", configs)
    r.add_post("/v1/data/produce", produce)
    r.add_get("/v1/data/fetch", fetch)
    r.add_get("/v1/data/list-offsets", list_offsets)
    r.add_get("/v1/data/metadata", metadata)

    async def lifecycle(app: web.Application) -> Any:
        await broker.start()
        yield
        await broker.stop()

    app.cleanup_ctx.append(lifecycle)
    return app
