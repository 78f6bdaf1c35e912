"""The compiled writers (``jbod_broker.kafka.writer``) write every entity of every API version
the broker serves byte for byte as kio's own writer does: the broker and the follower encode
with them, the tests' clients and kio's readers hold them to kio's definitions."""

from __future__ import annotations

import dataclasses
import io
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import get_field_tag
from kio.static.primitive import Records, i32

from jbod_broker.kafka import writer
from jbod_broker.kafka.protocol import SUPPORTED
from tests.kafka_entities import fetch_partition_data

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))


def kio_bytes(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def served_types() -> list[type[Any]]:
    """Every entity type (headers and nested ones included) of every served version."""
    seen: dict[type[Any], None] = {}
    for api_key, (lo, hi) in sorted(SUPPORTED.items()):
        for version in range(lo, hi + 1):
            request, response = (
                load_request_schema(api_key, version),
                load_response_schema(api_key, version),
            )
            for top in (request, response):
                seen[top.__header_schema__] = None
                for value in vars(sys.modules[top.__module__]).values():
                    if dataclasses.is_dataclass(value) and hasattr(value, "__flexible__"):
                        seen[value] = None  # type: ignore[index]
    return list(seen)


TYPES = served_types()


def without_tags(entity: Any) -> Any:
    """``entity`` with its own tagged fields at their defaults: the writer's fast path."""
    defaults = {
        f.name: get_tagged_field_default(f)
        for f in dataclasses.fields(entity)
        if get_field_tag(f) is not None
    }
    return dataclasses.replace(entity, **defaults) if defaults else entity


@pytest.mark.parametrize("entity_type", TYPES, ids=lambda t: f"{t.__module__}.{t.__name__}")
def test_every_served_entity_is_written_as_kio_writes_it(entity_type: type[Any]) -> None:
    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(entity_type))
    def check(entity: Any) -> None:
        assert b"".join(writer.encode(entity)) == kio_bytes(entity)
        plain = without_tags(entity)
        assert b"".join(writer.encode(plain)) == kio_bytes(plain)

    check()


class Spliced:
    """A stand-in for a file range in a records field: anything with a length."""

    def __len__(self) -> int:
        return 5


def test_a_value_that_is_not_bytes_stays_a_piece_of_its_own_after_its_length() -> None:
    part = fetch_partition_data(Spliced(), version=12)
    pieces = writer.join_pieces(writer.encode(part))
    assert len(pieces) == 3 and isinstance(pieces[1], Spliced)
    with_bytes = dataclasses.replace(part, records=b"12345")
    assert pieces[0] + b"12345" + pieces[2] == kio_bytes(with_bytes)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**21, 2**31 - 1, 2**35 - 1])
def test_varints_as_kio_writes_them(value: int) -> None:
    from kio.serial.writers import write_unsigned_varint

    buf = io.BytesIO()
    write_unsigned_varint(buf, value)  # type: ignore[arg-type]
    assert writer.uvarint(value) == buf.getvalue()


NullableInt = dataclasses.make_dataclass(
    "NullableInt",
    [("count", i32 | None, dataclasses.field(metadata={"kafka_type": "int32"}))],
    namespace={"__flexible__": False},
    frozen=True,
)
"""An entity no served version has: a nullable int32, which this module does not compile
(``make_dataclass`` so that the field's type is a type, as in kio's generated modules)."""


def test_an_entity_with_a_type_not_compiled_is_handed_to_kio_whole() -> None:
    """No placeholder path: what the compiler does not know, kio's writer writes (or refuses,
    with kio's own error, as kio does for this one), exactly as before the compiled writers."""
    with pytest.raises(Exception) as ours:
        writer.writer_for(NullableInt)
    with pytest.raises(Exception) as kios:
        entity_writer(NullableInt)
    assert type(ours.value) is type(kios.value) and str(ours.value) == str(kios.value)
