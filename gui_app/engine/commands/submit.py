"""``replica-studio submit CONFIG --slurm|--kubernetes``: a new run, submitted from this machine.

``--kubernetes`` applies a plain Kubernetes manifest with kubectl and keeps a local record of the
run in the runs folder (kubernetes_submit.py).
``--slurm`` makes the run directory (its config inside), writes the run's sbatch script there
(``job.sbatch``, Slurm's output beside it as ``slurm-JOBID.out``) and submits it with
``sbatch --parsable``. stdout gets two lines, the job id and the run directory; a bad config or
a refused submission is one line on stderr and exit 2, and leaves no run directory behind.
The job id goes into the run directory (``slurm_job.json``, gui_app/core/backends/slurm.py): the run
list, ``attach``, ``stop`` and ``resume`` ask Slurm about the run by it.
Submitting ``job.sbatch`` again (or Slurm requeueing the job) continues the run. The workers run
this app as it was started here (:func:`sbatch`), so a submission over ssh on a login node
(``--host``) runs the app the host's entry names, not a ``replica-studio`` the nodes may lack.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.backends import slurm as slurm_jobs
from gui_app.core.backends.slurm import SCRIPT_FILE
from gui_app.core.batch_split import scheduled_split
from gui_app.core.config import ConfigError, RunConfig
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK
from gui_app.engine.schedulers import tools as scheduler_command
from gui_app.engine.schedulers.kubernetes import manifest as kubernetes_manifest
from gui_app.engine.schedulers.kubernetes import submit as kubernetes_submit
from gui_app.engine.schedulers.slurm import script as slurm_script
from gui_app.engine.schedulers.tools import SubmitError
from gui_app.identity import app_command, app_env

COMMANDS = ("submit",)
SUBMIT_TIMEOUT_S = 60  # sbatch only talks to slurmctld; a minute means the controller does not answer


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


def submit(config_path: str, runs_dir: Path, options: slurm_script.SlurmOptions) -> tuple[str, Path]:
    """(job id, run directory); ConfigError, SubmitError or OSError, with nothing left behind."""
    config = RunConfig.load(config_path)
    # The one split rule (core/batch_split.py): refused here, not in the queue hours later.
    scheduled_split(config, slurm_script.nodes(config), options.gpus_per_node).warnings()
    seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    run_dir = rundir.create_run_dir(runs_dir.resolve(), config)
    try:
        script = run_dir / SCRIPT_FILE
        script.write_text(slurm_script.slurm_script(config, str(run_dir / rundir.CONFIG_FILE), str(run_dir),
                                                    str(run_dir / "slurm-%j.out"), seed, options, str(script)),
                          encoding="utf-8")
        script.chmod(0o755)
        job_id = sbatch(script)
        slurm_jobs.record_job(run_dir, job_id)
        return job_id, run_dir
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise


def sbatch(script: Path) -> str:
    """Submit ``script`` from its folder with ``sbatch --parsable``: the job id, or SubmitError.

    sbatch passes its environment on to the job, and the script runs ``$REPLICA_STUDIO`` (default
    ``replica-studio`` from PATH): unless set, it is this app as it was started here (an absolute
    path, on the shared filesystem the nodes see). Run over ssh the command has sshd's PATH, which
    has no venv of the user's in it: the real test Slurm's workers failed with "execve():
    replica-studio: No such file or directory" (docs/cluster.md)."""
    own = " ".join(app_command())  # the script splits it on spaces (a path with a space cannot be said)
    env = app_env({"REPLICA_STUDIO": os.environ.get("REPLICA_STUDIO") or own})
    said = scheduler_command.run("sbatch", ["--parsable", str(script)], hint="is this a Slurm login node?",
                                 timeout=SUBMIT_TIMEOUT_S, silent="is slurmctld running?", cwd=script.parent,
                                 env=env)
    return said.strip().split(";")[0]  # --parsable: "JOBID" or "JOBID;CLUSTER"


def run(args) -> int:
    if args.kubernetes:
        return _kubernetes(args)
    try:
        runs_dir = Path(args.runs_dir) if args.runs_dir else rundir.default_runs_dir()
        job_id, run_dir = submit(args.config, runs_dir, slurm_script.options_from(args))
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
