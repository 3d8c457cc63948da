"""A run that a scheduler runs, not a process here: a Slurm job (gui_app/core/slurm_jobs.py) or
a Kubernetes Job (gui_app/core/kubernetes_jobs.py). Whether a run is one, whether its job is still
active (its run goes on though no process here holds it), and what its job says when the run's
events end without ``run_finished``."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from gui_app.core import kubernetes_jobs, rundir, slurm_jobs
from gui_app.core.slurm_jobs import JobState


def scheduled(run_dir: str | Path) -> bool:
    return slurm_jobs.read_job(run_dir) is not None or kubernetes_jobs.read_job(run_dir) is not None


def run_jobs(run_dirs: Iterable[str | Path]) -> dict[str, tuple[str, JobState]]:
    """``{run_dir: (job id or name, its state)}`` for the scheduled runs among ``run_dirs``: one
    squeue call for the Slurm ones, one kubectl call per cluster and namespace for the others."""
    paths = [Path(path) for path in run_dirs]
    return {**slurm_jobs.run_jobs(paths), **kubernetes_jobs.read_states(paths)}


def job_active(run_dir: str | Path) -> bool:
    return slurm_jobs.job_active(run_dir) or kubernetes_jobs.job_active(run_dir)


def ending(run_dir: str | Path, stopping: bool) -> tuple[str, str] | None:
    """(status, message) for a scheduled run whose job ended before the run finished: "stopped"
    when a Stop removed the job before its run started, else "failed" with the job's state; None
    for a run that is not scheduled."""
    record = kubernetes_jobs.read_job(run_dir)
    if record is not None:
        k8s = kubernetes_jobs.job_state(record)
        if stopping and k8s.state == kubernetes_jobs.DELETED:  # Stop before its pods started
            return "stopped", f"Kubernetes job {record.job} was deleted"
        return "failed", f"Kubernetes job {record.job} ended ({k8s.describe()}) without finishing the run"
    job = slurm_jobs.read_job(run_dir)
    if job is None:
        return None
    state = slurm_jobs.job_states([job.job_id])[job.job_id]
    if stopping and state.state == "CANCELLED":  # Stop while the job waited in the queue
        return "stopped", f"Slurm job {job.job_id} was cancelled"
    return "failed", f"Slurm job {job.job_id} ended ({state.describe()}) without finishing the run"


def resume_refusal(run_dir: Path, job: str, state: JobState) -> str | None:
    """Why ``resume`` cannot submit a scheduled run again now (None: it can): its job still runs
    it, or the run has completed."""
    if state.active:
        return (f"{run_dir} is still {state.scheduler} job {job} ({state.describe()}); stop it first with "
                f"'replica-studio stop {run_dir}'")
    if rundir.read_run(run_dir).status == "completed":
        return f"{run_dir} has completed; nothing to continue"
    return None
