"""The sweep's loop: start trials while there are free slots and budget, follow each one's
epochs, report them to Optuna, stop the trials it prunes, tell each result.

A sweep starting again on its folder (``sweep resume``, after a kill, a crash or ``sweep stop``)
first takes up the trials the study still has open: a trial whose run a process still holds is
followed again, one whose run ended is told as it ended, one whose process died or was stopped
before its run finished is continued from its last checkpoint with ``replica-studio resume``, and
one that never got as far as its run directory is started again. No finished trial runs again.

A sweep whose trials are Slurm jobs (the sweep file's ``slurm``: slurm_trials.py) follows each
trial's job by its id (recorded in ``trials.json`` before anything waits on it) and its run's
events on the shared filesystem; it stops one (pruning, ``sweep stop``) with ``scancel``, after
which its workers stop together with a checkpoint; started again it takes up each open trial's
job by that id: a job Slurm still runs is followed, one that ended is told as its run ended, one
stopped is submitted again (it continues from its checkpoint). No trial is submitted twice.
"""
from __future__ import annotations

import math
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Callable

import optuna

from gui_app.core.config import MULTI_WORKER
from gui_app.core.config_json import ConfigError
from gui_app.core.events import EpochEnd
from gui_app.core.rundir import LOG_FILE
from gui_app.core.sweep_config import LOCAL, SweepConfig
from gui_app.engine.run.process import StartFailed, Starting
from gui_app.engine.sweep import slurm_trials, trial_process
from gui_app.engine.sweep import study as studies
from gui_app.engine.sweep.folder import SweepFolder, TrialRecord
from gui_app.engine.sweep.slurm_driving import SlurmDriving
from gui_app.engine.sweep.trial_process import Active, live_pid

POLL_S = 0.1  # how often trials' events are read: a digits epoch of the MLP takes 0.1 s here, and a trial
# waits at each epoch's end for the sweep's decision (its pruning) until the next read
MAX_ATTACHMENTS = 3  # a trial on an SSH host is followed again this often after its connection dropped
States = optuna.trial.TrialState


class SweepDriver(SlurmDriving):
    def __init__(self, folder: SweepFolder, sweep: SweepConfig, study: optuna.Study,
                 say: Callable[[str], None]) -> None:
        self.folder, self.sweep, self.study, self.say = folder, sweep, study, say
        self.records = folder.records()
        self.active: list[Active] = []
        self.waiting: list[Active] = []  # open trials to continue with `resume` as slots free up
        self.stopping = False
        self._signalled = threading.Event()
        self.deadline = (folder.study()["started"] + sweep.time_limit) if sweep.time_limit else math.inf
        strategy = sweep.base.strategy
        gives_gpus = strategy.name not in MULTI_WORKER and not any(d.startswith("GPU") for d in strategy.devices)
        self.slurm = sweep.slurm
        self.jobs = slurm_trials.JobStates()  # (asked only of a Slurm sweep's jobs)
        gives_gpus = gives_gpus and self.slurm is None  # a Slurm job's GPUs are Slurm's to give (gpus_per_node)
        self.devices = trial_process.gpu_groups(trial_process.gpu_devices() if gives_gpus else [],
                                                sweep.gpus_per_trial)
        # A pruned trial stops before its next epoch instead of several epochs later
        # (engine/training/actions/epoch_hold.py); a cluster's trials are stopped as they go.
        holds = sweep.pruner != "none" and strategy.name not in (*MULTI_WORKER, "parameter_server")
        self._hold = ["--pause-after-each-epoch"] if holds else []

    # ---- the loop ---------------------------------------------------------------------------
    def run(self) -> str:
        """Run until the budget is spent (``completed``) or a stop is asked (``stopped``)."""
        lock = self.folder.lock()
        self.folder.clear_stop()  # running again: an earlier stop is over
        previous = self._stop_on_signals()
        try:
            self._take_up_open_trials()
            while True:
                if not self.stopping and (self.folder.stop_asked or self._signalled.is_set()):
                    self._stop_all()
                self._signalled.clear()  # (it only cuts the wait short)
                self.jobs.refresh([a.record.job for a in self.active if a.record.job])
                for active in list(self.active):
                    self._follow(active)
                if not self.stopping:
                    while len(self.active) < self.sweep.parallel and self._start_next():
                        pass
                if not self.active:
                    break
                self._signalled.wait(POLL_S)
            return "stopped" if self.stopping else "completed"
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            lock.release()

    def _stop_on_signals(self) -> dict:
        """Ctrl+C or SIGTERM on the sweep stops its trials with a checkpoint, as ``sweep stop`` does."""
        def handler(signum: int, frame: FrameType | None) -> None:
            self._signalled.set()

        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, handler)
            except ValueError:  # not the main thread (tests drive the loop on one)
                pass
        return previous

    def _stop_all(self) -> None:
        self.stopping = True
        self.folder.ask_stop()  # so a status read meanwhile, and a later resume, know why
        self.waiting.clear()
        self.say(f"stopping: {len(self.active)} running trials stop with a checkpoint")
        for active in self.active:
            self._stop(active)

    def _stop(self, active: Active) -> None:
        """Stop a trial with a checkpoint: through its run's control channel (``stop --host``
        there), or ``scancel`` of its job."""
        if self.slurm is None:
            active.stop()
            return
        failed = slurm_trials.cancel(active.record)
        if failed is not None:
            self.say(f"trial {active.number}: {failed}")
        self.jobs.refresh([active.record.job] if active.record.job else [], now=True)

    def _start_next(self) -> bool:
        """Continue a waiting trial or start a new one; False when none may start."""
        if self.waiting:
            self._resume(self.waiting.pop(0))
            return True
        if len(self.study.trials) >= self.sweep.trial_budget or time.time() >= self.deadline:
            return False
        trial = self.study.ask()
        values = studies.suggest(trial, self.sweep)
        shown = ", ".join(f"{key}={_show(value)}" for key, value in values.items())
        try:
            config = self.sweep.trial_config(values)
        except ConfigError as exc:  # a combination the run configuration refuses
            trial.set_user_attr("message", str(exc))
            self.study.tell(trial, state=States.FAIL)
            self.say(f"trial {trial.number} failed: {shown}: {exc}")
            return True
        path = self.folder.trial_file(trial.number, ".json")
        config.save(path)
        if self.slurm is not None:
            return self._submit_new(trial, config, path, shown)
        record = self.records[trial.number] = self._place()
        active = Active(trial.number, trial, record)
        active.process = trial_process.start(self.folder, trial.number, record, self._train(path, record))
        self._save(active)
        self.active.append(active)
        gpus = "GPUs" if record.device and "," in record.device else "GPU"
        on = f" on {gpus} {record.device}" if record.device is not None else f" on {record.host}" if record.host else ""
        self.say(f"trial {trial.number} started{on}: {shown}")
        return True

    def _place(self) -> TrialRecord:
        """Where a new trial runs: the place of the sweep's ``hosts`` with the fewest running
        trials (the first of them on a tie), and here one GPU of this machine's."""
        running = [a.record.host or LOCAL for a in self.active]
        place = min(self.sweep.hosts, key=running.count)
        if place != LOCAL:
            return TrialRecord(host=place)
        return TrialRecord(device=self._free_device())

    def _train(self, config: Path, record: TrialRecord) -> list[str]:
        """The ``train`` arguments of a new trial: its run goes into the sweep folder here, or
        into the host's runs folder there (docs/hosts.md); only a run here waits at each epoch's
        end for the pruning (a word to a run there costs an ssh connection)."""
        if record.host:
            return ["train", str(config)]
        return ["train", str(config), "--runs-dir", str(self.folder.runs_dir), *self._hold]

    def _free_device(self) -> str | None:
        """The group of GPUs (one by default) fewest running trials have (None without GPUs)."""
        if not self.devices:
            return None
        used = [a.record.device for a in self.active]
        return min(self.devices, key=used.count)

    def _resume(self, active: Active) -> None:
        """Continue a trial from its run's last checkpoint; one whose process died before it
        made its run starts again (it never trained)."""
        if self.slurm is not None:
            self._resubmit(active)
            return
        if active.record.host is None:
            active.record.device = self._free_device()
        if active.run is None:
            args = self._train(self.folder.trial_file(active.number, ".json"), active.record)
            said = f"trial {active.number} started again (its process ended before its run started)"
        else:
            active.record.resumes += 1
            active.earlier_starts = active.run.starts
            args = ["resume", str(active.run.run_dir), *([] if active.record.host else self._hold)]
            said = f"trial {active.number} resumed from its last checkpoint: {active.run.run_dir}"
        active.process = trial_process.start(self.folder, active.number, active.record, args)
        self._save(active)
        self.active.append(active)
        self.say(said)

    # ---- following a trial ------------------------------------------------------------------
    def _alive(self, active: Active) -> bool:
        if self.slurm is None:
            return active.alive()
        return self.jobs.alive(active.record, active.finished is not None)

    def _follow(self, active: Active) -> None:
        if not self._started(active):
            return
        assert active.run is not None
        alive = self._alive(active)  # before reading: all a finished process wrote is read below
        for epoch in active.run.read():
            self._report(active, epoch)
        if active.finished is None and not alive and self._attach_again(active):
            return
        # A Slurm trial ends with its job: a run stopped by its time limit goes on in the requeued job.
        if (active.finished is not None and self.slurm is None) or not alive:
            self._end(active)
        elif self._held_for_decision(active):
            held = (active.run.starts, active.run.paused_at)
            # Once per pause: the run reports `continued` only when it wakes, so the next poll still
            # sees it paused, and a second `continue` read after the next epoch's pause would let the
            # trial run an epoch past its pruning decision.
            if active.continued != held:
                trial_process.continue_run(active.run.run_dir)
                active.continued = held

    def _started(self, active: Active) -> bool:
        """Whether the trial's run has started (and its run directory is known): its detached
        start's answer (after which its run's lock says whether it runs), or, found again or on
        an SSH host, what its process wrote in the sweep folder. A run that started while the
        sweep was stopping is asked to stop now."""
        starting = active.process if isinstance(active.process, Starting) else None
        if starting is None and active.run is not None:
            return True
        try:
            run_dir = starting.poll() if starting is not None else self.folder.run_dir_of(active.number)
        except StartFailed as exc:
            self._not_started(active, f"its process ended before its run started: {exc}")
            return False
        if run_dir is None:
            if not active.alive():
                self._not_started(active, "its process ended before its run started (see "
                                          f"{self.folder.trial_file(active.number, '.log')})")
            return False
        if starting is not None and active.record.host is not None:
            # followed through an attachment from here, which writes the run's whole history
            # anew: the trial's reading starts over with it
            if active.run is not None:
                active.run.close()
            active.run = None
            active.process = trial_process.follow_there(self.folder, active.number, active.record, str(run_dir))
        elif starting is not None:
            active.process = None  # started: from now on its run's lock says whether it runs
            active.record.pid = live_pid(str(run_dir), active.record) or active.record.pid  # the run's process
        if active.run is None:
            active.run = trial_process.trial_run(self.folder, active.number, active.record, str(run_dir))
        self._save(active)
        if self.stopping:
            active.stop()
        return True

    def _attach_again(self, active: Active) -> bool:
        """A trial on an SSH host whose attachment ended before its run did (the connection
        dropped: the run there goes on) is followed through a new one, a few times at most."""
        if active.record.host is None or active.run is None or self.stopping or active.attachments >= MAX_ATTACHMENTS:
            return False
        active.attachments += 1
        run_dir = str(active.run.run_dir)
        active.run.close()
        active.process = trial_process.follow_there(self.folder, active.number, active.record, run_dir)
        active.run = trial_process.trial_run(self.folder, active.number, active.record, run_dir)
        self._save(active)
        self.say(f"trial {active.number}: its connection to {active.record.host} ended; following it again")
        return True

    def _not_started(self, active: Active, message: str) -> None:
        if self.stopping:  # stopped while it started: a resume starts it again
            self.active.remove(active)
            self.say(f"trial {active.number} stopped before its run started")
        else:
            self._fail(active, message)

    def _held_for_decision(self, active: Active) -> bool:
        """The trial waits at an epoch's end (``--pause-after-each-epoch``) that has been reported
        and not pruned -- also one that waited while the sweep was away (resumed since)."""
        run = active.run
        return (run is not None and active.record.host is None and run.paused_at is not None
                and active.pruned_at is None and not self.stopping
                and any(epoch.step == run.paused_at for epoch in run.epochs.values()))

    def _report(self, active: Active, epoch: EpochEnd) -> None:
        name = "val_loss" if self.sweep.metric == "val_loss" else "val_accuracy"  # test_accuracy: validation
        value = getattr(epoch, name)
        if value is None or not math.isfinite(value) or epoch.epoch in active.reported:
            return
        active.trial.report(value, epoch.epoch)
        active.reported.add(epoch.epoch)
        if active.pruned_at is None and not self.stopping and active.trial.should_prune():
            active.pruned_at = epoch.epoch
            active.trial.set_user_attr("pruned_at", epoch.epoch)  # a resumed sweep then tells it pruned
            self._stop(active)
            self.say(f"trial {active.number} pruned after epoch {epoch.epoch}: {name} {value:.4f}; stopping it")
        else:
            self.say(f"trial {active.number} epoch {epoch.epoch}: {name} {value:.4f}")

    def _end(self, active: Active) -> None:
        assert active.run is not None
        run, finished = active.run, active.finished
        run.close()
        self.active.remove(active)
        active.trial.set_user_attr("epochs", len(run.epochs))
        if finished is not None and finished.status == "completed":  # (also when it ended before a pruning stop)
            value = run.metric(self.sweep.metric)
            if value is None or not math.isfinite(value):
                self._fail(active, f"its run completed without a {self.sweep.metric}")
                return
            self.study.tell(active.trial, value)
            self.say(f"trial {active.number} completed: {self.sweep.metric} {value:.4f} ({run.run_dir})")
        elif active.pruned_at is not None:
            self.study.tell(active.trial, state=States.PRUNED)
            self.say(f"trial {active.number} pruned: stopped at epoch {len(run.epochs)} ({run.run_dir})")
        elif finished is not None and finished.status == "failed":
            self._fail(active, finished.message or "its run failed")
        elif finished is not None or self.stopping:  # stopped: `sweep resume` continues it
            self.say(f"trial {active.number} stopped after epoch {len(run.epochs)} ({run.run_dir})")
        elif active.record.job is not None:
            state = self.jobs.state(active.record.job).describe()
            self._fail(active, f"its Slurm job {active.record.job} ended ({state}) without finishing its run "
                               f"(see {run.run_dir / f'slurm-{active.record.job}.out'})")
        else:
            log = self.folder.trial_file(active.number, ".log") if active.record.host else run.run_dir / LOG_FILE
            self._fail(active, f"its process ended without finishing its run (see {log})")

    def _fail(self, active: Active, message: str) -> None:
        if active in self.active:
            self.active.remove(active)
        active.trial.set_user_attr("message", message)
        self.study.tell(active.trial, state=States.FAIL)
        self.say(f"trial {active.number} failed: {message}")

    def _save(self, active: Active) -> None:
        if active.run is not None:
            active.record.run_dir = str(active.run.run_dir)
            active.trial.set_user_attr("run_dir", active.record.run_dir)
        self.folder.save_records(self.records)

    # ---- a sweep started again ----------------------------------------------------------------
    def _take_up_open_trials(self) -> None:
        for frozen in self.study.get_trials(deepcopy=False, states=(States.RUNNING,)):
            number = frozen.number
            record = self.records.setdefault(number, TrialRecord())
            active = Active(number, studies.trial(self.study, number), record,
                            pruned_at=frozen.user_attrs.get("pruned_at"), reported=set(frozen.intermediate_values))
            if self.slurm is not None:
                self._take_up_job(active)
                continue
            run_dir = record.run_dir or self.folder.run_dir_of(number)
            if run_dir is not None:
                active.run = trial_process.trial_run(self.folder, number, record, run_dir)
            if active.alive():  # its process still runs: follow it again
                self.active.append(active)
                self.say(f"trial {number} is still running: following it again")
                if active.pruned_at is not None:
                    active.stop()
                continue
            if active.run is None:
                self.waiting.append(active)  # its process ended before its run started: start it again
                continue
            for epoch in active.run.read():
                self._report(active, epoch)
            if active.pruned_at is not None or (active.run.finished is not None
                                                and active.run.finished.status != "stopped"):
                # ended while the sweep was away, or it was being pruned
                self.active.append(active)
                self._end(active)  # it ended while the sweep was away: tell it as it ended
            else:
                self.waiting.append(active)  # stopped, or its process died: continue it


def _show(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
