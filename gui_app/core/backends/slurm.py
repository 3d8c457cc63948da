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
:class:`SlurmBackend` is such a run's backend (gui_app/core/backends/base.py says what a backend
answers). TensorFlow-free, Qt-free.
"""
from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterable

from gui_app.core import run_lock
from gui_app.core.backends.base import UNKNOWN, JobState, ScheduledBackend, ask, read_record, tell, write_record

JOB_FILE = "slurm_job.json"
ASK_TIMEOUT_S = 10  # squeue and scontrol only talk to slurmctld: longer means it does not answer
# The states in which the job may still run the run (Slurm's JOB_STATE_CODES).
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
                    "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})
SIGNAL_S = 120  # the job's warning before its time limit: a step group, the checkpoint and the exit fit easily
SCRIPT_FILE = "job.sbatch"  # the script submit wrote: submitted again, it continues the run


@dataclass(frozen=True)
class SlurmJob:
    """The job a run's script was last submitted as."""

    job_id: str
    submitted_on: str  # the machine sbatch ran on (a login node)
    submitted: float  # Unix time
    earlier: tuple[str, ...] = ()  # the jobs it was submitted as before (a stopped run resubmitted)


class SlurmJobState(JobState):
    scheduler: ClassVar[str] = "Slurm"
    ACTIVE: ClassVar[frozenset[str]] = ACTIVE


def record_job(run_dir: str | Path, job_id: str) -> SlurmJob:
    """Write the run's job (atomically), keeping the ids it was submitted as before."""
    before = read_job(run_dir)
    earlier = (*before.earlier, before.job_id) if before is not None and before.job_id != job_id else ()
    job = SlurmJob(job_id=job_id, submitted_on=socket.gethostname(), submitted=round(time.time(), 3),
                   earlier=earlier)
    write_record(run_dir, JOB_FILE, {"job_id": job.job_id, "submitted_on": job.submitted_on,
                                     "submitted": job.submitted, "earlier": list(job.earlier)})
    return job


def read_job(run_dir: str | Path) -> SlurmJob | None:
    """The run's job; None for a run that was never submitted to Slurm (or an unreadable record)."""
    value = read_record(run_dir, JOB_FILE)
    if value is None:
        return None
    try:
        return SlurmJob(job_id=str(value["job_id"]), submitted_on=str(value.get("submitted_on", "")),
                        submitted=float(value.get("submitted", 0.0)), earlier=tuple(value.get("earlier", ())))
    except (ValueError, KeyError, TypeError):
        return None


def output_file(run_dir: str | Path) -> Path | None:
    """Slurm's output of the run's job (the script's ``--output``: ``RUN_DIR/slurm-JOBID.out``)."""
    job = read_job(run_dir)
    return None if job is None else Path(run_dir) / f"slurm-{job.job_id}.out"


def job_states(job_ids: Iterable[str]) -> dict[str, SlurmJobState]:
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
    return {job_id: states.get(job_id, SlurmJobState(UNKNOWN)) for job_id in ids}


def run_jobs(run_dirs: Iterable[str | Path]) -> dict[str, tuple[str, SlurmJobState]]:
    """The job of each run submitted to Slurm and its state, ``{run_dir: (job id, JobState)}``:
    one squeue call for all of them, none without such runs."""
    jobs = {str(path): job for path in run_dirs if (job := read_job(path)) is not None}
    states = job_states(job.job_id for job in jobs.values())
    return {path: (job.job_id, states[job.job_id]) for path, job in jobs.items()}


def cancel(job_id: str) -> str | None:
    """``scancel JOB``: None once Slurm took it, else the one line why not."""
    return tell(["scancel", job_id], ASK_TIMEOUT_S, name="scancel",
                missing="scancel: not found on PATH (is this a Slurm login node?)",
                no_answer=f"scancel: no answer within {ASK_TIMEOUT_S} s (is slurmctld running?)")


def _ask(*command: str) -> str:
    """A Slurm command's stdout; "" when it is missing, fails or does not answer. squeue exits 1
    with "Invalid job id specified" when none of the ids is known any more, sacct 1 without
    accounting: what they printed on stdout still counts."""
    return ask(list(command), ASK_TIMEOUT_S, any_exit=True) or ""


def _reason(text: str) -> str:
    return "" if text in ("None", "(null)") else text


def parse_squeue(text: str) -> dict[str, SlurmJobState]:
    """``squeue -h -o '%i|%T|%r'`` lines: ``12|PENDING|Resources``."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            states[parts[0]] = SlurmJobState(parts[1], _reason(parts[2]))
    return states


def parse_scontrol(text: str) -> SlurmJobState | None:
    """``scontrol show job ID -o``: one line of ``Key=Value`` words; None when it knows no such job."""
    state = re.search(r"\bJobState=(\S+)", text)
    if state is None:
        return None
    reason = re.search(r"\bReason=(\S+)", text)
    return SlurmJobState(state.group(1), _reason(reason.group(1)) if reason else "")


def parse_sacct(text: str) -> dict[str, SlurmJobState]:
    """``sacct -n -P -X -o JobID,State,Reason`` lines: ``12|CANCELLED by 0|None``."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] and parts[1]:
            states[parts[0]] = SlurmJobState(parts[1].split()[0], _reason(parts[2]))
    return states


class SlurmBackend(ScheduledBackend):
    """A run submitted with ``submit --slurm``: its workers run on the nodes, its log is its job's
    output, a stop cancels its job (SIGTERM to every worker: they stop together with a checkpoint)
    unless a process here holds it (then its control channel reaches it)."""

    kind: ClassVar[str] = "slurm"
    RECORD: ClassVar[str] = JOB_FILE
    REMOVED: ClassVar[frozenset[str]] = frozenset({"CANCELLED"})

    @classmethod
    def holds(cls, run_dir: str | Path) -> bool:
        return read_job(run_dir) is not None

    @classmethod
    def jobs(cls, run_dirs: list[Path]) -> dict[str, tuple[str, JobState]]:
        return dict(run_jobs(run_dirs))

    def record(self) -> SlurmJob | None:
        return read_job(self.run_dir)

    def log_path(self) -> Path:
        return output_file(self.run_dir) or super().log_path()

    def resubmits(self) -> bool:
        """Its script is there: a job of ``submit --slurm``."""
        return (self.run_dir / SCRIPT_FILE).is_file()

    def by_scheduler(self) -> bool:
        """A job of ``submit --slurm`` that no process here holds (one that does reads its channel)."""
        return self.resubmits() and run_lock.holder(self.run_dir) is None

    def cancel(self) -> str | None:
        job = self.record()
        return f"{self.run_dir}: no Slurm job recorded" if job is None else cancel(job.job_id)
