"""The system OpenSSH client as the engine's transport: one builder for every remote command,
shared connections, the app checked on the host, and ssh's failures told in one line.

The ``ssh`` program, not a Python SSH library: the user's keys, agent, ``~/.ssh/config``
(aliases, ``ProxyJump``) and ``known_hosts`` then work as they do in a terminal.

- ``BatchMode=yes``: never a prompt (a password, a new host key) that nobody would answer; the
  failure is told instead from ssh's stderr (:func:`explain_failure`; its wording:
  docs/architecture.md, "OpenSSH facts"), and a host key is never accepted silently.
- Connection sharing (``ControlMaster=auto``, ``ControlPersist``): the first call connects
  (0.37 s to the test host), later ones reuse it (7 ms on a quiet machine). The sockets live in
  a private 0700 folder (:func:`control_dir`), one per alias *and* per what verifies its host
  key (:func:`connection_name`): ssh's own ``%C`` names a connection by address, port and user
  only, so a second alias of the same address with another ``known_hosts`` would ride on the
  first alias's verified connection and its own (changed) host key would never be checked.
- ``$REPLICA_STUDIO_SSH_CONFIG`` names another client config file (``ssh -F``).

A remote command is ``HOST_COMMAND ARG...`` for the host's login shell (a POSIX shell: sh,
bash, zsh...). The host's command is the user's own shell words (``~/venv/bin/replica-studio``,
``conda run -n tf replica-studio``); every argument is quoted with :func:`shlex.quote` (but a
leading ``~/``, the home there, as the user meant when quoting it here). A local
file argument (a run configuration) is :data:`STDIN_FILE`: sent as the first line of stdin
(:func:`config_line`) and written to a temporary file there, so its content never enters a
shell string and stdin stays open for the control lines after it (``read`` takes one line of a
pipe and leaves the rest, POSIX).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from gui_app import __version__
from gui_app.core.ssh_hosts import Host
from gui_app.identity import APP_ID

SSH_CONFIG_ENV = "REPLICA_STUDIO_SSH_CONFIG"
PERSIST = "10m"  # a shared connection outlives its last use by this long
SSH_FAILED = 255  # ssh's own exit code for its failures; any other code is the remote command's
CONNECT_TIMEOUT_S = 20  # ssh gives up connecting after this long (exit 255)
# ... and when connecting again to follow a run (the window's re-attachment): Linux spaces a
# connect's SYNs 1, 2, 4, 8 s apart, so in a 20 s attempt the link's return waited up to 8 s for
# the next one (measured: 8-11 s from "link up" to attached after a 75 s outage); attempts of 5 s
# one after another keep them at most 2 s apart.
RECONNECT_TIMEOUT_S = 5
# A socket path must fit in sun_path: 104 bytes on macOS (108 on Linux). ssh names the socket
# %C (40 hex digits) and binds it first under a temporary name 17 characters longer.
_SOCKET_PATH_MAX = 104
_SOCKET_NAME = 40 + 17


class HostError(ValueError):
    """A host cannot run the command: one line saying what is wrong and what to do (exit 2).
    A line about the host itself (ssh's failure, the app there) starts with the host's name."""


SSH_MISSING = "the ssh program is missing: install OpenSSH's client (openssh-client)"


def is_host_failure(host_name: str, line: str) -> bool:
    """Whether ``line`` (a HostError's, or an engine command's ``--host`` failure) says the host
    itself cannot run commands -- every command sent there fails with the same line -- rather
    than what one command asked for (a dataset path there)."""
    return line.startswith(f"{host_name}: ") or line == SSH_MISSING


class StdinFile:
    def __repr__(self) -> str:
        return "STDIN_FILE"


STDIN_FILE = StdinFile()  # the argument that is the file sent as stdin's first line

# The remote shell's side of STDIN_FILE: the first line into a temporary file, removed at exit.
_READ_STDIN_FILE = ('rs_file=$(mktemp) && trap \'rm -f "$rs_file"\' EXIT && IFS= read -r rs_line && '
                    'printf \'%s\\n\' "$rs_line" >"$rs_file" && ')


def control_dir() -> Path:
    """A private (0700, ours) folder for the shared connections' sockets whose path is short
    enough: the user's runtime folder, else the cache folder, else one in the temp folder."""
    import platformdirs

    bases = [platformdirs.user_cache_dir(APP_ID), os.path.join(tempfile.gettempdir(), f"{APP_ID}-{os.getuid()}")]
    # On Linux and the BSDs the runtime folder is $XDG_RUNTIME_DIR; without it (root shells, cron,
    # containers, ssh sessions without systemd) platformdirs warns on stderr and names a folder
    # that may not exist: go on to the cache folder quietly instead.
    if sys.platform in ("darwin", "win32") or os.environ.get("XDG_RUNTIME_DIR"):
        bases.insert(0, platformdirs.user_runtime_dir(APP_ID))
    for base in bases:
        folder = Path(base) / "ssh"
        if len(str(folder)) + 1 + _SOCKET_NAME > _SOCKET_PATH_MAX:
            continue
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if folder.stat().st_uid != os.getuid() or folder.parent.stat().st_uid != os.getuid():
                continue  # someone else's folder (in a shared temp folder): never put our sockets there
            folder.chmod(0o700)
            return folder
        except OSError:
            continue
    raise HostError("no private folder with a short path for ssh's shared connections "
                    "(set XDG_RUNTIME_DIR to a short folder)")


def ssh_options(host: Host, connect_timeout: int = CONNECT_TIMEOUT_S,
                name_of: Callable[[Host], str | None] | None = None) -> list[str]:
    """The options ``ssh`` and ``scp`` share for ``host``. ``name_of``: the shared connection's
    name as it was asked before (:func:`connection_name`, which starts ``ssh -G`` and waits for it;
    the window asks it off its GUI thread, gui_app/core/backends/ssh.py)."""
    options = []
    if os.environ.get(SSH_CONFIG_ENV):
        options += ["-F", os.environ[SSH_CONFIG_ENV]]
    options += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout}", "-o", "ServerAliveInterval=15"]
    if host.port is not None:
        options += ["-o", f"Port={host.port}"]
    # OpenSSH for Windows cannot share connections
    name = (name_of or connection_name)(host) if os.name == "posix" else None
    if name is not None:
        options += ["-o", "ControlMaster=auto", "-o", f"ControlPersist={PERSIST}",
                    "-o", f"ControlPath={control_dir()}/{name}"]
    else:
        options += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
    return options


def config_words(host: Host) -> list[str]:
    """The options that decide where ``host`` is and how it is verified (no sharing options)."""
    words = ["-F", os.environ[SSH_CONFIG_ENV]] if os.environ.get(SSH_CONFIG_ENV) else []
    return words + (["-o", f"Port={host.port}"] if host.port is not None else [])


def _alias_prefix(host: Host) -> str:
    """The first part of every shared connection's name of this alias (see :func:`close_connection`)."""
    who = "\0".join([host.name, str(host.port), os.environ.get(SSH_CONFIG_ENV, "")])
    return hashlib.sha256(who.encode()).hexdigest()[:8]


def connection_name(host: Host) -> str | None:
    """The shared connection's socket name for ``host``: the alias and everything that verifies
    its host key -- ssh's effective configuration for it (``ssh -G``: address, port, user,
    ``HostKeyAlias``, the known_hosts files...) and those files' contents, hashed. Another alias,
    another configuration or a changed ``known_hosts`` is another connection, whose first use
    checks the host key again. None (no sharing) when ``ssh -G`` cannot tell; the command itself
    then says what is wrong."""
    try:
        done = subprocess.run(["ssh", "-G", *config_words(host), "--", host.name], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    digest = hashlib.sha256(f"{host.name}\0{done.stdout}".encode())
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("userknownhostsfile", "globalknownhostsfile"):
            for path in value.split():
                try:
                    digest.update(Path(path).expanduser().read_bytes())
                except OSError:
                    digest.update(b"\0missing\0")
    return f"{_alias_prefix(host)}-{digest.hexdigest()[:31]}"  # 40 characters, as ssh's %C


def ssh_argv(host: Host, shell_command: str, connect_timeout: int = CONNECT_TIMEOUT_S,
             name_of: Callable[[Host], str | None] | None = None) -> list[str]:
    return ["ssh", *ssh_options(host, connect_timeout, name_of), "--", host.name, shell_command]


def quote_there(path: str) -> str:
    """``path`` as one word for the host's shell; a leading ``~/`` stays the home there."""
    return _quote(path)


def _quote(arg: str | StdinFile) -> str:
    if isinstance(arg, StdinFile):
        return '"$rs_file"'
    if arg == "~" or arg.startswith("~/"):  # the home there: left for the remote shell to expand
        rest = arg[2:]
        return f"~/{shlex.quote(rest)}" if rest else arg
    return shlex.quote(arg)


# A command that must not outlive its connection (a cluster worker): it runs in the background
# while the shell reads stdin (kept as fd 3: an asynchronous command's stdin is /dev/null); the
# end of stdin (the client killed, the connection dropped) kills the process group there (sshd
# made the shell its leader), the command with it. Otherwise the command's exit code is the
# shell's (128+N when signal N killed it).
_ENDS_WITH_INPUT = ('{{ exec 3<&0; {command} </dev/null 3<&- & rs_pid=$!; '
                    '{{ while IFS= read -r rs_x; do :; done; kill -KILL 0; }} <&3 >/dev/null 2>&1 & rs_watch=$!; '
                    'wait "$rs_pid"; rs_code=$?; kill "$rs_watch" 2>/dev/null; exit "$rs_code"; }}')


def shell_command(host: Host, app_args: Sequence[str | StdinFile], ends_with_input: bool = False) -> str:
    """``HOST_COMMAND ARG...`` for the remote shell, every argument quoted (a leading ``~/`` is
    the home there); ``ends_with_input``: killed there when its stdin ends."""
    words = " ".join(_quote(arg) for arg in app_args)
    command = f"{host.command} {words}"
    if ends_with_input:
        command = _ENDS_WITH_INPUT.format(command=command)
    return _READ_STDIN_FILE + command if any(arg is STDIN_FILE for arg in app_args) else command


def remote_argv(host: Host, app_args: Sequence[str | StdinFile], connect_timeout: int = CONNECT_TIMEOUT_S,
                name_of: Callable[[Host], str | None] | None = None) -> list[str]:
    """The ssh command line that runs the app with ``app_args`` on ``host`` (its stdout, stderr
    and exit code are the app's; 255 is ssh's own failure). With :data:`STDIN_FILE` among the
    arguments, write :func:`config_line` to its stdin first. ``name_of``: see :func:`ssh_options`."""
    return ssh_argv(host, shell_command(host, app_args), connect_timeout, name_of)


def config_line(path: str | Path) -> bytes:
    """The run configuration at ``path`` as one line of JSON, for :data:`STDIN_FILE`. Read and
    parsed here, with the engine's own messages (ConfigError); its values are checked there,
    where the paths it names are."""
    from gui_app.core.config_json import parse_json, read_text

    data = parse_json(read_text(path), "config")
    return (json.dumps(data, separators=(",", ":")) + "\n").encode("utf-8")


def _ssh_words(host: Host) -> str:
    """How the user reaches ``host`` with ssh in a terminal (for advice)."""
    words = ["ssh"]
    if os.environ.get(SSH_CONFIG_ENV):
        words += ["-F", os.environ[SSH_CONFIG_ENV]]
    if host.port is not None:
        words += ["-p", str(host.port)]
    return shlex.join([*words, host.name])


def explain_failure(host: Host, stderr: str) -> str:
    """One line for an ssh failure (exit 255) from what ssh said on stderr (OpenSSH's wording)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("@@@")]
    text = "\n".join(lines)
    last = lines[-1] if lines else "no message"
    name = host.name
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in text or "has changed and you have requested strict" in text:
        offending = re.search(r"Offending \S+ key in (\S+:\d+)", text)
        where = offending.group(1) if offending else "known_hosts"
        remove = re.search(r"ssh-keygen -f .+ -R .+", text)
        return (f"{name}: the host key changed since it was recorded ({where}): someone may be intercepting the "
                f"connection; if the host was reinstalled, remove that line "
                f"({remove.group(0) if remove else 'ssh-keygen -R HOST'}) and accept the new key once with: "
                f"{_ssh_words(host)}")
    if "Host key verification failed" in text or "host key is known" in text:
        return (f"{name}: its host key is not known here and is never accepted silently; check it and accept "
                f"it once with: {_ssh_words(host)} (or add it with ssh-keyscan after comparing the fingerprint)")
    if "Permission denied" in text or "Too many authentication failures" in text:
        copy = shlex.join(["ssh-copy-id", *(["-p", str(host.port)] if host.port else []), name])
        return f"{name}: ssh asks for a password or a key it does not have ({last}); set up key login once with: {copy}"
    if "Could not resolve hostname" in text:
        return f"{name}: unknown host ({last}); check the name, or add it to ~/.ssh/config"
    return f"{name}: unreachable ({last}); is it on, and sshd running there?"


def _capture(host: Host, shell: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``shell`` there and capture its output. A new session: a Ctrl+C in the terminal must
    not reach the shared connection this may start (it serves the command that follows)."""
    try:
        return subprocess.run(ssh_argv(host, shell), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=timeout, start_new_session=True)
    except FileNotFoundError:
        raise HostError(SSH_MISSING) from None
    except subprocess.TimeoutExpired:
        raise HostError(f"{host.name}: no answer within {timeout:.0f} s") from None


def run_shell(host: Host, shell: str, timeout: float | None = 60) -> str:
    """``shell`` (a command of ours, quoted already) on ``host``: its stdout, or HostError."""
    done = _capture(host, shell, timeout)
    if done.returncode == SSH_FAILED:
        raise HostError(explain_failure(host, done.stderr))
    if done.returncode != 0:
        raise HostError(f"{host.name}: {shell!r} failed there: {_last_line(done.stderr, done.returncode)}")
    return done.stdout


def _last_line(stderr: str, code: int) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {code}"


def compatible(theirs: str, ours: str = __version__) -> bool:
    """Two releases work together when they share major.minor (the command line and the event
    protocol change only with the minor version)."""
    def release(version: str) -> tuple[str, ...]:
        return tuple(version.split(".")[:2])

    return release(theirs) == release(ours)


def check_app(host: Host) -> str:
    """Connect (or reuse the connection) and ask the app there for its version: the version, or
    HostError when ssh fails, the app is not there, or its release cannot work with ours."""
    run = f"{host.command} --version"
    done = _capture(host, run, timeout=120)  # a cold conda or network home can take a while
    if done.returncode == SSH_FAILED:
        raise HostError(explain_failure(host, done.stderr))
    found = done.stdout.strip().splitlines() or [""]
    match = re.fullmatch(r"replica-studio (\S+)", found[-1])
    if done.returncode != 0 or not match:
        said = _last_line(done.stderr, done.returncode) if done.returncode != 0 else f"it printed {found[-1][:200]!r}"
        raise HostError(f"{host.name}: the app is not there: {run!r} ran, and {said}; give the command that starts "
                        f"it there with: replica-studio hosts add {host.name} --command 'PATH/TO/replica-studio'")
    if len(found) > 1:  # a login script or an activation that prints: the events would not be JSON lines
        raise HostError(f"{host.name}: something there writes to stdout before the app does ({found[0][:80]!r}); "
                        "the app's output must be its own: check the login scripts there (~/.bashrc)")
    if not compatible(match.group(1)):
        raise HostError(f"{host.name}: replica-studio {match.group(1)} there ({run!r}) cannot work with "
                        f"{__version__} here (the same major.minor release is needed); install {__version__} there")
    return match.group(1)


def close_connection(host: Host) -> int:
    """End every shared connection of ``host`` (this alias's, made under any configuration or
    ``known_hosts`` it had); the next command connects anew and checks the host key again.
    Returns how many were ended."""
    try:
        folder = control_dir()
    except HostError:
        return 0
    ended = 0
    for socket_path in folder.glob(f"{_alias_prefix(host)}-*"):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            done = subprocess.run(["ssh", *config_words(host), "-o", f"ControlPath={socket_path}", "-O", "exit",
                                   "--", host.name], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            ended += done.returncode == 0
    return ended
