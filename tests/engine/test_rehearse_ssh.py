"""``replica-studio rehearse --worker K`` on a cluster whose worker 1 runs on the SSH test host
(tests/ssh_host.py): the signal goes there over ssh to the process the run recorded for it, the
launcher fails the run naming the worker and its host, ``resume`` starts the cluster again (the
chief's checkpoints copied there) and the certificate compares it with a run never interrupted.
Which workers rehearse can and cannot signal is one line of bad input, checked before any run."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from engine_helpers import config_dict, run_cli
from ssh_host import ALIAS, HOST_IP
from test_ssh_cluster import WORKER_PORT, cluster_config, remote_workers

from gui_app.core import rundir
from gui_app.core.answers import Certificate, decode, problems
from gui_app.core.events import RunFinished
from gui_app.core.ssh_hosts import Host, add_host
from gui_app.identity import app_command


def _short(config: Path) -> Path:
    """2 epochs, 2 steps per call, a checkpoint every 4 steps: a SIGKILL loses steps and the resume
    starts mid-epoch (as tests/engine/test_rehearse.py)."""
    data = json.loads(config.read_text())
    data["training"].update({"epochs": 2, "steps_per_call": 2, "checkpoint_every_steps": 4})
    config.write_text(json.dumps(data))
    return config


@pytest.mark.slow
@pytest.mark.parametrize("signal", ["KILL", "TERM"])
def test_a_worker_signalled_on_its_ssh_host_is_the_same_run(ssh_host, tmp_path, signal):
    add_host(Host(ALIAS, command=ssh_host.command), tmp_path / "config" / "hosts.json")
    config = _short(cluster_config(tmp_path, ALIAS))
    done = subprocess.run(app_command("rehearse", str(config), "--at", "7", "--worker", "1", "--signal", signal,
                                      "--json", "--runs-dir", str(tmp_path / "runs")),
                          capture_output=True, text=True, timeout=900, env=ssh_host.env(tmp_path / "config"),
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    line = json.loads(done.stdout)
    assert problems(Certificate, line) == []
    cert = decode(Certificate, line)
    assert cert is not None and cert.equivalent and cert.first_difference is None, line
    assert cert.worker == 1 and cert.signal == signal and cert.strategy == "multi_worker_mirrored"
    assert cert.batches_identical and cert.tolerance == "bitwise"
    assert cert.max_loss_diff == 0.0 and cert.max_weight_diff == 0.0 and cert.max_optimizer_diff == 0.0
    assert cert.interrupted_at is not None and cert.interrupted_at >= 7
    assert cert.resumed_from is not None and cert.resumed_from <= cert.interrupted_at
    # The interrupted run ended because of worker 1 there, as the signal made it end.
    ends = [e for e in rundir.read_raw_events(Path(cert.rehearsed_run)) if isinstance(e, RunFinished)]
    first = ends[0]
    if signal == "KILL":
        assert first.status == "failed" and first.message is not None, ends
        assert first.message.startswith(f"worker 1 on {ALIAS} ({HOST_IP}:{WORKER_PORT}) was killed by SIGKILL")
    else:  # a polite preemption: the cluster agreed to stop with a checkpoint of the step it stopped at
        assert first.status == "stopped" and cert.resumed_from == cert.interrupted_at, ends
    assert ends[-1].status == "completed"
    assert not remote_workers()
    print(f"SIG{signal} to worker 1 on the host at step 7: interrupted after {cert.interrupted_at}, resumed from "
          f"{cert.resumed_from}, {cert.steps} steps compared, equivalent ({cert.tolerance}), {cert.seconds} s")


@pytest.mark.slow
def test_a_worker_whose_process_is_not_recorded_fails_in_one_line_and_its_run_is_stopped(ssh_host, tmp_path):
    """Without the workers' status reports (the benchmarks' switch) nothing names worker 1's
    process there: one line, exit 1, and the run that was to be interrupted is stopped, not left
    training."""
    add_host(Host(ALIAS, command=ssh_host.command), tmp_path / "config" / "hosts.json")
    # Still training when the 30 s wait for the record ends, however fast the machine (30 epochs
    # were done by then once, on a machine running two test sessions); stopped then, so never long.
    config = cluster_config(tmp_path, ALIAS, epochs=400)
    done = subprocess.run(app_command("rehearse", str(config), "--at", "3", "--worker", "1", "--json",
                                      "--runs-dir", str(tmp_path / "runs")),
                          capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL,
                          env=ssh_host.env(tmp_path / "config", REPLICA_STUDIO_STATUS_REPORTS="0"))
    assert done.returncode == 1 and done.stdout == "", done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("replica-studio rehearse: ")]
    assert line.startswith("replica-studio rehearse: worker 1's process is not in ") and "workers.json" in line
    (run,) = rundir.list_runs(tmp_path / "runs")
    assert run.status == "stopped" and run.resumable  # stopped with a checkpoint, as the window's Stop does
    assert not remote_workers()


@pytest.mark.parametrize("strategy, worker, message", [
    ({"cluster": ["10.213.80.1:2222", "10.213.80.2:2222"]}, "1",
     "--worker: worker 1 (10.213.80.2:2222) is started by hand, not by the run; rehearse signals the workers "
     "train starts: the chief, and those given as"),
    ({"cluster": ["10.213.80.1:2222", {"host": "gpu2", "port": 2222}]}, "2",
     "--worker: the cluster has workers 0 to 1; got 2"),
    ({"cluster": "slurm"}, "1",
     "--worker: this config's workers run under slurm (strategy.cluster), which starts them"),
])
def test_workers_rehearse_cannot_signal_are_one_line(tmp_path, strategy, worker, message):
    config = config_dict(strategy={"name": "multi_worker_mirrored", "devices": [], **strategy},
                         runtime={"cpu_devices": 1})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    done = run_cli("rehearse", str(path), "--at", "3", "--worker", worker, "--runs-dir", str(tmp_path / "runs"),
                   timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.startswith(f"replica-studio rehearse: {message}") and done.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()
