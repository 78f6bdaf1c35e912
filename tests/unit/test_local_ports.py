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
