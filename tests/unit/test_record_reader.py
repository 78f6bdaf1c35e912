"""The record reader: one verdict whether compiled or interpreted, and bounded by its batch.

``setup.py`` compiles ``jbod_broker.storage.record_reader`` with mypyc (``make setup``), and the
compiled module is imported in preference to its source: the broker's verdicts are then the
compiled module's, while a checkout without the build runs the source. The differential tests
hold both to the same verdict (the same error and message, or the same decoded records) on
arbitrary bytes and on mutated batches, so a compiled module built from an older source cannot
pass for the current one; they are skipped where the module is not compiled.

The reader walks records where they lie in the caller's buffer instead of a copy of the batch,
so the bytes after a batch are readable to it: a batch whose records run short or long must be
refused all the same when another batch follows it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jbod_broker.storage import record_reader
from jbod_broker.storage.errors import StorageError
from jbod_broker.storage.records import (
    BATCH_HEADER_SIZE,
    Header,
    build_batch,
    decode_batch,
    parse_header,
    validate_batches,
)
from tests.bad_batches import BASE_TS, bad_batches
from tests.unit.test_records_fuzz import mutants

COMPILED = not record_reader.__file__.endswith(".py")
compiled_only = pytest.mark.skipif(
    not COMPILED, reason="record_reader is not compiled here (make setup builds it)"
)


def _source() -> ModuleType:
    """The reader's source as a module of its own, whatever ``import`` picks."""
    path = Path(record_reader.__file__).with_name("record_reader.py")
    spec = importlib.util.spec_from_file_location("_record_reader_source", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SOURCE = _source()


def _verdict(module: ModuleType, data: bytes, start: int, end: int, count: int, decode: bool):
    out: list[object] | None = [] if decode else None
    try:
        module.walk_records(data, start, end, count, out)
    except (StorageError, IndexError) as exc:
        return type(exc), str(exc)
    return "ok", out


def _same(data: bytes, start: int, end: int, count: int) -> None:
    for decode in (False, True):
        assert _verdict(record_reader, data, start, end, count, decode) == _verdict(
            SOURCE, data, start, end, count, decode
        ), "the compiled record_reader differs from its source: rebuild it (make setup)"


def _extreme_deltas() -> bytes:
    """Timestamp deltas of -2**63 and 2**63 - 1: zigzag forms of 2**64 - 1 and 2**64 - 2, past
    the 64-bit signed ints the compiled walk uses for everything else."""
    return build_batch(
        [(None, b"a"), (None, b"b")], base_timestamp=0, timestamps=[-(2**63), 2**63 - 1]
    )


def test_extreme_timestamp_deltas_are_accepted_and_decoded() -> None:
    data = _extreme_deltas()
    assert validate_batches(data)
    _, records = decode_batch(data)
    assert [r.timestamp for r in records] == [-(2**63), 2**63 - 1]


def test_the_source_module_is_the_interpreted_reader() -> None:
    assert str(SOURCE.__file__).endswith("record_reader.py")
    assert not hasattr(SOURCE.walk_records, "__mypyc_attrs__")


@compiled_only
def test_compiled_agrees_on_every_bad_batch_and_on_good_ones() -> None:
    batches = [bad.data for bad in bad_batches().values()]
    value = os.urandom(1024)
    batches += [
        build_batch([(b"key-%d" % i, value) for i in range(16)], base_timestamp=BASE_TS),
        build_batch([(None, b"v" * 10)] * 200, timestamps=list(range(BASE_TS, BASE_TS + 200))),
        build_batch([(b"k", b"v" * 20_000, [Header("h", None), Header("é", b"x")])]),
        _extreme_deltas(),
    ]
    for data in batches:
        count = parse_header(data).records_count
        _same(data, BATCH_HEADER_SIZE, len(data), count)


@compiled_only
@settings(derandomize=True, max_examples=400, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 6), st.integers(0, 120), st.integers(0, 130))
def test_compiled_agrees_on_arbitrary_bytes(data: bytes, count: int, start: int, end: int) -> None:
    _same(data, min(start, len(data)), min(end, len(data)), count)


@compiled_only
@settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutants())
def test_compiled_agrees_on_mutated_batches(data: bytes) -> None:
    count = parse_header(data).records_count
    _same(data, BATCH_HEADER_SIZE, len(data), min(count, 1000))


@pytest.mark.parametrize("name", sorted(bad_batches()))
def test_a_bad_batch_followed_by_a_good_one_is_refused(name: str) -> None:
    bad = bad_batches()[name]
    good = build_batch([(b"k", b"v" * 30)] * 3, base_timestamp=BASE_TS)
    with pytest.raises(StorageError) as exc:
        validate_batches(bad.data + good)
    assert exc.value.kafka_error == bad.error
    assert "position 0" in str(exc.value)
    for word in bad.words:
        assert word.lower() in str(exc.value).lower()
