"""A sweep's trials as Slurm jobs (the sweep file's ``slurm`` key; docs/sweeps.md).

One job per trial, submitted as ``submit --slurm`` submits a run: the trial's run directory in
the sweep folder (on the shared filesystem every node sees), its ``job.sbatch`` there, the job
recorded in ``slurm_job.json`` (gui_app/core/backends/slurm.py) and in the sweep's
``trials.json``. So each trial is an ordinary Slurm run: stopped by ``scancel`` (its workers stop
together with a checkpoint), continued by submitting its script again, requeued by Slurm near
its time limit, opened, attached to and resumed like any other.

The run directory is made and recorded before its job is submitted. A sweep killed between
``sbatch`` and its record finds the job again by the run's ``slurm_job.json`` or by its job
name (unique to the sweep and the trial: ``squeue --name``), and a run whose events exist was
submitted even when Slurm has forgotten its job: no trial is submitted twice.
"""
from __future__ import annotations

import random
import re
import shutil
import time
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.backends import slurm
from gui_app.core.backends.base import UNKNOWN, ask
from gui_app.core.backends.slurm import SCRIPT_FILE, SIGNAL_S, SlurmJobState
from gui_app.core.batch_split import scheduled_split
from gui_app.core.config import RunConfig
from gui_app.core.config_json import ConfigError
from gui_app.core.sweep_slurm import SweepSlurm
from gui_app.engine.schedulers.slurm import script as slurm_script
from gui_app.engine.schedulers.slurm.submit import sbatch
from gui_app.engine.sweep.folder import SweepFolder, TrialRecord

COMMANDS = ("sbatch", "squeue", "scancel", "scontrol")
STATES_EVERY_S = 1.0  # squeue asks slurmctld: once a second for all the sweep's jobs, not once a trial a poll


def check_commands() -> None:
    """Slurm's client commands, before a Slurm sweep starts or resumes (one line, exit 2)."""
    missing = [name for name in COMMANDS if shutil.which(name) is None]
    if missing:
        raise ConfigError(f"slurm: {', '.join(missing)} not found on PATH: a sweep whose trials are Slurm jobs "
                          "runs on a Slurm login node")


def check_trial(config: RunConfig, settings: SweepSlurm) -> None:
    """What ``submit --slurm`` refuses of a run (its batch split over the nodes), before any job."""
    scheduled_split(config, slurm_script.nodes(config), settings.gpus_per_node).warnings()


def job_name(folder: SweepFolder, number: int) -> str:
    """The trial's job name: unique to the sweep and the trial, so a lost record is found again."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"rs-sweep-{folder.path.name}-trial-{number}")[:200]


def _options(settings: SweepSlurm, name: str) -> slurm_script.SlurmOptions:
    return slurm_script.SlurmOptions(
        partition=settings.partition, time=settings.time, account=settings.account,
        cpus_per_task=settings.cpus_per_task, gpus_per_node=settings.gpus_per_node,
        signal_s=SIGNAL_S if settings.signal_seconds is None else settings.signal_seconds,
        extra=(*settings.sbatch, f"--job-name={name}"))  # (the last --job-name line is the one sbatch takes)


def prepare(folder: SweepFolder, number: int, record: TrialRecord, config_path: Path, settings: SweepSlurm) -> Path:
    """Make trial ``number``'s run directory and its script; the caller records it, then submits."""
    config = RunConfig.load(config_path)
    seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    run_dir = rundir.create_run_dir(folder.runs_dir.resolve(), config)
    script = run_dir / SCRIPT_FILE
    script.write_text(slurm_script.slurm_script(
        config, str(run_dir / rundir.CONFIG_FILE), str(run_dir), str(run_dir / "slurm-%j.out"), seed,
        _options(settings, job_name(folder, number)), str(script)), encoding="utf-8")
    script.chmod(0o755)
    record.run_dir = str(run_dir)
    return run_dir


def submit(record: TrialRecord) -> str:
    """Submit the trial's script (new, or again: it continues the run from its newest checkpoint,
    or starts it); records and returns the job id. SubmitError: one line why not."""
    assert record.run_dir is not None
    job_id = sbatch(Path(record.run_dir) / SCRIPT_FILE)
    slurm.record_job(record.run_dir, job_id)
    record.job = job_id
    return job_id


def find_job(folder: SweepFolder, number: int, record: TrialRecord) -> str | None:
    """The job of a trial whose record has none (a sweep killed between sbatch and its record):
    the run directory's record, else Slurm's job of the trial's name."""
    if record.run_dir is None:
        return None
    job = slurm.read_job(record.run_dir)
    if job is not None:
        return job.job_id
    said = ask(["squeue", "-h", "--name", job_name(folder, number), "-o", "%i"], slurm.ASK_TIMEOUT_S) or ""
    ids = said.split()
    if ids:
        slurm.record_job(record.run_dir, ids[-1])
        return ids[-1]
    return None


def was_submitted(record: TrialRecord) -> bool:
    """Its job has run at some point: the run has events (Slurm may have forgotten the job since)."""
    return record.run_dir is not None and (Path(record.run_dir) / rundir.EVENTS_FILE).is_file()


def cancel(record: TrialRecord) -> str | None:
    """``scancel`` the trial's job: its workers stop together with a checkpoint. None once Slurm
    took it (or there is no job), else the one line why not."""
    return None if record.job is None else slurm.cancel(record.job)


def running_jobs(records: list[TrialRecord]) -> list[str]:
    """The jobs of ``records`` Slurm may still run (one squeue call)."""
    states = slurm.job_states(r.job for r in records if r.job)
    return [job for job, state in states.items() if state.active]


def cancel_active(records: list[TrialRecord]) -> list[str]:
    """``sweep stop`` with no sweep process: ``scancel`` each trial's job Slurm still runs; the
    lines of those it refused."""
    jobs = running_jobs(records)
    return [line for job in jobs if (line := slurm.cancel(job)) is not None]


class JobStates:
    """Slurm's word on the sweep's jobs, asked for all of them at once, at most once a second."""

    def __init__(self) -> None:
        self.states: dict[str, SlurmJobState] = {}
        self.asked = -float("inf")

    def refresh(self, job_ids: list[str], now: bool = False) -> None:
        if job_ids and (now or time.monotonic() - self.asked >= STATES_EVERY_S):
            self.states.update(slurm.job_states(job_ids))
            self.asked = time.monotonic()

    def state(self, job_id: str) -> SlurmJobState:
        if job_id not in self.states:
            self.states.update(slurm.job_states([job_id]))
        return self.states.get(job_id, SlurmJobState(UNKNOWN))

    def alive(self, record: TrialRecord, run_finished: bool) -> bool:
        """The trial's job may still run its run. A job Slurm cannot say anything of (its
        controller does not answer, or it forgot the job) is alive until its run has finished."""
        if record.job is None:
            return False
        state = self.state(record.job)
        return state.active or (state.state == UNKNOWN and not run_finished)
