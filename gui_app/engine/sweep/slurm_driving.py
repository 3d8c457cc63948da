"""The Slurm half of the sweep's loop (driver.py): a new trial submitted as a job, a stopped one
submitted again, an open one taken up by its recorded job after the sweep's process was killed.
A mixin of :class:`~gui_app.engine.sweep.driver.SweepDriver`, which owns the loop and the study."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import optuna

from gui_app.core.config import RunConfig
from gui_app.core.config_json import ConfigError
from gui_app.core.events import EpochEnd
from gui_app.core.sweep_config import SweepConfig
from gui_app.core.sweep_slurm import SweepSlurm
from gui_app.engine.schedulers.tools import SubmitError
from gui_app.engine.sweep import slurm_trials, trial_process
from gui_app.engine.sweep import study as studies
from gui_app.engine.sweep.folder import SweepFolder, TrialRecord
from gui_app.engine.sweep.trial_process import Active

States = optuna.trial.TrialState


class SlurmDriving:
    if TYPE_CHECKING:  # what the driver has that this half uses
        folder: SweepFolder
        sweep: SweepConfig
        study: optuna.Study
        slurm: SweepSlurm | None
        jobs: slurm_trials.JobStates
        records: dict[int, TrialRecord]
        active: list[Active]
        waiting: list[Active]
        say: Callable[[str], None]

        def _save(self, active: Active) -> None: ...
        def _end(self, active: Active) -> None: ...
        def _alive(self, active: Active) -> bool: ...
        def _report(self, active: Active, epoch: EpochEnd) -> None: ...
        def _stop(self, active: Active) -> None: ...
        def _fail(self, active: Active, message: str) -> None: ...

    def _submit_new(self, trial: optuna.Trial, config: RunConfig, path: Path, shown: str) -> bool:
        """A new trial as a Slurm job: its run directory recorded before the job is submitted."""
        assert self.slurm is not None
        try:
            slurm_trials.check_trial(config, self.slurm)
        except ConfigError as exc:  # (a batch that does not split over the trial's nodes)
            trial.set_user_attr("message", str(exc))
            self.study.tell(trial, state=States.FAIL)
            self.say(f"trial {trial.number} failed: {shown}: {exc}")
            return True
        record = self.records[trial.number] = TrialRecord()
        active = Active(trial.number, trial, record)
        self._prepare(active)
        self._submit(active)
        self.active.append(active)
        self.say(f"trial {trial.number} submitted as Slurm job {record.job}: {shown}")
        return True

    def _prepare(self, active: Active) -> None:
        assert self.slurm is not None
        try:
            run_dir = slurm_trials.prepare(self.folder, active.number, active.record,
                                           self.folder.trial_file(active.number, ".json"), self.slurm)
        except OSError as exc:  # (the sweep folder's disk is full or read-only: so is the next trial's)
            raise ConfigError(f"slurm: trial {active.number}: cannot make its run directory: "
                              f"{exc.strerror or exc}") from None
        active.run = trial_process.trial_run(self.folder, active.number, active.record, str(run_dir))
        self._save(active)  # the run directory is on record before its job exists

    def _submit(self, active: Active) -> None:
        """Submit (or submit again) a trial's job. A refusal ends the sweep with its one line: the
        next one would be refused too; ``sweep resume`` submits the trial once it can be."""
        try:
            slurm_trials.submit(active.record)
        except (SubmitError, OSError) as exc:
            raise ConfigError(f"slurm: trial {active.number}: {exc}") from None
        self._save(active)

    def _resubmit(self, active: Active) -> None:
        """Submit a Slurm trial's job again: its script continues the run from its newest
        checkpoint (or starts it, when it never trained)."""
        if active.run is None:  # the sweep stopped before the trial's run directory was made
            self._prepare(active)
        assert active.run is not None
        if active.run.starts:
            active.record.resumes += 1
        active.earlier_starts = active.run.starts
        self._submit(active)
        self.active.append(active)
        self.say(f"trial {active.number} submitted again as Slurm job {active.record.job}: it continues "
                 f"from its last checkpoint ({active.run.run_dir})")

    def _take_up_job(self, active: Active) -> None:
        """An open trial of a Slurm sweep, by the job recorded for it: followed while Slurm runs
        it, told as its run ended, or queued to be submitted (again) -- never submitted while a
        job of it may still run."""
        record, number = active.record, active.number
        path = self.folder.trial_file(number, ".json")
        if record.run_dir is None:  # killed before its run directory was made: its values again
            try:
                self.sweep.trial_config(studies.suggest(active.trial, self.sweep)).save(path)
            except ConfigError as exc:  # a combination the run configuration refuses (it was being told so)
                self._fail(active, str(exc))
                return
            self.waiting.append(active)
            return
        active.run = trial_process.trial_run(self.folder, number, record, record.run_dir)
        if record.job is None:  # killed between sbatch and its record
            record.job = slurm_trials.find_job(self.folder, number, record)
            self._save(active)
        if record.job is None and not slurm_trials.was_submitted(record):
            self.waiting.append(active)  # never submitted
            return
        for epoch in active.run.read():
            self._report(active, epoch)
        if self._alive(active):
            self.active.append(active)
            state = self.jobs.state(record.job).describe() if record.job else "unknown"
            self.say(f"trial {number} is Slurm job {record.job} ({state}): following it again")
            if active.pruned_at is not None:  # it was being pruned when the sweep was killed
                self._stop(active)
            return
        finished = active.finished
        if active.pruned_at is not None or (finished is not None and finished.status != "stopped"):
            self.active.append(active)
            self._end(active)  # it ended while the sweep was away: tell it as it ended
        else:
            self.waiting.append(active)  # stopped, cancelled or lost with its node: continue it
