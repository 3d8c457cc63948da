"""Runs on a real Slurm (tests/slurm_cluster.py): two nodes named node9 and node10, each slurmd
in its own network namespace, jobs submitted with ``replica-studio submit`` and ``sbatch``.

The workers run this checkout's code: ``REPLICA_STUDIO`` in the submitting environment (which
sbatch passes on) is this Python with ``-m gui_app``, and PYTHONPATH has the checkout.

A login node is the SSH test host (tests/ssh_host.py): a network namespace on this machine, so
the same files (``slurm.conf``, munge's socket, the runs folder in its user's home: the shared
filesystem), with a route to the controller's address; ``submit --host`` runs sbatch there as
its user.
"""
from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import pwd
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_helpers import WAITING_PHASES
from slurm_cluster import HOST_IP, SlurmCluster, running_slurm
from ssh_host import ALIAS, CLIENT_IP, USER, SshHost

from gui_app.core import rundir
from gui_app.core.ssh_hosts import Host, add_host
from gui_app.identity import app_command

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slurm() -> SlurmCluster:
    with running_slurm() as cluster:
        yield cluster



def _config(tmp_path: Path, epochs: int = 2, **training) -> Path:
    data = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
            "strategy": {"name": "multi_worker_mirrored", "workers": 2},
            "training": {"epochs": epochs, "global_batch_size": 64, "seed": 3, **training}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


def _submit(slurm: SlurmCluster, config: Path, runs: Path, *options: str) -> tuple[str, Path]:
    done = subprocess.run(app_command("submit", str(config), "--slurm", "--runs-dir", str(runs), *options),
                          capture_output=True, text=True, env=slurm.app_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    job_id, run_dir = done.stdout.splitlines()
    return job_id, Path(run_dir)


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / rundir.EVENTS_FILE).read_text().splitlines() if line.strip()]


def _output(run_dir: Path, job_id: str) -> str:
    path = run_dir / f"slurm-{job_id}.out"
    return path.read_text(errors="replace") if path.exists() else "(no output file)"


def _steps(events: list[dict]) -> list[int]:
    return [e["step"] for e in events if e["type"] == "step"]


def _wait_for_step(run_dir: Path, step: int, timeout: float = 180) -> None:
    """Poll the run's events file (the job writes it on another node) until ``step`` is in it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run_dir / rundir.EVENTS_FILE).exists() and max(_steps(_events(run_dir)), default=0) >= step:
            return
        time.sleep(0.2)
    raise AssertionError(f"no step {step} in {run_dir} after {timeout:g} s")


def _each_step_once(events: list[dict]) -> None:
    total = next(e for e in events if e["type"] == "run_started")["total_steps"]
    counts = Counter(_steps(events))
    assert sorted(counts) == list(range(1, total + 1)) and set(counts.values()) == {1}, \
        [s for s, n in counts.items() if n > 1]


def test_a_two_node_run_on_node9_and_node10_completes(slurm, tmp_path):
    submitted = time.time()
    job_id, run_dir = _submit(slurm, _config(tmp_path), tmp_path / "runs", "--cpus-per-task", "1")
    job = slurm.wait_state(job_id, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=240)
    out = _output(run_dir, job_id)
    assert job["JobState"] == "COMPLETED", out[-4000:]
    assert job["NodeList"] == "node[9-10]"
    events = _events(run_dir)
    started = next(e for e in events if e["type"] == "run_started")
    assert started["num_workers"] == 2 and [r["worker"] for r in started["replicas"]] == [0, 1]
    assert "0/CPU:0, 1/CPU:0" in out  # the start line tells the two workers' devices apart
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
    steps = _steps(events)
    assert steps == list(range(1, started["total_steps"] + 1))
    assert (run_dir / "job.sbatch").is_file() and rundir.read_run(run_dir).has_model
    joined = next(line for line in out.splitlines() if "workers joined in" in line)  # a log line, not a warning
    first = next(e for e in events if e["type"] == "step")
    print(f"submit to the first step: {first['time'] - submitted:.1f} s ({joined})")


def test_a_job_of_two_replicas_a_node_ends_with_its_run_and_a_clean_output(slurm, tmp_path):
    """The job ends right after the last eval (engine/cluster/leaving.py); before, with two CPU
    replicas a worker, Slurm saw it end 122 s later and its output said "The tasks have crashed"."""
    config = _config(tmp_path, epochs=10, steps_per_call=5)
    config.write_text(json.dumps({**json.loads(config.read_text()), "runtime": {"cpu_devices": 2}}))
    job_id, run_dir = _submit(slurm, config, tmp_path / "runs", "--cpus-per-task", "1")
    slurm.wait_state(job_id, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=300)
    ended = time.time()  # within 0.5 s of the state (wait_state polls)
    out = _output(run_dir, job_id)
    events = _events(run_dir)
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed", out[-4000:]
    last_eval = [e for e in events if e["type"] == "eval"][-1]
    assert ended - last_eval["time"] < 10, out[-4000:]  # 0.2-0.3 s measured; the old end took 122 s
    noise = ("CoordinationService", "heartbeat", "The tasks have crashed", "GRPC", "UNAVAILABLE")
    assert not [line for line in out.splitlines() if any(word in line for word in noise)], out[-4000:]


def test_two_jobs_at_once_on_the_same_nodes_both_complete(slurm, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    jobs = [_submit(slurm, _config(tmp_path / name, epochs=4), tmp_path / "runs") for name in ("a", "b")]
    both_running = False
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        states = [slurm.job(job_id).get("JobState") for job_id, _ in jobs]
        both_running = both_running or states == ["RUNNING", "RUNNING"]
        if all(state not in ("PENDING", "RUNNING", "COMPLETING") for state in states):
            break
        time.sleep(0.5)
    for job_id, run_dir in jobs:
        job = slurm.job(job_id)
        assert job["JobState"] == "COMPLETED", _output(run_dir, job_id)[-4000:]
        assert job["NodeList"] == "node[9-10]"
        events = _events(run_dir)
        assert events[-1]["status"] == "completed"
        _each_step_once(events)
    assert both_running  # on the same two nodes at the same time: ports per job, no stranger joined


def test_scancel_stops_with_a_checkpoint_and_the_same_script_continues_the_run(slurm, tmp_path):
    job_id, run_dir = _submit(slurm, _config(tmp_path, epochs=8), tmp_path / "runs")
    _wait_for_step(run_dir, 25)
    cancelled = time.time()
    slurm.run("scancel", job_id)
    job = slurm.wait_state(job_id, ("CANCELLED", "COMPLETED", "FAILED"), timeout=90)
    events = _events(run_dir)
    finished = events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "stopped", _output(run_dir, job_id)[-4000:]
    assert finished["message"] == "stopped by SIGTERM"
    stop_latency = finished["time"] - cancelled
    assert stop_latency < 30, stop_latency  # within Slurm's KillWait: no SIGKILL
    checkpoints = [e["step"] for e in events if e["type"] == "checkpoint"]
    assert checkpoints[-1] == finished["step"] and rundir.has_checkpoint(run_dir)
    print(f"scancel to run_finished: {stop_latency:.1f} s; job {job['JobState']}")

    again = slurm.sbatch(run_dir / "job.sbatch", env=slurm.app_env())  # submitted again: continues the run
    job = slurm.wait_state(again, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=240)
    assert job["JobState"] == "COMPLETED", _output(run_dir, again)[-4000:]
    events = _events(run_dir)
    resumed = [e for e in events if e["type"] == "run_started"][-1]
    assert resumed["resumed"] and resumed["start_step"] == finished["step"]
    assert events[-1]["status"] == "completed"
    _each_step_once(events)

    done = slurm.sbatch(run_dir / "job.sbatch", env=slurm.app_env())  # once more: nothing left to do
    assert slurm.wait_state(done, ("COMPLETED", "FAILED"), timeout=120)["JobState"] == "COMPLETED"
    assert _events(run_dir) == events and "has completed; nothing to continue" in _output(run_dir, done)


def _task_pid(run_dir: Path, rank: int) -> int:
    """The process of task ``rank`` of the job running ``run_dir``: the nodes' namespaces share this
    machine's process ids, so it is found here by its command line (the Python running ``worker``
    for that run directory, not srun's) and its ``SLURM_PROCID``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if (not Path(cmd[0].decode()).name.startswith("python") or b"worker" not in cmd
                    or str(run_dir).encode() not in cmd):
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, UnicodeDecodeError):
            continue
        if f"SLURM_PROCID={rank}".encode() in env:
            return int(entry.name)
    raise AssertionError(f"no worker process of rank {rank} for {run_dir}")


def test_the_chief_names_a_frozen_worker_on_the_other_node_and_the_run_completes_after_sigcont(slurm, tmp_path):
    """No launcher under Slurm: the chief (rank 0, node9) hosts the stall watch and node10's worker
    reports to the chief's address (engine/cluster/chief_watch.py). That worker frozen with SIGSTOP:
    the chief's ``stall`` names it "not answering" on node10 (no /proc of node10 for the chief) and
    itself running with its stack; SIGCONT before TensorFlow's heartbeat check ends the cluster:
    ``stall_cleared``, and the job completes with every step once."""
    job_id, run_dir = _submit(slurm, _config(tmp_path, epochs=8), tmp_path / "runs")
    _wait_for_step(run_dir, 25)
    pid = _task_pid(run_dir, 1)
    frozen = time.time()
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30
        stall = None
        while stall is None and time.monotonic() < deadline:
            stall = next((e for e in _events(run_dir) if e["type"] == "stall"), None)
            time.sleep(0.1)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert stall is not None, _output(run_dir, job_id)[-4000:]
    print(f"SIGSTOP to the chief's stall event: {stall['time'] - frozen:.2f} s; {json.dumps(stall)}")
    assert stall["worker"] == 1 and "stopped answering" in stall["reason"]
    workers = {w["worker"]: w for w in stall["workers"]}
    assert (workers[1]["state"], workers[1]["host"], workers[1]["pid"]) == ("not answering", "node10", pid)
    # The chief waits for it in a collective: a step's, the agreement's or the validation's.
    assert workers[0]["state"] == "running" and workers[0]["phase"] in WAITING_PHASES
    assert workers[0]["stack"] and workers[0]["os_state"][0] in "RS"
    job = slurm.wait_state(job_id, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=240)
    out = _output(run_dir, job_id)
    assert job["JobState"] == "COMPLETED", out[-4000:]
    events = _events(run_dir)
    cleared = [e for e in events if e["type"] == "stall_cleared"]
    assert len(cleared) == 1 and cleared[0]["step"] > stall["since_step"], out[-4000:]
    assert [e["type"] for e in events if e["type"] in ("stall", "stall_cleared")] == ["stall", "stall_cleared"]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
    _each_step_once(events)


@pytest.fixture
def faulthandler_timeout(request):
    """Arm pytest's faulthandler timer again for a test that runs longer than its 280 s
    (``faulthandler_timeout`` in pyproject.toml) on purpose; pytest cancels it after the test."""
    from _pytest.faulthandler import fault_handler_stderr_fd_key

    def arm(seconds: float) -> None:
        faulthandler.dump_traceback_later(seconds, file=request.config.stash[fault_handler_stderr_fd_key])

    return arm


@pytest.mark.timeout(900)
def test_a_time_limit_checkpoints_requeues_and_completes(slurm, tmp_path, faulthandler_timeout):
    # 5-7 minutes by design (a 1-minute limit, the requeue after cred_expire, then the rest of
    # the run on 2 shared cores): the stacks are printed only if it outlives 880 s, just before
    # pytest-timeout's 900 s end it.
    faulthandler_timeout(880)
    # A run of more than a minute (100 epochs of one step per call) against a 1-minute limit with
    # the warning 30 s before it: slurmctld sends it at one of its periodic checks, seen 5 s early
    # to 15 s late, while the cluster forms or trains. Once Slurm requeued the job the test gives
    # it ten minutes, as a longer --time would, so that the second job completes the run.
    job_id, run_dir = _submit(slurm, _config(tmp_path, epochs=100, steps_per_call=1), tmp_path / "runs",
                              "--time", "1", "--signal-seconds", "30")
    submitted = time.time()
    job = slurm.wait_state(job_id, ("PENDING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=240,
                           restarted=True)
    requeued = time.time()
    slurm.run("scontrol", "update", f"JobId={job_id}", "TimeLimit=10")
    job = slurm.wait_state(job_id, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"), timeout=600)
    out = _output(run_dir, job_id)
    assert job["JobState"] == "COMPLETED" and job["Restarts"] == "1", out[-4000:]
    events = _events(run_dir)
    (stop,) = [e for e in events if e["type"] == "run_finished" and e["status"] == "stopped"]
    assert stop["message"] == "stopped by SIGUSR1" and "requeueing job" in out
    assert stop["step"] in [e["step"] for e in events if e["type"] == "checkpoint"]
    resumed = [e for e in events if e["type"] == "run_started"][-1]
    assert resumed["resumed"] and resumed["start_step"] == stop["step"]
    assert events[-1]["status"] == "completed"
    _each_step_once(events)
    starts = [e["time"] - submitted for e in events if e["type"] == "run_started"]
    print(f"USR1 stop at step {stop['step']}, {stop['time'] - submitted:.0f} s after submit; requeued "
          f"{requeued - submitted:.0f} s; run_started at {', '.join(f'{t:.0f}' for t in starts)} s")


@contextlib.contextmanager
def _login_node(slurm: SlurmCluster, ssh_host: SshHost, config_dir: Path, runs_dir: str):
    """The SSH test host as a login node: a route from its namespace to the controller's address
    (its LAN reaches only this machine's bridge), and its hosts entry runs the app there with the
    test Slurm's ``SLURM_CONF`` (a real login node has /etc/slurm/slurm.conf)."""
    route = ("ip", "netns", "exec", ssh_host.ns, "ip", "route", "add", f"{HOST_IP}/32", "via", CLIENT_IP)
    added = subprocess.run(route, capture_output=True, text=True, timeout=30)
    if added.returncode != 0:
        pytest.skip(f"no route from the SSH test host to the Slurm controller: {added.stderr.strip()}")
    try:
        add_host(Host(ALIAS, command=f"SLURM_CONF={slurm.env['SLURM_CONF']} {ssh_host.command}", runs_dir=runs_dir),
                 config_dir / "hosts.json")
        yield
    finally:
        subprocess.run(("ip", "netns", "exec", ssh_host.ns, "ip", "route", "del", f"{HOST_IP}/32"),
                       capture_output=True, timeout=30)


@pytest.mark.timeout(600)
def test_submit_through_a_login_node_over_ssh_runs_as_its_user_and_stops_over_ssh(slurm, ssh_host, tmp_path):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    with _login_node(slurm, ssh_host, config_dir, f"~/slurm-{tmp_path.name}"):
        config = _config(tmp_path, epochs=100, steps_per_call=1)
        asked = time.time()
        done = ssh_host.cli(config_dir, "submit", str(config), "--slurm", "--host", ALIAS, "--cpus-per-task", "1",
                            timeout=120)
        submitted = time.time()
        assert done.returncode == 0, done.stderr
        job_id, there = done.stdout.splitlines()
        run_dir = Path(there)  # the user's home there is a folder here too: the shared filesystem
        assert run_dir.is_relative_to(ssh_host.home / f"slurm-{tmp_path.name}")
        _wait_for_step(run_dir, 5)
        job = slurm.job(job_id)
        assert job["UserId"].startswith(f"{USER}(") and job["NodeList"] == "node[9-10]"
        assert (run_dir / rundir.EVENTS_FILE).stat().st_uid == pwd.getpwnam(USER).pw_uid

        listed = ssh_host.cli(config_dir, "runs", "--json", "--host", ALIAS, timeout=120)
        assert listed.returncode == 0, listed.stderr
        (entry,) = json.loads(listed.stdout)
        assert (entry["run_dir"], entry["slurm_job"], entry["status"]) == (there, job_id, "running")

        stopped = ssh_host.cli(config_dir, "stop", there, "--host", ALIAS, timeout=180)  # scancel as the user
        assert stopped.returncode == 0, stopped.stderr
        assert f"(Slurm job {job_id} cancelled)" in stopped.stdout
    assert slurm.job(job_id)["JobState"] == "CANCELLED"
    events = _events(run_dir)
    finished = events[-1]
    assert finished["type"] == "run_finished" and finished["status"] == "stopped", _output(run_dir, job_id)[-4000:]
    assert finished["message"] == "stopped by SIGTERM" and rundir.has_checkpoint(run_dir)
    first = next(e for e in events if e["type"] == "step")
    print(f"submit over ssh: {submitted - asked:.1f} s; to the first step: {first['time'] - asked:.1f} s")
