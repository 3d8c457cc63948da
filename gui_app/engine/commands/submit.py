"""``replica-studio submit CONFIG --slurm|--kubernetes``: a new run, submitted from this machine.

``--kubernetes`` applies a plain Kubernetes manifest with kubectl and keeps a local record of the
run in the runs folder (engine/schedulers/kubernetes/submit.py).
``--slurm`` makes the run directory (its config inside), writes the run's sbatch script there
(``job.sbatch``, Slurm's output beside it as ``slurm-JOBID.out``) and submits it with
``sbatch --parsable`` (engine/schedulers/slurm/submit.py). stdout gets two lines, the job id
and the run directory; a bad config or a refused submission is one line on stderr and exit 2,
and leaves no run directory behind.
The job id goes into the run directory (``slurm_job.json``, gui_app/core/backends/slurm.py): the run
list, ``attach``, ``stop`` and ``resume`` ask Slurm about the run by it.
Submitting ``job.sbatch`` again (or Slurm requeueing the job) continues the run. The workers run
this app as it was started here (``sbatch`` there), so a submission over ssh on a login node
(``--host``) runs the app the host's entry names, not a ``replica-studio`` the nodes may lack.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.config import ConfigError
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from gui_app.engine.schedulers.kubernetes import manifest as kubernetes_manifest
from gui_app.engine.schedulers.kubernetes import submit as kubernetes_submit
from gui_app.engine.schedulers.slurm import script as slurm_script
from gui_app.engine.schedulers.slurm import submit as slurm_submit
from gui_app.engine.schedulers.tools import SubmitError

COMMANDS = ("submit",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("submit", help="submit a new multi-worker run to Slurm or Kubernetes (prints the job "
                                             "id or name and the run directory)",
                              description="Slurm: make the run directory, write its sbatch script there and submit "
                                          "it with sbatch (the runs folder must be on a filesystem every node "
                                          "sees). Kubernetes: apply an Indexed Job with kubectl; the run directory "
                                          "is on the runs volume.")
    p.add_argument("config")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--slurm", action="store_true", help="submit to Slurm with sbatch")
    kind.add_argument("--kubernetes", action="store_true", help="apply to Kubernetes with kubectl (no operator)")
    p.add_argument("--runs-dir", help="folder for the run directory (Kubernetes: the run's local record; default: "
                                      "the user data folder)")
    slurm_script.add_options(p)
    kubernetes_manifest.add_options(p)
    p.add_argument("-o", "--output", help="Kubernetes: keep the manifest in this file (applied again, it continues "
                                          "the run)")
    p.add_argument("--follow", action="store_true",
                   help="Kubernetes: then follow the run as attach does (the chief's events as JSON lines)")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=run)


def run(args) -> int:
    if args.kubernetes:
        return _kubernetes(args)
    try:
        runs_dir = Path(args.runs_dir) if args.runs_dir else rundir.default_runs_dir()
        job_id, run_dir = slurm_submit.submit(args.config, runs_dir, slurm_script.options_from(args))
    except (ConfigError, SubmitError, OSError) as exc:
        print(f"replica-studio submit: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(job_id)
    print(run_dir)
    return EXIT_OK


def _kubernetes(args) -> int:
    try:
        options = kubernetes_manifest.options_from(args)
        runs_dir = Path(args.runs_dir) if args.runs_dir else rundir.default_runs_dir()
        job, run_dir, local = kubernetes_submit.submit(args.config, options, runs_dir, args.output)
        print(job)
        print(run_dir)
        print(local, flush=True)
        return kubernetes_submit.follow(local) if args.follow else EXIT_OK
    except (ConfigError, SubmitError, OSError) as exc:
        print(f"replica-studio submit: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # Ctrl+C while following: the job runs on
        return EXIT_INTERRUPTED
