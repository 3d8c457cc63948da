"""The sbatch script of a MultiWorkerMirrored run: one task per node, rank 0 the chief.

The script names its run directory (absolute), so it is one run: submitted again, or requeued by
Slurm, it continues that run from its last checkpoint (``worker --resume-or-start``; every worker
reads the checkpoint from the shared filesystem). Slurm sends the script USR1 ``signal_s``
seconds before the time limit (``--signal=B:USR1@S``, also on a preemption with
``PreemptMode=REQUEUE``): the script passes it to the workers, which agree to stop with a
checkpoint, then it requeues its own job (``--requeue``), which continues the run. ``scancel``
sends SIGTERM to the workers themselves: they stop with a checkpoint within Slurm's ``KillWait``.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from gui_app.core.backends.slurm import SIGNAL_S
from gui_app.core.config import ConfigError, RunConfig


@dataclass(frozen=True)
class SlurmOptions:
    """What the job asks of Slurm; None leaves it to the cluster's defaults."""

    partition: str | None = None
    time: str | None = None  # Slurm's time format: minutes, H:MM:SS, D-HH:MM
    account: str | None = None
    cpus_per_task: int | None = None
    gpus_per_node: int | None = None
    signal_s: int = SIGNAL_S  # 0: no warning signal, no requeue
    extra: tuple[str, ...] = field(default=())  # more #SBATCH lines, e.g. "--qos=long" or "--constraint=a100"


def job_name(config: RunConfig) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"replica-studio-{config.dataset.name}-{config.model.name}".lower())


def nodes(config: RunConfig) -> int:
    s = config.strategy
    return len(s.cluster) if isinstance(s.cluster, tuple) else max(1, s.workers)


def slurm_script(config: RunConfig, config_path: str, run_dir: str, output: str, data_seed: int,
                 options: SlurmOptions = SlurmOptions(), script_name: str = "run.sbatch") -> str:
    """The script; ``config_path``, ``run_dir`` and ``output`` are absolute paths every node sees."""
    if config.strategy.name != "multi_worker_mirrored":
        raise ConfigError("strategy.name: the Slurm script runs multi_worker_mirrored (parameter servers: use "
                          "--kubeflow or TF_CONFIG)")
    count = nodes(config)
    asked = {"job-name": job_name(config), "nodes": count, "ntasks-per-node": 1,
             "cpus-per-task": options.cpus_per_task, "gpus-per-node": options.gpus_per_node,
             "partition": options.partition, "time": options.time, "account": options.account,
             "output": output, "open-mode": "append"}
    lines = [f"#SBATCH --{key}={value}" for key, value in asked.items() if value is not None]
    if options.signal_s:
        lines += [f"#SBATCH --signal=B:USR1@{options.signal_s}", "#SBATCH --requeue"]
    lines += [f"#SBATCH {line if line.startswith('-') else '--' + line}" for line in options.extra]
    worker = (f"srun --kill-on-bad-exit=1 $REPLICA_STUDIO worker {shlex.quote(config_path)} --cluster slurm "
              f'--run-dir "$RUN_DIR" --resume-or-start --data-seed {data_seed} --events text')
    header = "\n".join(lines)
    return f"""#!/bin/bash
# Replica Studio: {config.dataset.name} / {config.model.name} under multi_worker_mirrored on {count} nodes.
# Run directory: {run_dir}
# Output: {output}
# Submit with: sbatch {script_name}   Submitted again (or requeued by Slurm) it continues this run
# from its last checkpoint.
# Needs: replica-studio (the same version) on every node, the config file and the run directory
# on a filesystem every node sees, and TCP between the nodes on the job's ports (8 ports from
# 20000 + 8 x (job id mod 5000); REPLICA_STUDIO_SLURM_PORT_BASE sets the first). TensorFlow's gRPC
# servers have no authentication: run this on a trusted cluster network.
{header}
set -uo pipefail
REPLICA_STUDIO=${{REPLICA_STUDIO:-replica-studio}}
export TF_CPP_MIN_LOG_LEVEL=${{TF_CPP_MIN_LOG_LEVEL:-1}}
RUN_DIR={shlex.quote(run_dir)}
# USR1 (the time limit is near, or a preemption): the workers stop with a checkpoint, then the job
# requeues itself. SIGTERM (scancel) reaches the workers from Slurm directly; this script waits for them.
requeue=0
trap 'requeue=1; kill -USR1 "$step" 2>/dev/null' USR1
trap ':' TERM
# One task per node, in Slurm's node order; rank 0 is the chief and writes the run directory.
{worker} &
step=$!
while kill -0 "$step" 2>/dev/null; do wait "$step"; done
wait "$step"
status=$?
# A warning that came after the run completed (the final evaluation, the saved model) requeues nothing.
if [ "$requeue" = 1 ] && ! tail -n 1 "$RUN_DIR/events.jsonl" 2>/dev/null | grep -q '"status":"completed"'; then
  echo "replica-studio: stopped before the time limit; requeueing job $SLURM_JOB_ID to continue the run"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit $status
"""


def add_options(p) -> None:
    """The sbatch requests of ``cluster-script --slurm`` and ``submit --slurm``."""
    p.add_argument("--partition", help="Slurm: the partition (-p)")
    p.add_argument("--time", help="Slurm: the time limit (minutes, H:MM:SS or D-HH:MM)")
    p.add_argument("--account", help="Slurm: the account to charge")
    p.add_argument("--cpus-per-task", type=int, help="Slurm: CPUs for each worker")
    p.add_argument("--gpus-per-node", type=int, help="Slurm: GPUs for each worker (one worker per node)")
    p.add_argument("--signal-seconds", type=int, default=SIGNAL_S,
                   help=f"Slurm: checkpoint and requeue this long before the time limit (default {SIGNAL_S}; "
                        "0: neither)")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="Slurm: one more #SBATCH line, e.g. --sbatch=--qos=long (repeatable)")


def options_from(args) -> SlurmOptions:
    if args.signal_seconds < 0:
        raise ConfigError("--signal-seconds: must be 0 or more")
    for name in ("cpus_per_task", "gpus_per_node"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise ConfigError(f"--{name.replace('_', '-')}: must be 0 or more")
    return SlurmOptions(partition=args.partition, time=args.time, account=args.account,
                        cpus_per_task=args.cpus_per_task, gpus_per_node=args.gpus_per_node,
                        signal_s=args.signal_seconds, extra=tuple(args.sbatch))
