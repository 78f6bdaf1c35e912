"""A whole cluster for one e2e scenario: the real API server, the operator process(es), a
BrokerCluster whose brokers run as local processes, and helpers to read the state of record.

Everything talks over the same interfaces as in Kubernetes: kubectl for the resources, the
operator's controller endpoint for the brokers, the brokers' HTTP API for clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster
from jbod_broker.storage.names import TopicPartition
from tests import waiting
from tests.kube_cluster import KubeCluster
from tests.operator_harness import Kube, OperatorProcess, start_local_brokers, wait_for

REPO = Path(__file__).resolve().parents[1]

FAST_BROKER = {
    "replica.lag.time.max.ms": "3000",
    "replica.high.watermark.checkpoint.interval.ms": "300",
    "log.flush.scheduler.interval.ms": "1000",
    "broker.heartbeat.interval.ms": "500",
}


class Scenario:
    def __init__(
        self,
        kube_cluster: KubeCluster,
        workdir: Path,
        namespace: str,
        *,
        brokers: int = 3,
        dirs: tuple[str, ...] = ("a", "b"),
        dir_size: str = "1Gi",
        operators: int = 1,
        operator_env: dict[str, str] | None = None,
        broker_settings: dict[str, str] | None = None,
    ) -> None:
        self.kc = kube_cluster
        self.work = workdir
        self.ns = namespace
        self.size = brokers
        self.dirs = list(dirs)
        self.dir_size = dir_size
        self.kube = Kube(kube_cluster, namespace)
        env = {"JBOD_OPERATOR_LEASE_NAMESPACE": namespace, **(operator_env or {})}
        endpoints = str(workdir / "broker-endpoints.json")
        self.ops = [
            OperatorProcess(
                kube_cluster,
                namespace,
                str(workdir),
                name=f"operator-{i}",
                endpoints_file=endpoints,
                env=env,
            )
            for i in range(operators)
        ]
        self.broker_settings = {**FAST_BROKER, **(broker_settings or {})}
        self.brokers: LocalCluster | None = None
        self._clients: dict[tuple[int, int], BrokerClient] = {}

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Scenario:
        self.kc.kubectl("apply", "-f", str(REPO / "crds"), check=True)
        self.kc.wait_established()
        self.kc.kubectl("create", "namespace", self.ns, check=False)
        self.ops[0].start()
        wait_for(lambda: self.lease_holder(), what="the first operator to take the Lease")
        for op in self.ops[1:]:
            op.start()
        self.kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "BrokerCluster",
                "metadata": {"name": "kip"},
                "spec": {
                    "replicas": self.size,
                    "logDirs": [{"name": d, "size": self.dir_size} for d in self.dirs],
                },
            }
        )
        wait_for(lambda: self.kube.get("statefulset", "kip-broker"), what="the StatefulSet")
        self.brokers = start_local_brokers(
            self.ops[0],
            self.kube,
            "kip",
            str(self.work / "brokers"),
            size=self.size,
            dir_names=self.dirs,
            settings=self.broker_settings,
            standby=self.ops[1:],
        )
        wait_for(
            lambda: (
                (c := self.kube.condition("brokercluster", "kip", "Ready"))
                and c["status"] == "True"
            ),
            what="BrokerCluster Ready",
        )
        return self

    def stop(self) -> None:
        for root, dirnames, _ in os.walk(self.work):
            for d in dirnames:
                p = os.path.join(root, d)
                if os.stat(p).st_mode & 0o777 == 0:
                    os.chmod(p, 0o755)
        if self.brokers is not None:
            self.brokers.stop()
        for op in self.ops:
            op.stop()

    def __enter__(self) -> Scenario:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        last = getattr(self, "last_status", None)
        if last is not None:
            print("--- last LogDirMove status\n" + dump(last))
        self.stop()
        for op in self.ops:
            print(f"--- {op.log_path}\n{op.tail(25)}")

    # -- state of record ------------------------------------------------------------------

    def lease(self) -> dict[str, Any] | None:
        return self.kube.get("lease", "jbod-operator-leader")

    def lease_holder(self) -> str | None:
        lease = self.lease() or {}
        return (lease.get("spec") or {}).get("holderIdentity")

    def controller_epoch(self) -> int:
        lease = self.lease() or {}
        return int(lease["metadata"].get("annotations", {}).get("jbod.io/controller-epoch", 0))

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        return self.kube.partitions(topic)

    def state(self, tp: TopicPartition) -> dict[str, Any]:
        return next(p for p in self.partitions(tp.topic) if p["partition"] == tp.partition)

    def leader(self, tp: TopicPartition) -> int:
        return int(self.state(tp)["leader"])

    def replica_dir(self, tp: TopicPartition, broker: int) -> str:
        st = self.state(tp)
        return next(r["logDir"] for r in st["replicas"] if r["brokerId"] == broker)

    def create_topic(
        self, name: str, *, partitions: int = 1, rf: int = 3, min_isr: int = 2
    ) -> list[TopicPartition]:
        self.kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": name},
                "spec": {
                    "clusterName": "kip",
                    "partitions": partitions,
                    "replicationFactor": rf,
                    "minInsyncReplicas": min_isr,
                },
            }
        )
        wait_for(
            lambda: (c := self.kube.condition("topic", name, "Ready")) and c["status"] == "True",
            what=f"Topic {name} Ready",
        )
        return [TopicPartition(name, p) for p in range(partitions)]

    # -- clients --------------------------------------------------------------------------

    def client(self, broker: int) -> BrokerClient:
        assert self.brokers is not None
        key = (id(asyncio.get_running_loop()), broker)
        c = self._clients.get(key)
        if c is None:
            c = BrokerClient(self.brokers[broker].url, token=self.brokers.token, timeout_s=10)
            self._clients[key] = c
        return c

    async def close_clients(self) -> None:
        for c in self._clients.values():
            await c.close()
        self._clients.clear()


class LeaderTracker:
    """Follows each partition's leader from the Topic status, polled in the background."""

    def __init__(self, sc: Scenario, tps: list[TopicPartition]) -> None:
        self.sc = sc
        self.tps = tps
        self.leaders: dict[TopicPartition, int] = {tp: sc.leader(tp) for tp in tps}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            for topic in {tp.topic for tp in self.tps}:
                try:
                    parts = await asyncio.to_thread(self.sc.partitions, topic)
                except Exception:
                    continue
                for p in parts:
                    tp = TopicPartition(topic, p["partition"])
                    if tp in self.leaders and p["leader"] >= 0:
                        self.leaders[tp] = p["leader"]
            await asyncio.sleep(0.2)

    def __call__(self, tp: TopicPartition) -> BrokerClient:
        return self.sc.client(self.leaders[tp])


async def wait_async(
    fn: Any,
    timeout: float = 60,
    what: str = "condition",
    fail_fast: type[BaseException] | tuple[type[BaseException], ...] = (),
    *,
    interval: float = 0.25,
) -> Any:
    """:func:`tests.waiting.wait_async` as scenarios need it: ``fn`` (kubectl, a broker) runs
    off the loop, and an exception it raises counts as not yet (a read can fail while a broker
    restarts), except one of ``fail_fast``: that says the condition can no longer come, and is
    raised at once."""
    return await waiting.wait_async(
        fn,
        what,
        timeout,
        interval=interval,
        retry=Exception,
        fail_fast=fail_fast,
        in_thread=True,
    )


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)[:3000]
