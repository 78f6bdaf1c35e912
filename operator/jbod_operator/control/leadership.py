"""One active operator at a time, by a Lease; the controller epoch rides on it.

kopf's peering is not used: with equal priorities every replica freezes, and a dead leader is
noticed only after its 60 s lifetime. Here the Lease is renewed every few seconds; a standby
takes over once the holder has not renewed for ``lease_seconds``. Each takeover increments the
controller epoch kept in the Lease's annotation, in the same atomic update (resourceVersion), so
two operators can never act with the same epoch, and brokers refuse the older one (KIP-112
scenario 6: a stale controller is fenced).

A holder that could not renew in time considers itself deposed *before* the Lease expires for
the others (it stops acting ``margin_seconds`` early), so there is no moment with two actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ..clients.kube import LEASES, ApiError, KubeClient

log = logging.getLogger(__name__)

EPOCH_ANNOTATION = "jbod.io/controller-epoch"


def _micro_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(ts: str | None) -> float:
    if not ts:
        return 0.0
    ts = ts.replace("Z", "+00:00")
    return dt.datetime.fromisoformat(ts).timestamp()


class LeaseElector:
    def __init__(
        self,
        kube: KubeClient,
        namespace: str,
        name: str = "jbod-operator-leader",
        *,
        identity: str | None = None,
        lease_seconds: float = 15.0,
        renew_seconds: float = 3.0,
        margin_seconds: float = 3.0,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds
        self.margin_seconds = margin_seconds
        self.epoch = 0
        self._held_until = 0.0  # monotonic
        self._task: asyncio.Task[None] | None = None
        self.on_elected: Callable[[int], Awaitable[None]] | None = None
        self.on_deposed: Callable[[], Awaitable[None]] | None = None
        self._was_leader = False

    @property
    def is_leader(self) -> bool:
        return time.monotonic() < self._held_until

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, *, release: bool = True) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if release and self.is_leader:
            try:
                lease = await self.kube.get(LEASES, self.namespace, self.name)
                if lease and lease["spec"].get("holderIdentity") == self.identity:
                    lease["spec"]["renewTime"] = "1970-01-01T00:00:00.000000Z"
                    await self.kube.replace(LEASES, self.namespace, lease)
            except ApiError:
                pass
        self._held_until = 0.0

    async def _run(self) -> None:
        while True:
            try:
                await self.try_acquire_or_renew()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("lease check failed", extra={"event": "lease_error", "error": str(e)})
            await self._transitions()
            await asyncio.sleep(self.renew_seconds)

    async def _transitions(self) -> None:
        leader = self.is_leader
        if leader and not self._was_leader:
            self._was_leader = True
            log.warning(
                "became the active operator",
                extra={"event": "leader_elected", "identity": self.identity, "epoch": self.epoch},
            )
            if self.on_elected is not None:
                await self.on_elected(self.epoch)
        elif not leader and self._was_leader:
            self._was_leader = False
            log.warning("no longer the active operator", extra={"event": "leader_deposed"})
            if self.on_deposed is not None:
                await self.on_deposed()

    async def step_down(self) -> None:
        """A broker refused our epoch: someone else is controller. Stop acting now."""
        self._held_until = 0.0
        await self._transitions()

    async def try_acquire_or_renew(self) -> bool:
        started = time.monotonic()
        lease = await self.kube.get(LEASES, self.namespace, self.name)
        spec: dict[str, Any]
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "annotations": {EPOCH_ANNOTATION: "1"},
                },
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": int(self.lease_seconds),
                    "acquireTime": _micro_now(),
                    "renewTime": _micro_now(),
                    "leaseTransitions": 0,
                },
            }
            try:
                await self.kube.create(LEASES, self.namespace, body)
            except ApiError as e:
                if e.status == 409:
                    return False
                raise
            self.epoch = 1
            self._held_until = started + self.lease_seconds - self.margin_seconds
            return True
        spec = lease.setdefault("spec", {})
        annotations = lease["metadata"].setdefault("annotations", {})
        current_epoch = int(annotations.get(EPOCH_ANNOTATION, "0"))
        holder = spec.get("holderIdentity")
        expired = time.time() - _parse(spec.get("renewTime")) > float(
            spec.get("leaseDurationSeconds", self.lease_seconds)
        )
        if holder == self.identity and self.epoch == current_epoch:
            spec["renewTime"] = _micro_now()
        elif expired or not holder:
            spec["holderIdentity"] = self.identity
            spec["acquireTime"] = spec["renewTime"] = _micro_now()
            spec["leaseDurationSeconds"] = int(self.lease_seconds)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions", 0)) + 1
            annotations[EPOCH_ANNOTATION] = str(current_epoch + 1)
        else:
            self._held_until = 0.0
            return False
        try:
            await self.kube.replace(LEASES, self.namespace, lease)
        except ApiError as e:
            if e.status == 409:
                self._held_until = 0.0
                return False
            raise
        self.epoch = int(annotations[EPOCH_ANNOTATION])
        self._held_until = started + self.lease_seconds - self.margin_seconds
        return True
