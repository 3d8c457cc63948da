"""A fake ``kubectl`` on PATH that keeps the real one's contract for what Replica Studio asks of
it, with local processes for pods (no API server can run here):

- ``apply -f FILE``: the manifest's Indexed Job starts as one process per index, each with the
  environment tests/engine/test_kubernetes.py gives its pods (JOB_COMPLETION_INDEX, the job's
  variables, RS_K8S_ADDRESSES on 127.0.0.1 instead of the pods' DNS names, a uid per Job), its
  ConfigMap a file and its PersistentVolumeClaim a folder (``pvc``); each pod's stdout and
  stderr go to its log file, as the kubelet keeps them. Prints what kubectl prints
  (``job.batch/NAME created``, or ``unchanged`` for a Job that is there).
- ``logs -f --prefix -l job-name=NAME,job-completion-index=0 --tail=-1``: the chief pod's whole
  log, then follows it until the pod ends; "No resources found" (exit 0) without one.
- ``get job NAMES --ignore-not-found -o json``: the Job (one name) or a List, with ``status``
  as the Job controller writes it (active, ready, succeeded, failed, conditions Complete or
  Failed) and ``deletionTimestamp`` while a deleted Job's pods stop.
- ``delete job NAME --cascade=foreground``: SIGTERM to each pod (its grace period is not
  enforced); the Job is listed until they have ended. ``--wait=true`` waits for that.
- ``config current-context``: ``fake-cluster``.

A pod is a small supervisor (``kubectl __pod``) that forwards SIGTERM to the worker process and
writes its exit code, as the kubelet reports a container's. Every call goes to ``calls.jsonl``.
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

_SCRIPT = r'''#!{python}
import sys
sys.path.insert(0, {root!r})
from tests.fake_kubectl import main
sys.exit(main({folder!r}, sys.argv[1:]))
'''


class FakeKubectl:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.bin = folder / "bin"
        self.bin.mkdir(parents=True)
        (folder / "state.json").write_text(json.dumps({"jobs": {}, "applies": 0}))
        (folder / "calls.jsonl").write_text("")
        script = self.bin / "kubectl"
        script.write_text(_SCRIPT.format(python=sys.executable, root=str(Path(__file__).parent.parent),
                                         folder=str(folder)))
        script.chmod(0o755)

    def path(self) -> str:
        return f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"

    @property
    def pvc(self) -> Path:
        return self.folder / "pvc"

    def refuse(self, line: str) -> None:
        """From now on ``apply`` fails with ``line`` on stderr (no cluster reachable, say)."""
        (self.folder / "refuse").write_text(line)

    def calls(self, verb: str | None = None) -> list[list[str]]:
        calls = [json.loads(line) for line in (self.folder / "calls.jsonl").read_text().splitlines()]
        return [c for c in calls if verb is None or (c and c[0] == verb)]

    def pods(self) -> list[dict]:
        state = json.loads((self.folder / "state.json").read_text())
        return [pod for job in state["jobs"].values() for pod in job["pods"]]

    def kill_all(self) -> None:
        """The test's end: no pod outlives it."""
        for pod in self.pods():
            try:
                os.killpg(pod["pid"], signal.SIGKILL)
            except OSError:
                pass


# ---- the command ---------------------------------------------------------------------------------
def main(folder: str, argv: list[str]) -> int:
    import fcntl

    base = Path(folder)
    if argv[:1] == ["__pod"]:
        return _pod(argv[1], argv[2], argv[4:])
    with open(base / "calls.jsonl", "a") as f:
        f.write(json.dumps(argv) + "\n")
    args, flags = _flags(argv)
    with open(base / "state.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = json.loads((base / "state.json").read_text())
        _reap(state)
        if args[:1] == ["logs"]:
            (base / "state.json").write_text(json.dumps(state))
            fcntl.flock(lock, fcntl.LOCK_UN)
            return _logs(state, flags)
        code = _command(base, state, args, flags)
        (base / "state.json").write_text(json.dumps(state))
    if args[:2] == ["delete", "job"] and flags.get("--wait") == "true":
        return _wait_gone(base, args[2])
    return code


def _flags(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    args, flags, i = [], {}, 0
    while i < len(argv):
        word = argv[i]
        if word in ("-n", "--namespace", "--context", "-l", "-o") or (word == "-f" and argv[0] == "apply"):
            flags[word], i = argv[i + 1], i + 2
        elif word.startswith("--"):
            key, _, value = word.partition("=")
            flags[key], i = value or "true", i + 1
        else:
            args.append(word)
            i += 1
    return args, flags


def _exit_code(pod: dict) -> int | None:
    try:
        return int(Path(pod["exit"]).read_text())
    except (OSError, ValueError):
        return None


def _reap(state: dict) -> None:
    """A deleted Job whose pods have all ended is gone."""
    for name in [n for n, job in state["jobs"].items() if job.get("deleting")]:
        if all(_exit_code(pod) is not None for pod in state["jobs"][name]["pods"]):
            del state["jobs"][name]


def _command(base: Path, state: dict, args: list[str], flags: dict[str, str]) -> int:
    if args[:2] == ["config", "current-context"]:
        print("fake-cluster")
        return 0
    if args[:1] == ["apply"]:
        if (base / "refuse").exists():
            print("E1202 memcache.go:265] couldn't get current server API group list", file=sys.stderr)
            print((base / "refuse").read_text(), file=sys.stderr)
            return 1
        return _apply(base, state, Path(flags["-f"]))
    if args[:2] == ["get", "job"]:
        items = [_job_json(name, state["jobs"][name]) for name in args[2:] if name in state["jobs"]]
        if len(args) == 3:
            if items:
                print(json.dumps(items[0], indent=4))
            elif "--ignore-not-found" not in flags:
                print(f'Error from server (NotFound): jobs.batch "{args[2]}" not found', file=sys.stderr)
                return 1
        else:
            print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}, indent=4))
        return 0
    if args[:2] == ["delete", "job"]:
        job = state["jobs"].get(args[2])
        if job is None:
            if "--ignore-not-found" in flags:
                return 0
            print(f'Error from server (NotFound): jobs.batch "{args[2]}" not found', file=sys.stderr)
            return 1
        job["deleting"] = True
        for pod in job["pods"]:
            if _exit_code(pod) is None:
                try:
                    os.kill(pod["pid"], signal.SIGTERM)
                except OSError:
                    pass
        print(f'job.batch "{args[2]}" deleted')
        return 0
    print(f"fake kubectl: {' '.join(args)} is not faked", file=sys.stderr)
    return 1


def _apply(base: Path, state: dict, manifest: Path) -> int:
    import subprocess
    import uuid

    from gui_app.core.cluster_addresses import free_ports
    from gui_app.identity import app_command, app_env

    docs = [json.loads(part) for part in manifest.read_text().split("\n---\n")[1:]]
    config_map, _service, job = docs
    name = job["metadata"]["name"]
    if name in state["jobs"]:
        print(f"configmap/{name}-config unchanged\nservice/{name} unchanged\njob.batch/{name} unchanged")
        return 0
    state["applies"] += 1
    config = base / "config" / f"{name}-{state['applies']}.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(config_map["data"]["run.json"])
    (base / "pvc").mkdir(exist_ok=True)
    (container,) = job["spec"]["template"]["spec"]["containers"]

    def mounted(arg: str) -> str:
        if arg == "/config/run.json":
            return str(config)
        return str(base / "pvc" / arg[len("/runs/"):]) if arg.startswith("/runs/") else arg

    command = app_command(*[mounted(a) for a in container["command"][1:]])
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    addresses = ",".join(f"127.0.0.1:{p}" for p in free_ports(job["spec"]["completions"]))
    uid = str(uuid.uuid4())
    pods = []
    for index in range(job["spec"]["completions"]):
        pod = f"{name}-{index}-{state['applies']}x{index}"
        log, exit_file = base / "pods" / f"{pod}.log", base / "pods" / f"{pod}.exit"
        log.parent.mkdir(exist_ok=True)
        log.write_text("")
        pod_env = app_env({**env, "RS_K8S_JOB_UID": uid, "RS_K8S_ADDRESSES": addresses,
                           "JOB_COMPLETION_INDEX": str(index), "TF_CPP_MIN_LOG_LEVEL": "2"})
        proc = subprocess.Popen([sys.executable, str(base / "bin" / "kubectl"), "__pod", str(log), str(exit_file),
                                 "--", *command], env=pod_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        pods.append({"name": pod, "index": index, "pid": proc.pid, "log": str(log), "exit": str(exit_file)})
    state["jobs"][name] = {"pods": pods, "uid": uid, "completions": job["spec"]["completions"]}
    print(f"configmap/{name}-config created\nservice/{name} created\njob.batch/{name} created")
    return 0


def _job_json(name: str, job: dict) -> dict:
    codes = [_exit_code(pod) for pod in job["pods"]]
    active = sum(code is None for code in codes)
    succeeded = sum(code == 0 for code in codes)
    failed = len(codes) - active - succeeded
    status: dict = {"startTime": "2026-12-02T01:00:00Z", "ready": active, "terminating": 0,
                    "uncountedTerminatedPods": {}}
    for key, value in (("active", active), ("succeeded", succeeded), ("failed", failed)):
        if value:
            status[key] = value
    if succeeded == job["completions"]:
        status["conditions"] = [{"type": "Complete", "status": "True", "reason": "CompletionsReached"}]
    elif failed and not active:
        status["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
    metadata: dict = {"name": name, "namespace": "default", "uid": job["uid"]}
    if job.get("deleting"):
        metadata["deletionTimestamp"] = "2026-12-02T01:00:01Z"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "status": status}


def _logs(state: dict, flags: dict[str, str]) -> int:
    import time

    selector = dict(part.split("=", 1) for part in flags["-l"].split(","))
    job = state["jobs"].get(selector["batch.kubernetes.io/job-name"])
    chief = [p for p in job["pods"] if p["index"] == 0] if job else []
    if not chief:
        print(f"No resources found in {flags.get('-n', 'default')} namespace.", file=sys.stderr)
        return 0
    pod = chief[0]
    prefix = f"[pod/{pod['name']}/worker] " if "--prefix" in flags else ""
    pending = b""
    with open(pod["log"], "rb") as f:
        while True:
            ended = _exit_code(pod) is not None  # before the read: its last lines are in the file then
            data = f.read()
            lines = (pending + data).split(b"\n")
            pending = lines.pop()
            for line in lines:
                sys.stdout.write(prefix + line.decode("utf-8", "replace") + "\n")
            sys.stdout.flush()
            if ended and not data:
                return 0
            if not data:
                time.sleep(0.05)


def _wait_gone(base: Path, name: str) -> int:
    import time

    while True:
        state = json.loads((base / "state.json").read_text())
        job = state["jobs"].get(name)
        if job is None or all(_exit_code(pod) is not None for pod in job["pods"]):
            return 0
        time.sleep(0.1)


def _pod(log: str, exit_file: str, command: list[str]) -> int:
    """The container: the worker's output to the pod's log; SIGTERM passed on; its exit code kept."""
    import subprocess

    with open(log, "ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
    code = proc.wait()
    Path(exit_file + ".tmp").write_text(str(128 - code if code < 0 else code))
    os.replace(exit_file + ".tmp", exit_file)
    return 0
