"""A run that a scheduler runs, not a process here: a Slurm job (gui_app/core/slurm_jobs.py) or
a Kubernetes Job (gui_app/core/kubernetes_jobs.py). Whether a run is one, whether its job is still
active (its run goes on though no process here holds it), and what its job says when the run's
events end without ``run_finished``."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from gui_app.core import kubernetes_jobs, rundir, slurm_jobs
from gui_app.core.slurm_jobs import JobState

REMOVED = frozenset({"CANCELLED", kubernetes_jobs.DELETED})  # what a Stop leaves of a job that had not started


def scheduled(run_dir: str | Path) -> bool:
    return slurm_jobs.read_job(run_dir) is not None or kubernetes_jobs.read_job(run_dir) is not None


def run_jobs(run_dirs: Iterable[str | Path]) -> dict[str, tuple[str, JobState]]:
    """``{run_dir: (job id or name, its state)}`` for the scheduled runs among ``run_dirs``: one
    squeue call for the Slurm ones, one kubectl call per cluster and namespace for the others."""
    paths = [Path(path) for path in run_dirs]
    return {**slurm_jobs.run_jobs(paths), **kubernetes_jobs.read_states(paths)}


def job_of(run_dir: str | Path) -> tuple[str, JobState] | None:
    """The run's job id (or Job name) and its state, as :func:`run_jobs` gives them; None for a
    run no scheduler runs."""
    return run_jobs([run_dir]).get(str(Path(run_dir)))


def job_active(run_dir: str | Path) -> bool:
    job = job_of(run_dir)
    return job is not None and job[1].active


def ending(run_dir: str | Path, stopping: bool) -> tuple[str, str] | None:
    """(status, message) for a scheduled run whose job ended before the run finished: "stopped"
    when a Stop removed the job before its run started (scancel, kubectl delete), else "failed"
    with the job's state; None for a run that is not scheduled."""
    job = job_of(run_dir)
    if job is None:
        return None
    name, state = f"{job[1].scheduler} job {job[0]}", job[1]
    if stopping and state.state in REMOVED:
        return "stopped", f"{name} was {state.describe()}"
    return "failed", f"{name} ended ({state.describe()}) without finishing the run"


def resume_refusal(run_dir: Path, job: str, state: JobState) -> str | None:
    """Why ``resume`` cannot submit a scheduled run again now (None: it can): its job still runs
    it, or the run has completed."""
    if state.active:
        return (f"{run_dir} is still {state.scheduler} job {job} ({state.describe()}); stop it first with "
                f"'replica-studio stop {run_dir}'")
    if rundir.read_run(run_dir).status == "completed":
        return f"{run_dir} has completed; nothing to continue"
    return None
