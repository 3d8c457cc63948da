"""``replica-studio compare RUN_DIR... [--csv FILE] [--json]``: the configuration keys that differ
between runs and their final figures, runs that differ only in their seed in one row with
mean ± std (gui_app/core/comparison.py). A sweep folder stands for its trials' runs, in trial
order, each row naming its trials ("trial 3"); other runs are named by their folder."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from gui_app.core import atomic_io, rundir
from gui_app.core.comparison import Comparison, RunFigures, compare, read_figures
from gui_app.core.sweep_config import SWEEP_FILE
from gui_app.engine.commands.bundle import run_folder
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK
from gui_app.engine.sweep.folder import SweepFolder

COMMANDS = ("compare",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("compare", help="compare runs: the config keys that differ and the final figures "
                                              "(runs differing only in the seed grouped: mean ± std)")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (or sweep folders, run bundles)")
    p.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--no-group", action="store_true", help="one row per run, even when only the seed differs")
    p.set_defaults(handler=_compare)


def _trial_numbers(folder: SweepFolder) -> dict[Path, int]:
    """A sweep's run directories here, by resolved path, with their trial numbers: from the
    sweep's record, else from what each trial's start wrote (trials/N.run, N.jsonl: there when
    the record is damaged or was never written)."""
    records = folder.records()
    logged = folder.started_trials()
    numbers: dict[Path, int] = {}
    for number in sorted({*records, *logged}):
        record = records.get(number)
        if record is not None and record.host is not None:  # a trial on an SSH host has its run directory there
            continue
        run_dir = (record.run_dir if record is not None else None) or folder.run_dir_of(number)
        if isinstance(run_dir, str) and run_dir:
            numbers[Path(run_dir).resolve()] = number
    return numbers


def read_runs(path: Path) -> list[RunFigures]:
    """A sweep folder (sweep.json and runs/) stands for its runs, in trial order; anything else is one run."""
    folder = SweepFolder(path)
    if not (path / SWEEP_FILE).is_file() or not folder.runs_dir.is_dir():
        return [read_figures(path)]
    numbers = _trial_numbers(folder)
    runs: list[tuple[int | None, RunFigures]] = []
    for run_dir in rundir.run_dirs(folder.runs_dir):
        figures = read_figures(run_dir)
        number = numbers.get(run_dir.resolve())
        if number is not None:
            figures.name = f"trial {number}"
        runs.append((number, figures))
    runs.sort(key=lambda item: (item[0] is None, item[0] or 0, item[1].name))  # unrecorded runs last
    return [figures for _, figures in runs]


def _read_any(path: Path, stack: contextlib.ExitStack) -> list[RunFigures]:
    """:func:`read_runs`, a run bundle's run read from its temporary copy and named by the bundle's path."""
    folder = run_folder(path, stack)
    runs = read_runs(folder)
    if folder != path.expanduser():
        for figures in runs:
            figures.run_dir = path
    return runs


def _compare(args: argparse.Namespace) -> int:
    try:
        if args.csv and Path(args.csv).is_dir():  # checked first: the runs may take a while to read
            raise ValueError(f"--csv: {args.csv} is a folder; name the CSV file to write")
        with contextlib.ExitStack() as stack:  # a run bundle is read from a temporary copy
            runs = [figures for arg in args.run_dirs for figures in _read_any(Path(arg), stack)]
        if not runs:
            raise ValueError(f"{args.run_dirs[0]}: the sweep has no runs yet")
        result = compare(runs, group_seeds=not args.no_group)
        if args.csv:
            try:
                atomic_io.write_text(args.csv, result.to_csv(), durable=False)
            except OSError as exc:  # its message names the temporary file, not the one asked for
                raise ValueError(f"--csv: cannot write {args.csv}: {exc.strerror or exc}") from None
    except (OSError, ValueError) as exc:
        print(f"replica-studio compare: {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    print(json.dumps(result.to_json()) if args.json else _table(result), flush=True)
    return EXIT_OK


def _table(result: Comparison) -> str:
    """The table, each row's runs named last (names are long; the figures line up before them)."""
    header, cells = result.table()
    header = [*header, "run"]
    cells = [[*line, ", ".join(row.names)] for line, row in zip(cells, result.rows)]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in [header, *cells])
