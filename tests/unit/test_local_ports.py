"""The loopback ports test brokers are given (a CI run once failed with "address already in
use": a port released by ``bind(0)`` went to an outgoing connection before the broker bound)."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator

import pytest

from jbod_broker import local


def test_ports_are_outside_the_kernels_ephemeral_range_and_never_repeat() -> None:
    lo, hi = local._ephemeral_range()
    ports = [local.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert not [p for p in ports if lo <= p <= hi]


@pytest.fixture
def listening() -> Iterator[int]:
    lo, hi = local._ephemeral_range()
    with socket.socket() as s:
        for port in range(20000, 30000):
            if lo <= port <= hi:
                continue
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            s.listen()
            yield port
            return
    pytest.fail("no port to listen on")


def test_a_port_something_listens_on_is_skipped(
    listening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([listening, listening + 1, listening + 2, listening + 3])
    monkeypatch.setattr(secrets.SystemRandom, "randrange", lambda self, a, b: next(picks))
    port = local.free_port()
    assert port != listening
    assert port in (listening + 1, listening + 2, listening + 3)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_slice_picks_only_its_own_ports(index: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two test workers on one machine never pick the same port (make test's parallel tier)."""
    monkeypatch.setenv(local.PORT_SLICE_ENV, f"{index}/3")
    lo, hi = local._ephemeral_range()
    ports = [local.free_port() for _ in range(300)]
    assert {p % 3 for p in ports} == {index}
    assert not [p for p in ports if lo <= p <= hi]


@pytest.mark.parametrize("raw", ["2/2", "x/2", "1", "-1/2", "0/0"])
def test_a_bad_slice_is_refused_naming_it(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local.PORT_SLICE_ENV, raw)
    with pytest.raises(ValueError, match=local.PORT_SLICE_ENV):
        local.free_port()
