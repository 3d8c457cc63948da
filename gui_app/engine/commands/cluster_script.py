"""``replica-studio cluster-script CONFIG --slurm|--kubernetes|--kubeflow [-o FILE]``.

We do not schedule anything ourselves; we write what the user's scheduler runs:

- ``--slurm``: an sbatch script for one run (schedulers/slurm/script.py): one task per node; ``srun``
  starts ``replica-studio worker`` on every node, which builds the cluster from the step's
  ``SLURM_*`` variables in Slurm's node order (rank 0 is the chief and writes the run directory).
- ``--kubernetes``: plain Kubernetes, no operator (schedulers/kubernetes/manifest.py): a ConfigMap, a
  headless Service and an Indexed Job whose pods build ``TF_CONFIG`` from their index.
- ``--kubeflow``: a ConfigMap holding the run configuration and a Kubeflow ``TFJob``
  (Chief, Worker and, for parameter servers, PS replicas); the training operator sets
  ``TF_CONFIG`` in every pod. The manifest is JSON, which is YAML too (PyYAML is not needed to
  write it, and ``kubectl apply -f`` reads it); comments are ``#`` lines between documents.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.config import ConfigError, RunConfig
from gui_app.engine.run.exits import EXIT_BAD_INPUT, EXIT_OK
from gui_app.engine.schedulers.kubernetes import manifest as kubernetes_manifest
from gui_app.engine.schedulers.slurm import script as slurm_script
from gui_app.engine.schedulers.slurm.script import job_name, nodes

COMMANDS = ("cluster-script",)


def _container(config: RunConfig, image: str, args: list[str]) -> dict:
    return {"name": "tensorflow", "image": image, "command": ["replica-studio", *args],
            "ports": [{"name": "tfjob-port", "containerPort": 2222}],
            "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True},
                             {"name": "runs", "mountPath": "/runs"}]}


def kubeflow_manifest(config: RunConfig, image: str) -> str:
    s = config.strategy
    name = job_name(config)
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
        count = nodes(config)
        specs = {"Chief": replicas(1, worker_args)}
        if count > 1:
            specs["Worker"] = replicas(count - 1, worker_args)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": name},
           "spec": {"runPolicy": {"cleanPodPolicy": "Running"}, "tfReplicaSpecs": specs}}
    return (f"# Replica Studio: {config.dataset.name} / {config.model.name} under {s.name} as a Kubeflow TFJob.\n"
            "# Needs: the Kubeflow training operator, an image with replica-studio installed (--image), and a\n"
            "# PersistentVolumeClaim named replica-studio-runs (ReadWriteMany) for the run directory.\n"
            "# The operator sets TF_CONFIG in every pod; the chief writes the run directory under /runs.\n"
            "# Apply with: kubectl apply -f THIS_FILE   (JSON documents are YAML)\n"
            f"---\n{json.dumps(config_map, indent=2)}\n---\n{json.dumps(job, indent=2)}\n")


def _slurm(config: RunConfig, args) -> str:
    """The script of a new run in ``--runs-dir``; Slurm's output file goes there too (it must exist
    before the job starts, unlike the run directory, which the chief creates)."""
    runs_dir = Path(args.runs_dir).resolve()
    runs_dir.mkdir(parents=True, exist_ok=True)
    name = rundir.run_name(config)
    seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    return slurm_script.slurm_script(config, str(Path(args.config).resolve()), str(runs_dir / name),
                                     str(runs_dir / f"{name}-%j.out"), seed, slurm_script.options_from(args),
                                     Path(args.output).name if args.output else "run.sbatch")


def _kubernetes(config: RunConfig, args) -> str:
    """A new run's manifest; its run directory, named here, is made by the chief on the volume."""
    seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    return kubernetes_manifest.manifest(config, rundir.run_name(config), seed, kubernetes_manifest.options_from(args))


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("cluster-script", help="write a Slurm sbatch script or a Kubernetes (Indexed Job) or "
                                                     "Kubeflow TFJob manifest",
                              description="Write what a scheduler needs to run this configuration as a cluster.")
    p.add_argument("config")
    kind = p.add_mutually_exclusive_group(required=True)
    kind.add_argument("--slurm", action="store_true", help="an sbatch script (one task per node, srun worker)")
    kind.add_argument("--kubernetes", action="store_true",
                      help="a plain Kubernetes manifest: Indexed Job, headless Service, ConfigMap (YAML)")
    kind.add_argument("--kubeflow", action="store_true", help="a Kubeflow TFJob manifest (YAML)")
    p.add_argument("-o", "--output", help="file to write (default: stdout)")
    p.add_argument("--runs-dir", default="runs",
                   help="--slurm: folder for the run directory (shared by the nodes; made absolute)")
    slurm_script.add_options(p)
    kubernetes_manifest.add_options(p)
    p.add_argument("--debug", action="store_true")
    p.set_defaults(handler=run)


def _write(path: Path, text: str, executable: bool) -> None:
    """``-o``'s file, its problem worded for the option (not as ``[Errno 21] Is a directory``)."""
    if path.is_dir():
        raise ConfigError(f"--output: {path} is a folder; name the file to write")
    try:
        path.write_text(text, encoding="utf-8")
        if executable:
            path.chmod(0o755)
    except OSError as exc:
        raise ConfigError(f"--output: cannot write {path}: {exc.strerror or exc}") from None


def run(args) -> int:
    try:
        config = RunConfig.load(args.config)
        if config.strategy.name not in ("multi_worker_mirrored", "parameter_server"):
            raise ConfigError(f"strategy.name: a cluster script needs multi_worker_mirrored or parameter_server, "
                              f"not {config.strategy.name!r}")
        if args.slurm:
            text = _slurm(config, args)
        elif args.kubernetes:
            text = _kubernetes(config, args)
        else:
            text = kubeflow_manifest(config, args.image)
        if args.output:
            _write(Path(args.output), text, executable=args.slurm)
            print(f"wrote {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return EXIT_OK
    except (ConfigError, OSError) as exc:
        print(f"replica-studio cluster-script: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
