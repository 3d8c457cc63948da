"""``submit --slurm``: a new run directory, its sbatch script (``job.sbatch``, script.py) and the
job that runs it, submitted with ``sbatch --parsable``; the job id is kept in the run directory
(``slurm_job.json``, gui_app/core/backends/slurm.py). ``resume`` of a Slurm run (runs.py) and a
sweep's Slurm trials submit through :func:`sbatch` too.
"""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.backends import slurm
from gui_app.core.backends.slurm import SCRIPT_FILE
from gui_app.core.batch_split import scheduled_split
from gui_app.core.config import RunConfig
from gui_app.engine.schedulers import tools
from gui_app.engine.schedulers.slurm import script as slurm_script
from gui_app.identity import app_command, app_env

SUBMIT_TIMEOUT_S = 60  # sbatch only talks to slurmctld; a minute means the controller does not answer


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
        slurm.record_job(run_dir, job_id)
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
    said = tools.run("sbatch", ["--parsable", str(script)], hint="is this a Slurm login node?",
                                 timeout=SUBMIT_TIMEOUT_S, silent="is slurmctld running?", cwd=script.parent,
                                 env=env)
    return said.strip().split(";")[0]  # --parsable: "JOBID" or "JOBID;CLUSTER"
