"""A small schema DSL for Kafka API messages, and the fast codecs derived from it.

Each API message is declared once, transcribed from Apache Kafka's JSON message definition
(clients/src/main/resources/common/message/*.json): a `message(...)` of `F(...)` fields, each
with its type, the versions it exists in, the versions it is nullable in, and its default.
From that one declaration we derive, per version:

- a frozen dataclass per struct (fields of every version; absent fields take their default),
  made cheaply by struct_class.py,
- a fast decoder/encoder (this module): Python source generated per struct and version, with
  runs of fixed-width fields packed/unpacked by one `struct.Struct`, strings and bytes read
  inline (a flexible version's one-byte compact length too), and an empty tagged section (the
  usual case) read and written without a call; used on every request, hot paths included. Records stay a zero-copy
  `memoryview` into the frame on decode, and are appended as-is (no copy) on encode,
- a `construct` definition (`wire_construct.py`), the reference the tests check the fast codec
  against byte for byte.

Encodings (non-flexible | flexible versions, KIP-482):

    int8/16/32/64, uint16/32, float64, bool   big-endian fixed width
    uuid                                      16 bytes
    string                 int16 length, -1 = null | uvarint length+1, 0 = null
    bytes, records         int32 length, -1 = null | uvarint length+1, 0 = null
    array                  int32 count, -1 = null  | uvarint count+1, 0 = null
    tagged fields          (none)                  | uvarint count, then (uvarint tag,
                                                     uvarint size, size bytes) per field,
                                                     after every struct

Decoding is bounded: every length and count is checked against the bytes that remain before
anything is allocated, so a forged count costs nothing; any malformation raises
`InvalidRequestError` (errors.py), never an untyped exception. A field declared with a `tag`
(Kafka's taggedVersions, which are always its versions here) lives in the tagged section of
the flexible versions: decoded when present (default otherwise), written only when its value
differs from its default, in tag order, as Kafka does. Unknown tags are skipped.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from log.common.errors import InvalidRequestError
from log.protocol.struct_class import make_struct_class

# Limits: Kafka caps nothing below the frame size itself, so neither do we, except where a
# value could make us allocate: every count/length is checked against the remaining bytes.
MAX_TAGGED_FIELDS = 1024  # per struct; Kafka defines a handful, this only bounds the loop

_UNSET: Any = object()  # "no explicit default": the type's natural default applies

Versions = tuple[int, int]  # inclusive; (1, 0) is the empty range
NO_VERSIONS: Versions = (1, 0)
ALL_VERSIONS: Versions = (0, 32767)


def parse_versions(spec: str | None) -> Versions:
    """Kafka's version-range syntax: "3+", "0-8", "5", "none"."""
    if spec is None or spec == "none":
        return NO_VERSIONS
    if spec.endswith("+"):
        return (int(spec[:-1]), ALL_VERSIONS[1])
    if "-" in spec:
        low, high = spec.split("-")
        return (int(low), int(high))
    return (int(spec), int(spec))


def in_range(version: int, versions: Versions) -> bool:
    return versions[0] <= version <= versions[1]


# --- types ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Primitive:
    """A scalar type. `fmt` is its struct format when fixed-width, else None."""

    name: str
    fmt: str | None
    default: Any


INT8 = Primitive("int8", "b", 0)
INT16 = Primitive("int16", "h", 0)
INT32 = Primitive("int32", "i", 0)
INT64 = Primitive("int64", "q", 0)
UINT16 = Primitive("uint16", "H", 0)
UINT32 = Primitive("uint32", "I", 0)
FLOAT64 = Primitive("float64", "d", 0.0)
BOOL = Primitive("bool", "?", False)
UUID = Primitive("uuid", None, uuid.UUID(int=0))
STRING = Primitive("string", None, "")
BYTES = Primitive("bytes", None, b"")
# A record set: bytes that are never decoded here; decoded as a memoryview into the frame.
RECORDS = Primitive("records", None, b"")  # Kafka sends empty records, not null, by default


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    type: Any  # Primitive | ArrayType | StructType
    versions: Versions = ALL_VERSIONS
    nullable: Versions = NO_VERSIONS
    default: Any = _UNSET
    tag: int | None = None  # a tagged field (flexible versions only)

    def default_value(self) -> Any:
        if self.default is not _UNSET:
            return self.default
        if isinstance(self.type, ArrayType):
            return []
        if isinstance(self.type, StructType):
            return self.type.cls()
        return self.type.default


@dataclasses.dataclass(frozen=True, eq=False)
class ArrayType:
    element: Any  # Primitive | StructType


@dataclasses.dataclass(eq=False)
class StructType:
    name: str
    fields: tuple[Field, ...]
    cls: Any = None  # the generated dataclass


def F(
    name: str,
    type_: Any,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    default: Any = _UNSET,
    tag: int | None = None,
) -> Field:
    """Declare a field: Kafka JSON's name (snake_case), type, versions, nullableVersions, and
    its tag when Kafka declares it tagged (taggedVersions equal to its versions)."""
    assert tag is None or tag >= 0
    return Field(name, type_, parse_versions(versions), parse_versions(nullable), default, tag)


def ARRAY(element: Any) -> ArrayType:
    return ArrayType(element)


def STRUCT(name: str, *fields: Field) -> StructType:
    return StructType(name, tuple(fields))


def _make_dataclass(struct_type: StructType) -> Any:  # a class made at run time: untyped
    for field in struct_type.fields:
        element = field.type.element if isinstance(field.type, ArrayType) else field.type
        if isinstance(element, StructType) and element.cls is None:
            _make_dataclass(element)
    defaults = {field.name: field.default_value() for field in struct_type.fields}
    cls = make_struct_class(struct_type.name, defaults, "log.protocol.messages")
    struct_type.cls = cls
    for field in struct_type.fields:
        element = field.type.element if isinstance(field.type, ArrayType) else field.type
        if isinstance(element, StructType):
            setattr(cls, element.name, element.cls)
    return cls


def _nested_structs(struct_type: StructType) -> list[StructType]:
    found = []
    for field in struct_type.fields:
        element = field.type.element if isinstance(field.type, ArrayType) else field.type
        if isinstance(element, StructType):
            found.append(element)
            found.extend(_nested_structs(element))
    return found


# --- messages ---------------------------------------------------------------------------------


class Message:
    """One request or response type: its declaration and its per-version codecs.

    `Message.cls` is the body dataclass; nested struct classes hang off it by their Kafka
    name, e.g. `PRODUCE_RESPONSE.cls.PartitionProduceResponse`.
    """

    def __init__(
        self,
        name: str,
        api_key: int | None,
        versions: Versions,
        flexible_versions: Versions,
        fields: tuple[Field, ...],
    ) -> None:
        self.name = name
        self.api_key = api_key
        self.versions = versions
        self.flexible_versions = flexible_versions
        self.struct = StructType(name, fields)
        self.cls = _make_dataclass(self.struct)
        for struct_type in _nested_structs(self.struct):
            setattr(self.cls, struct_type.name, struct_type.cls)
        self._decoders: dict[int, Callable[[Any, int], tuple[Any, int]]] = {}
        self._encoders: dict[int, Callable[[Any, list], None]] = {}

    def __repr__(self) -> str:
        return f"<Message {self.name} v{self.versions[0]}-{self.versions[1]}>"

    def is_flexible(self, version: int) -> bool:
        return in_range(version, self.flexible_versions)

    def supports(self, version: int) -> bool:
        return in_range(version, self.versions)

    def __call__(self, **fields: Any) -> Any:
        return self.cls(**fields)

    def decode(self, buf: bytes | memoryview, version: int, position: int = 0) -> tuple[Any, int]:
        """Decode a body at `position`; return (body, next position). Raises InvalidRequestError."""
        decoder = self._decoders.get(version)
        if decoder is None:
            decoder = self._decoders[version] = self._compile_decoder(version)
        if not isinstance(buf, memoryview):
            buf = memoryview(buf)
        try:
            return decoder(buf, position)
        except InvalidRequestError:
            raise
        except (struct.error, ValueError, UnicodeDecodeError, IndexError, OverflowError) as exc:
            raise InvalidRequestError(f"malformed {self.name} v{version}: {exc}") from None

    def encode_parts(self, body: Any, version: int, parts: list) -> None:
        """Append the encoding of `body` to `parts` (bytes and zero-copy record buffers)."""
        encoder = self._encoders.get(version)
        if encoder is None:
            encoder = self._encoders[version] = self._compile_encoder(version)
        try:
            encoder(body, parts)
        except (struct.error, AttributeError, TypeError, ValueError) as exc:
            # A body the caller built wrongly (a value out of its type's range, a missing
            # field): our bug, not the peer's, so not a KafkaError.
            raise ValueError(f"cannot encode {self.name} v{version}: {exc}") from exc

    def encode(self, body: Any, version: int) -> bytes:
        parts: list = []
        self.encode_parts(body, version, parts)
        return b"".join(parts)

    def _compile_decoder(self, version: int) -> Callable[[Any, int], tuple[Any, int]]:
        assert self.supports(version), f"{self.name} has no version {version}"
        return _struct_decoder(self.struct, version, self.is_flexible(version))

    def _compile_encoder(self, version: int) -> Callable[[Any, list], None]:
        assert self.supports(version), f"{self.name} has no version {version}"
        return _struct_encoder(self.struct, version, self.is_flexible(version))


def message(
    name: str,
    *,
    api_key: int | None,
    versions: str,
    flexible_versions: str,
    fields: Sequence[Field],
) -> Message:
    return Message(
        name, api_key, parse_versions(versions), parse_versions(flexible_versions), tuple(fields)
    )


# --- varints ----------------------------------------------------------------------------------


def read_uvarint(buf: Any, position: int) -> tuple[int, int]:
    """Unsigned LEB128 (Kafka's UNSIGNED_VARINT), at most 5 bytes (32 bits)."""
    if position < len(buf) and buf[position] < 0x80:  # one byte: nearly every length and count
        return buf[position], position + 1
    result = 0
    for shift in range(0, 35, 7):
        if position >= len(buf):
            raise InvalidRequestError("unsigned varint runs past the end of the frame")
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
    raise InvalidRequestError("unsigned varint longer than 5 bytes")


def uvarint_bytes(value: int) -> bytes:
    assert value >= 0
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UVARINTS = [uvarint_bytes(i) for i in range(128)]


def _uvarint(value: int) -> bytes:
    return _SMALL_UVARINTS[value] if value < 128 else uvarint_bytes(value)


def skip_tagged_fields(buf: Any, position: int) -> int:
    if position < len(buf) and buf[position] == 0:  # no tagged fields: the usual case
        return position + 1
    count, position = read_uvarint(buf, position)
    if count > MAX_TAGGED_FIELDS:
        raise InvalidRequestError(f"{count} tagged fields exceed the limit {MAX_TAGGED_FIELDS}")
    for _ in range(count):
        _tag, position = read_uvarint(buf, position)
        size, position = read_uvarint(buf, position)
        position += size
        if position > len(buf):
            raise InvalidRequestError("tagged field runs past the end of the frame")
    return position


# --- decoders ---------------------------------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# Topic ids (UUIDs) decoded so far, by their 16 bytes: every Fetch v13+ names its topics by id,
# and building a uuid.UUID costs more than the rest of a partition's fields. UUIDs are
# immutable, so one object serves every body; past the bound the cache starts over.
MAX_CACHED_UUIDS = 4096
_UUIDS: dict[bytes, uuid.UUID] = {}


def _min_size(type_: Any, version: int, flexible: bool) -> int:
    """The fewest bytes one value can take on the wire (to bound counts before allocating)."""
    if isinstance(type_, Primitive):
        if type_.fmt is not None:
            return struct.calcsize(">" + type_.fmt)
        if type_ is UUID:
            return 16
        return 1 if flexible else (2 if type_ is STRING else 4)
    if isinstance(type_, ArrayType):
        return 1 if flexible else 4
    size = 1 if flexible else 0
    for field in type_.fields:
        if in_range(version, field.versions) and field.tag is None:
            size += _min_size(field.type, version, flexible)
    return max(size, 1)


def _length_reader(flexible: bool, wide: bool) -> Callable[[Any, int], tuple[int, int]]:
    """Reads a length/count prefix; returns -1 for null."""
    if flexible:

        def read_compact(buf: Any, pos: int) -> tuple[int, int]:
            if pos < len(buf) and buf[pos] < 0x80:  # one byte: the usual case
                return buf[pos] - 1, pos + 1
            value, pos = read_uvarint(buf, pos)
            return value - 1, pos

        return read_compact
    prefix = _I32 if wide else _I16

    def read_fixed(buf: Any, pos: int) -> tuple[int, int]:
        return prefix.unpack_from(buf, pos)[0], pos + prefix.size

    return read_fixed


def _value_decoder(
    field: Field, type_: Any, version: int, flexible: bool
) -> Callable[[Any, int], tuple[Any, int]]:
    nullable = in_range(version, field.nullable)
    what = field.name
    if isinstance(type_, ArrayType):
        return _array_decoder(field, type_, version, flexible, nullable)
    if isinstance(type_, StructType):
        read_struct = _struct_decoder(type_, version, flexible)
        if not nullable:
            return read_struct

        def read_nullable_struct(buf: Any, pos: int) -> tuple[Any, int]:
            # Kafka's nullable struct: an int8 marker, -1 for null, 1 for a struct that follows
            if pos >= len(buf):
                raise InvalidRequestError(f"{what}: struct marker past the end of the frame")
            marker = buf[pos]
            if marker == 0xFF:
                return None, pos + 1
            if marker != 1:
                raise InvalidRequestError(f"{what}: bad nullable struct marker {marker}")
            return read_struct(buf, pos + 1)

        return read_nullable_struct
    if isinstance(type_, Primitive) and type_.fmt is not None:  # a tagged fixed-width field
        fixed = struct.Struct(">" + type_.fmt)

        def read_fixed(buf: Any, pos: int) -> tuple[Any, int]:
            end = pos + fixed.size
            if end > len(buf):
                raise InvalidRequestError(f"{what}: runs past the end of the frame")
            return fixed.unpack_from(buf, pos)[0], end

        return read_fixed
    if type_ is UUID:

        def read_uuid(buf: Any, pos: int) -> tuple[Any, int]:
            end = pos + 16
            if end > len(buf):
                raise InvalidRequestError(f"{what}: uuid runs past the end of the frame")
            raw = bytes(buf[pos:end])
            value = _UUIDS.get(raw)
            if value is None:
                if len(_UUIDS) >= MAX_CACHED_UUIDS:
                    _UUIDS.clear()
                value = _UUIDS[raw] = uuid.UUID(bytes=raw)
            return value, end

        return read_uuid
    read_length = _length_reader(flexible, wide=type_ is not STRING)
    if type_ is STRING:

        def read_string(buf: Any, pos: int) -> tuple[Any, int]:
            length, pos = read_length(buf, pos)
            if length < 0:
                if nullable and length == -1:
                    return None, pos
                raise InvalidRequestError(f"{what}: null or negative string length {length}")
            end = pos + length
            if end > len(buf):
                raise InvalidRequestError(f"{what}: string of {length} bytes past the frame end")
            return str(buf[pos:end], "utf-8"), end

        return read_string
    keep_view = type_ is RECORDS

    def read_bytes(buf: Any, pos: int) -> tuple[Any, int]:
        length, pos = read_length(buf, pos)
        if length < 0:
            if nullable and length == -1:
                return None, pos
            raise InvalidRequestError(f"{what}: null or negative bytes length {length}")
        end = pos + length
        if end > len(buf):
            raise InvalidRequestError(f"{what}: {length} bytes past the frame end")
        return (buf[pos:end] if keep_view else bytes(buf[pos:end])), end

    return read_bytes


def _array_decoder(
    field: Field, type_: ArrayType, version: int, flexible: bool, nullable: bool
) -> Callable[[Any, int], tuple[Any, int]]:
    what = field.name
    read_count = _length_reader(flexible, wide=True)
    element = type_.element
    min_size = _min_size(element, version, flexible)
    fixed = isinstance(element, Primitive) and element.fmt is not None

    def check_count(buf: Any, pos: int) -> tuple[int, int]:
        count, pos = read_count(buf, pos)
        if count < 0:
            if nullable and count == -1:
                return -1, pos
            raise InvalidRequestError(f"{what}: null or negative array count {count}")
        if count * min_size > len(buf) - pos:
            raise InvalidRequestError(f"{what}: {count} elements cannot fit the frame")
        return count, pos

    if fixed:
        fmt = element.fmt
        size = min_size

        def read_fixed_array(buf: Any, pos: int) -> tuple[Any, int]:
            count, pos = check_count(buf, pos)
            if count < 0:
                return None, pos
            values = list(struct.unpack_from(f">{count}{fmt}", buf, pos))
            return values, pos + count * size

        return read_fixed_array
    # Elements of a nullable array are not themselves nullable.
    read_element = _value_decoder(
        Field(field.name, element, field.versions), element, version, flexible
    )

    def read_array(buf: Any, pos: int) -> tuple[Any, int]:
        count, pos = check_count(buf, pos)
        if count < 0:
            return None, pos
        values: list[Any] = []
        append = values.append
        for _ in range(count):
            value, pos = read_element(buf, pos)
            append(value)
        return values, pos

    return read_array


def _plan(struct_type: StructType, version: int) -> list[tuple[str, Any]]:
    """Group the struct's fields for `version`: runs of fixed-width fields become one struct.

    Items: ("fixed", [fields]), ("var", field), ("absent", field), ("tagged", field). A tagged
    field is absent from non-flexible versions (Kafka declares none outside them).
    """
    plan: list[tuple[str, Any]] = []
    for field in struct_type.fields:
        if field.tag is not None and in_range(version, field.versions):
            plan.append(("tagged", field))
        elif not in_range(version, field.versions):
            plan.append(("absent", field))
        elif isinstance(field.type, Primitive) and field.type.fmt is not None:
            if plan and plan[-1][0] == "fixed":
                plan[-1][1].append(field)
            else:
                plan.append(("fixed", [field]))
        else:
            plan.append(("var", field))
    return plan


def _invalid(what: str, problem: str) -> InvalidRequestError:
    return InvalidRequestError(f"{what}: {problem}")


def _compile(source: str, namespace: dict[str, Any], name: str) -> Callable:
    """Compile generated codec source; `namespace` holds the structs and helpers it uses."""
    exec(compile(source, f"<quorumlog codec {name}>", "exec"), namespace)  # noqa: S102
    return namespace[name]


def _struct_decoder(
    struct_type: StructType, version: int, flexible: bool
) -> Callable[[Any, int], tuple[Any, int]]:
    """Generate a decoder for one struct at one version: runs of fixed-width fields become one
    `unpack_from`, non-flexible strings/bytes are inlined, everything else calls a helper.
    """
    namespace: dict[str, Any] = {
        "cls": struct_type.cls,
        "I16": _I16,
        "I32": _I32,
        "invalid": _invalid,
        "skip_tagged_fields": skip_tagged_fields,
        "read_uvarint": read_uvarint,
    }
    lines = ["def read(buf, pos):"]
    names: list[str] = []
    tagged: dict[int, tuple[str, Any]] = {}  # tag -> (target, decoder)
    for kind, item in _plan(struct_type, version):
        if kind == "fixed":
            fixed = struct.Struct(">" + "".join(f.type.fmt for f in item))
            key = f"S{len(namespace)}"
            namespace[key] = fixed
            targets = [f"v{len(names) + i}" for i in range(len(item))]
            names.extend(targets)
            lines.append(f"    {', '.join(targets)}, = {key}.unpack_from(buf, pos)")
            lines.append(f"    pos += {fixed.size}")
            continue
        target = f"v{len(names)}"
        names.append(target)
        if kind == "tagged" and not flexible:
            kind = "absent"
        if kind == "tagged":
            tagged[item.tag] = (target, _value_decoder(item, item.type, version, flexible))
            kind = "absent"  # its default until the tagged section says otherwise
        if kind == "absent" and isinstance(item.default_value(), list):
            lines.append(f"    {target} = []")  # never share a mutable default between bodies
        elif kind == "absent":
            key = f"C{len(namespace)}"
            namespace[key] = item.default_value()
            lines.append(f"    {target} = {key}")
        elif item.type in (STRING, BYTES, RECORDS):
            lines.extend(_inline_blob_read(item, target, version, flexible))
        else:
            key = f"D{len(namespace)}"
            namespace[key] = _value_decoder(item, item.type, version, flexible)
            lines.append(f"    {target}, pos = {key}(buf, pos)")
    if flexible and tagged:
        namespace["read_tags"] = _tagged_reader({tag: d for tag, (_, d) in tagged.items()})
        # An empty tagged section (one zero byte) is the usual case: no call for it. Past the
        # frame's end, buf[pos] raises IndexError, which decode() reports as malformed.
        lines.append("    if buf[pos] == 0:")
        lines.append("        pos += 1")
        lines.append("    else:")
        lines.append("        tags, pos = read_tags(buf, pos)")
        for tag, (target, _) in tagged.items():
            lines.append(f"        {target} = tags.get({tag}, {target})")
    elif flexible:
        lines.append("    if buf[pos] == 0:")
        lines.append("        pos += 1")
        lines.append("    else:")
        lines.append("        pos = skip_tagged_fields(buf, pos)")
    lines.append(f"    return cls({', '.join(names)}), pos")
    return _compile("\n".join(lines) + "\n", namespace, "read")


def _tagged_reader(
    decoders: dict[int, Callable[[Any, int], tuple[Any, int]]],
) -> Callable[[Any, int], tuple[dict[int, Any], int]]:
    """Reads a tagged section: {tag: value} of the known tags; unknown ones skipped."""

    def read_tags(buf: Any, pos: int) -> tuple[dict[int, Any], int]:
        count, pos = read_uvarint(buf, pos)
        if count > MAX_TAGGED_FIELDS:
            raise InvalidRequestError(f"{count} tagged fields exceed the limit {MAX_TAGGED_FIELDS}")
        values: dict[int, Any] = {}
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise InvalidRequestError("tagged field runs past the end of the frame")
            decoder = decoders.get(tag)
            if decoder is not None:
                value, used = decoder(buf[pos:end], 0)
                if used != size:
                    raise InvalidRequestError(f"tagged field {tag}: {size} bytes, {used} used")
                values[tag] = value
            pos = end
        return values, pos

    return read_tags


def _inline_blob_read(field: Field, target: str, version: int, flexible: bool) -> list[str]:
    """A string / bytes / records field read inline: its length (int16 / int32, or a compact
    uvarint length+1 in flexible versions, one byte read without a call), then the value."""
    prefix, size = ("I16", 2) if field.type is STRING else ("I32", 4)
    if flexible:  # past the frame's end, buf[pos] raises IndexError: decode() reports it
        read_length = [
            "    n = buf[pos]",
            "    if n < 0x80:",
            "        pos += 1",
            "    else:",
            "        n, pos = read_uvarint(buf, pos)",
            "    n -= 1",
        ]
    else:
        read_length = [f"    n, = {prefix}.unpack_from(buf, pos)", f"    pos += {size}"]
    if field.type is STRING:
        value = "str(buf[pos:end], 'utf-8')"
    elif field.type is BYTES:
        value = "bytes(buf[pos:end])"
    else:
        value = "buf[pos:end]"  # records: a zero-copy view into the frame
    null = (
        f"        {target} = None"
        if in_range(version, field.nullable)
        else f"        raise invalid({field.name!r}, 'null in a non-nullable field')"
    )
    return [
        *read_length,
        "    if n < 0:",
        "        if n != -1:",
        f"            raise invalid({field.name!r}, f'negative length {{n}}')",
        null,
        "    else:",
        "        end = pos + n",
        "        if end > len(buf):",
        f"            raise invalid({field.name!r}, f'{{n}} bytes past the frame end')",
        f"        {target} = {value}",
        "        pos = end",
    ]


# --- encoders ---------------------------------------------------------------------------------


def _length_bytes(length: int, flexible: bool, wide: bool) -> bytes:
    if flexible:
        return _uvarint(length + 1)
    return _I32.pack(length) if wide else _I16.pack(length)


def _value_encoder(
    field: Field, type_: Any, version: int, flexible: bool
) -> Callable[[Any, list], None]:
    nullable = in_range(version, field.nullable)
    what = field.name
    if isinstance(type_, ArrayType):
        return _array_encoder(field, type_, version, flexible, nullable)
    if isinstance(type_, StructType):
        write_struct = _struct_encoder(type_, version, flexible)
        if not nullable:
            return write_struct

        def write_nullable_struct(value: Any, parts: list) -> None:
            if value is None:
                parts.append(b"\xff")
                return
            parts.append(b"\x01")
            write_struct(value, parts)

        return write_nullable_struct
    if isinstance(type_, Primitive) and type_.fmt is not None:  # a tagged fixed-width field
        pack = struct.Struct(">" + type_.fmt).pack

        def write_fixed(value: Any, parts: list) -> None:
            parts.append(pack(value))

        return write_fixed
    if type_ is UUID:

        def write_uuid(value: Any, parts: list) -> None:
            parts.append(value.bytes)

        return write_uuid
    wide = type_ is not STRING
    null_prefix = _length_bytes(-1, flexible, wide)
    is_string = type_ is STRING

    def write_blob(value: Any, parts: list) -> None:
        if value is None:
            if not nullable:
                raise ValueError(f"{what} is not nullable in version {version}")
            parts.append(null_prefix)
            return
        if is_string:
            value = value.encode("utf-8")
        parts.append(_length_bytes(len(value), flexible, wide))
        parts.append(value)

    return write_blob


def _array_encoder(
    field: Field, type_: ArrayType, version: int, flexible: bool, nullable: bool
) -> Callable[[Any, list], None]:
    what = field.name
    element = type_.element
    null_prefix = _length_bytes(-1, flexible, True)
    if isinstance(element, Primitive) and element.fmt is not None:
        fmt = element.fmt

        def write_fixed_array(values: Any, parts: list) -> None:
            if values is None:
                if not nullable:
                    raise ValueError(f"{what} is not nullable in version {version}")
                parts.append(null_prefix)
                return
            parts.append(_length_bytes(len(values), flexible, True))
            parts.append(struct.pack(f">{len(values)}{fmt}", *values))

        return write_fixed_array
    write_element = _value_encoder(
        Field(field.name, element, field.versions), element, version, flexible
    )

    def write_array(values: Any, parts: list) -> None:
        if values is None:
            if not nullable:
                raise ValueError(f"{what} is not nullable in version {version}")
            parts.append(null_prefix)
            return
        parts.append(_length_bytes(len(values), flexible, True))
        for value in values:
            write_element(value, parts)

    return write_array


def _struct_encoder(
    struct_type: StructType, version: int, flexible: bool
) -> Callable[[Any, list], None]:
    """Generate an encoder for one struct at one version (mirror of `_struct_decoder`)."""
    namespace: dict[str, Any] = {"I16": _I16, "I32": _I32}
    lines = ["def write(value, parts):", "    append = parts.append"]
    tagged: list[Field] = []
    for kind, item in _plan(struct_type, version):
        if kind == "fixed":
            key = f"P{len(namespace)}"
            namespace[key] = struct.Struct(">" + "".join(f.type.fmt for f in item)).pack
            args = ", ".join(f"value.{f.name}" for f in item)
            lines.append(f"    append({key}({args}))")
        elif kind == "absent" or (kind == "tagged" and not flexible):
            continue
        elif kind == "tagged":
            tagged.append(item)
        elif not flexible and item.type in (STRING, BYTES, RECORDS):
            prefix = "I16" if item.type is STRING else "I32"
            null = (
                f"        append({prefix}.pack(-1))"
                if in_range(version, item.nullable)
                else f"        raise ValueError('{item.name} is not nullable in version {version}')"
            )
            encode = "        x = x.encode('utf-8')" if item.type is STRING else "        pass"
            lines += [
                f"    x = value.{item.name}",
                "    if x is None:",
                null,
                "    else:",
                encode,
                f"        append({prefix}.pack(len(x)))",
                "        append(x)",
            ]
        else:
            key = f"E{len(namespace)}"
            namespace[key] = _value_encoder(item, item.type, version, flexible)
            lines.append(f"    {key}(value.{item.name}, parts)")
    if flexible and tagged:
        # All tagged fields at their defaults (the usual case): the empty section, no call.
        namespace["write_tags"] = _tagged_writer(tagged, version)
        defaults = []
        for field in tagged:
            key = f"T{len(namespace)}"
            namespace[key] = field.default_value()
            defaults.append(f"value.{field.name} == {key}")
        lines.append(f"    if {' and '.join(defaults)}:")
        lines.append("        append(b'\\x00')")
        lines.append("    else:")
        lines.append("        write_tags(value, parts)")
    elif flexible:
        lines.append("    append(b'\\x00')")
    return _compile("\n".join(lines) + "\n", namespace, "write")


def _tagged_writer(fields: list[Field], version: int) -> Callable[[Any, list], None]:
    """Writes a tagged section: the fields whose value is not their default, in tag order."""
    plans = []
    for f in fields:
        assert f.tag is not None, f"{f.name} is not a tagged field"
        plans.append((f.tag, f.name, f.default_value(), _value_encoder(f, f.type, version, True)))
    plans.sort(key=lambda plan: plan[0])

    def write_tags(value: Any, parts: list) -> None:
        present = [p for p in plans if getattr(value, p[1]) != p[2]]
        parts.append(_uvarint(len(present)))
        for tag, name, _, encode in present:
            encoded: list = []
            encode(getattr(value, name), encoded)
            data = b"".join(encoded)
            parts.append(_uvarint(tag))
            parts.append(_uvarint(len(data)))
            parts.append(data)

    return write_tags
