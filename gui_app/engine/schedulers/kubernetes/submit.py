"""``replica-studio submit CONFIG --kubernetes``: a new run applied to a cluster with kubectl.

The run directory is on the cluster's volume; this machine gets a local record of the run, a run
directory of the same name in the runs folder (``--runs-dir``; gui_app/core/backends/kubernetes.py):
its config, the manifest (manifest.py) as ``job.yaml`` (applied again after the Job
was deleted, it continues the run: ``resume RUN_DIR``), and the Job's name, namespace and kubectl
context. ``-o FILE`` keeps a copy of the manifest too. ``kubectl apply -f`` sends it to the cluster
kubectl is set up for (its current context, or ``--namespace``). stdout gets three lines: the job
name, the run directory on the volume and the local record; kubectl missing, or refusing (no
cluster reachable, no permission), is kubectl's last stderr line, exit 2, and leaves no record.
``--follow`` then follows the run as ``attach RUN_DIR`` does (engine/schedulers/kubernetes/runs.py:
the chief's events copied into the record and printed as JSON lines).
"""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.backends import kubernetes
from gui_app.core.batch_split import scheduled_split
from gui_app.core.config import RunConfig
from gui_app.engine.schedulers import tools
from gui_app.engine.schedulers.kubernetes import manifest as kubernetes_manifest
from gui_app.engine.schedulers.kubernetes.manifest import KubernetesOptions
from gui_app.engine.schedulers.tools import SubmitError
from gui_app.identity import app_command, app_env

APPLY_TIMEOUT_S = 60  # kubectl only talks to the API server: a minute means none answers
KUBECTL_HINT = "install it and set up its context for the cluster"


def kubectl() -> str:
    return tools.find("kubectl", KUBECTL_HINT)


def submit(config_path: str, options: KubernetesOptions, runs_dir: Path,
           output: str | None = None) -> tuple[str, str, Path]:
    """(job name, run directory on the volume, local record); ConfigError, SubmitError or
    OSError, with no record left behind."""
    config = RunConfig.load(config_path)
    seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    kubernetes_manifest.documents(config, "check", seed, options)  # a config it cannot run: said before the folder
    # The one split rule (core/batch_split.py): refused here, not once the pods have started.
    scheduled_split(config, kubernetes_manifest.nodes(config), options.gpus_per_pod).warnings()
    kubectl()  # missing: said before anything is written
    local = rundir.create_run_dir(runs_dir.resolve(), config)
    try:
        name = local.name  # the run directory on the volume has the record's name
        text = kubernetes_manifest.manifest(config, name, seed, options)
        (local / kubernetes.MANIFEST_FILE).write_text(text, encoding="utf-8")
        if output:
            Path(output).write_text(text, encoding="utf-8")
        job = kubernetes_manifest.job_name(name)
        where = kubernetes.KubernetesJob(job, options.namespace or "", kubernetes.current_context())
        apply(local / kubernetes.MANIFEST_FILE, job, where.kubectl_args())
        kubernetes.record_job(local, job, where.namespace, where.context)
        return job, kubernetes_manifest.run_dir(name), local
    except BaseException:
        shutil.rmtree(local, ignore_errors=True)
        raise


def apply(manifest: Path, job: str, where: list[str]) -> None:
    """``kubectl apply -f MANIFEST``; SubmitError unless it created (or started again) the Job."""
    applied = tools.run("kubectl", ["apply", "-f", str(manifest), *where], timeout=APPLY_TIMEOUT_S,
                                    hint=KUBECTL_HINT, silent="is the cluster reachable?")
    if f"job.batch/{job} created" not in applied:
        raise SubmitError(f"kubectl apply: did not create job.batch/{job} ({applied.strip()!r})")


def follow(local: Path) -> int:
    """``attach RUN_DIR`` on the record, without control words: its exit code."""
    return subprocess.call(app_command("attach", str(local), "--control", "none"), env=app_env(),
                           stdin=subprocess.DEVNULL)
