"""The sweeps' trials as runs of the run list. Each trial trains an ordinary run directory in its
sweep's folder (``<sweeps dir>/<started>-<NAME>/runs/``; the layout: gui_app/engine/sweep/folder.py),
not in the runs folder the list scans, so without this a sweep's trials never showed there.
``trials.json`` maps each trial number to its run directory; a run it does not name yet (the
trial has just started) is still listed, as its sweep's. Trials on SSH hosts keep their run
directories there: the sweep view lists them. TensorFlow-free.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from gui_app.core.rundir import run_dirs
from gui_app.core.sweep_config import SWEEP_FILE

SWEEP_RUNS_DIR = "runs"  # in a sweep's folder: its trials' run directories
TRIALS_FILE = "trials.json"  # in a sweep's folder: trial number -> run directory, process, host
_STARTED = re.compile(r"^\d{8}-\d{6}-")  # a sweep folder's name starts with its start time


def sweep_name(sweep_dir: Path) -> str:
    """``digits-mnist_cnn`` of ``20261203-0755-digits-mnist_cnn``: the name it was started under."""
    return _STARTED.sub("", sweep_dir.name) or sweep_dir.name


def trial_runs(sweeps_dir: str | Path) -> dict[Path, str]:
    """Every trial run directory of the sweeps under ``sweeps_dir`` on this machine, each with
    the name the run list gives it: ``sweep NAME trial K`` (K as the sweep view numbers trials)."""
    try:
        sweeps = [p for p in Path(sweeps_dir).iterdir() if (p / SWEEP_FILE).is_file()]
    except OSError:  # no sweeps yet, or not readable
        return {}
    found: dict[Path, str] = {}
    for sweep in sweeps:
        numbers = _trial_numbers(sweep)
        name = sweep_name(sweep)
        for run in run_dirs(sweep / SWEEP_RUNS_DIR):
            number = numbers.get(run.name)
            found[run] = f"sweep {name} trial {number}" if number is not None else f"sweep {name}"
    return found


def _trial_numbers(sweep: Path) -> dict[str, int]:
    """Run directory name -> trial number, from the sweep's ``trials.json`` (written at each change)."""
    try:
        records = json.loads((sweep / TRIALS_FILE).read_text(encoding="utf-8"))
        return {Path(record["run_dir"]).name: int(number) for number, record in records.items()
                if isinstance(record, dict) and record.get("run_dir") and not record.get("host")}
    except (OSError, ValueError, TypeError, AttributeError):  # torn, foreign or missing: names only
        return {}
