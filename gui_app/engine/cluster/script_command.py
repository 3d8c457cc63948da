"""``replica-studio cluster-script CONFIG --slurm|--kubeflow [-o FILE]``.

We do not schedule anything ourselves; we write what the user's scheduler runs:

- ``--slurm``: an sbatch script with one task per node; ``srun`` starts ``replica-studio worker``
  on every node, and TensorFlow's SlurmClusterResolver turns the allocation's ``SLURM_*``
  variables into the cluster (rank 0 is the chief and writes the run directory).
- ``--kubeflow``: a ConfigMap holding the run configuration and a Kubeflow ``TFJob``
  (Chief, Worker and, for parameter servers, PS replicas); the training operator sets
  ``TF_CONFIG`` in every pod. The manifest is JSON, which is YAML too (PyYAML is not needed to
  write it, and ``kubectl apply -f`` reads it); comments are ``#`` lines between documents.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

from gui_app.core.config import ConfigError, RunConfig
from gui_app.engine.exits import EXIT_BAD_INPUT, EXIT_OK

COMMANDS = ("cluster-script",)
SLURM_PORT_BASE = 8888  # SlurmClusterResolver's default first port on each node


def _nodes(config: RunConfig) -> int:
    s = config.strategy
    return len(s.cluster) if isinstance(s.cluster, tuple) else max(1, s.workers)


def _name(config: RunConfig) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"replica-studio-{config.dataset.name}-{config.model.name}".lower())


def slurm_script(config: RunConfig, config_path: str, runs_dir: str) -> str:
    if config.strategy.name != "multi_worker_mirrored":
        raise ConfigError("strategy.name: the Slurm script runs multi_worker_mirrored (parameter servers: use "
                          "--kubeflow or TF_CONFIG)")
    nodes = _nodes(config)
    worker = (f'srun --kill-on-bad-exit=1 $REPLICA_STUDIO worker {shlex.quote(config_path)} --cluster slurm '
              f'--runs-dir {shlex.quote(runs_dir)} --events text')
    return f"""#!/bin/bash
# Replica Studio: {config.dataset.name} / {config.model.name} under multi_worker_mirrored on {nodes} nodes.
# Needs: replica-studio (the same version) on every node, this config file and the runs folder
# on a filesystem every node sees, and TCP port $REPLICA_STUDIO_SLURM_PORT_BASE open between the
# nodes. TensorFlow's gRPC servers have no authentication: run this on a trusted cluster network.
# Submit with: sbatch {Path(config_path).stem}.sbatch
#SBATCH --job-name={_name(config)}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --output={_name(config)}-%j.out
set -euo pipefail
REPLICA_STUDIO=${{REPLICA_STUDIO:-replica-studio}}
export REPLICA_STUDIO_SLURM_PORT_BASE=${{REPLICA_STUDIO_SLURM_PORT_BASE:-{SLURM_PORT_BASE}}}
export TF_CPP_MIN_LOG_LEVEL=${{TF_CPP_MIN_LOG_LEVEL:-1}}
# One task per node; rank 0 is the chief and writes the run directory under the runs folder.
{worker}
"""


def _container(config: RunConfig, image: str, args: list[str]) -> dict:
    return {"name": "tensorflow", "image": image, "command": ["replica-studio", *args],
            "ports": [{"name": "tfjob-port", "containerPort": 2222}],
            "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True},
                             {"name": "runs", "mountPath": "/runs"}]}


def kubeflow_manifest(config: RunConfig, image: str) -> str:
    s = config.strategy
    name = _name(config)
    run = json.loads(config.to_json())
    run["strategy"].update({"cluster": "tf_config", "workers": 0, "ps": 0})
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config"},
                  "data": {"run.json": json.dumps(run, indent=2)}}
    volumes = [{"name": "config", "configMap": {"name": f"{name}-config"}},
               {"name": "runs", "persistentVolumeClaim": {"claimName": "replica-studio-runs"}}]

    def replicas(count: int, args: list[str], restart: str = "OnFailure") -> dict:
        return {"replicas": count, "restartPolicy": restart,
                "template": {"spec": {"containers": [_container(config, image, args)], "volumes": volumes}}}

    worker_args = ["worker", "/config/run.json", "--runs-dir", "/runs", "--events", "text"]
    if s.name == "parameter_server":
        specs = {"Chief": replicas(1, ["train", "/config/run.json", "--runs-dir", "/runs", "--events", "text"]),
                 "Worker": replicas(max(1, s.workers), worker_args), "PS": replicas(max(1, s.ps), worker_args)}
    else:
        nodes = _nodes(config)
        specs = {"Chief": replicas(1, worker_args)}
        if nodes > 1:
            specs["Worker"] = replicas(nodes - 1, worker_args)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
           "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": specs}}
    return (f"# Replica Studio: {config.dataset.name} / {config.model.name} under {s.name} as a Kubeflow TFJob.\n"
            "# Needs: the Kubeflow training operator, an image with replica-studio installed (--image), and a\n"
            "# PersistentVolumeClaim named replica-studio-runs (ReadWriteMany) for the run directory.\n"
            "# The operator sets TF_CONFIG in every pod; the chief writes the run directory under /runs.\n"
            "# Apply with: kubectl apply -f THIS_FILE   (JSON documents are YAML)\n"
            f"---\n{json.dumps(config_map, indent=2)}\n---\n{json.dumps(job, indent=2)}\n")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
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
    p.set_defaults(handler=run)


def run(args) -> int:
    try:
        config = RunConfig.load(args.config)
        if config.strategy.name not in ("multi_worker_mirrored", "parameter_server"):
            raise ConfigError(f"strategy.name: a cluster script needs multi_worker_mirrored or parameter_server, "
                              f"not {config.strategy.name!r}")
        if args.slurm:
            text = slurm_script(config, str(Path(args.config).resolve()), args.runs_dir)
        else:
            text = kubeflow_manifest(config, args.image)
        if args.output:
            Path(args.output).write_text(text, encoding="utf-8")
            if args.slurm:
                Path(args.output).chmod(0o755)
            print(f"wrote {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return EXIT_OK
    except (ConfigError, OSError) as exc:
        print(f"replica-studio cluster-script: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
