"""``replica-studio submit CONFIG --kubernetes``: a new run applied to a cluster with kubectl.

The manifest (kubernetes_manifest.py) goes to ``-o FILE`` (kept: applied again after the Job
was deleted, it continues the run) or a temporary file, and ``kubectl apply -f`` sends it to the
cluster kubectl is set up for (its current context, or ``--namespace``). stdout gets two lines,
the job name and the run directory on the runs volume; kubectl missing, or refusing (no
cluster reachable, no permission), is kubectl's last stderr line, exit 2. ``--follow`` then
streams the chief's events: its pod prints them as JSON lines on stdout, which ``kubectl logs
-f`` carries mixed with the pod's stderr, so event lines go to our stdout and the rest to stderr.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gui_app.core import rundir
from gui_app.core.config import RunConfig
from gui_app.engine.cluster import kubernetes_manifest, scheduler_command
from gui_app.engine.cluster.kubernetes_manifest import KubernetesOptions
from gui_app.engine.cluster.scheduler_command import SubmitError

APPLY_TIMEOUT_S = 60  # kubectl only talks to the API server: a minute means none answers
START_TIMEOUT_S = 600  # --follow: an image pulled and a pod scheduled (a GPU node may scale up)
RETRY_S = 3
KUBECTL_HINT = "install it and set up its context for the cluster"


def _kubectl() -> str:
    return scheduler_command.find("kubectl", KUBECTL_HINT)


def submit(config_path: str, options: KubernetesOptions, output: str | None = None) -> tuple[str, str]:
    """(job name, run directory on the volume); ConfigError, SubmitError or OSError."""
    config = RunConfig.load(config_path)
    seed = config.training.seed if config.training.seed is not None else random.randrange(2**31)
    name = rundir.run_name(config)
    text = kubernetes_manifest.manifest(config, name, seed, options)
    _kubectl()  # missing: said before anything is written
    with tempfile.TemporaryDirectory(prefix="replica-studio-k8s-") as temp:
        path = Path(output) if output else Path(temp) / "run.yaml"
        path.write_text(text, encoding="utf-8")
        applied = scheduler_command.run("kubectl", ["apply", "-f", str(path)], timeout=APPLY_TIMEOUT_S,
                                        hint=KUBECTL_HINT, silent="is the cluster reachable?")
    job = kubernetes_manifest.job_name(name)
    if f"job.batch/{job} " not in applied:
        raise SubmitError(f"kubectl apply: did not create job.batch/{job} ({applied.strip()!r})")
    return job, kubernetes_manifest.run_dir(name)


def follow(job: str, namespace: str | None) -> int:
    """Stream the chief's events until its pod ends; kubectl's exit code. Before the pod runs,
    kubectl logs says "No resources found" (exit 0) or "is waiting to start" (exit 1): tried again."""
    kubectl = _kubectl()
    chief = f"batch.kubernetes.io/job-name={job},batch.kubernetes.io/job-completion-index=0"
    command = [kubectl, "logs", "-f", "-l", chief, "--tail=-1", *(["-n", namespace] if namespace else [])]
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL)
        assert proc.stdout is not None and proc.stderr is not None
        streamed = False
        for line in proc.stdout:
            streamed = True
            out = sys.stdout if _is_event(line) else sys.stderr
            out.write(line)
            out.flush()
        said = [line for line in proc.stderr.read().splitlines() if line.strip()]
        code = proc.wait()
        waiting = not streamed and (code == 0 or any("waiting to start" in line for line in said))
        if not waiting or time.monotonic() > deadline:
            if said and (code != 0 or not streamed):
                print(f"replica-studio submit: {said[-1]}", file=sys.stderr)
            return code if streamed or not waiting else 1
        time.sleep(RETRY_S)


def _is_event(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False
