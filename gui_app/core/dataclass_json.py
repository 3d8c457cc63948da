"""Dataclasses to and from JSON objects, with each class's fields compiled once into converters.

Used by the run events (gui_app.core.events): decoding a step event is then a few dict look-ups
per key, which matters because the window decodes every line it reads and the run list and an
opened run whole files. The rules are JSON's: an int is a float, a whole float is an int, a list
keeps its good items, a key may have another name on the wire (a class's ``WIRE_NAMES``), and a
field marked :func:`optional` is left out while it has its default.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable

from gui_app.core.json_values import finite_or_null

_OMIT = "omit"
INVALID = object()  # what a converter returns for a value it cannot take


def optional(default: Any = None) -> Any:
    """A field that is left out of the JSON object while it equals ``default``."""
    return field(default=default, metadata={_OMIT: True})


def _converter(hint: Any) -> Callable[[Any], Any]:
    """A function that returns its argument as the annotated type, or INVALID. Lenient where
    JSON is: an int is a float, a whole float is an int; a list keeps its good items."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        nullable = type(None) in typing.get_args(hint)
        options = [_converter(arg) for arg in typing.get_args(hint) if arg is not type(None)]

        def union(value: Any) -> Any:
            if value is None:
                return None if nullable else INVALID
            for option in options:
                converted = option(value)
                if converted is not INVALID:
                    return converted
            return INVALID
        return union
    if origin is list:
        (item_hint,) = typing.get_args(hint) or (Any,)
        item = _converter(item_hint)

        def items(value: Any) -> Any:
            if not isinstance(value, list):
                return INVALID
            out = [item(v) for v in value]
            return [v for v in out if v is not INVALID and v is not None]
        return items
    if origin is dict or hint is dict:
        return lambda value: value if isinstance(value, dict) else INVALID
    if hint is Any:
        return lambda value: value
    if hint is bool:
        return lambda value: value if isinstance(value, bool) else INVALID
    if hint is int:
        def integer(value: Any) -> Any:
            if type(value) is int:
                return value
            if type(value) is float and math.isfinite(value) and value.is_integer():
                return int(value)
            return INVALID
        return integer
    if hint is float:
        def number(value: Any) -> Any:
            if type(value) is float:
                return value
            return float(value) if type(value) is int else INVALID
        return number
    if hint is str:
        return lambda value: value if isinstance(value, str) else INVALID
    if dataclasses.is_dataclass(hint):
        return lambda value: build(hint, value) if isinstance(value, dict) else INVALID
    raise TypeError(f"events: no JSON form for {hint!r}")


@dataclass(frozen=True)
class Field:
    name: str
    wire: str
    convert: Callable[[Any], Any]
    omit: bool
    default: Any
    required: bool
    json_types: tuple[type, ...]


_FIELDS: dict[type, list[Field]] = {}


def fields_of(cls: type) -> list[Field]:
    if cls not in _FIELDS:
        hints = typing.get_type_hints(cls)
        names = getattr(cls, "WIRE_NAMES", {})
        _FIELDS[cls] = [
            Field(f.name, names.get(f.name, f.name), _converter(hints[f.name]), bool(f.metadata.get(_OMIT)),
                   f.default, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                   _json_types(hints[f.name]))
            for f in dataclasses.fields(cls)]
    return _FIELDS[cls]


def plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.wire: plain(getattr(value, f.name)) for f in fields_of(type(value))}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return finite_or_null(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def build(cls: type, value: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields_of(cls):
        if f.wire in value:
            converted = f.convert(value[f.wire])
            if converted is not INVALID:
                kwargs[f.name] = converted
                continue
        if f.required:
            return None  # a required key is missing or unusable
    return cls(**kwargs)


def _json_types(hint: Any) -> tuple[type, ...]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return tuple(t for arg in typing.get_args(hint) for t in _json_types(arg))
    if hint is type(None):
        return (type(None),)
    if hint is float:
        return (int, float)
    if origin is list or hint is list:
        return (list,)
    if origin is dict or hint is dict or dataclasses.is_dataclass(hint):
        return (dict,)
    return (hint,) if isinstance(hint, type) else (object,)
