"""``stop`` and ``resume`` of a run a scheduler runs, and the copy ``attach`` makes while it
follows one, each by the run's backend (gui_app/core/backends): one module per scheduler here
with the same functions: ``current(backend)`` (its job and state), ``wait_stopped(backend, job,
timeout)`` after the scheduler took the stop, and ``resume(args, backend)``; the stop itself is
one function here.

A new scheduler adds its module to :data:`RUNS` under its backend's ``kind``."""
from __future__ import annotations

import argparse
from types import ModuleType

from gui_app.core import rundir
from gui_app.core.backends import HereBackend
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, say
from gui_app.engine.schedulers.kubernetes import runs as kubernetes_runs
from gui_app.engine.schedulers.slurm import runs as slurm_runs

RUNS: dict[str, ModuleType] = {"slurm": slurm_runs, "kubernetes": kubernetes_runs}


def stop(backend: HereBackend, timeout: float) -> int:
    """Hand the stop to the run's scheduler (``backend.by_scheduler()``: scancel, kubectl delete;
    the workers stop with a checkpoint) and wait until it no longer runs the run; say how it ended."""
    runs, run_dir = RUNS[backend.kind], backend.run_dir
    try:
        job, state = runs.current(backend)
    except OSError as exc:
        say("stop", str(exc))
        return EXIT_BAD_INPUT
    if not state.active:
        info = rundir.read_run(run_dir)
        print(f"{run_dir}: not running ({state.scheduler} job {job} {state.describe()}; the run {info.status} at "
              f"step {info.step})", flush=True)
        return EXIT_OK
    failed = backend.cancel()
    if failed is not None:
        say("stop", failed)
        return EXIT_BAD_INPUT
    ended, words = runs.wait_stopped(backend, job, timeout)
    if not ended:
        say("stop", words)
        return EXIT_FAILED
    info = rundir.read_run(run_dir)
    print(f"{run_dir}: {info.status} at step {info.step} ({words})", flush=True)
    return EXIT_OK


def resume(args: argparse.Namespace, backend: HereBackend) -> int:
    """Submit the run to its scheduler again (``backend.resubmits()``): it goes on from its newest
    checkpoint; prints the job and the run directory."""
    return RUNS[backend.kind].resume(args, backend)


def mirror(backend: HereBackend) -> kubernetes_runs.Mirror | None:
    """The copy of the run's output into its record that ``attach`` starts, for a run whose files
    are not here while it runs (a Kubernetes Job's, on the cluster's volume: its module's
    ``Mirror``); None for the others."""
    copier = getattr(RUNS.get(backend.kind), "Mirror", None)
    return copier(backend.run_dir) if copier is not None and backend.resubmits() else None
