"""The generated struct classes behave as the frozen, slotted dataclasses they replace: every
message's class, checked against `dataclasses.make_dataclass(frozen=True, slots=True)` built
from the same declaration."""

from __future__ import annotations

import copy
import dataclasses
import sys
from typing import Any

import pytest

from log.protocol import apis, metadata
from log.protocol.schema import ArrayType, Message, StructType
from log.protocol.struct_class import make_struct_class

assert apis  # imports every message module
MESSAGES = sorted(
    {
        id(value): value
        for name, module in list(sys.modules.items())
        if name.startswith("log.protocol.")
        for value in vars(module).values()
        if isinstance(value, Message)
    }.values(),
    key=lambda m: m.name,
)


def _structs(struct_type: StructType) -> list[StructType]:
    found = [struct_type]
    for field in struct_type.fields:
        element = field.type.element if isinstance(field.type, ArrayType) else field.type
        if isinstance(element, StructType):
            found.extend(_structs(element))
    return found


def _reference(struct_type: StructType) -> type:
    """What the schema made before: a frozen, slotted make_dataclass."""
    specs: list[tuple[str, Any, Any]] = []
    for field in struct_type.fields:
        default = field.default_value()
        if isinstance(default, list):
            specs.append((field.name, Any, dataclasses.field(default_factory=list)))
        else:
            specs.append((field.name, Any, dataclasses.field(default=default)))
    return dataclasses.make_dataclass(struct_type.name, specs, frozen=True, slots=True)


def test_the_messages_are_found() -> None:
    assert len(MESSAGES) > 100


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.name)
def test_every_struct_matches_a_frozen_slotted_dataclass(message: Message) -> None:
    for struct_type in _structs(message.struct):
        cls, reference = struct_type.cls, _reference(struct_type)
        ours, theirs = cls(), reference()
        names = [f.name for f in dataclasses.fields(reference)]
        assert dataclasses.is_dataclass(cls) and dataclasses.is_dataclass(ours)
        assert [f.name for f in dataclasses.fields(cls)] == names
        assert cls.__match_args__ == reference.__match_args__
        assert not hasattr(ours, "__dict__")  # slotted
        assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)  # the same defaults
        assert repr(ours) == repr(theirs)
        for name in names:
            if isinstance(getattr(ours, name), list):  # a fresh list per instance
                assert getattr(ours, name) is not getattr(cls(), name)


def test_equality_hash_and_replace_follow_the_fields() -> None:
    cls = make_struct_class("Pair", {"name": "", "count": 0, "items": []}, __name__)
    a, b = cls("x", 1), cls("x", 1)
    assert a == b and a != cls("x", 2) and a != ("x", 1, [])
    assert a.items == [] and a.items is not b.items
    assert dataclasses.replace(a, count=5) == cls("x", 5)
    assert cls(name="y").count == 0
    with pytest.raises(TypeError):  # a list field makes it unhashable, as a dataclass's
        hash(a)
    single = make_struct_class("One", {"value": 0}, __name__)
    assert hash(single(3)) == hash(single(3)) and single(3) != single(4)
    empty = make_struct_class("Empty", {}, __name__)
    assert empty() == empty() and hash(empty()) == hash(empty()) and repr(empty()) == "Empty()"
    assert dataclasses.fields(cls)[2].default_factory is list
    assert dataclasses.fields(cls)[1].default == 0


def test_instances_are_frozen() -> None:
    cls = make_struct_class("Frozen", {"value": 0}, __name__)
    one = cls(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.value = 2  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del one.value  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.other = 3  # type: ignore[attr-defined]
    assert one.value == 1  # type: ignore[attr-defined]


def test_copies_are_equal() -> None:
    body = metadata.METADATA_RESPONSE.cls(
        topics=[metadata.METADATA_RESPONSE.cls.MetadataResponseTopic(name="t", is_internal=True)]
    )
    assert copy.copy(body) == body
    assert copy.deepcopy(body) == body and copy.deepcopy(body).topics is not body.topics
