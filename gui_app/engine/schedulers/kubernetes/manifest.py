"""The plain Kubernetes manifest of one MultiWorkerMirrored run: no operator needed.

Three documents: a ConfigMap (the run configuration), a headless Service (DNS names for the
pods) and an Indexed Job, one pod per worker. Pod ``i`` is ``JOB-i.SERVICE`` (the Job's
``subdomain`` is the service) and builds its ``TF_CONFIG`` from its ``JOB_COMPLETION_INDEX``
(kubernetes.py); index 0 is the chief and writes the run directory on the runs volume (a
PersistentVolumeClaim, ReadWriteMany: every worker reads the checkpoints when it continues).

``restartPolicy: Never``, so that a ``podFailurePolicy`` can tell failures apart (it needs
Never; with OnFailure the kubelet restarts the container in place and the Job never sees why):
exit 2 (a bad config or input, which a restart would repeat) fails the Job at once; a pod
evicted, preempted or drained (the ``DisruptionTarget`` condition) does not count against
``backoffLimit``; anything else is retried, and the new pod continues the run from its last
checkpoint (``worker --resume-or-start`` on the run directory the manifest names, as Slurm's requeue
does). With a ``podFailurePolicy`` the Job starts a replacement only once the old pod has ended
(``podReplacementPolicy: Failed`` is then the only value allowed), so two pods never hold one
host name. A deleted pod gets SIGTERM: the workers agree to stop with a checkpoint (measured under
Slurm's scancel: under 1 s after the signal) well within ``terminationGracePeriodSeconds``.

The manifest is JSON documents between ``---`` lines (valid YAML; ``kubectl apply -f`` reads it).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from gui_app.core.config import ConfigError, RunConfig
from gui_app.engine.schedulers.kubernetes import cluster as kubernetes
from gui_app.engine.schedulers.slurm.script import nodes

CONTAINER = "worker"
RUNS_MOUNT = "/runs"
CONFIG_FILE = "/config/run.json"
POD_LABEL = "replica-studio/job"  # our own label: the service selects the job's pods by it
GRACE_S = 120  # SIGTERM to SIGKILL: a step group, the agreed stop, the checkpoint and the exit
RESTARTS_PER_WORKER = 3  # backoffLimit counts pods: a failed worker fails every pod of the cluster
_QUANTITY = re.compile(r"\d+(\.\d+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?")


@dataclass(frozen=True)
class KubernetesOptions:
    """What the pods ask of the cluster; None leaves it to the namespace's defaults."""

    image: str = "replica-studio:latest"
    namespace: str | None = None
    gpus_per_pod: int | None = None
    cpus: str | None = None  # Kubernetes quantities: "4", "500m"
    memory: str | None = None  # "8Gi"
    pvc: str = "replica-studio-runs"


def job_name(run_name: str) -> str:
    """A DNS label (the Service's name too) short enough for the pods' host names ``JOB-INDEX``."""
    return re.sub(r"[^a-z0-9-]", "-", f"rs-{run_name}".lower())[:50].rstrip("-")


def run_dir(run_name: str) -> str:
    """The run directory on the runs volume, as the pods see it."""
    return f"{RUNS_MOUNT}/{run_name}"


def _resources(options: KubernetesOptions) -> dict:
    """CPU as a request only (a CPU limit throttles the collectives of every worker alike);
    memory requested and limited alike (the pod is killed, not the node starved); GPUs limited,
    which is how Kubernetes asks for extended resources."""
    requests, limits = {}, {}
    if options.cpus:
        requests["cpu"] = options.cpus
    if options.memory:
        requests["memory"] = limits["memory"] = options.memory
    if options.gpus_per_pod:
        limits["nvidia.com/gpu"] = str(options.gpus_per_pod)
    return {key: value for key, value in (("requests", requests), ("limits", limits)) if value}


def documents(config: RunConfig, run_name: str, data_seed: int, options: KubernetesOptions) -> list[dict]:
    if config.strategy.name != "multi_worker_mirrored":
        raise ConfigError("strategy.name: the Kubernetes manifest runs multi_worker_mirrored (parameter servers: "
                          "use --kubeflow)")
    name, count = job_name(run_name), nodes(config)
    meta = {"name": name, "labels": {POD_LABEL: name}}
    if options.namespace:
        meta["namespace"] = options.namespace
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": f"{name}-config"},
                  "data": {"run.json": json.dumps(json.loads(config.to_json()), indent=2)}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta,
               "spec": {"clusterIP": "None", "selector": {POD_LABEL: name},
                        # a worker resolves its peers while they start, before any is Ready
                        "publishNotReadyAddresses": True,
                        "ports": [{"name": "grpc", "port": kubernetes.PORT, "targetPort": kubernetes.PORT}]}}
    env = [{"name": kubernetes.JOB_ENV, "value": name}, {"name": kubernetes.SERVICE_ENV, "value": name},
           {"name": kubernetes.WORKERS_ENV, "value": str(count)},
           {"name": kubernetes.PORT_ENV, "value": str(kubernetes.PORT)},
           {"name": kubernetes.JOB_UID_ENV, "valueFrom": {"fieldRef": {
               "fieldPath": "metadata.labels['batch.kubernetes.io/controller-uid']"}}},
           {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "1"}]
    container = {"name": CONTAINER, "image": options.image,
                 "command": ["replica-studio", "worker", CONFIG_FILE, "--cluster", "kubernetes",
                             "--run-dir", run_dir(run_name), "--resume-or-start", "--data-seed", str(data_seed),
                             "--events", "jsonl"],
                 "env": env, "ports": [{"name": "grpc", "containerPort": kubernetes.PORT}],
                 "resources": _resources(options),
                 "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True},
                                  {"name": "runs", "mountPath": RUNS_MOUNT}]}
    pod = {"metadata": {"labels": {POD_LABEL: name}},
           "spec": {"subdomain": name, "restartPolicy": "Never", "terminationGracePeriodSeconds": GRACE_S,
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}},
                                {"name": "runs", "persistentVolumeClaim": {"claimName": options.pvc}}]}}
    failures = [{"action": "FailJob", "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": [2]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
           "spec": {"completionMode": "Indexed", "completions": count, "parallelism": count,
                    "backoffLimit": RESTARTS_PER_WORKER * count, "podFailurePolicy": {"rules": failures},
                    "template": pod}}
    return [config_map, service, job]


def manifest(config: RunConfig, run_name: str, data_seed: int, options: KubernetesOptions) -> str:
    docs = documents(config, run_name, data_seed, options)
    name, ns = job_name(run_name), f" -n {options.namespace}" if options.namespace else ""
    return (f"# Replica Studio: {config.dataset.name} / {config.model.name} under multi_worker_mirrored on "
            f"{nodes(config)} pods (an Indexed Job; no operator).\n"
            f"# Run directory: {run_dir(run_name)} on the PersistentVolumeClaim {options.pvc} (ReadWriteMany).\n"
            "# Needs: an image with replica-studio installed (--image) and that claim in the namespace.\n"
            "# Apply with: kubectl apply -f THIS_FILE   (JSON documents are YAML)\n"
            f"# The chief's events (JSON lines): kubectl logs -f{ns} -l batch.kubernetes.io/job-name={name},"
            "batch.kubernetes.io/job-completion-index=0\n"
            f"# Deleted (kubectl delete job{ns} {name}), the workers stop with a checkpoint; applied again, this\n"
            "# manifest continues the run from it.\n"
            + "".join(f"---\n{json.dumps(doc, indent=2)}\n" for doc in docs))


def add_options(p) -> None:
    """The pods' requests, for ``cluster-script --kubernetes`` and ``submit --kubernetes`` (``--image``:
    ``--kubeflow`` too)."""
    p.add_argument("--image", default=KubernetesOptions.image, help="Kubernetes and Kubeflow: the container image")
    p.add_argument("--namespace", help="Kubernetes: the namespace (default: kubectl's current one)")
    p.add_argument("--gpus-per-pod", type=int, help="Kubernetes: nvidia.com/gpu for each worker")
    p.add_argument("--cpus", help="Kubernetes: CPUs requested for each worker (a quantity: 4, 500m)")
    p.add_argument("--memory", help="Kubernetes: memory for each worker, requested and limited (8Gi)")
    p.add_argument("--pvc", default=KubernetesOptions.pvc,
                   help=f"Kubernetes: the PersistentVolumeClaim of the runs folder (default {KubernetesOptions.pvc})")


def options_from(args) -> KubernetesOptions:
    if args.gpus_per_pod is not None and args.gpus_per_pod < 0:
        raise ConfigError("--gpus-per-pod: must be 0 or more")
    for flag, value in (("--cpus", args.cpus), ("--memory", args.memory)):
        if value is not None and not _QUANTITY.fullmatch(value):
            raise ConfigError(f"{flag}: {value!r} is not a Kubernetes quantity (like 4, 500m, 8Gi)")
    if args.namespace is not None and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", args.namespace):
        raise ConfigError(f"--namespace: {args.namespace!r} is not a Kubernetes name")
    return KubernetesOptions(image=args.image, namespace=args.namespace, gpus_per_pod=args.gpus_per_pod,
                             cpus=args.cpus, memory=args.memory, pvc=args.pvc)
