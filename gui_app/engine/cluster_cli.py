"""``replica-studio worker`` and ``replica-studio cluster-script`` (registered by cli.py)."""
from __future__ import annotations

import argparse

COMMANDS = ("worker", "cluster-script")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from gui_app.engine import worker

    p = subparsers.add_parser("worker", help="run one worker of a multi-worker cluster (on each other host)",
                              description="One worker of a multi_worker_mirrored run. On each other host of "
                                          "strategy.cluster run `replica-studio worker CONFIG --index I` with the "
                                          "same config file; index 0 (the chief) writes the run directory.")
    worker.add_arguments(p)
    p.set_defaults(handler=_run_worker)
    p = subparsers.add_parser("cluster-script", help="write a Slurm sbatch script or a Kubeflow TFJob manifest",
                              description="Write what a scheduler needs to run this configuration as a cluster.")
    p.add_argument("config")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--slurm", action="store_true", help="an sbatch script (one task per node, srun worker)")
    kind.add_argument("--kubeflow", action="store_true", help="a Kubeflow TFJob manifest (YAML)")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.add_argument("--image", default="replica-studio:latest", help="--kubeflow: the container image")
    p.add_argument("--runs-dir", default="runs", help="folder for the run directory (shared by the nodes)")
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=_run_script)


def _run_worker(args) -> int:
    from gui_app.engine import worker

    return worker.run(args)


def _run_script(args) -> int:
    from gui_app.engine import cluster_script

    return cluster_script.main(args)
