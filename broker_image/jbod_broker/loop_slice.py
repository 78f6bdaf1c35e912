"""One rule for request work that must not hold the event loop (issues 14 and 36).

Readiness, produce, fetch, replication and the controller's heartbeats all run on one loop: a
request naming many entries (log dirs to alter, partitions to fetch, topics to describe,
replicas the controller creates or stops) does its per-entry work in slices of
:data:`LOOP_SLICE_S` and lets the loop serve the others between them, so a broker answers its
probes and heartbeats while it serves the request. A long JSON list is read through
:func:`decode_long_list`, which hands its items over one at a time (a whole 18 MB
LeaderAndIsr body took 0.4 s to decode in one call).
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import time
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

LOOP_SLICE_S = 0.005
"""The longest a request handler runs per-entry work before it lets the loop serve others."""


class LoopSlice:
    """A handler's clock for its per-entry work: :meth:`due` is cheap enough to ask once per
    entry (a small request never reaches the end of its first slice, so it never yields),
    :meth:`pause` gives the loop a turn and starts the next slice.

    Use as ``if sl.due(): await sl.pause()``: the test is a plain call, so the common small
    request pays no coroutine per entry."""

    __slots__ = ("_end",)

    def __init__(self) -> None:
        self._end = time.monotonic() + LOOP_SLICE_S

    def due(self) -> bool:
        return time.monotonic() >= self._end

    async def pause(self) -> None:
        await asyncio.sleep(0)
        self._end = time.monotonic() + LOOP_SLICE_S


DROP_CHUNK = 256
"""Items freed between two looks at the clock by :func:`drop_in_slices`."""


async def drop_in_slices(items: list[Any]) -> None:
    """Empty ``items`` a chunk at a time, with turns for the others in between.

    Freeing is work too: a handler that returns with 100,000 decoded partitions and their
    answers frees about a million objects in one go, and that held the loop 0.15 s (issue
    36). The caller empties the lists it holds the last references to once it is done with
    them, before it returns."""
    sl = LoopSlice()
    while items:
        del items[-DROP_CHUNK:]
        if sl.due():
            await sl.pause()


# -- the cyclic collector ---------------------------------------------------------------------
#
# A full collection walks every object the collector tracks, in one call, on whichever thread
# triggers it: on the loop, with some 5 objects per decoded partition, one took 0.12 s over
# the 100,000 partitions of one LeaderAndIsr (and more under load), and with 25,000 created
# logs about as much. Two rules keep them short. A long request holds full collections off
# while it is served (the young generations still run, so short-lived cycles still go): what
# it decodes is acyclic and freed by reference counting when it ends. What lives as long as
# the process (start-up's modules and logs, the logs the controller creates) is put out of
# the collector's sight once a full collection has proved it reachable.


class _Hold:
    """The requests holding full collections off, and the threshold to restore after them."""

    count = 0
    threshold = 0


@contextmanager
def full_collections_held() -> Iterator[None]:
    """No automatic full collection while the block runs (nested and concurrent blocks share
    one hold; the last to leave restores the threshold). Cyclic garbage that reaches the
    oldest generation meanwhile waits for the next full collection, it is not kept."""
    if _Hold.count == 0:
        t0, t1, _Hold.threshold = gc.get_threshold()
        gc.set_threshold(t0, t1, 2**31 - 1)
    _Hold.count += 1
    try:
        yield
    finally:
        _Hold.count -= 1
        if _Hold.count == 0:
            t0, t1, _ = gc.get_threshold()
            gc.set_threshold(t0, t1, _Hold.threshold)


def settle_long_lived() -> None:
    """Put every object alive now out of the collector's sight (``gc.freeze``), after a full
    collection so that no garbage is frozen with them. It walks only what is not frozen yet,
    so called as long-lived objects arrive, each call is short.

    A frozen object is still freed by reference counting when it dies; only a frozen cycle
    stays for good. Logs hold none (see ``storage.log._epoch_writer``), so a deleted
    replica's log goes; what else was alive in the call (a request in flight) is frozen
    with them, and its acyclic part is freed the same way."""
    gc.collect()
    gc.freeze()


_WS = re.compile(r"[ \t\n\r]*")


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; the validators' own decoder refuses them too.
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    assert m is not None  # the pattern matches the empty string
    return m.end()


def _expect(text: str, i: int, char: str) -> int:
    """The position after ``char`` at ``i`` (after whitespace), else ``ValueError``."""
    i = _skip(text, i)
    if text[i : i + 1] != char:
        raise ValueError(f"expected {char!r} at {i}")
    return i + 1


def decode_long_list(text: str, field: str, envelope: dict[str, Any]) -> Iterator[Any]:
    """Decode a JSON object whose member ``field`` is a long array, one item at a time.

    Yields the array's items in order; every other member is decoded whole into ``envelope``
    (``field`` itself is left out). ``envelope`` is complete once the iterator is exhausted,
    when the whole text has been checked to be one object and nothing after it. Each value is
    decoded by the standard decoder; only the object's and the array's punctuation is read
    here. Raises ``ValueError`` on anything malformed, on ``field`` missing, named twice or
    not an array (the caller then validates the text whole, for its error); a document nested
    too deep for the decoder raises ``RecursionError`` (the same).
    """
    i = _expect(text, 0, "{")
    seen = False
    if text[_skip(text, i) : _skip(text, i) + 1] == "}":
        i = _skip(text, i) + 1
    else:
        while True:
            i = _skip(text, i)
            key, i = _DECODER.raw_decode(text, i)
            if not isinstance(key, str):
                raise ValueError(f"object key at {i} is not a string")
            i = _skip(text, _expect(text, i, ":"))
            if key == field:
                if seen or text[i : i + 1] != "[":
                    raise ValueError(f"{field!r} is named twice or is not an array")
                seen = True
                i = yield from _array_items(text, i + 1)
            else:
                envelope[key], i = _DECODER.raw_decode(text, i)
            i = _skip(text, i)
            sep = text[i : i + 1]
            i += 1
            if sep == "}":
                break
            if sep != ",":
                raise ValueError(f"expected ',' or '}}' at {i - 1}")
    if _skip(text, i) != len(text):
        raise ValueError(f"extra data after the object at {i}")
    if not seen:
        raise ValueError(f"no {field!r} in the object")


def _array_items(text: str, i: int) -> Generator[Any, None, int]:
    """Items of the array whose ``[`` ends before ``i``; returns the position after its ``]``."""
    i = _skip(text, i)
    if text[i : i + 1] == "]":
        return i + 1
    while True:
        item, i = _DECODER.raw_decode(text, _skip(text, i))
        yield item
        i = _skip(text, i)
        sep = text[i : i + 1]
        i += 1
        if sep == "]":
            return i
        if sep != ",":
            raise ValueError(f"expected ',' or ']' at {i - 1}")
