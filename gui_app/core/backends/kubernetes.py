"""A run's Kubernetes Job, kept on this machine: ``RUN_DIR/kubernetes_job.json`` and what kubectl says of it.

The run directory of a run applied with ``submit --kubernetes`` lives on the cluster's
PersistentVolumeClaim, which this machine cannot read. ``submit`` therefore makes a local run
directory of the same name in the runs folder -- the run's record: its ``config.json``, the
manifest it applied (``job.yaml``: applied again, it continues the run), this file (the Job's
name, namespace and kubectl context, and where each chief pod's output begins in the local
copy of the events) and the chief's events as followed (engine/schedulers/kubernetes/runs.py).

The Job's state, for the run list and ``attach``/``stop``/``resume``, is one ``kubectl get job
NAMES -o json`` per context and namespace (one call for all the runs of a fill, in practice):
pending (no pod ready yet), running, succeeded, failed; a Job no longer there is "deleted".
kubectl missing, failing or silent leaves the states unknown: never an exception. The words
are a JobState's (gui_app/core/backends/base.py), so the run list treats every scheduler alike;
:class:`KubernetesBackend` is such a run's backend. TensorFlow-free, Qt-free.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Iterable

from gui_app.core.backends.base import UNKNOWN, JobState, ScheduledBackend, ask, read_record, tell, write_record

JOB_FILE = "kubernetes_job.json"
MANIFEST_FILE = "job.yaml"
ASK_TIMEOUT_S = 15  # kubectl get only talks to the API server: longer means none answers
RESUMABLE = ("stopped", "interrupted", "failed")  # the checkpoints are on the volume, not here
DELETED = "DELETED"
DELETING = "deleting"  # the reason of a Job that was deleted while its pods stop (no new pod comes)


class KubernetesJobState(JobState):
    scheduler: ClassVar[str] = "Kubernetes"
    ACTIVE: ClassVar[frozenset[str]] = frozenset({"PENDING", "RUNNING", "SUSPENDED"})


@dataclass(frozen=True)
class KubernetesJob:
    """The Job a run's manifest was last applied as."""

    job: str
    namespace: str = ""  # "": kubectl's current one
    context: str = ""  # "": kubectl's current one
    submitted: float = 0.0
    # Each chief pod followed: [its first line in events.jsonl, its first line in engine.log]
    # (``kubectl logs`` prints a pod's whole output from its start each time it is asked).
    pods: dict[str, list[int]] = field(default_factory=dict)

    def kubectl_args(self) -> list[str]:
        return [*(["--context", self.context] if self.context else []),
                *(["-n", self.namespace] if self.namespace else [])]


def record_job(run_dir: str | Path, job: str, namespace: str = "", context: str = "") -> KubernetesJob:
    """Write the run's Job (atomically), keeping the pods already followed."""
    before = read_job(run_dir)
    record = KubernetesJob(job=job, namespace=namespace, context=context, submitted=round(time.time(), 3),
                           pods=dict(before.pods) if before is not None else {})
    write_job(run_dir, record)
    return record


def write_job(run_dir: str | Path, record: KubernetesJob) -> None:
    write_record(run_dir, JOB_FILE, {"job": record.job, "namespace": record.namespace, "context": record.context,
                                     "submitted": record.submitted, "manifest": MANIFEST_FILE, "pods": record.pods})


def read_job(run_dir: str | Path) -> KubernetesJob | None:
    """The run's Job; None for a run that was never applied to Kubernetes (or an unreadable record)."""
    value = read_record(run_dir, JOB_FILE)
    if value is None:
        return None
    try:
        return KubernetesJob(job=str(value["job"]), namespace=str(value.get("namespace") or ""),
                             context=str(value.get("context") or ""), submitted=float(value.get("submitted", 0.0)),
                             pods={str(k): [int(v[0]), int(v[1])] for k, v in dict(value.get("pods", {})).items()})
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def job_states(records: Iterable[KubernetesJob]) -> dict[tuple[str, str, str], KubernetesJobState]:
    """``{(context, namespace, job): state}``: one ``kubectl get job`` per context and namespace."""
    groups: dict[tuple[str, str], set[str]] = {}
    for record in records:
        groups.setdefault((record.context, record.namespace), set()).add(record.job)
    states = {}
    for (context, namespace), names in groups.items():
        where = KubernetesJob("", namespace, context).kubectl_args()
        said = _ask("get", "job", *sorted(names), "--ignore-not-found", "-o", "json", *where)
        found = parse_jobs(said) if said is not None else {}
        for name in names:
            states[(context, namespace, name)] = found.get(name, KubernetesJobState(
                DELETED if said is not None else UNKNOWN))
    return states


def job_state(record: KubernetesJob) -> KubernetesJobState:
    return job_states([record])[(record.context, record.namespace, record.job)]


def job_active(run_dir: str | Path) -> bool:
    """The run's Job may still run it (pending or running)."""
    record = read_job(run_dir)
    return record is not None and job_state(record).active


def read_states(paths: Iterable[Path]) -> dict[str, tuple[str, KubernetesJobState]]:
    """``{path: (job name, state)}`` of the Kubernetes runs among ``paths`` (the run list's fill)."""
    records = {str(path): record for path in paths if (record := read_job(path)) is not None}
    states = job_states(records.values())
    return {path: (r.job, states[(r.context, r.namespace, r.job)]) for path, r in records.items()}


def resumable(run_dir: str | Path, status: str) -> bool:
    """A Kubernetes run that ended unfinished: applied again, it continues from the checkpoint on the volume."""
    return status in RESUMABLE and read_job(run_dir) is not None


def parse_jobs(text: str) -> dict[str, KubernetesJobState]:
    """``kubectl get job ... -o json``: one Job, or a List of them (several names); "" when none is there."""
    try:
        value = json.loads(text) if text.strip() else {"items": []}
    except ValueError:
        return {}
    items = value.get("items", []) if value.get("kind", "List") == "List" else [value]
    return {item["metadata"]["name"]: _state(item) for item in items
            if isinstance(item, dict) and "name" in item.get("metadata", {})}


def _state(job: dict) -> KubernetesJobState:
    status = job.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}
    if "Complete" in conditions:
        return KubernetesJobState("SUCCEEDED")
    if "Failed" in conditions:
        return KubernetesJobState("FAILED", str(conditions["Failed"].get("reason") or ""))
    if "Suspended" in conditions:
        return KubernetesJobState("SUSPENDED")
    active = int(status.get("active") or 0)
    # "ready" counts pods whose container runs (ours have no readiness probe); clusters before
    # 1.24 do not report it: an active pod then counts as running.
    ready = int(status.get("ready", active) or 0)
    if active > 0 and job.get("metadata", {}).get("deletionTimestamp"):
        return KubernetesJobState("RUNNING", DELETING)  # its pods still stop: the checkpoint is being written
    if ready > 0:
        return KubernetesJobState("RUNNING")
    return KubernetesJobState("PENDING", "pods starting" if active else "")


def delete(record: KubernetesJob, *, wait: bool = False) -> str | None:
    """``kubectl delete job``, its pods with it (foreground: the Job stays listed until they have
    ended, each with SIGTERM and its grace period): None once done, else the one line why not."""
    return tell(["kubectl", "delete", "job", record.job, "--cascade=foreground", "--ignore-not-found",
                 f"--wait={str(wait).lower()}", *record.kubectl_args()],
                ASK_TIMEOUT_S * 8 if wait else ASK_TIMEOUT_S, name="kubectl delete",
                missing="kubectl: not found on PATH", no_answer="kubectl delete: no answer (is the cluster reachable?)")


def current_context() -> str:
    """kubectl's current context ("" when it has none or cannot say)."""
    return (_ask("config", "current-context") or "").strip()


def _ask(*args: str) -> str | None:
    """kubectl's stdout; None when it is missing, fails or does not answer."""
    return ask(["kubectl", *args], ASK_TIMEOUT_S)


class KubernetesBackend(ScheduledBackend):
    """A run applied with ``submit --kubernetes``: its run directory here is its record, the
    chief's output copied into it while it is followed (engine/schedulers/kubernetes/runs.py: that
    copy ends when the Job does, so a follower needs no watch of its own); a stop deletes its Job."""

    kind: ClassVar[str] = "kubernetes"
    RECORD: ClassVar[str] = JOB_FILE
    REMOVED: ClassVar[frozenset[str]] = frozenset({DELETED})
    watched: ClassVar[bool] = False

    @classmethod
    def holds(cls, run_dir: str | Path) -> bool:
        return read_job(run_dir) is not None

    @classmethod
    def jobs(cls, run_dirs: list[Path]) -> dict[str, tuple[str, JobState]]:
        return dict(read_states(run_dirs))

    def record(self) -> KubernetesJob | None:
        return read_job(self.run_dir)

    def resubmits(self) -> bool:
        """Its manifest is there: a Job of ``submit --kubernetes`` (applied again, it continues the run)."""
        return (self.run_dir / MANIFEST_FILE).is_file()

    def by_scheduler(self) -> bool:
        """A Job of ``submit --kubernetes``: no process here ever holds it."""
        return self.resubmits()

    def cancel(self) -> str | None:
        record = self.record()
        return f"{self.run_dir}: no Kubernetes Job recorded" if record is None else delete(record)
