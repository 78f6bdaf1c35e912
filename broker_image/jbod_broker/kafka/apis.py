"""One handler per Kafka API, over the broker's replica manager (issue 18).

The handlers translate: a Kafka request becomes the replica manager's calls (the same the HTTP
API makes), its results and errors become Kafka's response entities and codes
(:mod:`.errors`). Every rule (leadership, acks and min ISR, the high watermark, leader-epoch
fencing, validation of batches) stays in the replica manager and the log, so both front ends
answer alike.

Versions: a handler builds its response with :func:`.protocol.make` from kio's module of the
request's version, naming every field any served version may carry.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from .. import wire
from ..errors import KafkaError
from ..loop_slice import LoopSlice
from ..storage.log import EMPTY_SLICE, FileSlice, ReadResult, SliceResult
from ..storage.names import TopicPartition, parse_topic_id, validate_topic
from ..storage.records import any_transactional
from . import protocol
from .errors import error_code
from .protocol import Request, make, response_module

if TYPE_CHECKING:
    from ..served import ServedBroker

NO_THROTTLE = datetime.timedelta(0)
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
READ_COMMITTED = 1
MAX_FETCH_WAIT_MS = 60_000
"""The longest a Fetch long-polls, whatever it asks (clients ask for 500 ms by default)."""

Handler = Callable[["ServedBroker", Request], Awaitable[Any]]


class Close:
    """A handler's answer that is no response: close the connection, logging ``reason``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


# -- ApiVersions ------------------------------------------------------------------------------


def api_versions_response(version: int, error: ErrorCode = ErrorCode.none) -> Any:
    """The advertised versions (:data:`.protocol.SUPPORTED`). For an ApiVersions version
    this broker does not know, Kafka's answer: v0, UNSUPPORTED_VERSION, and the ApiVersions
    range alone, so the client retries with a version in it."""
    m = response_module(protocol.API_VERSIONS, version)
    ranges = (
        protocol.SUPPORTED
        if error == ErrorCode.none
        else {protocol.API_VERSIONS: protocol.SUPPORTED[protocol.API_VERSIONS]}
    )
    return make(
        m.ApiVersionsResponse,
        error_code=error,
        api_keys=tuple(
            make(m.ApiVersion, api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ranges.items())
        ),
        throttle_time=NO_THROTTLE,
    )


async def api_versions(b: ServedBroker, req: Request) -> Any:
    if req.body is None:
        return api_versions_response(0, ErrorCode.unsupported_version)
    return api_versions_response(req.version)


# -- Metadata ---------------------------------------------------------------------------------


async def metadata(b: ServedBroker, req: Request) -> Any:
    """Brokers with their advertised Kafka endpoints, and the topics asked for (all of them
    for a null list, or an empty one in v0) with leaders, replicas, ISR and offline replicas,
    from the controller's UpdateMetadata (and this broker's own leaderships, which are newer).
    Topics are never created by a Metadata request (auto topic creation is off): an unknown one
    is UNKNOWN_TOPIC_OR_PARTITION. A partition whose leader's replica is offline (a failed
    disk, KIP-112) answers KAFKA_STORAGE_ERROR, so a client refreshes instead of sending there.

    A topic named twice is answered once, as Kafka's ``handleTopicMetadataRequest`` answers the
    set of the names asked. Issue 36: only the topics asked for are read, topic by topic in
    slices of the loop (:class:`..loop_slice.LoopSlice`), and a large answer is encoded in a
    thread (:func:`_answer`): 100,000 names held the loop 5.7 s."""
    m = response_module(protocol.METADATA, req.version)
    endpoints = _kafka_endpoints(b)
    brokers = []
    for e in sorted(endpoints.values(), key=lambda e: e.broker_id):
        assert e.kafka_endpoint is not None
        host, port = wire.split_kafka_endpoint(e.kafka_endpoint)
        brokers.append(
            make(m.MetadataResponseBroker, node_id=e.broker_id, host=host, port=port, rack=e.rack)
        )
    unannounced = b.replicas.unannounced_leaderships()
    asked = req.body.topics
    names: list[str | None]
    if asked is None or (req.version == 0 and not asked):
        names = list(b.replicas.metadata_topic_names(unannounced))
    else:
        names = list(dict.fromkeys(t.name for t in asked))
    live = set(endpoints)
    topics = []
    sl = LoopSlice()
    for name in names:
        if sl.due():
            await sl.pause()
        topics.append(_topic_metadata(b, m, name, unannounced, live))
    response = make(
        m.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=tuple(brokers),
        cluster_id=b.config.cluster_id,
        # Kafka's controller is a broker; here it is the operator, which clients cannot
        # reach. Clients only need a live broker id (admin requests go there).
        controller_id=min(live) if live else -1,
        topics=tuple(topics),
    )
    return await _answer(response, len(topics))


def _kafka_endpoints(b: ServedBroker) -> dict[int, wire.BrokerEndpoint]:
    """The live brokers with a Kafka endpoint, by id: the controller's list, and this broker
    as it is now (its own endpoint is known before the controller's word)."""
    endpoints = {
        e.broker_id: e for e in b.replicas.brokers.values() if e.kafka_endpoint is not None
    }
    own = b.kafka_endpoint
    if own is not None:
        endpoints[b.config.broker_id] = wire.BrokerEndpoint(
            broker_id=b.config.broker_id,
            url=b.config.url,
            rack=b.config.broker_rack,
            kafka_endpoint=own,
        )
    return endpoints


def _topic_metadata(
    b: ServedBroker,
    m: Any,
    name: str | None,
    unannounced: dict[str, list[TopicPartition]],
    live: set[int],
) -> Any:
    parts: list[wire.PartitionMetadata] = []
    err = ErrorCode.none
    if name is None:
        err = ErrorCode.unknown_topic_id  # a topic ID alone: there are no topic IDs yet
    else:
        try:
            validate_topic(name)
        except KafkaError as e:
            err = error_code(e)
        if err == ErrorCode.none:
            parts = b.replicas.topic_metadata(name, unannounced)
            if not parts:
                err = ErrorCode.unknown_topic_or_partition
    return make(
        m.MetadataResponseTopic,
        error_code=err,
        name=name,
        topic_id=_topic_uuid(parts),
        is_internal=False,
        partitions=tuple(_partition_metadata(m, pm, live) for pm in parts),
    )


ENCODE_IN_THREAD_ENTRIES = 2_000
"""A response with more entries than this (topics of a Metadata answer, partitions of a
Fetch answer) is encoded in a thread: encoding costs about 3.5 µs an entry (100,000 topics
0.4-0.7 s), and the thread leaves the loop its turns (the GIL changes hands every
``sys.getswitchinterval()``, 5 ms) where encoding on the loop would hold it. Below, encoding
takes under 10 ms, and a thread's hand-over would cost the common small answer more than it
saves."""


async def _answer(response: Any, entries: int) -> Any:
    """``response`` as the listener is to send it: itself, or encoded in a thread when large
    (:data:`ENCODE_IN_THREAD_ENTRIES`)."""
    if entries <= ENCODE_IN_THREAD_ENTRIES:
        return response
    return await asyncio.to_thread(protocol.encode_body, response)


def _topic_uuid(parts: list[wire.PartitionMetadata]) -> uuid.UUID | None:
    """The topic's id (KIP-516) as the controller said; ``None`` (zero on the wire) before."""
    tid = next((pm.topic_id for pm in parts if pm.topic_id is not None), None)
    return None if tid is None else uuid.UUID(bytes=parse_topic_id(tid))


def _partition_metadata(m: Any, pm: wire.PartitionMetadata, live: set[int]) -> Any:
    if pm.leader in pm.offline_replicas:
        err = ErrorCode.kafka_storage_error
    elif pm.leader < 0 or pm.leader not in live:
        err = ErrorCode.leader_not_available
    else:
        err = ErrorCode.none
    return make(
        m.MetadataResponsePartition,
        error_code=err,
        partition_index=pm.partition,
        leader_id=pm.leader,
        leader_epoch=pm.leader_epoch,
        replica_nodes=tuple(pm.replicas),
        isr_nodes=tuple(pm.isr),
        offline_replicas=tuple(pm.offline_replicas),
    )


# -- Produce ----------------------------------------------------------------------------------


async def produce(b: ServedBroker, req: Request) -> Any:
    """Each partition's batches go to the replica manager's produce, all partitions at once
    (an acks=all wait on one does not hold up the others). A partition that fails gets its
    error code and message, the others are written. acks=0 is not answered, as in Kafka; if a
    partition failed, the connection is closed instead (:data:`CLOSE`), which is how Kafka
    tells an acks=0 producer that something went wrong."""
    body = req.body
    acks = int(body.acks)
    timeout_ms = max(0, int(body.timeout.total_seconds() * 1000))
    m = response_module(protocol.PRODUCE, req.version)

    transactional = body.transactional_id is not None or any(
        p.records is not None and any_transactional(p.records)
        for t in body.topic_data
        for p in t.partition_data
    )

    async def one(topic: str, part: Any) -> Any:
        code, message, info = ErrorCode.none, None, None
        try:
            if acks not in (-1, 0, 1):
                code = ErrorCode.invalid_required_acks
            elif transactional:
                # Kafka's KafkaApis: transactional records, or a transactional id, refuse the
                # whole request before any partition is appended (no coordinator here grants
                # a transactional id).
                code = ErrorCode.transactional_id_authorization_failed
                message = "transactions are not supported by this broker"
            elif part.records is None or len(part.records) == 0:
                code, message = ErrorCode.invalid_record, "a produce carries no record batch"
            else:
                validate_topic(topic)
                tp = TopicPartition(topic, int(part.index))
                info = await b.replicas.produce(tp, part.records, acks, timeout_ms)
        except KafkaError as e:
            code, message = error_code(e), str(e)
        return make(
            m.PartitionProduceResponse,
            index=part.index,
            error_code=code,
            base_offset=info.first_offset if info else -1,
            log_append_time=None,
            log_start_offset=info.log_start_offset if info else -1,
            record_errors=(),
            error_message=message,
        )

    jobs = [(t.name, [one(t.name, p) for p in t.partition_data]) for t in body.topic_data]
    flat = await asyncio.gather(*(j for _, js in jobs for j in js))
    if acks == 0:
        # Produce before v8 has no error_message field: its code's name says what failed.
        failed = [
            getattr(p, "error_message", None) or p.error_code.name.upper()
            for p in flat
            if p.error_code
        ]
        return Close(f"an acks=0 produce failed: {'; '.join(failed)}") if failed else None
    topics, i = [], 0
    for name, js in jobs:
        topics.append(
            make(
                m.TopicProduceResponse,
                name=name,
                partition_responses=tuple(flat[i : i + len(js)]),
            )
        )
        i += len(js)
    return make(m.ProduceResponse, responses=tuple(topics), throttle_time=NO_THROTTLE)


# -- Fetch ------------------------------------------------------------------------------------


async def fetch(b: ServedBroker, req: Request) -> Any:
    """A consumer's fetch, or a follower's (``replica_id`` >= 0: replication runs on Kafka's
    Fetch, as between Kafka's brokers). A consumer reads each partition through the replica
    manager up to the high watermark; a follower reads up to the log end, and its fetch offset
    updates its state on the leader (ISR, high watermark) with the leader throttle of a
    reassignment applied (:class:`..throttle.LeaderThrottle`); its records are ranges of segment
    files (``Log.read_slice``) that the listener sends from the file (zero-copy when large).
    Either within its ``partition_max_bytes`` and the response's ``max_bytes``, spent as the
    partitions are read (:class:`FetchBudget`), long-polling until ``min_bytes`` arrived or
    ``max_wait`` passed. Incremental fetch sessions (KIP-227) are declined the way Kafka
    allows: every response carries session ID 0, so the client sends full fetches; an
    incremental fetch of a session never granted is FETCH_SESSION_ID_NOT_FOUND. No
    transactions exist, so read_committed reads what read_uncommitted does (the last stable
    offset is the high watermark).

    Issue 36, a hostile Fetch: a partition named twice is served once, as Kafka does (its
    ``FetchRequest.fetchData`` puts the partitions into a ``LinkedHashMap``: one entry each, at
    the place of its first naming, with the last naming's offset and sizes), not refused: Kafka
    answers such a request, and a client that sends one gets what it would from Kafka. The
    per-partition work runs in slices of the loop (:class:`..loop_slice.LoopSlice`) rather
    than being refused beyond a count: Kafka names no limit and no error code for it, and
    after duplicates collapse each entry costs a few µs, so a request as large as
    ``socket.request.max.bytes`` allows is answered without holding the loop. A follower's
    response holds at most :data:`MAX_FETCH_SLICES` descriptors; a large answer is encoded in
    a thread (:func:`_answer`)."""
    body = req.body
    m = response_module(protocol.FETCH, req.version)
    session_id = int(getattr(body, "session_id", 0))
    session_epoch = int(getattr(body, "session_epoch", -1))
    if session_id != 0 and session_epoch not in (-1, 0):
        return make(
            m.FetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
        )
    replica_id = int(getattr(body, "replica_id", -1))
    sl = LoopSlice()
    wanted = await _unique_partitions(body.topics, sl)
    tps = list(wanted)
    max_wait_ms = min(max(int(body.max_wait.total_seconds() * 1000), 0), MAX_FETCH_WAIT_MS)
    deadline = time.monotonic() + max_wait_ms / 1000
    min_bytes = int(body.min_bytes)
    max_bytes = int(getattr(body, "max_bytes", 2**31 - 1))
    read_committed = int(getattr(body, "isolation_level", 0)) == READ_COMMITTED
    while True:
        results, total = await _read_round(b, replica_id, wanted, max_bytes, sl)
        remaining = deadline - time.monotonic()
        errors = any(r["error_code"] != ErrorCode.none for r in results)
        if total >= min_bytes or remaining <= 0 or errors:
            break
        _close_slices(results)
        await b.replicas.wait_for_any(tps, remaining, follower=replica_id >= 0)
    try:
        if replica_id >= 0:
            for tp, r in zip(tps, results, strict=True):
                sent = len(r["records"])
                b.leader_throttle.served(tp, r.pop(_REASSIGNMENT), sent, b.fetchers.traffic)
        by_topic: dict[str, list[Any]] = {}
        for tp, r in zip(tps, results, strict=True):
            if sl.due():
                await sl.pause()
            by_topic.setdefault(tp.topic, []).append(
                make(
                    m.PartitionData,
                    aborted_transactions=() if read_committed else None,
                    preferred_read_replica=-1,
                    **r,
                )
            )
        response = make(
            m.FetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            session_id=0,
            responses=tuple(
                make(m.FetchableTopicResponse, topic=t, partitions=tuple(ps))
                for t, ps in by_topic.items()
            ),
        )
        return await _answer(response, len(results))
    except BaseException:
        _close_slices(results)  # the listener never sees them: their descriptors end here
        raise


async def _unique_partitions(topics: Any, sl: LoopSlice) -> dict[TopicPartition, Any]:
    """The partitions a Fetch names, each once, as Kafka's ``LinkedHashMap``: a dict keeps a
    key at its first insertion and takes the last value put (see :func:`fetch`)."""
    wanted: dict[TopicPartition, Any] = {}
    for t in topics:
        if sl.due():
            await sl.pause()
        for p in t.partitions:
            wanted[TopicPartition(t.topic, int(p.partition))] = p
    return wanted


class FetchBudget:
    """A Fetch response's ``max_bytes``, spent as its partitions are read in request order,
    as Kafka's ``ReplicaManager.readFromLog``: each partition reads at most its own
    ``partition_max_bytes`` and what the response has left (:meth:`limit`); once that is
    nothing (:attr:`spent`) the rest are answered without records and not read at all. Before
    issue 36 every partition was read to its own maximum and the response trimmed afterwards:
    a Fetch naming t-0 2,048 times read 2 GB.

    The first batch goes whole however large while nothing is taken yet (:attr:`first`,
    KIP-74), so a consumer always progresses. After that a consumer gets whole batches within
    the limit only (Kafka's rule: a partition whose next batch is larger waits its turn at the
    front of the response, which consumers rotate, KIP-74). A follower's partition still gets
    its first batch whole when it :meth:`fits` what the response has left, as before: our
    followers do not rotate their partitions as Kafka's do, and a range costs no memory."""

    __slots__ = ("first", "left", "taken")

    def __init__(self, max_bytes: int) -> None:
        self.left = max(max_bytes, 0)
        self.first = True
        self.taken = 0

    @property
    def spent(self) -> bool:
        return self.left == 0 and not self.first

    def limit(self, partition_max_bytes: int) -> int:
        return max(min(partition_max_bytes, self.left), 0)

    def fits(self, size: int) -> bool:
        return self.first or size <= self.left

    def take(self, size: int) -> None:
        if size:
            self.first = False
            self.left = max(self.left - size, 0)
            self.taken += size


MAX_FETCH_SLICES = 256
"""File ranges one follower Fetch response holds, each with a duplicate descriptor until the
listener has sent it. Further ranges are read into the response at once (:func:`_held`; the
listener reads those under ``SENDFILE_MIN_BYTES`` anyway, and the budget bounds the bytes), so
a response never holds more descriptors than this, whatever it names (issue 36: 25,000 entries
ran the process out of descriptors)."""


async def _read_round(
    b: ServedBroker,
    replica_id: int,
    wanted: dict[TopicPartition, Any],
    max_bytes: int,
    sl: LoopSlice,
) -> tuple[list[dict[str, Any]], int]:
    """One read of every partition wanted within the response's budget (:class:`FetchBudget`),
    in slices of the loop; the results in request order, and the bytes they carry."""
    budget = FetchBudget(max_bytes)
    results: list[dict[str, Any]] = []
    held = 0
    try:
        for tp, p in wanted.items():
            if sl.due():
                await sl.pause()
            if replica_id < 0:
                r = _fetch_one(b, tp, p, budget)
            else:
                r = _follower_fetch_one(b, replica_id, tp, p, budget)
                if isinstance(r["records"], FileSlice) and r["records"]:
                    held += 1
                    if held > MAX_FETCH_SLICES:
                        r["records"] = _held(r["records"])
            results.append(r)
    except BaseException:
        _close_slices(results)
        raise
    return results, budget.taken


def _held(records: FileSlice) -> bytes:
    """A range's bytes, read now and its descriptor closed (:data:`MAX_FETCH_SLICES`). A range
    the file no longer holds whole (truncated under it since it was found) ends the request as
    the listener ends its send then: the connection closes and the follower reconnects."""
    try:
        data = os.pread(records.fd, records.size, records.position)
    finally:
        records.close()
    if len(data) != records.size:
        raise protocol.ProtocolError(
            f"a file range of {records.size} bytes gave {len(data)} (truncated under the read)"
        )
    return data


_REASSIGNMENT = "_reassignment"
"""A follower's partition result carries whether it is reassignment traffic (popped before
the response entity is built)."""


def _fetch_one(b: ServedBroker, tp: TopicPartition, p: Any, budget: FetchBudget) -> dict[str, Any]:
    try:
        validate_topic(tp.topic)
        res = b.replicas.read_for_consumer(
            tp,
            int(p.fetch_offset),
            budget.limit(int(p.partition_max_bytes)),
            int(getattr(p, "current_leader_epoch", -1)),
            min_one=budget.first,
        )
    except KafkaError as e:
        return _fetch_error(b, tp, p, e)
    budget.take(len(res.data))
    return _fetched(p, res)


def _follower_fetch_one(
    b: ServedBroker, replica_id: int, tp: TopicPartition, p: Any, budget: FetchBudget
) -> dict[str, Any]:
    reassignment = b.leader_throttle.reassignment(tp, b.replicas.in_isr(tp, replica_id))
    try:
        if tp not in b.replicas.partitions:
            # A hosted partition's name was valid when it was created: only an unknown one
            # is checked (INVALID_TOPIC_EXCEPTION before UNKNOWN_TOPIC_OR_PARTITION), not
            # every partition of every round.
            validate_topic(tp.topic)
        res = b.replicas.fetch_for_follower(
            replica_id,
            tp,
            int(p.fetch_offset),
            int(getattr(p, "current_leader_epoch", -1)),
            budget.limit(int(p.partition_max_bytes)),
            b.leader_throttle.holds_back(reassignment) or budget.spent,
        )
    except KafkaError as e:
        r = _fetch_error(b, tp, p, e)
    else:
        r = _fetched(p, res)
        size = res.records.size
        if budget.fits(size):
            budget.take(size)
        else:  # the first batch whole would overrun the response: next round
            res.records.close()
            r["records"] = EMPTY_SLICE
    r[_REASSIGNMENT] = reassignment
    return r


def _fetched(p: Any, res: ReadResult | SliceResult) -> dict[str, Any]:
    return {
        "partition_index": p.partition,
        "error_code": ErrorCode.none,
        "high_watermark": res.high_watermark,
        "last_stable_offset": res.high_watermark,
        "log_start_offset": res.log_start_offset,
        "records": res.data if isinstance(res, ReadResult) else res.records,
    }


def _close_slices(results: list[dict[str, Any]]) -> None:
    """Give back the descriptors of file ranges that will not be sent (a follower's records
    dropped by the response's ``max_bytes``, or read before a long poll that reads again)."""
    for r in results:
        if isinstance(r["records"], FileSlice):
            r["records"].close()


def _fetch_error(b: ServedBroker, tp: TopicPartition, p: Any, e: KafkaError) -> dict[str, Any]:
    """A partition's error, with the high watermark and log start offset where this broker
    hosts it (OFFSET_OUT_OF_RANGE tells a follower where the leader's log starts now)."""
    lg = b.logs.get_log(tp) if tp in b.replicas.partitions else None
    hw = lg.high_watermark if lg is not None else -1
    return {
        "partition_index": p.partition,
        "records": b"",
        "error_code": error_code(e),
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": lg.log_start_offset if lg is not None else -1,
    }


# -- ListOffsets ------------------------------------------------------------------------------


TIMESTAMP_MIN_VERSION: dict[int, int] = {
    EARLIEST_TIMESTAMP: 1,
    LATEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
}
"""ListOffsets' special (negative) timestamps and the first version that may ask for each, as
Kafka's ReplicaManager holds them: any other negative timestamp, or one asked for at an older
version, is UNSUPPORTED_VERSION for its partition (not an error of the broker)."""


async def list_offsets(b: ServedBroker, req: Request) -> Any:
    """Earliest (-2, and earliest-local -4: nothing is tiered), latest (-1: the high
    watermark, what a consumer may read), max timestamp (-3, KIP-734) and by timestamp through
    the time index; latest-tiered (-5) has no tiered data to name (offset -1). Only the leader
    answers, at the caller's leader epoch, as for a fetch. Kafka's refusals, per partition: a
    partition named twice in the request is INVALID_REQUEST (each time it is named), a
    special timestamp this version cannot ask for is UNSUPPORTED_VERSION
    (:data:`TIMESTAMP_MIN_VERSION`)."""
    m = response_module(protocol.LIST_OFFSETS, req.version)
    named = Counter((t.name, int(p.partition_index)) for t in req.body.topics for p in t.partitions)
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            tp = TopicPartition(t.name, int(p.partition_index))
            code, ts, off, epoch = ErrorCode.none, -1, -1, -1
            spec = int(p.timestamp)
            if named[(t.name, tp.partition)] > 1:
                code = ErrorCode.invalid_request
            elif spec < 0 and req.version < TIMESTAMP_MIN_VERSION.get(spec, sys.maxsize):
                code = ErrorCode.unsupported_version
            else:
                try:
                    validate_topic(t.name)
                    ts, off, epoch = _offset_for(
                        b, tp, spec, int(getattr(p, "current_leader_epoch", -1))
                    )
                except KafkaError as e:
                    code = error_code(e)
            parts.append(
                make(
                    m.ListOffsetsPartitionResponse,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=ts,
                    offset=off,
                    leader_epoch=epoch,
                )
            )
        topics.append(make(m.ListOffsetsTopicResponse, name=t.name, partitions=tuple(parts)))
    return make(m.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _offset_for(b: ServedBroker, tp: TopicPartition, spec: int, epoch: int) -> tuple[int, int, int]:
    """``(timestamp, offset, leader epoch)`` for one ListOffsets partition; ``spec`` is a
    timestamp or one of :data:`TIMESTAMP_MIN_VERSION`'s."""
    p = b.replicas.leader_partition(tp)
    b.replicas.check_leader_epoch(p, epoch)
    lg = b.replicas.log_of(p)
    hw = lg.high_watermark
    if spec in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return -1, lg.log_start_offset, p.leader_epoch
    if spec == LATEST_TIMESTAMP:
        b.replicas.check_offsets_available(p, lg)
        return -1, hw, p.leader_epoch
    if spec == LATEST_TIERED_TIMESTAMP:
        return -1, -1, -1
    found = (
        lg.max_timestamp_offset(hw) if spec == MAX_TIMESTAMP else lg.offset_for_timestamp(spec, hw)
    )
    if found is None:
        # Nothing at or below the HW; while the HW lags a new epoch's start, what was asked
        # for may lie in between (Kafka: OFFSET_NOT_AVAILABLE rather than "none").
        b.replicas.check_offsets_available(p, lg)
        return -1, -1, -1
    ts, off = found
    return ts, off, lg.epochs.epoch_for_offset(off)


# -- InitProducerId ---------------------------------------------------------------------------


async def init_producer_id(b: ServedBroker, req: Request) -> Any:
    """An idempotent producer's id, at epoch 0, from the broker's block of the cluster's ids
    (``producer_ids``); a producer asking again with its old id gets a new one, as Kafka
    answers an idempotent producer. Without a block (no controller reachable):
    COORDINATOR_LOAD_IN_PROGRESS, which clients retry. A transactional id is refused: there
    are no transactions."""
    m = response_module(protocol.INIT_PRODUCER_ID, req.version)
    code, pid, epoch = ErrorCode.none, -1, -1
    if req.body.transactional_id is not None:
        code = ErrorCode.transactional_id_authorization_failed
    else:
        try:
            pid, epoch = await b.producer_ids.init_producer_id()
        except KafkaError as e:
            code = error_code(e)
    return make(
        m.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=pid,
        producer_epoch=epoch,
    )


# -- OffsetForLeaderEpoch ---------------------------------------------------------------------


async def offset_for_leader_epoch(b: ServedBroker, req: Request) -> Any:
    """The end offset of a leader epoch, answered by the leader (KIP-101, KIP-320), to a
    follower about to truncate (``replica_id`` its broker id) and to a consumer alike: Kafka
    answers both from the leader's log, so ``replica_id`` changes nothing here either."""
    m = response_module(protocol.OFFSET_FOR_LEADER_EPOCH, req.version)
    topics = []
    for t in req.body.topics:
        parts = []
        for p in t.partitions:
            try:
                validate_topic(t.topic)
                epoch, end = b.replicas.epoch_end_offset(
                    TopicPartition(t.topic, int(p.partition)),
                    max(int(p.current_leader_epoch), -1),
                    max(int(p.leader_epoch), -1),
                )
                code = ErrorCode.none
            except KafkaError as e:
                code, epoch, end = error_code(e), -1, -1
            parts.append(
                make(
                    m.EpochEndOffset,
                    error_code=code,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end,
                )
            )
        topics.append(make(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(parts)))
    return make(m.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLERS: dict[int, Handler] = {
    protocol.PRODUCE: produce,
    protocol.FETCH: fetch,
    protocol.LIST_OFFSETS: list_offsets,
    protocol.METADATA: metadata,
    protocol.API_VERSIONS: api_versions,
    protocol.INIT_PRODUCER_ID: init_producer_id,
    protocol.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
}
"""One handler per key of :data:`.protocol.SUPPORTED` (a unit test holds them equal)."""
