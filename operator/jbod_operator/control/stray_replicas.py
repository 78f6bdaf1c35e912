"""Stray replicas of one BrokerCluster: found, deleted and reported by its controller.

A replica a broker holds that the partition state of record does not place on it
(``plan.strays``, Kafka's KRaft rule) is deleted with StopReplica, confirmed by
describe-log-dirs, posted as an Event, and the ones not deleted yet (or left on a broker that
is down) listed in the BrokerCluster's ``status.strayReplicas``. Run by the controller, under
its lock, after a probe's LeaderAndIsr (split from ``cluster_controller``, issue 39).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from jbod_broker import wire
from jbod_broker.errors import StaleControllerEpochError

from ..clients.kube import BROKER_CLUSTERS, EVENTS, REASSIGNMENTS, ApiError, KubeClient
from ..models.common import API_VERSION, StrayReplica
from ..plan import strays

if TYPE_CHECKING:
    from .cluster_controller import ClusterController

log = logging.getLogger(__name__)


async def post_cluster_event(
    kube: KubeClient, ns: str, cluster: str, reason: str, message: str, type_: str = "Warning"
) -> None:
    """A Kubernetes Event on the BrokerCluster (what the controller does outside a handler,
    where kopf's events are not at hand); one that cannot be posted is only logged."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{cluster}.{uuid.uuid4().hex[:12]}", "namespace": ns},
        "involvedObject": {
            "apiVersion": API_VERSION,
            "kind": "BrokerCluster",
            "name": cluster,
            "namespace": ns,
        },
        "reason": reason,
        "message": message[:1000],
        "type": type_,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "source": {"component": "jbod-operator"},
    }
    try:
        await kube.create(EVENTS, ns, body)
    except ApiError as e:
        log.warning("could not post event", extra={"error": str(e)})


class StrayReplicas:
    def __init__(self, ctrl: ClusterController) -> None:
        self.ctrl = ctrl
        self.checked: dict[int, float] = {}
        """Broker → the wall time its last stray check read its dirs (this controller's)."""
        self.left: dict[int, list[StrayReplica]] = {}
        """Broker → the strays its last check found and could not delete."""
        self.reported: list[StrayReplica] | None = None
        """The BrokerCluster's ``status.strayReplicas`` as this controller last wrote it."""

    async def check(self, probed: set[int]) -> None:
        """:meth:`delete_strays`, whose failure (the API server, a status edited by hand)
        waits for the next probe: the pass it ends has done its work (liveness is recorded
        after it)."""
        try:
            await self.delete(probed)
        except (asyncio.CancelledError, StaleControllerEpochError):
            raise
        except Exception:
            log.exception("stray check failed", extra={"cluster": self.ctrl.name})

    async def delete(self, probed: set[int]) -> None:
        """Delete the stray replicas of the brokers just probed (``plan.strays``) and report
        the ones left in the BrokerCluster's status. Run under the lock, after the probe's
        LeaderAndIsr: no reassignment step or partition creation (both write the state of
        record, then tell the brokers, under this lock) runs between the read of the dirs
        and the deletion. The dirs are read first and the Topics after them, so a replica
        created since a Topic was read is never taken for a stray."""
        if not probed:
            return
        at = time.time()
        seen = await self.ctrl.pool.describe(self.ctrl.namespace, self.ctrl.name, sorted(probed))
        # Listed again, not from memory: a shard another process made since the watch last
        # spoke must not make its replicas look like strays.
        topics = await self.ctrl.store.topics(self.ctrl.namespace, self.ctrl.name, fresh=True)
        records = strays.record_index(topics)
        for b, dirs in sorted(seen.items()):
            if dirs is None:
                continue  # not answering: checked when it does
            await asyncio.sleep(0)  # heartbeats between brokers: each holds its thousands
            found = strays.find_strays(b, dirs, records)
            left = await self._delete_on(b, found) if found else []
            self.left[b] = [s.report() for s in left]
            self.checked[b] = at
        await self._report(topics)

    async def _delete_on(self, b: int, found: list[strays.Stray]) -> list[strays.Stray]:
        """StopReplica(delete) for ``found`` on ``b``; returns those describe-log-dirs still
        lists after it. No leader epoch: a stray is judged by the state of record, and an
        older topic's replica of the same name may carry a higher epoch than the new one."""
        parts = [
            wire.StopReplicaPartition(topic=s.topic, partition=s.partition, delete=True)
            for s in found
        ]
        if await self.ctrl.commands.stop_replica(b, parts, "stray_replica_delete") is None:
            return found
        after = await self.ctrl.pool.describe(self.ctrl.namespace, self.ctrl.name, [b])
        left = strays.still_there(found, after[b])
        gone = [s for s in found if s not in left]
        for s in gone:
            log.warning(
                "stray replica deleted",
                extra={
                    "event": "stray_replica_deleted",
                    "broker": b,
                    "topic": s.topic,
                    "partition": s.partition,
                    "log_dir": s.log_dir,
                },
            )
        for s in left:
            log.warning(
                "stray replica still there after its deletion",
                extra={
                    "event": "stray_replica_left",
                    "broker": b,
                    "topic": s.topic,
                    "partition": s.partition,
                    "log_dir": s.log_dir,
                },
            )
        if gone:
            await post_cluster_event(
                self.ctrl.kube,
                self.ctrl.namespace,
                self.ctrl.name,
                "StrayReplicaDeleted",
                f"broker {b}: deleted {len(gone)} replica(s) the partitions' state of record "
                "does not place on it: " + ", ".join(str(s) for s in gone),
                type_="Normal",
            )
        return left

    async def _report(self, topics: list[dict[str, Any]]) -> None:
        """``status.strayReplicas`` of the BrokerCluster, written when it changes: the
        replicas reassignments left on brokers not checked since, and those not deleted."""
        left = [
            StrayReplica.model_validate(s)
            for o in await self.ctrl.kube.list(REASSIGNMENTS, self.ctrl.namespace)
            if (o.get("spec") or {}).get("clusterName") == self.ctrl.name
            for s in (o.get("status") or {}).get("strayReplicas") or ()
        ]
        now = strays.pending(
            left,
            [s for ss in self.left.values() for s in ss],
            self.checked,
            self.ctrl.broker_count(
                [t for t in topics if (t.get("status") or {}).get("partitions")]
            ),
        )
        if now == self.reported:
            return
        try:
            await self.ctrl.kube.patch_status(
                BROKER_CLUSTERS,
                self.ctrl.namespace,
                self.ctrl.name,
                {"strayReplicas": [s.dump() for s in now]},
            )
        except ApiError as e:
            log.warning("stray replicas not reported", extra={"error": str(e)})
            return
        self.reported = now
