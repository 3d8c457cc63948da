"""How a caught exception becomes part of a one-line message: its first line only (TensorFlow's
and the converters' messages go on with the op, a graph trace or a stack), never an empty one.
TensorFlow-free: the core, the engine and the commands word their errors with it.
"""
from __future__ import annotations


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """The first line of ``exc``'s message (at most ``limit`` characters), or the name of its
    type when the message is empty."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def typed_line(exc: BaseException, limit: int | None = None) -> str:
    """``Type: first line``: for a failure whose type says what happened (our own bug, an
    error TensorFlow raises)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:limit]}" if text else type(exc).__name__
