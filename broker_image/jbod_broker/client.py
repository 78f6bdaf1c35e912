"""Typed async client of the broker API, built on the same wire models as the server.

Used by the operator, the CLI and the tests. Errors come back as the same
exception classes the broker raised (rebuilt from the Kafka error name in the body), so callers
handle ``NotLeaderOrFollowerError`` and friends whatever side of the wire they are on.
"""

from __future__ import annotations

import io
from types import TracebackType
from typing import TypeVar

import aiohttp

from . import wire
from .errors import KafkaError, error_by_name

M = TypeVar("M", bound=wire.Model)
_STREAM_BODY = 256 * 1024
"""Bodies above this go to aiohttp as a stream (it warns about, and blocks on, big raw bytes)."""

ADMIN = "/v1/admin"
CONTROLLER = "/v1/controller"
DATA = "/v1/data"
CONTROLLER_S_PER_PARTITION = 0.01
"""A controller request's time allowance per partition it names: creating a new replica's
log (its directory, segment files, the epoch checkpoint's fsyncs) took about 3.5 ms per
partition on a 2-core machine under load (issue 36: 5,000 in 17.6-21.9 s); three times that."""


class BrokerUnavailableError(KafkaError):
    """The broker could not be reached at all (connection refused, timeout)."""

    kafka_error = "BROKER_NOT_AVAILABLE"


class BrokerClient:
    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._own_session = session is None
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def __aenter__(self) -> BrokerClient:
        return self

    async def __aexit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        h: dict[str, str] = {}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if content_type:
            h["Content-Type"] = content_type
        return h

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | None = None,
        content_type: str | None = None,
        params: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        url = self.base_url + path
        timeout = aiohttp.ClientTimeout(total=timeout_s) if timeout_s else None
        try:
            async with self.session.request(
                method,
                url,
                # A large body as a stream: aiohttp would write raw bytes in one go on the loop.
                data=io.BytesIO(body) if body is not None and len(body) > _STREAM_BODY else body,
                params=params,
                headers=self._headers(content_type),
                timeout=timeout,
            ) as resp:
                data = await resp.read()
                headers = {k: v for k, v in resp.headers.items()}
                if resp.status >= 400:
                    raise self._error(resp.status, data)
                return resp.status, data, headers
        except (aiohttp.ClientError, TimeoutError) as e:
            raise BrokerUnavailableError(f"{method} {url}: {type(e).__name__}: {e}") from e

    @staticmethod
    def _error(status: int, data: bytes) -> KafkaError:
        try:
            body = wire.ErrorBody.model_validate_json(data)
        except ValueError:
            return KafkaError(f"HTTP {status}: {data[:200]!r}")
        err = error_by_name(body.error, body.message)
        err.http_status = status  # type: ignore[attr-defined]
        return err

    async def _json(
        self, path: str, req: wire.Model | None, out: type[M], *, timeout_s: float | None = None
    ) -> M:
        body = req.model_dump_json().encode() if req is not None else b"{}"
        _, data, _ = await self._request(
            "POST", path, body=body, content_type="application/json", timeout_s=timeout_s
        )
        return out.model_validate_json(data)

    # -- admin ----------------------------------------------------------------------------

    async def describe_log_dirs(
        self, topics: list[str] | None = None, log_dirs: list[str] | None = None
    ) -> wire.DescribeLogDirsResponse:
        return await self._json(
            ADMIN + "/describe-log-dirs",
            wire.DescribeLogDirsRequest(topics=topics, log_dirs=log_dirs),
            wire.DescribeLogDirsResponse,
        )

    async def alter_replica_log_dirs(
        self, moves: list[tuple[str, int, str]]
    ) -> wire.AlterReplicaLogDirsResponse:
        """One result per move, in order; over ``wire.MAX_ALTER_LOG_DIRS`` moves go in several
        requests, one after the other (a broker serves each inside its heartbeat interval)."""
        results: list[wire.PartitionResult] = []
        step = wire.MAX_ALTER_LOG_DIRS
        for i in range(0, max(len(moves), 1), step):
            req = wire.AlterReplicaLogDirsRequest(
                partitions=[
                    wire.AlterReplicaLogDir(topic=t, partition=p, log_dir=d)
                    for t, p, d in moves[i : i + step]
                ]
            )
            resp = await self._json(
                ADMIN + "/alter-replica-log-dirs", req, wire.AlterReplicaLogDirsResponse
            )
            results += resp.partitions
        return wire.AlterReplicaLogDirsResponse(partitions=results)

    async def describe_replica_log_dirs(
        self, replicas: list[tuple[str, int]] | None = None, *, wait_ms: int = 0
    ) -> wire.DescribeReplicaLogDirsResponse:
        """The moves of ``replicas``; ``wait_ms`` long-polls until one of them ends."""
        req = wire.DescribeReplicaLogDirsRequest(
            partitions=None
            if replicas is None
            else [wire.ReplicaRef(topic=t, partition=p) for t, p in replicas],
            wait_ms=wait_ms,
        )
        return await self._json(
            ADMIN + "/describe-replica-log-dirs",
            req,
            wire.DescribeReplicaLogDirsResponse,
            timeout_s=wait_ms / 1000 + 30,
        )

    async def set_configs(self, cfg: wire.ThrottleConfig) -> wire.ThrottleConfig:
        return await self._json(ADMIN + "/configs", cfg, wire.ThrottleConfig)

    async def get_configs(self) -> wire.ThrottleConfig:
        """The throttles in force (rates and throttled replicas), changing nothing."""
        _, data, _ = await self._request("GET", ADMIN + "/configs")
        return wire.ThrottleConfig.model_validate_json(data)

    async def cordon_log_dir(self, log_dir: str, cordoned: bool) -> None:
        await self._request(
            "POST",
            ADMIN + "/cordon-log-dir",
            body=wire.CordonLogDirRequest(log_dir=log_dir, cordoned=cordoned)
            .model_dump_json()
            .encode(),
            content_type="application/json",
        )

    # -- controller -----------------------------------------------------------------------

    def controller_timeout_s(self, partitions: int) -> float:
        """How long a controller request naming ``partitions`` may take: the client's timeout
        plus :data:`CONTROLLER_S_PER_PARTITION` for each. The broker serves such a request in
        slices beside its other work (issue 36), creating or deleting each new replica's log
        off the loop, so a Topic of thousands of partitions takes seconds to tens of seconds;
        a fixed timeout gave up on the answer (and the errors in it) while the broker went on
        applying it."""
        return (self._timeout.total or 0.0) + partitions * CONTROLLER_S_PER_PARTITION

    async def leader_and_isr(self, req: wire.LeaderAndIsrRequest) -> wire.LeaderAndIsrResponse:
        return await self._json(
            CONTROLLER + "/leader-and-isr",
            req,
            wire.LeaderAndIsrResponse,
            timeout_s=self.controller_timeout_s(len(req.partitions)),
        )

    async def stop_replica(self, req: wire.StopReplicaRequest) -> wire.StopReplicaResponse:
        return await self._json(
            CONTROLLER + "/stop-replica",
            req,
            wire.StopReplicaResponse,
            timeout_s=self.controller_timeout_s(len(req.partitions)),
        )

    async def update_metadata(self, req: wire.UpdateMetadataRequest) -> None:
        await self.update_metadata_body(req.model_dump_json().encode())

    async def update_metadata_body(self, body: bytes) -> bool:
        """UpdateMetadata already encoded (an ``UpdateMetadataRequest`` as JSON): a controller
        sending one request to many brokers encodes it once. True once the broker took it."""
        await self._request(
            "POST", CONTROLLER + "/update-metadata", body=body, content_type="application/json"
        )
        return True

    # -- data -----------------------------------------------------------------------------

    async def produce(
        self, topic: str, partition: int, batches: bytes, *, acks: int = -1, timeout_ms: int = 30000
    ) -> wire.ProduceResponse | None:
        status, data, _ = await self._request(
            "POST",
            DATA + "/produce",
            body=batches,
            content_type="application/octet-stream",
            params={
                "topic": topic,
                "partition": str(partition),
                "acks": str(acks),
                "timeout_ms": str(timeout_ms),
            },
            timeout_s=timeout_ms / 1000 + 10,
        )
        if status == 204:
            return None
        return wire.ProduceResponse.model_validate_json(data)

    async def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
    ) -> tuple[bytes, int]:
        """Records from ``offset`` (whole batches) and the high watermark."""
        _, data, headers = await self._request(
            "GET",
            DATA + "/fetch",
            params={
                "topic": topic,
                "partition": str(partition),
                "offset": str(offset),
                "max_bytes": str(max_bytes),
                "max_wait_ms": str(max_wait_ms),
            },
            timeout_s=max_wait_ms / 1000 + 30,
        )
        return data, int(headers.get("X-High-Watermark", "-1"))

    async def list_offsets(self, topic: str, partition: int, spec: str) -> wire.ListOffsetsResponse:
        _, data, _ = await self._request(
            "GET",
            DATA + "/list-offsets",
            params={"topic": topic, "partition": str(partition), "timestamp": spec},
        )
        return wire.ListOffsetsResponse.model_validate_json(data)

    async def metadata(self) -> wire.MetadataResponse:
        _, data, _ = await self._request("GET", DATA + "/metadata")
        return wire.MetadataResponse.model_validate_json(data)

    async def health(self, path: str = "/readyz") -> bool:
        try:
            await self._request("GET", path, timeout_s=2)
            return True
        except KafkaError:
            return False
