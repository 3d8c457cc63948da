"""A run on an SSH host (docs/hosts.md): its run directory is a path there, and everything about
it is an engine command run there over the system ``ssh`` (gui_app/core/ssh.py), whose own exit
255 says the connection failed. Which of the other backends it has is the host's to decide: the
engine there asks :func:`gui_app.core.backends.backend_for` itself. TensorFlow-free, Qt-free."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from gui_app.core.backends.base import RunBackend
from gui_app.core.hosts import Host
from gui_app.core.ssh import CONNECT_TIMEOUT_S, remote_argv


class SshBackend(RunBackend):
    kind: ClassVar[str] = "ssh"
    remote: ClassVar[bool] = True

    def __init__(self, run_dir: str | Path, host: Host) -> None:
        super().__init__(run_dir)
        self.host = host

    def __repr__(self) -> str:
        return f"SshBackend({str(self.run_dir)!r}, {self.host.name!r})"

    def command(self, engine_command: Callable[..., list[str]], args: Sequence[str],
                connect_timeout: int | None = None) -> list[str]:
        return remote_argv(self.host, list(args), connect_timeout or CONNECT_TIMEOUT_S)
