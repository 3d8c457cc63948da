"""The engine's commands on a real SSH host with ``--host`` (tests/ssh_host.py: Debian's sshd in a
network namespace, a user of its own): devices, inspect, train, evaluate, export and predict; the
run configuration travelling on stdin; Ctrl+C and a dropped client stopping a run there with a
checkpoint; ``hosts add|list|test|remove``. Errors: test_ssh_errors.py."""
from __future__ import annotations

import contextlib
import json
import pwd
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ssh_host import ALIAS, SYSTEM_PYTHON, USER

from gui_app import __version__
from gui_app.core.event_schema import stream_problems
from gui_app.core.ssh_hosts import Host, add_host
from gui_app.identity import app_command

# Few steps of the bundled digits: the point is the transport, not the training.
SMALL = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
         "training": {"epochs": 1, "global_batch_size": 128, "seed": 1, "steps_per_call": 2}}
LONG = {**SMALL, "training": {"epochs": 200, "global_batch_size": 32, "seed": 1, "steps_per_call": 1}}
# A runs folder whose name would break if any argument reached the remote shell unquoted.
ODD_RUNS = "runs with 'quotes', \"double\" $HOME `id` ;x"


def _hosts(folder: Path, host: Host) -> Path:
    add_host(host, folder / "hosts.json")
    return folder


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]  # stdout: JSON lines and nothing else


def _private_config(folder: Path, data: dict, ssh_host) -> Path:
    """A config file the host's user cannot read: it can only arrive on stdin."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / "config.json"
    path.write_text(json.dumps(data, indent=2))
    assert ssh_host.as_user("test", "-r", str(path)).returncode == 1
    return path


@pytest.fixture(scope="module")
def remote_run(ssh_host, tmp_path_factory):
    """A run trained there with ``train --host`` into a runs folder with an odd name."""
    base = tmp_path_factory.mktemp("remote-run")
    config_dir = _hosts(base / "config", Host(ALIAS, command=ssh_host.command, runs_dir=f"~/{ODD_RUNS}"))
    config = _private_config(base / "private", SMALL, ssh_host)
    done = ssh_host.cli(config_dir, "train", str(config), "--host", ALIAS, "--events", "jsonl")
    assert done.returncode == 0, done.stderr[-3000:]
    events = _events(done.stdout)
    return events, Path(events[0]["run_dir"]), config_dir


@pytest.mark.slow
def test_train_runs_there_from_a_config_sent_on_stdin(ssh_host, remote_run):
    events, run_dir, _ = remote_run
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert stream_problems(events) == []
    assert events[-1]["status"] == "completed" and events[-1]["run_dir"] == str(run_dir)
    # The runs folder of the host entry, its odd name intact ('~' is the remote home, not ours).
    assert run_dir.parent == ssh_host.home / ODD_RUNS
    assert run_dir.stat().st_uid == pwd.getpwnam(USER).pw_uid  # written there, by the host's user
    assert (run_dir / "model.keras").is_file()
    assert json.loads((run_dir / "config.json").read_text())["model"]["name"] == "mlp"


@pytest.mark.slow
def test_evaluate_there(ssh_host, remote_run):
    _, run_dir, config_dir = remote_run
    done = ssh_host.cli(config_dir, "evaluate", str(run_dir), "--host", ALIAS, "--events", "jsonl")
    assert done.returncode == 0, done.stderr[-3000:]
    evaluation = next(e for e in _events(done.stdout) if e["type"] == "eval")
    assert evaluation["examples"] == 359 and 0 < evaluation["accuracy"] <= 1


def _temporary_folders_there() -> set[Path]:
    """mktemp's folders of the host's user (in the /tmp it shares with everyone here)."""
    uid, found = pwd.getpwnam(USER).pw_uid, set()
    for path in Path("/tmp").glob("tmp.*"):
        with contextlib.suppress(OSError):  # another's, gone meanwhile
            if path.is_dir() and path.stat().st_uid == uid:
                found.add(path)
    return found


@pytest.mark.slow
def test_export_there_comes_back_to_the_path_asked_and_loads(ssh_host, remote_run, tmp_path):
    _, run_dir, config_dir = remote_run
    output = tmp_path / "out dir" / "it's \"m\".keras"
    temporaries = _temporary_folders_there()
    done = ssh_host.cli(config_dir, "export", str(run_dir), "--host", ALIAS, "--format", "keras",
                        "--output", str(output), "--check", "32", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    result = _events(done.stdout)[-1]
    assert result["type"] == "export_result" and result["passed"]
    assert (result["path"], result["card_path"]) == (str(output), f"{output}.json")  # named here, not there
    import keras

    model = keras.saving.load_model(output)
    assert model.predict(np.zeros((2, 8, 8, 1), "float32"), verbose=0).shape == (2, 10)
    assert json.loads(Path(f"{output}.json").read_text())["format"] == "keras"
    assert sorted(p.name for p in output.parent.iterdir()) == [output.name, f"{output.name}.json"]
    assert _temporary_folders_there() <= temporaries  # its temporary folder there is gone


@pytest.mark.slow
def test_predict_serves_over_ssh(ssh_host, remote_run):
    _, run_dir, config_dir = remote_run
    requests = json.dumps({"id": 1, "test_samples": 3}) + "\n" + json.dumps({"id": 2, "images": ["~/none.png"]})
    done = ssh_host.cli(config_dir, "predict", "--serve", str(run_dir), "--host", ALIAS, input=requests + "\n")
    assert done.returncode == 0, done.stderr[-3000:]
    ready, answer, error = _events(done.stdout)
    assert ready["type"] == "ready" and ready["model"] == str(run_dir)
    assert answer["id"] == 1 and len(answer["predictions"]) == 3
    assert error["id"] == 2 and error["type"] == "error"


@pytest.mark.slow
def test_inspect_there_with_its_samples_copied_back(ssh_host, tmp_path):
    config_dir = _hosts(tmp_path / "config", Host(ALIAS, command=ssh_host.command))
    config = _private_config(tmp_path / "private", SMALL, ssh_host)
    samples = tmp_path / "new folder" / "samples.npz"
    done = ssh_host.cli(config_dir, "inspect", str(config), "--host", ALIAS, "--json", "--samples", str(samples))
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["dataset"]["train_examples"] == 1438 and summary["model"]["name"] == "mlp"
    with np.load(samples) as loaded:
        assert loaded["x"].shape[1:] == (8, 8, 1) and sorted(set(loaded["y"].tolist())) == list(range(10))


@pytest.mark.slow
def test_devices_there(ssh_host, tmp_path):
    config_dir = _hosts(tmp_path / "config", Host(ALIAS, command=ssh_host.command))
    done = ssh_host.cli(config_dir, "devices", "--json", "--host", ALIAS)
    assert done.returncode == 0, done.stderr[-3000:]
    there = subprocess.run([SYSTEM_PYTHON, "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert json.loads(done.stdout)["python"] == there  # the host's Python (the venv of the system one)


def _start(ssh_host, config_dir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(app_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env=ssh_host.env(config_dir))


def _until_step(proc: subprocess.Popen, step: int) -> None:
    for line in proc.stdout:
        event = json.loads(line)
        if event["type"] == "step" and event["step"] >= step:
            return
    pytest.fail(f"the run ended before step {step}: {proc.stderr.read()[-3000:]}")


@pytest.mark.slow
def test_ctrl_c_here_stops_the_run_there_with_a_checkpoint(ssh_host, tmp_path):
    config_dir = _hosts(tmp_path / "config", Host(ALIAS, command=ssh_host.command))
    config = _private_config(tmp_path / "private", LONG, ssh_host)
    proc = _start(ssh_host, config_dir, "train", str(config), "--host", ALIAS, "--events", "jsonl")
    _until_step(proc, 3)
    proc.send_signal(signal.SIGINT)
    rest = _events(proc.stdout.read())
    assert proc.wait(timeout=120) == 0, proc.stderr.read()[-3000:]
    assert [e["type"] for e in rest if e["type"] in ("checkpoint", "run_finished")][-2:] == [
        "checkpoint", "run_finished"]
    assert rest[-1]["status"] == "stopped" and "message" not in rest[-1]  # a user's stop, not a lost window


@pytest.mark.slow
def test_a_client_that_dies_stops_the_run_there_as_a_window_that_went_away(ssh_host, tmp_path):
    config_dir = _hosts(tmp_path / "config", Host(ALIAS, command=ssh_host.command))
    config = _private_config(tmp_path / "private", LONG, ssh_host)
    proc = _start(ssh_host, config_dir, "train", str(config), "--host", ALIAS, "--events", "jsonl")
    _until_step(proc, 3)
    proc.kill()  # no goodbye: its ssh (still writing to our pipe) sees its input end
    rest = _events(proc.stdout.read())  # to the end: ssh exits when the command there does
    proc.wait()
    assert rest[-1]["type"] == "run_finished" and rest[-1]["status"] == "stopped"
    assert rest[-1]["message"] == "the window went away"
    assert (Path(rest[-1]["run_dir"]) / "checkpoints").is_dir()


@pytest.mark.slow
def test_hosts_add_list_test_and_remove(ssh_host, tmp_path):
    config_dir = tmp_path / "config"
    added = ssh_host.cli(config_dir, "hosts", "add", ALIAS, "--command", ssh_host.command, "--runs-dir", "/data r")
    assert (added.returncode, added.stdout) == (0, f"added {ALIAS}\n")
    listed = ssh_host.cli(config_dir, "hosts", "list", "--json")
    assert json.loads(listed.stdout) == [{"name": ALIAS, "port": None, "command": ssh_host.command,
                                          "runs_dir": "/data r"}]
    tested = ssh_host.cli(config_dir, "hosts", "test", ALIAS)
    assert tested.returncode == 0, tested.stderr[-3000:]
    first, *devices = tested.stdout.splitlines()
    assert first == f"{ALIAS}: replica-studio {__version__} ({ssh_host.command}), runs in /data r"
    assert any(line.startswith("CPU:0") for line in devices)
    tested = ssh_host.cli(config_dir, "hosts", "test", ALIAS, "--json")
    report = json.loads(tested.stdout)
    assert report["version"] == __version__ and report["devices"]["cpu"]["name"] == "CPU:0"
    from gui_app.core import ssh

    with pytest.MonkeyPatch.context() as env:  # as the app's processes see it
        env.setenv(ssh.SSH_CONFIG_ENV, str(ssh_host.client_config))
        name = ssh.connection_name(Host(ALIAS))
    sockets = [p for p in ssh_host.runtime_dir.rglob("*") if p.is_socket() and p.name == name]
    assert sockets  # the alias's shared connection
    removed = ssh_host.cli(config_dir, "hosts", "remove", ALIAS)
    assert (removed.returncode, removed.stdout) == (0, f"removed {ALIAS}\n")
    assert json.loads(ssh_host.cli(config_dir, "hosts", "list", "--json").stdout) == []
    assert not [p for p in sockets if p.exists()]  # removing a host ends its shared connection


def test_submit_on_a_login_node_prints_the_job_id_and_the_run_directory_there(ssh_host, tmp_path):
    """``submit --slurm --host LOGIN``: the config on stdin, sbatch there (a fake one on the user's
    PATH that says what it was given), the job id and the run directory back here."""
    fake = ('mkdir -p "$HOME/slurm-bin" && printf \'#!/bin/sh\\necho "$*" > "$HOME/sbatch-args"\\necho 77\\n\' '
            '> "$HOME/slurm-bin/sbatch" && chmod +x "$HOME/slurm-bin/sbatch" && '
            'printf \'#!/bin/sh\\nPATH="$HOME/slurm-bin:$PATH" exec "$HOME/venv/bin/python" -m gui_app "$@"\\n\' '
            '> "$HOME/bin/login-replica-studio" && chmod +x "$HOME/bin/login-replica-studio"')
    assert ssh_host.as_user("sh", "-c", fake).returncode == 0
    config_dir = _hosts(tmp_path / "config", Host(ALIAS, command=f"{ssh_host.home}/bin/login-replica-studio",
                                                   runs_dir=f"~/{ODD_RUNS}"))
    config = _private_config(tmp_path / "private", {**SMALL, "strategy": {"name": "multi_worker_mirrored",
                                                                          "workers": 2}}, ssh_host)
    done = ssh_host.cli(config_dir, "submit", str(config), "--slurm", "--partition", "gpu", "--host", ALIAS)
    assert done.returncode == 0, done.stderr[-3000:]
    job_id, run_dir = done.stdout.splitlines()
    assert job_id == "77" and Path(run_dir).parent == ssh_host.home / ODD_RUNS
    assert (ssh_host.home / "sbatch-args").read_text() == f"--parsable {run_dir}/job.sbatch\n"
    assert "#SBATCH --partition=gpu" in (Path(run_dir) / "job.sbatch").read_text()
