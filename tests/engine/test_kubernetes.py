"""Plain Kubernetes: the manifest (checked against the Kubernetes API's models), the pod command
run as two local processes with the environment an Indexed Job gives its pods, and submit with a
fake kubectl.

``kubectl apply|create --dry-run=client`` cannot check a manifest here: without an API server
it fails before validating (kubectl 1.32: "failed to download openapi", and with
``--validate=false`` "unable to recognize": it needs the server's API list to map the kinds);
``kubectl label --local`` reads the file but checks no field. So the documents are validated by
the kubernetes client's models (pydantic, ``extra="forbid"``): unknown fields, missing required
fields and wrong types are errors.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_helpers import WAITING_PHASES
from engine_helpers import run_cli

from gui_app.core import rundir
from gui_app.core.backends.kubernetes import read_job, record_job
from gui_app.core.cluster_addresses import free_ports
from gui_app.core.config import ConfigError, RunConfig
from gui_app.core.events import Step
from gui_app.engine.schedulers.kubernetes import cluster as kubernetes
from gui_app.engine.schedulers.kubernetes import manifest as kubernetes_manifest
from gui_app.engine.schedulers.kubernetes.manifest import KubernetesOptions, documents, manifest
from gui_app.identity import app_command, app_env

client = pytest.importorskip("kubernetes.client")  # the test extra; it brings PyYAML too
yaml = pytest.importorskip("yaml")


def _config(tmp_path, epochs=1, **training) -> Path:
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "workers": 2},
            "training": {"epochs": epochs, "global_batch_size": 64, "seed": 2, "steps_per_call": 5, **training}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


def _validated(text: str) -> list[dict]:
    """The documents as kubectl reads the file (YAML), each validated by its API model."""
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    models = {"ConfigMap": client.V1ConfigMap, "Service": client.V1Service, "Job": client.V1Job}
    for doc in docs:
        models[doc["kind"]].model_validate(doc)
    return docs


def test_the_model_check_catches_unknown_fields():
    """What the manifest tests rely on: a misspelt field fails, as the API server's strict
    validation would."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
           "spec": {"completionMode": "Indexed", "template": {"spec": {"containers": [
               {"name": "w", "image": "i", "resource": {}}]}}}}
    with pytest.raises(ValueError, match="resource"):
        client.V1Job.model_validate(job)


def test_manifest_is_a_config_map_a_headless_service_and_an_indexed_job(tmp_path):
    config = RunConfig.load(_config(tmp_path))
    text = manifest(config, "20261201-120000-digits-mlp", 7, KubernetesOptions())
    config_map, service, job = _validated(text)
    name = "rs-20261201-120000-digits-mlp"
    assert RunConfig.from_dict(json.loads(config_map["data"]["run.json"])) == config
    assert service["metadata"]["name"] == name and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"][0]["port"] == kubernetes.PORT
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    pod = spec["template"]
    assert pod["spec"]["subdomain"] == name and pod["spec"]["restartPolicy"] == "Never"
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["terminationGracePeriodSeconds"] >= 60
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["replica-studio", "worker", "/config/run.json", "--cluster", "kubernetes",
                                    "--run-dir", "/runs/20261201-120000-digits-mlp", "--resume-or-start",
                                    "--data-seed", "7", "--events", "jsonl"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["RS_K8S_JOB"], env["RS_K8S_SERVICE"], env["RS_K8S_WORKERS"]) == (name, name, "2")
    assert container["resources"] == {}
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/config", "/runs"}
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claims == ["replica-studio-runs"]
    # What the pods build from that environment: JOB-i.SERVICE, index 0 the chief.
    pod_env = {**env, "JOB_COMPLETION_INDEX": "1"}
    assert json.loads(kubernetes.tf_config(pod_env)) == {
        "cluster": {"worker": [f"{name}-0.{name}:2222", f"{name}-1.{name}:2222"]},
        "task": {"type": "worker", "index": 1}}


def test_cluster_script_writes_a_manifest_with_gpus_and_resources(tmp_path):
    out = tmp_path / "job.yaml"
    done = run_cli("cluster-script", str(_config(tmp_path)), "--kubernetes", "-o", str(out), "--image", "reg/rs:1",
                   "--namespace", "ml", "--gpus-per-pod", "2", "--cpus", "8", "--memory", "32Gi", "--pvc", "shared")
    assert done.returncode == 0, done.stderr
    docs = _validated(out.read_text())
    assert {d["metadata"]["namespace"] for d in docs} == {"ml"}
    pod = docs[2]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "reg/rs:1"
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "32Gi"},
                                      "limits": {"memory": "32Gi", "nvidia.com/gpu": "2"}}
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v] == [
        "shared"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_reads_the_manifest_offline(tmp_path):
    """What kubectl can do without an API server: ``label --local`` decodes the file (our JSON
    documents with ``#`` comments, as YAML) into the objects ``apply`` would send. It checks no
    field: the models above do."""
    out = tmp_path / "job.yaml"
    assert run_cli("cluster-script", str(_config(tmp_path)), "--kubernetes", "-o", str(out)).returncode == 0
    done = subprocess.run(["kubectl", "label", "--local", "-f", str(out), "checked=yes", "-o", "name"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "KUBECONFIG": os.devnull})
    assert done.returncode == 0, done.stderr
    name = _validated(out.read_text())[2]["metadata"]["name"]
    assert done.stdout.split() == [f"configmap/{name}-config", f"service/{name}", f"job.batch/{name}"]


@pytest.mark.parametrize("args, said", [
    (["--memory", "lots"], "--memory: 'lots' is not a Kubernetes quantity (like 4, 500m, 8Gi)"),
    (["--namespace", "My_NS"], "--namespace: 'My_NS' is not a Kubernetes name"),
])
def test_bad_options_are_one_line(tmp_path, args, said):
    done = run_cli("cluster-script", str(_config(tmp_path)), "--kubernetes", *args)
    assert done.returncode == 2 and done.stderr.strip() == f"replica-studio cluster-script: {said}"


def test_a_pod_without_the_jobs_environment_is_bad_input():
    with pytest.raises(ConfigError, match="RS_K8S_JOB, RS_K8S_SERVICE not set"):
        kubernetes.tf_config({"RS_K8S_WORKERS": "2", "JOB_COMPLETION_INDEX": "0"})
    with pytest.raises(ConfigError, match="JOB_COMPLETION_INDEX is 2, but the job has 2 workers"):
        kubernetes.tf_config({"RS_K8S_ADDRESSES": "a:1,b:2", "JOB_COMPLETION_INDEX": "2"})


def test_a_pod_outside_an_indexed_job_ends_with_exit_2(tmp_path):
    """Exit 2 is the code the manifest's podFailurePolicy fails the Job on: no restarts."""
    done = run_cli("worker", str(_config(tmp_path)), "--cluster", "kubernetes", "--events", "none",
                   env={"RS_K8S_JOB": "rs-x", "RS_K8S_SERVICE": "rs-x", "RS_K8S_WORKERS": "2"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == ("replica-studio worker: --cluster kubernetes: JOB_COMPLETION_INDEX "
                                                    "not set (the Job must have completionMode: Indexed)")


def _pods(tmp_path, epochs: int) -> tuple[list[tuple[list[str], dict]], Path]:
    """Each pod's command and environment as the manifest gives them, run here: the image's
    ``replica-studio`` is this checkout, the volumes are folders, and the pods' DNS names
    ``JOB-i.JOB:2222`` become 127.0.0.1 with a port each (RS_K8S_ADDRESSES): /etc/hosts is shared
    by every test on this machine, so the names cannot be mapped there."""
    config = _config(tmp_path, epochs)
    (_, _, job) = documents(RunConfig.load(config), "20261201-120000-digits-mlp", 3, KubernetesOptions())
    (container,) = job["spec"]["template"]["spec"]["containers"]
    runs = tmp_path / "runs"
    runs.mkdir()
    mounts = {"/config/run.json": str(config), "/runs/20261201-120000-digits-mlp": str(runs / "run")}
    command = app_command(*[mounts.get(a, a) for a in container["command"][1:]])
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    addresses = ",".join(f"127.0.0.1:{p}" for p in free_ports(2))
    return [(command, app_env({**env, "RS_K8S_JOB_UID": "3f0c-uid", "RS_K8S_ADDRESSES": addresses,
                                "JOB_COMPLETION_INDEX": str(i), "TF_CPP_MIN_LOG_LEVEL": "2"}))
            for i in range(2)], runs / "run"


def _start(pods, tmp_path, attempt: int) -> list[subprocess.Popen]:
    procs = []
    for i, (cmd, env) in enumerate(pods):
        with open(tmp_path / f"pod{i}-{attempt}.err", "w") as err:  # the pod writes to its own copy
            procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, text=True, stderr=err,
                                          stdout=subprocess.PIPE if i == 0 else subprocess.DEVNULL))
    return procs


def _run(procs, on_event=None, ending=None, timeout: float = 240) -> list[dict]:
    """The chief's events from its stdout (what ``kubectl logs`` carries), until the pods of
    ``ending`` (both when not given) end."""
    events = []
    for line in procs[0].stdout:
        events.append(json.loads(line))
        if on_event:
            on_event(events[-1])
    for p in procs if ending is None else ending:
        p.wait(timeout=timeout)
    return events


@contextlib.contextmanager
def _second_pod_thawed_at_the_end(procs):
    """Whatever happened, pod 1 continued (SIGCONT) and any pod still running killed and reaped."""
    try:
        yield
    finally:
        procs[1].send_signal(signal.SIGCONT)
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="signals to the pod processes")
def test_pods_stop_on_sigterm_with_a_checkpoint_and_started_again_continue_the_run(tmp_path):
    """Two pods of the Indexed Job as local processes (JOB_COMPLETION_INDEX 0 and 1). A deleted
    or evicted pod gets SIGTERM: both stop at the same step with a checkpoint and exit 143, so
    the Job starts them again (exit 0 would mark the indexes complete); started again with the
    same command, they continue from the checkpoint and complete, every step once."""
    pods, run_dir = _pods(tmp_path, epochs=4)
    first = _start(pods, tmp_path, 1)

    def terminate(event):
        if event["type"] == "step" and event["step"] >= 10 and not terminate.sent:
            terminate.sent = time.time()
            for p in first:
                p.send_signal(signal.SIGTERM)

    terminate.sent = 0.0
    events = _run(first, terminate)
    errors = [(tmp_path / f"pod{i}-1.err").read_text()[-2000:] for i in range(2)]
    assert [p.returncode for p in first] == [kubernetes.EXIT_STOPPED] * 2, errors
    stopped = events[-1]
    assert stopped["type"] == "run_finished" and stopped["status"] == "stopped", errors
    assert stopped["message"] == "stopped by SIGTERM" and stopped["run_dir"] == str(run_dir)
    print(f"SIGTERM to run_finished (stopped): {stopped['time'] - terminate.sent:.2f} s")
    assert stopped["time"] - terminate.sent < kubernetes_manifest.GRACE_S
    checkpoints = [e for e in events if e["type"] == "checkpoint"]
    total = next(e for e in events if e["type"] == "run_started")["total_steps"]
    assert checkpoints[-1]["step"] == stopped["step"] < total

    second = _start(pods, tmp_path, 2)
    events = _run(second)
    errors = [(tmp_path / f"pod{i}-2.err").read_text()[-2000:] for i in range(2)]
    assert [p.returncode for p in second] == [0, 0], errors
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed", errors
    steps = [e for e in events if e["type"] == "step"]
    assert steps[0]["step"] == stopped["step"] + 1 and steps[-1]["step"] == total
    for e in steps:
        assert sorted({r.get("worker", 0) for r in e["replicas"]}) == [0, 1]
    written = [e.step for e in rundir.read_events(run_dir) if isinstance(e, Step)]
    assert written == list(range(1, total + 1))
    assert rundir.read_run(run_dir).status == "completed"


def _fake_kubectl(tmp_path, body: str) -> dict[str, str]:
    """A kubectl on PATH that records each call's argv (and the manifest it was given)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/kubectl-calls\n'
                       f'if [ "$1" = apply ]; then cp "$3" {tmp_path}/applied.yaml; fi\n{body}\n')
    kubectl.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


NO_CONTEXT = 'if [ "$1" = config ]; then echo "error: current-context is not set" >&2; exit 1; fi\n'
APPLIED = (  # what kubectl apply prints for our three documents, named from the Job's RS_K8S_JOB
    'job=$(grep -A1 \'"name": "RS_K8S_JOB"\' "$3" | grep -o \'"value": "[^"]*"\' | cut -d\'"\' -f4)\n'
    'echo "configmap/$job-config created"; echo "service/$job created"; echo "job.batch/$job created"')


@pytest.mark.skipif(sys.platform != "linux", reason="a fake kubectl in bash")
def test_submit_applies_the_manifest_and_keeps_a_local_record_of_the_run(tmp_path):
    env = _fake_kubectl(tmp_path, NO_CONTEXT + APPLIED)
    runs = tmp_path / "runs"
    done = run_cli("submit", str(_config(tmp_path)), "--kubernetes", "--namespace", "ml", "--runs-dir", str(runs),
                   env=env)
    assert done.returncode == 0, done.stderr
    job, run_dir, local = done.stdout.splitlines()
    assert job.startswith("rs-") and job.endswith("-digits-mlp") and run_dir == f"/runs/{job[3:]}"
    assert local == str(runs / job[3:])  # the record has the name of the run directory on the volume
    calls = (tmp_path / "kubectl-calls").read_text().splitlines()
    assert calls == ["config current-context", f"apply -f {local}/job.yaml -n ml"]
    docs = _validated((tmp_path / "applied.yaml").read_text())
    assert (tmp_path / "applied.yaml").read_text() == Path(local, "job.yaml").read_text()  # kept: resume applies it
    assert docs[2]["metadata"] == {"name": job, "namespace": "ml", "labels": {"replica-studio/job": job}}
    (container,) = docs[2]["spec"]["template"]["spec"]["containers"]
    assert f"--run-dir {run_dir} --resume-or-start" in " ".join(container["command"])
    record = read_job(local)
    assert (record.job, record.namespace, record.context, record.pods) == (job, "ml", "", {})
    assert RunConfig.load(Path(local, "config.json")) == RunConfig.load(_config(tmp_path))


@pytest.mark.skipif(sys.platform != "linux", reason="a fake kubectl in bash")
def test_resume_refuses_a_run_whose_job_still_runs_and_applies_nothing(tmp_path):
    running = ("""if [ "$1" = get ]; then echo '{"kind": "Job", "metadata": {"name": "'$3'"}, """
               """"status": {"active": 2, "ready": 2}}'; exit; fi\n""")
    env = _fake_kubectl(tmp_path, NO_CONTEXT + running + APPLIED)
    done = run_cli("submit", str(_config(tmp_path)), "--kubernetes", "--runs-dir", str(tmp_path / "runs"), env=env)
    assert done.returncode == 0, done.stderr
    job, _, local = done.stdout.splitlines()
    applied = (tmp_path / "kubectl-calls").read_text().count(" apply ")
    refused = run_cli("resume", local, env=env)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == (f"replica-studio resume: {local} is still Kubernetes job {job} (running); stop "
                                      f"it first with 'replica-studio stop {local}'")
    assert (tmp_path / "kubectl-calls").read_text().count(" apply ") == applied  # nothing applied again


@pytest.mark.parametrize("body, said", [
    ('echo "E1201 memcache.go:265 couldn\'t get current server API group list" >&2\n'
     'echo "error: unable to recognize \\"x.yaml\\": connection refused" >&2; exit 1',
     'error: unable to recognize "x.yaml": connection refused'),
    (None, "kubectl: not found on PATH"),
])
def test_a_refused_or_impossible_submission_is_one_line_exit_2_and_leaves_no_record(tmp_path, body, said):
    env = _fake_kubectl(tmp_path, body) if body else {"PATH": str(tmp_path / "empty")}
    runs = tmp_path / "runs"
    done = run_cli("submit", str(_config(tmp_path)), "--kubernetes", "--runs-dir", str(runs), env=env)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"replica-studio submit: {said}")
    assert not runs.exists() or list(runs.iterdir()) == []


def _mirror_kubectl(tmp_path, monkeypatch) -> Path:
    """kubectl logs prints the file ``chief.log`` (lines already prefixed), get job says ``state``."""
    (tmp_path / "chief.log").write_text("")
    (tmp_path / "state").write_text('{"status": {"active": 2, "ready": 2}}')
    env = _fake_kubectl(tmp_path, f"""if [ "$1" = logs ]; then cat {tmp_path}/chief.log; fi
if [ "$1" = get ]; then sed 's/^{{/{{"metadata": {{"name": "rs-x"}}, /' {tmp_path}/state; fi""")
    monkeypatch.setenv("PATH", env["PATH"])
    local = tmp_path / "run"
    local.mkdir()
    record_job(local, "rs-x", "ml")
    return local


def _event(kind: str, **fields) -> str:
    return json.dumps({"type": kind, "time": 1.7e9, **fields})


@pytest.mark.skipif(sys.platform != "linux", reason="a fake kubectl in bash")
def test_the_local_copy_gets_each_line_of_each_chief_pod_once(tmp_path, monkeypatch):
    """kubectl logs prints a pod's output from its start each time: a follow again adds only what
    is new; a new pod (the run resumed, or the Job replaced a failed one) goes after it."""
    from gui_app.engine.schedulers.kubernetes.runs import Mirror

    local = _mirror_kubectl(tmp_path, monkeypatch)
    monkeypatch.setattr("gui_app.engine.schedulers.kubernetes.runs.RETRY_S", 0.0)
    log = tmp_path / "chief.log"

    def pod(name: str, *lines: str) -> None:
        with log.open("a") as f:
            f.writelines(f"[pod/{name}/worker] {line}\n" for line in lines)

    def follow() -> list[dict]:
        (tmp_path / "state").write_text('{"status": {"succeeded": 2, "conditions": [{"type": "Complete", '
                                        '"status": "True"}]}}')
        mirror = Mirror(local)
        mirror.run()
        assert mirror.error == ""
        return [json.loads(line) for line in (local / "events.jsonl").read_text().splitlines()]

    pod("rs-x-0-a", "[replica-studio] worker 0: forming the cluster",
        _event("run_started", run_dir="/runs/r", total_steps=3), _event("step", step=1))
    assert [e.get("step") for e in follow()] == [None, 1]
    pod("rs-x-0-a", _event("step", step=2), _event("run_finished", status="stopped", step=2, run_dir="/runs/r"))
    events = follow()
    assert [(e["type"], e.get("step")) for e in events] == [("run_started", None), ("step", 1), ("step", 2),
                                                              ("run_finished", 2)]
    assert {e["run_dir"] for e in events if "run_dir" in e} == {str(local.absolute())}  # the one this machine sees
    log.write_text("")  # the old pods are gone: the resumed run's chief prints its own output
    pod("rs-x-0-b", "[replica-studio] worker 0: forming the cluster", _event("step", step=3))
    assert [e.get("step") for e in follow()] == [None, 1, 2, 2, 3]
    assert follow()[-1]["step"] == 3 and len(follow()) == 5
    assert (local / "engine.log").read_text().count("forming the cluster") == 2  # once per pod
    assert read_job(local).pods == {"rs-x-0-a": [0, 0], "rs-x-0-b": [4, 1]}


def test_pods_of_another_job_of_the_same_name_have_another_run_identity():
    """The worker list is the same for a Job deleted and applied again; its uid is not, so a pod
    left from the old Job is refused when the cluster forms (engine/cluster/run_identity.py)."""
    from gui_app.engine.cluster.run_identity import run_identity

    cluster = {"worker": ["rs-x-0.rs-x:2222", "rs-x-1.rs-x:2222"]}
    ours, again = (run_identity(cluster, "{}", {"RS_K8S_JOB_UID": uid}) for uid in ("uid-1", "uid-1"))
    assert ours == again != run_identity(cluster, "{}", {"RS_K8S_JOB_UID": "uid-2"})


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="signals to the pod processes")
def test_a_frozen_pod_is_named_by_the_chiefs_stall_watch_and_the_run_completes_after_sigcont(tmp_path):
    """No launcher in a Job: the chief pod hosts the stall watch (engine/cluster/chief_watch.py) and
    the other pod reports to its address. Pod 1 frozen with SIGSTOP (a cgroup freeze looks the
    same from the chief): the chief's ``stall`` names worker 1 "not answering" (its /proc is on
    another node, as far as the chief knows) and the chief itself running, with its stack; SIGCONT
    before TensorFlow's heartbeat check ends the cluster: ``stall_cleared``, and the run completes."""
    pods, run_dir = _pods(tmp_path, epochs=6)
    procs = _start(pods, tmp_path, 1)
    seen: dict[str, float] = {}

    def freeze(event):
        if event["type"] == "step" and event["step"] >= 15 and "stopped" not in seen:
            seen["stopped"] = time.monotonic()
            procs[1].send_signal(signal.SIGSTOP)
        elif event["type"] == "stall" and "continued" not in seen:
            seen["continued"] = time.monotonic()
            procs[1].send_signal(signal.SIGCONT)

    with _second_pod_thawed_at_the_end(procs):
        events = _run(procs, freeze)
    errors = [(tmp_path / f"pod{i}-1.err").read_text()[-2000:] for i in range(2)]
    assert [p.returncode for p in procs] == [0, 0], errors
    stalls = [e for e in events if e["type"] == "stall"]
    assert len(stalls) == 1, errors
    stall = stalls[0]
    print(f"SIGSTOP to the chief's stall event: {seen['continued'] - seen['stopped']:.2f} s; {json.dumps(stall)}")
    assert stall["worker"] == 1 and "stopped answering" in stall["reason"]
    workers = {w["worker"]: w for w in stall["workers"]}
    assert workers[1]["state"] == "not answering" and 0 <= workers[1]["last_step"] <= stall["since_step"]
    assert workers[0]["state"] == "running" and workers[0]["pid"] == procs[0].pid
    assert workers[0]["phase"] in WAITING_PHASES and workers[0]["stack"]  # it waits in a collective
    cleared = [e for e in events if e["type"] == "stall_cleared"]
    assert len(cleared) == 1 and cleared[0]["step"] > stall["since_step"]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed", errors
    kept = [e.TYPE for e in rundir.read_events(run_dir) if e.TYPE in ("stall", "stall_cleared")]
    assert kept == ["stall", "stall_cleared"]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="signals to the pod processes")
def test_a_pod_left_frozen_fails_the_run_with_the_stall_in_the_chiefs_error(tmp_path):
    """Left frozen, TensorFlow's heartbeat check ends the cluster (8-11 s after the freeze): the
    chief's error says what its stall watch saw before it."""
    pods, run_dir = _pods(tmp_path, epochs=6)
    procs = _start(pods, tmp_path, 1)

    def freeze(event):
        if event["type"] == "step" and event["step"] >= 15 and not freeze.done:
            freeze.done = True
            procs[1].send_signal(signal.SIGSTOP)

    freeze.done = False
    with _second_pod_thawed_at_the_end(procs):
        events = _run(procs, freeze, ending=procs[:1], timeout=120)  # pod 1 stays frozen until the end
    error = (tmp_path / "pod0-1.err").read_text()[-3000:]
    assert procs[0].returncode != 0 and [e["type"] for e in events].count("stall") == 1, error
    failed = next(e for e in events if e["type"] == "error")
    print(failed["message"])
    assert "; before it: no step has finished" in failed["message"] and "worker 1" in failed["message"]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "failed"
