"""``replica-studio report RUN_DIR|BUNDLE|SWEEP_DIR [-o FILE.html] [--json]``: the run as one
self-contained HTML page (gui_app/core/report), written to ``RUN_DIR/report.html`` unless ``-o``
names the file; a sweep folder's page holds its trials (gui_app/core/report/sweep_page.py).
Prints where it went and its size; with ``--json`` one JSON object instead (what the window's
File -> Save report… reads). Bad input (not a run folder, an output that cannot be written):
one line on stderr, exit 2."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from gui_app.core.formats import format_size
from gui_app.core.report import REPORT_FILE, write_page, write_report
from gui_app.core.report.sweep_page import build_sweep_report
from gui_app.core.sweep_config import SWEEP_FILE
from gui_app.engine.commands.bundle import run_folder
from gui_app.engine.commands.compare import read_runs
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK

COMMANDS = ("report",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="write a run as one HTML file that opens offline in any browser",
                              description="Write the run's summary, curves, replicas, step-time split, evaluation, "
                                          "exports, config and versions as one self-contained HTML file.")
    p.add_argument("run_dir", metavar="RUN_DIR",
                   help="a run folder, a run bundle (replica-studio bundle) or a sweep folder")
    p.add_argument("-o", "--output", metavar="FILE.html",
                   help="the file to write (default: RUN_DIR/report.html; for a bundle, BUNDLE.html beside it)")
    p.add_argument("--json", action="store_true", help='print {"type": "report", "path": ..., "size_bytes": ...}')
    p.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir).expanduser()
    try:
        if (run_dir / SWEEP_FILE).is_file():  # a sweep: its trials' table, the best, their curves
            path = Path(args.output).expanduser() if args.output else run_dir / REPORT_FILE
            if path.is_dir():
                raise ValueError(f"{path} is a folder; name the HTML file to write")
            write_page(path, build_sweep_report(run_dir, read_runs(run_dir)))
        else:
            path = _run_report(run_dir, args.output)
    except (OSError, ValueError) as exc:
        print(f"replica-studio report: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    size = path.stat().st_size
    if args.json:
        print(json.dumps({"type": "report", "path": str(path.absolute()), "size_bytes": size}), flush=True)
    else:
        print(f"{path}: {format_size(size)}", flush=True)
    return EXIT_OK


def _run_report(run_dir: Path, output: str | None) -> Path:
    with contextlib.ExitStack() as stack:  # a bundle: checked whole, read from a temporary copy
        default = run_dir.with_suffix(".html") if run_dir.is_file() else None
        return write_report(run_folder(run_dir, stack), output or default)
