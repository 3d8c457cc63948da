"""Keep TensorFlow's own log lines off the command line's stderr (unless ``--debug``).

TensorFlow 2.21 prints ``WARNING: All log messages before absl::InitializeLog() ...`` and its
``I0000 ... oneDNN`` / ``E0000 ... cuInit`` lines from C++ straight to file descriptor 2,
before and regardless of ``TF_CPP_MIN_LOG_LEVEL``; a bad input would then end with eight lines
of which one is ours. So fd 2 becomes a pipe read by a thread that drops lines in absl's format
and forwards every other line. Python's own ``sys.stderr`` (our one-line errors, tracebacks)
writes to the original stderr directly, so nothing of ours waits on the thread at exit.
"""
from __future__ import annotations

import logging
import os
import re
import sys
import threading

# absl/glog: "I0000 00:00:1796113123.903224   28025 port.cc:153] ..." and the pre-init banner.
_TF_LINE = re.compile(rb"^(?:[IWEF]\d{4} \d\d:\d\d:[\d.]+ +\d+ [^ \]]+:\d+\] |WARNING: All log messages before absl)")

_CONTINUATIONS = (b"To enable the following instructions",)

_installed = False


def silence_tensorflow_logs() -> None:
    global _installed
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    if _installed or os.name != "posix":
        return
    try:
        sys.stderr.flush()
        real = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        sys.stderr = open(real, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    except (OSError, ValueError, AttributeError):  # no fd 2 (a windowed bundle), or a test's captured stream
        return
    _installed = True
    threading.Thread(target=forward, args=(read_end, real), name="stderr-filter", daemon=True).start()


def forward(read_end: int, real: int) -> None:
    """Copy the pipe ``read_end`` to the descriptor ``real`` line by line, without TensorFlow's log lines."""
    pending = b""
    dropping = False  # inside a TensorFlow message: its continuation lines go too
    while True:
        try:
            chunk = os.read(read_end, 65536)
        except OSError:
            return
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if _TF_LINE.match(line):
                dropping = True
                continue
            # Continuation lines of a TensorFlow message: indented ("\t [[{{node ...}}]]") or
            # cpu_feature_guard's second line. Anything else (a Python fatal error) passes.
            if dropping and (line[:1] in (b" ", b"\t") or line.startswith(_CONTINUATIONS)):
                continue
            dropping = False
            try:
                os.write(real, line + b"\n")
            except OSError:  # stderr is gone (the window died): drop
                pass
