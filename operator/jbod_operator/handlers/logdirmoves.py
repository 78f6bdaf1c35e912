"""LogDirMove: drive the brokers' move engines (KIP-113) and report, so nobody reaches a
broker by hand.

Every pass observes (describe-log-dirs, describe-replica-log-dirs) and advances the per-replica
state machine of ``logdirmove_plan``; the plan and every replica's state live in the status, so
a restarted operator resumes and never re-sends a finished move. A broker that restarted
mid-move gets the request again (its engine resumes from the ``-future`` folder).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from jbod_broker import wire
from jbod_broker.client import BrokerUnavailableError
from jbod_broker.errors import KafkaError, ReplicaNotAvailableError, error_by_name

from ..brokers import BrokerPool
from ..conditions import now_iso, set_condition
from ..kube import BROKER_CLUSTERS, LOG_DIR_MOVES, TOPICS, ApiError, KubeClient
from ..logdirmove_plan import (
    CANCELLED,
    FAILED,
    FINAL,
    MOVING,
    PENDING,
    SUCCEEDED,
    BrokerDirs,
    MoveSpecError,
    broker_dirs,
    conflicts,
    next_to_start,
    resolve,
    totals,
)

log = logging.getLogger(__name__)
ANY = "any"


@dataclass
class MoveOutcome:
    status: dict[str, Any]
    events: list[tuple[str, str, str]] = field(default_factory=list)
    active: bool = False


def _ts(iso: str | None) -> float:
    if not iso:
        return time.time()
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _set_phase(
    status: dict[str, Any], phase: str, reason: str, message: str, gen: int | None
) -> list[dict[str, Any]]:
    c = list(status.get("conditions") or [])
    c = set_condition(c, "Progressing", phase in (PENDING, MOVING), reason, message, gen)
    c = set_condition(c, "Succeeded", phase == SUCCEEDED, reason, message, gen)
    c = set_condition(
        c,
        "Failed",
        phase == FAILED,
        reason if phase == FAILED else "",
        message if phase == FAILED else "",
        gen,
    )
    c = set_condition(
        c,
        "Cancelled",
        phase == CANCELLED,
        reason if phase == CANCELLED else "",
        message if phase == CANCELLED else "",
        gen,
    )
    return c


async def reconcile_log_dir_move(
    kube: KubeClient,
    pool: BrokerPool,
    body: dict[str, Any],
    *,
    topic_lock: asyncio.Lock | None = None,
) -> MoveOutcome:
    meta = body["metadata"]
    ns, name, gen = meta["namespace"], meta["name"], meta.get("generation")
    spec = body.get("spec") or {}
    status: dict[str, Any] = dict(body.get("status") or {})
    out = MoveOutcome(status)
    phase = status.get("phase")
    cluster = spec["clusterName"]

    def finish(new_phase: str, reason: str, message: str, kind: str = "Normal") -> None:
        status["phase"] = new_phase
        status["conditions"] = _set_phase(status, new_phase, reason, message, gen)
        status.setdefault("completionTime", now_iso())
        out.events.append((kind, reason, message))

    if phase in FINAL:
        if phase == SUCCEEDED and spec.get("drain"):
            # Keep the drained dir cordoned (brokers forget cordons when they restart) until
            # this LogDirMove is deleted: the dir is meant to be removed.
            await _cordon(pool, ns, cluster, spec["drain"], True)
        return out

    bc = await kube.get(BROKER_CLUSTERS, ns, cluster)
    if bc is None:
        status["conditions"] = _set_phase(
            status, PENDING, "ClusterNotFound", f"BrokerCluster {ns}/{cluster} does not exist", gen
        )
        status["phase"] = PENDING
        out.active = True
        return await _write(kube, ns, name, body, out)
    count = int(bc["spec"]["replicas"])
    ids = list(range(count))
    describes = await pool.describe(ns, cluster, ids)
    brokers: dict[int, BrokerDirs | None] = {
        b: broker_dirs(b, d) if d is not None else None for b, d in describes.items()
    }

    # 1. Plan once; the plan is the state of record from then on.
    if not status.get("replicas"):
        try:
            plan = resolve(spec, brokers, count)
        except MoveSpecError as err:
            finish(FAILED, "InvalidSpec", str(err), "Warning")
            return await _write(kube, ns, name, body, out)
        others = [
            o
            for o in await kube.list(LOG_DIR_MOVES, ns)
            if (o.get("spec") or {}).get("clusterName") == cluster and o["metadata"]["name"] != name
        ]
        clash = conflicts((meta["creationTimestamp"], name), plan.entries, others)
        if clash:
            finish(FAILED, "Conflict", f"refused: LogDirMove {clash}", "Warning")
            return await _write(kube, ns, name, body, out)
        status.update(
            {
                "phase": PENDING,
                "replicas": plan.entries,
                "startTime": now_iso(),
                "observedGeneration": gen,
            }
        )
        status["conditions"] = _set_phase(
            status, PENDING, "Planned", f"{len(plan.entries)} replicas to move", gen
        )
        out.events.append(("Normal", "Planned", f"{len(plan.entries)} replicas to move"))
        if spec.get("drain"):
            await _cordon(pool, ns, cluster, spec["drain"], True)
    entries: list[dict[str, Any]] = [dict(e) for e in status["replicas"]]
    involved = sorted({e["brokerId"] for e in entries})

    # 2. Cancel (spec.cancel) and timeout stop every move still running.
    # startTime is truncated to the second: count from the latest possible start.
    elapsed = time.time() - _ts(status.get("startTime")) - 1
    stop_reason = None
    if spec.get("cancel"):
        stop_reason = (CANCELLED, "Cancelled", "cancelled by spec.cancel")
    elif elapsed > int(spec.get("timeoutSeconds", 3600)):
        stop_reason = (FAILED, "Timeout", f"not finished after {spec.get('timeoutSeconds')} s")
    if stop_reason is not None:
        await cancel_moves(pool, ns, cluster, entries)
        for e in entries:
            if e["state"] not in FINAL:
                e["state"] = CANCELLED if stop_reason[0] == CANCELLED else FAILED
                e["message"] = stop_reason[2]
        await _throttle(pool, ns, cluster, involved, 0)
        if spec.get("drain"):
            await _cordon(pool, ns, cluster, spec["drain"], False)
        status["replicas"] = entries
        finish(
            stop_reason[0],
            stop_reason[1],
            stop_reason[2],
            "Warning" if stop_reason[0] == FAILED else "Normal",
        )
        return await _write(kube, ns, name, body, out)

    # 3. Throttle while anything moves (kept up to date: brokers forget it on restart).
    throttle = int(spec.get("throttleBytesPerSecond") or 0)
    if throttle:
        await _throttle(pool, ns, cluster, involved, throttle)

    # 4. Observe running moves.
    rates: dict[tuple[int, str, int], float] = {}
    for b in involved:
        moving = [e for e in entries if e["brokerId"] == b and e["state"] == MOVING]
        if not moving:
            continue
        bd = brokers.get(b)
        infos = await _describe_moves(pool, ns, cluster, b, moving)
        for e in moving:
            key = (e["topic"], e["partition"])
            info = infos.get(key)
            here = bd.locate(*key) if bd else None
            if bd is None:
                continue  # broker away: wait for it (its engine resumes from -future)
            if (
                here is not None
                and here.path == e["targetLogDir"]
                and not any(key in d.futures for d in bd.dirs)
            ):
                # KIP-113 "verify": describe-log-dirs shows the replica in its target dir.
                e.update(state=SUCCEEDED, bytesCopied=e.get("bytesTotal", 0), offsetLag=0)
                out.events.append(
                    (
                        "Normal",
                        "ReplicaMoved",
                        f"broker {b}: {key[0]}-{key[1]} is now on {e['targetLogDir']}",
                    )
                )
                await _record_in_topic(kube, ns, cluster, b, key, e["targetLogDir"], topic_lock)
                continue
            if info is None or info.state in ("None", "Cancelled", "Interrupted"):
                # The broker restarted or forgot the move: ask again (idempotent).
                await _alter(pool, ns, cluster, b, e)
                continue
            if info.state == "Failed":
                e.update(state=FAILED, message=f"broker {b}: {info.error}")
                out.events.append(("Warning", "ReplicaMoveFailed", e["message"]))
                continue
            e.update(
                bytesCopied=info.bytes_copied,
                bytesTotal=max(info.bytes_total, int(e.get("bytesTotal") or 0)),
                offsetLag=info.future_offset_lag,
            )
            rates[(b, *key)] = info.rate_bytes_per_sec

    # 5. Start what fits under maxConcurrentMovesPerBroker.
    wait_s = int(spec.get("replicaWaitSeconds", 10))
    for e in next_to_start(entries, int(spec.get("maxConcurrentMovesPerBroker", 2))):
        b = e["brokerId"]
        bd = brokers.get(b)
        if bd is None:
            continue
        key = (e["topic"], e["partition"])
        here = bd.locate(*key)
        if here is not None and here.path == e["targetLogDir"]:
            e.update(state=SUCCEEDED, message="already in its target log dir")
            continue
        try:
            await _alter(pool, ns, cluster, b, e, raise_errors=True)
            e["state"] = MOVING
            e["sourceLogDir"] = here.path if here else e.get("sourceLogDir")
        except BrokerUnavailableError:
            continue  # the broker is restarting: try again on the next pass
        except ReplicaNotAvailableError:
            # KIP-113: the broker remembers the dir and creates the replica there if it
            # arrives; we retry until replicaWaitSeconds.
            if elapsed > wait_s:
                e.update(
                    state=FAILED,
                    message=f"{key[0]}-{key[1]} is not on broker {b} (waited {wait_s} s)",
                )
                out.events.append(("Warning", "ReplicaNotFound", e["message"]))
        except KafkaError as err:
            e.update(state=FAILED, message=f"broker {b}: {err}")
            out.events.append(("Warning", "ReplicaMoveFailed", e["message"]))

    # 6. Totals, phase, cleanup.
    t = totals(entries, rates)
    status.update(
        replicas=entries,
        bytesCopied=t.copied,
        bytesTotal=t.total,
        progressPercent=t.percent,
        rateBytesPerSecond=t.rate,
        observedGeneration=gen,
    )
    if t.eta is not None:
        status["etaSeconds"] = t.eta
    else:
        status.pop("etaSeconds", None)
    if all(e["state"] in FINAL for e in entries):
        if throttle:
            await _throttle(pool, ns, cluster, involved, 0)
        failed = [e for e in entries if e["state"] != SUCCEEDED]
        if failed:
            finish(
                FAILED,
                "ReplicaMovesFailed",
                f"{len(failed)} of {len(entries)} replicas not moved: "
                + "; ".join(e.get("message", "") for e in failed[:3]),
                "Warning",
            )
        elif spec.get("drain"):
            left = await _drain_left(pool, ns, cluster, spec["drain"])
            if left:
                finish(FAILED, "DrainNotEmpty", left, "Warning")
            else:
                finish(
                    SUCCEEDED,
                    "Drained",
                    f"log dir {spec['drain']['logDir']} of broker {spec['drain']['brokerId']} "
                    "is verified empty and stays cordoned",
                )
        else:
            finish(SUCCEEDED, "AllMoved", f"{len(entries)} replicas moved and verified")
    else:
        n_moving = sum(1 for e in entries if e["state"] == MOVING)
        new_phase = MOVING if n_moving or any(e["state"] == SUCCEEDED for e in entries) else PENDING
        if new_phase != status.get("phase"):
            out.events.append(("Normal", new_phase, f"{n_moving} replicas moving"))
        status["phase"] = new_phase
        status["conditions"] = _set_phase(
            status,
            new_phase,
            "Moving" if n_moving else "Waiting",
            f"{t.percent}% of {t.total} bytes, {n_moving} replicas moving",
            gen,
        )
        out.active = True
    return await _write(kube, ns, name, body, out)


async def wait_for_a_move_to_end(pool: BrokerPool, body: dict[str, Any], wait_s: float) -> bool:
    """Long-poll the brokers with moves running until one of the moves ends.

    True when a broker answered (a move ended, or ``wait_s`` passed); False when nothing is
    moving or no broker could be asked, so that the caller paces itself.

    The operator then verifies a finished move when it finishes, not on its next poll, which
    is most of what it would otherwise add to a short move.
    """
    ns, cluster = body["metadata"]["namespace"], body["spec"]["clusterName"]
    by_broker: dict[int, list[tuple[str, int]]] = {}
    for e in (body.get("status") or {}).get("replicas") or []:
        if e.get("state") == MOVING:
            by_broker.setdefault(int(e["brokerId"]), []).append((e["topic"], int(e["partition"])))
    if not by_broker:
        return False

    async def poll(b: int, replicas: list[tuple[str, int]]) -> None:
        client = await pool.client(ns, cluster, b)
        await client.describe_replica_log_dirs(replicas, wait_ms=int(wait_s * 1000))

    tasks = [asyncio.create_task(poll(b, r)) for b, r in sorted(by_broker.items())]
    pending = set(tasks)
    answered = False
    deadline = asyncio.get_running_loop().time() + wait_s + 5
    try:
        # The first broker to answer ends the wait; one that fails does not.
        while pending and not answered:
            timeout = deadline - asyncio.get_running_loop().time()
            if timeout <= 0:
                break
            done, pending = await asyncio.wait(
                pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            answered = any(not t.cancelled() and t.exception() is None for t in done)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return answered


async def _write(
    kube: KubeClient, ns: str, name: str, body: dict[str, Any], out: MoveOutcome
) -> MoveOutcome:
    if out.status != (body.get("status") or {}):
        await kube.patch_status(LOG_DIR_MOVES, ns, name, out.status)
    return out


async def _alter(
    pool: BrokerPool,
    ns: str,
    cluster: str,
    b: int,
    e: dict[str, Any],
    *,
    raise_errors: bool = False,
) -> None:
    client = await pool.client(ns, cluster, b)
    resp = await client.alter_replica_log_dirs([(e["topic"], e["partition"], e["targetLogDir"])])
    r = resp.partitions[0]
    if r.error and raise_errors:
        raise error_by_name(r.error, r.message or r.error)


async def _describe_moves(
    pool: BrokerPool, ns: str, cluster: str, b: int, entries: list[dict[str, Any]]
) -> dict[tuple[str, int], wire.ReplicaLogDirInfo]:
    try:
        client = await pool.client(ns, cluster, b)
        resp = await client.describe_replica_log_dirs(
            [(e["topic"], e["partition"]) for e in entries]
        )
    except KafkaError:
        return {}
    return {(i.topic, i.partition): i for i in resp.partitions}


async def cancel_moves(
    pool: BrokerPool, ns: str, cluster: str, entries: list[dict[str, Any]]
) -> None:
    """Destination "any": the broker stops the copy and removes the future folder."""
    for e in entries:
        if e["state"] not in (MOVING, PENDING):
            continue
        try:
            client = await pool.client(ns, cluster, e["brokerId"])
            await client.alter_replica_log_dirs([(e["topic"], e["partition"], ANY)])
        except KafkaError as err:
            log.warning("cancel not delivered", extra={"broker": e["brokerId"], "error": str(err)})


async def _throttle(pool: BrokerPool, ns: str, cluster: str, brokers: list[int], rate: int) -> None:
    for b in brokers:
        try:
            client = await pool.client(ns, cluster, b)
            await client.set_configs(wire.ThrottleConfig(intra_broker_throttled_rate=rate))
        except KafkaError:
            continue


async def _cordon(pool: BrokerPool, ns: str, cluster: str, drain: dict[str, Any], on: bool) -> None:
    b = int(drain["brokerId"])
    try:
        client = await pool.client(ns, cluster, b)
        desc = await client.describe_log_dirs()
        bd = broker_dirs(b, desc)
        d = bd.find(drain["logDir"])
        if d is not None and d.cordoned != on:
            await client.cordon_log_dir(d.path, on)
    except KafkaError:
        return


async def _drain_left(pool: BrokerPool, ns: str, cluster: str, drain: dict[str, Any]) -> str:
    b = int(drain["brokerId"])
    try:
        desc = await (await pool.client(ns, cluster, b)).describe_log_dirs()
    except KafkaError as e:
        return f"broker {b} did not answer to verify the drain: {e}"
    d = broker_dirs(b, desc).find(drain["logDir"])
    if d is None:
        return f"broker {b} has no log dir {drain['logDir']!r}"
    if d.replicas or d.futures:
        names = ", ".join(f"{t}-{p}" for t, p in sorted(d.replicas)[:5])
        return f"log dir {d.path} of broker {b} still holds {len(d.replicas)} replicas ({names})"
    return ""


async def _record_in_topic(
    kube: KubeClient,
    ns: str,
    cluster: str,
    broker: int,
    key: tuple[str, int],
    path: str,
    lock: asyncio.Lock | None,
) -> None:
    """The Topic's status says where each replica lives: keep it true after a move."""
    async with lock or asyncio.Lock():
        for _ in range(5):
            for t in await kube.list(TOPICS, ns):
                st = t.get("status") or {}
                tname = st.get("topicName") or t["metadata"]["name"]
                if (t.get("spec") or {}).get("clusterName") != cluster or tname != key[0]:
                    continue
                for p in st.get("partitions") or []:
                    if p["partition"] != key[1]:
                        continue
                    for r in p["replicas"]:
                        if r["brokerId"] == broker:
                            r["logDir"] = path
                try:
                    await kube.replace_status(TOPICS, ns, t)
                    return
                except ApiError as e:
                    if e.status != 409:
                        raise
                    break
            else:
                return


async def delete_log_dir_move(kube: KubeClient, pool: BrokerPool, body: dict[str, Any]) -> None:
    """Deleting a LogDirMove cancels what still runs and lifts its throttle and cordon."""
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    ns, cluster = body["metadata"]["namespace"], spec["clusterName"]
    entries = list(status.get("replicas") or [])
    if status.get("phase") not in FINAL:
        await cancel_moves(pool, ns, cluster, entries)
        if spec.get("throttleBytesPerSecond"):
            await _throttle(pool, ns, cluster, sorted({e["brokerId"] for e in entries}), 0)
    if spec.get("drain"):
        await _cordon(pool, ns, cluster, spec["drain"], False)
