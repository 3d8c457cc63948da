"""``sweep status``: each trial's state, values, metric, epochs and run directory, from the study
and the trials' run directories (read-only: a sweep running meanwhile is not disturbed)."""
from __future__ import annotations

import math
import time
from typing import Any

import optuna

from gui_app.core.answers import SweepStatus, SweepTrial, encode
from gui_app.core.backends import slurm
from gui_app.core.backends.base import JobState
from gui_app.engine.sweep.folder import SweepFolder, TrialRecord
from gui_app.engine.sweep.trial_process import TrialRun, live_pid, trial_run

_STATES = {"COMPLETE": "completed", "PRUNED": "pruned", "FAIL": "failed"}
STATES = ("running", "completed", "pruned", "failed", "stopped")


def trial_rows(folder: SweepFolder, study: optuna.Study, metric: str) -> list[SweepTrial]:
    records = folder.records()
    jobs = slurm.job_states(r.job for r in records.values() if r.job)  # (one squeue call; none without jobs)
    rows = []
    for frozen in study.get_trials(deepcopy=False):
        record = records.get(frozen.number, TrialRecord())
        run_dir = record.run_dir or frozen.user_attrs.get("run_dir") or folder.run_dir_of(frozen.number)
        run = trial_run(folder, frozen.number, record, run_dir) if run_dir else None
        if run is not None:
            run.read()
            run.close()
        state = _STATES.get(frozen.state.name)
        if state is None:  # open: running, or its process ended while the sweep's was away
            state = _open_state(run, record, "pruned_at" in frozen.user_attrs, jobs.get(record.job or ""))
        value = frozen.value if frozen.value is not None else (run.metric(metric) if run else None)
        start, end = frozen.datetime_start, frozen.datetime_complete
        duration = ((end.timestamp() if end else time.time()) - start.timestamp()) if start else None
        rows.append(SweepTrial(frozen.number, state, dict(frozen.params), value, len(run.epochs) if run else 0,
                             run_dir, record.device, duration, frozen.user_attrs.get("message"), record.host,
                             record.job, jobs[record.job].describe() if record.job in jobs else None))
    return rows


def _open_state(run: TrialRun | None, record: TrialRecord, pruned: bool, job: JobState | None = None) -> str:
    """A trial the study has not been told the end of: running (a Slurm trial: while its job is
    pending or running), or how its run ended (the next ``sweep resume`` tells the study), or
    stopped (``sweep resume`` continues it)."""
    if job is not None and job.active:
        return "running"
    if record.job is None and live_pid(str(run.run_dir) if run else None, record) is not None:
        return "running"
    ended = run.finished.status if run is not None and run.finished is not None else "stopped"
    if ended == "completed":  # (also one that ended before its pruning stop arrived)
        return ended
    return "pruned" if pruned else ended if ended == "failed" else "stopped"


def best(rows: list[SweepTrial], direction: str) -> SweepTrial | None:
    done = [r for r in rows if r.state == "completed" and r.metric is not None and math.isfinite(r.metric)]
    if not done:
        return None
    return (max if direction == "maximize" else min)(done, key=lambda r: r.metric or 0.0)


def importance(study: optuna.Study) -> dict[str, float]:
    """Optuna's importance of each parameter for the metric (its default evaluator, PED-ANOVA in
    Optuna 5: deterministic, a few milliseconds for 100 trials here), most important first; {}
    before two trials have completed, or when the completed trials say nothing (one value)."""
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(done) < 2:
        return {}
    try:
        found = optuna.importance.get_param_importances(study)
    except (ValueError, RuntimeError, ZeroDivisionError):  # e.g. every completed trial has the same value
        return {}
    return {key: float(value) for key, value in found.items() if math.isfinite(value)}


def as_json(folder: SweepFolder, rows: list[SweepTrial], metric: str, direction: str,
            importances: dict[str, float] | None = None) -> dict[str, Any]:
    return encode(SweepStatus(str(folder.path), metric, direction, folder.runner_pid() is not None,
                              folder.stop_asked, best(rows, direction), rows, importances or {}))


def as_text(rows: list[SweepTrial], metric: str, direction: str) -> str:
    lines = [f"{'trial':>5}  {'state':<9}  {metric:>12}  {'epochs':>6}  {'time':>7}  parameters"]
    for r in rows:
        value = f"{r.metric:.4f}" if r.metric is not None else "-"
        duration = f"{r.duration:.0f} s" if r.duration is not None else "-"
        values = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.parameters.items())
        job = f"  (Slurm job {r.job}: {r.job_state or 'unknown'})" if r.job else ""
        lines.append(f"{r.number:>5}  {r.state:<9}  {value:>12}  {r.epochs:>6}  {duration:>7}  {values}{job}")
        if r.message:
            lines.append(f"{'':>7}{r.message}")
    top = best(rows, direction)
    if top is not None:
        lines.append(f"best: trial {top.number}, {metric} {top.metric:.4f}, {top.run_dir}")
    return "\n".join(lines)
