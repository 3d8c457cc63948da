"""``replica-studio diagnose RUN_DIR [--json] [--host HOST]``: what is wrong with a run, now or
at its end (gui_app/core/diagnosis.py; docs/diagnose.md).

    replica-studio diagnose RUN_DIR           # one sentence per finding
    replica-studio diagnose RUN_DIR --json    # {"run": ..., "status": ..., "findings": [...]}

It reads the run's folder and, for a live run, its process's state: no TensorFlow, so it
answers in the time Python starts. Exit 0 whether or not it finds something; 2 with one line
on stderr for a folder that is not a run or cannot be read (and, with ``--host``, a host that
cannot run it).
"""
from __future__ import annotations

import argparse
import json
import sys

from gui_app.core.answers import encode
from gui_app.core.diagnosis import NotARun, diagnose, sentences
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK

COMMANDS = ("diagnose",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("diagnose", help="what is wrong with a run, now or at its end: a non-finite loss, "
                                               "a stall, waiting for input")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--json", action="store_true",
                   help='one JSON object: {"run": ..., "status": ..., "findings": [...]}')
    p.set_defaults(handler=_diagnose)


def _diagnose(args: argparse.Namespace) -> int:
    try:
        found = diagnose(args.run_dir)
    except (NotARun, OSError) as exc:
        print(f"replica-studio diagnose: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    print(json.dumps(encode(found)) if args.json else sentences(found), flush=True)
    return EXIT_OK
