"""A run's Slurm job: which job runs it (``RUN_DIR/slurm_job.json``) and what Slurm says of it.

``submit --slurm`` records the job it submitted; a requeue keeps the job id, a resubmission
(``resume`` of a Slurm run) records the new one. The job's processes run on the nodes, so a
Slurm run has no process here that holds its lock (gui_app/core/live_runs.py): whether it is
alive is Slurm's word, asked for many jobs at once (the run list asks once per fill):

1. ``squeue -h -j IDS -o '%i|%T|%r'``: every job Slurm still lists (pending, running, and for
   ``MinJobAge``, 300 s by default, finished ones).
2. ``scontrol show job ID -o`` for each id squeue no longer lists (the controller's memory).
3. ``sacct`` for what is left, where accounting exists (without it sacct says "Slurm accounting
   storage is disabled": those jobs are unknown).

A missing or failing command leaves its jobs unknown: never an exception. ``scancel`` stops a
job: SIGTERM reaches every worker, which stop together with a checkpoint (docs/cluster.md).
:func:`run_status` is the one rule by which ``replica-studio runs`` and the window's run list
tell a Slurm run's status from its events and its job. TensorFlow-free, Qt-free.
"""
from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterable

from gui_app.core import atomic_io

JOB_FILE = "slurm_job.json"
ASK_TIMEOUT_S = 10  # squeue and scontrol only talk to slurmctld: longer means it does not answer
# The states in which the job may still run the run (Slurm's JOB_STATE_CODES).
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
                    "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
UNKNOWN = "UNKNOWN"
SIGNAL_S = 120  # the job's warning before its time limit: a step group, the checkpoint and the exit fit easily
WATCH_SECONDS = 2.0  # a job that ended is seen this late at most (the run_finished comes before it)
ENDED_BY_EVENTS = frozenset({"completed", "stopped", "failed"})  # a run_finished says more than its job's end


@dataclass(frozen=True)
class SlurmJob:
    """The job a run's script was last submitted as."""

    job_id: str
    submitted_on: str  # the machine sbatch ran on (a login node)
    submitted: float  # Unix time
    earlier: tuple[str, ...] = ()  # the jobs it was submitted as before (a stopped run resubmitted)


@dataclass(frozen=True)
class JobState:
    scheduler: ClassVar[str] = "Slurm"  # who the state is from (the run list's tooltip)
    state: str  # Slurm's word: PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, ... or UNKNOWN
    reason: str = ""  # why it waits (Resources, Priority, BeginTime, ...); "" for None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def describe(self) -> str:
        """For people: "pending (Resources)", "running", "cancelled"."""
        word = self.state.lower().replace("_", " ")
        return f"{word} ({self.reason})" if self.reason and self.state == "PENDING" else word


def record_job(run_dir: str | Path, job_id: str) -> SlurmJob:
    """Write the run's job (atomically), keeping the ids it was submitted as before."""
    before = read_job(run_dir)
    earlier = (*before.earlier, before.job_id) if before is not None and before.job_id != job_id else ()
    job = SlurmJob(job_id=job_id, submitted_on=socket.gethostname(), submitted=round(time.time(), 3),
                   earlier=earlier)
    value = {"job_id": job.job_id, "submitted_on": job.submitted_on, "submitted": job.submitted,
             "earlier": list(job.earlier)}
    atomic_io.write_text(Path(run_dir) / JOB_FILE, json.dumps(value) + "\n")
    return job


def read_job(run_dir: str | Path) -> SlurmJob | None:
    """The run's job; None for a run that was never submitted to Slurm (or an unreadable record)."""
    try:
        value = json.loads((Path(run_dir) / JOB_FILE).read_text(encoding="utf-8"))
        return SlurmJob(job_id=str(value["job_id"]), submitted_on=str(value.get("submitted_on", "")),
                        submitted=float(value.get("submitted", 0.0)), earlier=tuple(value.get("earlier", ())))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def output_file(run_dir: str | Path) -> Path | None:
    """Slurm's output of the run's job (the script's ``--output``: ``RUN_DIR/slurm-JOBID.out``)."""
    job = read_job(run_dir)
    return None if job is None else Path(run_dir) / f"slurm-{job.job_id}.out"


def job_states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """Slurm's state of each job (UNKNOWN where no command could say): one squeue call for all."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    states = parse_squeue(_ask("squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r"))
    for job_id in (i for i in ids if i not in states):
        state = parse_scontrol(_ask("scontrol", "show", "job", job_id, "-o"))
        if state is not None:
            states[job_id] = state
    left = [i for i in ids if i not in states]
    if left:
        states.update(parse_sacct(_ask("sacct", "-n", "-P", "-X", "-j", ",".join(left), "-o", "JobID,State,Reason")))
    return {job_id: states.get(job_id, JobState(UNKNOWN)) for job_id in ids}


def run_jobs(run_dirs: Iterable[str | Path]) -> dict[str, tuple[str, JobState]]:
    """The job of each run submitted to Slurm and its state, ``{run_dir: (job id, JobState)}``:
    one squeue call for all of them, none without such runs."""
    jobs = {str(path): job for path in run_dirs if (job := read_job(path)) is not None}
    states = job_states(job.job_id for job in jobs.values())
    return {path: (job.job_id, states[job.job_id]) for path, job in jobs.items()}


def run_status(events_status: str, state: JobState | None) -> str:
    """A run's status where no process here runs it, from its events' status and its job's state
    (None: not a Slurm run): the job's while Slurm may still run it ("pending (Resources)",
    "running", "requeued"); Slurm's word for an end the events do not tell (no run_finished:
    "cancelled", "failed", "timeout", "node fail"); else the events'. A job that completed
    without its run's run_finished completed nothing: the events' word stays ("interrupted")."""
    if state is not None and (state.active or (events_status not in ENDED_BY_EVENTS
                                               and state.state not in (UNKNOWN, "COMPLETED"))):
        return state.describe()
    return events_status


def job_state(run_dir: str | Path) -> JobState | None:
    """The state of the run's job; None for a run that is not a Slurm run."""
    job = read_job(run_dir)
    return None if job is None else job_states([job.job_id])[job.job_id]


def job_active(run_dir: str | Path) -> bool:
    """The run's job is one Slurm may still run it as (pending, running, requeued...)."""
    state = job_state(run_dir)
    return state is not None and state.active


class JobWatch:
    """Whether a run's job is active, asked of Slurm at most every ``every_s`` (``attach`` looks
    four times a second; squeue is a round trip to slurmctld). Never active for a run without a job."""

    def __init__(self, run_dir: str | Path, every_s: float = WATCH_SECONDS) -> None:
        self._run_dir, self._every = run_dir, every_s
        self._is_slurm_run = read_job(run_dir) is not None
        self._active, self._next = False, 0.0

    def active(self) -> bool:
        if self._is_slurm_run and time.monotonic() >= self._next:
            self._active = job_active(self._run_dir)  # the record again: a resume submits a new job
            self._next = time.monotonic() + self._every
        return self._active


def cancel(job_id: str) -> str | None:
    """``scancel JOB``: None once Slurm took it, else the one line why not."""
    scancel = shutil.which("scancel")
    if scancel is None:
        return "scancel: not found on PATH (is this a Slurm login node?)"
    try:
        done = subprocess.run([scancel, job_id], capture_output=True, text=True, timeout=ASK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"scancel: no answer within {ASK_TIMEOUT_S} s (is slurmctld running?)"
    said = [line for line in done.stderr.splitlines() if line.strip()]
    return None if done.returncode == 0 else (said[-1] if said else f"scancel: exit code {done.returncode}")


def _ask(*command: str) -> str:
    """A Slurm command's stdout; "" when it is missing, fails or does not answer."""
    program = shutil.which(command[0])
    if program is None:
        return ""
    try:
        done = subprocess.run([program, *command[1:]], capture_output=True, text=True, timeout=ASK_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
        return ""
    # squeue exits 1 with "Invalid job id specified" when none of the ids is known any more, sacct
    # 1 without accounting: what they printed on stdout still counts.
    return done.stdout


def _reason(text: str) -> str:
    return "" if text in ("None", "(null)") else text


def parse_squeue(text: str) -> dict[str, JobState]:
    """``squeue -h -o '%i|%T|%r'`` lines: ``12|PENDING|Resources``."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            states[parts[0]] = JobState(parts[1], _reason(parts[2]))
    return states


def parse_scontrol(text: str) -> JobState | None:
    """``scontrol show job ID -o``: one line of ``Key=Value`` words; None when it knows no such job."""
    state = re.search(r"\bJobState=(\S+)", text)
    if state is None:
        return None
    reason = re.search(r"\bReason=(\S+)", text)
    return JobState(state.group(1), _reason(reason.group(1)) if reason else "")


def parse_sacct(text: str) -> dict[str, JobState]:
    """``sacct -n -P -X -o JobID,State,Reason`` lines: ``12|CANCELLED by 0|None``."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] and parts[1]:
            states[parts[0]] = JobState(parts[1].split()[0], _reason(parts[2]))
    return states
