"""A Kubernetes run's local record and its Job's state from ``kubectl get job -o json``
(gui_app/core/backends/kubernetes.py): the words the run list shows, one kubectl call for several
runs, and kubectl failing or missing read as "unknown", never an exception."""
from __future__ import annotations

import json
import os
import sys

import pytest

from gui_app.core.backends import kubernetes
from gui_app.core.backends.kubernetes import KubernetesJob, parse_jobs


def _job(name: str, status: dict, deleting: bool = False) -> dict:
    metadata = {"name": name, "namespace": "ml", **({"deletionTimestamp": "2026-12-02T01:00:00Z"} if deleting else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "status": status}


COMPLETE = {"type": "Complete", "status": "True", "reason": "CompletionsReached"}
FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
CASES = [  # status as the Job controller writes it -> (state, described, active)
    ({}, ("PENDING", "pending", True)),  # just created: no pod yet
    ({"active": 2, "ready": 0}, ("PENDING", "pending (pods starting)", True)),  # images pulling
    ({"active": 2, "ready": 2}, ("RUNNING", "running", True)),
    ({"active": 2}, ("RUNNING", "running", True)),  # a cluster before 1.24: no "ready"
    ({"succeeded": 2, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, COMPLETE]},
     ("SUCCEEDED", "succeeded", False)),
    ({"failed": 1, "conditions": [{"type": "FailureTarget", "status": "True"}, FAILED]}, ("FAILED", "failed", False)),
    ({"active": 1, "conditions": [{**COMPLETE, "status": "False"}], "ready": 1}, ("RUNNING", "running", True)),
]


@pytest.mark.parametrize("status, expected", CASES)
def test_the_jobs_status_reads_as_pending_running_succeeded_or_failed(status, expected):
    (state,) = parse_jobs(json.dumps(_job("rs-a", status))).values()
    assert (state.state, state.describe(), state.active) == expected
    assert state.scheduler == "Kubernetes"


def test_a_deleted_job_whose_pods_still_stop_is_running_until_it_is_gone():
    states = parse_jobs(json.dumps({"kind": "List", "items": [
        _job("rs-a", {"active": 2, "ready": 0}, deleting=True),
        _job("rs-b", {"succeeded": 2, "conditions": [COMPLETE]})]}))
    assert {name: s.state for name, s in states.items()} == {"rs-a": "RUNNING", "rs-b": "SUCCEEDED"}
    assert parse_jobs("") == {} and parse_jobs("not json") == {}


def test_the_record_keeps_its_pods_when_applied_again(tmp_path):
    assert kubernetes.read_job(tmp_path) is None
    kubernetes.record_job(tmp_path, "rs-a", "ml", "prod")
    record = kubernetes.read_job(tmp_path)
    record.pods["rs-a-0-xyz"] = [0, 0]
    kubernetes.write_job(tmp_path, record)
    again = kubernetes.record_job(tmp_path, "rs-a", "ml", "prod")
    assert again.pods == {"rs-a-0-xyz": [0, 0]} and again.kubectl_args() == ["--context", "prod", "-n", "ml"]
    assert kubernetes.resumable(tmp_path, "stopped") and not kubernetes.resumable(tmp_path, "completed")
    (tmp_path / kubernetes.JOB_FILE).write_text("{")
    assert kubernetes.read_job(tmp_path) is None


def _kubectl(tmp_path, monkeypatch, body: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/calls\n{body}\n')
    (bin_dir / "kubectl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.skipif(sys.platform != "linux", reason="a fake kubectl in bash")
def test_one_kubectl_call_per_namespace_and_a_job_not_listed_is_deleted(tmp_path, monkeypatch):
    listed = json.dumps({"kind": "List", "items": [_job("rs-a", {"active": 2, "ready": 2})]})
    _kubectl(tmp_path, monkeypatch, f"echo '{listed}'")
    runs = []
    for name, namespace in (("rs-a", "ml"), ("rs-b", "ml"), ("rs-c", "")):
        run = tmp_path / name
        run.mkdir()
        kubernetes.record_job(run, name, namespace)
        runs.append(run)
    states = kubernetes.read_states([*runs, tmp_path / "not-kubernetes"])
    assert {path: (job, s.state) for path, (job, s) in states.items()} == {
        str(runs[0]): ("rs-a", "RUNNING"), str(runs[1]): ("rs-b", "DELETED"), str(runs[2]): ("rs-c", "DELETED")}
    assert sorted((tmp_path / "calls").read_text().splitlines()) == [
        "get job rs-a rs-b --ignore-not-found -o json -n ml", "get job rs-c --ignore-not-found -o json"]


@pytest.mark.skipif(sys.platform != "linux", reason="a fake kubectl in bash")
def test_kubectl_failing_or_missing_leaves_the_state_unknown(tmp_path, monkeypatch):
    _kubectl(tmp_path, monkeypatch, 'echo "The connection to the server localhost:8080 was refused" >&2; exit 1')
    record = KubernetesJob("rs-a", "ml")
    assert kubernetes.job_state(record).state == "UNKNOWN"
    assert kubernetes.delete(record) == "The connection to the server localhost:8080 was refused"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert kubernetes.job_state(record).describe() == "unknown"
    assert kubernetes.delete(record) == "kubectl: not found on PATH"
    assert kubernetes.current_context() == ""


@pytest.mark.skipif(sys.platform != "linux", reason="a fake kubectl in bash")
def test_runs_lists_a_kubernetes_run_by_its_job(tmp_path, monkeypatch):
    # No process here holds the run's lock: without its Job it would read "interrupted".
    from gui_app.core.live_runs import list_live_runs

    listed = json.dumps({"kind": "List", "items": [_job("rs-a", {"active": 2, "ready": 2})]})
    _kubectl(tmp_path, monkeypatch, f"echo '{listed}'")
    runs_dir = tmp_path / "runs"
    for name in ("rs-a", "rs-b"):  # rs-b: its Job is gone, its events end without run_finished
        run = runs_dir / name
        run.mkdir(parents=True)
        (run / "config.json").write_text("{}")
        (run / "events.jsonl").write_text(json.dumps(
            {"type": "run_started", "time": 1, "run_dir": str(run), "config": {}, "total_steps": 100}) + "\n"
            + json.dumps({"type": "step", "time": 2, "step": 7, "loss": 1.0}) + "\n")
        kubernetes.record_job(run, name, "ml")
    found = {run.info.path.name: run for run in list_live_runs(runs_dir)}
    assert {name: (run.status, run.to_json()["kubernetes_job"], run.to_json()["slurm_job"])
            for name, run in found.items()} == {"rs-a": ("running", "rs-a", None),
                                               "rs-b": ("deleted", "rs-b", None)}  # the Job's word for that end
