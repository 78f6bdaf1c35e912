"""A counting reverse proxy in front of the API server: what the operator costs it (issue 39).

The operator is another process, so its own counters are out of reach; this proxy sees every
request it makes (Topics, PartitionShards, Leases, Events, watches), and counts per verb and
resource the requests, the bytes each way, and the largest body written. The operator reaches
it over plain HTTP on loopback through a kubeconfig this module writes; the proxy talks TLS to
the API server with its CA and passes the client's bearer token on. Watches stream through.

``python -m tests.api_proxy --kubeconfig IN --kubeconfig-out OUT --control-out FILE``;
``GET /proxy/stats`` answers the counters (never forwarded). :class:`ApiProxy` runs it as a
child process for tests and benches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.request
from collections import Counter, deque
from typing import Any

import aiohttp
import yaml
from aiohttp import web

HOP = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding"}
WRITES = {"POST", "PUT", "PATCH"}


def classify(method: str, path: str, query: dict[str, str]) -> tuple[str, str]:
    """(verb, resource) of an API request: ``LIST``/``WATCH``/``GET``... and the resource's
    plural (with ``/status`` for the subresource)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return method, path
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = "/".join([rest[0], *rest[2:]]) if rest else "discovery"
    if method != "GET":
        return method, resource
    if query.get("watch") in ("1", "true"):
        return "WATCH", resource
    return ("LIST" if len(rest) == 1 else "GET"), resource


class Counts:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.bytes_out: Counter[str] = Counter()
        """Request bodies, to the API server."""
        self.bytes_in: Counter[str] = Counter()
        """Response bodies, from the API server (watch events included)."""
        self.largest_write = 0
        self.largest_write_what = ""
        self.writes: deque[tuple[float, str, int]] = deque(maxlen=100_000)
        """(``time.monotonic()``, verb and resource, body bytes) of each write: a timeline."""

    def stats(self) -> dict[str, Any]:
        written = sum(n for k, n in self.bytes_out.items() if k.split(" ")[0] in WRITES)
        return {
            "requests": dict(self.requests),
            "bytes_out": dict(self.bytes_out),
            "bytes_in": dict(self.bytes_in),
            "bytes_written": written,
            "writes": sum(n for k, n in self.requests.items() if k.split(" ")[0] in WRITES),
            "largest_write": self.largest_write,
            "largest_write_what": self.largest_write_what,
        }


class Proxy:
    def __init__(self, upstream: str, ca_file: str | None) -> None:
        self.upstream = upstream.rstrip("/")
        self.ssl: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=ca_file) if upstream.startswith("https") else False
        )
        self.counts = Counts()
        self.session: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.path == "/proxy/stats":
            return web.json_response(self.counts.stats())
        if request.path == "/proxy/writes":
            since = float(request.query.get("since", "0"))
            return web.json_response([w for w in self.counts.writes if w[0] >= since])
        assert self.session is not None
        body = await request.read()
        verb, resource = classify(request.method, request.path, dict(request.query))
        key = f"{verb} {resource}"
        c = self.counts
        c.requests[key] += 1
        c.bytes_out[key] += len(body)
        if request.method in WRITES:
            c.writes.append((time.monotonic(), key, len(body)))
        if request.method in WRITES and len(body) > c.largest_write:
            c.largest_write, c.largest_write_what = len(body), f"{key} {request.path}"
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        async with self.session.request(
            request.method,
            self.upstream + request.path_qs,
            data=body or None,
            headers=headers,
            ssl=self.ssl,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
        ) as up:
            out = web.StreamResponse(status=up.status, reason=up.reason)
            for k, v in up.headers.items():
                if k.lower() not in HOP:
                    out.headers[k] = v
            await out.prepare(request)
            async for chunk in up.content.iter_any():
                c.bytes_in[key] += len(chunk)
                await out.write(chunk)
            await out.write_eof()
            return out


def write_kubeconfig(src: dict[str, Any], server: str, path: str) -> None:
    """``src`` (a kubeconfig) pointed at ``server`` over plain HTTP, the same user."""
    out = json.loads(json.dumps(src))
    for cl in out["clusters"]:
        cl["cluster"] = {"server": server}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(out, f)
    os.chmod(path, 0o600)


async def serve(args: argparse.Namespace) -> None:
    with open(args.kubeconfig, encoding="utf-8") as f:
        cfg = yaml.safe_load(f)
    cluster = cfg["clusters"][0]["cluster"]
    proxy = Proxy(cluster["server"], cluster.get("certificate-authority"))
    proxy.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.0.1:{port}"
    write_kubeconfig(cfg, url, args.kubeconfig_out)
    tmp = args.control_out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"url": url, "pid": os.getpid()}, f)
    os.replace(tmp, args.control_out)
    await asyncio.Event().wait()


class ApiProxy:
    """The proxy as a child process; ``kubeconfig`` is what an operator behind it uses."""

    def __init__(self, kubeconfig: str, workdir: str) -> None:
        self.kubeconfig = os.path.join(workdir, "proxied-kubeconfig")
        self.control_out = os.path.join(workdir, "api-proxy.json")
        self.log_path = os.path.join(workdir, "api-proxy.log")
        self.cmd = [sys.executable, "-m", "tests.api_proxy", "--kubeconfig", kubeconfig]
        self.cmd += ["--kubeconfig-out", self.kubeconfig, "--control-out", self.control_out]
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> ApiProxy:
        from tests.waiting import wait_for

        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=log)
        wait_for(lambda: os.path.exists(self.control_out), what="the API proxy to listen")
        with open(self.control_out, encoding="utf-8") as f:
            self.url = json.load(f)["url"]
        return self

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "/proxy/stats", timeout=30) as resp:
            out: dict[str, Any] = json.loads(resp.read())
        return out

    def writes(self, since: float) -> list[tuple[float, str, int]]:
        """Every write since ``since`` (monotonic): (time, verb and resource, body bytes)."""
        with urllib.request.urlopen(f"{self.url}/proxy/writes?since={since}", timeout=30) as r:
            return [(float(t), str(k), int(n)) for t, k, n in json.loads(r.read())]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--kubeconfig-out", required=True)
    ap.add_argument("--control-out", required=True)
    asyncio.run(serve(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
