"""The classes of the protocol's structs, made at run time at a fraction of make_dataclass's cost.

Every process that speaks the protocol (a node, each `quorumlog` command, a Spark task) makes
one class per struct of every message declared in log/protocol, about 280 of them, when it
imports the messages. `dataclasses.make_dataclass(frozen=True, slots=True)` compiles six methods
per class, one `exec` each, then makes the class a second time for its slots: 0.42 s of CPU of a
node's 1.2 s of imports on a 2-core test box, paid again by every command a user types.

Here each class compiles one method, its `__init__` (decoders call it for every struct they
read, so it stays generated: straight-line stores, no loop). The rest is shared by every struct
through the `Struct` base, which reads the class's field names: `__eq__` and `__hash__` over the
fields' values in order (a dataclass's), `__repr__` as a dataclass's, `__setattr__` and
`__delattr__` raising `dataclasses.FrozenInstanceError` (frozen), and `__reduce__` for `copy`.
`dataclasses.dataclass(init=False, repr=False, eq=False)` then records the fields and generates
nothing, so `dataclasses.fields`, `replace`, `asdict` and `is_dataclass` see a dataclass as
before."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any

_FRESH_LIST: Any = object()  # the default of a list field: a new list per instance


class Struct:
    """The shared methods of every generated struct class (see the module docstring)."""

    __slots__ = ()
    _field_names: tuple[str, ...] = ()
    _values: Callable[[Any], Any] = staticmethod(lambda _: ())

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return bool(self._values(self) == other._values(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._field_names)
        return f"{type(self).__qualname__}({values})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return type(self), tuple(getattr(self, name) for name in self._field_names)


def make_struct_class(name: str, defaults: dict[str, Any], module: str) -> type:
    """A frozen, slotted dataclass named `name` with these fields, in order, and defaults; a
    list default means a fresh empty list per instance, any other default is shared (so it must
    be immutable: the protocol's defaults are scalars and frozen structs)."""
    names = tuple(defaults)
    values: Callable[[Any], Any]
    if not names:
        values = Struct._values
    elif len(names) == 1:
        values = attrgetter(names[0])
    else:
        values = attrgetter(*names)
    namespace: dict[str, Any] = {
        "__slots__": names,
        "__annotations__": dict.fromkeys(names, Any),
        "__module__": module,
        "__qualname__": name,
        "__doc__": f"Kafka's {name}.",  # else dataclass() computes one from the signature
        "__match_args__": names,
        "_field_names": names,
        "_values": staticmethod(values),
        "__init__": _init(name, defaults),
    }
    cls: type = dataclasses.dataclass(init=False, repr=False, eq=False, match_args=False)(
        type(name, (Struct,), namespace)
    )
    for field in dataclasses.fields(cls):  # for readers of fields(): the defaults as declared
        default = defaults[field.name]
        if isinstance(default, list):
            field.default_factory = list
        else:
            field.default = default
    return cls


def _init(name: str, defaults: dict[str, Any]) -> Callable[..., None]:
    """The class's __init__: every field a parameter with its default, stored in its slot."""
    namespace: dict[str, Any] = {"_set": object.__setattr__, "_FRESH_LIST": _FRESH_LIST}
    parameters, body = ["self"], []
    for index, (field, default) in enumerate(defaults.items()):
        if isinstance(default, list):
            parameters.append(f"{field}=_FRESH_LIST")
            body.append(f"    _set(self, {field!r}, [] if {field} is _FRESH_LIST else {field})")
        else:
            namespace[f"_D{index}"] = default
            parameters.append(f"{field}=_D{index}")
            body.append(f"    _set(self, {field!r}, {field})")
    source = f"def __init__({', '.join(parameters)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(compile(source, f"<quorumlog struct {name}>", "exec"), namespace)  # noqa: S102
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{name}.__init__"
    return init
