"""Issue 36 (3): the pure parts of the loop's rules (loop_slice) and of the long-list codec.

A long JSON list is decoded an item at a time (``decode_long_list``) and answered a chunk at a
time (``respond_long_list``): both must read and write exactly what the whole-document codec
does. Full collections are held off while a long request is served and restored after it; a
frozen log is freed once its replica is deleted.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from pathlib import Path
from typing import Any

import pytest

from jbod_broker import wire
from jbod_broker.loop_slice import (
    decode_long_list,
    drop_in_slices,
    full_collections_held,
    settle_long_lived,
)
from jbod_broker.server import LIST_CHUNK, _list_bounds, respond_long_list
from jbod_broker.storage.log_manager import LogManager
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch


def decode(text: str, field: str = "xs") -> tuple[list[Any], dict[str, Any]]:
    envelope: dict[str, Any] = {}
    items = list(decode_long_list(text, field, envelope))
    return items, envelope


@pytest.mark.parametrize(
    "doc",
    [
        {"xs": []},
        {"xs": [1, "a", None, {"k": [1, 2]}, [3]], "a": 1},
        {"a": {"xs": [9]}, "xs": [True, 1.5], "b": [1, 2], "c": "x"},
    ],
)
def test_items_and_envelope_are_what_the_whole_decoder_reads(doc: dict[str, Any]) -> None:
    for text in (
        json.dumps(doc),
        json.dumps(doc, indent=2),
        json.dumps(doc, separators=(",", ":")),
    ):
        items, envelope = decode(text)
        assert items == doc.get("xs", [])
        assert envelope == {k: v for k, v in doc.items() if k != "xs"}


def test_a_document_nested_too_deep_raises_recursion_error() -> None:
    with pytest.raises(RecursionError):
        decode('{"xs": [' + "[" * 100_000 + "]" * 100_000 + "]}")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"xs": [1, 2]',
        '{"xs": [1 2]}',
        '{"xs": [1,]}',
        '{"xs": 5}',
        '{"xs": [1], "xs": [2]}',
        '{"xs": [1]} x',
        '{"xs": [NaN]}',
        '{"a": Infinity, "xs": []}',
        '{1: 2, "xs": []}',
        '{"a" 1, "xs": []}',
        '{"a": 1 "xs": []}',
        '{"b": "no list"}',
        "{}",
    ],
)
def test_malformed_documents_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        decode(text)


def test_items_come_one_at_a_time_before_the_rest_is_read() -> None:
    """An over-limit list is refused once its limit is passed: the decoder hands the first
    item over before it has looked at what follows (here, garbage)."""
    it = decode_long_list('{"xs": [1, 2, oops', "xs", {})
    assert next(it) == 1
    assert next(it) == 2
    with pytest.raises(ValueError):
        next(it)


def test_list_bounds_read_the_model() -> None:
    assert _list_bounds(wire.AlterReplicaLogDirsRequest, "partitions") == (
        1,
        wire.MAX_ALTER_LOG_DIRS,
    )
    assert _list_bounds(wire.LeaderAndIsrRequest, "partitions") == (0, wire.MAX_LIST)


def answer(n: int) -> wire.LeaderAndIsrResponse:
    return wire.LeaderAndIsrResponse(
        partitions=[
            wire.PartitionResult(topic="t", partition=p)
            if p % 3
            else wire.PartitionResult(
                topic="t", partition=p, error="KAFKA_STORAGE_ERROR", message=f'dir "{p}" failed'
            )
            for p in range(n)
        ]
    )


@pytest.mark.parametrize("n", [0, 1, LIST_CHUNK, LIST_CHUNK + 1, 3 * LIST_CHUNK + 7])
def test_a_long_answer_is_the_same_bytes_as_the_whole_one(n: int) -> None:
    model = answer(n)
    resp = asyncio.run(respond_long_list(model, "partitions"))
    assert resp.body == model.model_dump_json().encode()
    assert resp.content_type == "application/json"


def test_drop_in_slices_empties_the_list() -> None:
    items = list(range(10_000))
    asyncio.run(drop_in_slices(items))
    assert items == []


def test_full_collections_are_held_off_and_restored_by_the_last_to_leave() -> None:
    before = gc.get_threshold()
    with full_collections_held():
        held = gc.get_threshold()
        assert held[:2] == before[:2] and held[2] > before[2]
        with full_collections_held():
            pass
        assert gc.get_threshold() == held  # the inner block leaves the hold in place
    assert gc.get_threshold() == before


def test_full_collections_are_restored_when_the_block_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), full_collections_held():
        raise RuntimeError("the request failed")
    assert gc.get_threshold() == before


def test_a_frozen_log_is_freed_when_its_replica_is_deleted(tmp_path: Path) -> None:
    """A log the collector no longer sees is freed by reference counting alone: it holds no
    cycle, also after appends, a roll and a new leader epoch (else every replica deleted
    after ``gc.freeze`` would stay in memory for good)."""
    lm = LogManager([str(tmp_path / "d0")], broker_id=1)
    lm.startup()
    tp = TopicPartition("t", 0)
    lg = lm.get_or_create_log(tp, is_new=True, topic_id="AQIDBAUGBwgJCgsMDQ4PEA")
    lg.epochs.assign(3, 0)
    for i in range(5):
        lg.append_as_leader(build_batch([(b"k", bytes([i]) * 100)]), 3)
    lg.roll()
    ref = weakref.ref(lg)
    del lg
    settle_long_lived()
    gc.disable()
    try:
        lm.delete_log(tp)
        assert ref() is None, "the deleted log is still alive: it is in a cycle"
    finally:
        gc.enable()
        gc.unfreeze()
