"""JSON to and from the run configuration's frozen dataclasses, strictly: unknown keys, wrong
types, non-finite numbers, hostile nesting, oversized and non-UTF-8 files are all a
:class:`ConfigError` naming the key or the file, never another exception (a property test
feeds random JSON to the loader). TensorFlow-free and Qt-free; config.py holds the sections.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, NoReturn

MAX_CONFIG_BYTES = 1 << 20


class ConfigError(ValueError):
    """A configuration value is wrong; the message starts with the dotted key."""


def fail(key: str, message: str) -> NoReturn:
    raise ConfigError(f"{key}: {message}")


def did_you_mean(word: Any, known: typing.Iterable[str]) -> str:
    """``; did you mean 'learning_rate'?`` for a misspelled key, or nothing when none is close."""
    if not isinstance(word, str):
        return ""
    import difflib  # on the error path only

    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def refuse_control_characters(section: Any, prefix: str, keys: tuple[str, ...]) -> None:
    """A path holding a NUL (or another control character) names no file, and printed raw in an
    error it hid the very line that said what was wrong (a terminal shows nothing for a NUL)."""
    for key in keys:
        value = getattr(section, key) or ""
        bad = next((i for i, ch in enumerate(value) if ord(ch) < 32 or ord(ch) == 127), None)
        if bad is not None:
            fail(f"{prefix}.{key}", f"contains the control character {value[bad]!r} at position {bad}")


def read_text(path: str | Path) -> str:
    """A config file's text: readable, at most MAX_CONFIG_BYTES, UTF-8."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"config: cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"config: {path} is {len(raw):,} bytes; a run configuration is at most "
                          f"{MAX_CONFIG_BYTES:,}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config: {path} is not UTF-8 text (byte {exc.start})") from None


def parse_json(text: str, where: str = "config") -> Any:
    text = text.removeprefix("\ufeff")  # a byte-order mark (Windows Notepad) is not an error
    try:
        # NaN, Infinity and 1e400 parse to non-finite floats; from_plain refuses them by key.
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to be a run configuration") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise ConfigError(f"{where}: {str(exc).splitlines()[0]}") from None


def from_plain(tp: type, data: Any) -> Any:
    """JSON data -> the dataclass ``tp``, validated (each section's ``__post_init__`` too)."""
    try:
        return _convert(tp, data, "")
    except RecursionError:
        raise ConfigError("config: nested too deeply") from None


def show(value: Any) -> str:
    """A value for an error message: JSON, cut short (one line, even for a hostile file)."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def to_plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [to_plain(v) for v in obj]
    return obj


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _type_name(tp: Any) -> str:
    if dataclasses.is_dataclass(tp):
        return "an object"
    return _TYPE_NAMES.get(tp, "a list")


@functools.cache
def _fields(tp: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A dataclass's resolved field types and names. Resolving the string annotations is most
    of the cost of loading a config, and the run list loads one per run."""
    return typing.get_type_hints(tp), frozenset(f.name for f in dataclasses.fields(tp))


def _convert(tp: Any, value: Any, key: str) -> Any:
    """Convert JSON data to ``tp``, naming ``key`` in any error."""
    where = key or "config"
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            fail(where, f"must be an object; got {type(value).__name__}")
        hints, names = _fields(tp)
        unknown = sorted(set(value) - names)
        if unknown:
            prefix = f"{key}." if key else ""
            name = unknown[0] if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", unknown[0]) else show(unknown[0])
            fail(f"{prefix}{name}", f"unknown key{did_you_mean(unknown[0], names)} (known keys: "
                                    f"{', '.join(sorted(names))})")
        kwargs = {k: _convert(hints[k], v, f"{key}.{k}" if key else k) for k, v in value.items()}
        return tp(**kwargs)
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) > 1:  # e.g. str | tuple[str, ...]: the JSON type picks the member
            picked = [a for a in inner if (typing.get_origin(a) is tuple) == isinstance(value, list)
                      and (isinstance(value, list) or isinstance(value, a)
                           or (dataclasses.is_dataclass(a) and isinstance(value, dict)))]
            if not picked:
                fail(where, f"must be {' or '.join(_type_name(a) for a in inner)}; got {json.dumps(value)}")
            inner = picked[:1]
        return _convert(inner[0], value, key)
    if origin is tuple:
        if not isinstance(value, list):
            fail(where, f"must be a list; got {show(value)}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, key) for v in value)
        if len(value) != len(args):
            fail(where, f"must be a list of {len(args)} values; got {show(value)}")
        return tuple(_convert(a, v, key) for a, v in zip(args, value))
    # bool is an int in Python; JSON true must not pass as an integer, nor 1 as a boolean.
    ok = (isinstance(value, tp) and not (tp is not bool and isinstance(value, bool))) or (
        tp is float and isinstance(value, int) and not isinstance(value, bool))
    if not ok:
        fail(where, f"must be {_TYPE_NAMES.get(tp, tp.__name__)}; got {show(value)}")
    if tp is float:
        try:
            value = float(value)
        except OverflowError:  # an integer too large for a float
            fail(where, "must be a finite number; got a number too large")
        if not math.isfinite(value):
            fail(where, f"must be a finite number; got {show(value)}")
    return value
