"""How ``export`` and ``predict`` end: one line on stderr and an exit code, SIGTERM like Ctrl+C.

    replica-studio <command>: <problem>

Exit codes (gui_app.engine.run.exits): 0 done, 1 a converter or parity check failed (or our own
bug), 2 bad input, 130 interrupted. ``--debug`` adds the traceback.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback
from typing import Callable

from gui_app.core.formats import ConversionError, ExportCancelled, ExportError
from gui_app.core.messages import typed_line
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED


def run_reporting_errors(command: str, body: Callable[[argparse.Namespace], int],
                         args: argparse.Namespace) -> int:
    """``body(args)`` with every way it can fail turned into one stderr line and an exit code."""
    previous = _stop_on_sigterm()
    try:
        return body(args)
    except ExportError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"replica-studio {command}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED if isinstance(exc, ConversionError) else EXIT_BAD_INPUT
    except (ExportCancelled, KeyboardInterrupt):
        print(f"replica-studio {command}: interrupted; nothing was written", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # whoever read stdout went away: nobody is left to tell
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - our bug or a broken install: still one line
        if args.debug:
            traceback.print_exc()
        print(f"replica-studio {command}: internal error: {typed_line(exc)} "
              "(run again with --debug for the traceback)", file=sys.stderr, flush=True)
        return EXIT_FAILED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _stop_on_sigterm():
    """SIGTERM unwinds like Ctrl+C, so the temporary files of an export are removed (the
    window's Cancel terminates the process). Returns the handler to restore (None off the
    main thread, where signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, signal.default_int_handler)


def one_line_errors(body: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command handler whose bad input (a config, a value, a file) ends as one stderr line and
    exit code 2 instead of a traceback (``--debug`` keeps it)."""
    from gui_app.core.config import ConfigError

    def handler(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except (ConfigError, ValueError, OSError) as exc:
            if args.debug:
                traceback.print_exc()
            print(f"replica-studio {args.command}: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT

    return handler


# Options naming a file, a folder or a URL: given as '' (a script's unset variable) each was taken
# for "not given", and the command quietly used its default (the default runs folder, no CSV).
_NOT_EMPTY = ("runs_dir", "sweeps_dir", "output", "csv", "samples", "storage")


def empty_option(args: argparse.Namespace) -> str | None:
    """The refusal of the first such option given as '', or None."""
    dest = next((dest for dest in _NOT_EMPTY if getattr(args, dest, None) == ""), None)
    return None if dest is None else f"--{dest.replace('_', '-')}: empty; give one or leave the option out"
