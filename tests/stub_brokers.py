"""Many simulated brokers in one asyncio process, for the controller's scale (issue 39).

The controller's side is what issue 39 measures: a real broker per simulated one would spend
the machine on logs nobody reads. Each stub serves the controller side of the broker HTTP API
(``jbod_broker.server``'s routes the operator calls) on its own port, answers success without
storing data, heartbeats to the operator's controller endpoint as ``controller_channel`` does
(bearer token, the next address on a standby's 503), and RECORDS, per partition, the latest
(leader, leaderEpoch, controllerEpoch) it was told with a ``time.monotonic()`` stamp (the
system-wide clock, so a test in another process compares it with its own).

Memory is bounded for 200,000 partitions x RF 3: per topic and broker four ``array`` columns
(16 bytes a partition), and the counts a waiter asks for (leaders per broker, per controller
epoch) kept incrementally, so ``/stub/state`` costs nothing at any size.

Run as ``python -m tests.stub_brokers --count 50 --controller-url URL[,URL] --token T
--endpoints-out FILE --control-out FILE``; :class:`StubBrokers` does that for tests and
benches and reads ``/stub/state``; ``/stub/kill?id=N`` stops a broker's heartbeats and closes
its listener (connections refused), ``/stub/revive?id=N`` starts it again with a new
incarnation (a restarted process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from array import array
from collections import Counter, deque
from typing import Any

import aiohttp
from aiohttp import web

HEARTBEAT = "/v1/controller/heartbeat"
SLOW_HEARTBEAT_S = 0.5
ROOM = 1 << 44
"""Each simulated dir's capacity (16 TiB): room is never what a scale run measures."""


class Column:
    """One topic's records at one broker (or the cluster's best view): leader, leader epoch,
    controller epoch and time, indexed by partition, grown on demand."""

    __slots__ = ("at", "ctrl", "epoch", "leader")

    def __init__(self) -> None:
        self.leader, self.epoch, self.ctrl = array("i"), array("i"), array("i")
        self.at = array("d")

    def grow(self, p: int) -> None:
        n = p + 1 - len(self.leader)
        if n > 0:
            self.leader.extend([-2] * n)  # -2: never told
            self.epoch.extend([-1] * n)
            self.ctrl.extend([-1] * n)
            self.at.extend([0.0] * n)


class Cluster:
    """What every stub was told, with the counts kept as records change."""

    def __init__(self) -> None:
        self.told: dict[int, dict[str, Column]] = {}
        self.best: dict[str, Column] = {}
        """The highest leader epoch any live-or-dead stub was told, per partition."""
        self.leads: dict[int, Counter[int]] = {}
        """Broker -> controller epoch -> partitions its own latest record says it leads."""
        self.best_leaders: Counter[int] = Counter()
        self.best_changed_at = 0.0
        self.told_counts: Counter[int] = Counter()
        self.told_by_epoch: dict[int, Counter[int]] = {}
        """Broker -> controller epoch -> partitions whose latest record came from that epoch."""

    def record(self, b: int, ce: int, parts: list[dict[str, Any]], now: float) -> None:
        mine = self.told.setdefault(b, {})
        leads = self.leads.setdefault(b, Counter())
        told = self.told_by_epoch.setdefault(b, Counter())
        for s in parts:
            t, p, leader, epoch = s["topic"], s["partition"], s["leader"], s["leader_epoch"]
            col = mine.get(t) or mine.setdefault(t, Column())
            col.grow(p)
            old = col.leader[p]
            if old == -2:
                self.told_counts[b] += 1
            else:
                told[col.ctrl[p]] -= 1
                if old == b:
                    leads[col.ctrl[p]] -= 1
            told[ce] += 1
            if leader == b:
                leads[ce] += 1
            col.leader[p], col.epoch[p], col.ctrl[p], col.at[p] = leader, epoch, ce, now
            self._best(t, p, leader, epoch, ce, now)

    def _best(self, t: str, p: int, leader: int, epoch: int, ce: int, now: float) -> None:
        col = self.best.get(t) or self.best.setdefault(t, Column())
        col.grow(p)
        if (epoch, ce) <= (col.epoch[p], col.ctrl[p]):
            return
        if col.leader[p] != leader:
            if col.leader[p] != -2:
                self.best_leaders[col.leader[p]] -= 1
            self.best_leaders[leader] += 1
            self.best_changed_at = now
        col.leader[p], col.epoch[p], col.ctrl[p], col.at[p] = leader, epoch, ce, now


class Stub:
    """One simulated broker: its listener, its heartbeats, its counters."""

    def __init__(self, owner: StubFleet, broker_id: int, port: int) -> None:
        self.owner, self.id, self.port = owner, broker_id, port
        self.runner: web.AppRunner | None = None
        self.beat: asyncio.Task[None] | None = None
        self.incarnation = uuid.uuid4().hex
        self.alive = False
        self.bytes_in: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.last_at: dict[str, float] = {}
        self.described_at: deque[float] = deque(maxlen=64)
        """When describe-log-dirs came (the controller's periodic pass ends with one)."""
        self.heartbeats = 0
        self.configs: dict[str, Any] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        r = app.router
        for path in ("/healthz", "/readyz"):
            r.add_get(path, self._ok)
        r.add_post("/v1/controller/leader-and-isr", self._leader_and_isr)
        r.add_post("/v1/controller/stop-replica", self._results)
        r.add_post("/v1/controller/update-metadata", self._update_metadata)
        r.add_post("/v1/admin/describe-log-dirs", self._describe_log_dirs)
        r.add_post("/v1/admin/alter-replica-log-dirs", self._results)
        r.add_post("/v1/admin/describe-replica-log-dirs", self._no_moves)
        r.add_post("/v1/admin/cordon-log-dir", self._ok)
        r.add_post("/v1/admin/configs", self._set_configs)
        r.add_get("/v1/admin/configs", self._get_configs)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()
        self.alive = True
        if self.owner.beating:
            self.beat = asyncio.get_running_loop().create_task(self._heartbeats())

    async def kill(self) -> None:
        """Stop heartbeating and refuse connections, as a SIGKILLed broker's port does."""
        self.alive = False
        if self.beat is not None:
            self.beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.beat
            self.beat = None
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    async def revive(self) -> None:
        self.incarnation = uuid.uuid4().hex
        await self.start()

    async def _count(self, request: web.Request) -> bytes:
        body = await request.read()
        api = request.path.rsplit("/", 1)[-1]
        self.bytes_in[api] += len(body)  # the body: what a pass costs the wire
        self.requests[api] += 1
        self.last_at[api] = now = time.monotonic()
        self.owner.events.append((now, self.id, api, len(body)))
        if request.headers.get("Authorization") != f"Bearer {self.owner.token}":
            raise web.HTTPUnauthorized(reason="missing or wrong bearer token")
        return body

    async def _ok(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            await self._count(request)
        return web.json_response({"status": "ok"})

    async def _leader_and_isr(self, request: web.Request) -> web.Response:
        req = json.loads(await self._count(request))
        parts = req["partitions"]
        self.owner.cluster.record(self.id, req["controller_epoch"], parts, time.monotonic())
        return self._answer(parts)

    async def _results(self, request: web.Request) -> web.Response:
        return self._answer(json.loads(await self._count(request))["partitions"])

    @staticmethod
    def _answer(parts: list[dict[str, Any]]) -> web.Response:
        body = json.dumps(
            {"partitions": [{"topic": s["topic"], "partition": s["partition"]} for s in parts]}
        )
        return web.Response(body=body, content_type="application/json")

    async def _update_metadata(self, request: web.Request) -> web.Response:
        await self._count(request)
        return web.json_response({})

    async def _no_moves(self, request: web.Request) -> web.Response:
        await self._count(request)
        return web.json_response({"partitions": []})

    async def _describe_log_dirs(self, request: web.Request) -> web.Response:
        await self._count(request)
        self.described_at.append(time.monotonic())
        dirs: list[dict[str, Any]] = [
            {
                "path": f"/stub/broker-{self.id}/data-{d}",
                "is_live": True,
                "error": None,
                "total_bytes": ROOM,
                "usable_bytes": ROOM,
                "cordoned": False,
                "partitions": [],
            }
            for d in self.owner.dir_names
        ]
        return web.json_response({"broker_id": self.id, "log_dirs": dirs})

    async def _set_configs(self, request: web.Request) -> web.Response:
        body = json.loads(await self._count(request))
        self.configs.update({k: v for k, v in body.items() if v is not None})
        return web.json_response(self.configs)

    async def _get_configs(self, request: web.Request) -> web.Response:
        await self._count(request)
        return web.json_response(self.configs)

    async def _heartbeats(self) -> None:
        """As ``ControllerChannel._heartbeats``: every interval, to the active controller."""
        body = {"broker_id": self.id, "offline_log_dirs": [], "incarnation": self.incarnation}
        while True:
            await self.owner.heartbeat(body)
            self.heartbeats += 1
            await asyncio.sleep(self.owner.heartbeat_s)

    def state(self) -> dict[str, Any]:
        leads = self.owner.cluster.leads.get(self.id, Counter())
        told = self.owner.cluster.told_by_epoch.get(self.id, Counter())
        return {
            "told_by_controller_epoch": {str(k): v for k, v in told.items() if v},
            "described_at": list(self.described_at),
            "alive": self.alive,
            "told": self.owner.cluster.told_counts[self.id],
            "leads_by_controller_epoch": {str(k): v for k, v in leads.items() if v},
            "last_request_at": self.last_at,
            "bytes_in": dict(self.bytes_in),
            "requests": dict(self.requests),
            "heartbeats": self.heartbeats,
        }


class StubFleet:
    """The stubs of one BrokerCluster, their shared record and the control endpoint."""

    def __init__(self, urls: list[str], token: str, dir_names: list[str], hb_s: float) -> None:
        self.urls, self.token, self.dir_names, self.heartbeat_s = urls, token, dir_names, hb_s
        self.cluster = Cluster()
        self.stubs: dict[int, Stub] = {}
        self.current = 0
        self.session: aiohttp.ClientSession | None = None
        self.slow_heartbeats: deque[tuple[float, float]] = deque(maxlen=10_000)
        """(sent at, round trip) of every heartbeat answered after :data:`SLOW_HEARTBEAT_S`."""
        self.beating = False
        self.events: deque[tuple[float, int, str, int]] = deque(maxlen=100_000)
        """(time, broker, API, body bytes) of every request: a phase's timeline."""

    async def heartbeat(self, body: dict[str, Any]) -> None:
        """One heartbeat; a standby's 503 (or no answer) moves every stub to the next address."""
        assert self.session is not None
        headers = {"Authorization": f"Bearer {self.token}"}
        for _ in self.urls:
            url = self.urls[self.current % len(self.urls)] + HEARTBEAT
            sent = time.monotonic()
            try:
                async with self.session.post(url, json=body, headers=headers) as resp:
                    await resp.read()
                    if resp.status < 400:
                        self._answered(sent)
                        return
            except TimeoutError:
                self._answered(sent)  # held past the client's timeout: the longest stalls
            except aiohttp.ClientError:
                pass
            self.current += 1

    def _answered(self, sent: float) -> None:
        """A heartbeat's round trip: one over :data:`SLOW_HEARTBEAT_S` means the operator's
        loop was held (the controller's pass, a big write) while brokers waited on it."""
        took = time.monotonic() - sent
        if took > SLOW_HEARTBEAT_S:
            self.slow_heartbeats.append((round(sent, 3), round(took, 3)))

    def state(self) -> dict[str, Any]:
        c = self.cluster
        return {
            "now": time.monotonic(),
            "brokers": {str(b): s.state() for b, s in self.stubs.items()},
            "leaders": {str(b): n for b, n in c.best_leaders.items() if n},
            "partitions": sum(c.best_leaders.values()),
            "leaders_changed_at": c.best_changed_at,
            "vm_hwm_kib": vm_hwm_kib(os.getpid()),
        }

    async def control(self, request: web.Request) -> web.Response:
        what = request.match_info["what"]
        if what == "state":
            return web.json_response(self.state())
        if what == "beat":
            self.beating = True
            for stub in self.stubs.values():
                if stub.alive and stub.beat is None:
                    stub.beat = asyncio.get_running_loop().create_task(stub._heartbeats())
            return web.json_response({"at": time.monotonic()})
        if what == "slow-heartbeats":
            since = float(request.query.get("since", "0"))
            return web.json_response([h for h in self.slow_heartbeats if h[0] >= since])
        if what == "events":
            since = float(request.query.get("since", "0"))
            return web.json_response([e for e in self.events if e[0] >= since])
        stub = self.stubs[int(request.query["id"])]
        if what == "kill" and stub.alive:
            await stub.kill()
        elif what == "revive" and not stub.alive:
            await stub.revive()
        return web.json_response({"at": time.monotonic(), "alive": stub.alive})


def vm_hwm_kib(pid: int) -> int:
    """A process's peak resident set (``VmHWM`` in ``/proc/<pid>/status``), in KiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def free_ports(n: int) -> list[int]:
    """``n`` distinct free loopback ports (held open together so none repeats)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _write_json(path: str, data: object) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


async def serve(args: argparse.Namespace) -> None:
    urls = [u.strip().rstrip("/") for u in args.controller_url.split(",") if u.strip()]
    fleet = StubFleet(urls, args.token, args.dir_names.split(","), args.heartbeat_ms / 1000)
    # The real channel's timeout (ControllerChannel: 10 s), so a held operator loop shows as
    # a heartbeat's round trip up to that long.
    fleet.session = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=10), connector=aiohttp.TCPConnector(limit=0)
    )
    ids = range(args.first_id, args.first_id + args.count)
    ports = free_ports(len(ids) + 1)
    for b, port in zip(ids, ports, strict=False):
        fleet.stubs[b] = Stub(fleet, b, port)
        await fleet.stubs[b].start()
    app = web.Application()
    app.router.add_get("/stub/{what}", fleet.control)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", ports[-1]).start()
    _write_json(args.endpoints_out, {str(b): s.url for b, s in fleet.stubs.items()})
    _write_json(args.control_out, {"url": f"http://127.0.0.1:{ports[-1]}", "pid": os.getpid()})
    await asyncio.Event().wait()


class StubBrokers:
    """``python -m tests.stub_brokers`` as a child process, and its control endpoint."""

    def __init__(
        self, workdir: str, *, count: int, controller_url: str, token: str, first_id: int = 0
    ) -> None:
        self.endpoints_out = os.path.join(workdir, "stub-endpoints.json")
        self.control_out = os.path.join(workdir, "stub-control.json")
        self.log_path = os.path.join(workdir, "stub-brokers.log")
        self.cmd = [
            sys.executable,
            "-m",
            "tests.stub_brokers",
            *("--count", str(count), "--first-id", str(first_id)),
            *("--controller-url", controller_url, "--token", token),
            *("--endpoints-out", self.endpoints_out, "--control-out", self.control_out),
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> dict[str, str]:
        """Start the process; the brokers' URLs once every one listens."""
        from tests.waiting import wait_for

        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=log)
        wait_for(lambda: os.path.exists(self.control_out), what="the stub brokers to listen")
        with open(self.control_out, encoding="utf-8") as f:
            self.url = json.load(f)["url"]
        with open(self.endpoints_out, encoding="utf-8") as f:
            out: dict[str, str] = json.load(f)
        return out

    def _get(self, what: str, **query: int) -> dict[str, Any]:
        q = "&".join(f"{k}={v}" for k, v in query.items())
        with urllib.request.urlopen(f"{self.url}/stub/{what}?{q}", timeout=30) as resp:
            out: dict[str, Any] = json.loads(resp.read())
        return out

    def state(self) -> dict[str, Any]:
        return self._get("state")

    def beat(self) -> None:
        """Start heartbeating (after the operator has the brokers' URLs)."""
        self._get("beat")

    def slow_heartbeats(self, since: float) -> list[tuple[float, float]]:
        """(sent at, round trip) of heartbeats answered slowly since ``since``."""
        with urllib.request.urlopen(f"{self.url}/stub/slow-heartbeats?since={since}") as resp:
            return [(float(a), float(b)) for a, b in json.loads(resp.read())]

    def events(self, since: float) -> list[tuple[float, int, str, int]]:
        """Every request since ``since`` (monotonic): (time, broker, API, body bytes)."""
        q = f"since={since}"
        with urllib.request.urlopen(f"{self.url}/stub/events?{q}", timeout=30) as resp:
            return [tuple(e) for e in json.loads(resp.read())]

    def kill(self, broker_id: int) -> float:
        """Kill one stub; the stub's monotonic time of it."""
        return float(self._get("kill", id=broker_id)["at"])

    def revive(self, broker_id: int) -> float:
        return float(self._get("revive", id=broker_id)["at"])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--first-id", type=int, default=0)
    ap.add_argument("--controller-url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--dir-names", default="a,b")
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--endpoints-out", required=True)
    ap.add_argument("--control-out", required=True)
    asyncio.run(serve(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
