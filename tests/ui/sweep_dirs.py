"""Real sweep folders for the window's sweep tests, without training: the engine's own folder and
Optuna study (gui_app/engine/sweep), each trial told as given, its run directory written the way
the engine writes one (run_dirs.write_run) with an ``epoch_end`` per validation figure. ``sweep
status --json`` over it is then the real engine's answer."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt

import optuna
from run_dirs import write_run

from gui_app.core import events as ev
from gui_app.core.sweep_config import SweepConfig
from gui_app.engine.sweep import study as studies
from gui_app.engine.sweep.folder import SweepFolder, TrialRecord

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 3, "optimizer": "adam", "learning_rate": 0.001, "global_batch_size": 64}}
PARAMETERS = {"training.learning_rate": {"log_uniform": [1e-4, 1e-1]},
              "training.global_batch_size": {"choice": [32, 64, 128]}}


@dataclass
class Trial:
    learning_rate: float
    batch: int
    state: str  # completed or pruned
    curve: tuple[float, ...]  # validation accuracy per epoch; the last is the told value
    host: str | None = None  # the SSH host it ran on (its events then come from trials/N.jsonl)
    job: str | None = None  # its Slurm job (a sweep whose trials are Slurm jobs)


def write_sweep(sweeps_dir: Path, trials: list[Trial], name: str = "lr") -> Path:
    sweep = SweepConfig.from_dict({"base": BASE, "parameters": PARAMETERS, "trials": len(trials) + 2})
    folder = SweepFolder.create(sweeps_dir, name, sweep, None)
    info = folder.study()
    study = studies.load(sweep, info["storage"], info["study_name"], create=True)
    records = {}
    for number, trial in enumerate(trials):
        study.enqueue_trial({"training.learning_rate": trial.learning_rate,
                             "training.global_batch_size": trial.batch})
        asked = study.ask()
        studies.suggest(asked, sweep)
        run = write_run(folder.runs_dir, f"trial-{number}", "completed" if trial.state == "completed" else "stopped")
        with (run / "events.jsonl").open("a", encoding="utf-8") as f:
            for epoch, accuracy in enumerate(trial.curve, 1):
                f.write(json.dumps(ev.encode(ev.EpochEnd(time=1.7e9 + epoch, epoch=epoch, step=10 * epoch,
                                                         val_loss=1 - accuracy, val_accuracy=accuracy))) + "\n")
        sweep.trial_config({"training.learning_rate": trial.learning_rate,
                            "training.global_batch_size": trial.batch}).save(run / "config.json")
        records[number] = TrialRecord(run_dir=str(run), host=trial.host, job=trial.job)
        if trial.host:  # what the trial's process here printed: the same events
            folder.trial_file(number, ".jsonl").write_bytes((run / "events.jsonl").read_bytes())
        if trial.state == "completed":
            study.tell(asked, trial.curve[-1])
        else:
            asked.report(trial.curve[-1], len(trial.curve))
            study.tell(asked, state=optuna.trial.TrialState.PRUNED)
    folder.save_records(records)
    return folder.path


def logged_commands(log: Path) -> list[list[str]]:
    """The commands the fake sweep engine logged (FAKE_SWEEP_LOG), in order."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def type_text(qtbot, edit, text: str) -> None:
    """Replace ``edit``'s text by typing, as a user does."""
    edit.selectAll()
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)
