"""A real SSH host for the tests: Debian's ``sshd`` in a network namespace, with a user of its own.

The session fixture :func:`ssh_host` makes a network namespace joined to this machine by a veth
pair on a bridge (a LAN: 10.213.79.1 here, 10.213.79.2 there), starts ``sshd`` inside it on that
address with its own host key and config (``UsePAM no``, keys only), creates a user with its own
home and makes the app runnable by it: a Python under root's home (pyenv) is not readable by
another user, so the user gets a venv of the system ``/usr/bin/python3`` whose ``.pth`` file adds
this test environment's site-packages and the repository, and a wrapper script in its home is the
remote command. The client side is a config file of the test's own (``ssh -F``, through
``$REPLICA_STUDIO_SSH_CONFIG``) with the key, the known_hosts file and the aliases: OpenSSH reads
``~/.ssh`` from the passwd home, not ``$HOME``.

A test that needs two machines asks for :func:`second_ssh_host` (:meth:`SshHost.second_host`):
the same again in a namespace of its own on the same bridge (10.213.79.3, its own user and home,
alias ``rs-test-host2`` in the same client config), checked to reach the first one both ways.

Everything is removed at the end (the shared connections, the daemons, the user and its
processes, the veth pair, the namespace). Skipped with the reason where it cannot be made: not
Linux, not root, no ``ip``, no ``sshd``, no system Python of this Python's version.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from gui_app.identity import app_command, app_env

NS, VETH, PEER = "rs-ssh-host1", "rs-ssh-h1a", "rs-ssh-h1b"
NS2, VETH2, PEER2 = "rs-ssh-host2", "rs-ssh-h2a", "rs-ssh-h2b"  # the second host's
BRIDGE = "rs-ssh-lan"  # the LAN of this machine and the hosts
CLIENT_IP, HOST_IP, HOST2_IP = "10.213.79.1", "10.213.79.2", "10.213.79.3"
USER, USER2 = "rs-ssh-host1", "rs-ssh-host2"
ALIAS = "rs-test-host"  # the alias that works: the right key, the host key known
ALIAS2 = "rs-test-host2"  # the second host's
SSHD = "/usr/sbin/sshd"
SYSTEM_PYTHON = "/usr/bin/python3"
REPO = Path(__file__).resolve().parents[1]

_SSHD_CONFIG = """\
ListenAddress {address}:{port}
HostKey {host_key}
PidFile none
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PermitRootLogin no
AllowUsers {user}
StrictModes yes
PrintMotd no
"""
_SFTP = "Subsystem sftp internal-sftp\n"

# The wrappers a host entry names as its remote command (in ~/bin): the app; one that answers
# --version as an older release would; one that greets on stdout first, as some login scripts do.
_WRAPPER = '#!/bin/sh\nexec "$HOME/venv/bin/python" -m gui_app "$@"\n'
_OLD_WRAPPER = ('#!/bin/sh\nif [ "$1" = --version ]; then echo "replica-studio 0.0.1"; exit 0; fi\n'
                'exec "$HOME/venv/bin/python" -m gui_app "$@"\n')
_NOISY_WRAPPER = '#!/bin/sh\necho "Welcome to the GPU cluster"\nexec "$HOME/venv/bin/python" -m gui_app "$@"\n'
WRAPPERS = {"replica-studio": _WRAPPER, "old-replica-studio": _OLD_WRAPPER, "noisy-replica-studio": _NOISY_WRAPPER}


def _run(*cmd: str, ns: str | None = None, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    argv = ["ip", "netns", "exec", ns, *cmd] if ns else list(cmd)
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60, **kwargs)


class Daemon:
    """One ``sshd -D -e`` in the network namespace; ready once it says it listens (its log is kept)."""

    def __init__(self, config: Path, ns: str = NS):
        # nsenter, not `ip netns exec`: that one also makes a mount namespace of its own, which
        # (with / private, as here) would not see a tmpfs a test mounts later.
        self.proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", SSHD, "-D", "-e", "-f", str(config)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.log: list[str] = []
        self._listening = threading.Event()
        threading.Thread(target=self._read_log, daemon=True).start()
        if not self._listening.wait(30):
            self.stop()
            raise RuntimeError("sshd did not start: " + " | ".join(self.log[-5:]))

    def _read_log(self) -> None:
        for line in self.proc.stderr:
            self.log.append(line.rstrip())
            if "Server listening on" in line:
                self._listening.set()
        self._listening.set()  # it ended: stop waiting (the caller sees no listening line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@dataclass
class SshHost:
    """The host, and the client side that reaches it (``env`` for the app's processes)."""

    base: Path  # private folder of the test: keys, configs, the shared connections' sockets
    home: Path  # the user's home
    host_key: Path  # the daemon's host key
    command: str  # the remote command: the wrapper in the user's home
    old_command: str  # a wrapper that says it is an older release
    client_key: Path
    known_hosts: Path
    aliases: dict[str, dict[str, str]] = field(default_factory=dict)  # the client config's (both hosts')
    daemons: list[Daemon] = field(default_factory=list)
    user: str = USER
    ip: str = HOST_IP
    ns: str = NS
    second: SshHost | None = None  # the second host, once a test asked for it

    @property
    def client_config(self) -> Path:
        return self.base / "client" / "config"

    @property
    def runtime_dir(self) -> Path:  # XDG_RUNTIME_DIR of the app: the shared connections live there
        return self.base / "run"

    def env(self, config_dir: Path | str, **extra: str) -> dict[str, str]:
        """The environment of a ``replica-studio`` process that reaches this host: its own ssh
        client config, its own folder of shared connections, and ``config_dir`` for hosts.json."""
        return app_env({"REPLICA_STUDIO_SSH_CONFIG": str(self.client_config),
                        "XDG_RUNTIME_DIR": str(self.runtime_dir),
                        "REPLICA_STUDIO_CONFIG_DIR": str(config_dir), "TF_CPP_MIN_LOG_LEVEL": "2", **extra})

    def cli(self, config_dir: Path | str, *args: str, input: str | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """``replica-studio ARGS`` here (stdout and stderr captured as text)."""
        return subprocess.run(app_command(*args), input=input, capture_output=True, text=True, timeout=timeout,
                              env=self.env(config_dir), stdin=None if input is not None else subprocess.DEVNULL)

    def alias(self, name: str, **options: str) -> str:
        """A new ``Host`` block: the working alias with ``options`` changed (``Port``,
        ``IdentityFile``, ``UserKnownHostsFile``...). The app shares a connection per alias and
        per what verifies its host key (gui_app/core/ssh.py), so another alias of the same
        address is checked on its own."""
        self.aliases[name] = {"HostName": self.ip, "User": self.user, "IdentityFile": str(self.client_key),
                              "UserKnownHostsFile": str(self.known_hosts), **options}
        blocks = [f"Host {alias}\n" + "".join(f"    {k} {v}\n" for k, v in opts.items())
                  for alias, opts in self.aliases.items()]
        blocks.append("Host *\n    IdentitiesOnly yes\n    IdentityAgent none\n"
                      "    GlobalKnownHostsFile /dev/null\n    ConnectTimeout 10\n")
        self.client_config.write_text("\n".join(blocks))
        return name

    def own_alias(self, name: str, sftp: bool = True, **options: str) -> str:
        """:meth:`alias` on a daemon of its own port (``sftp``: with the SFTP subsystem), for a
        test that stops it or needs a server configured otherwise."""
        port = 2200 + len(self.daemons)
        self.daemon(port, sftp)
        return self.alias(name, Port=str(port), **options)

    def daemon(self, port: int = 22, sftp: bool = True) -> Daemon:
        """Another ``sshd`` on ``port`` (the session's own listens on 22)."""
        config = self.base / "sshd" / f"sshd_config.{self.ns}.{port}"
        config.write_text(_SSHD_CONFIG.format(address=self.ip, port=port, host_key=self.host_key, user=self.user)
                          + (_SFTP if sftp else ""))
        daemon = Daemon(config, self.ns)
        self.daemons.append(daemon)
        return daemon

    def as_user(self, *cmd: str) -> subprocess.CompletedProcess:
        """Run a command as the host's user (outside ssh), e.g. to prepare its files."""
        return _run("setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups", *cmd, check=False,
                    env={"HOME": str(self.home), "PATH": "/usr/bin:/bin"})

    def second_host(self) -> SshHost:
        """Another machine on the same LAN (made once): its own namespace, user, home and daemon,
        reached as ``rs-test-host2`` with the same key and client config."""
        if self.second is None:
            _site(NS2, VETH2, PEER2, HOST2_IP)
            home = self.base / "home2"
            _user(home, self.client_key.with_suffix(".pub").read_text(), USER2)
            host_public = self.host_key.with_suffix(".pub").read_text().split()
            with self.known_hosts.open("a") as known:
                known.write(f"{HOST2_IP} {host_public[0]} {host_public[1]}\n")
            second = SshHost(self.base, home, self.host_key, self.command, self.old_command, self.client_key,
                             self.known_hosts, aliases=self.aliases, user=USER2, ip=HOST2_IP, ns=NS2)
            self.second = second  # removed at the end from here on
            for ns, address in ((NS, HOST2_IP), (NS2, HOST_IP), (NS2, CLIENT_IP)):
                if not _reaches(ns, address):
                    pytest.skip(f"the hosts' namespaces do not reach each other over the bridge {BRIDGE} "
                                f"({ns} -> {address}; a firewall on bridged traffic?)")
            second.alias(ALIAS2)
            second.daemon(22)
        return self.second

    def close_connections(self) -> None:
        """End every shared connection (ControlMaster) the app opened."""
        for sock in self.runtime_dir.rglob("*"):
            if sock.is_socket():
                subprocess.run(["ssh", "-F", str(self.client_config), "-o", f"ControlPath={sock}", "-O", "exit",
                                "unused"], capture_output=True, timeout=30)


def ssh_clients(word: str, parent: int | None = None) -> list[int]:
    """The ``ssh`` processes started by ``parent`` (default: this process) whose command line
    holds ``word`` (e.g. ``" attach "``: a window's attachment to a run there)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            args = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and Path(args[0].decode()).name == "ssh" and any(word.encode() in a for a in args):
            found.append(int(stat.parent.name))
    return found


def _skip_unless_possible() -> None:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("a real SSH host needs Linux and root (a network namespace, a user, sshd)")
    for tool in ("ip", "nsenter", "ssh", "scp", "ssh-keygen", "useradd", "setpriv"):
        if not shutil.which(tool):
            pytest.skip(f"a real SSH host needs {tool} (openssh-client, iproute2, passwd, util-linux)")
    if not os.access(SSHD, os.X_OK):
        pytest.skip(f"a real SSH host needs {SSHD} (openssh-server)")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"the host's user needs {SYSTEM_PYTHON}")
    version = _run(SYSTEM_PYTHON, "-c", "import sys; print(*sys.version_info[:2])").stdout.split()
    if version != [str(sys.version_info[0]), str(sys.version_info[1])]:
        pytest.skip(f"{SYSTEM_PYTHON} is Python {'.'.join(version)}; the host's user runs this environment's "
                    f"packages, built for {sys.version_info[0]}.{sys.version_info[1]}")


def _remove_leftovers() -> None:
    """What a killed earlier session may have left (all named here; nothing else is touched)."""
    for ns, veth, user in ((NS, VETH, USER), (NS2, VETH2, USER2)):
        _run("ip", "link", "del", veth, check=False)
        _run("ip", "netns", "del", ns, check=False)
        if _run("id", "-u", user, check=False).returncode == 0:
            _end_user_processes(user)
            _run("userdel", user, check=False)
    _run("ip", "link", "del", BRIDGE, check=False)


def _end_user_processes(user: str = USER) -> None:
    """End the test user's processes (engines the tests started over ssh), each by its id, and
    wait until each is gone (userdel refuses a user with a process)."""
    for pid in map(int, _run("ps", "-u", user, "-o", "pid=", check=False).stdout.split()):
        try:
            handle = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            signal.pidfd_send_signal(handle, signal.SIGKILL)
            select.select([handle], [], [], 30)  # readable once the process has exited
        except ProcessLookupError:
            pass
        finally:
            os.close(handle)


def _network() -> None:
    """The LAN (a bridge holding this machine's address) and the first host on it."""
    try:
        _run("ip", "netns", "add", NS)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create a network namespace here ({exc.stderr.strip() or exc})")
    try:
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create a bridge here ({exc.stderr.strip() or exc})")
    _run("ip", "addr", "add", f"{CLIENT_IP}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    _site(NS, VETH, PEER, HOST_IP, made=True)


def _site(ns: str, veth: str, peer: str, address: str, made: bool = False) -> None:
    """A host's namespace (``made``: it exists) with ``address``, on a veth pair whose end here is
    a port of the bridge."""
    if not made:
        _run("ip", "netns", "add", ns)
    _run("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
    _run("ip", "link", "set", peer, "netns", ns)
    _run("ip", "link", "set", veth, "master", BRIDGE)
    _run("ip", "link", "set", veth, "up")
    _run("ip", "addr", "add", f"{address}/24", "dev", peer, ns=ns)
    _run("ip", "link", "set", peer, "up", ns=ns)
    _run("ip", "link", "set", "lo", "up", ns=ns)


def _reaches(ns: str, address: str) -> bool:
    """Whether a TCP connection from namespace ``ns`` to ``address`` gets an answer (a refusal
    is one: the packets went both ways)."""
    probe = (f"import socket\ntry:\n    socket.create_connection(({address!r}, 9), timeout=5)\n"
             f"except ConnectionRefusedError:\n    pass\n")
    return _run("ip", "netns", "exec", ns, sys.executable, "-c", probe, check=False).returncode == 0


def _user(home: Path, public_key: str, user: str = USER) -> None:
    _run("useradd", "--home-dir", str(home), "--create-home", "--shell", "/bin/sh", "--user-group", user)
    _run("usermod", "-p", "*", user)  # locked ('!') refuses even key login when PAM is off; '*' has no password
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700)
    (ssh_dir / "authorized_keys").write_text(public_key)
    (ssh_dir / "authorized_keys").chmod(0o600)
    # The app: a venv of the system Python that sees this environment's packages and the repository.
    _run(SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(home / "venv"))
    site = next((home / "venv" / "lib").glob("python3*/site-packages"))
    paths = dict.fromkeys([str(REPO), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "replica-studio-tests.pth").write_text("\n".join(paths) + "\n")
    (home / "bin").mkdir()
    for name, text in WRAPPERS.items():
        (home / "bin" / name).write_text(text)
        (home / "bin" / name).chmod(0o755)
    _run("chown", "-R", f"{user}:{user}", str(home))


def _keygen(path: Path) -> str:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path))
    return path.with_suffix(".pub").read_text()


@pytest.fixture(scope="session")
def ssh_host():
    """The running host (:class:`SshHost`); every test reaches it through its aliases."""
    with running_host() as host:
        yield host


@pytest.fixture
def second_ssh_host(ssh_host):
    """A second machine beside :func:`ssh_host` (:meth:`SshHost.second_host`), made once. The
    shared connections end with the test: later tests find only the connections they open."""
    yield ssh_host.second_host()
    ssh_host.close_connections()


@pytest.fixture
def on_host(ssh_host, monkeypatch, tmp_path):
    """For a window in this process: it reaches the test host (its ssh config and shared
    connections), and hosts.json names the host with a runs folder of this test's own there."""
    from gui_app.core.ssh_hosts import Host, add_host

    for key in ("REPLICA_STUDIO_SSH_CONFIG", "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(key, ssh_host.env(tmp_path)[key])
    host = Host(ALIAS, command=ssh_host.command, runs_dir=f"~/window-{tmp_path.name}")
    add_host(host)
    return host


@contextlib.contextmanager
def _only_session() -> Iterator[None]:
    """The names here are fixed (a killed session's leftovers are found by them), so two test
    sessions on one machine would remove each other's hosts: the second one skips instead."""
    with open(Path(tempfile.gettempdir()) / "rs-test-ssh.lock", "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            pytest.skip(f"another test session (pid {lock.read().strip() or '?'}) is using the SSH test hosts")
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        yield


@contextlib.contextmanager
def running_host() -> Iterator[SshHost]:
    """:func:`ssh_host` outside pytest's fixtures (a benchmark, a script)."""
    _skip_unless_possible()
    with _only_session(), _made_host() as host:
        yield host


@contextlib.contextmanager
def _made_host() -> Iterator[SshHost]:
    _remove_leftovers()
    base = Path(tempfile.mkdtemp(prefix="rs-ssh-"))  # short: control sockets live under it (a 108-byte limit)
    base.chmod(0o711)  # the user's home is inside; the client's and the daemon's folders are 0700
    made_privsep = not Path("/run/sshd").exists()
    host = None
    try:
        for name in ("client", "sshd", "run"):
            (base / name).mkdir(mode=0o700)
        _network()
        client_key = base / "client" / "id_ed25519"
        public_key = _keygen(client_key)
        host_key = base / "sshd" / "host_ed25519"
        host_public = _keygen(host_key).split()
        known_hosts = base / "client" / "known_hosts"
        known_hosts.write_text(f"{HOST_IP} {host_public[0]} {host_public[1]}\n")
        home = base / "home"
        _user(home, public_key)
        host = SshHost(base, home, host_key, command="~/bin/replica-studio", old_command="~/bin/old-replica-studio",
                       client_key=client_key, known_hosts=known_hosts)
        checked = host.as_user(str(home / "bin" / "replica-studio"), "--version")
        if checked.returncode != 0:
            pytest.skip(f"the host's user cannot run the app from this checkout: {checked.stderr.strip()[-300:]}")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # Debian's sshd: its privilege separation folder
        host.alias(ALIAS)
        host.daemon(22)
        yield host
    finally:
        if host is not None:
            host.close_connections()
            for daemon in host.daemons + (host.second.daemons if host.second else []):
                daemon.stop()
        _remove_leftovers()
        if made_privsep:
            shutil.rmtree("/run/sshd", ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
