"""``stop`` and ``resume`` of a run a scheduler runs, and the copy ``attach`` makes while it
follows one, each by the run's backend (gui_app/core/backends): one module per scheduler here
with the same two functions, ``stop(backend, timeout)`` and ``resume(args, backend)``.

A new scheduler adds its module to :data:`RUNS` under its backend's ``kind``."""
from __future__ import annotations

import argparse
from types import ModuleType

from gui_app.core.backends import HereBackend
from gui_app.engine.cluster import kubernetes_runs, slurm_runs

RUNS: dict[str, ModuleType] = {"slurm": slurm_runs, "kubernetes": kubernetes_runs}


def stop(backend: HereBackend, timeout: float) -> int:
    """Hand the stop to the run's scheduler (``backend.by_scheduler()``) and wait until it no longer runs the run."""
    return RUNS[backend.kind].stop(backend, timeout)


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
