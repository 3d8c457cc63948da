"""``replica-studio compare RUN_DIR... [--csv FILE] [--json]``: the configuration keys that differ
between runs and their final figures, runs that differ only in their seed in one row with
mean ± std (gui_app/core/comparison.py). A sweep folder stands for its trials' runs."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gui_app.core import atomic_io, rundir
from gui_app.core.comparison import Comparison, compare, read_figures
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_OK

COMMANDS = ("compare",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compare", help="compare runs: the config keys that differ and the final figures "
                                              "(runs differing only in the seed grouped: mean ± std)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (or sweep folders)")
    p.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--no-group", action="store_true", help="one row per run, even when only the seed differs")
    p.set_defaults(handler=_compare)


def _expand(path: Path) -> list[Path]:
    """A sweep folder (sweep.json and runs/) stands for its runs; anything else is one run."""
    if (path / "sweep.json").is_file() and (path / "runs").is_dir():
        return sorted(rundir.run_dirs(path / "runs"))
    return [path]


def _compare(args: argparse.Namespace) -> int:
    try:
        runs = [read_figures(p) for arg in args.run_dirs for p in _expand(Path(arg))]
        if not runs:
            raise ValueError(f"{args.run_dirs[0]}: the sweep has no runs yet")
        result = compare(runs, group_seeds=not args.no_group)
        if args.csv:
            atomic_io.write_text(args.csv, result.to_csv(), durable=False)
    except (OSError, ValueError) as exc:
        print(f"replica-studio compare: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    print(json.dumps(result.to_json()) if args.json else _table(result), flush=True)
    return EXIT_OK


def _table(result: Comparison) -> str:
    header, cells = result.table()
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header, *cells])
