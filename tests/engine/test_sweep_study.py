"""The sweep's Optuna side without training: the grid covers its points, a resumed seeded sampler
draws on, the pruners take the sweep's settings, and a trial the run configuration refuses fails
without a process."""
from __future__ import annotations

import json
from pathlib import Path

import optuna

from gui_app.core.sweep_config import SweepConfig
from gui_app.engine.commands.cli import main as cli_main
from gui_app.engine.sweep import study as studies

BASE = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "strategy": {"name": "default"},
        "training": {"epochs": 4}}


def _sweep(**keys) -> SweepConfig:
    return SweepConfig.from_dict({"base": BASE, "parameters": {
        "training.learning_rate": {"log_uniform": [1e-4, 1e-2]}, "training.optimizer": {"choice": ["adam", "sgd"]}},
        **keys})


def _asked(study: optuna.Study, sweep: SweepConfig, n: int) -> list[tuple]:
    values = []
    for _ in range(n):
        trial = study.ask()
        values.append(tuple(studies.suggest(trial, sweep).values()))
        study.tell(trial, 0.5)
    return values


def test_a_grid_tries_each_point_once_across_a_resume(tmp_path):
    sweep = _sweep(method="grid", trials=50)
    assert sweep.trial_budget == 6
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    first = _asked(studies.load(sweep, storage, "s", create=True), sweep, 4)
    rest = _asked(studies.load(sweep, storage, "s"), sweep, 2)  # the sweep started again
    assert sorted(first + rest) == sorted((lr, opt) for lr in sweep.grid_space()["training.learning_rate"]
                                          for opt in ("adam", "sgd"))


def test_a_seeded_grid_tries_each_point_once_across_a_resume_with_a_trial_still_open(tmp_path):
    """Optuna's grid gives trial K the K-th point of its order, shuffled by its seed: a resumed
    sweep seeded anew gave trial 3 the point of trial 1 again (found on the real Slurm)."""
    sweep = _sweep(method="grid", trials=50, seed=1)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = studies.load(sweep, storage, "s", create=True)
    first = _asked(study, sweep, 2)
    open_trial = study.ask()  # the sweep is killed while this trial runs
    first.append(tuple(studies.suggest(open_trial, sweep).values()))
    rest = _asked(studies.load(sweep, storage, "s"), sweep, 3)
    assert sorted(first + rest) == sorted((lr, opt) for lr in sweep.grid_space()["training.learning_rate"]
                                          for opt in ("adam", "sgd"))


def test_a_resumed_seeded_random_search_draws_new_values(tmp_path):
    sweep = _sweep(method="random", seed=7)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    first = _asked(studies.load(sweep, storage, "s", create=True), sweep, 3)
    again = _asked(studies.load(sweep, storage, "s"), sweep, 3)
    assert not set(first) & set(again)
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert _asked(studies.load(sweep, other, "s", create=True), sweep, 3) == first  # the seed repeats a sweep


def test_pruners_take_the_sweeps_settings():
    median = studies.pruner(_sweep(pruner="median", pruner_warmup_epochs=2, pruner_startup_trials=3))
    assert isinstance(median, optuna.pruners.MedianPruner)
    assert (median._n_startup_trials, median._n_warmup_steps) == (3, 3)  # epochs 1 and 2 are never pruned
    hyperband = studies.pruner(SweepConfig.from_dict({"base": BASE, "pruner": "hyperband", "parameters": {
        "training.epochs": {"int": [2, 9]}}}))
    assert isinstance(hyperband, optuna.pruners.HyperbandPruner) and hyperband._max_resource == 9
    assert isinstance(studies.pruner(_sweep()), optuna.pruners.NopPruner)


def test_a_combination_the_config_refuses_fails_without_a_process(tmp_path, capfd):
    # Each value is valid alone; together 8 micro-batches do not fit a batch of 4.
    path = tmp_path / "combo.json"
    path.write_text(json.dumps({"base": BASE, "parameters": {
        "training.accumulation_steps": {"choice": [8]}, "training.global_batch_size": {"choice": [4]}},
        "method": "grid"}))
    assert cli_main(["sweep", str(path), "--sweeps-dir", str(tmp_path / "sweeps")]) == 0
    out = capfd.readouterr().out.splitlines()
    assert out[1].startswith("trial 0 failed: training.accumulation_steps=8, training.global_batch_size=4: "
                             "training.accumulation_steps: 8 micro-batches do not fit")
    assert out[-1] == "sweep completed: 1 trials (0 completed, 0 pruned, 1 failed, 0 stopped)"
    assert cli_main(["sweep", "status", out[0], "--json"]) == 0
    status = json.loads(capfd.readouterr().out)
    assert [(t["state"], t["run_dir"]) for t in status["trials"]] == [("failed", None)]
    assert "micro-batches do not fit" in status["trials"][0]["message"]


def test_gpus_are_given_in_groups_of_gpus_per_trial():
    from gui_app.engine.sweep.trial_process import gpu_groups

    assert gpu_groups(["0", "1", "2", "3"], 1) == ["0", "1", "2", "3"]
    assert gpu_groups(["0", "1", "2", "3", "4"], 2) == ["0,1", "2,3"]  # the fifth would make a smaller run
    assert gpu_groups(["2", "5"], 4) == ["2,5"]  # fewer than asked: one trial gets them all
    assert gpu_groups([], 2) == []


def test_a_trial_held_at_an_epochs_end_is_told_to_continue_once_per_pause(tmp_path, monkeypatch):
    # The run says `continued` only once it wakes: polls in between still see it paused. A second
    # `continue` would be read after the next epoch's pause and skip it (a pruned trial then ran an
    # epoch past its pruning decision: the slow sweep test failed at random).
    from gui_app.engine.sweep import trial_process
    from gui_app.engine.sweep.driver import Active, SweepDriver
    from gui_app.engine.sweep.folder import SweepFolder, TrialRecord
    from gui_app.engine.sweep.trial_process import TrialRun

    sweep = _sweep(pruner="median", pruner_startup_trials=5)  # no decision to prune yet: it continues
    folder = SweepFolder.create(tmp_path, "held", sweep, None)
    study = studies.load(sweep, folder.study()["storage"], folder.study()["study_name"], create=True)
    driver = SweepDriver(folder, sweep, study, lambda line: None)
    told: list = []
    monkeypatch.setattr(trial_process, "continue_run", told.append)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    events = run_dir / "events.jsonl"

    def write(*lines: dict) -> None:
        with events.open("a") as f:
            f.writelines(json.dumps({"time": 1, **line}) + "\n" for line in lines)

    write({"type": "run_started", "run_dir": str(run_dir), "config": {}},
          {"type": "epoch_end", "epoch": 1, "step": 10, "val_accuracy": 0.5}, {"type": "paused", "step": 10})
    active = Active(0, study.ask(), TrialRecord(), run=TrialRun(run_dir))
    monkeypatch.setattr(active, "alive", lambda: True)
    driver.active.append(active)
    for _ in range(3):
        driver._follow(active)
    assert told == [run_dir]
    write({"type": "continued", "step": 10}, {"type": "epoch_end", "epoch": 2, "step": 20, "val_accuracy": 0.6},
          {"type": "paused", "step": 20})
    for _ in range(3):
        driver._follow(active)
    assert told == [run_dir, run_dir] and sorted(active.reported) == [1, 2]


class _Process:
    def __init__(self, code: int | None) -> None:
        self.code = code

    def poll(self) -> int | None:
        return self.code


def test_a_host_trial_whose_connection_dropped_is_followed_again_a_few_times(tmp_path, monkeypatch):
    # The run there goes on when its attachment's connection drops: the sweep attaches again
    # (3 times at most), and only then tells the trial failed.
    from gui_app.engine.sweep import trial_process
    from gui_app.engine.sweep.driver import MAX_ATTACHMENTS, Active, SweepDriver
    from gui_app.engine.sweep.folder import SweepFolder, TrialRecord
    from gui_app.engine.sweep.trial_process import TrialRun

    sweep = _sweep(pruner="none")
    folder = SweepFolder.create(tmp_path, "hosts", sweep, None)
    study = studies.load(sweep, folder.study()["storage"], folder.study()["study_name"], create=True)
    said: list[str] = []
    driver = SweepDriver(folder, sweep, study, said.append)
    attached: list[str] = []

    def follow_there(folder, number, record, run_dir):
        attached.append(run_dir)
        return _Process(1)  # its connection drops at once

    monkeypatch.setattr(trial_process, "follow_there", follow_there)
    events = folder.trial_file(0, ".jsonl")
    events.write_text(json.dumps({"time": 1, "type": "run_started", "run_dir": "/there/run", "config": {}}) + "\n")
    record = TrialRecord(host="gpu1", run_dir="/there/run")
    active = Active(0, study.ask(), record, process=_Process(1), run=TrialRun(Path("/there/run"), events=events))
    driver.active.append(active)
    for _ in range(MAX_ATTACHMENTS + 1):
        driver._follow(active)
    assert attached == ["/there/run"] * MAX_ATTACHMENTS
    assert driver.active == [] and study.trials[0].state == optuna.trial.TrialState.FAIL
    assert said[-1].startswith("trial 0 failed: its process ended without finishing its run")
