"""How to start an engine process: the one place that knows the command line.

The GUI's supervisor, the multi-worker launcher and the tests all build engine commands
here, so a frozen (PyInstaller) build only has to be taught once.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def engine_command(*args: str) -> list[str]:
    """``[python, -m, gui_app.engine, *args]``, or the bundle's own executable when frozen."""
    if getattr(sys, "frozen", False):
        return [sys.executable, *args]
    return [sys.executable, "-m", "gui_app.engine", *args]


def engine_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for an engine process: unbuffered, with TensorFlow's C++ logging
    reduced to warnings (it goes to stderr either way; stdout carries only events).

    From a source checkout that is not installed, ``python -m gui_app.engine`` would not find
    the package outside its folder, so the package's parent goes first on PYTHONPATH
    (harmless when installed or frozen)."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTHONIOENCODING", "utf-8")
    if not getattr(sys, "frozen", False):
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if extra:
        env.update(extra)
    return env
