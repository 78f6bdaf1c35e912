"""LogDirMove decisions on plain data (``jbod_operator.plan.logdirmove``): which dir a reference
names, how a drain spreads a directory, what makes a LogDirMove invalid, which older move it
clashes with, progress totals and how many moves start per broker."""

from __future__ import annotations

from typing import Any

import pytest

from jbod_broker import wire
from jbod_operator.models import LogDirMove, LogDirMoveSpec
from jbod_operator.models.log_dir_move import ReplicaMoveStatus, ReplicaState
from jbod_operator.plan.logdirmove import (
    MoveSpecError,
    NoRoomError,
    ReplicaTarget,
    conflicts,
    expand_drain,
    next_to_start,
    resolve,
    totals,
)
from jbod_operator.plan.port_types import BrokerDirs, Dir, broker_dirs

PENDING, MOVING, SUCCEEDED, FAILED, CANCELLED = (
    ReplicaState.PENDING,
    ReplicaState.MOVING,
    ReplicaState.SUCCEEDED,
    ReplicaState.FAILED,
    ReplicaState.CANCELLED,
)
GiB = 1 << 30
ROOT = "/var/lib/broker"


def d(
    name: str,
    replicas: dict[tuple[str, int], int] | None = None,
    *,
    free: int = 10 * GiB,
    live: bool = True,
    cordoned: bool = False,
    futures: frozenset[tuple[str, int]] = frozenset(),
) -> Dir:
    return Dir(name, f"{ROOT}/data-{name}", live, cordoned, free, dict(replicas or {}), futures)


def path(name: str) -> str:
    return f"{ROOT}/data-{name}"


def cluster(**per_broker: tuple[Dir, ...] | None) -> dict[int, BrokerDirs | None]:
    """``cluster(b0=(d("a"), d("b")), b1=None)``: broker 1 does not answer."""
    out: dict[int, BrokerDirs | None] = {}
    for key, dirs in per_broker.items():
        b = int(key.removeprefix("b"))
        out[b] = None if dirs is None else BrokerDirs(b, dirs)
    return out


def move(broker: int, topic: str, partition: int, log_dir: str) -> dict[str, Any]:
    return {"brokerId": broker, "topic": topic, "partition": partition, "logDir": log_dir}


def entry(
    broker: int, topic: str, partition: int, state: str = PENDING, **kw: Any
) -> ReplicaMoveStatus:
    return ReplicaMoveStatus.model_validate(
        {"brokerId": broker, "topic": topic, "partition": partition, "state": state, **kw}
    )


def spec(**fields: Any) -> LogDirMoveSpec:
    return LogDirMoveSpec.model_validate({"clusterName": "kip", **fields})


def wire_form(e: ReplicaMoveStatus) -> dict[str, Any]:
    """The entry as status.replicas carries it (camelCase, None kept)."""
    return e.model_dump(by_alias=True, mode="json")


def ldm(
    name: str,
    created: str,
    *,
    phase: str | None = None,
    replicas: list[ReplicaMoveStatus] | None = None,
    moves: list[dict[str, Any]] | None = None,
) -> LogDirMove:
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if replicas is not None:
        status["replicas"] = [wire_form(e) for e in replicas]
    return LogDirMove.model_validate(
        {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"clusterName": "kip", "moves": moves or []},
            "status": status or None,
        }
    )


# -- dir lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref",
    ["b", "data-b", path("b"), path("b") + "/", f"{ROOT}/./data-b", f"{ROOT}/x/../data-b"],
)
def test_find_by_name_folder_name_or_absolute_path(ref: str) -> None:
    bd = BrokerDirs(0, (d("a"), d("b"), d("c")))
    found = bd.find(ref)
    assert found is not None and found.name == "b"


@pytest.mark.parametrize(
    "ref", ["z", "data-z", "/elsewhere/data-b", "data/b", "b/", f"{ROOT}/data-b/sub", ROOT]
)
def test_find_refuses_what_is_not_one_of_the_dirs(ref: str) -> None:
    # A relative path or another absolute path never matches by accident (no basename match).
    assert BrokerDirs(0, (d("a"), d("b"))).find(ref) is None


def test_locate_finds_current_replicas_not_futures() -> None:
    bd = BrokerDirs(
        0, (d("a", {("t", 0): 5}), d("b", {("t", 1): 7}, futures=frozenset({("t", 0)})))
    )
    loc = bd.locate("t", 0)
    assert loc is not None and loc.name == "a"
    loc1 = bd.locate("t", 1)
    assert loc1 is not None and loc1.name == "b"
    assert bd.locate("t", 2) is None


def test_broker_dirs_from_describe_log_dirs() -> None:
    def rep(topic: str, p: int, size: int, future: bool = False) -> wire.ReplicaDescription:
        return wire.ReplicaDescription(
            topic=topic, partition=p, size=size, offset_lag=0, is_future=future, log_end_offset=1
        )

    desc = wire.DescribeLogDirsResponse(
        broker_id=2,
        log_dirs=[
            wire.LogDirDescription(
                path=path("a"),
                is_live=True,
                error=None,
                total_bytes=100,
                usable_bytes=60,
                cordoned=True,
                partitions=[rep("t", 0, 10), rep("t", 1, 3, future=True)],
            ),
            wire.LogDirDescription(
                path=path("b"),
                is_live=False,
                error="boom",
                total_bytes=0,
                usable_bytes=0,
                cordoned=False,
                partitions=[],
            ),
        ],
    )
    bd = broker_dirs(2, desc)
    a, b = bd.dirs
    assert (a.name, a.live, a.cordoned, a.usable_bytes) == ("a", True, True, 60)
    assert a.replicas == {("t", 0): 10} and a.futures == frozenset({("t", 1)})
    assert (b.name, b.live) == ("b", False)


# -- drain ------------------------------------------------------------------------------------


def test_drain_balances_by_free_bytes_largest_first() -> None:
    src = d("a", {("t", 0): 50, ("t", 1): 10, ("u", 0): 30, ("u", 1): 20})
    bd = BrokerDirs(0, (src, d("b", free=100), d("c", free=60)))
    plan = expand_drain(bd, "a")
    # 50 -> b (100 → 50 left); 30 -> c (60 → 30); 20 -> b (50 → 30); 10: tie 30/30 → b, the
    # first in config order.
    assert [(t.topic, t.partition, t.target_ref) for t in plan] == [
        ("t", 0, path("b")),
        ("u", 0, path("c")),
        ("u", 1, path("b")),
        ("t", 1, path("b")),
    ]
    assert all(t.broker == 0 for t in plan)


def test_drain_equal_sizes_go_in_topic_partition_order() -> None:
    src = d("a", {("t", 2): 5, ("t", 0): 5, ("t", 1): 5})
    plan = expand_drain(BrokerDirs(0, (src, d("b", free=1000), d("c", free=1000))), "data-a")
    assert [(t.partition, t.target_ref) for t in plan] == [
        (0, path("b")),
        (1, path("c")),
        (2, path("b")),
    ]


def test_drain_by_absolute_path() -> None:
    plan = expand_drain(BrokerDirs(3, (d("a", {("t", 0): 1}), d("b"))), path("a"))
    assert plan == [ReplicaTarget(3, "t", 0, path("b"))]


def test_drain_skips_cordoned_and_offline_targets() -> None:
    src = d("a", {("t", 0): 1, ("t", 1): 1})
    bd = BrokerDirs(
        0,
        (
            src,
            d("b", free=10 * GiB, cordoned=True),
            d("c", free=20 * GiB, live=False),
            d("e", free=1),
        ),
    )
    assert {t.target_ref for t in expand_drain(bd, "a")} == {path("e")}


def test_drain_refuses_an_offline_source() -> None:
    bd = BrokerDirs(1, (d("a", {("t", 0): 1}, live=False), d("b")))
    with pytest.raises(MoveSpecError, match=rf"broker 1: log dir {path('a')} is offline"):
        expand_drain(bd, "a")


@pytest.mark.parametrize(
    "others",
    [
        (),
        (d("b", cordoned=True),),
        (d("b", live=False),),
        (d("b", cordoned=True), d("c", live=False)),
    ],
)
def test_drain_refuses_when_no_dir_can_take_the_replicas(others: tuple[Dir, ...]) -> None:
    bd = BrokerDirs(2, (d("a", {("t", 0): 1, ("t", 1): 2}), *others))
    with pytest.raises(MoveSpecError) as err:
        expand_drain(bd, "a")
    msg = str(err.value)
    assert "broker 2" in msg and "2 replicas" in msg and path("a") in msg


def test_drain_of_an_empty_dir_needs_no_target() -> None:
    assert expand_drain(BrokerDirs(0, (d("a"), d("b", cordoned=True))), "a") == []


def test_drain_of_an_unknown_dir() -> None:
    with pytest.raises(MoveSpecError, match=r"broker 0 has no log dir 'zz'"):
        expand_drain(BrokerDirs(0, (d("a"), d("b"))), "zz")


# -- resolve ----------------------------------------------------------------------------------


def two_brokers() -> dict[int, BrokerDirs | None]:
    return cluster(
        b0=(d("a", {("t", 0): 100}), d("b")),
        b1=(d("a"), d("b", {("t", 1): 40})),
    )


def test_resolve_moves_into_status_entries() -> None:
    sp = spec(moves=[move(0, "t", 0, "b"), move(1, "t", 1, path("a")), move(1, "t", 9, "a")])
    out = [wire_form(e) for e in resolve(sp, two_brokers(), 2)]
    assert out[0] == {
        "brokerId": 0,
        "topic": "t",
        "partition": 0,
        "sourceLogDir": path("a"),
        "targetLogDir": path("b"),
        "bytesCopied": 0,
        "bytesTotal": 100,
        "offsetLag": 0,
        "state": PENDING,
        "message": None,
    }
    assert (out[1]["sourceLogDir"], out[1]["targetLogDir"], out[1]["bytesTotal"]) == (
        path("b"),
        path("a"),
        40,
    )
    # Not on the broker (yet): planned with no source; the handler waits replicaWaitSeconds.
    assert (out[2]["sourceLogDir"], out[2]["bytesTotal"], out[2]["state"]) == (None, 0, PENDING)


def test_resolve_drain_into_entries() -> None:
    brokers = cluster(
        b0=(d("a", {("t", 0): 5, ("t", 1): 9}), d("b", free=5), d("c", free=50)),
    )
    out = [wire_form(e) for e in resolve(spec(drain={"brokerId": 0, "logDir": "a"}), brokers, 1)]
    assert [(e["partition"], e["sourceLogDir"], e["targetLogDir"]) for e in out] == [
        (1, path("a"), path("c")),
        (0, path("a"), path("c")),
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"moves": [move(7, "t", 0, "a")]},
            r"^broker 7 does not exist \(the cluster has brokers 0-1\)$",
        ),
        (
            {"drain": {"brokerId": 2, "logDir": "a"}},
            r"^broker 2 does not exist \(the cluster has brokers 0-1\)$",
        ),
        (
            {"moves": [move(0, "t", 0, "zz")]},
            r"^broker 0 has no log dir 'zz' \(it has: a, b\)$",
        ),
        (
            {"moves": [move(0, "t", 0, "/elsewhere/data-a")]},
            r"^broker 0 has no log dir '/elsewhere/data-a' \(it has: a, b\)$",
        ),
        (
            {"drain": {"brokerId": 1, "logDir": "zz"}},
            r"^broker 1 has no log dir 'zz'$",
        ),
    ],
)
def test_resolve_errors_name_broker_and_dir(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(MoveSpecError, match=message):
        resolve(spec(**fields), two_brokers(), 2)


def test_resolve_refuses_a_broker_that_does_not_answer() -> None:
    brokers = cluster(b0=(d("a"), d("b")), b1=None)
    with pytest.raises(MoveSpecError, match=r"^broker 1 does not answer"):
        resolve(spec(moves=[move(0, "t", 0, "a"), move(1, "t", 1, "a")]), brokers, 2)
    with pytest.raises(MoveSpecError, match=r"^broker 1 does not answer"):
        resolve(spec(drain={"brokerId": 1, "logDir": "a"}), brokers, 2)
    # A broker missing from the observation altogether is treated the same.
    with pytest.raises(MoveSpecError, match=r"^broker 1 does not answer"):
        resolve(spec(moves=[move(1, "t", 1, "a")]), cluster(b0=(d("a"),)), 2)


def test_resolve_refuses_an_offline_target() -> None:
    brokers = cluster(b0=(d("a", {("t", 0): 1}), d("b", live=False)))
    with pytest.raises(MoveSpecError, match=rf"^broker 0: target log dir {path('b')} is offline$"):
        resolve(spec(moves=[move(0, "t", 0, "data-b")]), brokers, 1)


def test_resolve_error_stops_the_whole_plan() -> None:
    # One bad move makes the LogDirMove invalid: nothing of it is planned.
    sp = spec(moves=[move(0, "t", 0, "b"), move(1, "t", 1, "nope")])
    with pytest.raises(MoveSpecError, match="broker 1 has no log dir 'nope'"):
        resolve(sp, two_brokers(), 2)


def test_resolve_refuses_a_move_into_a_cordoned_dir() -> None:
    brokers = cluster(b0=(d("a", {("t", 0): 1}), d("b", cordoned=True)))
    try:
        resolve(spec(moves=[move(0, "t", 0, "b")]), brokers, 1)
    except MoveSpecError as e:
        assert "cordoned" in str(e) and path("b") in str(e)
    else:
        raise AssertionError("a move into a cordoned dir was planned")


# -- conflicts ----------------------------------------------------------------------------------

ME = ("2024-05-01T10:00:05Z", "mine")
MINE = [entry(0, "t", 0), entry(1, "t", 1)]


def test_conflict_names_the_older_active_move() -> None:
    older = ldm("first", "2024-05-01T10:00:00Z", phase=MOVING, replicas=[entry(1, "t", 1, MOVING)])
    assert conflicts(ME, MINE, [older]) == "first (it already moves t-1 on broker 1)"


def test_conflict_with_an_older_move_not_yet_planned_uses_its_spec() -> None:
    older = ldm("first", "2024-05-01T10:00:00Z", moves=[move(0, "t", 0, "b")])
    assert conflicts(ME, MINE, [older]) == "first (it already moves t-0 on broker 0)"


def test_conflict_same_second_is_broken_by_name() -> None:
    same = ME[0]
    a = ldm("a-first", same, phase=PENDING, replicas=[entry(0, "t", 0)])
    z = ldm("z-later", same, phase=PENDING, replicas=[entry(0, "t", 0)])
    assert conflicts(ME, MINE, [z]) is None  # "z-later" > "mine": newer
    assert conflicts(ME, MINE, [a]) == "a-first (it already moves t-0 on broker 0)"


@pytest.mark.parametrize("phase", [SUCCEEDED, FAILED, CANCELLED])
def test_conflict_ignores_finished_moves(phase: str) -> None:
    older = ldm("old", "2024-05-01T09:00:00Z", phase=phase, replicas=[entry(0, "t", 0, phase)])
    assert conflicts(ME, MINE, [older]) is None


def test_conflict_ignores_newer_moves_and_other_replicas() -> None:
    newer = ldm("newer", "2024-05-01T10:00:09Z", phase=MOVING, replicas=[entry(0, "t", 0)])
    other_partition = ldm("p", "2024-05-01T09:00:00Z", phase=MOVING, replicas=[entry(0, "t", 1)])
    other_broker = ldm("b", "2024-05-01T09:00:00Z", phase=MOVING, replicas=[entry(2, "t", 0)])
    assert conflicts(ME, MINE, [newer, other_partition, other_broker]) is None


def test_conflict_picks_the_first_clashing_move_and_replica() -> None:
    older = ldm(
        "first",
        "2024-05-01T10:00:00Z",
        phase=MOVING,
        replicas=[entry(1, "t", 1), entry(0, "t", 0)],
    )
    done = ldm("done", "2024-05-01T09:00:00Z", phase=SUCCEEDED, replicas=[entry(0, "t", 0)])
    # The lowest (broker, topic, partition) in common is named.
    assert conflicts(ME, MINE, [done, older]) == "first (it already moves t-0 on broker 0)"


# -- totals -------------------------------------------------------------------------------------


def test_totals_percent_rate_eta() -> None:
    entries = [
        entry(0, "t", 0, SUCCEEDED, bytesCopied=10, bytesTotal=400),
        entry(0, "t", 1, MOVING, bytesCopied=100, bytesTotal=400),
        entry(1, "t", 2, PENDING, bytesTotal=200),
    ]
    t = totals(entries, {(0, "t", 1): 50.0, (1, "u", 0): 25.4})
    # A succeeded replica counts whole, whatever its last observed bytesCopied.
    assert (t.copied, t.total) == (500, 1000)
    assert t.percent == 50
    assert t.rate == 75
    assert t.eta == (1000 - 500) // 75


def test_totals_no_rate_no_eta_and_empty() -> None:
    entries = [entry(0, "t", 0, MOVING, bytesCopied=1, bytesTotal=3)]
    t = totals(entries, {})
    assert (t.percent, t.rate, t.eta) == (33, 0, None)
    e = totals([], {})
    assert (e.copied, e.total, e.percent, e.rate, e.eta) == (0, 0, 0, 0, None)


def test_totals_done() -> None:
    entries = [
        entry(0, "t", 0, SUCCEEDED, bytesCopied=0, bytesTotal=7),
        entry(0, "t", 1, SUCCEEDED, bytesTotal=0),  # an empty replica
    ]
    t = totals(entries, {(0, "t", 0): 99.0})
    assert (t.copied, t.total, t.percent, t.eta) == (7, 7, 100, None)


def test_totals_percent_never_above_100() -> None:
    # The engine can report more copied than first planned (appends during the move).
    t = totals([entry(0, "t", 0, MOVING, bytesCopied=150, bytesTotal=100)], {})
    assert t.percent == 100 and t.eta is None


def test_totals_of_a_failed_move_is_not_100_percent() -> None:
    entries = [
        entry(0, "t", 0, FAILED, bytesCopied=0, bytesTotal=100, message="not on broker 0"),
        entry(0, "t", 1, CANCELLED, bytesCopied=20, bytesTotal=100),
    ]
    t = totals(entries, {})
    assert t.percent < 100, t


# -- concurrency limit --------------------------------------------------------------------------


def test_next_to_start_honours_the_per_broker_limit() -> None:
    entries = [
        entry(0, "t", 0, MOVING),
        entry(0, "t", 1),
        entry(0, "t", 2),
        entry(1, "t", 0),
        entry(1, "t", 1),
        entry(1, "t", 2),
        entry(2, "t", 0, SUCCEEDED),
        entry(2, "t", 1, FAILED),
        entry(2, "t", 2),
    ]
    picked = [(e.broker_id, e.partition) for e in next_to_start(entries, 2)]
    # Broker 0 has one running: one more; broker 1: two, in plan order; broker 2: finished
    # moves do not count against the limit.
    assert picked == [(0, 1), (1, 0), (1, 1), (2, 2)]
    assert [(e.broker_id, e.partition) for e in next_to_start(entries, 1)] == [
        (1, 0),
        (2, 2),
    ]


def test_next_to_start_nothing_when_full_or_done() -> None:
    full = [entry(0, "t", 0, MOVING), entry(0, "t", 1, MOVING), entry(0, "t", 2)]
    assert next_to_start(full, 2) == []
    assert next_to_start([entry(0, "t", 0, SUCCEEDED)], 4) == []
    assert next_to_start([], 1) == []


def test_next_to_start_returns_the_entries_themselves() -> None:
    # The caller finds them again in the plan: they must be the plan's own entries.
    entries = [entry(0, "t", 0), entry(0, "t", 1)]
    got = next_to_start(entries, 5)
    assert len(got) == 2 and all(g is e for g, e in zip(got, entries, strict=True))


# -- room (issue 13: checked before anything is sent) -------------------------------------------


def test_resolve_refuses_a_target_without_room_naming_free_and_needed_bytes() -> None:
    brokers = cluster(b0=(d("a", {("t", 0): 10 * 1024 * 1024}), d("b", free=4 * 1024 * 1024)))
    with pytest.raises(NoRoomError) as err:
        resolve(spec(moves=[move(0, "t", 0, "b")]), brokers, 1)
    assert str(err.value) == (
        f"broker 0: log dir {path('b')} has no room for 10485760 bytes: 4194304 bytes free, "
        "0 reserved by moves and new replicas in flight, 0 kept as headroom, so 4194304 available"
    )
    assert err.value.reason == "InsufficientSpace"


def test_resolve_adds_up_every_move_into_the_same_dir() -> None:
    brokers = cluster(b0=(d("a", {("t", 0): 60, ("t", 1): 60}), d("b", free=100)))
    resolve(spec(moves=[move(0, "t", 0, "b")]), brokers, 1)  # each alone fits
    resolve(spec(moves=[move(0, "t", 1, "b")]), brokers, 1)
    with pytest.raises(NoRoomError, match="no room for 120 bytes"):
        resolve(spec(moves=[move(0, "t", 0, "b"), move(0, "t", 1, "b")]), brokers, 1)


def test_resolve_counts_the_brokers_reservations_and_headroom() -> None:
    def target(reserved: int, headroom: int) -> Dir:
        return Dir("b", path("b"), True, False, 100, {}, frozenset(), 1000, reserved, headroom)

    src = d("a", {("t", 0): 60})
    resolve(spec(moves=[move(0, "t", 0, "b")]), cluster(b0=(src, target(40, 0))), 1)
    with pytest.raises(NoRoomError, match="41 reserved"):
        resolve(spec(moves=[move(0, "t", 0, "b")]), cluster(b0=(src, target(41, 0))), 1)
    with pytest.raises(NoRoomError, match="41 kept as headroom"):
        resolve(spec(moves=[move(0, "t", 0, "b")]), cluster(b0=(src, target(0, 41))), 1)


def test_a_replica_already_in_its_target_needs_no_room() -> None:
    brokers = cluster(b0=(d("a"), d("b", {("t", 0): 500}, free=0)))
    (e,) = resolve(spec(moves=[move(0, "t", 0, "b")]), brokers, 1)
    assert e.source_log_dir == e.target_log_dir == path("b")


def test_a_drain_without_room_on_the_other_dirs_is_refused() -> None:
    brokers = cluster(b0=(d("a", {("t", 0): 80, ("t", 1): 80}), d("b", free=100), d("c", free=50)))
    with pytest.raises(NoRoomError, match=f"log dir {path('c')} has no room for 80 bytes"):
        resolve(spec(drain={"brokerId": 0, "logDir": "a"}), brokers, 1)
