"""A user's shell for the command-line tests: ``replica-studio ARGS`` run as a subprocess with a
hosts file of its own and a fake ``ssh`` first on PATH (imported by the engine tests)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gui_app.identity import app_command, app_env

# A fake ssh: it records each call; the host "here" runs the command in this machine's shell as
# sshd would (its stdin a pipe that ends with ssh's own); any other host is unreachable (255).
_FAKE_SSH = """#!{python}
import os, subprocess, sys, threading
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(" ".join(args) + "\\n")
host, command = (args[args.index("--") + 1:] + ["", ""])[:2]
if "-O" in args or host != "here":
    sys.exit(255)
proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE)
def copy():
    try:
        while data := os.read(0, 4096):
            proc.stdin.write(data)
            proc.stdin.flush()
        proc.stdin.close()
    except OSError:
        pass
threading.Thread(target=copy, daemon=True).start()
os._exit(proc.wait())  # the copy may be blocked in a read: no interpreter teardown to wait for it
"""


class Shell:
    """``shell(*args)`` runs the command; ``ssh_log`` lists the fake ssh's calls (missing: none),
    ``env`` is the environment it runs with (a ``replica-studio`` of this checkout on PATH)."""

    def __init__(self, tmp_path: Path):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        self.ssh_log = tmp_path / "ssh.log"
        (bin_dir / "ssh").write_text(_FAKE_SSH.format(python=sys.executable, log=str(self.ssh_log)))
        (bin_dir / "replica-studio").write_text(f'#!/bin/sh\nexec {sys.executable} -m gui_app "$@"\n')
        for tool in bin_dir.iterdir():
            tool.chmod(0o755)
        self.env = app_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                            "REPLICA_STUDIO_CONFIG_DIR": str(tmp_path / "config")})

    def __call__(self, *args: str, given: str | None = None, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """``given``: its stdin is a pipe holding that text (else /dev/null); ``drop``: variables unset."""
        return subprocess.run(app_command(*args), input=given, stdin=None if given is not None else subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=120,
                              env={k: v for k, v in self.env.items() if k not in drop})

    def popen(self, *args: str, **kwargs) -> subprocess.Popen:
        """The command started, its stdout and stderr pipes (text); ``kwargs`` as Popen takes them."""
        return subprocess.Popen(app_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env, **kwargs)
