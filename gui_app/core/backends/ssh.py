"""A run on an SSH host (docs/hosts.md): its run directory is a path there, and everything about
it is an engine command run there over the system ``ssh`` (gui_app/core/ssh.py), whose own exit
255 says the connection failed. Which of the other backends it has is the host's to decide: the
engine there asks :func:`gui_app.core.backends.backend_for` itself. TensorFlow-free, Qt-free.

Building its ssh command line asks ``ssh -G`` for the shared connection's name (a process, and a
wait: gui_app.core.ssh.connection_name). :meth:`SshBackend.prepare` asks it where waiting is fine
(the window: a Background task, never its GUI thread); the command lines built after it reuse the
answer, so the window builds them without starting a process. Each prepare asks again (a changed
``known_hosts`` is another connection), as each command line did before."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from gui_app.core.backends.base import RunBackend
from gui_app.core.ssh import CONNECT_TIMEOUT_S, connection_name, remote_argv
from gui_app.core.ssh_hosts import Host


class SshBackend(RunBackend):
    kind: ClassVar[str] = "ssh"
    remote: ClassVar[bool] = True

    def __init__(self, run_dir: str | Path, host: Host) -> None:
        super().__init__(run_dir)
        self.host = host
        self._connection: tuple[str | None] | None = None  # ssh -G's answer, once prepared

    def prepare(self) -> None:
        self._connection = (connection_name(self.host),)

    @property
    def prepared(self) -> bool:
        return self._connection is not None

    def __repr__(self) -> str:
        return f"SshBackend({str(self.run_dir)!r}, {self.host.name!r})"

    def command(self, engine_command: Callable[..., list[str]], args: Sequence[str],
                connect_timeout: int | None = None) -> list[str]:
        known = self._connection
        return remote_argv(self.host, list(args), connect_timeout or CONNECT_TIMEOUT_S,
                           name_of=None if known is None else lambda _host: known[0])
