"""`construct` definitions of every declared message version, derived from the schema DSL.

This is the reference layer: `construct_for(message, version)` builds a construct `Struct`
(wrapped to produce/accept our dataclasses) from the same declaration the fast codecs in
schema.py are derived from, with Kafka's primitive encodings written as small construct
classes (nullable int16/int32-length strings and bytes, compact uvarint+1 variants, nullable
arrays, tagged-field sections that parse the declared tags, skip unknown ones and write the
declared ones whose value is not the default, in tag order). Tests check the fast
codec against it byte for byte. It is slower and not hardened against hostile input (construct
allocates before checking counts), so the server never runs it on client bytes.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

import construct as c

from log.protocol.schema import (
    BOOL,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    ArrayType,
    Message,
    Primitive,
    StructType,
    in_range,
)

_FIXED = {
    INT8: c.Int8sb,
    INT16: c.Int16sb,
    INT32: c.Int32sb,
    INT64: c.Int64sb,
    UINT16: c.Int16ub,
    UINT32: c.Int32ub,
    FLOAT64: c.Float64b,
    BOOL: c.Flag,
}


class _Length(c.Construct):
    """A length/count prefix: int16/int32 (-1 = null) or compact uvarint N+1 (0 = null)."""

    def __init__(self, compact: bool, wide: bool) -> None:
        super().__init__()
        self.prefix = c.VarInt if compact else (c.Int32sb if wide else c.Int16sb)
        self.compact = compact

    def _parse(self, stream, context, path):
        value = self.prefix._parsereport(stream, context, path)
        return value - 1 if self.compact else value

    def _build(self, obj, stream, context, path):
        self.prefix._build(obj + 1 if self.compact else obj, stream, context, path)
        return obj


class _Blob(c.Construct):
    """string / bytes / records, nullable or not."""

    def __init__(self, is_string: bool, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.length = _Length(compact, wide=not is_string)
        self.is_string = is_string
        self.nullable = nullable

    def _parse(self, stream, context, path):
        length = self.length._parsereport(stream, context, path)
        if length < 0:
            if self.nullable and length == -1:
                return None
            raise c.ExplicitError(f"negative length {length}", path=path)
        data = c.stream_read(stream, length, path)
        return data.decode("utf-8") if self.is_string else data

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise c.ExplicitError("null in a non-nullable field", path=path)
            self.length._build(-1, stream, context, path)
            return obj
        data = obj.encode("utf-8") if self.is_string else bytes(obj)
        self.length._build(len(data), stream, context, path)
        c.stream_write(stream, data, len(data), path)
        return obj


class _Array(c.Construct):
    def __init__(self, element: c.Construct, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.count = _Length(compact, wide=True)
        self.element = element
        self.nullable = nullable

    def _parse(self, stream, context, path):
        count = self.count._parsereport(stream, context, path)
        if count < 0:
            if self.nullable and count == -1:
                return None
            raise c.ExplicitError(f"negative count {count}", path=path)
        return [self.element._parsereport(stream, context, path) for _ in range(count)]

    def _build(self, obj, stream, context, path):
        if obj is None:
            if not self.nullable:
                raise c.ExplicitError("null in a non-nullable array", path=path)
            self.count._build(-1, stream, context, path)
            return obj
        self.count._build(len(obj), stream, context, path)
        for item in obj:
            self.element._build(item, stream, context, path)
        return obj


class _NullableStruct(c.Construct):
    """A nullable struct: an int8 marker, -1 for null, 1 before a present struct."""

    def __init__(self, subcon: c.Construct) -> None:
        super().__init__()
        self.subcon = subcon

    def _parse(self, stream, context, path):
        marker = c.Int8sb._parsereport(stream, context, path)
        if marker == -1:
            return None
        if marker != 1:
            raise c.ExplicitError(f"bad nullable struct marker {marker}", path=path)
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            c.Int8sb._build(-1, stream, context, path)
            return obj
        c.Int8sb._build(1, stream, context, path)
        self.subcon._build(obj, stream, context, path)
        return obj


class _TaggedFields(c.Construct):
    """A tagged-field section: {name: value} of the declared tags (others skipped); built from
    such a dict, writing only values that differ from their field's default."""

    def __init__(self, fields: dict[int, tuple[str, c.Construct, Any]] | None = None) -> None:
        super().__init__()
        self.fields = fields or {}  # tag -> (name, construct, default)

    def _parse(self, stream, context, path):
        values = {}
        for _ in range(c.VarInt._parsereport(stream, context, path)):
            tag = c.VarInt._parsereport(stream, context, path)
            data = c.stream_read(stream, c.VarInt._parsereport(stream, context, path), path)
            if tag in self.fields:
                name, sub, _ = self.fields[tag]
                values[name] = sub.parse(data)
        return values

    def _build(self, obj, stream, context, path):
        obj = obj or {}
        present = [
            (tag, sub.build(obj[name]))
            for tag, (name, sub, default) in sorted(self.fields.items())
            if name in obj and obj[name] != default
        ]
        c.VarInt._build(len(present), stream, context, path)
        for tag, data in present:
            c.VarInt._build(tag, stream, context, path)
            c.VarInt._build(len(data), stream, context, path)
            c.stream_write(stream, data, len(data), path)
        return obj


class _Uuid(c.Adapter):
    def _decode(self, obj, context, path):
        return uuid.UUID(bytes=obj)

    def _encode(self, obj, context, path):
        return obj.bytes


class _Dataclass(c.Adapter):
    """construct Container <-> our frozen dataclass (absent fields take their defaults)."""

    def __init__(self, subcon: c.Construct, struct_type: StructType, version: int) -> None:
        super().__init__(subcon)
        self.struct_type = struct_type
        self.present = [
            f.name for f in struct_type.fields if in_range(version, f.versions) and f.tag is None
        ]
        self.tagged = {
            f.name: f.default_value()
            for f in struct_type.fields
            if in_range(version, f.versions) and f.tag is not None
        }
        self.absent = {
            f.name: f.default_value()
            for f in struct_type.fields
            if not in_range(version, f.versions)
        }

    def _decode(self, obj, context, path):
        tags = obj.get("_tagged_fields") or {}
        tagged = {name: tags.get(name, default) for name, default in self.tagged.items()}
        return self.struct_type.cls(
            **{name: obj[name] for name in self.present}, **tagged, **self.absent
        )

    def _encode(self, obj, context, path):
        built = {name: getattr(obj, name) for name in self.present}
        built["_tagged_fields"] = {name: getattr(obj, name) for name in self.tagged}
        return built


def _value(field: Any, type_: Any, version: int, flexible: bool, nullable: bool) -> c.Construct:
    if isinstance(type_, ArrayType):
        return _Array(_value(field, type_.element, version, flexible, False), flexible, nullable)
    if isinstance(type_, StructType):
        built = _struct(type_, version, flexible)
        return _NullableStruct(built) if nullable else built
    assert isinstance(type_, Primitive)
    if type_ in _FIXED:
        return _FIXED[type_]
    if type_ is UUID:
        return _Uuid(c.Bytes(16))
    return _Blob(type_ is STRING, flexible, nullable)


def _struct(struct_type: StructType, version: int, flexible: bool) -> c.Construct:
    members = [
        field.name / _value(field, field.type, version, flexible, in_range(version, field.nullable))
        for field in struct_type.fields
        if in_range(version, field.versions) and field.tag is None
    ]
    tagged = {
        field.tag: (
            field.name,
            _value(field, field.type, version, flexible, in_range(version, field.nullable)),
            field.default_value(),
        )
        for field in struct_type.fields
        if in_range(version, field.versions) and field.tag is not None
    }
    if flexible:
        members.append("_tagged_fields" / _TaggedFields(tagged))
    return _Dataclass(c.Struct(*members), struct_type, version)


def request_header(version: int) -> c.Construct:
    """Request header v1 (v2 adds tagged fields; client_id stays an int16-length string)."""
    assert version in (1, 2)
    members = [
        "api_key" / c.Int16sb,
        "api_version" / c.Int16sb,
        "correlation_id" / c.Int32sb,
        "client_id" / _Blob(is_string=True, compact=False, nullable=True),
    ]
    if version == 2:
        members.append("_tagged_fields" / _TaggedFields())
    return c.Struct(*members)


def response_header(version: int) -> c.Construct:
    """Response header v0 (v1 adds tagged fields)."""
    assert version in (0, 1)
    members = ["correlation_id" / c.Int32sb]
    if version == 1:
        members.append("_tagged_fields" / _TaggedFields())
    return c.Struct(*members)


@functools.cache
def construct_for(message: Message, version: int) -> c.Construct:
    """The construct definition of `message` at `version` (parses to / builds from dataclasses)."""
    assert message.supports(version)
    return _struct(message.struct, version, message.is_flexible(version))


__all__ = ["RECORDS", "construct_for", "request_header", "response_header"]
