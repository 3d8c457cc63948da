"""The sweep as an Optuna study: its sampler, its pruner, its storage, and each trial's values.

Ask-and-tell: the sweep asks Optuna for a trial, starts it as a process, reports its validation
at each epoch end and tells the result; Optuna never runs the training itself. Only the engine
imports Optuna (the window must not pay its import time: pyproject.toml's contracts).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from gui_app.core.config_json import ConfigError
from gui_app.core.sweep_config import Parameter, SweepConfig
from gui_app.engine.sweep.folder import JOURNAL

optuna.logging.set_verbosity(optuna.logging.WARNING)  # the sweep prints its own progress lines


class _Grid(optuna.samplers.GridSampler):
    """Optuna's grid, for ask-and-tell: its ``after_trial`` calls ``study.stop()`` once the grid is
    covered, which raises outside ``study.optimize`` (before the told state is stored); the sweep
    stops by itself at the grid's size (``SweepConfig.trial_budget``)."""

    def after_trial(self, study, trial, state, values) -> None:
        pass


def sampler(sweep: SweepConfig, asked: int = 0) -> optuna.samplers.BaseSampler:
    """The sweep's sampler, for a study that has ``asked`` trials already: a resumed sweep's seed
    moves on by that many, or a seeded random search would draw its first values again (not a
    grid's: its seed is its order)."""
    if sweep.method == "grid":  # the same seed: trial K is the K-th point of the grid's shuffled order (a
        # resumed grid seeded anew gave its trial 3 the point of trial 1 again); it skips the points tried
        return _Grid(sweep.grid_space(), seed=sweep.seed)
    seed = None if sweep.seed is None else sweep.seed + asked
    if sweep.method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=tpe_startup_trials(sweep))


def tpe_startup_trials(sweep: SweepConfig) -> int:
    """TPE's random trials before it is guided: a quarter of the budget, 2 to 10. Optuna's
    default of 10 made 10 of a 16-trial sweep random search (docs/sweeps.md, search methods)."""
    return max(2, min(10, sweep.trials // 4))


def max_epochs(sweep: SweepConfig) -> int:
    """The most epochs a trial can run: Hyperband's largest budget."""
    epochs = [sweep.base.training.epochs]
    for p in sweep.parameters:
        if p.key == "training.epochs":
            epochs += [int(v) for v in p.values]
    return max(epochs)


def pruner(sweep: SweepConfig) -> optuna.pruners.BasePruner:
    if sweep.pruner == "median":
        # Reported steps are epochs, from 1: warm-up W lets epochs 1..W pass unpruned.
        return optuna.pruners.MedianPruner(n_startup_trials=sweep.pruner_startup_trials,
                                           n_warmup_steps=sweep.pruner_warmup_epochs + 1)
    if sweep.pruner == "hyperband":
        top = max_epochs(sweep)
        return optuna.pruners.HyperbandPruner(min_resource=min(max(1, sweep.pruner_warmup_epochs), top),
                                              max_resource=top)
    if sweep.pruner == "threshold":  # a trial worse than the threshold after the warm-up stops: no luck involved
        maximize = sweep.direction == "maximize"
        return optuna.pruners.ThresholdPruner(lower=sweep.pruner_threshold if maximize else None,
                                              upper=None if maximize else sweep.pruner_threshold,
                                              n_warmup_steps=sweep.pruner_warmup_epochs + 1)
    return optuna.pruners.NopPruner()


def check_storage(url: str) -> None:
    """A journal file's folder must exist and be writable (else one line, exit 2); a database URL
    is checked by opening it."""
    if not url.startswith(JOURNAL):
        return
    path = Path(url[len(JOURNAL):]).expanduser()
    if not url[len(JOURNAL):] or path.is_dir():
        raise ConfigError(f"--storage: {url}: needs a journal file's path, e.g. journal:/shared/sweeps/study.journal")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise ConfigError(f"--storage: the journal file {path} is not writable")
    if not path.exists() and not (path.parent.is_dir() and os.access(path.parent, os.W_OK | os.X_OK)):
        raise ConfigError(f"--storage: cannot write the journal file {path}: its folder "
                          f"{'is not writable' if path.parent.is_dir() else 'does not exist'}")


def open_storage(url: str) -> str | JournalStorage:
    """What Optuna opens for the sweep's storage URL."""
    if url.startswith(JOURNAL):
        check_storage(url)
        return JournalStorage(JournalFileBackend(str(Path(url[len(JOURNAL):]).expanduser())))
    return url


def load(sweep: SweepConfig, storage: str, study_name: str, create: bool = False) -> optuna.Study:
    if create:
        direction = optuna.study.StudyDirection.MAXIMIZE if sweep.direction == "maximize" else (
            optuna.study.StudyDirection.MINIMIZE)
        return optuna.create_study(storage=open_storage(storage), study_name=study_name, direction=direction,
                                   sampler=sampler(sweep), pruner=pruner(sweep))
    study = optuna.load_study(storage=open_storage(storage), study_name=study_name, pruner=pruner(sweep))
    study.sampler = sampler(sweep, len(study.trials))
    return study


def _suggest(trial: optuna.Trial, p: Parameter) -> Any:
    if p.kind == "choice":
        return trial.suggest_categorical(p.key, list(p.values))
    low, high = p.values
    if p.kind == "int":
        return trial.suggest_int(p.key, low, high)
    return trial.suggest_float(p.key, low, high, log=p.kind == "log_uniform")


def suggest(trial: optuna.Trial, sweep: SweepConfig) -> dict[str, Any]:
    """The trial's value of every parameter, by dotted key."""
    return {p.key: _suggest(trial, p) for p in sweep.parameters}


def trial(study: optuna.Study, number: int) -> optuna.Trial:
    """A trial already in the study, to report to (a resumed sweep's running trials)."""
    frozen = study.trials[number]
    return optuna.Trial(study, frozen._trial_id)  # Optuna's own handle: the id is not public API


def is_open(study: optuna.Study, number: int) -> bool:
    return study.trials[number].state == optuna.trial.TrialState.RUNNING


def counts(study: optuna.Study) -> dict[str, int]:
    """Trials by Optuna state: complete, pruned, fail, running."""
    found: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        name = t.state.name.lower()
        found[name] = found.get(name, 0) + 1
    return found
