"""The hosts file and the ssh command builder (gui_app/core/ssh_hosts.py, gui_app/core/ssh.py), without
a network: the remote commands run in a local ``sh``, ssh's failures are OpenSSH 9.2's own words.
The same against a real sshd: tests/engine/test_ssh_hosts.py and test_ssh_errors.py."""
from __future__ import annotations

import json
import os
import select
import shutil
import stat
import subprocess
import tempfile
import warnings
from pathlib import Path

import pytest

from gui_app.core import ssh, ssh_hosts
from gui_app.core.ssh_hosts import Host, HostsFileError

# ---- the hosts file ---------------------------------------------------------------------------


def test_hosts_are_kept_in_a_versioned_file_in_the_config_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLICA_STUDIO_CONFIG_DIR", str(tmp_path / "config"))
    assert ssh_hosts.load_hosts() == {}
    assert ssh_hosts.add_host(Host("gpu1")) is False
    assert ssh_hosts.add_host(Host("me@gpu2", port=2222, command="conda run -n tf replica-studio",
                               runs_dir="/data/r")) is False
    assert ssh_hosts.add_host(Host("gpu1", command="~/venv/bin/replica-studio")) is True  # replaced in place
    data = json.loads((tmp_path / "config" / "hosts.json").read_text())
    assert data == {"schema_version": 1, "hosts": [
        {"name": "gpu1", "port": None, "command": "~/venv/bin/replica-studio", "runs_dir": None},
        {"name": "me@gpu2", "port": 2222, "command": "conda run -n tf replica-studio", "runs_dir": "/data/r"}]}
    assert ssh_hosts.find_host("me@gpu2").port == 2222
    assert ssh_hosts.find_host("other") == Host("other")  # not stored: ssh's own idea of it, with the defaults
    assert ssh_hosts.remove_host("gpu1").command == "~/venv/bin/replica-studio"
    assert list(ssh_hosts.load_hosts()) == ["me@gpu2"]
    with pytest.raises(HostsFileError, match="gpu1: no such host"):
        ssh_hosts.remove_host("gpu1")


@pytest.mark.parametrize("text, message", [
    ("{not json", "cannot read the hosts"),
    ('{"schema_version": 2, "hosts": []}', "schema_version 2; this release reads 1"),
    ('{"schema_version": 1, "hosts": [{"name": "a b"}]}', "a bad host entry"),
    ('[]', "not a hosts file"),
])
def test_an_unreadable_hosts_file_is_named_and_left_as_it_was(tmp_path, text, message):
    path = tmp_path / "hosts.json"
    path.write_text(text)
    with pytest.raises(HostsFileError, match=message) as caught:
        ssh_hosts.add_host(Host("gpu1"), path)
    assert str(path) in str(caught.value)
    assert path.read_text() == text


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "-oProxyCommand=touch /tmp/x"}, "does not start with '-'"),
    ({"name": "gpu 1"}, "has no spaces"),
    ({"name": ""}, "host: must be one non-empty line"),
    ({"name": "gpu1", "port": 0}, "port: must be 1 to 65535"),
    ({"name": "gpu1", "port": True}, "port: must be 1 to 65535"),
    ({"name": "gpu1", "command": "replica-studio\nrm -rf ~"}, "command: must be one non-empty line"),
])
def test_a_bad_host_is_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Host(**kwargs)


# ---- the command line of ssh ------------------------------------------------------------------

NASTY = ["plain", "two words", "it's", 'say "hi"', "$HOME", "`id`", "$(id)", "a;b", "*", "-x", "back\\slash",
         "new\nline", "ünï"]


def test_every_argument_reaches_the_remote_command_as_it_was():
    """The remote shell gets one string; each argument comes out of it whole (here the shell is
    a local sh and the "app" prints its arguments, one per line, NUL-separated)."""
    host = Host("gpu1", command="printf '%s\\0'")
    done = subprocess.run(["sh", "-c", ssh.shell_command(host, NASTY)], capture_output=True, timeout=10)
    assert done.stdout.decode().split("\0")[:-1] == NASTY


def test_a_leading_tilde_is_the_home_there(tmp_path):
    host = Host("gpu1", command="printf '%s\\0'")
    done = subprocess.run(["sh", "-c", ssh.shell_command(host, ["~/runs 'x'", "~", "a~/b", "~root/x"])],
                          capture_output=True, timeout=10, env={"HOME": str(tmp_path), "PATH": os.environ["PATH"]})
    assert done.stdout.decode().split("\0")[:-1] == [f"{tmp_path}/runs 'x'", str(tmp_path), "a~/b", "~root/x"]


def test_a_file_argument_is_the_first_line_of_stdin_and_the_rest_stays_for_the_command(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{\n  "dataset": {"name": "digits", "path": "it\'s $HOME/`x`"},\n  "model": {}\n}\n')
    host = Host("gpu1", command="sh -c 'cat \"$1\"; echo ---; cat' app")
    line = ssh.config_line(config)
    assert line.count(b"\n") == 1
    done = subprocess.run(["sh", "-c", ssh.shell_command(host, [ssh.STDIN_FILE])], input=line + b"stop\npause\n",
                          capture_output=True, timeout=10)
    there, _, rest = done.stdout.decode().partition("---\n")
    assert json.loads(there) == json.loads(config.read_text())
    assert rest == "stop\npause\n"  # control lines after the config reach the command
    assert done.returncode == 0


def test_the_remote_command_keeps_the_apps_exit_code_and_removes_its_temporary_file():
    host = Host("gpu1", command="sh -c 'echo \"$1\"; exit 3' app")
    done = subprocess.run(["sh", "-c", ssh.shell_command(host, [ssh.STDIN_FILE])], input='{"a": 1}\n',
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 3
    assert not os.path.exists(done.stdout.strip())


def test_a_command_that_ends_with_its_input_keeps_its_exit_code_and_dies_when_stdin_ends(tmp_path):
    """A cluster worker there: its exit code is the shell's (128+N when signal N killed it), and
    the end of stdin (a dropped connection) kills it with its process group."""
    def started(command: str) -> subprocess.Popen:
        script = ssh.shell_command(Host("gpu1", command=command), [ssh.STDIN_FILE], ends_with_input=True)
        proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                start_new_session=True)  # as sshd makes the shell a session leader
        proc.stdin.write('{"a": 1}\n')
        proc.stdin.flush()
        return proc

    ends = started("sh -c 'cat \"$1\"; exit 3' app")
    assert ends.stdout.readline() == '{"a": 1}\n' and ends.wait(timeout=10) == 3  # stdin still open
    killed = started("sh -c 'echo $$; kill -KILL $$' app")
    assert killed.wait(timeout=10) == 128 + 9
    forever = started("sh -c 'echo $$; exec sleep 600' app")
    worker = os.pidfd_open(int(forever.stdout.readline()))  # readable once that process has ended
    try:
        assert select.select([worker], [], [], 0.5)[0] == []  # alive while stdin is open
        forever.stdin.close()  # the connection ends
        assert forever.wait(timeout=10) == -9
        assert select.select([worker], [], [], 10)[0] == [worker]
    finally:
        os.close(worker)


def test_a_config_that_is_not_json_fails_here_with_the_engines_message(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(ValueError, match="config: not valid JSON"):
        ssh.config_line(bad)
    with pytest.raises(ValueError, match="config: cannot read"):
        ssh.config_line(tmp_path / "missing.json")


@pytest.fixture
def short_path():
    """A folder with a short path: the sockets' folder must leave room for their names (and
    pytest's tmp_path is long)."""
    path = Path(tempfile.mkdtemp(prefix="rs-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_ssh_runs_in_batch_mode_over_a_shared_connection_in_a_private_folder(short_path, monkeypatch):
    tmp_path = short_path
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    config = tmp_path / "my ssh config"
    config.write_text("Host *\n    GlobalKnownHostsFile /dev/null\n")
    monkeypatch.setenv(ssh.SSH_CONFIG_ENV, str(config))
    argv = ssh.remote_argv(Host("me@gpu1", port=2222), ["devices", "--json"])
    assert argv[:3] == ["ssh", "-F", str(config)]
    assert argv[-3:] == ["--", "me@gpu1", "replica-studio devices --json"]
    options = dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv[:-3]) if word == "-o")
    assert options["BatchMode"] == "yes" and options["ControlMaster"] == "auto" and options["Port"] == "2222"
    assert options["ControlPersist"] == ssh.PERSIST
    folder = tmp_path / "run" / "replica-studio" / "ssh"
    assert options["ControlPath"] == f"{folder}/{ssh.connection_name(Host('me@gpu1', port=2222))}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert "StrictHostKeyChecking" not in options  # an unknown host key is refused, never accepted


def test_the_socket_folder_moves_where_the_path_is_short_enough(short_path, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # too long
    monkeypatch.setenv("XDG_CACHE_HOME", str(short_path / "cache"))
    assert ssh.control_dir() == short_path / "cache" / "replica-studio" / "ssh"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(short_path))  # the last resort: the temp folder
    folder = ssh.control_dir()
    assert folder == short_path / f"replica-studio-{os.getuid()}" / "ssh"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()


def _ssh_config(path: Path, known: dict[str, Path]) -> Path:
    """A client config: aliases of one address, port and user, each with its known_hosts file."""
    path.write_text("".join(f"Host {alias}\n    HostName 10.0.0.2\n    User me\n    UserKnownHostsFile {file}\n"
                            for alias, file in known.items()) + "Host *\n    GlobalKnownHostsFile /dev/null\n")
    return path


def test_a_shared_connection_is_named_by_alias_and_by_what_verifies_its_host_key(short_path, monkeypatch):
    """ssh's own %C names a connection by address, port and user: a second alias of the same
    address with another known_hosts rode on the first one's verified connection."""
    first, second = short_path / "known_a", short_path / "known_b"
    first.write_text("10.0.0.2 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOdN7Xq1\n")
    second.write_text("10.0.0.2 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBbBbBbB\n")
    monkeypatch.setenv(ssh.SSH_CONFIG_ENV, str(_ssh_config(short_path / "config", {"a": first, "b": second,
                                                                                    "a2": first})))
    names = {alias: ssh.connection_name(Host(alias)) for alias in ("a", "b", "a2")}
    assert all(name and len(name) == 40 for name in names.values())
    assert len(set(names.values())) == 3  # another alias is another connection, even with the same file
    assert ssh.connection_name(Host("a")) == names["a"]  # the same alias reuses its own
    assert ssh.connection_name(Host("a", port=2222)) != names["a"]
    first.write_text(first.read_text() + "10.0.0.9 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICcCcCcC\n")
    changed = ssh.connection_name(Host("a"))
    assert changed != names["a"] and changed[:9] == names["a"][:9]  # a changed known_hosts: checked anew
    monkeypatch.setenv(ssh.SSH_CONFIG_ENV, str(short_path / "no such config"))
    assert ssh.connection_name(Host("a")) is None  # ssh -G refuses: no sharing; ssh itself then says why
    argv = ssh.ssh_argv(Host("a"), "true")
    assert "ControlMaster=no" in argv and "ControlPath=none" in argv


def test_close_connection_without_a_shared_connection_ends_none(short_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short_path))
    assert ssh.close_connection(Host("me@gpu1")) == 0


def test_no_warning_without_a_runtime_folder(short_path, monkeypatch):
    """Root shells, cron and containers have no XDG_RUNTIME_DIR: platformdirs warned on stderr."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(short_path / "cache"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ssh.control_dir() == short_path / "cache" / "replica-studio" / "ssh"


def test_releases_work_together_when_they_share_major_and_minor():
    assert ssh.compatible("0.1.7", "0.1.0")
    assert not ssh.compatible("0.2.0", "0.1.0")
    assert not ssh.compatible("1.1.0", "0.1.0")


# ---- ssh's failures, one line each (stderr as OpenSSH 9.2 writes it) --------------------------

CHANGED = """\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:MNcHRDHqU4UyRg9dKOGyuyza1dRSTPzpF4q48E1poBQ.
Please contact your system administrator.
Add correct host key in /home/me/.ssh/known_hosts to get rid of this message.
Offending ED25519 key in /home/me/.ssh/known_hosts:7
  remove with:
  ssh-keygen -f "/home/me/.ssh/known_hosts" -R "10.0.0.2"
Host key for 10.0.0.2 has changed and you have requested strict checking.
Host key verification failed.
"""


@pytest.mark.parametrize("stderr, expected", [
    (CHANGED, ["host key changed", "/home/me/.ssh/known_hosts:7",
               'ssh-keygen -f "/home/me/.ssh/known_hosts" -R "10.0.0.2"', "ssh -p 2222 gpu1"]),
    ("Host key verification failed.\n", ["host key is not known", "never accepted silently", "ssh -p 2222 gpu1"]),
    ("me@10.0.0.2: Permission denied (publickey,password).\n", ["password", "ssh-copy-id -p 2222 gpu1"]),
    ("ssh: Could not resolve hostname gpu1: Name or service not known\n", ["unknown host", "Could not resolve"]),
    ("ssh: connect to host 10.0.0.2 port 2222: Connection refused\n", ["unreachable", "Connection refused"]),
    ("ssh: connect to host 10.0.0.2 port 2222: Connection timed out\n", ["unreachable", "timed out"]),
])
def test_each_ssh_failure_is_one_line_that_says_what_to_do(stderr, expected):
    line = ssh.explain_failure(Host("gpu1", port=2222), stderr)
    assert "\n" not in line and line.startswith("gpu1: ")
    for text in expected:
        assert text in line, line
