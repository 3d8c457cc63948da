"""``log``: a run's own log (``RUN_DIR/engine.log``: a detached run's stdout and stderr), from
any process of its owner, here or with ``--host``.

    replica-studio log RUN_DIR                  # what it has logged so far
    replica-studio log RUN_DIR --follow         # then what it logs, until its process is gone
    replica-studio log RUN_DIR --follow --from N   # from byte N (after the N bytes read before)
    replica-studio log RUN_DIR --follow --from end # only what it logs from now on
    replica-studio log RUN_DIR --json           # {"type": "log", "line": TEXT, "next": BYTE} per line

The window follows a host's run's log with ``log --follow`` over ssh (its Log tab), as it
follows the file of a run here: one Python start there, no TensorFlow, and it ends on its own
once the run's process is gone (its lock: gui_app/core/run_lock.py) or when the piped stdin ends
(the window let go, or the connection dropped), so nothing is left following a finished run, as a
``tail -F`` would be. With ``--json`` each whole line comes with the byte it ends at, so a
follower whose connection dropped goes on with ``--from`` where it was, no line lost or twice
(``--from end`` first says where the end was: ``{"type": "log", "next": BYTE}``).
Where the run logs, and whether it may still log, is its backend's to say (gui_app/core/backends:
a run submitted to Slurm logs into its job's output file); the reading is the one line follower's
(gui_app/core/line_follow.py), so a line torn by the end of a read is never cut in two.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import stat
import sys
import threading
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.answers import LogLine, encode
from gui_app.core.backends import local_backend
from gui_app.core.line_follow import LineFollower
from gui_app.core.run_lock import holder
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK, say

COMMANDS = ("log",)
POLL_SECONDS = 0.25  # a log line is for a person: a quarter of a second is soon enough


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("log", help="a run's log (engine.log), and with --follow what it logs until it ends")
    p.add_argument("run_dir")
    p.add_argument("--follow", action="store_true",
                   help="keep printing what it logs until its process is gone (or a piped stdin ends)")
    p.add_argument("--from", dest="from_byte", type=_start, default=0, metavar="N",
                   help="start after the first N bytes of the log (what was read before), or at its end: 'end'")
    p.add_argument("--json", action="store_true",
                   help='one JSON object per line: {"type": "log", "line": TEXT, "next": BYTE after it}')
    p.set_defaults(handler=log)


def log(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).expanduser()
    if not rundir.is_run_dir(run_dir):
        say("log", f"run_dir: {run_dir} is not a run directory (no {rundir.CONFIG_FILE})")
        return EXIT_BAD_INPUT
    ended = threading.Event()
    if args.follow and _stdin_is_piped():
        threading.Thread(target=_wait_for_stdin_end, args=(ended,), name="log-stdin", daemon=True).start()
    backend = local_backend(run_dir)
    path, offset = backend.log_path(), args.from_byte
    if offset is None:  # its end: what it logged before is not asked for
        offset = path.stat().st_size if path.is_file() else 0
        if args.json:
            print(json.dumps(encode(LogLine("log", next=offset))), flush=True)
    job = backend.job_watch()
    with backend.log(offset) as follower:
        while True:
            running = args.follow and (holder(run_dir) is not None or job.active())  # before the read: no line lost
            written = _copy(follower, args.json, last=not running)
            if not written or not running or ended.wait(POLL_SECONDS):
                return EXIT_OK


def _start(text: str) -> int | None:
    """``--from``: a byte count, or None for "the end"."""
    if text == "end":
        return None
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"a byte count (0 or more) or 'end'; got {text!r}")
    return int(text)


def _copy(follower: LineFollower, as_json: bool, last: bool) -> bool:
    """Write what the log holds after what was read to stdout: as it is (a line still being
    written too: a progress bar's ``\\r``), or as JSON (whole lines, and an unfinished one only at
    the ``last`` read). False when stdout is gone. A log not written yet reads as nothing."""
    out = sys.stdout.buffer
    try:
        if not as_json:
            out.write(b"".join(follower.read()) + follower.take_pending())
        else:
            pieces = [(line[:-1], end) for line, end in follower.read_ends()]
            if last and (rest := follower.take_pending()):
                pieces.append((rest, follower.offset))
            for line, end in pieces:
                out.write(json.dumps(encode(LogLine("log", line.decode("utf-8", "replace").rstrip("\r"),
                                                    next=end))).encode() + b"\n")
        out.flush()
    except (BrokenPipeError, ValueError):
        with contextlib.suppress(OSError):  # Python flushes stdout again at exit: not into the closed pipe
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        return False
    return True


def _stdin_is_piped() -> bool:
    """A pipe or a socket (a window's process, an ssh session): its end means "stop following".
    A terminal or /dev/null is not a reader that goes away."""
    with contextlib.suppress(OSError):
        mode = os.fstat(0).st_mode
        return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
    return False


def _wait_for_stdin_end(ended: threading.Event) -> None:
    with contextlib.suppress(OSError):
        while os.read(0, 4096):
            pass
    ended.set()



