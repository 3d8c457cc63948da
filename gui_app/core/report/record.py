"""What the report is made of, read once from a run folder with the readers the window uses:
the run model (rundir.read_history), the duration as the comparison counts it, the
config as written, the warnings and errors of its events, the misclassified images and the
model cards of the exports kept in the folder. ValueError (one line, naming the folder or
file) when the folder is not a run."""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gui_app.core import rundir, wording
from gui_app.core.comparison import run_duration
from gui_app.core.events import Error, Step, Warning
from gui_app.core.history import RunHistory
from gui_app.core.history.pyramid import MEAN
from gui_app.core.misclassified import load_misclassified

SKIPPED_FOLDERS = {rundir.CHECKPOINT_DIR, rundir.TENSORBOARD_DIR, ".control", "data"}


@dataclass
class RunRecord:
    run_dir: Path
    config: dict[str, Any]
    history: RunHistory
    duration: float | None  # seconds the run's processes worked, resumes added up (as compare counts it)
    strategy: str  # in the run list's words
    examples_per_sec: float | None
    messages: list[tuple[str, str]] = field(default_factory=list)  # (warning | error, text)
    misclassified: dict[str, np.ndarray] | None = None
    cards: list[dict[str, Any]] = field(default_factory=list)  # model cards of exports in the folder
    problems: list[str] = field(default_factory=list)  # what could not be read, one line each


def read_record(run_dir: str | Path) -> RunRecord:
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise ValueError(f"{run_dir}: no such folder")
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: not a folder (give a run folder)")
    if rundir.read_run(run_dir).config is None:
        raise ValueError(f"{run_dir}: not a run directory (no readable {rundir.CONFIG_FILE})")
    config = json.loads((run_dir / rundir.CONFIG_FILE).read_text(encoding="utf-8"))
    history = rundir.read_history(run_dir)  # an unreadable eval.json is named in its problems
    long = rundir.read_long_run(run_dir)
    if long is not None:  # a long run's figures from its pyramid (the bucket means of the speed)
        speeds = [float(v) for v in long.buckets().column("examples_per_sec", MEAN) if v > 0]
        messages = [(kind, message) for kind, message in long.meta.messages]
        duration = long.duration()
    else:
        events = rundir.read_events(run_dir, parts=False)
        speeds = [e.examples_per_sec for e in events if isinstance(e, Step) and e.examples_per_sec]
        messages = [("error" if isinstance(e, Error) else "warning", e.message) for e in events
                    if isinstance(e, (Warning, Error))]
        duration = run_duration(events)
    from gui_app.core.config import RunConfig  # the strategy told as the run list tells it

    try:
        strategy = wording.describe_strategy(RunConfig.from_dict(config).strategy)
    except ValueError:
        strategy = str(config.get("strategy", {}).get("name", "?"))
    record = RunRecord(run_dir, config, history, duration, strategy,
                       statistics.median(speeds) if speeds else None, messages, problems=list(history.problems))
    try:
        record.misclassified = load_misclassified(run_dir / rundir.MISCLASSIFIED_FILE)
    except ValueError as exc:
        record.problems.append(str(exc))
    record.cards = _cards(run_dir)
    return record


def _cards(run_dir: Path) -> list[dict[str, Any]]:
    """Model cards (``<export>.json``, gui_app/engine/export/model_card.py) in the run folder and
    the folders in it: the exports kept beside the run."""
    found = []
    candidates = [*run_dir.glob("*.json"), *(p for d in run_dir.iterdir() if d.is_dir() and d.name not in
                                             SKIPPED_FOLDERS for p in d.glob("*.json"))]
    for path in sorted(candidates):
        if path.name in (rundir.CONFIG_FILE, rundir.EVAL_FILE, rundir.SUMMARY_FILE, "process.json"):
            continue
        try:
            card = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(card, dict) and "schema_version" in card and "format" in card:
            found.append(card)
    return found
