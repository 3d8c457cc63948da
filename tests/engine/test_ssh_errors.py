"""What goes wrong with a real SSH host (tests/ssh_host.py) is one line on stderr and exit 2: a
stopped daemon, a key the host refuses, an unknown and a changed host key, a remote command that
does not exist, an older release there, a login that writes to stdout, an unwritable runs folder,
a full disk, a connection lost mid-run. Arguments with spaces and quotes arrive intact. (Not
here: a name that does not resolve needs DNS; its line is tested on OpenSSH's wording in
tests/core/test_hosts.py.)"""
from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import children
from ssh_host import ALIAS, HOST_IP, USER

from gui_app import __version__
from gui_app.core.event_schema import stream_problems
from gui_app.core.ssh_hosts import Host, add_host
from gui_app.identity import app_command

CONFIG = {"dataset": {"name": "digits"}, "model": {"name": "mlp"}, "training": {"epochs": 1, "seed": 1}}


def _one_line(done: subprocess.CompletedProcess, command: str = "devices") -> str:
    """The error: exit 2, nothing on stdout, one line on stderr (returned without its prefix)."""
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"replica-studio {command}: "), lines[0]
    return lines[0].removeprefix(f"replica-studio {command}: ")


def _with_host(tmp_path: Path, host: Host) -> Path:
    add_host(host, tmp_path / "config" / "hosts.json")
    return tmp_path / "config"


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)
    return path


def test_a_stopped_daemon_is_unreachable(ssh_host, tmp_path):
    alias = ssh_host.own_alias("rs-stopped")
    ssh_host.daemons[-1].stop()
    config_dir = _with_host(tmp_path, Host(alias, command=ssh_host.command))
    line = _one_line(ssh_host.cli(config_dir, "devices", "--host", alias))
    assert line.startswith(f"{alias}: unreachable (") and "Connection refused" in line
    # A run says it in its events too, as the engine ends a run it refuses.
    done = ssh_host.cli(config_dir, "train", str(_config(tmp_path)), "--host", alias, "--events", "jsonl")
    events = [json.loads(text) for text in done.stdout.splitlines()]
    assert [e["type"] for e in events] == ["error", "run_finished"] and stream_problems(events) == []
    assert events[-1]["message"] == line and events[-1]["status"] == "failed"
    assert done.returncode == 2 and done.stderr == f"replica-studio train: {line}\n"


def test_a_key_the_host_refuses_says_how_to_set_up_key_login(ssh_host, tmp_path):
    alias = ssh_host.own_alias("rs-wrong-key", IdentityFile=str(_keygen(tmp_path / "not-authorized")))
    line = _one_line(ssh_host.cli(tmp_path, "devices", "--host", alias))
    assert "Permission denied (publickey)" in line and line.endswith(f"ssh-copy-id {alias}")


def test_an_unknown_host_key_is_never_accepted(ssh_host, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    alias = ssh_host.own_alias("rs-unknown-key", UserKnownHostsFile=str(empty))
    line = _one_line(ssh_host.cli(tmp_path, "devices", "--host", alias))
    assert "host key is not known here and is never accepted silently" in line
    assert f"ssh -F {ssh_host.client_config} {alias}" in line  # how to look at it and accept it
    assert empty.read_text() == ""


def test_a_changed_host_key_names_the_known_hosts_line(ssh_host, tmp_path):
    other = _keygen(tmp_path / "other-host-key").with_suffix(".pub").read_text().split()
    known = tmp_path / "known_hosts"
    port = 2200 + len(ssh_host.daemons)
    known.write_text(f"# an old entry\n[{HOST_IP}]:{port} {other[0]} {other[1]}\n")
    alias = ssh_host.own_alias("rs-changed-key", UserKnownHostsFile=str(known))
    line = _one_line(ssh_host.cli(tmp_path, "devices", "--host", alias))
    assert line.startswith(f"{alias}: the host key changed since it was recorded ({known}:2)")
    assert f'ssh-keygen -f "{known}" -R "[{HOST_IP}]:{port}"' in line


def test_a_remote_command_that_does_not_exist_says_what_ran_and_what_was_found(ssh_host, tmp_path):
    config_dir = _with_host(tmp_path, Host(ALIAS, command="~/no-such-folder/replica-studio"))
    line = _one_line(ssh_host.cli(config_dir, "devices", "--host", ALIAS))
    assert line.startswith(f"{ALIAS}: the app is not there: '~/no-such-folder/replica-studio --version' ran, and ")
    assert f"{ssh_host.home}/no-such-folder/replica-studio: not found" in line
    assert f"replica-studio hosts add {ALIAS} --command" in line


def test_an_older_release_there_is_refused(ssh_host, tmp_path):
    config_dir = _with_host(tmp_path, Host(ALIAS, command=ssh_host.old_command))
    line = _one_line(ssh_host.cli(config_dir, "devices", "--host", ALIAS))
    assert line.startswith(f"{ALIAS}: replica-studio 0.0.1 there ('{ssh_host.old_command} --version') "
                           f"cannot work with {__version__} here")


def test_a_host_that_writes_to_stdout_first_is_refused(ssh_host, tmp_path):
    config_dir = _with_host(tmp_path, Host(ALIAS, command="~/bin/noisy-replica-studio"))
    line = _one_line(ssh_host.cli(config_dir, "devices", "--host", ALIAS))
    assert line.startswith(f"{ALIAS}: something there writes to stdout before the app does ('Welcome to the GPU")


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIG))
    return path


def test_an_unwritable_runs_folder_there(ssh_host, tmp_path):
    locked = ssh_host.base / "locked runs"
    locked.mkdir(mode=0o755, exist_ok=True)  # root's: the host's user may look, not write
    config_dir = _with_host(tmp_path, Host(ALIAS, command=ssh_host.command, runs_dir=str(locked)))
    done = ssh_host.cli(config_dir, "train", str(_config(tmp_path)), "--host", ALIAS, "--events", "none")
    line = _one_line(done, "train")
    assert line == f"--runs-dir: cannot write in {locked}: Permission denied"


@pytest.fixture
def small_disk(ssh_host):
    """A 1 MiB tmpfs of the host's user: room for a run directory, not for its checkpoint."""
    folder = ssh_host.base / "small disk"
    folder.mkdir(exist_ok=True)
    user = pwd.getpwnam(USER)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=1m,mode=0755,uid={user.pw_uid},gid={user.pw_gid}",
                              "tmpfs", str(folder)], capture_output=True, text=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, timeout=30)
        folder.rmdir()


@pytest.mark.slow
def test_a_full_disk_there(ssh_host, tmp_path, small_disk):
    runs = small_disk / "runs"
    config_dir = _with_host(tmp_path, Host(ALIAS, command=ssh_host.command, runs_dir=str(runs)))
    done = ssh_host.cli(config_dir, "train", str(_config(tmp_path)), "--host", ALIAS, "--events", "none")
    line = _one_line(done, "train")
    assert line.startswith(f"the disk holding {runs}/") and "MiB free but one checkpoint and the saved model" in line
    assert list(runs.iterdir()) == []  # the refused run left nothing behind


def test_arguments_with_spaces_and_quotes_arrive_intact(ssh_host, tmp_path):
    odd = "/nowhere/it's \"a\" $HOME `id` ;ls *"
    config_dir = _with_host(tmp_path, Host(ALIAS, command=ssh_host.command))
    line = _one_line(ssh_host.cli(config_dir, "resume", odd, "--host", ALIAS, "--events", "none"), "resume")
    assert line == f"run_dir: {odd} is not a run directory (no config.json)"


@pytest.mark.slow
def test_a_connection_lost_mid_run_is_one_line(ssh_host, tmp_path):
    alias = ssh_host.own_alias("rs-lost")
    daemon = ssh_host.daemons[-1]
    config = tmp_path / "long.json"
    config.write_text(json.dumps({**CONFIG, "training": {"epochs": 200, "global_batch_size": 32, "steps_per_call": 1}}))
    proc = subprocess.Popen(app_command("train", str(config), "--host", alias, "--events", "jsonl"), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=ssh_host.env(_with_host(tmp_path, Host(alias, command=ssh_host.command))))
    next(line for line in proc.stdout if json.loads(line)["type"] == "step")
    # The connection's sshd processes go as with the network: the session first, so that it cannot
    # pass on its child's exit status before the client sees the connection end (seen under load).
    for session in children(daemon.proc.pid):
        for pid in [session, *children(session)]:
            os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err.splitlines()[-1] == (f"replica-studio train: {alias}: the connection ended (ssh exit 255); "
                                    "the run there stops with a checkpoint: resume it with --host")
