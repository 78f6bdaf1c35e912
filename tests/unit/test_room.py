"""The room rule (``jbod_broker.storage.room``) the broker, the operator and the planners share:
headroom as bytes or a share of capacity, reservations of work in flight, growth covered by the
headroom, and a refusal that names every figure."""

from __future__ import annotations

import math

import pytest

from jbod_broker.storage.room import (
    DirSpace,
    Headroom,
    HeadroomError,
    check_room,
    remaining_to_write,
)

MiB = 1 << 20


def space(usable: int, *, capacity: int = 100 * MiB, reserved: int = 0) -> DirSpace:
    return DirSpace("/d/data-b", capacity, usable, reserved)


def test_a_replica_larger_than_the_free_space_does_not_fit() -> None:
    v = check_room(space(4 * MiB), 10 * MiB, Headroom())
    assert not v.fits and v.room_bytes == 4 * MiB
    assert v.reason == (
        f"log dir /d/data-b has no room for {10 * MiB} bytes: {4 * MiB} bytes free, "
        f"0 reserved by moves and new replicas in flight, 0 kept as headroom, "
        f"so {4 * MiB} available"
    )


def test_exactly_the_room_left_fits() -> None:
    v = check_room(space(10 * MiB), 10 * MiB, Headroom())
    assert v.fits and v.reason == ""


def test_headroom_in_bytes() -> None:
    assert not check_room(space(10 * MiB), 10 * MiB, Headroom(bytes=1)).fits
    assert check_room(space(11 * MiB), 10 * MiB, Headroom(bytes=MiB)).fits


def test_headroom_as_percent_of_capacity_rounds_up() -> None:
    h = Headroom(percent=5)
    assert h.of(100 * MiB) == 5 * MiB
    assert h.of(1001) == math.ceil(1001 * 5 / 100) == 51
    assert check_room(space(15 * MiB), 10 * MiB, h).fits
    assert not check_room(space(15 * MiB - 1), 10 * MiB, h).fits


def test_headroom_is_the_larger_of_bytes_and_percent() -> None:
    assert Headroom(bytes=7 * MiB, percent=5).of(100 * MiB) == 7 * MiB
    assert Headroom(bytes=MiB, percent=5).of(100 * MiB) == 5 * MiB


def test_reservations_of_work_in_flight_count_against_the_room() -> None:
    # Two moves that each fit but not together: the second sees the first's reservation.
    first = check_room(space(15 * MiB), 10 * MiB, Headroom())
    assert first.fits
    second = check_room(space(15 * MiB, reserved=10 * MiB), 10 * MiB, Headroom())
    assert not second.fits and f"{10 * MiB} reserved" in second.reason


def test_a_running_move_reserves_only_what_it_still_has_to_write() -> None:
    assert remaining_to_write(10 * MiB, 4 * MiB) == 6 * MiB
    assert remaining_to_write(10 * MiB, 12 * MiB) == 0  # it grew while moving
    # 4 MiB already landed (out of usable), 6 MiB still promised.
    after = check_room(
        space(11 * MiB, reserved=remaining_to_write(10 * MiB, 4 * MiB)), 5 * MiB, Headroom()
    )
    assert after.fits and after.room_bytes == 5 * MiB


def test_growth_during_a_move_is_what_the_headroom_is_for() -> None:
    # A 10 MiB replica taking 1 MiB more while it moves still lands within a 2 MiB headroom.
    h = Headroom(bytes=2 * MiB)
    v = check_room(space(12 * MiB), 10 * MiB, h)
    assert v.fits and v.space.usable_bytes - (10 + 1) * MiB >= 0


def test_an_empty_replica_needs_no_room_and_negatives_are_clamped() -> None:
    assert check_room(space(0), 0, Headroom()).fits
    v = check_room(space(MiB, reserved=-5), -3, Headroom())
    assert v.fits and v.need_bytes == 0 and v.room_bytes == MiB


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"bytes": -1}, "headroom bytes must be >= 0"),
        ({"percent": -0.5}, "headroom percent must be between 0 and 50"),
        ({"percent": 51}, "headroom percent must be between 0 and 50"),
        ({"percent": float("nan")}, "headroom percent must be between 0 and 50"),
    ],
)
def test_bad_headroom_settings_are_refused(kw: dict[str, float], message: str) -> None:
    with pytest.raises(HeadroomError, match=message):
        Headroom(**kw)  # type: ignore[arg-type]
