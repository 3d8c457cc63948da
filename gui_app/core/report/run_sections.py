"""The report's parts about training: the summary, loss and accuracy per step with each epoch's
validation, the replicas (their curves, their speed, the slowest named) and where a step's time
goes. Everything comes from the run model the window shows (gui_app.core.history), named as the
window names it (gui_app.core.wording, the Replicas tab's "Slowest: replica N")."""
from __future__ import annotations

import math
import time

import numpy as np

from gui_app.core import wording
from gui_app.core.history import RunHistory
from gui_app.core.history.replicas import SPEED_WINDOW
from gui_app.core.history.timing import WINDOW
from gui_app.core.history.training import ACCURACY, LOSS, LR, STEP, VAL_ACCURACY, VAL_LOSS, VAL_STEP
from gui_app.core.report.page import facts, note, section
from gui_app.core.report.record import RunRecord
from gui_app.core.report.svg import COLORS, Bar, Line, bar_chart, line_chart

SPLIT_PARTS = (("compute", "#1f77b4"), ("waiting for input", "#ff7f0e"), ("the rest", "#7f7f7f"))


def duration_text(seconds: float | None) -> str:
    """``2 h 03 min``, ``4 min 12 s``, ``38.2 s``."""
    if seconds is None or not math.isfinite(seconds):
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def summary(record: RunRecord) -> str:
    history, config, started = record.history, record.config, record.history.started
    status = history.status
    progress = f" at step {status.step:,}" + (f" of {status.total_steps:,}" if status.total_steps else "")
    dataset_counts = wording.example_counts(started.dataset) if started else ""
    model = config.get("model", {}).get("name", "?")
    parameters = (started.model or {}).get("parameters") if started else None
    replicas = history.replicas
    devices = ", ".join(replicas.label(r) for r in range(replicas.replicas))
    rows = [
        ("Status", status.status + progress),
        ("Why it ended", wording.for_people(status.message or "")),
        ("Dataset", str(config.get("dataset", {}).get("name", "?"))
         + (f" ({dataset_counts})" if dataset_counts else "")),
        ("Model", str(model) + (f" ({parameters:,} parameters)" if isinstance(parameters, int) else "")),
        ("Strategy", record.strategy),
        ("Devices", f"{wording.count(replicas.replicas, 'replica')}: {devices}" if replicas.replicas else ""),
        ("Workers", str(started.num_workers) if started else ""),
        ("Global batch", f"{started.global_batch_size:,} ({started.per_replica_batch_size:,} per replica)"
         if started and started.global_batch_size else ""),
        ("Started", time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(status.started)) if status.started else ""),
        ("Duration", duration_text(record.duration)),
        ("Examples/s", f"{record.examples_per_sec:,.0f} (median of the steps)" if record.examples_per_sec else ""),
        ("Test accuracy", f"{history.evaluation.accuracy:.2%}" if history.evaluation and
         history.evaluation.accuracy is not None else ""),
        ("Last validation", _last_validation(history)),
    ]
    return section("Summary", facts(rows), "summary")


def _last_validation(history: RunHistory) -> str:
    val = history.training.validation
    if not len(val):
        return ""
    loss, acc = val.last(VAL_LOSS), val.last(VAL_ACCURACY)
    parts = [f"accuracy {acc:.2f}%" if math.isfinite(acc) else "", f"loss {loss:.4f}" if math.isfinite(loss) else ""]
    return ", ".join(p for p in parts if p)


def training(record: RunRecord) -> str:
    series = record.history.training
    data, val = series.steps.data, series.validation.data
    if not len(data) and not len(val):
        return ""
    x, vx = data[:, STEP], val[:, VAL_STEP]
    loss = line_chart([Line("training loss", x, data[:, LOSS], COLORS[0], width=1.0),
                       Line("validation loss", vx, val[:, VAL_LOSS], COLORS[3], dots=True)], "step", "Loss")
    accuracy = line_chart([Line("training accuracy (%)", x, data[:, ACCURACY], COLORS[0], width=1.0),
                           Line("validation accuracy (%)", vx, val[:, VAL_ACCURACY], COLORS[3], dots=True)],
                          "step", "Accuracy (%)")
    rate = data[:, LR]
    finite = rate[np.isfinite(rate)]
    schedule = (line_chart([Line("learning rate", x, rate, COLORS[2], width=1.0)], "step", "Learning rate")
                if len(finite) and finite.min() != finite.max() else "")  # a constant rate is said in the config
    body = f'<div class="charts">{loss}{accuracy}{schedule}</div>'
    if len(data) > 1200:
        body += note(f"{len(data):,} steps, drawn with each stretch's first, last, lowest and highest point: "
                     "every spike is kept; hover a line for its extremes.")
    return section("Training", body, "training")


def replicas(record: RunRecord) -> str:
    series = record.history.replicas
    if not series.replicas or not len(series.steps):
        return ""
    x = series.steps.column(0)

    def name(r: int) -> str:
        return f"replica {r} · {series.label(r)}" if series.devices[r] else f"replica {r}"

    charts = []
    for metric, title in (("loss", "Local loss per replica"), ("grad_norm", "Gradient norm per replica"),
                          ("examples_per_sec", "Examples/s per replica"),
                          ("memory_bytes", "GPU memory in use per replica (MiB)")):  # "" on CPUs: none measured
        values = series.metrics[metric].data
        if metric == "memory_bytes":
            values = values / 2**20
        charts.append(line_chart([Line(name(r), x, values[:, r], COLORS[r % len(COLORS)], width=1.0)
                                  for r in range(series.replicas)], "step", title))
    speed, slowest = series.mean_speed(), series.slowest()
    bars = [Bar(name(r), [(float(np.nan_to_num(speed[r])), COLORS[r % len(COLORS)], "examples/s")],
                highlight=r == slowest, note=f"{speed[r]:,.0f} examples/s" if math.isfinite(speed[r]) else "")
            for r in range(series.replicas)]
    if slowest is not None:
        fastest = float(np.nanmax(speed))
        behind = 100.0 * (1.0 - speed[slowest] / fastest) if fastest > 0 else 0.0
        verdict = (f"Slowest: replica {slowest} ({series.label(slowest)}), {speed[slowest]:,.0f} examples/s, "
                   f"{behind:.0f}% below the fastest (mean of the last {SPEED_WINDOW} steps).")
    elif series.replicas == 1 and math.isfinite(speed[0]):
        verdict = f"One replica: {speed[0]:,.0f} examples/s."
    else:
        verdict = ""
    workers = f" over {wording.count(len(set(series.workers)), 'worker')}" if series.multi_worker else ""
    body = (note(f"{wording.count(series.replicas, 'replica')}{workers}.") + f'<div class="charts">{"".join(charts)}'
            f'</div><h3>Examples/s per replica</h3>{note(verdict, warn=slowest is not None)}'
            + bar_chart(bars, "examples/s"))
    return section("Replicas", body, "replicas")


def step_time(record: RunRecord) -> str:
    split = record.history.timing
    shares, per_replica = split.shares(), split.per_replica()
    history = split.history.data
    if shares is None and not len(history):
        return ""
    parts = []
    if shares is not None:
        parts.append(note("Recent steps (the last {}): {}.".format(
            WINDOW, ", ".join(f"{label} {share:.0%}" for (label, _), share in zip(SPLIT_PARTS, shares)))))
        advice = split.advice()
        if advice:
            parts.append(note(f"What to try: {advice}", warn=True))
    if len(per_replica):
        names = record.history.replicas
        bars = [Bar(f"replica {r}" + (f" · {names.label(r)}" if r < names.replicas and names.devices[r] else ""),
                    [(float(v) * 1000, color, label) for v, (label, color) in zip(row, SPLIT_PARTS)],
                    note=f"{sum(row) * 1000:,.1f} ms") for r, row in enumerate(per_replica)]
        parts.append(f"<h3>Per replica, mean of the last {WINDOW} steps (ms)</h3>{bar_chart(bars, 'ms')}")
    if len(history):
        lines = [Line(f"{label} share (%)", history[:, 0], 100 * history[:, i + 1], color, width=1.0)
                 for i, (label, color) in enumerate(SPLIT_PARTS)]
        # in the two-column grid, as the other charts: alone at full width it was drawn twice their size
        chart = line_chart(lines, "step", "Share of the step (%)", y_range=(0.0, 100.0))
        parts.append(f'<div class="charts">{chart}</div>')
    return section("Where a step's time goes", "".join(parts), "step-time")
