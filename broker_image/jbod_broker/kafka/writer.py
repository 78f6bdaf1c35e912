"""kio's entities encoded by writers compiled once per entity type, byte for byte as kio's own.

Why this exists: kio's writer (``kio.serial.entity_writer``) calls a Python function per field
and re-checks its phantom types on every length and varint, so encoding one follower Fetch or
its response cost about 0.2 ms each, more than the 16 KiB produce being replicated (issue 18,
docs/benchmarks.md). Replication pays that twice per round per follower.

Nothing here spells a message. The writer for an entity type is compiled from the definitions
kio's writer reads (each dataclass field in order, its ``kafka_type`` and ``tag`` metadata,
kio's own field classification, nullability and tagged-field defaults): each run of fixed-width
fields is packed with one ``struct`` call, strings, bytes and arrays are written with their
compact or legacy lengths, and an empty tagged-field section (nearly always) is one byte. An
entity with a tagged field set is handed to kio's writer whole, so what kio alone knows how to
write (tagged fields) stays kio's. ``tests/unit/test_kafka_writer.py`` holds the two to the
same bytes for every entity of every API version the broker serves.

Output is a list of pieces: ``bytes``, and any value a bytes-typed field holds that is not
bytes (a ``storage.log.FileSlice`` of records), written as it is after the length prefix taken
from its ``len()``, as kio does; :func:`join_pieces` merges the bytes between such values.

Thread-safety: a writer is compiled once per type and is pure.
"""

from __future__ import annotations

import dataclasses
import datetime
import operator
import struct
from collections.abc import Callable, Sequence
from typing import Any

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial.errors import OutOfBoundValue

Pieces = list[Any]
Writer = Callable[[Pieces, Any], None]
Convert = Callable[[Any], Any]

_VARINT1 = tuple(bytes((i,)) for i in range(128))
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_NULL_I16 = _I16.pack(-1)
_NULL_I32 = _I32.pack(-1)
_NULL_ENTITY = struct.pack(">b", -1)
_NOT_NULL_ENTITY = struct.pack(">b", 1)
_NO_TAGS = b"\x00"
_UUID_ZERO = bytes(16)


def uvarint(value: int) -> bytes:
    """An unsigned varint as kio writes it (7 bits a byte, low first)."""
    if value < 0x80:
        return _VARINT1[value]
    out = bytearray()
    while value >= 0x80:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def _millis(value: datetime.timedelta) -> int:
    return round(value.total_seconds() * 1000)


def _epoch_millis(value: datetime.datetime) -> int:
    return round(value.timestamp() * 1000)


def _nullable_epoch_millis(value: datetime.datetime | None) -> int:
    return -1 if value is None else _epoch_millis(value)


def _uuid_bytes(value: Any) -> bytes:
    return _UUID_ZERO if value is None else bytes(value.bytes)


_FIXED: dict[str, tuple[str, Convert | None]] = {
    "int8": ("b", None),
    "int16": ("h", None),
    "int32": ("i", None),
    "int64": ("q", None),
    "uint8": ("B", None),
    "uint16": ("H", None),
    "uint32": ("I", None),
    "uint64": ("Q", None),
    "float64": ("d", None),
    "bool": ("?", None),
    "error_code": ("h", operator.attrgetter("value")),
    "timedelta_i32": ("i", _millis),
    "timedelta_i64": ("q", _millis),
    "datetime_i64": ("q", _epoch_millis),
    "uuid": ("16s", _uuid_bytes),
}
"""kio's fixed-width types: struct code and how kio turns the value into what it packs."""


def _fixed(kafka_type: str, optional: bool) -> tuple[str, Convert | None] | None:
    if kafka_type == "uuid":
        return _FIXED["uuid"]  # kio writes a null UUID as zeros, nullable or not
    if kafka_type == "datetime_i64" and optional:
        return "q", _nullable_epoch_millis
    if optional:
        return None  # kio has no nullable form of the others (its writer refuses them)
    return _FIXED.get(kafka_type)


def _string_writer(flexible: bool, nullable: bool, legacy_width: int) -> Writer:
    """kio's strings, bytes and records: compact (length + 1 as a varint, 0 for null) in a
    flexible version, else an int16 (strings) or int32 (bytes) length, -1 for null."""

    def write_compact(out: Pieces, value: Any) -> None:
        if value is None:
            if not nullable:
                raise TypeError("Unexpectedly received None value")
            out.append(_VARINT1[0])
            return
        if isinstance(value, str):
            value = value.encode()
        out.append(uvarint(len(value) + 1))
        out.append(value)

    length = _I16 if legacy_width == 2 else _I32
    null = _NULL_I16 if legacy_width == 2 else _NULL_I32
    limit = 2 ** (8 * legacy_width - 1) - 1

    def write_legacy(out: Pieces, value: Any) -> None:
        if value is None:
            if not nullable:
                raise TypeError("Unexpectedly received None value")
            out.append(null)
            return
        if isinstance(value, str):
            value = value.encode()
        if len(value) > limit:
            raise OutOfBoundValue(f"{len(value)} bytes are too long for a legacy length")
        out.append(length.pack(len(value)))
        out.append(value)

    return write_compact if flexible else write_legacy


def _array_writer(flexible: bool, item: Writer) -> Writer:
    def write_compact(out: Pieces, items: Sequence[Any] | None) -> None:
        if items is None:
            out.append(_VARINT1[0])
            return
        out.append(uvarint(len(items) + 1))
        for x in items:
            item(out, x)

    def write_legacy(out: Pieces, items: Sequence[Any] | None) -> None:
        if items is None:
            out.append(_NULL_I32)
            return
        if len(items) > 2**31 - 1:
            raise OutOfBoundValue(f"an array of {len(items)} items is too long")
        out.append(_I32.pack(len(items)))
        for x in items:
            item(out, x)

    return write_compact if flexible else write_legacy


def _primitive_writer(kafka_type: str, flexible: bool, optional: bool) -> Writer:
    fixed = _fixed(kafka_type, optional)
    if fixed is not None:
        code, convert = fixed
        packer = struct.Struct(">" + code)
        if convert is None:
            return lambda out, v: out.append(packer.pack(v))
        return lambda out, v: out.append(packer.pack(convert(v)))
    if kafka_type == "string":
        return _string_writer(flexible, optional, 2)
    if kafka_type in ("bytes", "records"):
        return _string_writer(flexible, optional, 4)
    raise NotImplementedError(f"no writer for kafka_type {kafka_type!r} {optional=}")


def _field_writer(field: dataclasses.Field[Any], flexible: bool, request_header: bool) -> Writer:
    """One non-tagged field's writer, chosen as kio's ``get_field_writer`` chooses."""
    if request_header and field.name == "client_id":
        # Kafka's one exception: the request header's client id is always a legacy string.
        return _string_writer(False, True, 2)
    optional = is_optional(field)
    match classify_field(field):
        case PrimitiveField():
            return _primitive_writer(get_schema_field_type(field), flexible, optional)
        case PrimitiveTupleField():
            item = _primitive_writer(get_schema_field_type(field), flexible, False)
            return _array_writer(flexible, item)
        case EntityField(entity_type):
            write = writer_for(entity_type)
            if not optional:
                return write

            def write_nullable(out: Pieces, value: Any) -> None:
                if value is None:
                    out.append(_NULL_ENTITY)
                else:
                    out.append(_NOT_NULL_ENTITY)
                    write(out, value)

            return write_nullable
        case EntityTupleField(entity_type):
            return _array_writer(flexible, writer_for(entity_type))
    raise AssertionError(field)  # pragma: no cover - classify_field names these four


class _Sink:
    """What kio's writer writes to when an entity is handed to it: the same pieces list."""

    __slots__ = ("pieces",)

    def __init__(self, pieces: Pieces) -> None:
        self.pieces = pieces

    def write(self, value: Any) -> int:
        self.pieces.append(value)
        return len(value)


_WRITERS: dict[type[Any], Writer] = {}


def writer_for(entity_type: type[Any]) -> Writer:
    """The compiled writer of one kio entity type: ``writer(pieces, entity)`` appends the
    entity's encoding to ``pieces``. Compiled on first use (two threads compiling the same
    type at once build equal writers; either is kept)."""
    write = _WRITERS.get(entity_type)
    if write is None:
        write = _WRITERS[entity_type] = _compile(entity_type)
    return write


def _compile(entity_type: type[Any]) -> Writer:
    flexible: bool = entity_type.__flexible__
    request_header = entity_type.__name__ == "RequestHeader"
    steps: list[Writer] = []
    tagged: list[tuple[str, Any]] = []
    run: list[tuple[str, str, Convert | None]] = []

    def close_run() -> None:
        if run:
            steps.append(_run_writer(list(run)))
            run.clear()

    for f in dataclasses.fields(entity_type):
        if get_field_tag(f) is not None:
            tagged.append((f.name, get_tagged_field_default(f)))
            continue
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField) and not (request_header and f.name == "client_id"):
            fixed = _fixed(get_schema_field_type(f), is_optional(f))
            if fixed is not None:
                run.append((f.name, *fixed))
                continue
        close_run()
        steps.append(_getting(f.name, _field_writer(f, flexible, request_header)))
    close_run()
    if not flexible:
        return _sequence(steps)
    kio_write = entity_writer(entity_type)
    write_fields = _sequence(steps)

    def write_flexible(out: Pieces, entity: Any) -> None:
        for name, default in tagged:
            value = getattr(entity, name)
            if value is not default and value != default:
                kio_write(_Sink(out), entity)  # type: ignore[arg-type]  # it only calls write
                return
        write_fields(out, entity)
        out.append(_NO_TAGS)

    return write_flexible


def _getting(name: str, write: Writer) -> Writer:
    get = operator.attrgetter(name)
    return lambda out, entity: write(out, get(entity))


def _sequence(steps: list[Writer]) -> Writer:
    if len(steps) == 1:
        return steps[0]
    frozen = tuple(steps)

    def write_all(out: Pieces, entity: Any) -> None:
        for step in frozen:
            step(out, entity)

    return write_all


def _run_writer(run: list[tuple[str, str, Convert | None]]) -> Writer:
    """Consecutive fixed-width fields packed by one struct."""
    packer = struct.Struct(">" + "".join(code for _, code, _ in run))
    names = [name for name, _, _ in run]
    converts = [(i, c) for i, (_, _, c) in enumerate(run) if c is not None]
    if len(names) == 1:
        name = names[0]
        get_one = operator.attrgetter(name)
        if not converts:
            return lambda out, entity: out.append(packer.pack(get_one(entity)))
        convert = converts[0][1]
        return lambda out, entity: out.append(packer.pack(convert(get_one(entity))))
    get = operator.attrgetter(*names)
    if not converts:
        return lambda out, entity: out.append(packer.pack(*get(entity)))

    def write_converted(out: Pieces, entity: Any) -> None:
        values = list(get(entity))
        for i, convert in converts:
            values[i] = convert(values[i])
        out.append(packer.pack(*values))

    return write_converted


def encode(entity: Any) -> Pieces:
    """``entity``'s pieces (see the module's docstring)."""
    out: Pieces = []
    writer_for(type(entity))(out, entity)
    return out


def join_pieces(pieces: Pieces) -> list[Any]:
    """The pieces with each run of bytes between non-bytes values joined into one ``bytes``;
    empty runs dropped."""
    joined: list[Any] = []
    run: list[Any] = []
    for p in pieces:
        if isinstance(p, bytes | bytearray | memoryview):
            run.append(p)
            continue
        if run:
            joined.append(b"".join(run))
            run = []
        joined.append(p)
    if run:
        joined.append(b"".join(run))
    return [p for p in joined if len(p)]
