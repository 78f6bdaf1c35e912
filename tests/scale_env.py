"""The controller at scale (issue 39): operators behind a counting API proxy, stub brokers.

One harness for ``bench/controller_scale.py`` and ``tests/integration/test_controller_scale.py``:
the real API server, one or two operator processes (the Lease picks the active one) reaching it
through :class:`tests.api_proxy.ApiProxy`, and a BrokerCluster whose brokers are
:mod:`tests.stub_brokers` (optionally beside real broker processes holding the first ids).
Every phase waits for a condition seen at the stubs or in the API server, never a fixed time,
and returns its figures.
"""

from __future__ import annotations

import functools
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from jbod_broker.local import LocalCluster
from jbod_operator.models.partition_shard import TOPIC_UID_LABEL
from jbod_operator.plan import partition_shards
from jbod_operator.tools.localkube import Kube, KubeCluster, OperatorProcess
from tests.api_proxy import ApiProxy
from tests.stub_brokers import StubBrokers, vm_hwm_kib
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[1]
CLUSTER = "scale"
DIRS = ["a", "b"]


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds so far (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timeline(events: list[tuple[float, int, str, int]], t0: float) -> dict[str, Any]:
    """Per API: requests, bytes, and the first and last of them (seconds after ``t0``)."""
    out: dict[str, dict[str, Any]] = {}
    for at, _b, api, n in events:
        e = out.setdefault(api, {"requests": 0, "bytes": 0, "first_s": at - t0})
        e["requests"] += 1
        e["bytes"] += n
        e["last_s"] = at - t0
    for e in out.values():
        e["first_s"], e["last_s"] = round(e["first_s"], 2), round(e["last_s"], 2)
    return out


def _answers(url: str) -> bool:
    """Whether ``url`` answers HTTP at all (a standby's 503 counts)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def write_span(writes: list[tuple[float, str, int]], t0: float) -> dict[str, Any]:
    """Per written resource: writes, bytes, first and last (seconds after ``t0``)."""
    out: dict[str, dict[str, Any]] = {}
    for at, key, n in writes:
        e = out.setdefault(key, {"writes": 0, "bytes": 0, "first_s": round(at - t0, 2)})
        e["writes"] += 1
        e["bytes"] += n
        e["last_s"] = round(at - t0, 2)
    return out


def stalls(slow: list[tuple[float, float]]) -> dict[str, Any]:
    """The operator's loop stalls seen in heartbeat round trips: the longest, and the time
    heartbeats spent waiting in total over the stubs."""
    return {
        "slow_heartbeats": len(slow),
        "longest_s": round(max((t for _, t in slow), default=0.0), 2),
    }


def leaders_of(state: dict[str, Any], broker: int) -> int:
    return int(state["leaders"].get(str(broker), 0))


def stub_bytes(state: dict[str, Any]) -> int:
    """Bytes the controller sent every stub so far (request bodies, all APIs)."""
    return sum(sum(b["bytes_in"].values()) for b in state["brokers"].values())


def told_at(state: dict[str, Any], epoch: int) -> int:
    """Partition replicas whose latest LeaderAndIsr at the stubs came from controller
    ``epoch`` (live stubs only)."""
    return sum(
        int(b["told_by_controller_epoch"].get(str(epoch), 0))
        for b in state["brokers"].values()
        if b["alive"]
    )


class ScaleEnv:
    """The processes of one scale run, and its phases."""

    def __init__(
        self,
        kc: KubeCluster,
        workdir: Path,
        namespace: str,
        *,
        brokers: int = 50,
        operators: int = 2,
        real_brokers: int = 0,
        operator_env: dict[str, str] | None = None,
        late_standby: bool = False,
    ) -> None:
        self.kc, self.work, self.ns = kc, workdir, namespace
        self.size, self.real = brokers, real_brokers
        self.kube = Kube(kc, namespace)
        self.proxy = ApiProxy(str(kc.kubeconfig), str(workdir))
        env = {"JBOD_OPERATOR_LEASE_NAMESPACE": namespace, **(operator_env or {})}
        self.op_env = env
        endpoints = str(workdir / "broker-endpoints.json")
        self.ops = [
            OperatorProcess(
                kc, namespace, str(workdir), name=f"operator-{i}", endpoints_file=endpoints
            )
            for i in range(operators)
        ]
        self.stubs: StubBrokers | None = None
        self.local: LocalCluster | None = None
        self.real_started = False
        self.late_standby = late_standby
        """Start the standby operators only for the takeover (:meth:`start_standby`): a
        standby running beside an active operator whose loop is held past the Lease takes the
        Lease over and over (seen at 100k partitions), and nothing else gets done."""
        self.replicas = 0
        """Partition replicas created so far (what the stubs and real brokers must be told)."""

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> ScaleEnv:
        self.kc.kubectl("apply", "-f", str(REPO / "crds"), check=True)
        self.kc.wait_established()
        self.kc.kubectl("create", "namespace", self.ns, check=False)
        self.proxy.start()
        for op in self.ops:
            op.extra_env = {**self.op_env, "KUBECONFIG": self.proxy.kubeconfig}
        self.ops[0].start()
        wait_for(lambda: self.active() is not None, what="an operator to take the Lease")
        if not self.late_standby:
            self.start_standby()
        self.kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "BrokerCluster",
                "metadata": {"name": CLUSTER},
                "spec": {
                    "replicas": self.size,
                    "logDirs": [{"name": d, "size": "1Ti"} for d in DIRS],
                },
            }
        )
        token = wait_for(
            lambda: self.kube.secret_value(f"{CLUSTER}-broker-token", "token"),
            what="the brokers' token Secret",
            timeout=120,
        )
        urls = ",".join(op.cluster_url(CLUSTER) for op in self.ops)
        endpoints: dict[str, str] = {}
        if self.real:
            self.local = LocalCluster(
                str(self.work / "brokers"),
                size=self.real,
                controller_url=urls,
                token=token,
                dir_names=DIRS,
            )
            endpoints.update(self.local.endpoints())
        self.stubs = StubBrokers(
            str(self.work),
            count=self.size - self.real,
            first_id=self.real,
            controller_url=urls,
            token=token,
        )
        endpoints.update(self.stubs.start())
        self.ops[0].set_endpoints(CLUSTER, endpoints)
        self.stubs.beat()
        wait_for(lambda: self._all_heartbeating(), what="every stub heartbeating", timeout=60)
        return self

    def start_standby(self) -> None:
        """Start the other operators and wait until each answers as a standby."""
        for op in self.ops[1:]:
            if op.proc is None:
                op.start()
        for op in self.ops[1:]:
            url = op.url + "/readyz"
            wait_for(functools.partial(_answers, url), what="the standby to serve")

    def start_real(self) -> None:
        """Start the real broker processes (ids below ``real_brokers``): apart from
        :meth:`start`, so a Topic created before is placed on the stubs alone (placement
        uses the brokers that answer)."""
        assert self.local is not None
        self.local.start()
        self.real_started = True

    def _all_heartbeating(self) -> bool:
        return all(b["heartbeats"] > 1 for b in self.state()["brokers"].values())

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()
        for op in self.ops:
            op.stop()
        if self.stubs is not None:
            self.stubs.stop()
        self.proxy.stop()

    def __enter__(self) -> ScaleEnv:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- observation -----------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        assert self.stubs is not None
        return self.stubs.state()

    def active(self) -> OperatorProcess | None:
        """The operator whose ``/readyz`` says active (the Lease holder)."""
        for op in self.ops:
            if op.proc is None or op.proc.poll() is not None:
                continue
            try:
                # A held loop answers late: 10 s, the brokers' own heartbeat timeout.
                with urllib.request.urlopen(op.url + "/readyz", timeout=10) as resp:
                    if resp.status == 200:
                        return op
            except (urllib.error.URLError, OSError):
                continue
        return None

    def controller_epoch(self) -> int:
        lease = self.kube.get("lease", "jbod-operator-leader") or {}
        return int(
            lease.get("metadata", {}).get("annotations", {}).get("jbod.io/controller-epoch", 0)
        )

    def _api_list(self, resource: str, query: str = "") -> list[dict[str, Any]]:
        """One list straight from the API server (kubectl's JSON printing of 100,000
        partitions' shards took over a minute on a loaded machine)."""
        path = f"/apis/jbod.io/v1alpha1/namespaces/{self.ns}/{resource}{query}"
        status, body = self.kc.api_get(path, timeout=300)
        assert status == 200, (status, body[:300])
        return list(json.loads(body)["items"])

    def shards(self, topic_uid: str | None = None) -> list[dict[str, Any]]:
        q = f"?labelSelector={TOPIC_UID_LABEL}%3D{topic_uid}" if topic_uid else ""
        return self._api_list("partitionshards", q)

    def topic(self, name: str) -> dict[str, Any]:
        """Topic ``name`` with its state of record joined from its shards, as the operator
        reads it (``plan.partition_shards.join``)."""
        t = next(t for t in self._api_list("topics") if t["metadata"]["name"] == name)
        return partition_shards.join(t, self.shards(t["metadata"]["uid"]))

    # -- phases ----------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, rf: int = 3, timeout: float = 600
    ) -> dict[str, Any]:
        """Apply a Topic; time until Ready True and every stub told its replicas."""
        before = self.proxy.stats()
        t0 = time.monotonic()
        self.kube.apply(
            {
                "apiVersion": "jbod.io/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": name},
                "spec": {
                    "clusterName": CLUSTER,
                    "partitions": partitions,
                    "replicationFactor": rf,
                    "minInsyncReplicas": min(2, rf),
                },
            }
        )
        self.replicas += partitions * rf
        ready = wait_for(
            lambda: self._ready(name), what=f"Topic {name} Ready", timeout=timeout, interval=0.5
        )
        ready_s = time.monotonic() - t0
        expected = self.replicas - self._real_replicas()
        wait_for(
            lambda: sum(b["told"] for b in self.state()["brokers"].values()) >= expected,
            what=lambda: f"every stub told its partitions ({expected} replicas)",
            timeout=timeout,
            interval=0.5,
        )
        told_s = time.monotonic() - t0
        assert self.stubs is not None
        return {
            "partitions": partitions,
            "ready_s": round(ready_s, 2),
            "ready_and_told_s": round(told_s, 2),
            "ready_at": ready,
            "sent": timeline(self.stubs.events(t0), t0),
            "heartbeat_stalls": stalls(self.stubs.slow_heartbeats(t0)),
            "api_writes": write_span(self.proxy.writes(t0), t0),
            "api": diff(self.proxy.stats(), before),
        }

    def _real_replicas(self) -> int:
        """Replicas placed on the real brokers (ids below ``self.real``): not at the stubs."""
        if not self.real_started:
            return 0
        return sum(
            1
            for t in partition_shards.join_all(
                self._api_list("topics"), self._api_list("partitionshards")
            )
            for s in t["status"]["partitions"]
            for r in s["replicas"]
            if int(r["brokerId"]) < self.real
        )

    def _ready(self, name: str) -> str | None:
        c = self.kube.condition("topic", name, "Ready")
        return str(c.get("lastTransitionTime")) if c and c["status"] == "True" else None

    def steady_pass(self, passes: int = 2, timeout: float = 600) -> dict[str, Any]:
        """The periodic full pass in steady state, between ``passes + 1`` of its ends (each
        ends with describe-log-dirs to every live broker: the stray check): its interval
        (max(5 s, 10 x its own duration)), the operator's CPU per pass, what each pass sent
        the brokers and wrote to the API server."""
        op = self.active()
        assert op is not None and op.proc is not None
        probe = str(self.real)  # the first stub
        seen = len(self.state()["brokers"][probe]["described_at"])
        wait_for(
            lambda: len(self.state()["brokers"][probe]["described_at"]) > seen,
            what="a periodic pass to end",
            timeout=timeout,
        )
        s0, a0, c0 = self.state(), self.proxy.stats(), cpu_s(op.proc.pid)
        n0 = len(s0["brokers"][probe]["described_at"])
        wait_for(
            lambda: len(self.state()["brokers"][probe]["described_at"]) >= n0 + passes,
            what=f"{passes} more periodic passes",
            timeout=timeout,
        )
        s1, a1, c1 = self.state(), self.proxy.stats(), cpu_s(op.proc.pid)
        assert self.stubs is not None
        sent = timeline(self.stubs.events(s0["now"]), s0["now"])
        times = s1["brokers"][probe]["described_at"]
        interval = (times[-1] - times[-1 - passes]) / passes
        api = diff(a1, a0)
        return {
            "interval_s": round(interval, 2),
            "operator_cpu_s_per_pass": round((c1 - c0) / passes, 3),
            "bytes_to_brokers_per_pass": (stub_bytes(s1) - stub_bytes(s0)) // passes,
            "api_bytes_written_per_pass": api["bytes_written"] // passes,
            "api_bytes_read_per_pass": api["bytes_read"] // passes,
            "api_requests_per_pass": round(api["requests"] / passes, 1),
            "sent_by_api": sent,
            "heartbeat_stalls": stalls(self.stubs.slow_heartbeats(s0["now"])),
            "api_by_resource": api["by_resource"],
        }

    def broker_failover(self, victim: int, timeout: float = 300) -> dict[str, Any]:
        """Kill stub ``victim``; time until every partition it led has a new leader at the
        stubs (the highest leader epoch any stub was told names another broker)."""
        assert self.stubs is not None
        self.settled(timeout)
        led = leaders_of(self.state(), victim)
        assert led > 0, f"broker {victim} leads nothing: no failover to time"
        a0 = self.proxy.stats()
        killed = self.stubs.kill(victim)
        st = wait_for(
            lambda: s if leaders_of(s := self.state(), victim) == 0 else None,
            what=lambda: f"new leaders for broker {victim}'s partitions",
            timeout=timeout,
            interval=0.2,
        )
        done = float(st["leaders_changed_at"])
        return {
            "broker": victim,
            "partitions_led": led,
            "elected_s": round(done - killed, 2),
            "sent": timeline(self.stubs.events(killed), killed),
            "heartbeat_stalls": stalls(self.stubs.slow_heartbeats(killed)),
            "api_writes": write_span(self.proxy.writes(killed), killed),
            "api": diff(self.proxy.stats(), a0),
        }

    def leaderless(self) -> int:
        """Partitions whose state of record has no leader (``leader: -1``)."""
        joined = partition_shards.join_all(
            self._api_list("topics"), self._api_list("partitionshards")
        )
        return sum(1 for t in joined for p in t["status"]["partitions"] if p["leader"] == -1)

    def settled(self, timeout: float) -> int:
        """Wait until every partition has a leader, in the state of record and at the stubs
        (none at -1): a phase timed from an offline start would time the recovery. Once seen
        (after 100k partitions were created, the controller wrote leader -1 with every live
        replica offline), the stubs alone did not show it: they had not been told yet."""

        def led() -> bool:
            return not leaders_of(self.state(), -1) and not self.leaderless()

        wait_for(
            led,
            what=lambda: f"every partition led ({self.leaderless()} leaderless of record)",
            timeout=timeout,
            interval=5.0,
        )
        return 0

    def takeover(self, timeout: float = 600) -> dict[str, Any]:
        """SIGKILL the active operator; time until the standby is active and its controller
        (a new epoch) has sent every live stub the LeaderAndIsr of all its replicas."""
        self.start_standby()
        op = wait_for(self.active, what="the active operator to answer", timeout=120)
        epoch = self.controller_epoch()
        expected = told_at(self.state(), epoch)
        a0 = self.proxy.stats()
        t0 = time.monotonic()
        op.kill()
        assert self.stubs is not None
        nxt = wait_for(self.active, what="the standby to become active", timeout=timeout)
        active_s = time.monotonic() - t0
        new_epoch = wait_for(
            lambda: (e := self.controller_epoch()) > epoch and e, what="a new controller epoch"
        )
        wait_for(
            lambda: told_at(self.state(), new_epoch) >= expected,
            what=lambda: f"every stub told its state by epoch {new_epoch}",
            timeout=timeout,
            interval=0.5,
        )
        told_s = time.monotonic() - t0
        assert nxt.proc is not None
        return {
            "active_s": round(active_s, 2),
            "resumed_s": round(told_s, 2),
            "replicas_resent": expected,
            "controller_epoch_before": epoch,
            "controller_epoch_after": new_epoch,
            "standby_vm_hwm_mib": round(vm_hwm_kib(nxt.proc.pid) / 1024, 1),
            "sent": timeline(self.stubs.events(t0), t0),
            "heartbeat_stalls": stalls(self.stubs.slow_heartbeats(t0)),
            "api_writes": write_span(self.proxy.writes(t0), t0),
            "api": diff(self.proxy.stats(), a0),
        }

    def operator_hwm_mib(self) -> float:
        op = wait_for(self.active, what="the active operator to answer", timeout=120)
        assert op.proc is not None
        return round(vm_hwm_kib(op.proc.pid) / 1024, 1)


def diff(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What the API server was asked between two proxy readings."""

    def total(s: dict[str, Any], key: str) -> int:
        return sum(int(v) for v in s[key].values())

    return {
        "requests": total(after, "requests") - total(before, "requests"),
        "writes": after["writes"] - before["writes"],
        "bytes_written": after["bytes_written"] - before["bytes_written"],
        "bytes_read": total(after, "bytes_in") - total(before, "bytes_in"),
        "largest_write": after["largest_write"],
        "by_resource": {
            k: {
                "requests": n - before["requests"].get(k, 0),
                "bytes_out": after["bytes_out"].get(k, 0) - before["bytes_out"].get(k, 0),
                "bytes_in": after["bytes_in"].get(k, 0) - before["bytes_in"].get(k, 0),
            }
            for k, n in after["requests"].items()
            if n > before["requests"].get(k, 0)
        },
    }
