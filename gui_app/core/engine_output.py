"""Reading what an engine process writes: complete lines, JSON event lines, and the one line
of stderr that explains a failure.

Qt-free and TensorFlow-free, so the window's process runner, the selftest and the launcher
all decide the same way (there used to be four ways to find "the error line").
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable

# The engine's exit codes, one meaning each (re-exported by gui_app.engine.run.exits): 0 completed
# or stopped; 1 failed in training (or a converter or parity check failed); 2 bad config or
# input, with one line on stderr naming the key or the file; 130 interrupted (Ctrl+C, SIGTERM).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130

# A line that states an error itself (a Python exception, a fatal interpreter error, Qt's
# fatal start-up message), unlike TensorFlow's log lines, which may say "error" about things
# that do not matter (cuInit).
_ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception)\b|Fatal Python error\b|"
                         r"This application failed to start\b|replica-studio[\w -]*:)")


# The engine's own error lines start with the command they come from (``replica-studio export:``).
_COMMAND_PREFIX = re.compile(r"^replica-studio [\w-]+: ")


def is_error_line(line: str) -> bool:
    return bool(_ERROR_LINE.match(line.strip()))


def error_line(stderr_lines: Iterable[str], crashed: bool = False) -> str | None:
    """The line of an engine's stderr that explains why it failed, or None.

    The engine's contract: a failure ends with one line on stderr naming the reason, so that
    is the last line. A process killed by a signal wrote no such line and its last line may
    be any TensorFlow message, so then only a line that states an error is trusted."""
    lines = [ln.strip() for ln in stderr_lines if ln.strip()]
    if not crashed:
        return lines[-1] if lines else None
    return next((ln for ln in reversed(lines) if is_error_line(ln)), None)


def without_command_prefix(line: str) -> str:
    """``replica-studio export: <problem>`` -> ``<problem>``: whoever shows it already says
    what it ran."""
    return _COMMAND_PREFIX.sub("", line.strip(), count=1)


def complete_lines(data: bytes, final: bool = False) -> tuple[list[bytes], bytes]:
    """Split a pipe's bytes into complete lines and the unfinished rest (all of it when the
    process has ended: ``final``)."""
    *lines, tail = data.split(b"\n")
    if final and tail:
        return [*lines, tail], b""
    return lines, tail


def parse_json_line(text: str) -> dict[str, Any] | None:
    """A stdout line as a JSON object, or None when it is not one (a stray print)."""
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
