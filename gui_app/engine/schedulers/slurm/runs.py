"""``resume`` and ``stop`` of a run submitted to Slurm (``submit --slurm``: its job in
``RUN_DIR/slurm_job.json``: its backend, gui_app/core/backends/slurm.py).

Its workers run on the nodes, under Slurm: no process here holds the run or reads its control
channel (a FIFO on the shared folder reaches no other machine). So:

- ``stop RUN_DIR`` cancels the job (``scancel``: SIGTERM to every worker, which stop together with
  a checkpoint, 0.7 s here) and waits until Slurm no longer runs it.
- ``resume RUN_DIR`` submits the run's ``job.sbatch`` again (``worker --resume-or-start``: every worker
  goes on from the newest checkpoint) and records the new job; it prints the job id and the run
  directory, as ``submit`` does (the window takes the last line). ``--set`` changes the run's
  config.json first, which every worker reads.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from gui_app.core import atomic_io, rundir
from gui_app.core.backends import slurm
from gui_app.core.backends.base import JobState
from gui_app.core.backends.slurm import SCRIPT_FILE, SlurmBackend
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.overrides import apply_overrides
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK, say
from gui_app.engine.schedulers import tools
from gui_app.engine.schedulers.slurm.submit import sbatch
from gui_app.engine.schedulers.tools import SubmitError

POLL_SECONDS = 0.5  # squeue asks slurmctld: twice a second while a stop is waited for


def resume(args: argparse.Namespace, backend: SlurmBackend) -> int:
    run_dir = Path(args.run_dir).expanduser().absolute()
    if not tools.may_resume(backend, current):
        return EXIT_BAD_INPUT
    try:
        if getattr(args, "set", None):
            config = apply_overrides(RunConfig.load(run_dir / rundir.CONFIG_FILE), args.set)
            atomic_io.write_text(run_dir / rundir.CONFIG_FILE, config.to_json() + "\n")
        job_id = sbatch(run_dir / SCRIPT_FILE)
        slurm.record_job(run_dir, job_id)
    except (ConfigError, SubmitError, OSError) as exc:
        say("resume", str(exc))
        return EXIT_BAD_INPUT
    print(job_id)
    print(run_dir, flush=True)
    return EXIT_OK


def current(backend: SlurmBackend) -> tuple[str, JobState]:
    """The run's job and what Slurm says of it (OSError: no readable record)."""
    job_id = tools.record(backend).job_id
    return job_id, slurm.job_states([job_id])[job_id]


def wait_stopped(backend: SlurmBackend, job_id: str, timeout: float) -> tuple[bool, str]:
    """After scancel: wait until Slurm no longer runs the job. (True, how the job ended) or
    (False, the line that says it still runs)."""
    deadline = time.monotonic() + timeout
    while (state := slurm.job_states([job_id])[job_id]).active:
        if time.monotonic() >= deadline:
            return False, (f"Slurm job {job_id} is still {state.describe()} {timeout:g} s after scancel; "
                           f"Slurm kills its processes after the cluster's KillWait")
        time.sleep(POLL_SECONDS)
    return True, f"Slurm job {job_id} {state.describe()}"
