"""The SSH hosts the engine runs on: a small versioned JSON file in the app's config folder.

A host is a destination the system ``ssh`` client accepts -- ``user@host`` or an alias of
``~/.ssh/config`` -- with an optional port, the remote command that starts the app there
(default ``replica-studio``; e.g. ``~/venv/bin/replica-studio`` or ``conda run -n tf
replica-studio``) and the remote runs folder (default: the remote app's own default). The
command line (``replica-studio hosts``) and the window share this file; Qt-free and
TensorFlow-free. How a host is reached is gui_app/core/ssh.py.

    {"schema_version": 1, "hosts": [{"name": "gpu1", "port": null, "command": "replica-studio",
                                      "runs_dir": null}]}

Writes are atomic. A file this version cannot read (damaged, or written by a newer release) is
an error naming the file, never silently replaced: the user's hosts are not lost.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from gui_app.core import atomic_io
from gui_app.identity import config_dir

HOSTS_FILE = "hosts.json"
SCHEMA_VERSION = 1
DEFAULT_COMMAND = "replica-studio"


class HostsFileError(ValueError):
    """hosts.json cannot be read or written (one line naming the file)."""


def _one_line(key: str, value: str) -> None:
    if not value.strip() or any(ch in value for ch in "\r\n\0"):
        raise ValueError(f"{key}: must be one non-empty line; got {value!r}")


@dataclass(frozen=True)
class Host:
    name: str  # the ssh destination: user@host or a ~/.ssh/config alias
    port: int | None = None  # None: ssh's own choice (its config, else 22)
    command: str = DEFAULT_COMMAND  # shell words that start the app there
    runs_dir: str | None = None  # on the host; None: the remote app's default

    def __post_init__(self) -> None:
        _one_line("host", self.name)
        if self.name.startswith("-") or any(ch.isspace() for ch in self.name):
            raise ValueError(f"host: an ssh destination (user@host or an alias) has no spaces and does not start "
                             f"with '-'; got {self.name!r}")
        if self.port is not None and (isinstance(self.port, bool) or not isinstance(self.port, int)
                                      or not 1 <= self.port <= 65535):
            raise ValueError(f"port: must be 1 to 65535; got {self.port!r}")
        _one_line("command", self.command)
        if self.runs_dir is not None:
            _one_line("runs_dir", self.runs_dir)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def hosts_path() -> Path:
    return config_dir() / HOSTS_FILE


def load_hosts(path: str | Path | None = None) -> dict[str, Host]:
    """The stored hosts by name, in the order they were added (none when there is no file)."""
    path = Path(path) if path else hosts_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise HostsFileError(f"{path}: cannot read the hosts ({getattr(exc, 'strerror', None) or exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), list):
        raise HostsFileError(f"{path}: not a hosts file (no 'hosts' list)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise HostsFileError(f"{path}: schema_version {version!r}; this release reads {SCHEMA_VERSION} "
                             "(a newer Replica Studio wrote it?)")
    hosts: dict[str, Host] = {}
    for entry in data["hosts"]:
        try:
            host = Host(**entry)
        except (TypeError, ValueError) as exc:
            raise HostsFileError(f"{path}: a bad host entry {entry!r}: {exc}") from None
        hosts[host.name] = host
    return hosts


def save_hosts(hosts: dict[str, Host], path: str | Path | None = None) -> None:
    path = Path(path) if path else hosts_path()
    text = json.dumps({"schema_version": SCHEMA_VERSION, "hosts": [h.to_dict() for h in hosts.values()]}, indent=2)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_io.write_text(path, text + "\n")
    except OSError as exc:
        raise HostsFileError(f"{path}: cannot save the hosts ({exc.strerror or exc})") from None


def add_host(host: Host, path: str | Path | None = None) -> bool:
    """Store ``host``, replacing an entry of the same name; True when it replaced one."""
    hosts = load_hosts(path)
    replaced = host.name in hosts
    hosts[host.name] = host
    save_hosts(hosts, path)
    return replaced


def remove_host(name: str, path: str | Path | None = None) -> Host:
    hosts = load_hosts(path)
    if name not in hosts:
        raise HostsFileError(f"{name}: no such host (replica-studio hosts list shows them)")
    host = hosts.pop(name)
    save_hosts(hosts, path)
    return host


def run_key(host_name: str | None, run_dir: str) -> str:
    """How the window names a run: on a host ``HOST:RUN_DIR`` (scp's notation); a run here
    (``host_name`` None) by its absolute path, so the two never collide."""
    return f"{host_name}:{run_dir}" if host_name else run_dir


def split_run_key(key: str) -> tuple[str | None, str]:
    """(host name, run directory there) of a :func:`run_key`; (None, path) of a run here."""
    if key.startswith("/"):
        return None, key
    host, _, run_dir = key.partition(":")
    return (host, run_dir) if host and run_dir.startswith("/") else (None, key)


def find_host(name: str, path: str | Path | None = None) -> Host:
    """The stored host of that name, else ``name`` as ssh takes it with the defaults: a host
    that ssh reaches needs no entry unless its command or runs folder differ."""
    return load_hosts(path).get(name) or Host(name)
