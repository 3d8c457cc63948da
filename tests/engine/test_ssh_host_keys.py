"""Every alias's own host key is checked, whatever connection another alias of the same address
opened before (a real sshd, tests/ssh_host.py): the shared connections are named by alias and by
what verifies the key (gui_app/core/ssh.py, connection_name). And files travel without SFTP."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ssh_host import HOST_IP

from gui_app import __version__

pytestmark = pytest.mark.slow

SMALL = {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
         "training": {"epochs": 1, "global_batch_size": 128, "seed": 1, "steps_per_call": 2}}


def _other_known_hosts(tmp_path: Path) -> Path:
    """A known_hosts that records another key for the host's address (as after a reinstall, or
    a man in the middle)."""
    key = tmp_path / "other-host-key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30)
    public = key.with_suffix(".pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"{HOST_IP} {public[0]} {public[1]}\n")
    return known


def _refused(done: subprocess.CompletedProcess, alias: str, known: Path, command: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert done.stdout == ""
    assert done.stderr.startswith(f"replica-studio {command}: {alias}: the host key changed since it was recorded "
                                  f"({known}:1)"), done.stderr
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("first", ["verified", "changed"])
def test_an_alias_whose_key_changed_is_refused_beside_a_verified_alias_of_the_same_address(ssh_host, tmp_path,
                                                                                            first):
    known = _other_known_hosts(tmp_path)
    good = ssh_host.alias(f"rs-key-good-{first}")  # the same address, port and user as `bad`
    bad = ssh_host.alias(f"rs-key-bad-{first}", UserKnownHostsFile=str(known))
    config_dir = tmp_path / "config"
    for name in (good, bad):
        assert ssh_host.cli(config_dir, "hosts", "add", name, "--command", ssh_host.command).returncode == 0
    order = [good, bad, good, bad] if first == "verified" else [bad, good, bad]
    for alias in order:
        done = ssh_host.cli(config_dir, "hosts", "test", alias, "--json")
        if alias == good:
            assert done.returncode == 0, done.stderr[-2000:]
            assert json.loads(done.stdout)["version"] == __version__
        else:
            _refused(done, bad, known, "hosts test")
    # Every command, not only the test: the run list there, and a run.
    _refused(ssh_host.cli(config_dir, "runs", "--host", bad), bad, known, "runs")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SMALL))
    done = ssh_host.cli(config_dir, "train", str(config), "--host", bad, "--detach")
    assert done.returncode == 2 and "the host key changed since it was recorded" in done.stderr
    assert ssh_host.cli(config_dir, "runs", "--host", good).returncode == 0
    assert known.read_text().count("\n") == 1  # never rewritten: the changed key is not accepted


def test_reconnect_ends_the_shared_connection_and_connects_anew(ssh_host, tmp_path):
    alias = ssh_host.alias("rs-key-reconnect")
    config_dir = tmp_path / "config"
    assert ssh_host.cli(config_dir, "hosts", "add", alias, "--command", ssh_host.command).returncode == 0
    assert ssh_host.cli(config_dir, "hosts", "test", alias).returncode == 0
    before = _masters(ssh_host)
    done = ssh_host.cli(config_dir, "hosts", "reconnect", alias)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"{alias}: 1 shared connection ended; connecting anew\n{alias}: replica-studio ")
    after = _masters(ssh_host)
    renewed = [p for p in after if p in before and after[p] != before[p]]
    assert len(renewed) == 1  # this alias's master is a new process; the others' are untouched
    assert {p: i for p, i in after.items() if p not in renewed} == {p: i for p, i in before.items() if p not in renewed}


def _masters(ssh_host) -> dict[Path, int]:
    """The shared connections' sockets and their master's process id (``ssh -O check``: a socket
    file's inode can be reused by the next one, a running master's id cannot)."""
    found = {}
    for sock in ssh_host.runtime_dir.rglob("*"):
        if sock.is_socket():
            check = subprocess.run(["ssh", "-F", str(ssh_host.client_config), "-o", f"ControlPath={sock}", "-O",
                                    "check", "unused"], capture_output=True, text=True, timeout=30)
            pid = re.search(r"pid=(\d+)", check.stderr)
            if pid:
                found[sock] = int(pid.group(1))
    return found


def test_files_come_back_from_a_host_without_sftp(ssh_host, tmp_path):
    """OpenSSH 9's scp speaks SFTP; a server with no ``Subsystem sftp`` refused every copy (the
    window's dataset check failed on its sample images). The copies are a tar stream now."""
    alias = ssh_host.own_alias("rs-no-sftp", sftp=False)
    assert subprocess.run(["sftp", "-F", str(ssh_host.client_config), "-b", "/dev/null", alias],
                          capture_output=True, timeout=60).returncode != 0  # the server really has no SFTP
    config_dir = tmp_path / "config"
    assert ssh_host.cli(config_dir, "hosts", "add", alias, "--command", ssh_host.command).returncode == 0
    config = tmp_path / "config.json"
    config.write_text(json.dumps(SMALL))
    samples = tmp_path / "here" / "samples.npz"
    done = ssh_host.cli(config_dir, "inspect", str(config), "--host", alias, "--json", "--samples", str(samples))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["dataset"]["train_examples"] == 1438
    with np.load(samples) as loaded:
        assert loaded["x"].shape[1:] == (8, 8, 1)
    assert sorted(p.name for p in samples.parent.iterdir()) == ["samples.npz"]  # no staging left behind
