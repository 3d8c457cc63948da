"""Where a run lives: one backend per place a run can run, and the one decision which a run has.

- :class:`~gui_app.core.backends.base.HereBackend`: a process on this machine runs it (its lock,
  its control channel, ``engine.log``);
- :class:`~gui_app.core.backends.slurm.SlurmBackend`: a Slurm job runs it (``slurm_job.json``);
- :class:`~gui_app.core.backends.kubernetes.KubernetesBackend`: a Kubernetes Job runs it
  (``kubernetes_job.json``, its run directory here a record);
- :class:`~gui_app.core.backends.ssh.SshBackend`: it is on an SSH host, reached by engine commands
  run there (which ask this module again, there).

``attach``, ``stop``, ``resume``, ``log``, ``runs``, the run list and the window's attachment ask
:func:`backend_for` and then the backend, never the records themselves. A new scheduler is one
module here (its record, its words, its :class:`~gui_app.core.backends.base.ScheduledBackend`)
added to :data:`SCHEDULERS`, plus its submit and resume in the engine. TensorFlow-free, Qt-free.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gui_app.core.backends.base import HereBackend, JobState, RunBackend, ScheduledBackend
from gui_app.core.backends.kubernetes import KubernetesBackend
from gui_app.core.backends.slurm import SlurmBackend
from gui_app.core.backends.ssh import SshBackend
from gui_app.core.ssh_hosts import Host

__all__ = ["SCHEDULERS", "HereBackend", "JobState", "KubernetesBackend", "RunBackend", "ScheduledBackend",
           "SlurmBackend", "SshBackend", "backend_for", "local_backend", "scheduled_jobs"]

# Asked in this order; a run has one scheduler's record at most.
SCHEDULERS: tuple[type[ScheduledBackend], ...] = (SlurmBackend, KubernetesBackend)


def local_backend(run_dir: str | Path) -> HereBackend:
    """The backend of a run whose directory is on this machine: its scheduler's, when a
    scheduler's record is in it, else a process here runs it."""
    for scheduler in SCHEDULERS:
        if scheduler.holds(run_dir):
            return scheduler(run_dir)
    return HereBackend(run_dir)


def backend_for(run_dir: str | Path, host: Host | None = None) -> RunBackend:
    """Where ``run_dir`` lives: on ``host`` (a path there), else on this machine (:func:`local_backend`)."""
    return SshBackend(run_dir, host) if host is not None else local_backend(run_dir)


def scheduled_jobs(run_dirs: Iterable[str | Path]) -> dict[str, tuple[str, JobState]]:
    """``{run_dir: (job id or name, its state)}`` for the scheduled runs among ``run_dirs``: one
    question per scheduler (one squeue call; one kubectl call per cluster and namespace)."""
    paths = [Path(path) for path in run_dirs]
    jobs: dict[str, tuple[str, JobState]] = {}
    for scheduler in SCHEDULERS:
        jobs.update(scheduler.jobs(paths))
    return jobs
