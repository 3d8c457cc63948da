"""A sweep folder's report (``replica-studio report SWEEP_DIR``): the sweep's settings, the best
trial, every trial's varied settings and final figures (the comparison's table:
gui_app/core/comparison.py, one row per trial) and their curves, the best drawn thickest. The
trials come in trial order, each named "trial N" (engine/commands/compare.read_runs). Parameter
importance needs Optuna, which the core never loads: ``replica-studio sweep status`` gives it."""
from __future__ import annotations

import math
import time
from pathlib import Path

from gui_app import __version__
from gui_app.core.comparison import RunFigures, compare
from gui_app.core.report.page import facts, note, page, section, table
from gui_app.core.report.svg import COLORS, Line, line_chart
from gui_app.core.sweep_config import SWEEP_FILE, SweepConfig
from gui_app.core.sweep_runs import sweep_name
from gui_app.core.wording import label

CURVE_OF = {"val_accuracy": ("val_accuracy", "Validation accuracy"), "val_loss": ("val_loss", "Validation loss"),
            "test_accuracy": ("val_accuracy", "Validation accuracy")}  # the test figure has no curve


def best_run(runs: list[RunFigures], metric: str, direction: str) -> RunFigures | None:
    scored = [run for run in runs if isinstance(getattr(run, metric), (int, float))
              and math.isfinite(getattr(run, metric))]
    if not scored:
        return None
    pick = max if direction == "maximize" else min
    return pick(scored, key=lambda run: getattr(run, metric))


def build_sweep_report(folder: Path, runs: list[RunFigures]) -> str:
    """ValueError (one line) when the sweep file cannot be read or the sweep has no runs yet."""
    sweep = SweepConfig.load(folder / SWEEP_FILE)
    if not runs:
        raise ValueError(f"{folder}: the sweep has no runs yet")
    comparison = compare(runs, group_seeds=False)
    best = best_run(runs, sweep.metric, sweep.direction)
    states: dict[str, int] = {}
    for run in runs:
        states[run.status] = states.get(run.status, 0) + 1
    settings = facts([
        ("Metric", f"{sweep.metric} ({sweep.direction})"), ("Method", f"{sweep.method}, pruner {sweep.pruner}"),
        ("Varied", ", ".join(f"{label(p.key)} ({p.key})" for p in sweep.parameters)),
        ("Trials", f"{len(runs)} of {sweep.trials}: " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))),
        ("Best", f"{best.name}: {sweep.metric} {getattr(best, sweep.metric):.4f}" if best else "none completed yet"),
    ])
    header, cells = comparison.table()
    rows = [[run.name, *line] for run, line in zip((row.runs[0] for row in comparison.rows), cells)]
    best_values = ""
    if best is not None:
        row = next(r for r in comparison.rows if best in r.runs)
        best_values = note("Best trial's settings: " + ", ".join(f"{label(k)} = {v}" for k, v in row.values.items()))
    trials = section("Trials", table(["trial", *header], rows, text_columns=(0,)) + best_values, "trials")
    curve, title = CURVE_OF.get(sweep.metric, ("val_accuracy", "Validation accuracy"))
    lines = [Line(run.name, *run.curve(curve), COLORS[i % len(COLORS)], width=3.0 if run is best else 1.0,
                  dots=True) for i, run in enumerate(runs)]
    losses = [Line(run.name, *run.curve("loss"), COLORS[i % len(COLORS)], width=2.0 if run is best else 0.8)
              for i, run in enumerate(runs)]
    charts = (f'<div class="charts">{line_chart(lines, "epoch", title)}'
              f'{line_chart(losses, "step", "Training loss")}</div>')
    curves = section("Curves", charts + note("Parameter importance: replica-studio sweep status SWEEP_DIR "
                                             "(Optuna's, computed by the engine)."), "curves")
    footer = (f"Written by Replica Studio {__version__} on {time.strftime('%Y-%m-%d %H:%M')} from "
              f"{folder.name}. One file: it loads nothing from the network.")
    return page(f"Sweep {sweep_name(folder)}", f"{sweep.metric} · {sweep.method} · {len(runs)} trials",
                [section("Sweep", settings, "sweep"), trials, curves], footer)
